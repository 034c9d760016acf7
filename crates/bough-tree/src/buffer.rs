//! The write buffer: acknowledged writes not yet checkpointed into the tree.
//!
//! A buffer is a stack of immutable sorted *runs*, newest first, each shared by `Arc`, so a
//! reader's copy of the buffer is a vector of pointers and never changes under it. Every
//! commit pushes one run; runs are merged as a counter in base [`MERGE_FAN_IN`] (four runs
//! of one level become one run of the next level), so after n commits an op has been copied
//! at most log4(n) times and at most three runs of each level remain. Merging runs composes
//! their ops per key ([`lww::compose`]), so a merged run has exactly the effect of its
//! runs in order. A checkpoint freezes the runs present, applies
//! them to the tree as one sorted batch ([`WriteBuffer::frozen_batch`]) and then drops them;
//! runs pushed meanwhile are never merged with frozen ones.
//!
//! Reads ([`BufferedRead`]) see the runs above a tree snapshot: a key's entry is the tree's
//! entry with the key's buffered ops applied in commit order by [`lww::apply`] — the same
//! rule the leaf merge applies, so reading before and after a checkpoint gives the same
//! entry. Entries come back as tree [`Entry`]s (a buffered value as `ValueLoc::Inline`,
//! whatever its length); tombstones are returned like the tree returns them, and TTL is the
//! caller's `Entry::is_live_at`, as for tree reads.

use crate::error::TreeResult;
use std::sync::Arc;

use bough_manifest::PageId;

use crate::btree::{self, Cursor, ForwardCursor, Mutation, Op, TreeRead, key_prefix};
use crate::lww;
use crate::page::leaf::{Entry, ValueLoc};
pub use budget::BufferBudget;
use filter::key_hash;
pub use run::Run;

mod budget;
mod filter;
mod run;

/// How many runs of one level [`WriteBuffer::settle`] merges at once. Four copies each op
/// half as often as merging pairs (a 64 MiB buffer of 10k-key commits: ~2 copies per op
/// instead of ~5) for at most three runs per level for reads to look through.
const MERGE_FAN_IN: usize = 4;

/// The runs of a branch not yet checkpointed, newest first.
#[derive(Debug, Clone, Default)]
pub struct WriteBuffer {
    runs: Vec<Arc<Run>>,
    bytes: usize,
    /// Runs with `last_version <= frozen` belong to a checkpoint in progress and are not
    /// merged with later runs.
    frozen: u64,
}

