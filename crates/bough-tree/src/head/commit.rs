//! The commit pipeline: stage a batch's pages, write and sync them, append one manifest
//! record and sync it, publish the new snapshot (the order of ARCHITECTURE.md's invariant 3).

use super::*;
use crate::error::{TreeError, TreeResult};
use std::borrow::Cow;

/// Most bytes of pages a commit hands to one write call (consecutive pages of a file are
/// written together, this much at a time).
const WRITE_CHUNK_BYTES: usize = 1 << 20;

impl Head {
    pub(crate) fn check_poisoned(&self) -> TreeResult<()> {
        if let Some(f) = &self.fence {
            let current = f.load(std::sync::atomic::Ordering::Acquire);
            if current != self.term {
                return Err(TreeError::Fenced {
                    what: format!(
                        "{}@{} is at term {current}; this writer holds term {}",
                        self.files.dir(),
                        self.branch,
                        self.term
                    ),
                });
            }
        }
        match &self.poisoned {
            Some(cause) => Err(TreeError::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Commits a sorted batch of distinct-key mutations atomically; returns once it is
    /// durable.
    pub fn commit(&mut self, muts: &[Mutation], now_ms: u64) -> TreeResult<Applied> {
        self.commit_as(Cow::Borrowed(muts), now_ms, true)
    }

    /// [`commit`](Self::commit) (`sync`) or [`commit_unsynced`](Self::commit_unsynced) of a
    /// batch the caller gives up: the write buffer keeps its ops as they are, where a
    /// borrowed batch is copied (a copy of every key and value per commit).
    pub fn commit_owned(
        &mut self,
        muts: Vec<Mutation>,
        now_ms: u64,
        sync: bool,
    ) -> TreeResult<Applied> {
        self.commit_as(Cow::Owned(muts), now_ms, sync)
    }

    /// [`commit`](Self::commit) with buffered durability: a batch that goes through the
    /// write buffer's log returns once its record is written, before it is synced (durable
    /// after [`sync_log`](Self::sync_log), the next manifest record or a synced commit). A
    /// batch that does not (no buffer, or one too large for a log record) commits durably
    /// as [`commit`](Self::commit) does.
    pub fn commit_unsynced(&mut self, muts: &[Mutation], now_ms: u64) -> TreeResult<Applied> {
        self.commit_as(Cow::Borrowed(muts), now_ms, false)
    }

    fn commit_as(
        &mut self,
        muts: Cow<'_, [Mutation]>,
        now_ms: u64,
        sync: bool,
    ) -> TreeResult<Applied> {
        btree::check_batch(&muts, self.cfg.page_size).map_err(|what| {
            TreeError::InvalidArgument {
                what: format!("{}@{}: {what}", self.files.dir(), self.branch),
            }
        })?;
        if self.takes_buffered(&muts) {
            self.commit_buffered(muts.into_owned(), now_ms, sync)?;
            return Ok(Applied::default());
        }
        self.commit_direct_checked(&muts, now_ms)
    }

    /// Commits a sorted batch of distinct-key mutations through the tree (two syncs),
    /// checkpointing the write buffer in the same record: for callers that need what the
    /// batch did ([`Applied`]), which only the tree knows.
    pub fn commit_direct(&mut self, muts: &[Mutation], now_ms: u64) -> TreeResult<Applied> {
        btree::check_batch(muts, self.cfg.page_size).map_err(|what| {
            TreeError::InvalidArgument {
                what: format!("{}@{}: {what}", self.files.dir(), self.branch),
            }
        })?;
        self.commit_direct_checked(muts, now_ms)
    }

    fn commit_direct_checked(&mut self, muts: &[Mutation], now_ms: u64) -> TreeResult<Applied> {
        self.checkpoint_for_forks(now_ms)?;
        let applied = self.commit_inner(muts, false, now_ms, |_, _| Ok(()))?;
        if self.manifest_end > self.cfg.manifest_rewrite_bytes {
            self.rewrite_manifest(now_ms)?;
        }
        Ok(applied)
    }

    pub(crate) fn commit_inner(
        &mut self,
        muts: &[Mutation],
        force_checkpoint: bool,
        now_ms: u64,
        extra: impl FnOnce(&mut Txn<'_>, &mut Applied) -> TreeResult<()>,
    ) -> TreeResult<Applied> {
        // Staged extensions belong to this commit: if it fails, they go with it (the
        // operation that staged them failed too), never riding along with a later commit.
        let mut staged_ext = std::mem::take(&mut self.pending_ext);
        self.check_poisoned()?;
        // A running checkpoint's tree is the one this record follows.
        self.finish_background()?;
        self.own_log_for_inherited(now_ms)?;
        let before = self.version();
        // A fork whose parent's tree reached the fork version starts from that tree, which
        // holds the inherited runs; its record names that tree's mapping root (below).
        let shared = self.take_fork_base();
        let (base, absorbed, force_checkpoint) = match &shared {
            Some((v, s)) => {
                let base = self.state_from_shared(s)?;
                if let Some(bases) = self.bases_with_shared(*v, s) {
                    bough_manifest::ext::set(&mut staged_ext, bough_manifest::MERGE_BASES, bases);
                }
                let force = force_checkpoint || s.mapping_root_if_clean().is_none();
                (base, Some(self.absorb_buffer_after(*v, muts)), force)
            }
            // The record also checkpoints the write buffer (its ops first, then `muts`).
            None => (
                self.state.clone(),
                self.absorb_buffer(muts),
                force_checkpoint,
            ),
        };
        let muts = absorbed.as_deref().unwrap_or(muts);
        let mut applied = Applied::default();
        let ctx = self.tree_ctx();
        let staged = stage(&ctx, base, muts, force_checkpoint, &mut applied, extra)?;
        let Staged {
            st,
            pages,
            new_files,
            staged,
            checkpoint,
            changes,
        } = staged;
        if let Err(e) = self.write_pages(&st, &pages, &new_files, now_ms) {
            self.skip_file_ids(&new_files);
            return Err(e);
        }
        // A record on the parent's tree that writes no mapping of its own names that tree's
        // mapping root, its changes on top (the parent's, when it shared, are in its pages).
        let checkpoint =
            checkpoint.or_else(|| shared.as_ref().and_then(|(_, s)| s.mapping_root_if_clean()));
        let log = record_of(&st, self.seq + 1, checkpoint, changes, staged_ext.clone());
        if let Err(e) = self.append_log(&log, "a log record") {
            self.skip_file_ids(&new_files);
            return Err(e);
        }
        self.seq += 1;
        self.state = st;
        // Its tree is no longer the one it was forked with.
        self.log.fork_base = None;
        for (tag, v) in staged_ext {
            bough_manifest::ext::set(&mut self.extensions, tag, v);
        }
        let written = pages.len();
        self.keep_written(&pages, staged);
        // The state is durable: readers see it whatever becomes of its history point.
        self.publish();
        self.notice_checkpoint(written);
        self.fill_fork_shares();
        self.write_history_point(now_ms, before)?;
        Ok(applied)
    }

    /// The parts of this head a tree update reads.
    pub(crate) fn tree_ctx(&self) -> TreeCtx<'_> {
        TreeCtx {
            files: &self.files,
            cfg: &self.cfg,
            branch: &self.branch,
            term: self.term,
            incarnation: self.incarnation,
        }
    }

    /// Publishes the head's state; returns the snapshot it replaces (see
    /// [`Published::store`]).
    pub(crate) fn publish(&self) -> Arc<TreeSnapshot> {
        let mapping = self.state.mapping.view();
        // A commit that only added to the write buffer leaves the tree as it was: its
        // decoded top nodes stay valid and are shared (the current snapshot is alive
        // while compared, so a pointer match cannot be a reused allocation).
        let current = self.published.load();
        let top = if current.root == self.state.root
            && current.ttl_root == self.state.ttl_root
            && current.mapping.same_version(&mapping)
            && *current.ranges == self.state.ranges
        {
            current.top.clone()
        } else {
            Arc::default()
        };
        self.published.store(Arc::new(TreeSnapshot {
            root: self.state.root,
            ttl_root: self.state.ttl_root,
            mapping,
            ranges: Arc::new(self.state.ranges.clone()),
            files: self.files.clone(),
            version: self.version(),
            buffer: self.log.buffer.clone(),
            top,
        }))
    }

    /// Writes staged pages and makes them durable. A failed write leaves the head as it was
    /// (pages past the durable frontier are simply overwritten by the next commit); a failed
    /// sync poisons it.
    pub(crate) fn write_pages(
        &mut self,
        st: &HeadState,
        pages: &[StagedPage],
        new_files: &[FileId],
        now_ms: u64,
    ) -> TreeResult<()> {
        let ctx = TreeCtx {
            files: &self.files,
            cfg: &self.cfg,
            branch: &self.branch,
            term: self.term,
            incarnation: self.incarnation,
        };
        let mut spot = (self.reserved, self.reserve_base);
        let written = write_staged(&ctx, &mut spot, st, pages, new_files, now_ms);
        (self.reserved, self.reserve_base) = spot;
        written.map_err(|f| {
            if f.poison.is_some() {
                self.poisoned = f.poison;
            }
            f.err
        })
    }

    /// After a failed commit: the data files it may have created stay on storage (a file
    /// is never replaced), so the next commit allocates above them.
    pub(crate) fn skip_file_ids(&mut self, created: &[FileId]) {
        if let Some(&top) = created.iter().max() {
            self.state.max_file_id = self.state.max_file_id.max(top);
        }
    }

    /// The one step that appends a log record (a commit, an adoption): the manifest
    /// invariants checked against the head's state, the record encoded, appended and
    /// synced. `what` names it in errors.
    pub(crate) fn append_log(&mut self, log: &LogRecord, what: &str) -> TreeResult<()> {
        // A head with a log names it, and the version its tree now covers, in every record.
        let with_ref = self.with_log_ref(log);
        let log = with_ref.as_ref().unwrap_or(log);
        self.append_record(log, what)?;
        if with_ref.is_some() {
            self.log_record_durable(log);
        }
        Ok(())
    }

    /// Appends `log` as it is (no `LOG` added, the buffer left alone): the invariants
    /// checked, the record encoded, appended and synced, history tracking it. `what` names
    /// it in errors.
    pub(crate) fn append_record(&mut self, log: &LogRecord, what: &str) -> TreeResult<()> {
        self.check_log_invariants(log)?;
        let bytes = encode_log(log).map_err(|e| TreeError::InvalidArgument {
            what: format!("cannot encode {what} of {}: {e}", self.manifest_path),
        })?;
        self.append_manifest(&bytes)?;
        if let Some(h) = self.history.as_mut() {
            h.follow(log);
        }
        Ok(())
    }

    pub(crate) fn append_manifest(&mut self, bytes: &[u8]) -> TreeResult<()> {
        // A manifest record never names (or checkpoints past) log records still unsynced.
        self.sync_log_writer()?;
        self.keep_tail_aside()?;
        self.manifest.write_at(self.manifest_end, bytes)?;
        if let Err(e) = self.manifest.sync() {
            self.poisoned = Some(format!("fdatasync of {} failed: {e}", self.manifest_path));
            return Err(e.into());
        }
        self.manifest_end += bytes.len() as u64;
        self.appended = true;
        Ok(())
    }
}

/// The parts of a head a tree update reads (a background checkpoint holds its own copies).
#[derive(Clone, Copy)]
pub(crate) struct TreeCtx<'a> {
    pub(super) files: &'a FileTable,
    pub(super) cfg: &'a HeadConfig,
    pub(super) branch: &'a BranchName,
    pub(super) term: Term,
    pub(super) incarnation: u64,
}

/// A tree update staged in memory: the new state and its pages, nothing written yet.
pub(crate) struct Staged {
    pub(super) st: HeadState,
    pub(super) pages: Vec<StagedPage>,
    pub(super) new_files: Vec<FileId>,
    pub(super) staged: HashMap<PageAddr, CachedPage>,
    /// The mapping checkpoint's root, when the update wrote one.
    pub(super) checkpoint: Option<PageAddr>,
    /// Mapping slots changed since the last mapping checkpoint, for the record.
    pub(super) changes: Vec<(PageId, u64)>,
}

/// The manifest record (number `seq`) that makes tree state `st` durable, with its mapping
/// checkpoint, the mapping slots changed since, and `extensions`.
pub(crate) fn record_of(
    st: &HeadState,
    seq: u64,
    checkpoint: Option<PageAddr>,
    changes: Vec<(PageId, u64)>,
    extensions: bough_manifest::ext::Extensions,
) -> LogRecord {
    LogRecord {
        seq,
        root: st.root,
        ttl_root: st.ttl_root,
        max_file_id: st.max_file_id,
        branch_file_ranges: st.ranges.clone(),
        checkpoint,
        next_page_id: st.mapping.next_page_id(),
        free_head: st.mapping.free_head(),
        changes,
        extensions,
    }
}

/// Applies `muts` (then `extra`) to `st` and stages every page it writes: the tree, the TTL
/// index kept exact, and a mapping checkpoint when forced or when enough chunks are dirty.
pub(crate) fn stage(
    ctx: &TreeCtx<'_>,
    st: HeadState,
    muts: &[Mutation],
    force_checkpoint: bool,
    applied: &mut Applied,
    extra: impl FnOnce(&mut Txn<'_>, &mut Applied) -> TreeResult<()>,
) -> TreeResult<Staged> {
    let mut txn = Txn {
        ctx: *ctx,
        st,
        pages: Vec::new(),
        staged: HashMap::new(),
        new_files: Vec::new(),
        ttl_tree: false,
    };
    let root = txn.st.root;
    txn.st.root = btree::apply(&mut txn, root, muts, applied)?;
    extra(&mut txn, applied)?;
    // Keep the TTL index exact: drop the expiries of replaced entries, add the new ones.
    if !applied.expiry_removed.is_empty() || !applied.expiry_added.is_empty() {
        let mut ttl: std::collections::BTreeMap<Vec<u8>, Op> = std::collections::BTreeMap::new();
        for (k, e) in &applied.expiry_removed {
            ttl.insert(ttl_key(*e, k), Op::ForceDelete);
        }
        for (k, e) in &applied.expiry_added {
            ttl.insert(
                ttl_key(*e, k),
                Op::Put {
                    value: Vec::new(),
                    timestamp: 0,
                    expire_at: 0,
                },
            );
        }
        let ttl_muts: Vec<Mutation> = ttl
            .into_iter()
            .map(|(key, op)| Mutation { key, op })
            .collect();
        let ttl_root = txn.st.ttl_root;
        txn.ttl_tree = true;
        txn.st.ttl_root = btree::apply(&mut txn, ttl_root, &ttl_muts, &mut Applied::default())?;
        txn.ttl_tree = false;
    }
    let checkpoint = if force_checkpoint
        || txn.st.mapping.current().dirty_chunks() >= ctx.cfg.checkpoint_chunks
    {
        // The checkpoint stages pages through the transaction while reading old nodes;
        // it reads through a copy of what was staged before it started.
        let staged = std::mem::take(&mut txn.staged);
        let ranges = txn.st.ranges.clone();
        let mut mapping = txn.st.mapping.clone();
        let root = {
            let fetch = Fetch {
                files: ctx.files,
                ranges: &ranges,
                staged: Some(&staged),
                kept: None,
            };
            mapping.checkpoint(&fetch, &mut txn)?
        };
        txn.staged.extend(staged);
        // The checkpoint covers every change so far; the record carries none.
        mapping.take_changes();
        txn.st.mapping = mapping;
        Some(root)
    } else {
        None
    };
    let changes = txn.st.mapping.take_changes();
    let Txn {
        st,
        pages,
        new_files,
        staged,
        ..
    } = txn;
    Ok(Staged {
        st,
        pages,
        new_files,
        staged,
        checkpoint,
        changes,
    })
}

/// Writes staged pages and syncs every data file written (and the directory when a file was
/// created); `spot` is the file appended to with the end of its reserved space, and where
/// this writer's reservation of it began. A failed sync names the cause to poison with.
#[expect(
    clippy::indexing_slicing,
    reason = "i < j <= pages.len() by the loops, the buffer holds j - i pages of ps bytes, and every staged payload fits its page (max_payload)"
)]
pub(crate) fn write_staged(
    ctx: &TreeCtx<'_>,
    spot: &mut ((FileId, u64), u64),
    st: &HeadState,
    pages: &[StagedPage],
    new_files: &[FileId],
    now_ms: u64,
) -> Result<(), WriteFailure> {
    if pages.is_empty() {
        return Ok(());
    }
    let ps = ctx.cfg.page_size as usize;
    let writer_id = format!("{}@{}", ctx.branch, ctx.term);
    // A new file seals the one appended to so far (once this commit's pages are in it).
    let sealed = (!new_files.is_empty()).then_some(spot.0);
    for &id in new_files {
        let first = FIRST_RESERVATION.min(ctx.cfg.preallocate);
        let f = ctx
            .files
            .create(id, ctx.branch, ctx.term, ctx.incarnation, first, now_ms)
            .map_err(failed)?;
        *spot = ((id, first), 0);
        // Registered before any manifest names it, so GC keeps it from now on.
        ctx.files.set_writing(&writer_id, Some(f.name.to_string()));
    }
    let mut touched: Vec<FileId> = Vec::new();
    let mut buf = Vec::new();
    let mut i = 0;
    while i < pages.len() {
        // A run of consecutive pages of one file becomes one write.
        let file_id = pages[i].addr.file_id();
        let mut j = i + 1;
        while j < pages.len()
            && pages[j].addr.file_id() == file_id
            && pages[j].addr.page_index() == pages[j - 1].addr.page_index() + 1
        {
            j += 1;
        }
        let h = ctx.files.handle(&st.ranges, file_id).map_err(failed)?;
        let end = page_offset(pages[j - 1].addr.page_index() + 1, ctx.cfg.page_size);
        let ((reserved_id, reserved_end), base) = *spot;
        if reserved_id == file_id && end > reserved_end && ctx.cfg.preallocate > 0 {
            // Double the reservation (bounded): appends stay inside reserved space.
            let grow = (reserved_end - base.min(reserved_end))
                .max(FIRST_RESERVATION.min(ctx.cfg.preallocate))
                .max(end - reserved_end)
                .min(ctx.cfg.preallocate.max(end - reserved_end));
            h.file.preallocate(reserved_end, grow).map_err(failed)?;
            spot.0.1 += grow;
        }
        // Written a bounded chunk at a time through one reused buffer: a checkpoint's
        // run is often 100+ MiB, and one buffer that size cost a page fault per page.
        for chunk in pages[i..j].chunks(WRITE_CHUNK_BYTES.div_ceil(ps).max(1)) {
            buf.clear();
            buf.resize(ps * chunk.len(), 0);
            for (page, p) in buf.chunks_exact_mut(ps).zip(chunk) {
                page[FRAME_HEADER_LEN..FRAME_HEADER_LEN + p.payload.len()]
                    .copy_from_slice(&p.payload);
                seal_page(page, h.salt, p.addr.page_index(), p.kind, p.payload.len())
                    .map_err(failed)?;
            }
            let first = chunk.first().map_or(0, |p| p.addr.page_index());
            h.file
                .write_at(page_offset(first, ctx.cfg.page_size), &buf)
                .map_err(failed)?;
        }
        if !touched.contains(&file_id) {
            touched.push(file_id);
        }
        i = j;
    }
    for file_id in touched {
        let h = ctx.files.handle(&st.ranges, file_id).map_err(failed)?;
        if let Err(e) = h.file.sync() {
            return Err(WriteFailure {
                poison: Some(format!("fdatasync of {} failed: {e}", h.path)),
                err: e.into(),
            });
        }
    }
    if !new_files.is_empty()
        && let Err(e) = ctx.files.storage().sync_dir(ctx.files.dir())
    {
        return Err(WriteFailure {
            poison: Some(format!("directory sync of {} failed: {e}", ctx.files.dir())),
            err: e.into(),
        });
    }
    if let Some(old) = sealed {
        release_file(ctx, old);
    }
    Ok(())
}

/// A failed page write: the error, and the cause to poison the head with when a sync
/// failed (then nothing of the update may be retried).
pub(crate) struct WriteFailure {
    pub(super) err: TreeError,
    pub(super) poison: Option<String>,
}

fn failed(e: impl Into<TreeError>) -> WriteFailure {
    WriteFailure {
        err: e.into(),
        poison: None,
    }
}
