//! Cherry-pick and revert: the changes between two states of a partition applied to a branch
//! (or undone on it), in one commit.
//!
//! The range `from..to` is the diff of the two states, which reads only the pages they do
//! not share; the changed keys (in key order) are then looked up on the target through one
//! cursor, which reads a leaf once for all the changed keys it holds and seeks anew only past
//! it — so the cost follows the size of the range, not of the target or of how far it
//! diverged. A key applies
//! cleanly when the target still holds what the range started from there (`from`'s entry,
//! or `to`'s for a revert), is left alone when it already holds what the range ends at, and
//! is a conflict otherwise — settled by the merge's [`ConflictPolicy`], *ours* being the
//! target's entry and *theirs* the range's. Expiry and deletes are seen as a merge sees them
//! (`crate::merge`): an expired entry is absent, and a change that ends at a delete is taken
//! as its tombstone.

use bough_io::{IoError, IoResult};
use bough_manifest::{Snapshot, commit_version, merge_bases};
use bough_names::BranchName;
use bough_tree::btree::{Cursor, Mutation};
use bough_tree::diff::{Change, diff_buffered, visible_changes_at};
use bough_tree::head::{Head, TreeSnapshot};
use bough_tree::page::leaf::Entry;

use crate::Partition;
use crate::merge::{Conflict, ConflictPolicy, MergeReport, Sides, after, decide, same, take_op};

/// How to cherry-pick or revert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PickOptions {
    /// Conflict handling: *ours* is the target, *theirs* the range's change.
    pub policy: ConflictPolicy,
    /// Report what would happen without changing anything.
    pub dry_run: bool,
}

/// Which way a range goes onto the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PickRange {
    /// The changes from `from` to `to` (a cherry-pick).
    Forward,
    /// Their inverse: from `to` back to `from` (a revert).
    Inverse,
}

fn before(c: &Change) -> Option<&Entry> {
    match c {
        Change::Removed(e) | Change::Changed { old: e, .. } => Some(e),
        Change::Added(_) => None,
    }
}

impl Partition {
    /// The state of `branch` at commit version `version`, from what retains one: one of the
    /// branch's archives, or a merge base some live branch records of it (at its current
    /// incarnation). The branch's current state is the caller's to check first. Hold the
    /// catalog lock while using it (nothing else keeps a merge base's pages for GC).
    pub fn retained_state(&self, branch: &BranchName, version: u64) -> IoResult<Snapshot> {
        let mut seen = Vec::new();
        for a in self.archives(branch)? {
            let snap = self.read_archive(&a)?;
            let v = commit_version(&snap.extensions).ok().flatten();
            if v == Some(version) {
                return Ok(snap);
            }
            seen.extend(v);
        }
        if let Some(first) = self.incarnation_of(branch)? {
            for holder in self.branches()? {
                let exts = self.stored_extensions(&holder)?;
                let bases = merge_bases(&exts).map_err(|r| {
                    IoError::corruption(self.files().dir(), 0, format!("merge bases: {r:?}"))
                })?;
                for b in bases {
                    if &b.branch != branch || b.state.meta.term < first {
                        continue;
                    }
                    let v = commit_version(&b.state.extensions).ok().flatten();
                    if v == Some(version) {
                        return Ok(b.state);
                    }
                    seen.extend(v);
                }
            }
        }
        seen.sort_unstable();
        seen.dedup();
        Err(IoError::NotFound {
            path: format!(
                "{}@{branch}:{version} (no archive or merge base retains that version of \
                 {branch}; retained: {})",
                self.dir(),
                if seen.is_empty() {
                    "only its current state".to_string()
                } else {
                    format!("{seen:?} and its current state")
                }
            ),
        })
    }

    /// Applies the changes from state `from` to state `to` onto `target` (or, with
    /// [`PickRange::Inverse`], undoes them), as of `now_ms`, in one commit. Both states must
    /// stay pinned (a reader snapshot, an archive or a merge base held under the catalog
    /// lock) while this runs. Run it in the target's write queue. Reports
    /// [`MergeReport::applied`] keys and the conflicts; commits nothing on a dry run, when a
    /// conflict is left (policy `Fail`), or when there is nothing to apply.
    pub fn pick(
        &self,
        target: &mut Head,
        from: &TreeSnapshot,
        to: &TreeSnapshot,
        range: PickRange,
        opts: PickOptions,
        now_ms: u64,
    ) -> IoResult<MergeReport> {
        let (old, new) = match range {
            PickRange::Forward => (from, to),
            PickRange::Inverse => (to, from),
        };
        let changes = visible_changes_at(diff_buffered(old, new)?.0, now_ms);
        let tgt = target.snapshot();
        let mut report = MergeReport::default();
        let mut muts = Vec::new();
        // The changed keys come in key order: one cursor looks them up, reading a leaf once
        // for all the keys it holds and seeking anew only past it.
        let mut cursor: Option<Cursor> = None;
        for v in changes {
            let (was, becomes) = (before(&v.change), after(&v.change));
            let held = match cursor.as_mut().and_then(|c| c.get_in_leaf(&v.key)) {
                Some(found) => found,
                None => {
                    let mut c = Cursor::seek(&*tgt, tgt.root, Some(&v.key))?;
                    let found = c.get_in_leaf(&v.key).flatten();
                    cursor = Some(c);
                    found
                }
            };
            let live = held.as_ref().filter(|e| e.is_live_at(now_ms));
            if same(&tgt, live, new, becomes)? {
                // Already there.
                continue;
            }
            let take = if same(&tgt, live, old, was)? {
                true
            } else {
                let ours = live.or(held.as_ref().filter(|e| e.is_tombstone()));
                let theirs = becomes.or(v.tombstone.as_ref());
                match decide(opts.policy, Sides::Merge, ours, theirs) {
                    Some(d) => {
                        report.resolved += 1;
                        d
                    }
                    None => {
                        report.conflicts.push(Conflict {
                            key: v.key.clone(),
                            ours: ours.cloned(),
                            theirs: theirs.cloned(),
                        });
                        false
                    }
                }
            };
            if take {
                let op = take_op(new, becomes, v.tombstone.as_ref())?;
                muts.push(Mutation { key: v.key, op });
            }
        }
        report.applied = muts.len();
        if opts.dry_run || !report.conflicts.is_empty() || muts.is_empty() {
            return Ok(report);
        }
        target.commit(&muts, now_ms)?;
        report.committed = true;
        Ok(report)
    }
}