impl WriteBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Bytes buffered (keys, values and per-entry overhead): what `write_buffer_bytes`
    /// bounds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes of the runs after `version` (a fence: no run spans it).
    pub fn bytes_after(&self, version: u64) -> usize {
        self.runs
            .iter()
            .filter(|r| r.first_version > version)
            .map(|r| r.bytes)
            .sum()
    }

    /// The runs, newest first.
    pub fn runs(&self) -> &[Arc<Run>] {
        &self.runs
    }

    /// The newest buffered commit version, if any.
    pub fn last_version(&self) -> Option<u64> {
        self.runs.first().map(|r| r.last_version)
    }

    /// Adds the batch committed as `version` (sorted, distinct keys, as
    /// [`btree::check_batch`] requires) as the newest run, then merges runs.
    pub fn push(&mut self, version: u64, muts: Vec<Mutation>) {
        debug_assert!(muts.is_sorted_by(|a, b| a.key < b.key));
        debug_assert!(self.last_version().is_none_or(|v| v < version));
        let run = Run::new(muts, version, version);
        self.bytes += run.bytes;
        self.runs.insert(0, Arc::new(run));
        self.settle();
    }

    /// Merges the newest [`MERGE_FAN_IN`] runs into one while they are of one level and on
    /// one side of a freeze: a counter in base `MERGE_FAN_IN`, so after n commits an op has
    /// been copied at most log_F(n) times and at most F - 1 runs of each level remain.
    fn settle(&mut self) {
        while let Some(group) = self.runs.get(..MERGE_FAN_IN)
            && let Some(newest) = group.first()
        {
            let frozen = |r: &Run| r.last_version <= self.frozen;
            let mergeable = group
                .iter()
                .all(|r| r.level() == newest.level() && frozen(r) == frozen(newest));
            if !mergeable {
                break;
            }
            let oldest_first: Vec<&Run> = group.iter().rev().map(|r| &**r).collect();
            let merged = Run::merge(&oldest_first);
            self.bytes = self.bytes - group.iter().map(|r| r.bytes).sum::<usize>() + merged.bytes;
            self.runs.splice(..MERGE_FAN_IN, [Arc::new(merged)]);
        }
    }

    /// Freezes every run present for a checkpoint (that a clone of this buffer applies);
    /// returns the last version it covers. Runs pushed later stay apart.
    pub fn freeze(&mut self) -> Option<u64> {
        let upto = self.last_version()?;
        self.frozen = upto;
        Some(upto)
    }

    /// Freezes every run present for a checkpoint and returns them as one sorted batch to
    /// apply to the tree, with the last version it covers. Runs pushed later stay apart.
    pub fn frozen_batch(&mut self) -> Option<(u64, Vec<Mutation>)> {
        let upto = self.freeze()?;
        let oldest_first: Vec<&Run> = self.runs.iter().rev().map(|r| &**r).collect();
        Some((upto, Run::merged_mutations(&oldest_first)))
    }

    /// This buffer's runs (shared, nothing copied), fenced at `version`: what a branch
    /// forked by reference at `version` starts with. Its later runs are never merged with
    /// these (a checkpoint that takes the parent's tree at `version` applies only them); a
    /// checkpoint running in the parent is the parent's.
    pub fn fenced_at(&self, version: u64) -> WriteBuffer {
        debug_assert!(self.last_version().is_none_or(|v| v <= version));
        WriteBuffer {
            runs: self.runs.clone(),
            bytes: self.bytes,
            frozen: version,
        }
    }

    /// [`frozen_batch`](Self::frozen_batch) without the runs up to `version` (a fence:
    /// no run spans it), which a tree already holds.
    pub fn frozen_batch_after(&mut self, version: u64) -> Option<(u64, Vec<Mutation>)> {
        let upto = self.freeze()?;
        debug_assert!(
            self.runs
                .iter()
                .all(|r| r.first_version > version || r.last_version <= version)
        );
        let oldest_first: Vec<&Run> = self
            .runs
            .iter()
            .rev()
            .filter(|r| r.first_version > version)
            .map(|r| &**r)
            .collect();
        Some((upto, Run::merged_mutations(&oldest_first)))
    }

    /// Drops the runs a checkpoint made durable in the tree (every run up to `version`).
    pub fn release(&mut self, version: u64) {
        let (keep, gone): (Vec<_>, Vec<_>) =
            self.runs.drain(..).partition(|r| r.last_version > version);
        self.bytes -= gone.iter().map(|r| r.bytes).sum::<usize>();
        self.runs = keep;
    }

    /// A read view of this buffer over the tree at `root`.
    pub fn over<'a>(&'a self, tree: &'a dyn TreeRead, root: PageId) -> BufferedRead<'a> {
        BufferedRead {
            buffer: self,
            tree,
            root,
        }
    }
}

/// Two sorted batches as one, keys present in both composed (`older` first): what a
/// checkpoint that also commits a batch of its own applies.
pub fn merge_muts(older: Vec<Mutation>, newer: Vec<Mutation>) -> Vec<Mutation> {
    let mut out = Vec::with_capacity(older.len() + newer.len());
    let mut a = older.into_iter().peekable();
    let mut b = newer.into_iter().peekable();
    loop {
        match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => match x.key.cmp(&y.key) {
                std::cmp::Ordering::Less => out.extend(a.next()),
                std::cmp::Ordering::Greater => out.extend(b.next()),
                std::cmp::Ordering::Equal => {
                    if let (Some(x), Some(y)) = (a.next(), b.next()) {
                        out.push(Mutation {
                            key: x.key,
                            op: lww::compose(x.op, y.op),
                        });
                    }
                }
            },
            (Some(_), None) => out.extend(a.by_ref()),
            (None, Some(_)) => out.extend(b.by_ref()),
            (None, None) => return out,
        }
    }
}

