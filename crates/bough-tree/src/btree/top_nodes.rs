//! [`TopNodes`]: the structure pages a lookup passes through first — the key tree's top
//! three levels and the mapping table's chunks ([`KeptChunks`]) — decoded once and kept with
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
//! Bounded: the root, at most [`MAX_CHILDREN`] of its children and at most
//! [`MAX_GRANDCHILDREN`] of theirs, index pages only (leaves stay in the page cache, within
//! its budget), and at most [`crate::mapping::MAX_KEPT_CHUNKS`] mapping pages, filled as
//! lookups touch them: about `(1 + 512 + 2048 + 256) × page size` per tree version at most
//! (11 MiB with 4 KiB pages), pages the cache mostly holds as well (they are shared, not
//! copied). The third level is there for trees of a few million keys and more (four
//! levels with 4 KiB pages), where a get would otherwise fetch the leaf's parent from the
//! cache as well as the leaf. The cells are allocated 16 at a time as lookups reach them
//! ([`LazyCells`]): an unread version costs about 400 bytes, a version read at one key
//! about 2 KiB.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bough_manifest::PageId;

use super::node::Node;
use crate::error::TreeResult;
use crate::lazy_cells::LazyCells;
use crate::mapping::KeptChunks;
use crate::page::index::IndexNode;

/// Most children of the root kept (a root of a 4 KiB-page tree has up to a few hundred).
pub const MAX_CHILDREN: usize = Children::CELLS;

/// Most grandchildren of the root kept, over all children (the first ones lookups reach).
pub const MAX_GRANDCHILDREN: usize = 2048;

type Children = LazyCells<KeptChild, 32>;

/// One kept index node, the id it was read as, and whether a lookup has held it to the
/// key range its path gives it.
#[derive(Debug)]
pub(crate) struct Kept {
    id: PageId,
    pub(crate) node: Arc<IndexNode>,
    checked: AtomicBool,
}

impl Kept {
    fn new(id: PageId, node: Arc<IndexNode>) -> Self {
        Kept {
            id,
            node,
            checked: AtomicBool::new(false),
        }
    }

    /// Whether a lookup has checked this node against its path's range. A kept node is
    /// reached by one path only (its cell is the child index taken at each kept level
    /// above, all of one immutable version), so every lookup gives it the same range and
    /// one check that passed stands for all of them (`btree::get` skips the rest: they
    /// read a few cache lines of separators per level).
    pub(crate) fn checked(&self) -> bool {
        self.checked.load(Ordering::Relaxed)
    }

    /// Records that a lookup's check of this node passed.
    pub(crate) fn mark_checked(&self) {
        self.checked.store(true, Ordering::Relaxed);
    }
}

/// A kept child of the root, with one cell per child of its own.
#[derive(Debug)]
struct KeptChild {
    node: Kept,
    children: LazyCells<Kept, 32>,
}

/// The top three levels of one tree version (see the module docs).
#[derive(Debug)]
pub struct TopNodes {
    root: OnceLock<Kept>,
    /// One cell per child of the root (up to [`MAX_CHILDREN`]).
    children: Children,
    /// Grandchildren kept so far (at most `grandchild_limit`).
    grandchildren: AtomicUsize,
    /// [`MAX_GRANDCHILDREN`], or less in tests.
    grandchild_limit: usize,
    /// The mapping table's chunks, for the leaf a lookup goes on to.
    chunks: KeptChunks,
}

impl Default for TopNodes {
    fn default() -> Self {
        TopNodes {
            root: OnceLock::new(),
            children: Children::default(),
            grandchildren: AtomicUsize::new(0),
            grandchild_limit: MAX_GRANDCHILDREN,
            chunks: KeptChunks::default(),
        }
    }
}

