//! Encoding leaves: entry sizes, whole leaves from entries, and leaves from byte-range pieces
//! of other leaves (the merge's path, which copies kept entries without decoding them).

use super::*;

/// Bytes of a leaf payload that are not entries' own (count + restart count).
pub const LEAF_OVERHEAD: usize = 4;

/// The exact number of bytes `e` adds to a leaf payload when it follows `prev` — `None`
/// when it starts a restart run, which also costs a 2-byte restart slot. Mirrors
/// [`encode`], so page splits can fill leaves to the byte instead of by a worst case.
pub fn encoded_len_after(prev: Option<&[u8]>, e: &Entry) -> usize {
    let (shared, restart_slot) = match prev {
        Some(p) => (common_prefix(p, &e.key), 0),
        None => (0, 2),
    };
    let unshared = e.key.len() - shared;
    let expiry = if e.expire_at != 0 {
        varint::encoded_len(e.expire_at)
    } else {
        0
    };
    let value = match &e.value {
        ValueLoc::Inline(v) => varint::encoded_len(v.len() as u64) + v.len(),
        ValueLoc::Overflow { len, first, pages } => {
            varint::encoded_len(*len)
                + std::mem::size_of_val(first)
                + varint::encoded_len(u64::from(*pages))
        }
        ValueLoc::Tombstone => 0,
    };
    restart_slot
        + varint::encoded_len(shared as u64)
        + varint::encoded_len(unshared as u64)
        + 1
        + varint::encoded_len(e.timestamp)
        + expiry
        + unshared
        + value
}

/// The exact payload size [`encode`] produces for `entries`.
pub fn encoded_len(entries: &[Entry]) -> usize {
    let mut size = LEAF_OVERHEAD;
    let mut prev: Option<&[u8]> = None;
    for (i, e) in entries.iter().enumerate() {
        let after = if i % RESTART_INTERVAL == 0 {
            None
        } else {
            prev
        };
        size += encoded_len_after(after, e);
        prev = Some(&e.key);
    }
    size
}

/// Encodes sorted, distinct entries into a leaf payload, in one buffer of the exact size.
pub fn encode(entries: &[Entry]) -> Vec<u8> {
    let restarts = entries.len().div_ceil(RESTART_INTERVAL);
    let mut out = Vec::with_capacity(encoded_len(entries));
    put_header(&mut out, entries.len(), restarts);
    let mut meta = Vec::with_capacity(1 + 2 * varint::MAX_LEN);
    let mut head = Vec::with_capacity(varint::MAX_LEN + 4 + varint::MAX_LEN);
    let mut prev: &[u8] = &[];
    for (i, e) in entries.iter().enumerate() {
        let value = e.value_ref();
        meta.clear();
        encode_meta(&mut meta, e.timestamp, e.expire_at, value);
        head.clear();
        encode_value_head(&mut head, value);
        let piece = Piece {
            key: &e.key,
            meta: &meta,
            value: &head,
            value_tail: inline_bytes(value),
        };
        put_piece(&mut out, i, prev, &piece);
        prev = &e.key;
    }
    // Debug builds prove every leaf they write decodes to the entries given (which also
    // holds the caller to sorted, distinct keys).
    debug_assert!(
        super::LeafView::new(&out)
            .and_then(|v| v.entries())
            .is_ok_and(|d| d == entries),
        "a leaf does not decode to its entries"
    );
    out
}

/// Writes the count, the restart count and zeroed restart slots ([`put_piece`] fills them).
pub(crate) fn put_header(out: &mut Vec<u8>, count: usize, restarts: usize) {
    out.extend_from_slice(&(count as u16).to_le_bytes());
    out.extend_from_slice(&(restarts as u16).to_le_bytes());
    out.resize(out.len() + 2 * restarts, 0);
}

/// Appends entry `i` of a leaf (its predecessor's key is `prev`), recording its offset in
/// its restart slot when it starts a restart run.
pub(crate) fn put_piece(out: &mut Vec<u8>, i: usize, prev: &[u8], p: &Piece<'_>) {
    let shared = if i.is_multiple_of(RESTART_INTERVAL) {
        let slot = LEAF_OVERHEAD + 2 * (i / RESTART_INTERVAL);
        let at = (out.len() as u16).to_le_bytes();
        out[slot..slot + 2].copy_from_slice(&at);
        0
    } else {
        common_prefix(prev, p.key)
    };
    varint::put(out, shared as u64);
    varint::put(out, (p.key.len() - shared) as u64);
    out.extend_from_slice(p.meta);
    out.extend_from_slice(&p.key[shared..]);
    out.extend_from_slice(p.value);
    out.extend_from_slice(p.value_tail);
}

