//! Leaf pages: sorted entries with prefix-compressed keys and restart points.
//!
//! Payload layout (all integers little-endian, varints canonical LEB128):
//!
//! | offset | size | meaning |
//! |---|---|---|
//! | 0 | 2 | entry count `n` |
//! | 2 | 2 | restart count `r` (0 iff `n` = 0) |
//! | 4 | 2·r | restart offsets into the payload, strictly increasing |
//! | 4+2r | … | entries |
//!
//! Entry: `shared varint | unshared varint | flags u8 | timestamp varint | [expire_at varint]
//! | key suffix | value`, value = `len varint + bytes` (inline) or
//! `len varint | first page u32 | page count varint` (overflow), or nothing at all for a
//! tombstone (flag bit 2: a delete that is remembered so an older write cannot resurrect the
//! key; never combined with the overflow bit). An entry at a restart point
//! has `shared = 0`, so a lookup binary-searches the restart keys and scans at most one
//! restart interval of entries: [`RESTART_INTERVAL`] (4) in the leaves written now, 16 in
//! leaves of tree-page version 1, which still read. The reader tells them apart by `r`:
//! ⌈n/4⌉ and ⌈n/16⌉ differ for every `n` > 4, and for `n` ≤ 4 the one restart point is
//! entry 0 either way. Four instead of sixteen: a warm get scans ~2 entries instead of ~8
//! (`get_probe`, 2 M keys: ~+13 % gets/s) for ~5 bytes more per restart point.

use super::{CodecError, Reader};
use bough_manifest::varint;

mod cursor;
mod encode;

pub use cursor::{LeafCursor, LeafMark};
pub use encode::{
    LEAF_OVERHEAD, Piece, encode, encode_meta, encode_pieces, encode_value_head, encoded_len,
    encoded_len_after, encoded_len_pieces, inline_bytes,
};

/// Entries between restart points in the leaves written now (tree pages version 2).
pub const RESTART_INTERVAL: usize = 4;

/// Entries between restart points in leaves of tree pages version 1 (read, never written).
pub const V1_RESTART_INTERVAL: usize = 16;

const FLAG_OVERFLOW: u8 = 1;
const FLAG_EXPIRY: u8 = 2;
const FLAG_TOMBSTONE: u8 = 4;
const KNOWN_FLAGS: u8 = FLAG_OVERFLOW | FLAG_EXPIRY | FLAG_TOMBSTONE;

pub use bough_manifest::PageId;

/// Where an entry's value lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueLoc {
    /// Stored in the leaf.
    Inline(Vec<u8>),
    /// Stored in `pages` overflow pages with consecutive logical ids from `first`.
    Overflow { len: u64, first: PageId, pages: u32 },
    /// No value: the key was deleted at the entry's timestamp. Kept (until its expiry
    /// purges it) so a write with an older timestamp still loses; never visible to reads.
    Tombstone,
}

impl ValueLoc {
    /// The value's length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            ValueLoc::Inline(v) => v.len() as u64,
            ValueLoc::Overflow { len, .. } => *len,
            ValueLoc::Tombstone => 0,
        }
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where an entry's value lives, borrowed from the page it was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueRef<'a> {
    /// Stored in the leaf.
    Inline(&'a [u8]),
    /// Stored in `pages` overflow pages with consecutive logical ids from `first`.
    Overflow { len: u64, first: PageId, pages: u32 },
    /// A delete remembered by its timestamp (see [`ValueLoc::Tombstone`]).
    Tombstone,
}

impl ValueRef<'_> {
    /// An owned copy.
    pub fn to_loc(self) -> ValueLoc {
        match self {
            ValueRef::Inline(v) => ValueLoc::Inline(v.to_vec()),
            ValueRef::Overflow { len, first, pages } => ValueLoc::Overflow { len, first, pages },
            ValueRef::Tombstone => ValueLoc::Tombstone,
        }
    }
}

/// One entry as the byte-level [`LeafCursor`] reads it: the key (`'k`) and everything
/// else (`'a`, the page) are borrowed, nothing is copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef<'k, 'a> {
    pub key: &'k [u8],
    /// User timestamp (last writer wins by it).
    pub timestamp: u64,
    /// Expiry time in ms since the epoch; 0 = never.
    pub expire_at: u64,
    pub value: ValueRef<'a>,
    meta: &'a [u8],
    value_bytes: &'a [u8],
}

