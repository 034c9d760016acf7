//! Prewarm: a snapshot's index and mapping pages read into the cache's structure tier
//! ahead of gets, so that a cold get reads only its leaf (ARCHITECTURE.md, "Caching by
//! physical identity").

use crate::btree::{Node, TreeRead};
use crate::error::TreeResult;
use crate::mapping::walk_radix;
use bough_manifest::PageId;

use super::TreeSnapshot;

/// What a prewarm read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Prewarmed {
    pub mapping_pages: usize,
    pub index_pages: usize,
    /// Whether it stopped because the cache's structure tier was full.
    pub stopped_full: bool,
}

impl TreeSnapshot {
    /// Reads every mapping page, then the key tree's index pages level by level from the
    /// root, into the cache, until the cache's structure tier is full. Leaves are not
    /// read, except the leftmost, whose depth gives the tree's height. Pages already
    /// cached cost a lookup, not a read.
    pub fn prewarm_structure(&self) -> TreeResult<Prewarmed> {
        let cache = self.files.cache();
        let fetch = self.fetch();
        let mut done = Prewarmed::default();
        walk_radix(
            self.mapping.root(),
            self.mapping.fanout(),
            &fetch,
            &mut |_, _| {
                done.mapping_pages += 1;
                Ok(!cache.structure_full())
            },
        )?;
        if cache.structure_full() {
            done.stopped_full = true;
            return Ok(done);
        }
        let index_levels = self.index_levels()?;
        let mut level: Vec<PageId> = vec![self.root];
        for depth in 0..index_levels {
            let mut next = Vec::new();
            for &id in &level {
                if cache.structure_full() {
                    done.stopped_full = true;
                    return Ok(done);
                }
                // The tree was checked when it was written and is checked again here:
                // a leaf where an index page should be is an error the get would meet too.
                if let Node::Index(n) = self.node(id)? {
                    done.index_pages += 1;
                    if depth + 1 < index_levels {
                        next.extend_from_slice(&n.children);
                    }
                }
            }
            level = next;
        }
        Ok(done)
    }

    /// The number of index levels above the leaves (0: the root is a leaf), along the
    /// leftmost path. Bounded: a B+tree of 2^32 pages is far shallower than the limit.
    fn index_levels(&self) -> TreeResult<usize> {
        const MAX_LEVELS: usize = 64;
        let mut id = self.root;
        for levels in 0..MAX_LEVELS {
            match self.node(id)? {
                Node::Leaf(_) => return Ok(levels),
                Node::Index(n) => match n.children.first() {
                    Some(&c) => id = c,
                    None => return Ok(levels + 1),
                },
            }
        }
        let (file, offset) = self.locate_page(id);
        Err(crate::error::TreeError::corruption(
            file,
            offset,
            format!("the key tree is deeper than {MAX_LEVELS} levels"),
        ))
    }
}
