//! Bringing back a branch whose manifest is damaged (no head can open it) from one of its
//! archives, and reading what is left of the damaged manifest to tell what that loses.

use crate::error::{CatalogError, CatalogResult};
use std::sync::atomic::Ordering;

use bough_io::ErrorKind;
use bough_manifest::{BLOCK_SIZE, Record, Salvaged, Snapshot, decode_record};
use bough_names::{ArchiveName, BranchName, FileKind, ManifestName, Term, classify};
use bough_tree::head::{ForkPoint, Head, MAX_MANIFEST_BYTES};

use crate::{Partition, RecordEntry, restored_origin};

/// What is left of a branch's damaged current manifest.
#[derive(Debug, Clone)]
pub struct Damaged {
    /// The branch's term (the manifest's).
    pub term: Term,
    /// The manifest file.
    pub manifest: String,
    /// Why it cannot be opened.
    pub error: String,
    /// What could be read of it (`None`: not even that; the file is missing or unreadable).
    pub salvaged: Option<Salvaged>,
    /// Its length in bytes (0 when unreadable).
    pub len: u64,
}

impl Partition {
    /// The current term of `branch` as a repair sees it: its `CURRENT_TERM` if that reads,
    /// the newest manifest's if that is newer or `CURRENT_TERM` is damaged.
    fn repair_term(&self, branch: &BranchName) -> CatalogResult<Term> {
        let current = match self.current_term(branch) {
            Ok(Some(ct)) if ct.deleted => {
                return Err(CatalogError::NotFound {
                    path: format!("{}@{}", self.dir, branch),
                });
            }
            Ok(ct) => ct.map(|ct| ct.term),
            Err(e) if e.kind() == ErrorKind::Corruption => None,
            Err(e) => return Err(e),
        };
        current
            .max(self.latest_manifest_term(branch)?)
            .ok_or_else(|| CatalogError::NotFound {
                path: format!("{}@{}", self.dir, branch),
            })
    }

    /// What is left of `branch`'s current manifest, given the error opening it gave.
    pub fn damaged(&self, branch: &BranchName, error: &str) -> CatalogResult<Damaged> {
        let term = self.repair_term(branch)?;
        let manifest = ManifestName::new(branch.clone(), term).to_string();
        let bytes = self
            .storage()
            .read_file(&self.files.path_of(&manifest), MAX_MANIFEST_BYTES);
        Ok(Damaged {
            term,
            error: error.to_string(),
            len: bytes.as_ref().map_or(0, |b| b.len() as u64),
            salvaged: bytes.ok().map(|b| bough_manifest::salvage(&b)),
            manifest,
        })
    }

    /// Moves the damaged `branch` to a new term whose manifest is `archive`'s state — a
    /// restore that needs no head of the damaged state (which cannot be opened). No backup
    /// branch is made: the damaged state cannot be forked. File ids continue above every
    /// data file in the partition and every id the archive names, so no range of the new
    /// state overlaps another lineage's; the version continues above any the damaged
    /// manifest can have reached (its snapshot's plus one per block of it).
    pub fn restore_damaged(
        &self,
        branch: &BranchName,
        archive: &ArchiveName,
        damaged: &Damaged,
        now_ms: u64,
    ) -> CatalogResult<Head> {
        if archive.branch != *branch {
            return Err(CatalogError::InvalidArgument {
                what: format!(
                    "archive {archive} belongs to branch {}, not {branch}",
                    archive.branch
                ),
            });
        }
        let mut snapshot: Snapshot = self.read_archive(archive)?;
        let mut max_id = snapshot.max_file_id;
        for n in self.storage().list(self.files.dir())? {
            if let FileKind::Data(d) = classify(&n) {
                max_id = max_id.max(d.file_id);
            }
        }
        snapshot.max_file_id = max_id;
        let archive_version = bough_manifest::commit_version(&snapshot.extensions)
            .ok()
            .flatten()
            .unwrap_or(0);
        let damaged_version = self.version_bound(damaged);
        let origin = restored_origin(&snapshot.extensions, now_ms);
        let mut exts = Vec::new();
        origin.store(&mut exts);
        bough_manifest::set_commit_version(
            &mut exts,
            archive_version.max(damaged_version).saturating_add(1),
        );
        // The same branch: its incarnation continues (its CURRENT_TERM's, else the archive's).
        let incarnation = match self.current_term(branch) {
            Ok(Some(ct)) if ct.incarnation != 0 => ct.incarnation,
            _ => bough_manifest::incarnation(&snapshot.extensions)
                .ok()
                .flatten()
                .unwrap_or(0),
        };
        bough_manifest::set_incarnation(&mut exts, incarnation);
        let new_term = damaged.term + 1;
        let mut head = Head::create(
            self.files.clone(),
            self.cfg.clone(),
            branch.clone(),
            new_term,
            Some(&ForkPoint::checkpointed(snapshot)),
            exts,
        )?;
        // The branch's state is the archive's from now on: its history says so.
        // What the damaged manifest held after its last point cannot be read: the repair
        // starts the account afresh.
        let before = head.version();
        let point = self.first_history_point(&mut head, now_ms, before)?;
        self.owned.lock().insert((branch.clone(), new_term));
        self.name_term(&head, incarnation, point, RecordEntry::Synced)?;
        let fence = self.fence(branch, new_term);
        fence.store(new_term, Ordering::Release);
        head.set_fence(fence);
        // Superseded (recovery would remove it at the next open); removed now so GC, which
        // reads every manifest, does not stop at it meanwhile.
        let _ = self
            .storage()
            .delete(&self.files.path_of(&damaged.manifest))
            .and_then(|()| self.storage().sync_dir(self.files.dir()));
        Ok(head)
    }

    /// A version no state of the damaged manifest can have passed: its snapshot's (or the
    /// salvaged state's) plus one per 4 KiB block of the file (every record takes at least
    /// one).
    fn version_bound(&self, d: &Damaged) -> u64 {
        let blocks = d.len / BLOCK_SIZE as u64;
        let path = self.files.path_of(&d.manifest);
        let from_snapshot = self
            .storage()
            .read_file(&path, MAX_MANIFEST_BYTES)
            .ok()
            .and_then(|b| match decode_record(&b, 0) {
                Ok(Record::Snapshot(s)) => {
                    bough_manifest::commit_version(&s.extensions).ok().flatten()
                }
                _ => None,
            })
            .unwrap_or(0);
        let salvaged = d
            .salvaged
            .as_ref()
            .and_then(|s| s.state.as_ref())
            .map_or(0, |st| st.version());
        from_snapshot.max(salvaged).saturating_add(blocks)
    }
}