impl<'a> EntryRef<'_, 'a> {
    /// Flags, timestamp and expiry as they are encoded in the page: they do not depend on
    /// where the entry sits, so a merge copies them as they are.
    pub fn meta_bytes(&self) -> &'a [u8] {
        self.meta
    }

    /// The value's encoding as it lies in the page (length and bytes, or overflow pages).
    pub fn value_bytes(&self) -> &'a [u8] {
        self.value_bytes
    }

    /// Whether the entry records a delete rather than a value.
    pub fn is_tombstone(&self) -> bool {
        matches!(self.value, ValueRef::Tombstone)
    }

    /// The visibility rule of [`Entry::is_live_at`].
    pub fn is_live_at(&self, now_ms: u64) -> bool {
        !self.is_tombstone() && (self.expire_at == 0 || self.expire_at > now_ms)
    }

    /// An owned copy (one allocation for the key, one for an inline value).
    pub fn to_entry(&self) -> Entry {
        Entry {
            key: self.key.to_vec(),
            timestamp: self.timestamp,
            expire_at: self.expire_at,
            value: self.value.to_loc(),
        }
    }
}

/// One key with its value and metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: Vec<u8>,
    /// User timestamp (last writer wins by it).
    pub timestamp: u64,
    /// Expiry time in ms since the epoch; 0 = never.
    pub expire_at: u64,
    pub value: ValueLoc,
}

impl Entry {
    /// Whether the entry is visible at `now_ms`: it has no expiry, or its expiry is still
    /// ahead. An entry expires *at* its expiry time. Reads, diffs and merges all use this
    /// rule, so an expired entry is absent everywhere, whether or not expiry has removed
    /// it yet.
    /// A tombstone is never live: it only remembers a delete.
    pub fn is_live_at(&self, now_ms: u64) -> bool {
        !self.is_tombstone() && (self.expire_at == 0 || self.expire_at > now_ms)
    }

    /// Whether the entry records a delete rather than a value.
    pub fn is_tombstone(&self) -> bool {
        matches!(self.value, ValueLoc::Tombstone)
    }

    /// The value as a borrowed [`ValueRef`].
    pub fn value_ref(&self) -> ValueRef<'_> {
        match &self.value {
            ValueLoc::Inline(v) => ValueRef::Inline(v),
            ValueLoc::Overflow { len, first, pages } => ValueRef::Overflow {
                len: *len,
                first: *first,
                pages: *pages,
            },
            ValueLoc::Tombstone => ValueRef::Tombstone,
        }
    }

    /// Upper bound of this entry's encoded size (without prefix compression).
    pub fn max_encoded_len(&self) -> usize {
        let value = match &self.value {
            ValueLoc::Inline(v) => varint::MAX_LEN + v.len(),
            ValueLoc::Overflow { .. } => varint::MAX_LEN + 4 + varint::MAX_LEN,
            ValueLoc::Tombstone => 0,
        };
        // shared + unshared + flags + ts + expiry + key + value + a restart slot.
        2 * varint::MAX_LEN + 1 + 2 * varint::MAX_LEN + self.key.len() + value + 2
    }
}

/// A validated view of a leaf payload.
#[derive(Debug, Clone, Copy)]
pub struct LeafView<'a> {
    payload: &'a [u8],
    count: usize,
    restarts: usize,
    /// Entries between restart points: [`RESTART_INTERVAL`] or [`V1_RESTART_INTERVAL`].
    interval: usize,
}