/// Appends an entry's position-independent metadata: flags, timestamp, expiry.
pub fn encode_meta(out: &mut Vec<u8>, timestamp: u64, expire_at: u64, value: ValueRef<'_>) {
    let mut flags = 0;
    match value {
        ValueRef::Overflow { .. } => flags |= FLAG_OVERFLOW,
        ValueRef::Tombstone => flags |= FLAG_TOMBSTONE,
        ValueRef::Inline(_) => {}
    }
    if expire_at != 0 {
        flags |= FLAG_EXPIRY;
    }
    out.push(flags);
    varint::put(out, timestamp);
    if expire_at != 0 {
        varint::put(out, expire_at);
    }
}

/// Appends the head of a value's encoding: an inline value's length (its bytes follow,
/// see [`inline_bytes`]), an overflow value's length and pages, nothing for a tombstone.
pub fn encode_value_head(out: &mut Vec<u8>, value: ValueRef<'_>) {
    match value {
        ValueRef::Inline(v) => varint::put(out, v.len() as u64),
        ValueRef::Overflow { len, first, pages } => {
            varint::put(out, len);
            out.extend_from_slice(&first.to_le_bytes());
            varint::put(out, u64::from(pages));
        }
        ValueRef::Tombstone => {}
    }
}

/// The bytes of an inline value (empty for the other kinds).
pub fn inline_bytes(value: ValueRef<'_>) -> &[u8] {
    match value {
        ValueRef::Inline(v) => v,
        _ => &[],
    }
}

/// One entry to write into a leaf, as byte pieces: an entry kept from an older page is
/// copied as two byte ranges of that page (`meta` and `value`) plus its key, never decoded
/// into an owned [`Entry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece<'a> {
    /// The whole key.
    pub key: &'a [u8],
    /// Flags, timestamp and expiry as encoded ([`encode_meta`]).
    pub meta: &'a [u8],
    /// The value's encoding, or its head ([`encode_value_head`]).
    pub value: &'a [u8],
    /// Bytes that follow `value` (an inline value's bytes when `value` is only its head).
    pub value_tail: &'a [u8],
}

impl Piece<'_> {
    /// The exact bytes this entry adds to a leaf after `prev` — `None` when it starts a
    /// restart run (which also costs a 2-byte restart slot). Mirrors [`encode_pieces`].
    pub fn len_after(&self, prev: Option<&[u8]>) -> usize {
        let (shared, restart_slot) = match prev {
            Some(p) => (common_prefix(p, self.key), 0),
            None => (0, 2),
        };
        let unshared = self.key.len() - shared;
        restart_slot
            + varint::encoded_len(shared as u64)
            + varint::encoded_len(unshared as u64)
            + self.meta.len()
            + unshared
            + self.value.len()
            + self.value_tail.len()
    }
}

/// The exact payload size [`encode_pieces`] produces.
pub fn encoded_len_pieces(pieces: &[Piece<'_>]) -> usize {
    let mut size = LEAF_OVERHEAD;
    let mut prev: Option<&[u8]> = None;
    for (i, p) in pieces.iter().enumerate() {
        let after = prev.filter(|_| !i.is_multiple_of(RESTART_INTERVAL));
        size += p.len_after(after);
        prev = Some(p.key);
    }
    size
}

/// Encodes sorted, distinct pieces into a leaf payload — byte for byte what [`encode`]
/// makes of the same entries — in one buffer of the exact size.
pub fn encode_pieces(pieces: &[Piece<'_>]) -> Vec<u8> {
    let restarts = pieces.len().div_ceil(RESTART_INTERVAL);
    let mut out = Vec::with_capacity(encoded_len_pieces(pieces));
    put_header(&mut out, pieces.len(), restarts);
    let mut prev: &[u8] = &[];
    for (i, p) in pieces.iter().enumerate() {
        put_piece(&mut out, i, prev, p);
        prev = p.key;
    }
    out
}

pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
