//! How the tree reaches its pages: [`TreeRead`] and [`TreeWrite`] over logical page ids
//! (a read returns a [`Node`]). A head's transaction and a snapshot implement them; the
//! tree's walks, cursors and the bounds checks only call them.

use bough_manifest::PageId;

use crate::error::TreeResult;
use crate::page::index::IndexNode;

pub use super::node::Node;
use super::top_nodes::TopNodes;

/// Read access to tree pages.
pub trait TreeRead {
    /// The page with logical id `id`.
    fn node(&self, id: PageId) -> TreeResult<Node>;
    /// The bytes of an overflow value.
    fn overflow(&self, first: PageId, pages: u32, len: u64) -> TreeResult<Vec<u8>>;
    /// Where page `id` lives, for errors about it: its data file and the page's offset in
    /// it (every error about a page read from disk names both).
    fn locate_page(&self, id: PageId) -> (String, u64);
    /// The decoded top nodes of this (immutable) tree version, when it keeps them: a
    /// snapshot does; a transaction, whose tree changes under it, does not.
    fn top_nodes(&self) -> Option<&TopNodes> {
        None
    }
}

/// Write access for one commit.
pub trait TreeWrite: TreeRead {
    /// Largest leaf/index payload.
    fn payload_capacity(&self) -> usize;
    /// Writes a leaf payload as page `id` (a fresh id when `None`); returns the id.
    fn put_leaf(&mut self, id: Option<PageId>, payload: Vec<u8>) -> TreeResult<PageId>;
    /// Writes an index page as page `id` (a fresh id when `None`); returns the id.
    fn put_index(&mut self, id: Option<PageId>, node: IndexNode) -> TreeResult<PageId>;
    /// Releases a page id.
    fn free(&mut self, id: PageId) -> TreeResult<()>;
    /// Writes a large value into overflow pages; returns (first id, page count).
    fn put_overflow(&mut self, value: &[u8]) -> TreeResult<(PageId, u32)>;
    /// Releases an overflow value's pages.
    fn free_overflow(&mut self, first: PageId, pages: u32) -> TreeResult<()>;
}