impl<'a> LeafView<'a> {
    /// Checks the header; entries are checked as they are read.
    pub fn new(payload: &'a [u8]) -> Result<Self, CodecError> {
        let mut r = Reader::new(payload);
        let count = r.u16()? as usize;
        let restarts = r.u16()? as usize;
        // The interval whose restart count `r` is (see the module docs).
        let interval = if restarts == count.div_ceil(RESTART_INTERVAL) {
            RESTART_INTERVAL
        } else if restarts == count.div_ceil(V1_RESTART_INTERVAL) {
            V1_RESTART_INTERVAL
        } else {
            return Err(CodecError("leaf restart count disagrees with entry count"));
        };
        r.bytes(2 * restarts)?;
        Ok(LeafView {
            payload,
            count,
            restarts,
            interval,
        })
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the leaf has no entries.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn restart_offset(&self, i: usize) -> Result<usize, CodecError> {
        let at = LEAF_OVERHEAD + 2 * i;
        let slot: [u8; 2] = self
            .payload
            .get(at..at + 2)
            .and_then(|s| s.try_into().ok())
            .ok_or(CodecError("leaf restart slot out of bounds"))?;
        let off = usize::from(u16::from_le_bytes(slot));
        if off < LEAF_OVERHEAD + 2 * self.restarts || off >= self.payload.len() {
            return Err(CodecError("leaf restart offset out of bounds"));
        }
        Ok(off)
    }

    /// Decodes every entry.
    pub fn entries(&self) -> Result<Vec<Entry>, CodecError> {
        let mut out = Vec::with_capacity(self.count);
        let mut at = self.cursor().mark();
        while let Some(e) = self.next_owned(&mut at)? {
            out.push(e);
        }
        Ok(out)
    }

    /// A reader at the entry `at` points to, and whether it is a restart entry (its
    /// restart offset checked); `None` at the end, once the leaf is checked to end there.
    fn entry_at(&self, at: &LeafMark) -> Result<Option<(Reader<'a>, bool)>, CodecError> {
        let i = at.next;
        if i >= self.count {
            if at.pos != self.payload.len() {
                return Err(CodecError("trailing bytes after leaf entries"));
            }
            return Ok(None);
        }
        let restart = i.is_multiple_of(self.interval);
        if restart && self.restart_offset(i / self.interval)? != at.pos {
            return Err(CodecError(
                "leaf restart offset does not point at its entry",
            ));
        }
        Ok(Some((Reader::at(self.payload, at.pos)?, restart)))
    }

    /// The entry at `at`, decoded into an owned [`Entry`] in one pass, and `at` moved past
    /// it; `None` at the end, once the leaf is checked to end where its last entry does.
    /// Checks what the byte-level cursor checks: the restart offset of a restart entry,
    /// the entry's fields, and that its key is above the one before.
    pub fn next_owned(&self, at: &mut LeafMark) -> Result<Option<Entry>, CodecError> {
        let Some((mut r, restart)) = self.entry_at(at)? else {
            return Ok(None);
        };
        let e = read_entry(&mut r, &at.key, restart)?;
        if at.taken && e.key <= at.key {
            return Err(CodecError("leaf keys out of order"));
        }
        at.key.clone_from(&e.key);
        at.pos = r.pos();
        at.next += 1;
        at.taken = true;
        Ok(Some(e))
    }

    /// [`next_owned`](Self::next_owned) without copying the entry out: the key is
    /// assembled in `at` (the one copy a prefix-compressed key needs) and the value is
    /// borrowed from the page. The same checks, in the same order.
    pub fn next_ref<'m>(
        &self,
        at: &'m mut LeafMark,
    ) -> Result<Option<EntryRef<'m, 'a>>, CodecError> {
        let Some((mut r, restart)) = self.entry_at(at)? else {
            return Ok(None);
        };
        let raw = parse_entry(&mut r, at.key.len(), restart)?;
        // Both keys start with the shared prefix: their order is their tails' order.
        let prev_tail = at
            .key
            .get(raw.shared..)
            .ok_or(CodecError("leaf key prefix too long"))?;
        if at.taken && !crate::key_order::less(prev_tail, raw.suffix) {
            return Err(CodecError("leaf keys out of order"));
        }
        at.key.truncate(raw.shared);
        at.key.extend_from_slice(raw.suffix);
        at.pos = r.pos();
        at.next += 1;
        at.taken = true;
        Ok(Some(EntryRef {
            key: &at.key,
            timestamp: raw.timestamp,
            expire_at: raw.expire_at,
            value: raw.value,
            meta: raw.meta,
            value_bytes: raw.value_bytes,
        }))
    }

    /// Finds the entry with the greatest key ≤ `key` (`exact` = it equals `key`).
    /// Reads one restart block, not the whole leaf, and copies only the entry it returns.
    pub fn seek_floor(&self, key: &[u8]) -> Result<Option<(Entry, bool)>, CodecError> {
        Ok(self.floor(key)?.and_then(|c| {
            let e = c.current()?;
            Some((e.to_entry(), e.key == key))
        }))
    }

