//! A partition opened read-only, beside a writer that may be running in another process.
//!
//! Nothing is written: no recovery (an interrupted creation or term change is read as
//! recovery would finish it), no `main` created, no `CURRENT_TERM` repaired. The writer
//! moves on meanwhile — appends records, rewrites or hands over manifests, collects files —
//! so a branch is opened from what storage holds at that moment, and opened again when the
//! writer's progress got in the way (a manifest removed by a term change between reading
//! `CURRENT_TERM` and the manifest, a data file collected after the writer moved past the
//! state read). Once open, every data file of the state is held open, so the writer's GC
//! cannot take it away.

use crate::error::{CatalogError, CatalogResult};
use std::collections::HashMap;
use std::sync::Arc;

use bough_io::Storage;
use bough_names::{BranchName, ManifestName, PartitionDir, Term};
use bough_tree::cache::PageCache;
use bough_tree::files::FileTable;
use bough_tree::head::{Head, HeadConfig};
use parking_lot::Mutex;

use crate::{Incarnations, Partition, TermCache, os_random};

/// How many times a branch is opened again when the writer moved it on meanwhile.
const OPEN_ATTEMPTS: usize = 8;

impl Partition {
    /// Opens partition `dir` for reading only; a missing partition is `NotFound`. `storage`
    /// should refuse changes itself (`bough_io::ReadOnlyStorage`); this partition does not
    /// attempt any.
    pub fn open_read_only(
        storage: Arc<dyn Storage>,
        dir: PartitionDir,
        cfg: HeadConfig,
        cache: Arc<PageCache>,
        cache_data_pages: bool,
    ) -> CatalogResult<Partition> {
        let path = dir.to_string();
        if !storage.list_dirs()?.contains(&path) {
            return Err(CatalogError::NotFound { path });
        }
        // Handles are never closed while idle: an open handle is what keeps a file the
        // writer collects readable for the snapshots that reference it.
        let files = Arc::new(
            FileTable::new(storage, path, cfg.page_size, cache, cache_data_pages)
                .with_max_open_files(usize::MAX),
        );
        Ok(Partition {
            dir,
            files,
            cfg,
            fences: Mutex::new(HashMap::new()),
            terms: Mutex::new(TermCache::default()),
            take_over: None,
            owned: Mutex::default(),
            read_only: true,
            incarnations: Incarnations(os_random()),
            used_terms: Mutex::default(),
            term_scan: Mutex::new(()),
            expiries: Mutex::new(None),
            known_tags: Mutex::new(None),
        })
    }

    /// Whether this partition was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The term a reader opens `branch` at: its `CURRENT_TERM`, or — where recovery would
    /// move it (an interrupted creation or term change left a newer manifest) — the newest
    /// manifest's. Read from storage every time: the writer moves it.
    fn read_only_term(&self, branch: &BranchName) -> CatalogResult<Term> {
        let current = self.refresh_current_term(branch)?;
        let newest = self.latest_manifest_term(branch)?;
        let not_found = || CatalogError::NotFound {
            path: format!("{}@{}", self.dir, branch),
        };
        match (current, newest) {
            (Some(ct), _) if ct.deleted => Err(not_found()),
            (Some(ct), Some(m)) => Ok(ct.term.max(m)),
            (Some(ct), None) => Ok(ct.term),
            (None, Some(m)) => Ok(m),
            (None, None) => Err(not_found()),
        }
    }

    /// A head of `branch` that reads only, at the newest durable state storage holds, with
    /// every data file of that state held open (see the module comment).
    pub(crate) fn open_head_read_only(&self, branch: &BranchName) -> CatalogResult<Head> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let term = self.read_only_term(branch)?;
            let path = self
                .files
                .path_of(&ManifestName::new(branch.clone(), term).to_string());
            let before = self.storage().file_len(&path).ok();
            let opened =
                Head::open_read_only(self.files.clone(), self.cfg.clone(), branch.clone(), term)
                    .and_then(|head| head.snapshot().pin_files().map(|_| head));
            let err = match opened {
                Ok(head) => return Ok(head),
                Err(e) => e,
            };
            // Storage as it is now: if the branch did not move, the failure is the
            // answer (damage); if it did, the writer got in the way — read the new state.
            let moved = self.read_only_term(branch).ok() != Some(term)
                || self.storage().file_len(&path).ok() != before;
            if !moved || attempt >= OPEN_ATTEMPTS {
                return Err(err.into());
            }
            tracing::debug!(branch = %branch, error = %err, "the writer moved the branch on; reading it again");
        }
    }
}
