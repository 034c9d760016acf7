//! What a batch asks of the tree: [`Mutation`]s and their [`Op`]s, the limits every commit
//! checks them against, and what applying them changed ([`Applied`]).

/// A change to one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Insert or replace.
    Put {
        value: Vec<u8>,
        timestamp: u64,
        expire_at: u64,
    },
    /// Delete by last-writer-wins: leaves a tombstone with this timestamp (on an absent key
    /// too), so a write with an older timestamp arriving later still loses. `expire_at` is
    /// when the expiry sweep purges the tombstone (0 = never).
    Delete { timestamp: u64, expire_at: u64 },
    /// Remove regardless of timestamps, tombstones included (TTL expiry, truncate, merge).
    ForceDelete,
    /// Write a tombstone regardless of timestamps (merge applies the other side's delete
    /// exactly as it was).
    ReplaceWithTombstone { timestamp: u64, expire_at: u64 },
    /// Insert or replace regardless of timestamps (merge applies the other side's entry
    /// exactly as it was).
    Replace {
        value: Vec<u8>,
        timestamp: u64,
        expire_at: u64,
    },
}

/// A mutation of a batch; batches are sorted by key with distinct keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mutation {
    pub key: Vec<u8>,
    pub op: Op,
}

/// Largest value stored (values above about a quarter page live in overflow pages).
pub const MAX_VALUE_LEN: usize = 1 << 30;

/// Longest key for a page size: an eighth of a page, so leaves and index pages always hold
/// several entries.
pub fn max_key_len(page_size: u32) -> usize {
    page_size as usize / 8
}

impl Mutation {
    /// The one check every entry passes, whether it arrives by write, import or merge: a
    /// non-empty key within the page size's bound, a value within [`MAX_VALUE_LEN`].
    pub fn check(&self, page_size: u32) -> Result<(), String> {
        let max_key = max_key_len(page_size);
        if self.key.is_empty() {
            return Err("empty key".into());
        }
        if self.key.len() > max_key {
            return Err(format!(
                "key of {} bytes; the maximum for {page_size}-byte pages is {max_key}",
                self.key.len()
            ));
        }
        if let Op::Put { value, .. } | Op::Replace { value, .. } = &self.op
            && value.len() > MAX_VALUE_LEN
        {
            return Err(format!(
                "value of {} bytes; the maximum is {MAX_VALUE_LEN}",
                value.len()
            ));
        }
        Ok(())
    }
}

/// A key's first eight bytes as a big-endian number (zero-padded): `a < b` implies
/// `key_prefix(a) <= key_prefix(b)`, so the prefixes order the keys up to ties.
pub fn key_prefix(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    for (d, s) in bytes.iter_mut().zip(key) {
        *d = *s;
    }
    u64::from_be_bytes(bytes)
}

/// The order of `[u8]`, deciding most pairs by their [`key_prefix`]es (one integer
/// comparison) instead of a `memcmp` call: how a batch is sorted.
pub fn key_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    key_prefix(a).cmp(&key_prefix(b)).then_with(|| a.cmp(b))
}

/// Checks a batch: every mutation passes [`Mutation::check`], keys strictly increasing.
pub fn check_batch(muts: &[Mutation], page_size: u32) -> Result<(), String> {
    for m in muts {
        m.check(page_size)?;
    }
    if !muts.is_sorted_by(|a, b| a.key < b.key) {
        return Err("batch keys must be sorted and distinct".into());
    }
    Ok(())
}

/// What a batch changed, for the TTL index.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    /// (key, expire_at) of entries that were removed or replaced and had an expiry.
    pub expiry_removed: Vec<(Vec<u8>, u64)>,
    /// (key, expire_at) of entries written with an expiry.
    pub expiry_added: Vec<(Vec<u8>, u64)>,
    /// Entries written (not skipped by last-writer-wins).
    pub written: u64,
    /// Live entries deleted or removed (purging a tombstone removes nothing visible, so it
    /// does not count).
    pub removed: u64,
    /// Puts and deletes last-writer-wins skipped: the stored entry (or tombstone) had a
    /// newer timestamp.
    pub superseded: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prefix shortcut orders keys exactly as `[u8]` does: shorter keys, zero bytes,
    /// ties in the first eight bytes, every pair both ways.
    #[test]
    fn key_order_is_the_byte_order() {
        let keys: [&[u8]; 10] = [
            b"",
            b"\0",
            b"a",
            b"a\0",
            b"a\0\0\0\0\0\0\0\0",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefgha",
            b"abcdefgi",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        ];
        for a in keys {
            for b in keys {
                assert_eq!(key_order(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }
}
