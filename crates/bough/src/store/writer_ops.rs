//! What a shard thread does for each [`BranchOp`]: one function per request, run with the
//! branch head held, in the branch's queue order.

use super::*;

/// Commits `muts` on their own and counts what took effect.
pub(super) fn write_counted(head: &mut Head, muts: &[Mutation], now: u64) -> Result<WriteReport> {
    // Through the tree: only it knows which writes lost to newer ones.
    let superseded = head.commit_direct(muts, now)?.superseded;
    Ok(WriteReport {
        applied: (muts.len() as u64).saturating_sub(superseded),
        superseded,
    })
}

/// One piece of a truncate: removes the entries `start` holds from `from` on, at most
/// `limit` of them, in one commit, and says where the next piece begins.
///
/// An entry written since `start` (by a put or delete that committed between two pieces)
/// is kept: the piece removes a key only while its entry is still the one `start` held —
/// same timestamp, expiry and value (for an overflow value, its length: compaction may
/// have moved its pages). A write indistinguishable from the entry it replaced is removed
/// as if it had come before the truncate.
pub(super) fn truncate_piece(
    head: &mut Head,
    now: u64,
    start: Option<Arc<TreeSnapshot>>,
    from: Option<&[u8]>,
    limit: usize,
) -> Result<TruncateProgress> {
    let current = head.snapshot();
    let start = start.unwrap_or_else(|| current.clone());
    let unchanged_since_start = Arc::ptr_eq(&start, &current);
    let mut cursor = btree::Cursor::seek(start.as_ref(), start.root, from)?;
    let mut muts = Vec::new();
    let mut seen = 0;
    let mut next = None;
    while let Some(e) = cursor.next_entry(start.as_ref())? {
        if seen == limit.max(1) {
            next = Some(e.key);
            break;
        }
        seen += 1;
        let keep = !unchanged_since_start
            && !btree::get(current.as_ref(), current.root, &e.key)?
                .is_some_and(|now| same_write(&now, &e));
        if !keep {
            muts.push(Mutation {
                key: e.key,
                op: Op::ForceDelete,
            });
        }
    }
    if !muts.is_empty() {
        head.commit(&muts, now)?;
    }
    Ok(TruncateProgress { start, next })
}

/// Whether `now` is still the entry `then` was (see [`truncate_piece`]).
fn same_write(now: &Entry, then: &Entry) -> bool {
    now.timestamp == then.timestamp
        && now.expire_at == then.expire_at
        && match (&now.value, &then.value) {
            (ValueLoc::Inline(a), ValueLoc::Inline(b)) => a == b,
            (ValueLoc::Overflow { len: a, .. }, ValueLoc::Overflow { len: b, .. }) => a == b,
            (ValueLoc::Tombstone, ValueLoc::Tombstone) => true,
            _ => false,
        }
}

/// Writes the mapping's dirty chunks into mapping pages: an idle branch's mapping changes
/// go there, so creating a branch from it later writes only what changed since.
pub(super) fn checkpoint_if_dirty(head: &mut Head, now: u64) -> Result<()> {
    // (The write buffer was checkpointed before this request was served: an idle branch
    // keeps nothing buffered past a maintenance round.)
    if head.dirty_chunks() > 0 {
        head.checkpoint(now)?;
    }
    Ok(())
}

pub(super) fn archive(
    head: &mut Head,
    now: u64,
    part: &PartitionEntry,
    ts: u64,
) -> Result<ArchiveName> {
    // A new durable referent of the branch's files: compaction must see it.
    let _catalog = part.catalog_change();
    Ok(part.part.archive(head, ts, now)?)
}

pub(super) fn restore(
    head: &mut Head,
    now: u64,
    branch: &BranchEntry,
    part: &PartitionEntry,
    archive: &ArchiveName,
    backup: BranchName,
    shards: usize,
) -> Result<()> {
    let _catalog = part.catalog_change();
    let mut restored = part.part.restore(head, archive, &backup, now)?;
    if let Ok(b) = part.part.open_head(&backup) {
        let be = new_branch_entry(b, &branch.dir, shards);
        part.branches.lock().insert(backup, be);
    }
    restored.share_published(branch.published.clone());
    *head = restored;
    Ok(())
}

