//! The structural walk of one state's trees: the key tree and the TTL index from their
//! roots, and the mapping table's slots against what the roots reach.
//!
//! Stricter than a cursor: every page reached once (no cycle, no shared child), all leaves
//! at one depth ≤ `MAX_DEPTH`, as many children as separators plus one, keys strictly
//! increasing within each leaf and inside the bounds the parents' separators give, overflow
//! values of their recorded length, and every mapped logical page reachable from a root.

use std::collections::HashSet;

use bough_io::IoError;
use bough_manifest::{NO_PAGE, PageId};
use bough_names::{FileKind, classify};
use bough_tree::btree::{MAX_DEPTH, Node, TreeRead};
use bough_tree::head::TreeSnapshot;
use bough_tree::mapping::Slot;
use bough_tree::page::leaf::{LeafView, ValueLoc};

/// Why a tree could not be read: a read that failed (which may name a page of a data
/// file), or a shape that is wrong at a page.
#[derive(Debug)]
pub(super) enum WalkError {
    Io(IoError),
    /// A value that could not be read.
    Value(String, IoError),
    /// A page whose place in the tree is wrong: its file (storage path) and offset, when
    /// the mapping can say.
    Shape {
        path: String,
        offset: u64,
        what: String,
    },
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::Io(e) => write!(f, "{e}"),
            WalkError::Value(key, e) => write!(f, "value of key {key}: {e}"),
            WalkError::Shape { what, .. } => f.write_str(what),
        }
    }
}

impl From<IoError> for WalkError {
    fn from(e: IoError) -> Self {
        WalkError::Io(e)
    }
}

/// The tree's error as the storage error the findings report (same kind, file, offset).
impl From<bough_tree::error::TreeError> for WalkError {
    fn from(e: bough_tree::error::TreeError) -> Self {
        WalkError::Io(e.into())
    }
}

impl WalkError {
    /// The data file of partition `dir` and the page the error is about, if it is about
    /// one.
    pub(super) fn page(&self, dir: &str, page_size: u64) -> Option<(String, u32)> {
        let (path, offset) = match self {
            WalkError::Io(IoError::Corruption { path, offset, .. })
            | WalkError::Value(_, IoError::Corruption { path, offset, .. }) => (path, *offset),
            WalkError::Shape { path, offset, .. } => (path, *offset),
            _ => return None,
        };
        let name = path.strip_prefix(dir)?.strip_prefix('/')?;
        if !matches!(classify(name), FileKind::Data(_)) || page_size == 0 {
            return None;
        }
        Some((name.to_string(), u32::try_from(offset / page_size).ok()?))
    }
}

/// One walk over a state: what it reached and counted.
pub(super) struct Walk<'a> {
    snap: &'a TreeSnapshot,
    reached: HashSet<PageId>,
    leaf_depth: Option<usize>,
    /// Entries (tombstones, remembered deletes, are not entries to a user).
    pub(super) entries: u64,
}

impl<'a> Walk<'a> {
    pub(super) fn new(snap: &'a TreeSnapshot) -> Self {
        Walk {
            snap,
            reached: HashSet::new(),
            leaf_depth: None,
            entries: 0,
        }
    }

    /// Walks the tree at `root`; returns the entries it holds.
    pub(super) fn tree(&mut self, root: PageId) -> Result<u64, WalkError> {
        let before = self.entries;
        self.leaf_depth = None;
        self.node(root, None, None, 0)?;
        Ok(self.entries - before)
    }

    /// The mapped logical pages neither walked root reached (count, first few).
    pub(super) fn unreachable(&self) -> Result<(usize, Vec<PageId>), WalkError> {
        let mut leaked = Vec::new();
        let mut bad = None;
        self.snap
            .mapping
            .for_each_slot(self.snap, &mut |id, raw| match Slot::decode(raw) {
                Some(Slot::Page(_)) if !self.reached.contains(&id) => leaked.push(id),
                Some(_) => {}
                None => bad = Some((id, raw)),
            })?;
        if let Some((id, raw)) = bad {
            return Err(self.shape(id, format!("mapping slot of page {id} holds {raw:#x}")));
        }
        let first = leaked.iter().take(4).copied().collect();
        Ok((leaked.len(), first))
    }