/// A node a lookup goes through: borrowed from [`TopNodes`], or fetched.
pub(crate) enum Step<'a> {
    /// A kept index node.
    Kept(&'a Kept),
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
        kept(&self.root, id, fetch, |node| node).map(|(step, _)| step)
    }

    /// Child `index` of the root, page `id`; kept once read when it is an index page.
    pub(crate) fn child(
        &self,
        index: usize,
        id: PageId,
        fetch: impl FnOnce() -> TreeResult<Node>,
    ) -> TreeResult<Step<'_>> {
        match self.children.cell(index) {
            Some(cell) => kept(cell, id, fetch, |node| KeptChild {
                node,
                children: LazyCells::default(),
            })
            .map(|(step, _)| step),
            None => fetch().map(Step::Fetched),
        }
    }

    /// Child `index` of child `parent` of the root, page `id`; kept once read when it is an
    /// index page, its parent is kept and fewer than [`MAX_GRANDCHILDREN`] are.
    pub(crate) fn grandchild(
        &self,
        parent: usize,
        index: usize,
        id: PageId,
        fetch: impl FnOnce() -> TreeResult<Node>,
    ) -> TreeResult<Step<'_>> {
        let cell = self
            .children
            .cell(parent)
            .and_then(OnceLock::get)
            .and_then(|c| c.children.cell(index));
        let Some(cell) = cell else {
            return fetch().map(Step::Fetched);
        };
        if cell.get().is_some() {
            return kept(cell, id, fetch, |node| node).map(|(step, _)| step);
        }
        // A place among the kept grandchildren is taken before the fetch and given back
        // unless this lookup fills the cell, so the bound holds under racing lookups.
        if self.grandchildren.fetch_add(1, Ordering::AcqRel) >= self.grandchild_limit {
            self.grandchildren.fetch_sub(1, Ordering::AcqRel);
            return fetch().map(Step::Fetched);
        }
        let got = kept(cell, id, fetch, |node| node);
        if !matches!(got, Ok((_, true))) {
            self.grandchildren.fetch_sub(1, Ordering::AcqRel);
        }
        got.map(|(step, _)| step)
    }

    /// The mapping chunks kept for this version.
    pub fn kept_chunks(&self) -> &KeptChunks {
        &self.chunks
    }

    /// Kept nodes that keep at most `limit` grandchildren of the root (tests of the bound).
    #[cfg(test)]
    pub(crate) fn with_grandchild_limit(limit: usize) -> Self {
        TopNodes {
            grandchild_limit: limit,
            ..TopNodes::default()
        }
    }

    /// Grandchildren of the root kept now.
    pub fn kept_grandchildren(&self) -> usize {
        self.grandchildren.load(Ordering::Acquire)
    }

    /// Nodes kept now (for tests and stats).
    pub fn kept_count(&self) -> usize {
        usize::from(self.root.get().is_some())
            + self.children.filled()
            + self.grandchildren.load(Ordering::Acquire)
    }
}

/// What a cell of [`TopNodes`] holds: a kept node (and, for a child of the root, cells of
/// its own).
trait HoldsNode {
    fn kept(&self) -> &Kept;
}

impl HoldsNode for Kept {
    fn kept(&self) -> &Kept {
        self
    }
}

impl HoldsNode for KeptChild {
    fn kept(&self) -> &Kept {
        &self.node
    }
}

/// Page `id` from `slot`, or fetched and kept there (`wrap` makes the cell's value) when it
/// is an index page; true when this call filled the slot.
fn kept<'a, T: HoldsNode>(
    slot: &'a OnceLock<T>,
    id: PageId,
    fetch: impl FnOnce() -> TreeResult<Node>,
    wrap: impl FnOnce(Kept) -> T,
) -> TreeResult<(Step<'a>, bool)> {
    if let Some(held) = slot.get() {
        let k = held.kept();
        if k.id == id {
            return Ok((Step::Kept(k), false));
        }
        // Never for one immutable version; a guard, not a path.
        return fetch().map(|n| (Step::Fetched(n), false));
    }
    let node = fetch()?;
    let Node::Index(n) = &node else {
        return Ok((Step::Fetched(node), false));
    };
    // A racing lookup may have set it first: the same page either way.
    let filled = slot.set(wrap(Kept::new(id, n.clone()))).is_ok();
    match slot.get().map(HoldsNode::kept) {
        Some(k) if k.id == id => Ok((Step::Kept(k), filled)),
        _ => Ok((Step::Fetched(node), filled)),
    }
}
