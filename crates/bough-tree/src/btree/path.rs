//! [`Path`]: the index pages from the root down to a cursor's leaf, with the child taken at
//! each, and the walk between leaves that both kinds of cursor share.

use super::*;
use crate::error::TreeResult;

use super::top_nodes::Step;

/// Which way a descent goes at each index page.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Toward<'k> {
    /// The child holding this key (the first child for `None`).
    Key(Option<&'k [u8]>),
    /// The last child.
    Last,
}

/// Which children a descent took at the top two levels: of the root, and of that child.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Taken {
    pub(super) below_root: usize,
    pub(super) below_child: usize,
}

/// Page `id`, reached at `depth` by a descent that took the children `taken`: from the tree
/// version's kept nodes for the top three levels ([`TopNodes`]), else fetched.
pub(super) fn step(
    t: &dyn TreeRead,
    depth: usize,
    taken: Taken,
    id: PageId,
) -> TreeResult<Step<'_>> {
    match (t.top_nodes(), depth) {
        (Some(top), 0) => top.root(id, || t.node(id)),
        (Some(top), 1) => top.child(taken.below_root, id, || t.node(id)),
        (Some(top), 2) => top.grandchild(taken.below_root, taken.below_child, id, || t.node(id)),
        _ => t.node(id).map(Step::Fetched),
    }
}

/// The index nodes above a cursor's leaf, each page held to the range and level its path
/// gives it (see [`crate::bounds`]).
#[derive(Debug, Default)]
pub(super) struct Path {
    /// Index nodes on the path, with the child taken at each.
    pub(super) stack: Vec<(Arc<IndexNode>, usize)>,
    /// The depth of the leaves, learned at the first one.
    pub(super) levels: Levels,
}

impl Path {
    /// Goes down from page `id` (the child the stack's top took, or the root) to a leaf,
    /// checking each index page against its path and the leaf's level; the leaf's id and
    /// bytes (its keys are for the caller to hold to [`Self::range`]).
    #[expect(
        clippy::indexing_slicing,
        reason = "child indices come from a search over the node's keys (at most keys.len()), and check_index has made sure the node has keys.len() + 1 children"
    )]
    pub(super) fn descend(
        &mut self,
        t: &dyn TreeRead,
        mut id: PageId,
        to: Toward<'_>,
    ) -> TreeResult<(PageId, Arc<[u8]>)> {
        loop {
            let depth = self.stack.len();
            let taken = Taken {
                below_root: self.stack.first().map_or(0, |(_, i)| *i),
                below_child: self.stack.get(1).map_or(0, |(_, i)| *i),
            };
            let node = match step(t, depth, taken, id)? {
                Step::Kept(k) => Node::Index(k.node.clone()),
                Step::Fetched(n) => n,
            };
            match node {
                Node::Index(n) => {
                    // Ends the loop: depth grows by one per step and is bounded here.
                    self.levels.index(t, id, depth)?;
                    KeyRange::of_path(&self.stack).check_index(t, id, &n)?;
                    let idx = match to {
                        Toward::Key(k) => k.map_or(0, |k| n.child_for(k)),
                        Toward::Last => n.key_count(),
                    };
                    id = n.children[idx];
                    self.stack.push((n, idx));
                }
                Node::Leaf(p) => {
                    self.levels.leaf(t, id, depth)?;
                    return Ok((id, p));
                }
            }
        }
    }

    /// The next leaf in key order, its id and bytes: climbs to the first ancestor with a
    /// right sibling, then goes down its left edge. `None`: no leaf is left. Each step
    /// moves strictly right or up, so a damaged tree cannot make this loop.
    #[expect(
        clippy::indexing_slicing,
        reason = "idx + 1 < children.len() is checked"
    )]
    pub(super) fn next_leaf(
        &mut self,
        t: &dyn TreeRead,
    ) -> TreeResult<Option<(PageId, Arc<[u8]>)>> {
        while let Some((node, idx)) = self.stack.pop() {
            if idx + 1 < node.children.len() {
                let child = node.children[idx + 1];
                self.stack.push((node, idx + 1));
                return self.descend(t, child, Toward::Key(None)).map(Some);
            }
        }
        Ok(None)
    }

    /// Leaf `id` (bytes `page`, the leaf this path ends at) decoded whole, its first and last
    /// keys held to [`Self::range`] (the decode checks that its keys increase).
    pub(super) fn decode_leaf(
        &self,
        t: &dyn TreeRead,
        id: PageId,
        page: &[u8],
    ) -> TreeResult<Vec<Entry>> {
        let view = LeafView::new(page).map_err(|e| bad_page(t, id, e.0))?;
        let entries = view.entries().map_err(|e| bad_page(t, id, e.0))?;
        if let (Some(first), Some(last)) = (entries.first(), entries.last()) {
            self.range().check_keys(t, id, &first.key, &last.key)?;
        }
        Ok(entries)
    }

    /// The key range the path gives the leaf it ends at.
    pub(super) fn range(&self) -> KeyRange<'_> {
        KeyRange::of_path(&self.stack)
    }

    /// The upper end of [`Self::range`] alone: the separator after the child taken at the
    /// deepest level that has one (as `of_path` folds it), found from the bottom, so
    /// usually at the leaf's parent.
    pub(super) fn hi(&self) -> Option<&[u8]> {
        self.stack.iter().rev().find_map(|(n, i)| n.key(*i))
    }
}
