//! [`Run`]: one commit's batch in the write buffer, or several merged — sorted ops with what
//! makes searching them cheap. A run's keys are separate heap allocations, so a plain binary
//! search follows a pointer at every step; a run keeps each key's first eight bytes in one
//! contiguous array and searches that first, and a Bloom filter answers most misses without
//! searching at all.

use crate::btree::{Mutation, Op};

use super::filter::KeyFilter;

/// One commit's batch, or several merged: sorted, distinct keys.
#[derive(Debug)]
pub struct Run {
    pub(super) muts: Vec<Mutation>,
    /// `prefixes[i]` is [`prefix`] of `muts[i].key`: non-decreasing, as the keys are sorted.
    prefixes: Box<[u64]>,
    /// Skips the search of a run that cannot hold the key.
    filter: KeyFilter,
    pub(super) bytes: usize,
    pub(super) first_version: u64,
    pub(super) last_version: u64,
}

/// A key's first eight bytes as a big-endian number (zero-padded): `a < b` implies
/// `prefix(a) <= prefix(b)`, so the prefixes order the keys up to ties.
pub(super) fn prefix(key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    for (d, s) in bytes.iter_mut().zip(key) {
        *d = *s;
    }
    u64::from_be_bytes(bytes)
}

/// Bytes a mutation costs the buffer (key, value, and a fixed overhead per entry).
fn cost(m: &Mutation) -> usize {
    let value = match &m.op {
        Op::Put { value, .. } | Op::Replace { value, .. } => value.len(),
        Op::Delete { .. } | Op::ForceDelete | Op::ReplaceWithTombstone { .. } => 0,
    };
    m.key.len() + value + 48
}

impl Run {
    /// The run of `muts` (sorted, distinct keys), covering commit versions `first..=last`.
    pub(super) fn new(muts: Vec<Mutation>, first_version: u64, last_version: u64) -> Run {
        debug_assert!(muts.is_sorted_by(|a, b| a.key < b.key));
        Run {
            prefixes: muts.iter().map(|m| prefix(&m.key)).collect(),
            filter: KeyFilter::build(muts.iter().map(|m| m.key.as_slice())),
            bytes: muts.iter().map(cost).sum(),
            muts,
            first_version,
            last_version,
        }
    }

    /// The ops, sorted by key.
    pub fn mutations(&self) -> &[Mutation] {
        &self.muts
    }

    /// Commit versions this run holds, first and last.
    pub fn versions(&self) -> (u64, u64) {
        (self.first_version, self.last_version)
    }

    /// The op for `key` (`hash` is its [`super::key_hash`]).
    pub(super) fn find(&self, key: &[u8], hash: u64) -> Option<&Op> {
        if !self.filter.may_contain(hash) {
            return None;
        }
        self.muts
            .get(self.lower_bound(key))
            .filter(|m| m.key == key)
            .map(|m| &m.op)
    }

    /// The first index whose key is ≥ `key` (`inclusive` false) or > `key` (true).
    fn bound(&self, key: &[u8], inclusive: bool) -> usize {
        let p = prefix(key);
        let lo = self.prefixes.partition_point(|&q| q < p);
        let ties = self
            .prefixes
            .get(lo..)
            .map_or(0, |rest| rest.partition_point(|&q| q == p));
        let within = self.muts.get(lo..lo + ties).map_or(0, |tied| {
            tied.partition_point(|m| {
                let k = m.key.as_slice();
                k < key || (inclusive && k == key)
            })
        });
        lo + within
    }

    /// The first index whose key is ≥ `key`.
    pub(super) fn lower_bound(&self, key: &[u8]) -> usize {
        self.bound(key, false)
    }

    /// The first index whose key is > `key`.
    pub(super) fn upper_bound(&self, key: &[u8]) -> usize {
        self.bound(key, true)
    }

    /// The key at index `i` with its prefix (compare the prefixes first: they are contiguous).
    pub(super) fn key_at(&self, i: usize) -> Option<(u64, &[u8])> {
        Some((*self.prefixes.get(i)?, self.muts.get(i)?.key.as_slice()))
    }
}
