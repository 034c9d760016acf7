//! What the store reads ahead as a partition or a branch opens, so that the first
//! operation after the open does not pay for all of it: the used-terms scan a branch
//! creation needs, and a branch's index and mapping pages.

use std::sync::Arc;

use crate::Backend;

use super::{BranchEntry, Inner, PartitionEntry};

/// Starts the used-terms scan of a partition that opened with many branches (a local
/// writer only: in cloud mode another owner may write terms meanwhile).
pub(super) fn after_partition_open(inner: &Inner, entry: &Arc<PartitionEntry>) {
    if !inner.read_only && inner.opts.backend != Backend::Object {
        prefill_used_terms(entry);
    }
}

/// Prewarms a branch that just opened, where it pays: local files only. In memory there
/// is nothing to read ahead, and in cloud mode every page would be a request on the
/// opening thread (the cloud tier has a prewarm of its own, of whole objects).
pub(super) fn after_branch_open(inner: &Inner, entry: &BranchEntry) {
    if inner.opts.prewarm_on_open && inner.cloud.is_none() && inner.opts.backend != Backend::Memory
    {
        prewarm(entry);
    }
}

/// Reads a branch's index and mapping pages into the cache as it opens, on the opening
/// thread (a get right after the open then reads only its leaf). A failure is logged and
/// left to the gets, which meet the same page and report it.
fn prewarm(entry: &BranchEntry) {
    match entry.published.load().prewarm_structure() {
        Ok(done) => tracing::debug!(branch = %entry.label, ?done, "prewarmed"),
        Err(e) => tracing::warn!(branch = %entry.label, error = %e, "prewarm stopped"),
    }
}

/// Branches from which a partition's open starts the scan a branch creation needs (every
/// manifest read once, see `Partition::prefill_used_terms`) on a thread of its own. Below
/// it the scan is quick, and runs at the first creation as before.
const PREFILL_FROM_BRANCHES: usize = 1_024;

/// Starts the used-terms scan of a partition with many branches in the background, so the
/// first branch created after opening it waits for what is left of the scan, not all of it.
/// A failure is logged and leaves the scan to the first creation.
fn prefill_used_terms(entry: &Arc<PartitionEntry>) {
    let many = entry
        .part
        .branches()
        .is_ok_and(|b| b.len() >= PREFILL_FROM_BRANCHES);
    if !many {
        return;
    }
    let entry = entry.clone();
    let spawned = std::thread::Builder::new()
        .name("bough-term-scan".into())
        .spawn(move || {
            if let Err(e) = entry.part.prefill_used_terms() {
                tracing::debug!(partition = %entry.part.dir(), error = %e, "used-terms scan left to the first branch creation");
            }
        });
    if let Err(e) = spawned {
        tracing::debug!(error = %e, "cannot start the used-terms scan");
    }
}
