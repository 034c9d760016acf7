//! The error for a mapping slot that does not hold what its reader needs: it names the
//! mapping page that holds the slot (its data file and offset), or says the slot changed
//! since the last checkpoint (then the manifest's log holds it, not a page).

use super::{MappingView, NodeSource};
use crate::error::{Location, TreeError};
use bough_manifest::PageId;

impl MappingView {
    /// The error for logical page `id`, whose mapping slot `what`: it names the mapping
    /// page that holds the slot, or says the slot changed since the last checkpoint (then
    /// the manifest's log holds it).
    pub fn bad_slot(&self, id: PageId, what: String, src: &dyn NodeSource) -> TreeError {
        let chunk = id / self.fanout as u32;
        let at = match self.dirty.contains_key(&chunk) {
            true => None,
            // The node was read a moment ago to find the slot, so this is a cache hit.
            false => match self.disk_chunk_at(chunk, src) {
                Ok(Some((addr, _))) => {
                    let (file, offset) = src.locate(addr);
                    Some(Location { file, offset })
                }
                Ok(None) => None,
                Err(e) => return e,
            },
        };
        TreeError::Slot { page: id, what, at }
    }
}
