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
//! has `shared = 0`, so a lookup binary-searches the restart keys and scans at most
//! [`RESTART_INTERVAL`] entries.

use super::{CodecError, Reader};
use bough_manifest::varint;

/// Entries between restart points.
pub const RESTART_INTERVAL: usize = 16;

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

/// Encodes sorted, distinct entries into a leaf payload.
pub fn encode(entries: &[Entry]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut restarts: Vec<usize> = Vec::new();
    let mut prev: &[u8] = &[];
    for (i, e) in entries.iter().enumerate() {
        let shared = if i % RESTART_INTERVAL == 0 {
            restarts.push(body.len());
            0
        } else {
            common_prefix(prev, &e.key)
        };
        varint::put(&mut body, shared as u64);
        varint::put(&mut body, (e.key.len() - shared) as u64);
        let mut flags = 0;
        if matches!(e.value, ValueLoc::Overflow { .. }) {
            flags |= FLAG_OVERFLOW;
        }
        if e.expire_at != 0 {
            flags |= FLAG_EXPIRY;
        }
        if e.is_tombstone() {
            flags |= FLAG_TOMBSTONE;
        }
        body.push(flags);
        varint::put(&mut body, e.timestamp);
        if e.expire_at != 0 {
            varint::put(&mut body, e.expire_at);
        }
        body.extend_from_slice(&e.key[shared..]);
        match &e.value {
            ValueLoc::Inline(v) => {
                varint::put(&mut body, v.len() as u64);
                body.extend_from_slice(v);
            }
            ValueLoc::Overflow { len, first, pages } => {
                varint::put(&mut body, *len);
                body.extend_from_slice(&first.to_le_bytes());
                varint::put(&mut body, u64::from(*pages));
            }
            ValueLoc::Tombstone => {}
        }
        prev = &e.key;
    }
    let header = LEAF_OVERHEAD + 2 * restarts.len();
    let mut out = Vec::with_capacity(header + body.len());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(restarts.len() as u16).to_le_bytes());
    for r in &restarts {
        out.extend_from_slice(&((header + r) as u16).to_le_bytes());
    }
    out.extend_from_slice(&body);
    out
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A validated view of a leaf payload.
#[derive(Debug, Clone, Copy)]
pub struct LeafView<'a> {
    payload: &'a [u8],
    count: usize,
    restarts: usize,
}

impl<'a> LeafView<'a> {
    /// Checks the header; entries are checked as they are read.
    pub fn new(payload: &'a [u8]) -> Result<Self, CodecError> {
        let mut r = Reader::new(payload);
        let count = r.u16()? as usize;
        let restarts = r.u16()? as usize;
        if (count == 0) != (restarts == 0) || restarts > count.div_ceil(RESTART_INTERVAL) {
            return Err(CodecError("leaf restart count disagrees with entry count"));
        }
        if restarts != count.div_ceil(RESTART_INTERVAL) {
            return Err(CodecError("leaf restart count disagrees with entry count"));
        }
        r.bytes(2 * restarts)?;
        Ok(LeafView {
            payload,
            count,
            restarts,
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
        let off = u16::from_le_bytes([self.payload[at], self.payload[at + 1]]) as usize;
        if off < LEAF_OVERHEAD + 2 * self.restarts || off >= self.payload.len() {
            return Err(CodecError("leaf restart offset out of bounds"));
        }
        Ok(off)
    }

    /// Decodes every entry.
    pub fn entries(&self) -> Result<Vec<Entry>, CodecError> {
        let mut out = Vec::with_capacity(self.count);
        let mut r = Reader::at(self.payload, LEAF_OVERHEAD + 2 * self.restarts)?;
        let mut prev: Vec<u8> = Vec::new();
        for i in 0..self.count {
            if i % RESTART_INTERVAL == 0 && self.restart_offset(i / RESTART_INTERVAL)? != r.pos() {
                return Err(CodecError(
                    "leaf restart offset does not point at its entry",
                ));
            }
            let e = read_entry(&mut r, &prev, i % RESTART_INTERVAL == 0)?;
            if i > 0 && e.key <= prev {
                return Err(CodecError("leaf keys out of order"));
            }
            prev.clone_from(&e.key);
            out.push(e);
        }
        if r.remaining() != 0 {
            return Err(CodecError("trailing bytes after leaf entries"));
        }
        Ok(out)
    }

    /// Finds the entry with the greatest key ≤ `key` (`exact` = it equals `key`).
    /// Reads one restart block, not the whole leaf.
    pub fn seek_floor(&self, key: &[u8]) -> Result<Option<(Entry, bool)>, CodecError> {
        if self.count == 0 {
            return Ok(None);
        }
        // Binary search: the last restart whose key is ≤ key.
        let (mut lo, mut hi) = (0usize, self.restarts);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            let mut r = Reader::at(self.payload, self.restart_offset(mid)?)?;
            let e = read_entry(&mut r, &[], true)?;
            if e.key.as_slice() <= key {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let mut r = Reader::at(self.payload, self.restart_offset(lo)?)?;
        let first = lo * RESTART_INTERVAL;
        let end = (first + RESTART_INTERVAL).min(self.count);
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
    key.extend_from_slice(&prev[..shared]);
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
        entries[5].value = ValueLoc::Overflow {
            len: 100_000,
            first: u32::MAX,
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
        let mut entries: Vec<Entry> = (0..40).map(|i| entry(&format!("k{i}"), "val")).collect();
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
}
