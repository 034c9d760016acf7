//! Reading the tree: point lookups ([`get`]) and [`Cursor`]s that walk entries in key order,
//! each page held to the key range and level its path gives it.

use super::*;
use crate::error::TreeResult;

use super::path::{Path, Taken, Toward, step};
use super::top_nodes::Step;

/// The entry for `key`, if present.
#[expect(
    clippy::indexing_slicing,
    reason = "child indices come from a search over the node's keys (at most keys.len()), and a decoded index node has keys.len() + 1 children; entries[pos] follows a pos < len check"
)]
pub fn get(t: &dyn TreeRead, root: PageId, key: &[u8]) -> TreeResult<Option<Entry>> {
    if root == NO_PAGE {
        return Ok(None);
    }
    let mut id = root;
    // The separators bounding the current page's range, as (page, separator index): kept
    // as shared pages, not copied keys, so a lookup allocates nothing for them.
    let (mut lo, mut hi): (Option<Bound<'_>>, Option<Bound<'_>>) = (None, None);
    let levels = Levels::default();
    // Which children the descent took at the top (for the kept levels of `top`).
    let mut taken = Taken::default();
    for depth in 0..=MAX_DEPTH {
        let (n, kept) = match step(t, depth, taken, id)? {
            Step::Kept(k) => (Held::Kept(&k.node), Some(k)),
            Step::Fetched(Node::Index(n)) => (Held::Owned(n), None),
            Step::Fetched(Node::Leaf(p)) => {
                // The search borrows from the page; only the entry found is copied out.
                let view = LeafView::new(&p).map_err(|e| bad_page(t, id, e.0))?;
                return Ok(view
                    .get(key)
                    .map_err(|e| bad_page(t, id, e.0))?
                    .map(|e| e.to_entry()));
            }
        };
        levels.index(t, id, depth)?;
        if kept.is_none_or(|k| !k.checked()) {
            let range = KeyRange {
                lo: lo.as_ref().and_then(|(n, i)| n.key(*i)),
                hi: hi.as_ref().and_then(|(n, i)| n.key(*i)),
            };
            range.check_index(t, id, &n)?;
            if let Some(k) = kept {
                k.mark_checked();
            }
        }
        let i = n.child_for(key);
        id = n.children[i];
        match depth {
            0 => taken.below_root = i,
            1 => taken.below_child = i,
            _ => {}
        }
        if i > 0 {
            lo = Some((n.clone(), i - 1));
        }
        if i < n.key_count() {
            hi = Some((n, i));
        }
    }
    Err(bad_page(
        t,
        id,
        "tree deeper than the maximum depth (a cycle?)",
    ))
}

/// Separator `i` of an index node a lookup holds.
type Bound<'a> = (Held<'a>, usize);

/// An index node a lookup holds: borrowed from the tree's [`TopNodes`] (no reference
/// count touched), or its own.
#[derive(Clone)]
enum Held<'a> {
    Kept(&'a Arc<IndexNode>),
    Owned(Arc<IndexNode>),
}

impl std::ops::Deref for Held<'_> {
    type Target = IndexNode;
    fn deref(&self) -> &IndexNode {
        match self {
            Held::Kept(n) => n,
            Held::Owned(n) => n,
        }
    }
}

/// A cursor over the leaves, both ways, holding one leaf decoded (for lookups in key
/// order and backward walks; a forward-only walk reads less with a [`ForwardCursor`]).
///
/// Every page it reads is held to the range and level its path gives it (see
/// [`crate::bounds`]), so on any tree from disk it either yields each entry once in key
/// order or fails with `Corruption`: a child pointing at an ancestor or at itself cannot
/// make it loop or yield keys again.
#[derive(Debug)]
pub struct Cursor {
    path: Path,
    entries: Vec<Entry>,
    pos: usize,
    /// The leaf `entries` came from (for errors about them).
    leaf: PageId,
}

impl Cursor {
    fn new() -> Cursor {
        Cursor {
            path: Path::default(),
            entries: Vec::new(),
            pos: 0,
            leaf: NO_PAGE,
        }
    }

    /// The leaf the last entry returned came from ([`NO_PAGE`] before the first).
    pub fn leaf(&self) -> PageId {
        self.leaf
    }

    /// Positions at the first entry with key ≥ `key` (or the first entry for `None`).
    pub fn seek(t: &dyn TreeRead, root: PageId, key: Option<&[u8]>) -> TreeResult<Cursor> {
        let mut c = Cursor::new();
        if root == NO_PAGE {
            return Ok(c);
        }
        c.descend(t, root, Toward::Key(key))?;
        if let Some(k) = key {
            c.pos = c.entries.partition_point(|e| e.key.as_slice() < k);
        }
        Ok(c)
    }

