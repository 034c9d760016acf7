//! One branch head of one partition: its manifest, its data files and its tree, and the
//! commit pipeline that moves it forward.
//!
//! Commit order (ARCHITECTURE.md, invariant 3): stage every new page in memory → write the
//! pages and `fdatasync` each data file written (and the directory when a file was created)
//! → append one manifest log record and `fdatasync` the manifest → publish the new snapshot.
//! A failed sync poisons the head: the storage refuses further durable work, and so does
//! the head, until it is reopened.

use crate::error::{TreeError, TreeResult};
use std::collections::HashMap;
use std::sync::Arc;

use bough_io::layout::{FRAME_HEADER_LEN, max_payload, page_offset, seal_page};
use bough_io::{ErrorKind, IoError, OpenOptions, StorageFile};
use bough_manifest::{
    BranchFileMapping, LogRecord, ManifestMetadata, NO_PAGE, PageAddr, PageId, Snapshot,
    dropped_tail_finding, encode_log, encode_snapshot, replay,
};
use bough_names::{BranchName, DataFileName, FileId, ManifestName, Term};

use crate::btree::{self, Applied, Mutation, Node, Op, TreeRead, TreeWrite};
use crate::cache::CachedPage;
use crate::files::FileTable;
use crate::mapping::{MappingTable, MappingView, NodeSource, PageSink, Slot, walk_radix};
use crate::page::index::IndexNode;
use crate::page::kind;
use crate::page::mapping::{MappingNode, fanout};

mod background;
mod buffered;
mod checkpoint;
mod checkpoint_notice;
mod commit;
mod deferred_work;
mod expiry;
mod fork_share;
mod history;
mod invariants;
mod prewarm;
mod read_only;
mod relocation;
mod reservation;
mod resume;
mod snapshot;
mod tail;
mod txn;

pub use background::BackgroundDone;
pub use checkpoint::{ForkPoint, InheritedLog};
pub use checkpoint_notice::CheckpointNotice;
use commit::{Staged, TreeCtx, stage};
pub use deferred_work::DeferredWork;
pub use expiry::ttl_key;
pub use prewarm::Prewarmed;
use reservation::{FIRST_RESERVATION, release_file};
use snapshot::{Fetch, tree_node};
pub use snapshot::{Published, TreeSnapshot};
use txn::{Active, HeadState, StagedPage, Txn};

pub use resume::FOLD_LOG_BYTES;

/// Largest manifest file read back into memory (a guard against hostile lengths).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 32;

/// Tuning of a branch head.
#[derive(Debug, Clone)]
pub struct HeadConfig {
    /// Page size of the partition (persisted in every manifest and data file).
    pub page_size: u32,
    /// Pages per data file, header page included.
    pub file_pages: u32,
    /// Most bytes preallocated ahead of the write position of a data file. A new file starts
    /// with a small reservation that doubles as it fills, so a thousand branches that each
    /// wrote a little do not each hold a whole file's worth of disk (design notes §4d).
    pub preallocate: u64,
    /// Checkpoint the mapping table when this many mapping chunks are dirty.
    pub checkpoint_chunks: usize,
    /// Rewrite the manifest as a fresh snapshot once it is larger than this.
    pub manifest_rewrite_bytes: u64,
    /// Start a new data file for every transaction, so each file is written (and synced)
    /// exactly once: the object-store backend uploads it as one immutable object.
    pub file_per_commit: bool,
    /// Bytes of acknowledged writes held in the write buffer before a checkpoint applies
    /// them to the tree. 0: no log and no buffer — every commit writes its pages and a
    /// manifest record (two syncs). Above 0: a commit is one log append and one
    /// `fdatasync` (ARCHITECTURE.md, "Write path").
    pub write_buffer_bytes: usize,
    /// Sizes of the write-ahead log files (used when `write_buffer_bytes` > 0).
    pub log: crate::wal::LogConfig,
    /// The bound every head of a store shares on the bytes their buffers hold together
    /// (`None`: each head is bounded by `write_buffer_bytes` alone).
    pub buffer_budget: Option<Arc<crate::buffer::BufferBudget>>,
    /// Write a history point after every manifest record (`head/history.rs`): the store
    /// keeps a history window for point-in-time branches.
    pub history: bool,
    /// Checkpoints of a full write buffer run on their own thread while commits go on
    /// (`head/background.rs`); `false`: the commit that fills the buffer checkpoints it.
    pub background_checkpoints: bool,
    /// Told when a large checkpoint of the write buffer is installed (`None`: nobody is).
    pub checkpoint_notice: Option<CheckpointNotice>,
}

