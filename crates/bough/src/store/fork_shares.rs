//! Forks by reference waiting for their parent's tree (ARCHITECTURE.md, "Forks"): before
//! the store checkpoints such a fork on its own initiative (closing an idle head, a
//! maintenance pass), the parent checkpoints at the fork version first, so the fork's
//! checkpoint shares the parent's pages instead of writing its own copy of every leaf the
//! inherited writes touch. Without it, thousands of forks of one idle parent that each
//! wrote a key each rewrote the parent's buffered writes when their heads closed.

use std::collections::BTreeSet;
use std::sync::Arc;

use bough_names::BranchName;

use super::{Branch, BranchEntry, BranchOp, PartitionEntry, Store};

impl Store {
    /// Has the open parents that forks among `forks` wait for checkpoint, each through its
    /// own write queue (no head lock is held while it runs). Best effort: the share saves
    /// work and holds no data, so a failure is logged and the forks checkpoint on their own.
    pub(super) fn offer_awaited_shares(&self, p: &PartitionEntry, forks: &[Arc<BranchEntry>]) {
        let parents: BTreeSet<BranchName> = forks
            .iter()
            .filter_map(|b| b.head.lock().awaited_parent().cloned())
            .collect();
        for name in parents {
            // A parent that is not open has nothing buffered to offer: its close
            // checkpointed it (which offered its tree) or a restart lost the share.
            let Some(entry) = p.branches.lock().get(&name).cloned() else {
                continue;
            };
            let parent = Branch {
                store: self.clone(),
                entry,
            };
            if let Err(e) = parent.call(|reply| BranchOp::CheckpointIfDirty { reply }) {
                tracing::warn!(branch = %parent.entry.label, error = %e, "the parent did not checkpoint for its forks; they will not share its tree");
            }
        }
    }
}
