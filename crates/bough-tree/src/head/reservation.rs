//! Space reserved ahead in the data file a head appends to, and its release when the file
//! is left (so a short-lived writer does not leave its preallocation behind).

use super::*;

/// First reservation of a new data file.
pub(crate) const FIRST_RESERVATION: u64 = 256 << 10;

impl Head {
    /// Gives back the space preallocated past the written end of the file this head
    /// appends to, which it will not append to again: called when the head stops (close,
    /// eviction, new term, deletion). Without it every short-lived writer would leave its
    /// whole first reservation allocated on disk.
    pub fn release_reservation(&mut self) {
        // A running checkpoint holds the reservation: it is installed first.
        if let Err(e) = self.finish_background() {
            tracing::warn!(branch = %self.branch, error = %e, "background checkpoint not installed");
        }
        if self.poisoned.is_none() {
            let r = std::mem::take(&mut self.reserved);
            self.release(r);
        }
    }

    /// Gives back the preallocation of the last file this (branch, term) wrote before the
    /// head opened, when it is not continued: a writer that was killed never released it.
    /// For the writing open only (it changes the file's allocation, never its bytes). Best
    /// effort, as every release.
    pub(crate) fn release_previous_file(&self) {
        let id = self.state.max_file_id;
        let own = self
            .state
            .ranges
            .resolve(id)
            .is_some_and(|r| r.branch == self.branch && r.term == self.term);
        if self.cfg.preallocate == 0 || !own {
            return;
        }
        let name = bough_names::DataFileName::new(id, self.branch.clone(), self.term);
        let path = self.files.path_of(&name.to_string());
        let write = OpenOptions {
            write: true,
            ..OpenOptions::default()
        };
        let released = self
            .files
            .storage()
            .open(&path, write)
            .and_then(|f| f.set_len(f.len()?));
        if let Err(e) = released {
            tracing::debug!(file = %name, error = %e, "preallocation not released");
        }
    }

    /// Releases the blocks reserved past the length of file `id` (see [`release_file`]).
    pub(crate) fn release(&self, r: (FileId, u64)) {
        release_file(&self.tree_ctx(), r);
    }
}

/// Releases the blocks reserved past the length of file `id` (`reserved` bytes from
/// offset 0): truncating to the file's own length keeps every byte written — nothing is
/// overwritten or cut, and no durability order changes (a crash before the size change
/// reaches the disk only leaves the reservation in place). Best effort: a failure costs
/// space, never data.
pub(crate) fn release_file(ctx: &TreeCtx<'_>, (id, reserved): (FileId, u64)) {
    if reserved == 0 || ctx.cfg.preallocate == 0 {
        return;
    }
    let name = bough_names::DataFileName::new(id, ctx.branch.clone(), ctx.term);
    let released = ctx.files.open(&name, ctx.incarnation).and_then(|h| {
        let len = h.file.len()?;
        if len < reserved {
            h.file.set_len(len)?;
        }
        Ok(())
    });
    if let Err(e) = released {
        tracing::debug!(file = %name, error = %e, "preallocation not released");
    }
}
