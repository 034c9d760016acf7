//! [`TopNodes`]: the structure pages a lookup passes through first — the key tree's top
//! two levels and the mapping table's chunks ([`KeptChunks`]) — decoded once and kept with
//! the tree version that holds them, so a get reaches its leaf with one page fetch instead
//! of a mapping walk, a file-table lock, a page-cache shard lock and a reference-count
//! bump per level.
//!
//! Sound because a tree version is immutable: the same (root, mapping, file ranges) give
//! the same page for every id, so a node decoded once serves every later lookup of that
//! version. Whoever builds a snapshot of a *different* version gives it new, empty
//! `TopNodes` (`Head::publish` shares them only when the root, the mapping and the ranges
//! are the same), and a kept node is only used for the id it was read as. Every node
//! taken from here is still checked against its path by the lookup, as a page fetched
//! from the cache is.
//!
//! Bounded: the root and at most [`MAX_CHILDREN`] of its children, index pages only
//! (leaves stay in the page cache, within its budget), and at most
//! [`crate::mapping::MAX_KEPT_CHUNKS`] mapping pages, filled as lookups touch them: about
//! `(1 + 512 + 256) × page size` per tree version at most (3 MiB with 4 KiB pages),
//! pages the cache mostly holds as well (they are shared, not copied). The cells are
//! allocated 16 at a time as lookups reach them ([`LazyCells`]): an unread version costs
//! about 400 bytes, a version read at one key about 1.2 KiB.

use std::sync::{Arc, OnceLock};

use bough_manifest::PageId;

use super::node::Node;
use crate::error::TreeResult;
use crate::lazy_cells::LazyCells;
use crate::mapping::KeptChunks;
use crate::page::index::IndexNode;

/// Most children of the root kept (a root of a 4 KiB-page tree has up to a few hundred).
pub const MAX_CHILDREN: usize = Children::CELLS;

type Children = LazyCells<Kept, 32>;

/// One kept index node and the id it was read as.
type Kept = (PageId, Arc<IndexNode>);

/// The top two levels of one tree version (see the module docs).
#[derive(Debug, Default)]
pub struct TopNodes {
    root: OnceLock<Kept>,
    /// One cell per child of the root (up to [`MAX_CHILDREN`]).
    children: Children,
    /// The mapping table's chunks, for the leaf a lookup goes on to.
    chunks: KeptChunks,
}

/// A node a lookup goes through: borrowed from [`TopNodes`], or fetched.
pub(crate) enum Step<'a> {
    /// A kept index node.
    Kept(&'a Arc<IndexNode>),
    /// A node fetched from the tree (a leaf, or a page not kept).
    Fetched(Node),
}

impl TopNodes {
    /// The root `id`, kept once it has been read (an index page).
    pub(crate) fn root(
        &self,
        id: PageId,
        fetch: impl FnOnce() -> TreeResult<Node>,
    ) -> TreeResult<Step<'_>> {
        self.kept(&self.root, id, fetch)
    }

    /// Child `index` of the root, page `id`; kept once read when it is an index page.
    pub(crate) fn child(
        &self,
        index: usize,
        id: PageId,
        fetch: impl FnOnce() -> TreeResult<Node>,
    ) -> TreeResult<Step<'_>> {
        match self.children.cell(index) {
            Some(cell) => self.kept(cell, id, fetch),
            None => fetch().map(Step::Fetched),
        }
    }

    fn kept<'a>(
        &'a self,
        slot: &'a OnceLock<Kept>,
        id: PageId,
        fetch: impl FnOnce() -> TreeResult<Node>,
    ) -> TreeResult<Step<'a>> {
        if let Some((kept_id, n)) = slot.get() {
            if *kept_id == id {
                return Ok(Step::Kept(n));
            }
            // Never for one immutable version; a guard, not a path.
            return fetch().map(Step::Fetched);
        }
        let node = fetch()?;
        let Node::Index(n) = &node else {
            return Ok(Step::Fetched(node));
        };
        // A racing lookup may have set it first: the same page either way.
        let _ = slot.set((id, n.clone()));
        match slot.get() {
            Some((kept_id, n)) if *kept_id == id => Ok(Step::Kept(n)),
            _ => Ok(Step::Fetched(node)),
        }
    }

    /// The mapping chunks kept for this version.
    pub fn kept_chunks(&self) -> &KeptChunks {
        &self.chunks
    }

    /// Nodes kept now (for tests and stats).
    pub fn kept_count(&self) -> usize {
        usize::from(self.root.get().is_some()) + self.children.filled()
    }
}