    /// The entry with key `key`, borrowed from the page: the search allocates nothing per
    /// entry (at most one key buffer, when keys share prefixes).
    pub fn get<'k>(&self, key: &'k [u8]) -> Result<Option<EntryRef<'k, 'a>>, CodecError> {
        let Some(c) = self.seek(key, true)? else {
            return Ok(None);
        };
        Ok(c.current().filter(|e| e.key == key).map(|e| EntryRef {
            key,
            timestamp: e.timestamp,
            expire_at: e.expire_at,
            value: e.value,
            meta: e.meta,
            value_bytes: e.value_bytes,
        }))
    }

    /// A cursor over every entry, in order.
    pub fn cursor(&self) -> LeafCursor<'a> {
        LeafCursor::at(
            *self,
            Reader {
                bytes: self.payload,
                pos: LEAF_OVERHEAD + 2 * self.restarts,
            },
            0,
        )
    }

    /// A cursor on the entry with the greatest key ≤ `key` (`None`: every key is above it).
    /// Binary-searches the restart keys (borrowed from the page), then reads one restart
    /// block; the cursor can go on from there to the end of the leaf.
    pub fn floor(&self, key: &[u8]) -> Result<Option<LeafCursor<'a>>, CodecError> {
        self.seek(key, false)
    }

    /// [`Self::floor`]; with `exact`, stops at an entry equal to `key` without reading the
    /// next one (a get needs no more).
    fn seek(&self, key: &[u8], exact: bool) -> Result<Option<LeafCursor<'a>>, CodecError> {
        if self.count == 0 {
            return Ok(None);
        }
        let mut c = self.restart_cursor(|restart| !crate::key_order::less(key, restart))?;
        let end = (c.next + self.interval).min(self.count);
        while c.next < end {
            match c.step_cmp(Some(key))? {
                None => break,
                Some(std::cmp::Ordering::Equal) if exact => break,
                Some(_) => {}
            }
        }
        Ok(c.cur.is_some().then_some(c))
    }

    /// A cursor whose next [`LeafCursor::advance`] reads the first entry with key ≥ `key`
    /// (or finds the leaf's end when every key is below it). Binary-searches the restart
    /// keys, then reads within one restart block; a range's start costs no more.
    pub fn ceiling(&self, key: &[u8]) -> Result<LeafCursor<'a>, CodecError> {
        if self.count == 0 {
            return Ok(self.cursor());
        }
        let mut c = self.restart_cursor(|restart| crate::key_order::less(restart, key))?;
        let end = (c.next + self.interval).min(self.count);
        while c.next < end {
            if c.step_unless(Some(key), std::cmp::Ordering::is_ge)?
                .is_none()
            {
                break;
            }
        }
        Ok(c)
    }

    /// A cursor before the last restart entry whose key satisfies `before` (restart 0 when
    /// none does), for a leaf with entries; `before` must hold for a prefix of the
    /// restarts (they are in key order).
    fn restart_cursor(&self, before: impl Fn(&[u8]) -> bool) -> Result<LeafCursor<'a>, CodecError> {
        let (mut lo, mut hi) = (0usize, self.restarts);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            let mut r = Reader::at(self.payload, self.restart_offset(mid)?)?;
            if before(restart_key(&mut r)?) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok(LeafCursor::at(
            *self,
            Reader::at(self.payload, self.restart_offset(lo)?)?,
            lo * self.interval,
        ))
    }
}

/// The key of the restart entry `r` is at; the value is left unread (a binary search
/// needs only the key).
fn restart_key<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], CodecError> {
    Ok(parse_key_part(r, 0, true)?.suffix)
}

/// An entry's fields as they lie in the page.
struct RawEntry<'a> {
    shared: usize,
    suffix: &'a [u8],
    timestamp: u64,
    expire_at: u64,
    value: ValueRef<'a>,
    meta: &'a [u8],
    value_bytes: &'a [u8],
}

/// The fields of an entry before its value.
struct KeyPart<'a> {
    shared: usize,
    flags: u8,
    timestamp: u64,
    expire_at: u64,
    meta: &'a [u8],
    suffix: &'a [u8],
}

/// Parses an entry up to its value, with the checks of [`read_entry`] on those fields.
fn parse_key_part<'a>(
    r: &mut Reader<'a>,
    prev_len: usize,
    restart: bool,
) -> Result<KeyPart<'a>, CodecError> {
    let shared = r.len(prev_len)?;
    if restart && shared != 0 {
        return Err(CodecError("restart entry shares a prefix"));
    }
    let unshared = r.len(r.remaining())?;
    let meta_at = r.pos();
    let flags = r.u8()?;
    if flags & !KNOWN_FLAGS != 0 {
        return Err(CodecError("unknown leaf entry flags"));
    }
    if flags & FLAG_TOMBSTONE != 0 && flags & FLAG_OVERFLOW != 0 {
        return Err(CodecError("tombstone with an overflow value"));
    }
    let timestamp = r.varint()?;
    let expire_at = if flags & FLAG_EXPIRY != 0 {
        let e = r.varint()?;
        if e == 0 {
            return Err(CodecError("expiry flag with zero expiry"));
        }
        e
    } else {
        0
    };
    let meta = r.since(meta_at);
    let suffix = r.bytes(unshared)?;
    Ok(KeyPart {
        shared,
        flags,
        timestamp,
        expire_at,
        meta,
        suffix,
    })
}

