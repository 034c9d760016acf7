//! [`ForwardCursor`]: a forward-only walk over the leaves that reads each entry from the
//! page's bytes as it reaches it, for ranges and merges of the tree with a write buffer.

use super::*;
use crate::error::TreeResult;
use crate::page::leaf::LeafMark;

use super::path::{Path, Toward};

/// A cursor that only goes forward, reading each leaf lazily: an entry is decoded (its key
/// and value copied out) only when [`Self::next_entry`] reaches it, so a range that starts
/// or ends inside a leaf decodes none of the entries outside it, and a leaf is never held
/// decoded. [`Cursor`] decodes a whole leaf on arrival, which a walk in both directions
/// or a batch of lookups needs.
///
/// Checks what [`Cursor`] checks, entry by entry as it reads: every page against its path
/// (range and level, [`crate::bounds`]), each key against the range its path gives the
/// leaf, keys strictly increasing, restart offsets, and a leaf's trailing bytes once it
/// reads to the end. So on any tree from disk it yields entries once each in key order,
/// or fails with `Corruption`.
#[derive(Debug)]
pub struct ForwardCursor {
    path: Path,
    /// The leaf being read; `None` once the last leaf is read (or for an empty tree).
    leaf: Option<Reading>,
}

/// A leaf a [`ForwardCursor`] is reading.
#[derive(Debug)]
struct Reading {
    id: PageId,
    page: Arc<[u8]>,
    /// Where reading stands.
    mark: LeafMark,
    /// No entry of this leaf was returned yet: the next one is checked against the
    /// leaf's low bound (the later ones are above it, as keys are checked to increase).
    first: bool,
}

impl Reading {
    fn new(t: &dyn TreeRead, id: PageId, page: Arc<[u8]>, from: Option<&[u8]>) -> TreeResult<Self> {
        let view = LeafView::new(&page).map_err(|e| bad_page(t, id, e.0))?;
        let at = match from {
            Some(k) => view.ceiling(k).map_err(|e| bad_page(t, id, e.0))?,
            None => view.cursor(),
        };
        let mark = at.mark();
        Ok(Reading {
            id,
            page,
            mark,
            first: true,
        })
    }

    /// The leaf's next entry, its key held to the range `path` gives the leaf; `None` at
    /// the leaf's end.
    fn next_entry(&mut self, t: &dyn TreeRead, path: &Path) -> TreeResult<Option<Entry>> {
        let id = self.id;
        let bad = |e: crate::page::CodecError| bad_page(t, id, e.0);
        let view = LeafView::new(&self.page).map_err(bad)?;
        let Some(e) = view.next_owned(&mut self.mark).map_err(bad)? else {
            return Ok(None);
        };
        let range = if self.first {
            path.range()
        } else {
            KeyRange {
                lo: None,
                hi: path.hi(),
            }
        };
        range.check_keys(t, id, &e.key, &e.key)?;
        self.first = false;
        Ok(Some(e))
    }
}

impl ForwardCursor {
    /// Positioned at the first entry with key ≥ `key` (or the first entry for `None`).
    pub fn seek(t: &dyn TreeRead, root: PageId, key: Option<&[u8]>) -> TreeResult<Self> {
        let mut c = ForwardCursor {
            path: Path::default(),
            leaf: None,
        };
        if root == NO_PAGE {
            return Ok(c);
        }
        let (id, page) = c.path.descend(t, root, Toward::Key(key))?;
        c.leaf = Some(Reading::new(t, id, page, key)?);
        Ok(c)
    }

    /// The next entry in key order, copied out of the page as an owned [`Entry`].
    pub fn next_entry(&mut self, t: &dyn TreeRead) -> TreeResult<Option<Entry>> {
        while let Some(leaf) = self.leaf.as_mut() {
            if let Some(e) = leaf.next_entry(t, &self.path)? {
                return Ok(Some(e));
            }
            self.leaf = match self.path.next_leaf(t)? {
                Some((id, page)) => Some(Reading::new(t, id, page, None)?),
                None => None,
            };
        }
        Ok(None)
    }
}
