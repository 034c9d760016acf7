//! What a key-tree page must agree on with the path that reached it: its key range and its
//! level.
//!
//! Tree pages come from disk, so a checksum-valid page can still name any id as a child:
//! itself, an ancestor, a page of another subtree or of another depth. Every walk of the
//! key tree (lookups, cursors, the write path) holds each page to two checks, both O(1) per
//! page:
//!
//! - **Range.** The separators on the path give every page a key range `[lo, hi)`: an index
//!   page's separators must lie strictly inside it and a leaf's keys inside it. Each step
//!   down narrows the range to one child's, so a page reached again below itself (a cycle)
//!   or a page of another part of the tree arrives with separators or keys outside it.
//! - **Level.** Index pages do not record their level, but every leaf of a B+tree is at the
//!   same depth: a walk learns the leaves' depth at the first leaf it reaches, and from then
//!   on a child must be exactly one level below its parent — an index page where a leaf
//!   belongs, or a leaf above the leaves' depth, is refused. Depth itself is bounded by
//!   [`MAX_DEPTH`], so even the first descent ends.
//!
//! Together they make a walk visit each page of a well-formed tree once and refuse any other
//! shape with `Corruption` naming the page, so no walk loops, and none yields a key twice
//! or out of order (a leaf's keys in `[lo, hi)`, ranges of successive leaves disjoint and
//! increasing).

use crate::error::{TreeError, TreeResult};
use bough_manifest::PageId;

use crate::btree::access::TreeRead;
use crate::page::index::IndexNode;

/// Bounds the depth of a walk: far above any real tree (a tree of 4 KiB pages holding
/// 2³² entries is about 8 levels deep), so only a crafted or broken tree reaches it.
pub const MAX_DEPTH: usize = 64;

/// `Corruption` naming the page `id` of tree `t` (its data file and offset when the id
/// maps to a page).
pub fn bad_page(t: &dyn TreeRead, id: PageId, why: impl std::fmt::Display) -> TreeError {
    let (file, offset) = t.locate_page(id);
    TreeError::corruption(file, offset, format!("tree page {id}: {why}"))
}

/// The key range `[lo, hi)` the path to a page gives it (`None`: unbounded).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyRange<'a> {
    /// Lowest key the page may hold.
    pub lo: Option<&'a [u8]>,
    /// Every key of the page is below it.
    pub hi: Option<&'a [u8]>,
}

impl<'a> KeyRange<'a> {
    /// The range of a root: every key.
    pub const ALL: KeyRange<'static> = KeyRange { lo: None, hi: None };

    /// The range of child `i` of `n`, a page with this range.
    pub fn child(self, n: &'a IndexNode, i: usize) -> KeyRange<'a> {
        let lo = match i.checked_sub(1) {
            Some(j) => n.key(j).or(self.lo),
            None => self.lo,
        };
        let hi = n.key(i).or(self.hi);
        KeyRange { lo, hi }
    }

    /// The range of the last page of `path` (index pages with the child taken at each).
    pub fn of_path<N: AsRef<IndexNode>>(path: &'a [(N, usize)]) -> KeyRange<'a> {
        path.iter()
            .fold(KeyRange::ALL, |r, (n, i)| r.child(n.as_ref(), *i))
    }

    fn above_lo(&self, k: &[u8]) -> bool {
        self.lo.is_none_or(|lo| k > lo)
    }

    fn below_hi(&self, k: &[u8]) -> bool {
        self.hi.is_none_or(|hi| crate::key_order::less(k, hi))
    }

    /// Index page `id` (`n`) has every separator strictly inside this range (its first
    /// child's range then starts at `lo`, its last ends at `hi`, and none is empty).
    pub fn check_index(&self, t: &dyn TreeRead, id: PageId, n: &IndexNode) -> TreeResult<()> {
        if n.children.len() != n.key_count() + 1 {
            return Err(bad_page(
                t,
                id,
                format!(
                    "{} children for {} separators",
                    n.children.len(),
                    n.key_count()
                ),
            ));
        }
        // Separators are strictly increasing (checked when the page was decoded): the
        // first and the last decide.
        let inside = n.first_key().is_none_or(|k| self.above_lo(k))
            && n.last_key().is_none_or(|k| self.below_hi(k));
        if inside {
            Ok(())
        } else {
            Err(bad_page(
                t,
                id,
                "index separators outside the key range its parent gives it (a child pointing \
                 at an ancestor, at itself or into another subtree)",
            ))
        }
    }

    /// Leaf `id`, whose keys run from `first` to `last` (in order, checked when decoded),
    /// holds only keys of this range.
    pub fn check_keys(
        &self,
        t: &dyn TreeRead,
        id: PageId,
        first: &[u8],
        last: &[u8],
    ) -> TreeResult<()> {
        if self.lo.is_none_or(|lo| first >= lo) && self.below_hi(last) {
            Ok(())
        } else {
            Err(bad_page(
                t,
                id,
                "leaf keys outside the key range its parent gives it (a child pointing into \
                 another subtree)",
            ))
        }
    }
}

/// The depth of the leaves, learned at the first leaf a walk reaches; depths count index
/// pages above a page (the root is at depth 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Levels {
    leaves: Option<usize>,
}

impl Levels {
    /// Index page `id` reached at `depth`: above the leaves, within [`MAX_DEPTH`].
    pub fn index(&self, t: &dyn TreeRead, id: PageId, depth: usize) -> TreeResult<()> {
        match self.leaves {
            Some(d) if depth >= d => Err(bad_page(
                t,
                id,
                format!(
                    "child level mismatch: an index page at depth {depth}, where the tree's \
                     leaves are at depth {d} (a cycle, or a subtree at the wrong level)"
                ),
            )),
            _ if depth >= MAX_DEPTH => Err(bad_page(
                t,
                id,
                format!("tree deeper than {MAX_DEPTH} levels (a cycle?)"),
            )),
            _ => Ok(()),
        }
    }

    /// Leaf `id` reached at `depth`: at the depth of every other leaf.
    pub fn leaf(&mut self, t: &dyn TreeRead, id: PageId, depth: usize) -> TreeResult<()> {
        match self.leaves {
            None => {
                self.leaves = Some(depth);
                Ok(())
            }
            Some(d) if d == depth => Ok(()),
            Some(d) => Err(bad_page(
                t,
                id,
                format!(
                    "child level mismatch: a leaf at depth {depth}, where the tree's other \
                     leaves are at depth {d}"
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(keys: &[&str]) -> IndexNode {
        IndexNode::new(
            keys.iter().map(|k| k.as_bytes()),
            (0..=keys.len() as u32).collect(),
        )
    }

    #[test]
    fn child_ranges_narrow_to_the_separators() {
        let n = node(&["f", "m"]);
        let r = KeyRange::ALL;
        assert_eq!(
            r.child(&n, 0),
            KeyRange {
                lo: None,
                hi: Some(b"f")
            }
        );
        assert_eq!(
            r.child(&n, 1),
            KeyRange {
                lo: Some(b"f"),
                hi: Some(b"m")
            }
        );
        assert_eq!(
            r.child(&n, 2),
            KeyRange {
                lo: Some(b"m"),
                hi: None
            }
        );
        let path = [(std::sync::Arc::new(n), 1usize)];
        assert_eq!(KeyRange::of_path(&path), r.child(&path[0].0, 1));
    }
}