    /// For lookups in ascending key order (each `key` at least the previous one): the
    /// entry for `key` when it lies within the leaf the cursor is on — at or before that
    /// leaf's last entry — as `Some(entry or None)`, moving the cursor to it; `None` when it
    /// is past that entry, so the caller seeks anew. Reads no page: a batch of lookups
    /// reads each leaf once instead of once per key.
    pub fn get_in_leaf(&mut self, key: &[u8]) -> Option<Option<Entry>> {
        let last = self.entries.last()?;
        if key > last.key.as_slice() {
            return None;
        }
        let at = self.pos.min(self.entries.len());
        let rest = self.entries.get(at..).unwrap_or_default();
        let i = at + rest.partition_point(|e| e.key.as_slice() < key);
        self.pos = i;
        Some(self.entries.get(i).filter(|e| e.key == key).cloned())
    }

    /// The last entry with key ≤ `key` (the floor), or none.
    pub fn floor(t: &dyn TreeRead, root: PageId, key: &[u8]) -> TreeResult<Option<Entry>> {
        Self::before(t, root, key, true)
    }

    /// The last entry with key < `key` (`inclusive`: ≤), or none.
    pub fn before(
        t: &dyn TreeRead,
        root: PageId,
        key: &[u8],
        inclusive: bool,
    ) -> TreeResult<Option<Entry>> {
        if root == NO_PAGE {
            return Ok(None);
        }
        let mut c = Cursor::new();
        c.descend(t, root, Toward::Key(Some(key)))?;
        let n = c
            .entries
            .partition_point(|e| e.key.as_slice() < key || (inclusive && e.key.as_slice() == key));
        if n > 0 {
            return Ok(c.entries.into_iter().nth(n - 1));
        }
        // Everything in this leaf is above `key`: the floor is the last entry of the
        // previous leaf.
        if c.previous_leaf(t)? {
            return Ok(c.entries.pop());
        }
        Ok(None)
    }

    /// Positions for backward iteration: [`prev_entry`](Self::prev_entry) then returns the
    /// last entry with key < `key` (`inclusive`: ≤), or the last entry of all for `None`,
    /// and goes on in descending key order. Reads one leaf at a time, as
    /// [`next_entry`](Self::next_entry) does forward.
    pub fn seek_back(
        t: &dyn TreeRead,
        root: PageId,
        key: Option<&[u8]>,
        inclusive: bool,
    ) -> TreeResult<Cursor> {
        let mut c = Cursor::new();
        if root == NO_PAGE {
            return Ok(c);
        }
        match key {
            Some(k) => {
                c.descend(t, root, Toward::Key(Some(k)))?;
                c.pos = c.entries.partition_point(|e| {
                    e.key.as_slice() < k || (inclusive && e.key.as_slice() == k)
                });
            }
            None => {
                c.descend(t, root, Toward::Last)?;
                c.pos = c.entries.len();
            }
        }
        Ok(c)
    }

    /// The previous entry in descending key order (a cursor from
    /// [`seek_back`](Self::seek_back)).
    pub fn prev_entry(&mut self, t: &dyn TreeRead) -> TreeResult<Option<Entry>> {
        loop {
            if let Some(p) = self.pos.checked_sub(1)
                && let Some(e) = self.entries.get(p)
            {
                let e = e.clone();
                self.pos = p;
                return Ok(Some(e));
            }
            if !self.previous_leaf(t)? {
                return Ok(None);
            }
        }
    }

    /// Moves past the last entry of the previous leaf: climbs to the first ancestor with a
    /// left sibling, then goes down its right edge. `false`: no leaf is left. Each step
    /// moves strictly left or up, so a damaged tree cannot make this loop.
    #[expect(
        clippy::indexing_slicing,
        reason = "idx - 1 < idx < children.len(): idx is a child the path took"
    )]
    fn previous_leaf(&mut self, t: &dyn TreeRead) -> TreeResult<bool> {
        while let Some((node, idx)) = self.path.stack.pop() {
            if idx > 0 {
                let child = node.children[idx - 1];
                self.path.stack.push((node, idx - 1));
                self.descend(t, child, Toward::Last)?;
                self.pos = self.entries.len();
                return Ok(true);
            }
        }
        self.entries.clear();
        self.pos = 0;
        Ok(false)
    }

    /// Goes down from page `id` (the child the path's last node took, or the root) to a
    /// leaf and decodes it, checking its keys against the path.
    fn descend(&mut self, t: &dyn TreeRead, id: PageId, to: Toward<'_>) -> TreeResult<()> {
        let (leaf, p) = self.path.descend(t, id, to)?;
        self.read_leaf(t, leaf, &p)
    }

    /// Decodes leaf `id` (bytes `p`) as the cursor's current leaf, before its first entry.
    fn read_leaf(&mut self, t: &dyn TreeRead, id: PageId, p: &[u8]) -> TreeResult<()> {
        self.entries = self.path.decode_leaf(t, id, p)?;
        self.pos = 0;
        self.leaf = id;
        Ok(())
    }

    /// The next entry in key order.
    pub fn next_entry(&mut self, t: &dyn TreeRead) -> TreeResult<Option<Entry>> {
        loop {
            if let Some(e) = self.entries.get(self.pos) {
                self.pos += 1;
                return Ok(Some(e.clone()));
            }
            let Some((id, p)) = self.path.next_leaf(t)? else {
                self.entries.clear();
                self.pos = 0;
                return Ok(None);
            };
            self.read_leaf(t, id, &p)?;
        }
    }
}
