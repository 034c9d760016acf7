//! Opening a head that only reads: a store opened read-only beside a live writer in another
//! process (`bough::Store::open_read_only`).
//!
//! It replays the manifest as [`Head::open`] does, but never writes: a torn last record is
//! read around, not cut off (the writer may be appending it right now), and the manifest is
//! opened for reading only. Every byte of the state it replays is made durable by a `sync`
//! of that read-only handle before anything is served, so a reader never returns a commit
//! that a power loss could still take back (the writer's own `fdatasync` of the record may
//! not have finished when the reader read it; data pages are synced before their record is
//! written, invariant 3). The head's commits fail: it is poisoned from the start.

use crate::error::{TreeError, TreeResult};
use std::sync::Arc;

use bough_io::OpenOptions;
use bough_io::layout::max_payload;
use bough_manifest::replay;
use bough_names::{BranchName, FileId, ManifestName, Term};

use super::{Fetch, Head, HeadConfig, HeadState, MAX_MANIFEST_BYTES, Published, TreeSnapshot};
use crate::files::FileTable;
use crate::mapping::MappingTable;
use crate::page::mapping::fanout;

/// Why a read-only head refuses to commit.
const READ_ONLY: &str = "the head was opened read-only";

impl Head {
    /// Opens the manifest of `branch` at `term` for reading only (see the module comment).
    pub fn open_read_only(
        files: Arc<FileTable>,
        cfg: HeadConfig,
        branch: BranchName,
        term: Term,
    ) -> TreeResult<Head> {
        let path = files.path_of(&ManifestName::new(branch.clone(), term).to_string());
        // Opened before reading, so the sync below covers every byte read.
        let manifest = files.storage().open(&path, OpenOptions::read())?;
        let bytes = files.storage().read_file(&path, MAX_MANIFEST_BYTES)?;
        let replayed = replay(&bytes).map_err(|e| TreeError::manifest(path.clone(), e))?;
        manifest.sync()?;
        let st = replayed.state;
        let mut version_base = bough_manifest::commit_version(&st.extensions)
            .map_err(|e| {
                TreeError::manifest_content(path.clone(), 0, format!("version extension: {e}"))
            })?
            .unwrap_or(0);
        if st.meta.branch != branch || st.meta.term != term || st.page_size != cfg.page_size {
            return Err(TreeError::manifest_content(
                path,
                0,
                format!(
                    "manifest names branch {} term {} page size {}, expected {branch} term \
                     {term} page size {}",
                    st.meta.branch, st.meta.term, st.page_size, cfg.page_size
                ),
            ));
        }
        let mut mapping = MappingTable::new(
            fanout(max_payload(cfg.page_size)),
            st.mapping_root,
            st.next_page_id,
            st.free_head,
        );
        {
            let fetch = Fetch {
                files: &files,
                ranges: &st.meta.branch_file_ranges,
                staged: None,
                kept: None,
            };
            for (&id, &raw) in &st.overlay {
                mapping.replay_change(id, raw, &fetch)?;
            }
        }
        // The writer's acknowledged commits after its last checkpoint (a torn tail is read
        // around, as for the manifest).
        let (log, covered) = super::buffered::HeadLog::recover(&files, &path, &st.extensions)?;
        if let Some(c) = covered {
            version_base = c.saturating_sub(st.last_seq);
        }
        let state = HeadState {
            root: st.meta.root,
            ttl_root: st.meta.ttl_root,
            mapping,
            ranges: st.meta.branch_file_ranges.clone(),
            max_file_id: st.max_file_id,
            active: None,
            resume: None,
        };
        let snapshot = Arc::new(TreeSnapshot {
            root: state.root,
            ttl_root: state.ttl_root,
            mapping: state.mapping.view(),
            ranges: Arc::new(state.ranges.clone()),
            files: files.clone(),
            version: log
                .version
                .unwrap_or_else(|| version_base.saturating_add(st.last_seq)),
            buffer: log.buffer.clone(),
            top: Arc::default(),
        });
        let incarnation = bough_manifest::incarnation(&st.extensions)
            .map_err(|e| {
                TreeError::manifest_content(path.clone(), 0, format!("incarnation extension: {e}"))
            })?
            .unwrap_or(0);
        let mut head = Head {
            cfg,
            files,
            branch,
            term,
            incarnation,
            // Keeping a dropped tail aside is the writer's job: a reader never writes.
            dropped_tail: None,
            appended: false,
            log,
            // A reader writes no points.
            history: None,
            background: None,
            background_done: None,
            fork_shares: Vec::new(),
            deferred: None,
            manifest_path: path,
            manifest,
            manifest_end: replayed.end_offset,
            seq: st.last_seq,
            version_base,
            dict: st.dict,
            extensions: st.extensions,
            state,
            published: Arc::new(Published::new(snapshot)),
            poisoned: Some(READ_ONLY.into()),
            fence: None,
            pending_ext: Vec::new(),
            reserved: (0, 0),
            reserve_base: 0,
            ranges_pruned: None,
        };
        head.charge_buffer();
        Ok(head)
    }
}

impl TreeSnapshot {
    /// Opens the handle of every data file this snapshot references (tree, overflow and
    /// mapping pages) and returns their ids. While the [`FileTable`] keeps the handles open
    /// (a read-only store never closes idle ones), a writer's GC in another process can
    /// unlink the files and the reader still reads them: the state stays whole for as long
    /// as the reader holds it. Fails (`Corruption`, naming the file) when a file is already
    /// gone: either the store is damaged or the writer moved on and collected it, which the
    /// caller tells apart by looking whether the branch's manifest changed meanwhile.
    pub fn pin_files(&self) -> TreeResult<Vec<FileId>> {
        let mut ids = std::collections::BTreeSet::new();
        self.for_each_page(&mut |a| {
            if !a.is_none() {
                ids.insert(a.file_id());
            }
        })?;
        for &id in &ids {
            self.files.handle(&self.ranges, id)?;
        }
        Ok(ids.into_iter().collect())
    }
}