impl Default for HeadConfig {
    fn default() -> Self {
        HeadConfig {
            page_size: 4096,
            file_pages: 2048,
            preallocate: 8 << 20,
            checkpoint_chunks: 128,
            manifest_rewrite_bytes: 16 << 20,
            file_per_commit: false,
            write_buffer_bytes: 0,
            log: crate::wal::LogConfig::default(),
            buffer_budget: None,
            history: false,
            background_checkpoints: false,
            checkpoint_notice: None,
        }
    }
}

/// A branch head: the single writer of one (partition, branch, term).
#[derive(Debug)]
pub struct Head {
    cfg: HeadConfig,
    files: Arc<FileTable>,
    branch: BranchName,
    term: Term,
    /// The branch's incarnation (`INCARNATION` extension; 0 if the manifest has none): in
    /// the ranges and headers of the files it creates, and so in their page checksums.
    incarnation: u64,
    manifest_path: String,
    manifest: Arc<dyn StorageFile>,
    manifest_end: u64,
    /// Sequence number of the manifest's last log record (0 right after a snapshot).
    seq: u64,
    /// The commit version of the manifest's snapshot record: the branch's version is
    /// `version_base + seq` (see [`Head::version`]).
    version_base: u64,
    dict: Vec<u8>,
    extensions: bough_manifest::ext::Extensions,
    state: HeadState,
    published: Arc<Published>,
    poisoned: Option<String>,
    /// The branch's current term as the catalog knows it; a head whose term is older is
    /// fenced and refuses to commit.
    fence: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// Extension values to write with the next commit.
    pending_ext: bough_manifest::ext::Extensions,
    /// (file id, end of the reserved space) of the file being appended to.
    reserved: (FileId, u64),
    /// Where this head's reservation of that file began: 0 for a file it created, the
    /// file's length for one it continues (see [`Head::resume_last_file`]).
    reserve_base: u64,
    /// After the last rewrite that dropped unreferenced branch file ranges: how many ranges
    /// were left, at which version.
    ranges_pruned: Option<(usize, u64)>,
    /// A tail replay dropped (its offset and bytes), still in the manifest: it is kept aside
    /// in a file of its own before the first write replaces it, so opening never destroys
    /// it (see [`Head::keep_tail_aside`]).
    dropped_tail: Option<(u64, Vec<u8>)>,
    /// A log record was appended since the head opened or last sealed its manifest: a clean
    /// close seals it then, and only then (see [`Head::close_clean`]).
    appended: bool,
    /// The write-ahead log and write buffer (`head/buffered.rs`).
    log: buffered::HeadLog,
    /// What history points need (`head/history.rs`); `None`: the store keeps no history.
    history: Option<history::HistoryTrack>,
    /// A checkpoint running on its own thread (`head/background.rs`).
    background: Option<background::Background>,
    /// Called by that thread once its result is ready (set by the store).
    background_done: Option<background::BackgroundDone>,
    /// Branches forked by reference from this head waiting for its tree at their fork
    /// version (`head/fork_share.rs`).
    fork_shares: Vec<(u64, std::sync::Weak<fork_share::ShareSlot>)>,
    /// What the last installed background checkpoint left for after the head is released
    /// (`head/deferred_work.rs`).
    deferred: Option<DeferredWork>,
}

/// The file-id high-water a head at `term` continues from: `durable` (the manifest's), or
/// the highest id of a file of `(branch, term)` already in the directory if that is higher —
/// orphans of commits that crashed before their manifest record. One existence check when
/// there are none; a listing when there are.
fn skip_orphans(
    files: &FileTable,
    branch: &BranchName,
    term: Term,
    durable: FileId,
) -> TreeResult<FileId> {
    let next = DataFileName::new(durable.saturating_add(1), branch.clone(), term);
    match files.storage().file_len(&files.path_of(&next.to_string())) {
        Err(e) if e.kind() == bough_io::ErrorKind::NotFound => return Ok(durable),
        Err(e) => return Err(e.into()),
        Ok(_) => {}
    }
    let mut max = durable;
    for name in files.storage().list(files.dir())? {
        if let bough_names::FileKind::Data(d) = bough_names::classify(&name)
            && d.branch == *branch
            && d.term == term
        {
            max = max.max(d.file_id);
        }
    }
    tracing::warn!(
        branch = %branch,
        term,
        durable,
        skipped_to = max,
        "data files above the manifest's high-water mark (a crashed commit's): new files start above them"
    );
    Ok(max)
}