    fn shape(&self, id: PageId, what: String) -> WalkError {
        let (path, offset) = self.snap.locate_page(id);
        WalkError::Shape { path, offset, what }
    }

    fn node(
        &mut self,
        id: PageId,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        depth: usize,
    ) -> Result<(), WalkError> {
        if id == NO_PAGE {
            return Ok(());
        }
        if depth > MAX_DEPTH {
            return Err(self.shape(id, format!("page {id}: tree deeper than {MAX_DEPTH}")));
        }
        if !self.reached.insert(id) {
            return Err(self.shape(
                id,
                format!("page {id} is reached twice (a cycle or shared child)"),
            ));
        }
        match self.snap.node(id)? {
            Node::Index(n) => {
                if n.children.len() != n.key_count() + 1 {
                    return Err(self.shape(
                        id,
                        format!(
                            "index page {id}: {} children for {} separators",
                            n.children.len(),
                            n.key_count()
                        ),
                    ));
                }
                for (i, &child) in n.children.iter().enumerate() {
                    let clo = match i.checked_sub(1) {
                        None => lo,
                        Some(k) => n.key(k),
                    };
                    let chi = n.key(i).or(hi);
                    if let (Some(a), Some(b)) = (clo, chi)
                        && a >= b
                    {
                        return Err(self.shape(
                            id,
                            format!("index page {id}: separators out of order at child {i}"),
                        ));
                    }
                    self.node(child, clo, chi, depth + 1)?;
                }
            }
            Node::Leaf(p) => self.leaf(id, &p, lo, hi, depth)?,
        }
        Ok(())
    }

    fn leaf(
        &mut self,
        id: PageId,
        p: &[u8],
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        depth: usize,
    ) -> Result<(), WalkError> {
        match self.leaf_depth {
            None => self.leaf_depth = Some(depth),
            Some(d) if d != depth => {
                return Err(self.shape(
                    id,
                    format!("leaf {id} at depth {depth}, other leaves at {d}"),
                ));
            }
            Some(_) => {}
        }
        let entries = LeafView::new(p)
            .and_then(|v| v.entries())
            .map_err(|e| self.shape(id, format!("leaf {id}: {}", e.0)))?;
        let mut prev: Option<&[u8]> = None;
        for e in &entries {
            let k = e.key.as_slice();
            if prev.is_some_and(|p| p >= k) {
                return Err(self.shape(
                    id,
                    format!("leaf {id}: keys out of order at {}", crate::show_key(k)),
                ));
            }
            if lo.is_some_and(|l| k < l) || hi.is_some_and(|h| k >= h) {
                return Err(self.shape(
                    id,
                    format!(
                        "leaf {id}: key {} outside its parent's bounds",
                        crate::show_key(k)
                    ),
                ));
            }
            prev = Some(k);
            if let ValueLoc::Overflow { first, pages, len } = &e.value {
                let v = self
                    .snap
                    .read_overflow(*first, *pages, *len)
                    .map_err(|err| WalkError::Value(crate::show_key(k), err.into()))?;
                if v.len() as u64 != *len {
                    return Err(
                        self.shape(id, format!("leaf {id}: overflow value of wrong length"))
                    );
                }
                for i in 0..*pages {
                    let page = first.saturating_add(i);
                    if !self.reached.insert(page) {
                        return Err(
                            self.shape(page, format!("overflow page {page} is reached twice"))
                        );
                    }
                }
            }
            if !e.is_tombstone() {
                self.entries += 1;
            }
        }
        Ok(())
    }
}
