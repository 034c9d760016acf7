//! Merge, reset and re-home: branches that come back together and branches that stand
//! alone.
//!
//! A merge compares both sides against their merge base — the last common state, kept per
//! pair of branches in the `MERGE_BASES` manifest extension (recorded at fork and updated by
//! every merge) — using the diff that reads only diverged pages. When the target has not
//! changed since the base, it adopts the source's state by reference (one log record, no
//! data copied). Otherwise the source's changes are applied key by key in one commit, and a
//! key changed on both sides to different results is a conflict.
//!
//! **Expiry.** A merge sees all three states as reads would at the merge's time: an entry
//! that has expired is absent, whether or not expiry has deleted it from that branch yet
//! (see [`visible_at`]). So a key that expired on one side and was deleted by expiry on the
//! other is no conflict, a change to an entry that has since expired is a deletion, and a
//! merge never brings back an expired value.
//!
//! **Tombstones.** A deleted key is absent to a merge, like an expired one: a tombstone on
//! one side and nothing on the other is no difference. But a delete is a write with a
//! timestamp, and the merge keeps it: [`ConflictPolicy::NewestTimestamp`] compares a
//! delete's tombstone timestamp like an entry's (the write path's rule, so an older update
//! never brings a deleted key back, in either direction), a [`Conflict`] reports the
//! tombstone, and when the merge takes the source's delete it writes the source's tombstone
//! (timestamp and expiry) on the target, so the delete still beats older writes there.
//!
//! **Fast-forward cost.** A fast-forward adopts the source's mapping root and file ranges
//! in one log record; finding that the target did not change is a diff of the target
//! against the base, which costs the target's divergence (none). Counting the keys the
//! source brings would cost the source's divergence, so it is done only when
//! [`MergeOptions::count_fast_forward`] asks.
//!
//! **Incarnations.** A merge base names the other branch, and a name can be reused after
//! deletion. A base's state carries the other branch's term at the time it was recorded;
//! that branch's `CURRENT_TERM` records the first term of its current incarnation. A base
//! whose term is below it was recorded with an earlier branch of the same name: merges
//! ignore it and [`Partition::prune_merge_bases`] drops it.

use crate::error::{CatalogError, CatalogResult};
use std::collections::HashSet;

use bough_io::{IoError, IoResult};
use bough_manifest::{MERGE_BASES, MergeBase, Snapshot, encode_merge_bases, merge_bases};
use bough_names::{BranchName, FileId};
use bough_tree::btree::{Mutation, Op};
use bough_tree::diff::{Change, diff_buffered, same_entry, visible_at, visible_changes_at};
use bough_tree::head::{Head, TreeSnapshot};
use bough_tree::page::leaf::{Entry, ValueLoc};

use crate::Partition;
use crate::lineage::{Found, Lineage, MergeBaseInfo, NoCommonState, lost_pairs};

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
    /// The newer user timestamp wins, by the write path's rule (last writer wins, the
    /// incoming source on a tie): a delete counts with its tombstone's timestamp, so an
    /// older write never brings a deleted key back and an older delete never removes a
    /// newer write. A key absent without a tombstone (expired, truncated) has no timestamp
    /// and loses against an entry or a delete.
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
    /// On a fast-forward, also count the keys the adopted state changes on the target
    /// ([`MergeReport::applied`]): a diff of the source against the base, whose cost follows
    /// how far they diverged. Off by default, so a fast-forward costs the same however many
    /// keys it brings (it reads no data pages).
    pub count_fast_forward: bool,
}

impl Default for MergeOptions {
    fn default() -> Self {
        MergeOptions {
            policy: ConflictPolicy::Fail,
            dry_run: false,
            fast_forward: true,
            count_fast_forward: false,
        }
    }
}

/// A key both sides changed to different results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The key.
    pub key: Vec<u8>,
    /// The target's entry: a live one, or the tombstone of its delete (with the delete's
    /// timestamp, [`Entry::is_tombstone`]); `None` when the key is absent there without a
    /// tombstone (expired, truncated).
    pub ours: Option<Entry>,
    /// The source's entry, likewise.
    pub theirs: Option<Entry>,
}

