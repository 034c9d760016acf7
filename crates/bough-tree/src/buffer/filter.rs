//! A Bloom filter per buffered run. Most gets ask for a key no run holds (the buffer is small
//! against the tree); without a filter each such get binary-searches every run, and every
//! comparison of that search follows a pointer to a key somewhere on the heap.

use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};

/// About 1 % false positives at 10 bits per key and 7 probes.
const BITS_PER_KEY: usize = 10;
const PROBES: u64 = 7;

/// Which keys a run may hold: `false` from [`KeyFilter::may_contain`] is certain.
#[derive(Debug)]
pub(crate) struct KeyFilter {
    words: Box<[u64]>,
}

/// The hash a filter is probed with, computed once per key looked up.
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    BuildHasherDefault::<DefaultHasher>::default().hash_one(key)
}

/// The bit positions of a hash in a filter of `bits` bits, a power of two (double
/// hashing; a mask, not a division: a filter is built for every merge of buffered runs,
/// seven probes per key).
fn probes(hash: u64, bits: u64) -> impl Iterator<Item = u64> {
    debug_assert!(bits.is_power_of_two());
    let step = hash.rotate_left(32) | 1;
    let mask = bits.wrapping_sub(1);
    (0..PROBES).map(move |i| hash.wrapping_add(i.wrapping_mul(step)) & mask)
}

impl KeyFilter {
    /// A filter holding the keys whose [`key_hash`]es are `hashes`.
    pub(crate) fn from_hashes(hashes: &[u64]) -> Self {
        // At least `BITS_PER_KEY` bits per key, rounded up to a power of two.
        let words = (hashes.len() * BITS_PER_KEY)
            .div_ceil(64)
            .max(1)
            .next_power_of_two();
        let mut filter = KeyFilter {
            words: vec![0u64; words].into_boxed_slice(),
        };
        let bits = filter.bits();
        for &hash in hashes {
            for bit in probes(hash, bits) {
                if let Some(w) = filter.words.get_mut((bit / 64) as usize) {
                    *w |= 1 << (bit % 64);
                }
            }
        }
        filter
    }

    fn bits(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    /// Whether the key whose [`key_hash`] is `hash` may be in the run.
    pub(crate) fn may_contain(&self, hash: u64) -> bool {
        probes(hash, self.bits()).all(|bit| {
            self.words
                .get((bit / 64) as usize)
                .is_some_and(|w| w & (1 << (bit % 64)) != 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_every_key_built_from_and_refuses_most_others() {
        let keys: Vec<Vec<u8>> = (0..10_000u32)
            .map(|i| format!("k{i}").into_bytes())
            .collect();
        let hashes: Vec<u64> = keys.iter().map(|k| key_hash(k)).collect();
        let f = KeyFilter::from_hashes(&hashes);
        assert!(keys.iter().all(|k| f.may_contain(key_hash(k))));
        let false_positives = (0..10_000u32)
            .filter(|i| f.may_contain(key_hash(format!("other{i}").as_bytes())))
            .count();
        // About 1 % expected; 3 % leaves room for an unlucky hash, not for a broken filter.
        assert!(
            false_positives < 300,
            "{false_positives} false positives in 10000"
        );
    }

    #[test]
    fn an_empty_filter_holds_nothing() {
        let f = KeyFilter::from_hashes(&[]);
        assert!(!f.may_contain(key_hash(b"a")));
    }
}