/// Reads over a buffer and the tree snapshot below it.
#[derive(Clone, Copy)]
pub struct BufferedRead<'a> {
    buffer: &'a WriteBuffer,
    tree: &'a dyn TreeRead,
    root: PageId,
}

impl BufferedRead<'_> {
    /// The key's buffered ops applied to `base` (the tree's entry), oldest run first.
    fn resolve_with(&self, key: &[u8], base: Option<Entry>) -> Option<Entry> {
        if self.buffer.runs.is_empty() {
            return base;
        }
        let hash = key_hash(key);
        self.buffer
            .runs
            .iter()
            .rev()
            .filter_map(|r| r.find(key, hash))
            .fold(base, |stored, op| lww::apply(stored, key, op))
    }

    /// The entry for `key` (tombstones included), as `btree::get` returns it.
    pub fn get(&self, key: &[u8]) -> TreeResult<Option<Entry>> {
        if self.buffer.runs.is_empty() {
            return btree::get(self.tree, self.root, key);
        }
        let hash = key_hash(key);
        // The key's ops, newest first, down to the first that applies regardless of what
        // lies below it (older ops and the tree cannot change its outcome).
        let mut ops: Vec<&Op> = Vec::new();
        let mut decided = false;
        for op in self.buffer.runs.iter().filter_map(|r| r.find(key, hash)) {
            ops.push(op);
            if lww::contested_timestamp(op).is_none() {
                decided = true;
                break;
            }
        }
        if ops.is_empty() {
            return btree::get(self.tree, self.root, key);
        }
        let base = if decided {
            None
        } else {
            btree::get(self.tree, self.root, key)?
        };
        Ok(ops
            .iter()
            .rev()
            .fold(base, |stored, op| lww::apply(stored, key, op)))
    }

    /// The last entry (tombstones included) with key ≤ `key` (`inclusive`) or < `key`, as
    /// `Cursor::before` returns it.
    pub fn before(&self, key: &[u8], inclusive: bool) -> TreeResult<Option<Entry>> {
        let mut bound = key.to_vec();
        let mut inclusive = inclusive;
        loop {
            let tree = Cursor::before(self.tree, self.root, &bound, inclusive)?;
            let buffered = self
                .buffer
                .runs
                .iter()
                .filter_map(|r| last_at_or_before(r, &bound, inclusive))
                .max();
            let candidate = match (&tree, buffered) {
                (None, None) => return Ok(None),
                (Some(t), None) => t.key.clone(),
                (None, Some(b)) => b.to_vec(),
                (Some(t), Some(b)) => t.key.as_slice().max(b).to_vec(),
            };
            let base = tree.filter(|t| t.key == candidate);
            if let Some(e) = self.resolve_with(&candidate, base) {
                return Ok(Some(e));
            }
            // Removed by the buffer: look below it.
            bound = candidate;
            inclusive = false;
        }
    }

    /// A cursor from the first key ≥ `start` (the first key for `None`).
    pub fn seek(&self, start: Option<&[u8]>) -> TreeResult<BufferedCursor<'_>> {
        Ok(BufferedCursor {
            read: self,
            pos: self.seek_owned(start)?,
        })
    }

    /// The position of a cursor from the first key ≥ `start`, owning nothing borrowed: a
    /// caller that keeps a snapshot (and so its buffer) alive advances it with
    /// [`BufferedPosition::next_entry`] over a fresh [`BufferedRead`] of that snapshot.
    pub fn seek_owned(&self, start: Option<&[u8]>) -> TreeResult<BufferedPosition> {
        let tree = ForwardCursor::seek(self.tree, self.root, start)?;
        let pos = self
            .buffer
            .runs
            .iter()
            .map(|r| match start {
                None => 0,
                Some(k) => r.lower_bound(k),
            })
            .collect();
        Ok(BufferedPosition {
            tree,
            tree_head: None,
            tree_done: false,
            pos,
        })
    }
}

