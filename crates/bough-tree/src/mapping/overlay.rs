//! A mapping table's changes since its last checkpoint as a snapshot overlay: what lets a
//! manifest be rewritten as one snapshot record without writing mapping pages
//! (`Head::fold_manifest_log`).

use crate::error::{TreeError, TreeResult};
use std::sync::Arc;

use bough_manifest::PageId;

use super::{MappingTable, NodeSource};

impl MappingTable {
    /// The table's changes since the last checkpoint as `(id, slot)` pairs in id order: the
    /// slots of the dirty chunks that differ from the checkpointed chunks. A snapshot
    /// record whose overlay is this replays to exactly this table, with no mapping page
    /// written.
    pub fn overlay(&self, src: &dyn NodeSource) -> TreeResult<Vec<(PageId, u64)>> {
        let disk = self.view_without_dirty();
        let mut chunks: Vec<(&u32, &Arc<Vec<u64>>)> = self.view.dirty.iter().collect();
        chunks.sort_by_key(|(c, _)| **c);
        let mut out = Vec::new();
        for (&c, slots) in chunks {
            let base = disk.disk_chunk(c, src)?;
            for (i, &raw) in slots.iter().enumerate() {
                let old = base
                    .as_ref()
                    .and_then(|n| n.slots.get(i).copied())
                    .unwrap_or(0);
                if raw == old {
                    continue;
                }
                let id = u64::from(c)
                    .checked_mul(self.view.fanout as u64)
                    .and_then(|b| b.checked_add(i as u64))
                    .and_then(|id| PageId::try_from(id).ok())
                    .ok_or_else(|| TreeError::InvalidArgument {
                        what: format!("mapping chunk {c} slot {i} lies beyond the page ids"),
                    })?;
                out.push((id, raw));
            }
        }
        Ok(out)
    }
}
