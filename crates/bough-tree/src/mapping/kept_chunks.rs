//! [`KeptChunks`]: the on-disk level-0 mapping nodes one version of the table reaches,
//! decoded once and kept with that version (in the snapshot's
//! [`crate::btree::TopNodes`]), so resolving a page id skips the radix walk — two or
//! more page fetches, each a file-table lock, a page-cache shard lock and a reference
//! count — when its chunk was resolved before.
//!
//! Sound because the on-disk chunks are a function of the on-disk root alone: the kept
//! nodes are tied to the root they were read under, and a view with another root never
//! uses them. [`MappingView::raw`](super::MappingView::raw) asks the view's dirty chunks
//! first, as without them.
//! Bounded: chunks `0..MAX_KEPT_CHUNKS` (each maps `fanout` ids: 512 with 4 KiB pages,
//! so the first 131,072 ids), at most that many mapping pages per version.

use std::sync::{Arc, OnceLock};

use bough_manifest::PageAddr;

use crate::error::TreeResult;
use crate::lazy_cells::LazyCells;
use crate::page::mapping::MappingNode;

/// Chunks kept per version (ids above them resolve through the walk, as before).
pub const MAX_KEPT_CHUNKS: usize = Cells::CELLS;

type Cells = LazyCells<Option<Arc<MappingNode>>, 16>;

/// The kept chunks of one table version (see the module docs).
#[derive(Debug, Default)]
pub struct KeptChunks {
    /// The on-disk root the kept chunks were read under (set by the first lookup).
    root: OnceLock<PageAddr>,
    cells: Cells,
}

impl KeptChunks {
    /// Slot `slot` of chunk `chunk` of the table whose on-disk root is `root`, through the
    /// kept node (`load` walks to it the first time); `None` when the chunk is past the
    /// kept ones or these were kept for another root.
    pub(crate) fn slot(
        &self,
        root: PageAddr,
        chunk: u32,
        slot: usize,
        load: impl FnOnce() -> TreeResult<Option<Arc<MappingNode>>>,
    ) -> TreeResult<Option<u64>> {
        if *self.root.get_or_init(|| root) != root {
            return Ok(None);
        }
        let Some(cell) = usize::try_from(chunk).ok().and_then(|c| self.cells.cell(c)) else {
            return Ok(None);
        };
        let node = match cell.get() {
            Some(n) => n,
            None => {
                let loaded = load()?;
                // A racing lookup may have set it first: the same node either way.
                let _ = cell.set(loaded);
                match cell.get() {
                    Some(n) => n,
                    None => return Ok(None),
                }
            }
        };
        // An absent chunk maps nothing (0 = unmapped), as the walk answers.
        Ok(Some(
            node.as_ref()
                .map_or(0, |n| n.slots.get(slot).copied().unwrap_or(0)),
        ))
    }

    /// Chunks kept now (for tests).
    pub fn kept_count(&self) -> usize {
        self.cells.filled()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(page: u32) -> PageAddr {
        PageAddr::new(1, page).expect("a valid address")
    }

    #[test]
    fn chunks_kept_under_one_root_serve_that_root_only() {
        let kept = KeptChunks::default();
        let node = Arc::new(MappingNode {
            level: 0,
            slots: vec![11, 12, 13],
        });
        let mut loads = 0;
        let mut load = || {
            loads += 1;
            Ok(Some(node.clone()))
        };
        assert_eq!(kept.slot(addr(5), 0, 1, &mut load).ok(), Some(Some(12)));
        assert_eq!(kept.slot(addr(5), 0, 2, &mut load).ok(), Some(Some(13)));
        assert_eq!(loads, 1, "the chunk is walked to once");
        // Another on-disk root: never answered from these.
        let other = kept.slot(addr(6), 0, 1, || panic!("not loaded for another root"));
        assert_eq!(other.ok(), Some(None));
        // Past the kept chunks: the caller walks.
        let past = kept.slot(addr(5), MAX_KEPT_CHUNKS as u32, 0, || {
            panic!("not loaded past the kept chunks")
        });
        assert_eq!(past.ok(), Some(None));
        // An absent chunk maps nothing, as the walk says.
        assert_eq!(kept.slot(addr(5), 3, 0, || Ok(None)).ok(), Some(Some(0)));
        assert_eq!(kept.kept_count(), 2);
    }
}
