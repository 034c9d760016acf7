//! The end of a manifest: the tail replay dropped, and the seal a clean close writes.
//!
//! Replay cannot tell a torn last append (a commit never acknowledged) from damage to the
//! last, acknowledged record: both are a last record that fails its checksum (docs/format.md,
//! "What a torn tail can and cannot be"). So opening a head never cuts such a tail off: the
//! bytes stay in the manifest until the head first writes over them, and then they are
//! first copied into a file of their own ([`Head::keep_tail_aside`]). And a clean close
//! rewrites a manifest that has log records as one snapshot record ([`Head::close_clean`]),
//! so that damage to a cleanly closed manifest is `Corruption`, never a dropped tail.

use crate::error::{TreeError, TreeResult};
use bough_manifest::{encode_snapshot, replay};
use bough_names::{FileKind, ManifestName, TornTailName, classify};

use super::{Head, MAX_MANIFEST_BYTES};

impl Head {
    /// Before the first write over a tail replay dropped: copies the tail into
    /// `<manifest>.torn.<offset>.<n>` (created new, durably), then cuts it off the manifest,
    /// so no byte of it can outlive the next append and be mistaken for a record. The tail
    /// is a torn last append or a damaged acknowledged record — replay cannot tell — so it
    /// is evidence for `bough verify` and the operator, and is never destroyed. A crash
    /// between the two steps repeats them at the next open; a copy with the same bytes is
    /// found and not made twice.
    pub(super) fn keep_tail_aside(&mut self) -> TreeResult<()> {
        let Some((offset, tail)) = &self.dropped_tail else {
            return Ok(());
        };
        let offset = *offset;
        let storage = self.files.storage().clone();
        let manifest = ManifestName::new(self.branch.clone(), self.term);
        let mut n = 0;
        let mut kept = false;
        for name in storage.list(self.files.dir())? {
            if let FileKind::TornTail(t) = classify(&name)
                && t.manifest == manifest
                && t.offset == offset
            {
                n = n.max(t.n.saturating_add(1));
                let path = self.files.path_of(&name);
                if !kept && storage.read_file(&path, tail.len() as u64).ok().as_ref() == Some(tail)
                {
                    kept = true;
                }
            }
        }
        if !kept {
            let name = TornTailName::new(manifest, offset, n).to_string();
            storage.create_new(&self.files.path_of(&name), tail)?;
            tracing::warn!(
                manifest = %self.manifest_path,
                offset,
                kept_as = %name,
                "kept the dropped manifest tail aside"
            );
        }
        self.manifest.set_len(offset)?;
        if let Err(e) = self.manifest.sync() {
            self.poisoned = Some(format!("fdatasync of {} failed: {e}", self.manifest_path));
            return Err(e.into());
        }
        self.dropped_tail = None;
        Ok(())
    }

    /// The offset of a tail replay dropped that is still in the manifest (not yet kept
    /// aside): a torn last append or a damaged last record.
    pub fn dropped_tail(&self) -> Option<u64> {
        self.dropped_tail.as_ref().map(|(off, _)| *off)
    }

    /// Whether [`Head::close_clean`] would write anything: the head appended log records
    /// since it opened, or holds a dropped tail. A head that only read writes nothing at
    /// close, so closing a store with many untouched branches costs nothing per branch.
    pub fn needs_seal(&self) -> bool {
        self.check_poisoned().is_ok()
            && ((self.appended && self.seq > 0) || self.dropped_tail.is_some())
    }

    /// Ends this head's writing cleanly. A dropped tail is kept aside; a manifest the head
    /// appended to is rewritten as one snapshot record of exactly its durable state — the
    /// manifest replayed, its overlay kept, no page written, the version unchanged (a clean
    /// close is not a commit) — so its last record is known complete: damage to it, or any
    /// truncation, is then `Corruption` at offset 0, never a dropped tail.
    ///
    /// Nothing is written when [`Head::needs_seal`] is false: the manifest is one snapshot
    /// already, the head only read, or it may not write (poisoned, fenced, retired, opened
    /// read-only). A failure leaves the manifest as a crash would have: every acknowledged
    /// commit is in it either way.
    pub fn close_clean(&mut self) -> TreeResult<()> {
        self.finish_background()?;
        self.trim_log();
        if !self.needs_seal() {
            return Ok(());
        }
        self.keep_tail_aside()?;
        if self.seq == 0 {
            return Ok(());
        }
        let bytes = self
            .files
            .storage()
            .read_file(&self.manifest_path, MAX_MANIFEST_BYTES)?;
        let replayed =
            replay(&bytes).map_err(|e| TreeError::manifest(self.manifest_path.clone(), e))?;
        // The file must hold exactly what this head wrote; anything else (a change behind
        // the head's back) is not sealed over.
        if replayed.end_offset != self.manifest_end
            || replayed.dropped_tail.is_some()
            || replayed.state.last_seq != self.seq
            || replayed.state.version() != self.version()
        {
            return Err(TreeError::manifest_content(
                self.manifest_path.clone(),
                replayed.end_offset,
                format!(
                    "the manifest does not end where its writer left it (records to seq {} ending at {}, \
                     expected seq {} ending at {}); not sealed",
                    replayed.state.last_seq, replayed.end_offset, self.seq, self.manifest_end
                ),
            ));
        }
        let version = self.version();
        let sealed_state = replayed.state.to_snapshot();
        let sealed = encode_snapshot(&sealed_state).map_err(|e| TreeError::InvalidArgument {
            what: format!("cannot encode the snapshot of {}: {e}", self.manifest_path),
        })?;
        self.replace_manifest(&sealed)?;
        if let Some(h) = self.history.as_mut() {
            h.replaced(&sealed_state.overlay);
        }
        self.version_base = version;
        self.seq = 0;
        self.appended = false;
        Ok(())
    }
}
