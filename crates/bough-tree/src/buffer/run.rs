//! [`Run`]: one commit's batch in the write buffer, or several merged — sorted ops with what
//! makes searching them cheap.
//!
//! A run is a list of *segments* with disjoint, ascending key ranges. Merging two runs whose
//! key ranges do not overlap (every commit of a sequential load) concatenates their segment
//! lists: the segments are shared by `Arc`, so no op is copied and no filter rebuilt. Runs
//! that overlap are merged op by op into one new segment. A segment's keys are separate heap
//! allocations, so a plain binary search follows a pointer at every step; a segment keeps each
//! key's first eight bytes in one contiguous array and searches that first, and a Bloom
//! filter answers most misses without searching at all.
//!
//! A segment keeps each key's filter hash: the buffer's merging moves every op through
//! ~log4(commits) merges, and each merge hashed every key again to build
//! its filter.

use std::sync::Arc;

use crate::btree::{Mutation, Op, key_prefix};

use super::filter::{KeyFilter, key_hash};

/// Sorted ops with distinct keys, never changed once built.
#[derive(Debug)]
struct Segment {
    muts: Vec<Mutation>,
    /// `prefixes[i]` is [`key_prefix`] of `muts[i].key`: non-decreasing, as the keys are sorted.
    prefixes: Box<[u64]>,
    /// `hashes[i]` is [`key_hash`] of `muts[i].key`, so a merge builds its filter without
    /// hashing a key again.
    hashes: Box<[u64]>,
    /// Skips the search of a segment that cannot hold the key.
    filter: KeyFilter,
}

impl Segment {
    fn new(muts: Vec<Mutation>, hashes: Vec<u64>) -> Segment {
        debug_assert!(muts.is_sorted_by(|a, b| a.key < b.key));
        debug_assert_eq!(muts.len(), hashes.len());
        Segment {
            prefixes: muts.iter().map(|m| key_prefix(&m.key)).collect(),
            filter: KeyFilter::from_hashes(&hashes),
            hashes: hashes.into_boxed_slice(),
            muts,
        }
    }

    /// The ops with their key hashes and prefixes.
    fn entries(&self) -> impl Iterator<Item = Keyed<'_>> {
        self.muts
            .iter()
            .zip(self.hashes.iter().copied())
            .zip(self.prefixes.iter().copied())
            .map(|((m, hash), prefix)| Keyed { m, hash, prefix })
    }

    fn first_key(&self) -> &[u8] {
        self.muts.first().map_or(&[], |m| m.key.as_slice())
    }

    fn last_key(&self) -> &[u8] {
        self.muts.last().map_or(&[], |m| m.key.as_slice())
    }

    /// The first index whose key is ≥ `key` (`inclusive` false) or > `key` (true).
    fn bound(&self, key: &[u8], inclusive: bool) -> usize {
        let p = key_prefix(key);
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
}