impl Head {
    /// Creates the first manifest of `branch` at `term` in an empty state, or at `fork` (a
    /// parent's checkpointed snapshot). Fails with `AlreadyExists` if the manifest exists.
    pub fn create(
        files: Arc<FileTable>,
        cfg: HeadConfig,
        branch: BranchName,
        term: Term,
        fork: Option<&ForkPoint>,
        extensions: bough_manifest::ext::Extensions,
    ) -> TreeResult<Head> {
        let mut snap = match fork {
            Some(f) => f.snapshot.clone(),
            None => Snapshot::empty(branch.clone(), term, cfg.page_size),
        };
        snap.meta.branch = branch.clone();
        snap.meta.term = term;
        snap.extensions = extensions;
        // A fork by reference: the parent's buffered runs, named by the parent's log.
        let inherited = fork
            .and_then(|f| f.inherited.as_ref())
            .map(|i| buffered::HeadLog::inherit(i, &mut snap.extensions));
        let path = files.path_of(&ManifestName::new(branch.clone(), term).to_string());
        let bytes = encode_snapshot(&snap).map_err(|e| TreeError::InvalidArgument {
            what: format!("cannot encode the snapshot of {path}: {e}"),
        })?;
        files.storage().create_new(&path, &bytes)?;
        // Nothing names the new manifest yet: if it cannot be opened, remove it again —
        // durably, or recovery would finish the failed operation after a power loss — so a
        // retry can create it (best effort; a failed sync poisons the storage anyway).
        Head::open_with(files.clone(), cfg, branch, term, inherited).inspect_err(|_| {
            let _ = files
                .storage()
                .delete(&path)
                .and_then(|()| files.storage().sync_dir(files.dir()));
        })
    }

    /// Opens an existing manifest and replays it.
    pub fn open(
        files: Arc<FileTable>,
        cfg: HeadConfig,
        branch: BranchName,
        term: Term,
    ) -> TreeResult<Head> {
        Head::open_with(files, cfg, branch, term, None)
    }

