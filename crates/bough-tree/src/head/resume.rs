//! What a writing open does before its first commit, so that many short-lived writers (one
//! `bough put` per process) leave on disk about what one long-lived writer would: the head
//! continues the data file its (branch, term) was appending to instead of starting a new
//! one (a header page and a reservation each), and a manifest log grown long over many
//! opens is folded into one snapshot record (each commit's record takes a 4 KiB block).
//!
//! Continuing a file is safe because nothing about it is trusted beyond what the manifest
//! says: only a file of the head's own (branch, term, incarnation) — its name and header say
//! so, and the manifest's branch file range names that lineage — and only past every byte
//! the file holds. A commit that crashed after writing pages there but before its manifest
//! record left a tail no state references; the next pages go after it, so its bytes are
//! never overwritten and never read as data.

use crate::error::{TreeError, TreeResult};
use bough_manifest::{PageAddr, encode_snapshot};
use bough_names::DataFileName;

use super::{Active, Head};

/// A writing open folds the manifest's log into one snapshot record once the manifest is
/// this long (and the record would at most halve it): sixteen commits' records.
pub const FOLD_LOG_BYTES: u64 = 64 << 10;

impl Head {
    /// Readies a head opened for writing (the catalog's writing open; never a reader's):
    /// continues the last data file of its (branch, term) or gives back that file's unused
    /// preallocation ([`resume_last_file`](Self::resume_last_file)), and folds a long
    /// manifest log ([`fold_manifest_log`](Self::fold_manifest_log)). Either can only save
    /// space: a failure leaves the head as it was and is logged — unless it poisoned the
    /// head (a failed sync), which is then the error.
    pub fn prepare_for_writing(&mut self) -> TreeResult<()> {
        self.resume_last_file();
        match self.fold_manifest_log() {
            Err(e) if self.poisoned.is_some() => Err(e),
            Err(e) => {
                tracing::warn!(manifest = %self.manifest_path, error = %e, "manifest log not folded");
                Ok(())
            }
            Ok(_) => Ok(()),
        }
    }

    /// Makes the last data file this (branch, term) wrote the one the next commit that
    /// writes a page appends to, after every byte it holds, when that is safe: it is the branch's newest file
    /// id and the manifest's range names this head's own lineage for it (so it is no orphan
    /// of a crashed commit, nor another lineage's); its header names it, this incarnation
    /// and the page size; it is not full; and the head writes one file per commit in no
    /// mode (the object tier uploads each file once). It is protected from GC as being
    /// written before it is opened. Until a commit writes to it, it is not the head's
    /// active file: compaction may still choose it, and relocating its pages then gives it
    /// up ([`Head::relocate_files`]). Otherwise the file's unused preallocation is given
    /// back, as when it was sealed. Returns whether the file is to be continued.
    pub fn resume_last_file(&mut self) -> bool {
        if self.state.active.is_some() || self.state.resume.is_some() {
            return true;
        }
        let resumed = self.try_resume().unwrap_or_else(|e| {
            tracing::debug!(branch = %self.branch, error = %e, "last data file not continued");
            false
        });
        if !resumed {
            self.state.resume = None;
            self.files.set_writing(&self.writer_id(), None);
            self.release_previous_file();
        }
        resumed
    }

    fn try_resume(&mut self) -> TreeResult<bool> {
        if self.cfg.file_per_commit || self.poisoned.is_some() {
            return Ok(false);
        }
        let id = self.state.max_file_id;
        let own = self.state.ranges.resolve(id).is_some_and(|r| {
            r.branch == self.branch && r.term == self.term && r.incarnation == self.incarnation
        });
        if id == 0 || !own {
            return Ok(false);
        }
        let name = DataFileName::new(id, self.branch.clone(), self.term);
        // Before it is opened: from here on GC keeps it (a file being written).
        self.files
            .set_writing(&self.writer_id(), Some(name.to_string()));
        let (h, len) = self.files.open_for_append(&name, self.incarnation)?;
        // Past every byte it holds, a torn or partial last page included.
        let next = len.div_ceil(u64::from(self.cfg.page_size));
        let Some(next_index) = u32::try_from(next)
            .ok()
            .filter(|&n| n >= 1 && n < self.cfg.file_pages)
            .filter(|&n| PageAddr::new(id, n).is_some())
        else {
            return Ok(false);
        };
        if self.cfg.preallocate > 0 {
            // A killed writer never gave its reservation back; appends reserve afresh.
            // Setting the length it has keeps every byte.
            h.file.set_len(len)?;
        }
        self.state.resume = Some(Active {
            file_id: id,
            next_index,
        });
        self.reserved = (id, len);
        self.reserve_base = len;
        tracing::debug!(file = %name, next_index, "continuing the last data file");
        Ok(true)
    }

    /// Gives up continuing the last file if it is among `victims` (compaction moves its
    /// pages out: they must go to another file, and the file must become collectable).
    pub(super) fn give_up_resume_of(&mut self, victims: &[bough_names::FileId]) {
        if let Some(r) = self.state.resume
            && victims.contains(&r.file_id)
        {
            self.state.resume = None;
            self.reserved = (0, 0);
            self.reserve_base = 0;
            self.files.set_writing(&self.writer_id(), None);
        }
    }

    /// Replaces a manifest whose log has grown past [`FOLD_LOG_BYTES`] with one snapshot
    /// record of the same state: the mapping changes since the last checkpoint go into its
    /// overlay, so no mapping page is written. Skipped when the record would not at least
    /// halve the manifest. The state, the version and every file stay as they were; only
    /// the log's blocks go. Returns whether it folded.
    pub fn fold_manifest_log(&mut self) -> TreeResult<bool> {
        if self.seq == 0 || self.manifest_end < FOLD_LOG_BYTES || !self.pending_ext.is_empty() {
            return Ok(false);
        }
        self.check_poisoned()?;
        self.finish_background()?;
        // A dropped tail goes aside before the file is replaced, as before any rewrite.
        self.keep_tail_aside()?;
        let snapshot = self.snapshot_with_overlay()?;
        let bytes = encode_snapshot(&snapshot).map_err(|e| TreeError::InvalidArgument {
            what: format!("cannot encode the snapshot of {}: {e}", self.manifest_path),
        })?;
        if (bytes.len() as u64).saturating_mul(2) > self.manifest_end {
            return Ok(false);
        }
        self.install_snapshot(&bytes, &snapshot.overlay)?;
        tracing::debug!(manifest = %self.manifest_path, bytes = bytes.len(), "folded the manifest log");
        Ok(true)
    }
}