/// One commit's batch, or several merged: sorted, distinct keys.
#[derive(Debug)]
pub struct Run {
    /// Non-empty segments, key ranges disjoint and ascending.
    segments: Vec<Arc<Segment>>,
    /// `starts[i]` is the run index of `segments[i]`'s first op (`starts[0] == 0`).
    starts: Box<[usize]>,
    len: usize,
    pub(super) bytes: usize,
    pub(super) first_version: u64,
    pub(super) last_version: u64,
    /// See [`Run::level`].
    level: u32,
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
        let bytes = muts.iter().map(cost).sum();
        let segments = if muts.is_empty() {
            Vec::new()
        } else {
            let hashes = muts.iter().map(|m| key_hash(&m.key)).collect();
            vec![Arc::new(Segment::new(muts, hashes))]
        };
        Run::of_segments(segments, bytes, first_version, last_version)
    }

    fn of_segments(
        segments: Vec<Arc<Segment>>,
        bytes: usize,
        first_version: u64,
        last_version: u64,
    ) -> Run {
        debug_assert!(segments.iter().all(|s| !s.muts.is_empty()));
        debug_assert!(
            segments
                .windows(2)
                .all(|w| matches!(w, [a, b] if a.last_key() < b.first_key()))
        );
        let mut starts = Vec::with_capacity(segments.len());
        let mut len = 0;
        for s in &segments {
            starts.push(len);
            len += s.muts.len();
        }
        Run {
            segments,
            starts: starts.into_boxed_slice(),
            len,
            bytes,
            first_version,
            last_version,
            level: 0,
        }
    }

    /// `runs` (oldest first) as one run, one level above theirs: their segments side by
    /// side when their key ranges do not overlap (nothing copied), else one segment of
    /// their ops, a key held by several composed in commit order.
    pub(super) fn merge(runs: &[&Run]) -> Run {
        let first = runs.first().map_or(0, |r| r.first_version);
        let last = runs.last().map_or(0, |r| r.last_version);
        let level = runs
            .iter()
            .map(|r| r.level)
            .max()
            .map_or(0, |l| l.saturating_add(1));
        let mut by_key: Vec<&Run> = runs.iter().copied().filter(|r| r.len > 0).collect();
        by_key.sort_by(|a, b| a.first_key().cmp(b.first_key()));
        let disjoint = by_key
            .windows(2)
            .all(|w| matches!(w, [a, b] if a.last_key() < b.first_key()));
        let mut run = if disjoint {
            let bytes = by_key.iter().map(|r| r.bytes).sum();
            let segments = by_key
                .iter()
                .flat_map(|r| r.segments.iter().cloned())
                .collect();
            Run::of_segments(segments, bytes, first, last)
        } else {
            let (muts, hashes) = merge_hashed(runs);
            let bytes = muts.iter().map(cost).sum();
            Run::of_segments(
                vec![Arc::new(Segment::new(muts, hashes))],
                bytes,
                first,
                last,
            )
        };
        run.level = level;
        run
    }

    /// How many merges built this run (0: one commit's batch). The buffer merges runs of
    /// one level only, so an op is copied at most once per level.
    pub(super) fn level(&self) -> u32 {
        self.level
    }

    /// Number of ops.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the run holds no op.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ops, sorted by key.
    pub fn mutations(&self) -> impl Iterator<Item = &Mutation> {
        self.segments.iter().flat_map(|s| s.muts.iter())
    }

    /// The ops with their key hashes and prefixes, sorted by key.
    fn entries(&self) -> impl Iterator<Item = Keyed<'_>> {
        self.segments.iter().flat_map(|s| s.entries())
    }

    /// The ops of `runs` (oldest first) as one sorted batch, a key held by several taking
    /// their ops composed in commit order: what a checkpoint applies.
    pub(super) fn merged_mutations(runs: &[&Run]) -> Vec<Mutation> {
        let mut out = Vec::with_capacity(runs.iter().map(|r| r.len).sum());
        merge_into(runs, |m, _| out.push(m));
        out
    }

    /// Commit versions this run holds, first and last.
    pub fn versions(&self) -> (u64, u64) {
        (self.first_version, self.last_version)
    }

    /// How many segments hold the ops (how many merges were concatenations, plus one).
    #[cfg(test)]
    pub(super) fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Whether `other` holds segment `i` of this run itself (shared, not copied).
    #[cfg(test)]
    pub(super) fn shares_segment(&self, i: usize, other: &Run) -> bool {
        self.segments
            .get(i)
            .is_some_and(|s| other.segments.iter().any(|o| Arc::ptr_eq(s, o)))
    }

    fn first_key(&self) -> &[u8] {
        self.segments.first().map_or(&[], |s| s.first_key())
    }

    fn last_key(&self) -> &[u8] {
        self.segments.last().map_or(&[], |s| s.last_key())
    }

    /// The op for `key` (`hash` is its [`super::key_hash`]).
    pub(super) fn find(&self, key: &[u8], hash: u64) -> Option<&Op> {
        // The only segment whose range can hold the key: the first whose last key is ≥ it.
        let s = self.segments.partition_point(|s| s.last_key() < key);
        let seg = self.segments.get(s)?;
        if !seg.filter.may_contain(hash) {
            return None;
        }
        seg.muts
            .get(seg.bound(key, false))
            .filter(|m| m.key == key)
            .map(|m| &m.op)
    }

    /// The first index whose key is ≥ `key` (`inclusive` false) or > `key` (true).
    fn bound(&self, key: &[u8], inclusive: bool) -> usize {
        let s = self.segments.partition_point(|s| {
            let last = s.last_key();
            last < key || (inclusive && last == key)
        });
        match (self.segments.get(s), self.starts.get(s)) {
            (Some(seg), Some(start)) => start + seg.bound(key, inclusive),
            _ => self.len,
        }
    }

    /// The first index whose key is ≥ `key`.
    pub(super) fn lower_bound(&self, key: &[u8]) -> usize {
        self.bound(key, false)
    }

    /// The first index whose key is > `key`.
    pub(super) fn upper_bound(&self, key: &[u8]) -> usize {
        self.bound(key, true)
    }

    /// The segment holding run index `i`, and `i` within it.
    fn locate(&self, i: usize) -> Option<(&Segment, usize)> {
        let s = self.starts.partition_point(|&st| st <= i).checked_sub(1)?;
        Some((self.segments.get(s)?, i - self.starts.get(s)?))
    }

    /// The key at index `i` with its prefix (compare the prefixes first: they are contiguous).
    pub(super) fn key_at(&self, i: usize) -> Option<(u64, &[u8])> {
        let (seg, j) = self.locate(i)?;
        Some((*seg.prefixes.get(j)?, seg.muts.get(j)?.key.as_slice()))
    }

    /// The op at index `i`.
    pub(super) fn mutation_at(&self, i: usize) -> Option<&Mutation> {
        let (seg, j) = self.locate(i)?;
        seg.muts.get(j)
    }
}