    /// [`open`](Self::open); `inherited`: the log state of a branch just forked by
    /// reference, whose buffer is the parent's runs (its log is not read back).
    fn open_with(
        files: Arc<FileTable>,
        cfg: HeadConfig,
        branch: BranchName,
        term: Term,
        inherited: Option<buffered::HeadLog>,
    ) -> TreeResult<Head> {
        let path = files.path_of(&ManifestName::new(branch.clone(), term).to_string());
        let bytes = files.storage().read_file(&path, MAX_MANIFEST_BYTES)?;
        let replayed = replay(&bytes).map_err(|e| TreeError::manifest(path.clone(), e))?;
        if let Some(off) = replayed.dropped_tail {
            tracing::warn!(
                manifest = %path,
                offset = off,
                "{}",
                dropped_tail_finding(off)
            );
        }
        // Opening writes nothing: the dropped tail stays in the file until the first append
        // or rewrite, which first keeps it aside.
        let dropped_tail = replayed
            .dropped_tail
            .and_then(|off| Some((off, bytes.get(usize::try_from(off).ok()?..)?.to_vec())));
        let st = replayed.state;
        let history = cfg
            .history
            .then(|| history::HistoryTrack::new(st.overlay.clone()));
        let mut version_base = bough_manifest::commit_version(&st.extensions)
            .map_err(|e| {
                TreeError::manifest_content(path.clone(), 0, format!("version extension: {e}"))
            })?
            .unwrap_or(0);
        // The acknowledged commits after the last checkpoint, from the log the manifest
        // names (reading only: a torn tail is zeroed by the first append, not here).
        let (log, covered) = match inherited {
            Some(log) => {
                let covered = log.version.map(|v| v.saturating_sub(log.buffered));
                (log, covered)
            }
            None => buffered::HeadLog::recover(&files, &path, &st.extensions)?,
        };
        if let Some(c) = covered {
            // Kept for what reads `version_base` directly; the version is the log's.
            version_base = c.saturating_sub(st.last_seq);
        }
        let incarnation = bough_manifest::incarnation(&st.extensions)
            .map_err(|e| {
                TreeError::manifest_content(path.clone(), 0, format!("incarnation extension: {e}"))
            })?
            .unwrap_or(0);
        if st.meta.branch != branch || st.meta.term != term {
            return Err(TreeError::manifest_content(
                path,
                0,
                format!(
                    "manifest names branch {} term {}, expected {branch} term {term}",
                    st.meta.branch, st.meta.term
                ),
            ));
        }
        if st.page_size != cfg.page_size {
            return Err(TreeError::manifest_content(
                path,
                0,
                format!(
                    "manifest page size {} differs from the configured {}",
                    st.page_size, cfg.page_size
                ),
            ));
        }
        let cap = max_payload(cfg.page_size);
        let mut mapping =
            MappingTable::new(fanout(cap), st.mapping_root, st.next_page_id, st.free_head);
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
        // The manifest exists (it was just read): open it for appending, never create it.
        let manifest = files.storage().open(
            &path,
            OpenOptions {
                write: true,
                ..OpenOptions::default()
            },
        )?;
        // A crash can leave data files of this term above the durable high-water mark
        // (a commit that wrote them never reached the manifest). They are never overwritten:
        // new files start above them.
        let max_file_id = skip_orphans(&files, &branch, term, st.max_file_id)?;
        let state = HeadState {
            root: st.meta.root,
            ttl_root: st.meta.ttl_root,
            mapping,
            ranges: st.meta.branch_file_ranges.clone(),
            max_file_id,
            // No file is continued here: the writing open may continue the last one, past
            // every byte it holds (`resume_last_file`).
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
        let mut head = Head {
            cfg,
            files,
            branch,
            term,
            incarnation,
            manifest_path: path,
            manifest,
            manifest_end: replayed.end_offset,
            seq: st.last_seq,
            version_base,
            dict: st.dict,
            extensions: st.extensions,
            state,
            published: Arc::new(Published::new(snapshot)),
            poisoned: None,
            fence: None,
            pending_ext: Vec::new(),
            reserved: (0, 0),
            reserve_base: 0,
            ranges_pruned: None,
            dropped_tail,
            appended: false,
            log,
            history,
            background: None,
            background_done: None,
            fork_shares: Vec::new(),
            deferred: None,
        };
        head.charge_buffer();
        Ok(head)
    }

    /// The branch this head writes.
    pub fn branch(&self) -> &BranchName {
        &self.branch
    }

    /// The term this head writes at.
    pub fn term(&self) -> Term {
        self.term
    }

    /// The branch's incarnation (0: none recorded).
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The partition's files.
    pub fn files(&self) -> &Arc<FileTable> {
        &self.files
    }

    /// The latest committed snapshot.
    pub fn snapshot(&self) -> Arc<TreeSnapshot> {
        self.published.load()
    }

    /// A handle readers keep to load snapshots without the writer.
    pub fn published(&self) -> Arc<Published> {
        self.published.clone()
    }

    /// The file-id high-water mark.
    pub fn max_file_id(&self) -> FileId {
        self.state.max_file_id
    }

    /// The manifest's extensions (branch metadata kept by upper layers).
    pub fn extensions(&self) -> &bough_manifest::ext::Extensions {
        &self.extensions
    }

    /// Whether an earlier failure poisoned this head.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// Makes this head refuse every later write (`Poisoned`) because of `cause`: a
    /// failure left its term in doubt (a new term may exist that replays nothing this
    /// head writes from now on). A reopen starts from what storage holds.
    pub fn poison(&mut self, cause: String) {
        self.poisoned.get_or_insert(cause);
    }

    /// Makes this head refuse to commit once `fence` holds a newer term than its own.
    pub fn set_fence(&mut self, fence: Arc<std::sync::atomic::AtomicU64>) {
        self.fence = Some(fence);
    }

    fn writer_id(&self) -> String {
        format!("{}@{}", self.branch, self.term)
    }

    /// Sets an extension value; it is written with the next commit (atomically with it). If
    /// that commit fails, the value is dropped with it.
    pub fn stage_extension(&mut self, tag: u64, value: Vec<u8>) {
        bough_manifest::ext::set(&mut self.pending_ext, tag, value);
    }

    /// Makes `src` (a checkpointed snapshot of another branch of this partition) this
    /// branch's state, by reference: one log record, no data copied. File ids continue above
    /// everything either side allocated, so ranges stay disjoint (design notes §4, §7).
    pub fn adopt(&mut self, src: &Snapshot, now_ms: u64) -> TreeResult<()> {
        // Staged extensions belong to this commit: if it fails, they go with it.
        let staged_ext = std::mem::take(&mut self.pending_ext);
        self.check_poisoned()?;
        self.finish_background()?;
        self.own_log_for_inherited(now_ms)?;
        let before = self.version();
        if !src.overlay.is_empty() {
            return Err(TreeError::InvalidArgument {
                what: "an adopted snapshot must be checkpointed (no overlay)".into(),
            });
        }
        let cap = max_payload(self.cfg.page_size);
        let next_page_id = src.next_page_id.max(self.state.mapping.next_page_id());
        let st = HeadState {
            root: src.meta.root,
            ttl_root: src.meta.ttl_root,
            mapping: MappingTable::new(fanout(cap), src.mapping_root, next_page_id, src.free_head),
            ranges: src.meta.branch_file_ranges.clone(),
            max_file_id: src.max_file_id.max(self.state.max_file_id),
            active: None,
            resume: None,
        };
        let log = LogRecord {
            seq: self.seq + 1,
            root: st.root,
            ttl_root: st.ttl_root,
            max_file_id: st.max_file_id,
            branch_file_ranges: st.ranges.clone(),
            checkpoint: Some(src.mapping_root),
            next_page_id,
            free_head: src.free_head,
            changes: Vec::new(),
            extensions: staged_ext.clone(),
        };
        self.append_log(&log, "an adoption record")?;
        self.seq += 1;
        self.state = st;
        self.log.fork_base = None;
        for (tag, v) in staged_ext {
            bough_manifest::ext::set(&mut self.extensions, tag, v);
        }
        self.files.set_writing(&self.writer_id(), None);
        self.publish();
        self.write_history_point(now_ms, before)?;
        Ok(())
    }

    /// Stops writing: the head's open file is no longer protected as "being written" (its
    /// branch was deleted or handed to a new term).
    pub fn retire(&mut self) {
        // A deleted fork waits for no share: its parent must know now, not when this head
        // is dropped (which follows readers and threads, not the order of operations).
        self.log.fork_base = None;
        self.abandon_background();
        self.release_reservation();
        self.files.set_writing(&self.writer_id(), None);
        self.state.active = None;
        self.state.resume = None;
        self.poisoned = Some("the branch was deleted".into());
    }

    /// Hands this head the snapshot slot readers of the branch already hold (used when a
    /// new head replaces an old one of the same branch, e.g. at a new term).
    pub fn share_published(&mut self, p: Arc<Published>) {
        p.store(self.published.load());
        self.published = p;
    }

    /// The branch's commit version: one more with every record the head appends, carried
    /// across manifest rewrites, new terms and forks (see `bough_manifest::VERSION`).
    pub fn version(&self) -> u64 {
        self.log_version()
            .unwrap_or_else(|| self.version_base.saturating_add(self.seq))
    }

    /// The manifest file this head appends to.
    pub fn manifest_path(&self) -> &str {
        &self.manifest_path
    }

    /// The file this head is appending to, if any.
    pub fn active_file(&self) -> Option<FileId> {
        self.state.active.map(|a| a.file_id)
    }

    /// Pages written to a data file before it rolls over.
    pub fn file_pages(&self) -> u32 {
        self.cfg.file_pages
    }

    /// Whether the head has no tree.
    pub fn is_empty(&self) -> bool {
        self.state.root == NO_PAGE
    }
}

impl Drop for Head {
    fn drop(&mut self) {
        self.abandon_background();
        self.log.charged = self.uncharge_buffer();
        self.release_reservation();
        self.files.set_writing(&self.writer_id(), None);
    }
}