/// What a merge did (or would do, on a dry run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// The target adopted the source's state by reference.
    pub fast_forward: bool,
    /// Keys written or deleted on the target. On a fast-forward: the keys the adopted state
    /// changes, counted only when [`MergeOptions::count_fast_forward`] asks (0 otherwise).
    pub applied: usize,
    /// Conflicts found (with `Fail`, the merge did not commit).
    pub conflicts: Vec<Conflict>,
    /// Conflicts settled by the policy.
    pub resolved: usize,
    /// Whether the target changed.
    pub committed: bool,
    /// The merge base the three states were compared against (`None` for a cherry-pick
    /// or a revert, which compare the two ends of a range).
    pub base: Option<MergeBaseInfo>,
}

/// How to re-home.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RehomeOptions {
    /// Keep the branch's merge bases: the merges they serve stay possible, and the states
    /// they pin stay on storage (reported as [`RehomeReport::kept_bases_bytes`]).
    pub keep_merge_bases: bool,
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
    /// The pairs of branches that could merge before and cannot after (their merge base was
    /// a state this branch's merge bases held), each in name order, sorted; empty when the
    /// bases are kept.
    pub merges_lost: Vec<(BranchName, BranchName)>,
    /// Pairs that lose their merge base beyond the first
    /// 1,000 listed in [`merges_lost`](Self::merges_lost).
    pub merges_lost_unlisted: u64,
    /// Merge bases kept ([`RehomeOptions::keep_merge_bases`]).
    pub merge_bases_kept: usize,
    /// What keeping them costs: bytes of the pages the kept merge bases reference outside
    /// the branch's own files (distinct pages; they stay on storage while the bases do).
    pub kept_bases_bytes: u64,
}

pub(crate) fn after(c: &Change) -> Option<&Entry> {
    match c {
        Change::Added(e) | Change::Changed { new: e, .. } => Some(e),
        Change::Removed(_) => None,
    }
}

/// Whether both sides ended at the same entry: same value (overflow values by content, since
/// two branches writing the same value store it in different pages), timestamp and expiry.
pub(crate) fn same(
    ours: &TreeSnapshot,
    a: Option<&Entry>,
    theirs: &TreeSnapshot,
    b: Option<&Entry>,
) -> CatalogResult<bool> {
    match (a, b) {
        (None, None) => Ok(true),
        (Some(x), Some(y)) => Ok(same_entry(ours, x, theirs, y)?),
        _ => Ok(false),
    }
}

/// Whether the source's side wins under [`ConflictPolicy::NewestTimestamp`]: the write
/// path's rule, as if the source's entry (or tombstone) arrived at the target — it wins
/// when its timestamp is at least the target's. A side absent without a tombstone has no
/// timestamp: it loses against anything (both absent cannot conflict).
fn newest_is_theirs(ours: Option<&Entry>, theirs: Option<&Entry>) -> bool {
    match (ours, theirs) {
        (Some(o), Some(t)) => bough_tree::lww::wins(t.timestamp, o.timestamp),
        (None, Some(_)) => true,
        (_, None) => false,
    }
}

fn encode_bases(bases: &[MergeBase]) -> CatalogResult<Vec<u8>> {
    encode_merge_bases(bases).map_err(|e| CatalogError::InvalidArgument {
        what: format!("cannot encode merge bases: {e}"),
    })
}

impl Partition {
    /// Whether `base` still describes a state of the branch it names: that branch is live
    /// and its current incarnation is the one the base was recorded with. Anything else can
    /// never be used by a merge again. An unreadable `CURRENT_TERM` proves nothing, so the
    /// base counts as current (kept) then.
    pub fn base_is_current(&self, base: &MergeBase) -> bool {
        match self.incarnation_of(&base.branch) {
            Ok(Some(first)) => base.state.meta.term >= first,
            Ok(None) => false,
            Err(_) => true,
        }
    }

    /// Drops from `head`'s manifest every merge base that is no longer current (see
    /// [`base_is_current`](Self::base_is_current)): its branch was deleted, or deleted and
    /// created again. Such a base can never be used, but GC must keep every page it
    /// references while a manifest records it. Commits (one metadata record) only when
    /// something is dropped; returns how many were. Run it in the head's write queue.
    pub fn prune_merge_bases(&self, head: &mut Head, now_ms: u64) -> CatalogResult<usize> {
        let bad =
            |r| CatalogError::corruption(head.manifest_path(), 0, format!("merge bases: {r:?}"));
        let bases = merge_bases(head.extensions()).map_err(bad)?;
        let before = bases.len();
        let kept: Vec<MergeBase> = bases
            .into_iter()
            .filter(|b| self.base_is_current(b))
            .collect();
        let dropped = before - kept.len();
        if dropped > 0 {
            head.stage_extension(MERGE_BASES, encode_bases(&kept)?);
            head.checkpoint(now_ms)?;
        }
        Ok(dropped)
    }