/// Parses one entry in place with the checks of [`read_entry`]; allocates nothing.
fn parse_entry<'a>(
    r: &mut Reader<'a>,
    prev_len: usize,
    restart: bool,
) -> Result<RawEntry<'a>, CodecError> {
    let KeyPart {
        shared,
        flags,
        timestamp,
        expire_at,
        meta,
        suffix,
    } = parse_key_part(r, prev_len, restart)?;
    let value_at = r.pos();
    let value = if flags & FLAG_TOMBSTONE != 0 {
        ValueRef::Tombstone
    } else if flags & FLAG_OVERFLOW != 0 {
        let len = r.varint()?;
        let first = r.u32()?;
        let pages = r.varint()?;
        let pages =
            u32::try_from(pages).map_err(|_| CodecError("overflow page count too large"))?;
        if pages == 0 || first.checked_add(pages - 1).is_none() {
            return Err(CodecError("overflow page range invalid"));
        }
        ValueRef::Overflow { len, first, pages }
    } else {
        let len = r.len(r.remaining())?;
        ValueRef::Inline(r.bytes(len)?)
    };
    Ok(RawEntry {
        shared,
        suffix,
        timestamp,
        expire_at,
        value,
        meta,
        value_bytes: r.since(value_at),
    })
}

fn read_entry(r: &mut Reader<'_>, prev: &[u8], restart: bool) -> Result<Entry, CodecError> {
    let shared = r.len(prev.len())?;
    if restart && shared != 0 {
        return Err(CodecError("restart entry shares a prefix"));
    }
    let unshared = r.len(r.remaining())?;
    let flags = r.u8()?;
    if flags & !KNOWN_FLAGS != 0 {
        return Err(CodecError("unknown leaf entry flags"));
    }
    if flags & FLAG_TOMBSTONE != 0 && flags & FLAG_OVERFLOW != 0 {
        return Err(CodecError("tombstone with an overflow value"));
    }
    let timestamp = r.varint()?;
    let expire_at = if flags & FLAG_EXPIRY != 0 {
        let e = r.varint()?;
        if e == 0 {
            return Err(CodecError("expiry flag with zero expiry"));
        }
        e
    } else {
        0
    };
    let mut key = Vec::with_capacity(shared + unshared);
    key.extend_from_slice(
        prev.get(..shared)
            .ok_or(CodecError("leaf key prefix too long"))?,
    );
    key.extend_from_slice(r.bytes(unshared)?);
    let value = if flags & FLAG_TOMBSTONE != 0 {
        ValueLoc::Tombstone
    } else if flags & FLAG_OVERFLOW != 0 {
        let len = r.varint()?;
        let first = r.u32()?;
        let pages = r.varint()?;
        let pages =
            u32::try_from(pages).map_err(|_| CodecError("overflow page count too large"))?;
        if pages == 0 || first.checked_add(pages - 1).is_none() {
            return Err(CodecError("overflow page range invalid"));
        }
        ValueLoc::Overflow { len, first, pages }
    } else {
        let len = r.len(r.remaining())?;
        ValueLoc::Inline(r.bytes(len)?.to_vec())
    };
    Ok(Entry {
        key,
        timestamp,
        expire_at,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(k: &str, v: &str) -> Entry {
        Entry {
            key: k.as_bytes().to_vec(),
            timestamp: 7,
            expire_at: 0,
            value: ValueLoc::Inline(v.as_bytes().to_vec()),
        }
    }

    #[test]
    fn round_trip_and_seek() {
        let mut entries: Vec<Entry> = (0..100)
            .map(|i| entry(&format!("key{i:04}"), &format!("v{i}")))
            .collect();
        entries[3].expire_at = 99;
        entries[5].value = ValueLoc::Overflow {
            len: 100_000,
            first: 9,
            pages: 25,
        };
        entries[6].value = ValueLoc::Tombstone;
        entries[7].value = ValueLoc::Tombstone;
        entries[7].expire_at = 1_700_000_000_000;
        let payload = encode(&entries);
        let view = LeafView::new(&payload).unwrap();
        assert_eq!(view.entries().unwrap(), entries);
        for (i, e) in entries.iter().enumerate() {
            let (found, exact) = view.seek_floor(&e.key).unwrap().unwrap();
            assert!(exact);
            assert_eq!(&found, e, "entry {i}");
        }
        assert!(view.seek_floor(b"a").unwrap().is_none());
        let (f, exact) = view.seek_floor(b"key0050x").unwrap().unwrap();
        assert!(!exact);
        assert_eq!(f.key, b"key0050");
        let (f, _) = view.seek_floor(b"zzz").unwrap().unwrap();
        assert_eq!(f.key, b"key0099");
    }

    #[test]
    fn encoded_len_is_exact() {
        let mut entries: Vec<Entry> = (0..100u64)
            .map(|i| {
                let mut e = entry(&format!("key{:04}", i * 37 % 1000), &"v".repeat(i as usize));
                e.timestamp = i << (i % 60);
                e
            })
            .collect();
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        entries.dedup_by(|a, b| a.key == b.key);
        entries[3].expire_at = u64::MAX;
        // The highest first page a 25-page value can have (a decodable leaf: the encoder's
        // round trip in debug builds refuses a range past the id space).
        entries[5].value = ValueLoc::Overflow {
            len: 100_000,
            first: u32::MAX - 24,
            pages: 25,
        };
        // Tombstones: with and without expiry, at and after restart points.
        for i in [0, 6, 16, 17, 30] {
            entries[i].value = ValueLoc::Tombstone;
        }
        entries[6].expire_at = u64::MAX;
        entries[17].expire_at = 1;
        for n in 0..entries.len() {
            assert_eq!(
                encoded_len(&entries[..n]),
                encode(&entries[..n]).len(),
                "{n}"
            );
        }
    }

    #[test]
    fn tombstones_are_not_live_and_bad_flag_combinations_are_corruption() {
        let mut t = entry("k", "");
        t.value = ValueLoc::Tombstone;
        assert!(!t.is_live_at(0));
        let payload = encode(std::slice::from_ref(&t));
        // n, r, one restart slot, then shared, unshared, flags.
        let flags_at = LEAF_OVERHEAD + 2 + 2;
        assert_eq!(payload[flags_at], FLAG_TOMBSTONE);
        let mut bad = payload.clone();
        bad[flags_at] |= FLAG_OVERFLOW;
        let err = LeafView::new(&bad).unwrap().entries().unwrap_err();
        assert_eq!(err, CodecError("tombstone with an overflow value"));
        let err = LeafView::new(&bad).unwrap().seek_floor(b"k").unwrap_err();
        assert_eq!(err, CodecError("tombstone with an overflow value"));
        // Value bytes after a tombstone are trailing garbage, not a value.
        let mut extra = payload.clone();
        extra.extend_from_slice(&[3, b'a', b'b', b'c']);
        assert!(LeafView::new(&extra).unwrap().entries().is_err());
    }

    #[test]
    fn empty_leaf() {
        let payload = encode(&[]);
        let view = LeafView::new(&payload).unwrap();
        assert!(view.is_empty());
        assert!(view.entries().unwrap().is_empty());
        assert!(view.seek_floor(b"x").unwrap().is_none());
    }

    #[test]
    fn hostile_bytes_never_panic() {
        // Keys sorted, as encode requires (its debug round trip checks).
        let mut entries: Vec<Entry> = (0..40).map(|i| entry(&format!("k{i:02}"), "val")).collect();
        for e in entries.iter_mut().step_by(3) {
            e.value = ValueLoc::Tombstone;
        }
        let payload = encode(&entries);
        for i in 0..payload.len() {
            for bit in 0..8 {
                let mut p = payload.clone();
                p[i] ^= 1 << bit;
                if let Ok(v) = LeafView::new(&p) {
                    let _ = v.entries();
                    let _ = v.seek_floor(b"k2");
                }
            }
            let _ = LeafView::new(&payload[..i]).map(|v| v.entries());
        }
    }

    /// The walk from the first key ≥ `from` (every entry for `None`) through a
    /// [`LeafMark`], one owned entry at a time, as a range's front reads a leaf.
    fn resumed_entries(view: &LeafView<'_>, from: Option<&[u8]>) -> Result<Vec<Entry>, CodecError> {
        let start = match from {
            Some(k) => view.ceiling(k)?,
            None => view.cursor(),
        };
        let mut at = start.mark();
        let mut out = Vec::new();
        while let Some(e) = view.next_owned(&mut at)? {
            out.push(e);
        }
        Ok(out)
    }

    /// The walk through [`LeafView::next_ref`] (borrowed entries), copied out to compare.
    fn borrowed_entries(view: &LeafView<'_>) -> Result<Vec<Entry>, CodecError> {
        let mut at = view.cursor().mark();
        let mut out = Vec::new();
        while let Some(e) = view.next_ref(&mut at)? {
            out.push(e.to_entry());
        }
        Ok(out)
    }

    /// The walk of the byte-level cursor, as owned entries.
    fn cursor_entries(view: &LeafView<'_>) -> Result<Vec<Entry>, CodecError> {
        let mut c = view.cursor();
        let mut out = Vec::new();
        while c.advance()? {
            out.push(
                c.current()
                    .map(|e| e.to_entry())
                    .ok_or(CodecError("no entry"))?,
            );
        }
        Ok(out)
    }

    /// The lookup this module had before the cursor (owned entries per step), kept as the
    /// reference the cursor must agree with, errors included.
    fn reference_seek_floor(
        view: &LeafView<'_>,
        key: &[u8],
    ) -> Result<Option<(Entry, bool)>, CodecError> {
        if view.count == 0 {
            return Ok(None);
        }
        let (mut lo, mut hi) = (0usize, view.restarts);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            let mut r = Reader::at(view.payload, view.restart_offset(mid)?)?;
            let e = read_entry(&mut r, &[], true)?;
            if e.key.as_slice() <= key {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let mut r = Reader::at(view.payload, view.restart_offset(lo)?)?;
        let first = lo * view.interval;
        let end = (first + view.interval).min(view.count);
        let mut best: Option<Entry> = None;
        let mut prev: Vec<u8> = Vec::new();
        for i in first..end {
            let e = read_entry(&mut r, &prev, i == first)?;
            if i > first && e.key <= prev {
                return Err(CodecError("leaf keys out of order"));
            }
            if e.key.as_slice() > key {
                break;
            }
            prev.clone_from(&e.key);
            best = Some(e);
        }
        Ok(best.map(|e| {
            let exact = e.key == key;
            (e, exact)
        }))
    }

    /// Every kind of entry: shared prefixes of every length, empty and long values,
    /// overflow values, tombstones, expiries, timestamps of every varint length.
    fn arb_entries() -> impl proptest::strategy::Strategy<Value = Vec<Entry>> {
        use proptest::prelude::*;
        let key = prop::collection::vec(prop::sample::select(vec![b'a', b'b', 0, 0xff]), 1..12);
        let value = prop_oneof![
            6 => prop::collection::vec(any::<u8>(), 0..40).prop_map(ValueLoc::Inline),
            1 => (any::<u64>(), 0..u32::MAX / 2, 1..1000u32)
                .prop_map(|(len, first, pages)| ValueLoc::Overflow { len, first, pages }),
            2 => Just(ValueLoc::Tombstone),
        ];
        let expiry = prop_oneof![3 => Just(0u64), 1 => 1..u64::MAX];
        let entry =
            (key, any::<u64>(), expiry, value).prop_map(|(key, ts, expire_at, value)| Entry {
                key,
                timestamp: ts >> (ts % 64),
                expire_at,
                value,
            });
        prop::collection::vec(entry, 0..80).prop_map(|mut v| {
            v.sort_by(|a, b| a.key.cmp(&b.key));
            v.dedup_by(|a, b| a.key == b.key);
            v
        })
    }

    /// The pieces a merge makes of a leaf's entries: keys copied, everything else borrowed.
    fn copied_pieces(view: &LeafView<'_>) -> Vec<u8> {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut parts = Vec::new();
        let mut c = view.cursor();
        while c.advance().unwrap() {
            let e = c.current().unwrap();
            keys.push(e.key.to_vec());
            parts.push((e.meta_bytes(), e.value_bytes()));
        }
        let pieces: Vec<Piece<'_>> = keys
            .iter()
            .zip(&parts)
            .map(|(k, (meta, value))| Piece {
                key: k,
                meta,
                value,
                value_tail: &[],
            })
            .collect();
        assert_eq!(encoded_len_pieces(&pieces), view.payload.len());
        encode_pieces(&pieces)
    }

    proptest::proptest! {
        #[test]
        fn cursor_agrees_with_the_owned_decoder(
            entries in arb_entries(),
            probes in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(vec![b'a', b'b', 0, 0xff]), 0..13),
                0..40,
            ),
        ) {
            let payload = encode(&entries);
            proptest::prop_assert_eq!(payload.len(), encoded_len(&entries));
            let view = LeafView::new(&payload).unwrap();
            proptest::prop_assert_eq!(&cursor_entries(&view).unwrap(), &entries);
            proptest::prop_assert_eq!(&view.entries().unwrap(), &entries);
            proptest::prop_assert_eq!(&resumed_entries(&view, None).unwrap(), &entries);
            proptest::prop_assert_eq!(&borrowed_entries(&view).unwrap(), &entries);
            // Copying the entries as byte ranges rebuilds the page byte for byte.
            proptest::prop_assert_eq!(&copied_pieces(&view), &payload);
            for probe in probes.iter().chain(entries.iter().map(|e| &e.key)) {
                let want = reference_seek_floor(&view, probe);
                proptest::prop_assert_eq!(&view.seek_floor(probe), &want);
                let floor = entries.iter().rev().find(|e| e.key <= *probe);
                proptest::prop_assert_eq!(
                    want.unwrap().map(|(e, _)| e),
                    floor.cloned()
                );
                let got = view.get(probe).unwrap().map(|e| e.to_entry());
                proptest::prop_assert_eq!(got, entries.iter().find(|e| e.key == *probe).cloned());
                // A resumed walk from the probe's ceiling reads exactly the entries from it.
                let from = entries.iter().position(|e| e.key >= *probe).unwrap_or(entries.len());
                proptest::prop_assert_eq!(&resumed_entries(&view, Some(probe)).unwrap()[..], &entries[from..]);
                // A floor cursor goes on to the end of the leaf.
                if let Some(mut c) = view.floor(probe).unwrap() {
                    let at = entries.iter().position(|e| e.key.as_slice() == c.key()).unwrap();
                    let mut rest = vec![c.current().unwrap().to_entry()];
                    while c.advance().unwrap() {
                        rest.push(c.current().unwrap().to_entry());
                    }
                    proptest::prop_assert_eq!(&rest[..], &entries[at..]);
                }
            }
        }
    }

    #[test]
    fn pieces_of_new_entries_encode_like_entries() {
        let mut entries: Vec<Entry> = (0..50)
            .map(|i| entry(&format!("key{i:04}"), &"x".repeat(i)))
            .collect();
        entries[4].value = ValueLoc::Tombstone;
        entries[9].expire_at = 12345;
        entries[20].value = ValueLoc::Overflow {
            len: 1 << 40,
            first: 77,
            pages: 3,
        };
        let mut scratch: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for e in &entries {
            let (mut meta, mut head) = (Vec::new(), Vec::new());
            encode_meta(&mut meta, e.timestamp, e.expire_at, e.value_ref());
            encode_value_head(&mut head, e.value_ref());
            scratch.push((meta, head));
        }
        let pieces: Vec<Piece<'_>> = entries
            .iter()
            .zip(&scratch)
            .map(|(e, (meta, head))| Piece {
                key: &e.key,
                meta,
                value: head,
                value_tail: inline_bytes(e.value_ref()),
            })
            .collect();
        for n in 0..pieces.len() {
            assert_eq!(encode_pieces(&pieces[..n]), encode(&entries[..n]), "{n}");
            assert_eq!(encoded_len_pieces(&pieces[..n]), encoded_len(&entries[..n]));
        }
    }

    /// Flipped bits and cut pages: the cursor never panics and reaches the verdict of the
    /// owned decoder (the same entries, or the same error), and lookups give the reference
    /// lookup's answer wherever it has one.
    #[test]
    fn hostile_bytes_cursor_agrees_with_the_owned_decoder() {
        let seed = 0x1eaf_c0de_u64;
        eprintln!("seed {seed:#x}");
        let mut x = seed;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut entries: Vec<Entry> = (0..40)
            .map(|i| entry(&format!("k{:03}", i * 7), &"v".repeat(i % 5)))
            .collect();
        for e in entries.iter_mut().step_by(3) {
            e.value = ValueLoc::Tombstone;
        }
        entries[5].expire_at = 1 << 50;
        entries[8].value = ValueLoc::Overflow {
            len: 9000,
            first: 4,
            pages: 3,
        };
        let payload = encode(&entries);
        let probes: Vec<&[u8]> = vec![b"", b"k", b"k000", b"k07", b"k140", b"k2", b"zz"];
        let check = |p: &[u8]| {
            let Ok(view) = LeafView::new(p) else {
                return;
            };
            let all = view.entries();
            assert_eq!(cursor_entries(&view), all, "{p:?}");
            assert_eq!(resumed_entries(&view, None), all, "{p:?}");
            assert_eq!(borrowed_entries(&view), all, "{p:?}");
            for probe in &probes {
                // Where the page decodes whole, a walk from a ceiling reads its tail; else
                // it reads less and may answer before the damage, but must not panic.
                let from = resumed_entries(&view, Some(probe));
                if let Ok(all) = &all {
                    let tail: Vec<Entry> = all
                        .iter()
                        .filter(|e| e.key.as_slice() >= *probe)
                        .cloned()
                        .collect();
                    assert_eq!(from, Ok(tail), "{p:?} {probe:?}");
                }
                // The lookups read less than the reference (the keys alone of the restart
                // entries they probe; a get stops at its match), so on a damaged page they
                // may answer where it fails; where it answers, they give its answer.
                let Ok(want) = reference_seek_floor(&view, probe) else {
                    let _ = (view.seek_floor(probe), view.get(probe));
                    continue;
                };
                assert_eq!(view.seek_floor(probe), Ok(want.clone()), "{p:?} {probe:?}");
                let exact = want.filter(|(_, x)| *x).map(|(e, _)| e);
                let got = view.get(probe).map(|e| e.map(|e| e.to_entry()));
                assert_eq!(got, Ok(exact), "{p:?} {probe:?}");
            }
        };
        for i in 0..payload.len() {
            for bit in 0..8 {
                let mut p = payload.clone();
                p[i] ^= 1 << bit;
                check(&p);
            }
            check(&payload[..i]);
        }
        for _ in 0..5_000 {
            let mut p = payload.clone();
            for _ in 0..1 + rnd() % 4 {
                let at = (rnd() % p.len() as u64) as usize;
                p[at] = rnd() as u8;
            }
            check(&p);
            let garbage: Vec<u8> = (0..rnd() % 300).map(|_| rnd() as u8).collect();
            check(&garbage);
        }
    }
}
