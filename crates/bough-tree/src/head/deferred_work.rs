//! [`DeferredWork`]: what installing a background checkpoint leaves for after the head is
//! released — caching the pages it wrote and freeing what it replaced.
//!
//! Index and mapping pages a checkpoint wrote are what the next gets walk, and its leaves
//! what the next checkpoint merges into: both are cached. A checkpoint of a full buffer
//! writes tens of thousands of pages, and caching them (a shard lock and an eviction each)
//! took 25–56 ms; dropping the snapshot it replaced frees the frozen buffer runs (hundreds
//! of thousands of allocations, ~20 ms). A commit waiting for the head paid both. The pages
//! are durable and immutable at their addresses once the update is installed, so caching
//! them later (or never) changes no answer, and nobody reads the replaced snapshot through
//! the head any more: the store runs this work once it has let go of the head.
//!
//! **Invariant:** deferred work is only ever made from an installed update — pages past
//! the durable frontier may be overwritten by the next commit and must never be cached.

use super::txn::leaf_addrs;
use super::*;
use std::collections::HashSet;

/// Work an installed background checkpoint left (see the module docs).
pub struct DeferredWork {
    files: Arc<FileTable>,
    ranges: Arc<BranchFileMapping>,
    leaves: HashSet<PageAddr>,
    staged: HashMap<PageAddr, CachedPage>,
    /// The snapshot the install replaced, freed here (readers may still hold it).
    replaced: Option<Arc<TreeSnapshot>>,
}

impl std::fmt::Debug for DeferredWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeferredWork")
            .field("pages", &self.staged.len())
            .finish_non_exhaustive()
    }
}

impl DeferredWork {
    /// The work of an update that wrote `pages` (decoded in `staged`), resolved through
    /// `ranges` (the installed tree's). Overflow pages are read in runs past the cache:
    /// not kept; leaves only where the storage caches data pages.
    pub(crate) fn new(
        files: Arc<FileTable>,
        ranges: Arc<BranchFileMapping>,
        pages: &[StagedPage],
        staged: HashMap<PageAddr, CachedPage>,
    ) -> Self {
        let leaves = leaf_addrs(pages, files.caches_data_pages());
        DeferredWork {
            files,
            ranges,
            leaves,
            staged,
            replaced: None,
        }
    }

    /// How many written pages it holds (to cache or not).
    pub fn pages(&self) -> usize {
        self.staged.len()
    }

    /// Caches the pages and frees the replaced snapshot. A file gone meanwhile (collected)
    /// is skipped: its pages are unreachable.
    pub fn run(self) {
        drop(self.replaced);
        cache_written(&self.files, &self.ranges, &self.leaves, self.staged);
    }
}

/// Caches the written pages `staged` resolves through `ranges`: index and mapping pages,
/// and of the leaves those in `leaves`.
fn cache_written(
    files: &FileTable,
    ranges: &BranchFileMapping,
    leaves: &HashSet<PageAddr>,
    staged: HashMap<PageAddr, CachedPage>,
) {
    for (addr, page) in staged {
        let keep = match page {
            CachedPage::Mapping(_) | CachedPage::Tree(Node::Index(_)) => true,
            CachedPage::Tree(Node::Leaf(_)) => leaves.contains(&addr),
        };
        if keep && let Ok(h) = files.handle(ranges, addr.file_id()) {
            files.cache().insert(
                crate::cache::PageCache::key(h.cache_id, addr.page_index()),
                page,
            );
        }
    }
}

impl Head {
    /// Caches what a durable update wrote, now (the head's own thread pays).
    pub(crate) fn keep_written(&self, pages: &[StagedPage], staged: HashMap<PageAddr, CachedPage>) {
        let leaves = leaf_addrs(pages, self.files.caches_data_pages());
        cache_written(&self.files, &self.state.ranges, &leaves, staged);
    }

    /// Publishes an installed background checkpoint whose pages are `pages` (decoded in
    /// `staged`), leaving their caching and the replaced snapshot for
    /// [`Head::take_deferred_work`]; work nobody took yet runs first, so at most one waits.
    pub(crate) fn publish_deferring(
        &mut self,
        pages: &[StagedPage],
        staged: HashMap<PageAddr, CachedPage>,
    ) {
        if let Some(old) = self.deferred.take() {
            old.run();
        }
        let replaced = self.publish();
        // The ranges the new snapshot was published with (no second copy of them).
        let ranges = self.published.load().ranges.clone();
        let mut work = DeferredWork::new(self.files.clone(), ranges, pages, staged);
        work.replaced = Some(replaced);
        self.deferred = Some(work);
    }

    /// What the last installed background checkpoint left undone: the caller runs it once
    /// it has released the head.
    pub fn take_deferred_work(&mut self) -> Option<DeferredWork> {
        self.deferred.take()
    }
}