    /// The merge base of `target` and `source` (`source_exts`: the source's manifest
    /// extensions, as of the snapshot merged), by the rule in [`crate::lineage`]: their pair
    /// record, else the state of their lowest common ancestor in the fork tree both contain;
    /// or why no common state is retained.
    pub fn merge_base(
        &self,
        target: &Head,
        source: &BranchName,
        source_exts: &[(u64, Vec<u8>)],
    ) -> IoResult<Result<Found, NoCommonState>> {
        let mut lineage = Lineage::new(self);
        lineage.with_extensions(target.branch(), target.extensions())?;
        lineage.with_extensions(source, source_exts)?;
        lineage.resolve(target.branch(), source)
    }

    fn record_base(
        &self,
        target: &mut Head,
        source: &BranchName,
        state: &Snapshot,
        now_ms: u64,
    ) -> CatalogResult<()> {
        let bad =
            |r| CatalogError::corruption(target.manifest_path(), 0, format!("merge bases: {r:?}"));
        let mut bases = merge_bases(target.extensions()).map_err(bad)?;
        bases.retain(|b| &b.branch != source);
        bases.push(MergeBase {
            branch: source.clone(),
            recorded_at_ms: now_ms,
            state: base_state(state),
        });
        target.stage_extension(MERGE_BASES, encode_bases(&bases)?);
        Ok(())
    }

    /// Merges `source` (a checkpointed snapshot of branch `source_name`, with its manifest
    /// extensions) into `target`, as of `now_ms` (entries expired by then are absent on
    /// every side). Run it in the target's write queue.
    pub fn merge(
        &self,
        target: &mut Head,
        source_name: &BranchName,
        source: &Snapshot,
        opts: MergeOptions,
        now_ms: u64,
    ) -> IoResult<MergeReport> {
        let found = self.merge_base(target, source_name, &source.extensions)??;
        self.merge_from(
            target,
            source_name,
            source,
            found,
            opts,
            Sides::Merge,
            now_ms,
        )
    }

    /// Rebases `target` onto `onto` (a checkpointed snapshot of branch `onto_name`): the
    /// target's changes since its merge base with `onto` replayed on `onto`'s state, as one
    /// commit on the target, and `onto`'s state recorded as their merge base (so merging the
    /// target into `onto` next is a fast-forward while `onto` does not move). A target with
    /// no changes of its own takes `onto`'s state by reference.
    ///
    /// The result is computed as the merge of `onto` into the target (the same diffs,
    /// conflicts and one commit), with the sides named as a rebase sees them: in the
    /// policy and in each [`Conflict`], *ours* is `onto` (the state replayed on) and *theirs*
    /// the target's own change; `NewestTimestamp` lets the target's change win a tie.
    pub fn rebase(
        &self,
        target: &mut Head,
        onto_name: &BranchName,
        onto: &Snapshot,
        opts: MergeOptions,
        now_ms: u64,
    ) -> IoResult<MergeReport> {
        let found = self.merge_base(target, onto_name, &onto.extensions)??;
        self.merge_from(target, onto_name, onto, found, opts, Sides::Rebase, now_ms)
    }

