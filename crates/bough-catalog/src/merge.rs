//! Merge, reset and re-home: branches that come back together and branches that stand
//! alone.
//!
//! A merge compares both sides against their merge base — the last common state, kept per
//! pair of branches in the `MERGE_BASES` manifest extension (recorded at fork and updated by
//! every merge) — using the diff that reads only diverged pages. When the target has not
//! changed since the base, it adopts the source's state by reference (one log record, no
//! data copied). Otherwise the source's changes are applied key by key in one commit, and a
//! key changed on both sides to different results is a conflict.

use bough_io::{IoError, IoResult};
use bough_manifest::{MERGE_BASES, MergeBase, Snapshot, encode_merge_bases, merge_bases};
use bough_names::{BranchName, FileId};
use bough_tree::btree::{Mutation, Op};
use bough_tree::diff::{Change, diff};
use bough_tree::head::{Head, TreeSnapshot};
use bough_tree::page::leaf::{Entry, ValueLoc};

use crate::Partition;

/// What to do with a key both sides changed differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConflictPolicy {
    /// Change nothing and report the conflicts.
    #[default]
    Fail,
    /// Keep the target's version.
    Ours,
    /// Take the source's version.
    Theirs,
    /// The entry with the newer user timestamp wins; a deletion carries no timestamp, so it
    /// loses against an entry.
    NewestTimestamp,
}

/// How to merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeOptions {
    /// Conflict handling.
    pub policy: ConflictPolicy,
    /// Report what would happen without changing anything.
    pub dry_run: bool,
    /// Adopt the source by reference when the target has not changed since the base.
    pub fast_forward: bool,
}

impl Default for MergeOptions {
    fn default() -> Self {
        MergeOptions {
            policy: ConflictPolicy::Fail,
            dry_run: false,
            fast_forward: true,
        }
    }
}

/// A key both sides changed to different results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The key.
    pub key: Vec<u8>,
    /// The target's entry (`None`: deleted there).
    pub ours: Option<Entry>,
    /// The source's entry (`None`: deleted there).
    pub theirs: Option<Entry>,
}

/// What a merge did (or would do, on a dry run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// The target adopted the source's state by reference.
    pub fast_forward: bool,
    /// Keys written or deleted on the target.
    pub applied: usize,
    /// Conflicts found (with `Fail`, the merge did not commit).
    pub conflicts: Vec<Conflict>,
    /// Conflicts settled by the policy.
    pub resolved: usize,
    /// Whether the target changed.
    pub committed: bool,
}

/// What a re-home did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RehomeReport {
    /// Files of other lineages the branch referenced before.
    pub files_rehomed: usize,
    /// Pages copied into the branch's own files.
    pub pages_copied: u64,
    /// Bytes copied.
    pub bytes_copied: u64,
}

fn after(c: &Change) -> Option<&Entry> {
    match c {
        Change::Added(e) | Change::Changed { new: e, .. } => Some(e),
        Change::Removed(_) => None,
    }
}

fn same(a: Option<&Entry>, b: Option<&Entry>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => {
            x.timestamp == y.timestamp && x.expire_at == y.expire_at && x.value == y.value
        }
        _ => false,
    }
}

impl Partition {
    /// The most recent common state recorded between `target` and `source`.
    pub fn merge_base(
        &self,
        target: &Head,
        source: &BranchName,
        source_exts: &[(u64, Vec<u8>)],
    ) -> IoResult<Option<MergeBase>> {
        let bad = |r| IoError::corruption(self.files().dir(), 0, format!("merge bases: {r:?}"));
        let mut best: Option<MergeBase> = None;
        let from_target = merge_bases(target.extensions()).map_err(bad)?;
        let from_source = merge_bases(source_exts).map_err(bad)?;
        for b in from_target
            .into_iter()
            .filter(|b| &b.branch == source)
            .chain(
                from_source
                    .into_iter()
                    .filter(|b| &b.branch == target.branch()),
            )
        {
            if best
                .as_ref()
                .is_none_or(|x| b.recorded_at_ms >= x.recorded_at_ms)
            {
                best = Some(b);
            }
        }
        Ok(best)
    }

    fn record_base(
        &self,
        target: &mut Head,
        source: &BranchName,
        state: &Snapshot,
        now_ms: u64,
    ) -> IoResult<()> {
        let bad = |r| IoError::corruption(self.files().dir(), 0, format!("merge bases: {r:?}"));
        let mut bases = merge_bases(target.extensions()).map_err(bad)?;
        bases.retain(|b| &b.branch != source);
        let mut state = state.clone();
        // The base needs the tree, not the branch's own metadata.
        state.extensions.clear();
        bases.push(MergeBase {
            branch: source.clone(),
            recorded_at_ms: now_ms,
            state,
        });
        let bytes = encode_merge_bases(&bases).map_err(|e| IoError::InvalidArgument {
            what: format!("cannot encode merge bases: {e}"),
        })?;
        target.stage_extension(MERGE_BASES, bytes);
        Ok(())
    }

