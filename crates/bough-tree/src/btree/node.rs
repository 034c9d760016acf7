//! [`Node`]: a page as the tree sees it.

use std::sync::Arc;

use crate::page::index::IndexNode;

/// A page as the tree sees it.
#[derive(Debug, Clone)]
pub enum Node {
    /// A leaf payload (decoded on demand; lookups read one restart block).
    Leaf(Arc<[u8]>),
    /// A decoded index page.
    Index(Arc<IndexNode>),
}
