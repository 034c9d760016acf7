//! The bound on open branch heads: past `max_open_branches`, heads nobody holds close
//! (and replay again lazily on next use).

use std::sync::Arc;

use bough_names::BranchName;

use super::{PartitionEntry, Store};

impl Store {
    /// Keeps the number of open branch heads (replayed manifests, mapping chunks in memory)
    /// bounded: beyond `max_open_branches`, heads nobody holds — no handle, no queued job,
    /// no reader snapshot older than the current one — are closed; they replay again lazily
    /// on next use.
    pub(super) fn evict_idle_branches(&self) {
        let limit = self.inner.opts.max_open_branches;
        let parts: Vec<Arc<PartitionEntry>> =
            self.inner.partitions.lock().values().cloned().collect();
        let mut open: usize = parts.iter().map(|p| p.branches.lock().len()).sum();
        for p in parts {
            if open <= limit {
                return;
            }
            let mut branches = p.branches.lock();
            // Only as many as must close: past the limit every creation closes one, and a
            // pass over every open branch per creation would make creating one cost what
            // the open branches count.
            let idle: Vec<BranchName> = branches
                .iter()
                .filter(|(_, b)| Arc::strong_count(b) == 1 && b.published.live().len() <= 1)
                .map(|(n, _)| n.clone())
                .take(open - limit)
                .collect();
            let mut closed = Vec::new();
            for n in idle {
                if open <= limit {
                    break;
                }
                closed.extend(branches.remove(&n));
                open -= 1;
            }
            drop(branches);
            // A closing fork by reference shares its parent's tree rather than copying the
            // inherited writes: open parents checkpoint first, closing ones close first.
            self.offer_awaited_shares(&p, &closed);
            closed.sort_by_cached_key(|b| !b.head.lock().forks_waiting());
            // A head poisoned by an upload whose outcome is unknown must not be reopened at
            // its term: on shared storage the next open takes the branch over anew.
            for b in &closed {
                let mut head = b.head.lock();
                if head.poisoned().is_some() {
                    p.part.disown(head.branch(), head.term());
                } else if !self.inner.read_only
                    && let Err(e) = head
                        .checkpoint_buffer(self.inner.clock.now_ms())
                        .and_then(|()| head.close_clean())
                {
                    // Closing an idle head is a clean close of it: its manifest is sealed
                    // as at store close. Every acknowledged commit is durable either way.
                    tracing::warn!(branch = %b.label, error = %e, "could not seal the manifest of a closed idle head");
                }
            }
            // A reader may still hold a closed head's current snapshot: GC keeps pinning it,
            // as for a deleted branch, until no reader holds it. (No new reader can come: a
            // view needs a handle, and a closed head had none.)
            let mut retired = p.retired.lock();
            retired.retain(|r| !r.held_by_readers().is_empty());
            retired.extend(
                closed
                    .into_iter()
                    .map(|b| b.published.clone())
                    .filter(|pb| !pb.held_by_readers().is_empty()),
            );
        }
    }
}