    /// Merges `source` (a checkpointed snapshot of branch `source_name`, with its manifest
    /// extensions) into `target`. Run it in the target's write queue.
    pub fn merge(
        &self,
        target: &mut Head,
        source_name: &BranchName,
        source: &Snapshot,
        opts: MergeOptions,
        now_ms: u64,
    ) -> IoResult<MergeReport> {
        let base = self
            .merge_base(target, source_name, &source.extensions)?
            .ok_or_else(|| IoError::InvalidArgument {
                what: format!(
                    "{} and {} share no recorded merge base (neither was forked from or merged with the other)",
                    target.branch(),
                    source_name
                ),
            })?;
        let files = self.files().clone();
        let base_snap = TreeSnapshot::from_record(files.clone(), &base.state)?;
        let src_snap = TreeSnapshot::from_record(files, source)?;
        let tgt_snap = target.snapshot();
        let (t_changes, _) = diff(&base_snap, &tgt_snap)?;
        let mut report = MergeReport::default();
        if t_changes.is_empty() && opts.fast_forward {
            report.fast_forward = true;
            report.applied = diff(&base_snap, &src_snap)?.0.len();
            if !opts.dry_run {
                self.record_base(target, source_name, source, now_ms)?;
                target.adopt(source, now_ms)?;
                report.committed = true;
            }
            return Ok(report);
        }
        let (s_changes, _) = diff(&base_snap, &src_snap)?;
        let ours: std::collections::BTreeMap<Vec<u8>, Change> = t_changes.into_iter().collect();
        let mut muts = Vec::new();
        for (key, sc) in s_changes {
            let theirs = after(&sc);
            let take_theirs = match ours.get(&key) {
                None => true,
                Some(tc) => {
                    let mine = after(tc);
                    if same(mine, theirs) {
                        false
                    } else {
                        let decision = match opts.policy {
                            ConflictPolicy::Fail => None,
                            ConflictPolicy::Ours => Some(false),
                            ConflictPolicy::Theirs => Some(true),
                            ConflictPolicy::NewestTimestamp => Some(match (mine, theirs) {
                                (Some(m), Some(t)) => t.timestamp > m.timestamp,
                                (None, Some(_)) => true,
                                _ => false,
                            }),
                        };
                        match decision {
                            Some(d) => {
                                report.resolved += 1;
                                d
                            }
                            None => {
                                report.conflicts.push(Conflict {
                                    key: key.clone(),
                                    ours: mine.cloned(),
                                    theirs: theirs.cloned(),
                                });
                                false
                            }
                        }
                    }
                }
            };
            if take_theirs {
                let op = match theirs {
                    None => Op::ForceDelete,
                    Some(e) => Op::Replace {
                        value: match &e.value {
                            ValueLoc::Inline(v) => v.clone(),
                            ValueLoc::Overflow { first, pages, len } => {
                                src_snap.read_overflow(*first, *pages, *len)?
                            }
                        },
                        timestamp: e.timestamp,
                        expire_at: e.expire_at,
                    },
                };
                muts.push(Mutation { key, op });
            }
        }
        report.applied = muts.len();
        if opts.dry_run || !report.conflicts.is_empty() {
            return Ok(report);
        }
        self.record_base(target, source_name, source, now_ms)?;
        target.commit(&muts, now_ms)?;
        report.committed = true;
        Ok(report)
    }

    /// Makes `target` exactly `source`'s state (by reference) and records it as their new
    /// merge base: a reset to another branch's head (e.g. refreshing a child from its parent).
    pub fn reset_to(
        &self,
        target: &mut Head,
        source_name: &BranchName,
        source: &Snapshot,
        now_ms: u64,
    ) -> IoResult<()> {
        self.record_base(target, source_name, source, now_ms)?;
        target.adopt(source, now_ms)
    }

    /// Copies into `head`'s own files every page it still borrows from files other branches
    /// (or older terms) wrote, and forgets its merge bases, so those branches can be deleted
    /// and their files collected.
    pub fn rehome(&self, head: &mut Head, now_ms: u64) -> IoResult<RehomeReport> {
        let snap = head.snapshot();
        let live = head.live_pages_per_file()?;
        let victims: Vec<FileId> = live
            .keys()
            .copied()
            .filter(|f| {
                snap.ranges
                    .resolve(*f)
                    .is_none_or(|r| &r.branch != head.branch() || r.term != head.term())
            })
            .collect();
        let pages: u64 = victims.iter().map(|f| live[f]).sum();
        head.stage_extension(
            MERGE_BASES,
            encode_merge_bases(&[]).map_err(|e| IoError::InvalidArgument {
                what: format!("cannot encode merge bases: {e}"),
            })?,
        );
        let copied = if victims.is_empty() {
            head.checkpoint(now_ms)?;
            0
        } else {
            head.relocate_files(&victims, now_ms)?
        };
        debug_assert!(copied <= pages);
        Ok(RehomeReport {
            files_rehomed: victims.len(),
            pages_copied: copied,
            bytes_copied: copied * u64::from(self.config().page_size),
        })
    }
}