    #[allow(clippy::too_many_arguments)]
    fn merge_from(
        &self,
        target: &mut Head,
        source_name: &BranchName,
        source: &Snapshot,
        (base, info): Found,
        opts: MergeOptions,
        sides: Sides,
        now_ms: u64,
    ) -> IoResult<MergeReport> {
        let files = self.files().clone();
        let base_snap = TreeSnapshot::from_record(files.clone(), &base.state)?;
        let src_snap = TreeSnapshot::from_record(files, source)?;
        let tgt_snap = target.snapshot();
        let t_changes = visible_changes_at(diff_buffered(&base_snap, &tgt_snap)?.0, now_ms);
        let mut report = MergeReport {
            base: Some(info),
            ..MergeReport::default()
        };
        if t_changes.is_empty() && opts.fast_forward {
            // Nothing visible changed on the target: the source's state is the merge result
            // (what the target holds beyond it is expired, so invisible either way). Its
            // cost must not follow the divergence: the keys it brings are counted (a diff)
            // only when asked.
            report.fast_forward = true;
            if opts.count_fast_forward {
                report.applied = visible_at(diff_buffered(&base_snap, &src_snap)?.0, now_ms).len();
            }
            if !opts.dry_run {
                self.record_base(target, source_name, source, now_ms)?;
                target.adopt(source, now_ms)?;
                report.committed = true;
            }
            return Ok(report);
        }
        Self::refuse_if_head_protected(target, "a merge into it that is not a fast-forward")?;
        // Each side's deletes keep their tombstones: a key a side deleted is absent to the
        // merge (so tombstone vs absent is no difference), but the delete has a timestamp —
        // "newest wins" compares it, a conflict reports it, and taking the source's delete
        // writes its tombstone, or an older write arriving later would resurrect the key.
        let s_changes = visible_changes_at(diff_buffered(&base_snap, &src_snap)?.0, now_ms);
        let ours: std::collections::BTreeMap<Vec<u8>, (Change, Option<Entry>)> = t_changes
            .into_iter()
            .map(|v| (v.key, (v.change, v.tombstone)))
            .collect();
        let mut muts = Vec::new();
        for sv in s_changes {
            let (key, sc, s_tomb) = (sv.key, sv.change, sv.tombstone);
            let theirs = after(&sc);
            let take_theirs = match ours.get(&key) {
                None => true,
                Some((tc, t_tomb)) => {
                    let mine = after(tc);
                    if same(&tgt_snap, mine, &src_snap, theirs)? {
                        false
                    } else {
                        // What each side holds, deletes as their tombstones.
                        let ours_entry = mine.or(t_tomb.as_ref());
                        let theirs_entry = theirs.or(s_tomb.as_ref());
                        let decision = decide(opts.policy, sides, ours_entry, theirs_entry);
                        match decision {
                            Some(d) => {
                                report.resolved += 1;
                                d
                            }
                            None => {
                                let (o, t) = (ours_entry.cloned(), theirs_entry.cloned());
                                let (ours, theirs) = match sides {
                                    Sides::Merge => (o, t),
                                    Sides::Rebase => (t, o),
                                };
                                report.conflicts.push(Conflict {
                                    key: key.clone(),
                                    ours,
                                    theirs,
                                });
                                false
                            }
                        }
                    }
                }
            };
            if take_theirs {
                let op = take_op(&src_snap, theirs, s_tomb.as_ref())?;
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
    ) -> CatalogResult<()> {
        Self::refuse_if_head_protected(target, "resetting it")?;
        self.record_base(target, source_name, source, now_ms)?;
        Ok(target.adopt(source, now_ms)?)
    }

    /// Copies into `head`'s own files every page it still borrows from files other branches
    /// (or older terms) wrote, and forgets its merge bases (unless
    /// [`RehomeOptions::keep_merge_bases`]), so those branches can be deleted and their
    /// files collected. The report names the merges forgetting them makes impossible, or,
    /// when kept, what they cost.
    pub fn rehome(
        &self,
        head: &mut Head,
        opts: RehomeOptions,
        now_ms: u64,
    ) -> IoResult<RehomeReport> {
        let bad = |r| IoError::corruption(head.manifest_path(), 0, format!("merge bases: {r:?}"));
        let bases = merge_bases(head.extensions()).map_err(bad)?;
        let mut report = RehomeReport::default();
        if opts.keep_merge_bases {
            report.merge_bases_kept = bases.len();
            report.kept_bases_bytes = self.bytes_outside(head, &bases)?;
        } else if !bases.is_empty() {
            let mut before = Lineage::new(self);
            before.with_extensions(head.branch(), head.extensions())?;
            let mut after = Lineage::new(self);
            after.with_extensions(head.branch(), head.extensions())?;
            after.drop_bases(head.branch())?;
            (report.merges_lost, report.merges_lost_unlisted) =
                lost_pairs(&mut before, &mut after, head.branch())?;
        }
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
        let pages: u64 = victims.iter().filter_map(|f| live.get(f)).sum();
        if !opts.keep_merge_bases {
            head.stage_extension(MERGE_BASES, encode_bases(&[])?);
        }
        let copied = if victims.is_empty() {
            head.checkpoint(now_ms)?;
            0
        } else {
            head.relocate_files(&victims, now_ms)?
        };
        debug_assert!(copied <= pages);
        report.files_rehomed = victims.len();
        report.pages_copied = copied;
        report.bytes_copied = copied * u64::from(self.config().page_size);
        Ok(report)
    }

    /// Bytes of the distinct pages `bases` reference in files `head`'s own lineage did not
    /// write: what they keep on storage once the head stops borrowing.
    fn bytes_outside(&self, head: &Head, bases: &[MergeBase]) -> IoResult<u64> {
        let mut pages = HashSet::new();
        for b in bases {
            let snap = TreeSnapshot::from_record(self.files().clone(), &b.state)?;
            snap.for_each_page(&mut |a| {
                let own = snap
                    .ranges
                    .resolve(a.file_id())
                    .is_some_and(|r| &r.branch == head.branch() && r.term == head.term());
                if !own {
                    pages.insert(a);
                }
            })?;
        }
        Ok(pages.len() as u64 * u64::from(self.config().page_size))
    }
}

/// Which way round a merge's sides are named (see [`Partition::rebase`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sides {
    /// The source's changes come into the target: *ours* is the target.
    Merge,
    /// A rebase computed as the merge of `onto` into the branch: *ours* is `onto` (the
    /// source here), *theirs* the branch's own changes (the target's).
    Rebase,
}

/// What `policy` decides for a conflict, in the merge's terms: `Some(true)` takes the
/// source's side, `Some(false)` keeps the target's, `None` leaves it a conflict.
/// `ours`/`theirs` are the target's and the source's entries (deletes as tombstones).
pub(crate) fn decide(
    policy: ConflictPolicy,
    sides: Sides,
    ours: Option<&Entry>,
    theirs: Option<&Entry>,
) -> Option<bool> {
    match (policy, sides) {
        (ConflictPolicy::Fail, _) => None,
        (ConflictPolicy::Ours, Sides::Merge) | (ConflictPolicy::Theirs, Sides::Rebase) => {
            Some(false)
        }
        (ConflictPolicy::Theirs, Sides::Merge) | (ConflictPolicy::Ours, Sides::Rebase) => {
            Some(true)
        }
        (ConflictPolicy::NewestTimestamp, Sides::Merge) => Some(newest_is_theirs(ours, theirs)),
        // The branch's own change is what arrives (on `onto`): it wins a tie.
        (ConflictPolicy::NewestTimestamp, Sides::Rebase) => Some(!newest_is_theirs(theirs, ours)),
    }
}

/// The operation that makes the target hold `after` (an entry of `snap`), or — when it ends
/// absent — the delete behind it: its tombstone when it was deleted (so the delete still
/// beats older writes), a plain removal when it expired or was truncated.
pub(crate) fn take_op(
    snap: &TreeSnapshot,
    after: Option<&Entry>,
    tombstone: Option<&Entry>,
) -> IoResult<Op> {
    Ok(match after {
        None => match tombstone {
            Some(t) => Op::ReplaceWithTombstone {
                timestamp: t.timestamp,
                expire_at: t.expire_at,
            },
            // Removed by expiry or truncate: nothing to remember.
            None => Op::ForceDelete,
        },
        Some(e) => Op::Replace {
            value: match &e.value {
                ValueLoc::Inline(v) => v.clone(),
                ValueLoc::Overflow { first, pages, len } => {
                    snap.read_overflow(*first, *pages, *len)?
                }
                // `visible_at` leaves live entries only.
                ValueLoc::Tombstone => {
                    return Err(IoError::corruption(
                        "<merge>",
                        0,
                        "a tombstone reached a merge as a value",
                    ));
                }
            },
            timestamp: e.timestamp,
            expire_at: e.expire_at,
        },
    })
}

/// A state as a merge base keeps it: the tree, and of the branch's metadata only its
/// version (which the lineage rule compares).
pub(crate) fn base_state(state: &Snapshot) -> Snapshot {
    let mut out = state.clone();
    out.extensions.clear();
    if let Ok(Some(v)) = bough_manifest::commit_version(&state.extensions) {
        bough_manifest::set_commit_version(&mut out.extensions, v);
    }
    // A fork by reference: the base holds the parent's buffered commits, which only its
    // log has (bounded at the fork version; `TreeSnapshot::from_record` replays them). A
    // head's own `LOG` (a checkpointed state's, read as its tree alone) is not kept: it
    // would only keep that log file from GC.
    if let Ok(Some(refs)) = bough_manifest::log_refs(&state.extensions)
        && bough_manifest::inherited_only(&refs)
    {
        bough_manifest::ext::set(
            &mut out.extensions,
            bough_manifest::LOG,
            bough_manifest::encode_log_refs(&refs),
        );
    }
    out
}