/// An op of a run with what orders and finds it cheaply.
#[derive(Clone, Copy)]
struct Keyed<'a> {
    m: &'a Mutation,
    hash: u64,
    /// [`key_prefix`] of the key: compared first, so most comparisons are one integer's.
    prefix: u64,
}

impl Keyed<'_> {
    fn cmp_key(&self, other: &Keyed<'_>) -> std::cmp::Ordering {
        self.prefix
            .cmp(&other.prefix)
            .then_with(|| self.m.key.cmp(&other.m.key))
    }
}

/// The ops of `runs` (oldest first) as one sorted list with their key hashes; a key held by
/// several gets one op, theirs composed by the one last-writer-wins rule in commit order, as
/// [`super::merge_muts`] composes two batches.
fn merge_hashed(runs: &[&Run]) -> (Vec<Mutation>, Vec<u64>) {
    let n = runs.iter().map(|r| r.len).sum();
    let (mut muts, mut hashes) = (Vec::with_capacity(n), Vec::with_capacity(n));
    merge_into(runs, |m, hash| {
        muts.push(m);
        hashes.push(hash);
    });
    (muts, hashes)
}

/// Hands `out` the ops of `runs` (oldest first) in key order with their key hashes, each
/// key once: its ops composed oldest first.
fn merge_into(runs: &[&Run], mut out: impl FnMut(Mutation, u64)) {
    let mut heads: Vec<_> = runs.iter().map(|r| r.entries().peekable()).collect();
    // The fan-in is a handful of runs: a scan for the smallest key beats a heap.
    loop {
        let mut least: Option<Keyed<'_>> = None;
        for h in heads.iter_mut() {
            if let Some(&k) = h.peek()
                && least.is_none_or(|l| k.cmp_key(&l).is_lt())
            {
                least = Some(k);
            }
        }
        let Some(least) = least else {
            return;
        };
        let mut composed: Option<Mutation> = None;
        for h in heads.iter_mut() {
            // The head `least` came from holds it itself: no key comparison for it.
            let same = |k: &Keyed<'_>| std::ptr::eq(k.m, least.m) || k.cmp_key(&least).is_eq();
            let Some(k) = h.next_if(same) else {
                continue;
            };
            composed = Some(match composed {
                None => k.m.clone(),
                Some(older) => Mutation {
                    key: older.key,
                    op: crate::lww::compose(older.op, k.m.op.clone()),
                },
            });
        }
        if let Some(m) = composed {
            out(m, least.hash);
        }
    }
}