/// Restores the branch to its state at `at_ms`, keeping the state it replaces as `backup`.
#[allow(clippy::too_many_arguments)]
pub(super) fn restore_at(
    head: &mut Head,
    now: u64,
    branch: &BranchEntry,
    part: &PartitionEntry,
    at_ms: u64,
    window_ms: u64,
    backup: BranchName,
    shards: usize,
) -> Result<()> {
    let _catalog = part.catalog_change();
    let mut restored = part.part.restore_at(head, at_ms, &backup, now, window_ms)?;
    if let Ok(b) = part.part.open_head(&backup) {
        let be = new_branch_entry(b, &branch.dir, shards);
        part.branches.lock().insert(backup, be);
    }
    restored.share_published(branch.published.clone());
    *head = restored;
    Ok(())
}

/// Creates branch `name` at this branch's state at `at_ms`.
pub(super) fn branch_at(
    head: &mut Head,
    now: u64,
    part: &PartitionEntry,
    name: BranchName,
    at_ms: u64,
    window_ms: u64,
    shards: usize,
) -> Result<Arc<BranchEntry>> {
    let _catalog = part.catalog_change();
    let dir = part.part.dir();
    let new_head = part
        .part
        .branch_at(head, &name, at_ms, now, window_ms)
        .map_err(|e| Error::from(e).at(format!("{dir}@{name}")))?;
    let b = new_branch_entry(new_head, dir, shards);
    part.branches.lock().insert(name, b.clone());
    Ok(b)
}

pub(super) fn create_branch(
    head: &mut Head,
    now: u64,
    part: &PartitionEntry,
    name: BranchName,
    staging: Option<&str>,
    shards: usize,
) -> Result<Arc<BranchEntry>> {
    let _catalog = part.catalog_change();
    let dir = part.part.dir();
    let new_head = match staging {
        Some(purpose) => part.part.create_staging_branch(head, &name, purpose, now),
        None => part.part.create_branch(head, &name, now),
    }
    .map_err(|e| Error::from(e).at(format!("{dir}@{name}")))?;
    let b = new_branch_entry(new_head, dir, shards);
    part.branches.lock().insert(name, b.clone());
    Ok(b)
}

pub(super) fn delete(head: &mut Head, branch: &BranchEntry, part: &PartitionEntry) -> Result<()> {
    let _catalog = part.catalog_change();
    part.part.delete_branch(&branch.name)?;
    head.retire();
    part.retired.lock().push(branch.published.clone());
    branch.gone.store(true, Ordering::Release);
    part.branches.lock().remove(&branch.name);
    Ok(())
}

pub(super) fn prune_merge_bases(head: &mut Head, now: u64, part: &PartitionEntry) -> Result<()> {
    let _catalog = part.catalog_change();
    part.part.prune_merge_bases(head, now)?;
    Ok(())
}

pub(super) fn open_new_term(
    head: &mut Head,
    now: u64,
    branch: &BranchEntry,
    part: &PartitionEntry,
) -> Result<()> {
    let _catalog = part.catalog_change();
    let mut new_head = part.part.open_new_term(head, now)?;
    new_head.share_published(branch.published.clone());
    *head = new_head;
    Ok(())
}

pub(super) fn fork_point(
    head: &mut Head,
    now: u64,
) -> Result<(bough_manifest::Snapshot, Arc<TreeSnapshot>)> {
    let record = head.fork_point(now)?.snapshot;
    Ok((record, head.snapshot()))
}

pub(super) fn merge(
    head: &mut Head,
    now: u64,
    part: &PartitionEntry,
    source: &BranchName,
    record: &bough_manifest::Snapshot,
    pin: Arc<TreeSnapshot>,
    opts: MergeOptions,
) -> Result<MergeReport> {
    // Under the catalog lock GC cannot run between "the source state is pinned by a reader
    // snapshot" and "the target's manifest references it".
    let _catalog = part.catalog_change();
    let report = part.part.merge(head, source, record, opts, now)?;
    drop(pin);
    Ok(report)
}

pub(super) fn reset(
    head: &mut Head,
    now: u64,
    part: &PartitionEntry,
    source: &BranchName,
    record: &bough_manifest::Snapshot,
    pin: Arc<TreeSnapshot>,
) -> Result<()> {
    let _catalog = part.catalog_change();
    part.part.reset_to(head, source, record, now)?;
    drop(pin);
    Ok(())
}

pub(super) fn rehome(
    head: &mut Head,
    now: u64,
    part: &PartitionEntry,
    opts: RehomeOptions,
) -> Result<RehomeReport> {
    Ok(part.part.rehome(head, opts, now)?)
}