impl std::fmt::Debug for BufferedRead<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferedRead")
            .field("runs", &self.buffer.runs.len())
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for BufferedCursor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferedCursor")
            .field("pos", &self.pos)
            .finish_non_exhaustive()
    }
}

fn last_at_or_before<'r>(run: &'r Run, key: &[u8], inclusive: bool) -> Option<&'r [u8]> {
    let n = if inclusive {
        run.upper_bound(key)
    } else {
        run.lower_bound(key)
    };
    run.key_at(n.checked_sub(1)?).map(|(_, k)| k)
}

/// A forward cursor over the buffer and the tree merged.
pub struct BufferedCursor<'a> {
    read: &'a BufferedRead<'a>,
    pos: BufferedPosition,
}

impl BufferedCursor<'_> {
    /// The next entry in key order (tombstones included), as `Cursor::next_entry`.
    pub fn next_entry(&mut self) -> TreeResult<Option<Entry>> {
        self.pos.next_entry(self.read)
    }
}

/// Where a forward cursor over a buffer and its tree stands (see
/// [`BufferedRead::seek_owned`]); valid only with reads of the same buffer and tree.
#[derive(Debug)]
pub struct BufferedPosition {
    tree: ForwardCursor,
    tree_head: Option<Entry>,
    tree_done: bool,
    /// Next position in each run (same order as the buffer's runs).
    pos: Vec<usize>,
}

impl BufferedPosition {
    /// The next entry in key order (tombstones included), as `Cursor::next_entry`.
    pub fn next_entry(&mut self, read: &BufferedRead<'_>) -> TreeResult<Option<Entry>> {
        loop {
            if self.tree_head.is_none() && !self.tree_done {
                self.tree_head = self.tree.next_entry(read.tree)?;
                self.tree_done = self.tree_head.is_none();
            }
            let runs = &read.buffer.runs;
            let buffered = runs
                .iter()
                .zip(&self.pos)
                .filter_map(|(r, &p)| r.key_at(p))
                .min()
                .map(|(_, k)| k);
            // No run stands at the tree's next key: its entry is the answer as it is (no
            // copy of its key).
            let tree_first = match (&self.tree_head, buffered) {
                (Some(t), Some(b)) => t.key.as_slice() < b,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if tree_first {
                return Ok(self.tree_head.take());
            }
            // Otherwise the next key is the runs' (the tree's, if any, is not below it).
            let Some(b) = buffered else {
                return Ok(None);
            };
            let key = b.to_vec();
            let mut entry = match &self.tree_head {
                Some(t) if t.key == key => self.tree_head.take(),
                _ => None,
            };
            // The runs standing at `key` hold its ops: applied oldest run first, without
            // searching the runs again.
            let want = key_prefix(&key);
            for (r, p) in runs.iter().zip(self.pos.iter_mut()).rev() {
                if let Some((kp, _)) = r.key_at(*p)
                    && kp == want
                    && let Some(m) = r.mutation_at(*p)
                    && m.key == key
                {
                    entry = lww::apply(entry, &key, &m.op);
                    *p += 1;
                }
            }
            if let Some(e) = entry {
                return Ok(Some(e));
            }
        }
    }
}

/// A buffered value's bytes, for a caller that has an [`Entry`] and the tree.
pub fn value_of(tree: &dyn TreeRead, e: &Entry) -> TreeResult<Option<Vec<u8>>> {
    Ok(match &e.value {
        ValueLoc::Inline(v) => Some(v.clone()),
        ValueLoc::Overflow { len, first, pages } => Some(tree.overflow(*first, *pages, *len)?),
        ValueLoc::Tombstone => None,
    })
}

#[cfg(test)]
mod tests;
