//! The buffered head (ARCHITECTURE.md, "Write path"): a commit appends one record to the
//! branch's write-ahead log, `fdatasync`s it once, and publishes its batch as a write-buffer
//! run above the tree; a checkpoint later applies the buffer to the tree in one sorted
//! update, in the same manifest record that moves the `LOG` reference past it.
//!
//! Rules this module keeps:
//! - **Every manifest record of a head with a log absorbs the whole buffer** (it goes
//!   through [`Head::commit_inner`], which applies the buffered batch first) and carries
//!   `LOG` = {the file appended to, `start` = where its next record goes, `covered` = the
//!   version after the record}. So replay after it starts exactly at the first commit the
//!   tree lacks, and no log file is read across a hole. **One exception:** a full file is
//!   left for the next one by a record that changes nothing but `LOG` (the one in force
//!   plus the new file, all with the tree's `covered`), while that `LOG` names fewer than
//!   [`MAX_LOG_FILES`] files; the buffer stays, and a checkpoint waits for its own bound.
//! - **Versions:** while `LOG` is in force the head keeps its version explicitly
//!   (`HeadLog::version`): a logged commit is one version, and so is every manifest record
//!   that changes content (a direct commit, an adoption, a relocation, a mapping
//!   checkpoint — as without a log); the records that only move the log (a buffer
//!   checkpoint, naming a new log file) are not, so the version counts commits. At open
//!   the version is `covered` of the manifest's `LOG` plus the commits replayed.
//! - **A new log file is named before it is appended to:** it is created (laid out, file
//!   and directory synced), then a manifest record naming it is synced, then records go in.
//! - **Buffered durability** ([`Head::commit_unsynced`]): the record is written, not
//!   synced, and the commit acknowledged; the log is synced (one `fdatasync` for every
//!   record so far) by [`Head::sync_log`], before every manifest record and manifest
//!   rewrite (so before every checkpoint, the record naming a new log file, and a clean
//!   close), and by the synced commits after it.
//! - **A failed log sync poisons the head**; nothing of that commit is acknowledged (a
//!   failed [`Head::sync_log`] fails the sync), and the head never retries. A failed log
//!   write only fails its commit.

use super::*;
use crate::buffer::{WriteBuffer, merge_muts};
use crate::error::{TreeError, TreeResult};
use crate::wal::{LogConfig, LogWriter, commit_entry, recover};
use bough_manifest::{
    LOG, LogRef, LogReplayed, MAX_LOG_BODY, decode_log_refs, encode_log_refs, log_refs,
};
use bough_names::LogFileName;

/// The log and write buffer of a head.
#[derive(Debug, Default)]
pub(crate) struct HeadLog {
    /// Acknowledged commits not yet in the tree.
    pub(super) buffer: WriteBuffer,
    /// How many commits (versions) `buffer` holds.
    pub(super) buffered: u64,
    /// The branch's version while `LOG` is in force (buffered commits included); `None`:
    /// the head never had a log, and its version is `version_base + seq`.
    pub(super) version: Option<u64>,
    /// The record being written only checkpoints the buffer or names a log file: it is
    /// not a version of its own.
    housekeeping: bool,
    /// The file appended to (`None` until the first buffered commit of this head).
    pub(super) writer: Option<LogWriter>,
    /// A file created and waiting for the manifest record that names it.
    next_writer: Option<LogWriter>,
    /// The reference the manifest holds when this head has no writer yet (replayed at
    /// open), with the replay of its file (to continue appending to it when it is ours).
    in_force: Option<(LogRef, LogReplayed)>,
    /// Bytes of `buffer` the store's [`crate::buffer::BufferBudget`] counts.
    pub(super) charged: usize,
    /// A fork by reference that has not written a tree of its own yet: its fork version
    /// and where its parent leaves its tree at that version (`head/fork_share.rs`).
    pub(super) fork_base: Option<(u64, Arc<super::fork_share::ShareSlot>)>,
}

impl HeadLog {
    /// The reference a record written now carries, the tree then covering `covered`.
    fn reference(&self, covered: u64) -> Option<LogRef> {
        if let Some(w) = self.next_writer.as_ref().or(self.writer.as_ref()) {
            return Some(w.reference(w.offset(), covered));
        }
        self.in_force.as_ref().map(|(r, replayed)| LogRef {
            start: replayed.end_offset.max(r.start),
            covered,
            until: 0,
            ..r.clone()
        })
    }

    /// Whether this head appends (or is about to append) to a log file of its own.
    pub(super) fn has_writer(&self) -> bool {
        self.writer.is_some() || self.next_writer.is_some()
    }

    /// Replays the log the manifest's extensions name (if any) into a buffer. Returns the
    /// log state and the version the manifest covers (`None`: no `LOG`).
    pub(super) fn recover(
        files: &FileTable,
        manifest: &str,
        extensions: &bough_manifest::ext::Extensions,
    ) -> TreeResult<(HeadLog, Option<u64>)> {
        let refs = log_refs(extensions).map_err(|e| {
            TreeError::manifest_content(manifest.to_string(), 0, format!("LOG extension: {e}"))
        })?;
        let Some(refs) = refs.filter(|r| !r.is_empty()) else {
            return Ok((HeadLog::default(), None));
        };
        let covered = refs.last().map_or(0, |r| r.covered);
        let (buffer, mut replays) = recover(files.storage().as_ref(), files.dir(), &refs)?;
        let buffered = buffer
            .last_version()
            .map_or(0, |v| v.saturating_sub(covered));
        let in_force = match (refs.last(), replays.pop()) {
            (Some(r), Some(replayed)) => Some((r.clone(), replayed)),
            _ => None,
        };
        Ok((
            HeadLog {
                buffer,
                buffered,
                version: Some(covered.saturating_add(buffered)),
                housekeeping: false,
                writer: None,
                next_writer: None,
                in_force,
                charged: 0,
                fork_base: None,
            },
            Some(covered),
        ))
    }
}

impl HeadLog {
    /// The log state of a branch forked by reference, whose first manifest names the
    /// parent's references cut at the fork version (`extensions` get that `LOG`): the
    /// buffer is the parent's runs, shared, and no file of its own is created until its
    /// first record ([`Head::own_log_for_inherited`]).
    pub(super) fn inherit(
        inherited: &super::InheritedLog,
        extensions: &mut bough_manifest::ext::Extensions,
    ) -> HeadLog {
        let covered = inherited.refs.last().map_or(0, |r| r.covered);
        bough_manifest::ext::set(extensions, LOG, encode_log_refs(&inherited.refs));
        HeadLog {
            buffer: inherited.buffer.fenced_at(inherited.version),
            buffered: inherited.version.saturating_sub(covered),
            version: Some(inherited.version),
            fork_base: Some((inherited.version, Arc::clone(&inherited.share))),
            ..HeadLog::default()
        }
    }
}

/// A log file the tree has caught up with is left for a new one once it holds this many
/// bytes of records: each file then holds about one checkpoint interval of commits, and the
/// ones behind the tree go at the next GC instead of living until the file fills.
const ROTATE_AFTER_BYTES: u64 = 1 << 20;

/// Most log files one `LOG` extension names. A full file is left for the next one with
/// its commits still buffered while fewer are named (a checkpoint then waits for the
/// buffer's own bound), and by the record that checkpoints the buffer once this many are:
/// so a commit checkpoints for a full file at most once every this many files, and an open
/// replays at most this many.
pub(crate) const MAX_LOG_FILES: usize = 8;

/// Bytes a commit's log record takes, at most (key, value and a generous per-entry
/// overhead): a record that might not fit the file is started in a new one.
fn record_estimate(muts: &[Mutation]) -> u64 {
    let body: u64 = muts
        .iter()
        .map(|m| {
            let value = match &m.op {
                Op::Put { value, .. } | Op::Replace { value, .. } => value.len(),
                Op::Delete { .. } | Op::ForceDelete | Op::ReplaceWithTombstone { .. } => 0,
            };
            (m.key.len() + value + 40) as u64
        })
        .sum();
    body + 2 * bough_manifest::LOG_BLOCK as u64
}

impl Head {
    /// The log configuration of this head.
    fn log_cfg(&self) -> LogConfig {
        self.cfg.log
    }

    /// Whether `muts` go through the log (a buffered head, a batch a record can hold, no
    /// extension riding along: those need a manifest record).
    pub(super) fn takes_buffered(&self, muts: &[Mutation]) -> bool {
        self.cfg.write_buffer_bytes > 0
            && !muts.is_empty()
            && self.pending_ext.is_empty()
            && record_estimate(muts) <= u64::from(MAX_LOG_BODY).min(self.log_cfg().file_bytes / 2)
    }

    /// Commits a checked batch through the log: one record, one `fdatasync` (none when not
    /// `sync`), then the run is published. When the buffer is over its size, starts a
    /// checkpoint (on its own thread when background checkpoints are on; see
    /// [`Head::checkpoint_full_buffer`]).
    pub(super) fn commit_buffered(
        &mut self,
        muts: Vec<Mutation>,
        now_ms: u64,
        sync: bool,
    ) -> TreeResult<()> {
        self.check_poisoned()?;
        self.poll_background()?;
        self.checkpoint_for_forks(now_ms)?;
        let est = record_estimate(&muts);
        if self.log_caught_up() || self.log.writer.as_ref().is_none_or(|w| !w.fits(est)) {
            // A full file is left for the next one with the buffer kept while the `LOG`
            // in force may name one more file, also while a checkpoint runs: the rotation
            // keeps naming the file that checkpoint's `LOG` resumes in (waiting for it
            // here held a commit up for the rest of the checkpoint, 0.35-0.4 s in
            // `stall_probe`). Otherwise the record naming the next file checkpoints
            // whatever is buffered (after a running checkpoint), and this commit waits.
            let mut rotated = !self.log.buffer.is_empty() && self.rotate_keeping_buffer(now_ms)?;
            if !rotated && self.background.is_some() {
                let started = std::time::Instant::now();
                self.finish_background()?;
                self.note_commit_checkpoint(started);
                rotated = !self.log.buffer.is_empty() && self.rotate_keeping_buffer(now_ms)?;
            }
            if !rotated {
                let absorbs = !self.log.buffer.is_empty();
                let started = std::time::Instant::now();
                self.start_log(now_ms)?;
                if absorbs {
                    self.note_commit_checkpoint(started);
                }
            }
        }
        let version = self.version().saturating_add(1);
        let entry = commit_entry(version, now_ms, &muts);
        let Some(writer) = self.log.writer.as_mut() else {
            return Err(TreeError::InvalidArgument {
                what: format!("{}: no log file to append to", self.manifest_path),
            });
        };
        let appended = if sync {
            writer.append(&entry)
        } else {
            writer.append_unsynced(&entry)
        };
        if let Err(e) = appended {
            // The writer poisons itself only when its sync failed; a failed write leaves
            // the head usable (nothing was acknowledged, nothing needs a retried sync).
            if writer.poisoned().is_some() {
                self.poisoned = Some(format!("log append of {} failed: {e}", self.branch));
            }
            return Err(e);
        }
        drop(entry);
        self.log.buffer.push(version, muts);
        self.log.buffered += 1;
        self.log.version = Some(version);
        self.charge_buffer();
        self.publish();
        // A checkpoint that became ready during this commit found the head busy.
        self.install_finished_background();
        let own = self.own_buffer_bytes();
        let over_own = own > self.cfg.write_buffer_bytes;
        let for_budget = !over_own
            && self
                .cfg
                .buffer_budget
                .as_ref()
                .is_some_and(|b| b.wants_checkpoint(own));
        if over_own || for_budget {
            self.checkpoint_full_buffer(own, for_budget, now_ms);
        }
        Ok(())
    }

    /// After a commit that left the buffer over its bound (its own, or the store's when
    /// `for_budget`): starts a background checkpoint; with one running, waits for it only
    /// when the buffer is past twice its bound or the store's bound presses (the
    /// back-pressure), then starts the next. Checkpoints in line when checkpoints do not
    /// run in the background. A failure is logged: the commit is acknowledged either way,
    /// and the next commit tries again.
    fn checkpoint_full_buffer(&mut self, own: usize, for_budget: bool, now_ms: u64) {
        if self.background.is_some() {
            if own <= self.cfg.write_buffer_bytes.saturating_mul(2) && !for_budget {
                return;
            }
            let started = std::time::Instant::now();
            if let Err(e) = self.finish_background() {
                tracing::warn!(branch = %self.branch, error = %e, "background checkpoint not installed");
            }
            self.note_commit_checkpoint(started);
            let own = self.own_buffer_bytes();
            let still = own > self.cfg.write_buffer_bytes
                || self
                    .cfg
                    .buffer_budget
                    .as_ref()
                    .is_some_and(|b| b.wants_checkpoint(own));
            if !still {
                return;
            }
        }
        if for_budget && let Some(b) = &self.cfg.buffer_budget {
            b.note_forced();
        }
        if self.start_background(now_ms) {
            return;
        }
        let started = std::time::Instant::now();
        if let Err(e) = self.checkpoint_buffer(now_ms) {
            tracing::warn!(branch = %self.branch, error = %e, "checkpoint of the write buffer failed; retried at the next commit");
        }
        self.note_commit_checkpoint(started);
    }

    /// Counts a checkpoint a commit waited for since `started` (measured for the stats
    /// only: the store clock decides nothing here).
    fn note_commit_checkpoint(&self, started: std::time::Instant) {
        if let Some(b) = &self.cfg.buffer_budget {
            b.note_commit_checkpoint(started.elapsed());
        }
    }

    /// Tells the store's buffer budget what this head's buffer holds now.
    pub(super) fn charge_buffer(&mut self) {
        let now = self.own_buffer_bytes();
        if let Some(b) = &self.cfg.buffer_budget {
            b.recharge(self.log.charged, now);
        }
        self.log.charged = now;
    }

    /// Takes this head's buffer off the store's budget (the head goes); returns what it
    /// is charged from then on (nothing).
    pub(super) fn uncharge_buffer(&self) -> usize {
        if let Some(b) = &self.cfg.buffer_budget {
            b.recharge(self.log.charged, 0);
        }
        0
    }

    /// Applies the write buffer to the tree (one sorted update, each touched leaf rewritten
    /// once) in one manifest record that moves the `LOG` reference past it. Nothing to do
    /// when nothing is buffered.
    pub fn checkpoint_buffer(&mut self, now_ms: u64) -> TreeResult<()> {
        self.finish_background()?;
        if self.log.buffer.is_empty() {
            // A fork waits for this tree, at its version already (a background
            // checkpoint's install offers nothing): a record writing the mapping offers it,
            // or, with the mapping in its pages, the state as it is.
            if self.forks_waiting() {
                if self.dirty_chunks() > 0 {
                    return self.housekeeping_record(now_ms);
                }
                self.fill_fork_shares();
            }
            // (Nothing can wait for a sync then: emptying the buffer took a manifest record,
            // and the log was synced before it. Cheap to make sure.)
            return self.sync_log_writer();
        }
        // Synced first, not only before the record: if the checkpoint fails (a full disk),
        // what was acknowledged is durable all the same (a close relies on this).
        self.sync_log_writer()?;
        self.housekeeping_record(now_ms)
    }

    /// Makes every commit acknowledged so far durable: one `fdatasync` of the log when
    /// buffered-durability records wait for one, nothing otherwise. A head that has not
    /// appended since it opened but replayed commits from its log (which a crashed process
    /// may have left in the page cache only) checkpoints them instead. A failed sync
    /// poisons the head: it is never retried, and this and every later sync fail.
    pub fn sync_log(&mut self, now_ms: u64) -> TreeResult<()> {
        self.check_poisoned()?;
        if self.log.writer.is_none() && !self.log.buffer.is_empty() {
            // A fork's inherited commits were synced by its parent before the fork.
            if self.inherits_log()? {
                return Ok(());
            }
            return self.checkpoint_buffer(now_ms);
        }
        self.sync_log_writer()
    }

    /// Whether commits were acknowledged whose log records no sync has covered yet.
    pub fn log_unsynced(&self) -> bool {
        self.log.writer.as_ref().is_some_and(LogWriter::unsynced)
    }

    /// Syncs the file appended to if records wait for it (before any manifest record: the
    /// manifest never names a log position the log is not durable up to).
    pub(super) fn sync_log_writer(&mut self) -> TreeResult<()> {
        let Some(w) = self.log.writer.as_mut().filter(|w| w.unsynced()) else {
            return Ok(());
        };
        if let Err(e) = w.sync() {
            self.poisoned = Some(format!("log sync of {} failed: {e}", self.branch));
            return Err(e);
        }
        Ok(())
    }

    /// Appends a record that absorbs the buffer and names the current log position, and is
    /// no version of its own.
    pub(super) fn housekeeping_record(&mut self, now_ms: u64) -> TreeResult<()> {
        self.log.housekeeping = true;
        // A fork waiting for this tree takes it with its mapping written: the fork's own
        // record would otherwise write the same chunks again, and the two mappings would
        // no longer share their pages (a diff reads every chunk that differs).
        let force = self.forks_waiting();
        let r = self.commit_inner(&[], force, now_ms, |_, _| Ok(()));
        self.log.housekeeping = false;
        r.map(|_| ())
    }

    /// At a clean close, once the buffer is checkpointed: gives back the log file's
    /// laid-out space past its last record (a failure only costs that space).
    pub(super) fn trim_log(&mut self) {
        if !self.log.buffer.is_empty() {
            return;
        }
        if let Some(w) = self.log.writer.as_mut()
            && let Err(e) = w.trim()
        {
            tracing::warn!(log = %w.name(), error = %e, "could not trim the log file at close");
        }
    }

    /// Bytes in the write buffer.
    pub fn buffered_bytes(&self) -> usize {
        self.log.buffer.bytes()
    }

    /// Starts appending: continues the manifest's own log file when it is this head's
    /// (same branch, term and incarnation) and has room, else creates the next file and
    /// names it in a manifest record (which absorbs the buffer) before any append.
    fn start_log(&mut self, now_ms: u64) -> TreeResult<()> {
        let cfg = self.log_cfg();
        if self.log.writer.is_none()
            && let Some((r, replayed)) = &self.log.in_force
            && r.file.branch == self.branch
            && r.file.term == self.term
            && r.incarnation == self.incarnation
            && replayed.end_offset < (cfg.file_bytes / 2).min(ROTATE_AFTER_BYTES)
        {
            let w = LogWriter::resume(
                self.files.storage().as_ref(),
                self.files.dir(),
                r.file.clone(),
                self.incarnation,
                cfg,
                replayed,
            );
            match w {
                Ok(w) => {
                    self.log.writer = Some(w);
                    return Ok(());
                }
                Err(e) => {
                    self.poisoned = Some(format!("resuming log {} failed: {e}", r.file));
                    return Err(e);
                }
            }
        }
        let w = self.create_log_file(self.next_log_id()?)?;
        if self.log.version.is_none() {
            // From now on the version is kept explicitly (a head that had no log).
            self.log.version = Some(self.version());
        }
        self.log.next_writer = Some(w);
        // The record naming the file; `append_log` installs the writer once it is durable.
        let named = self.housekeeping_record(now_ms);
        self.log.next_writer = None;
        named
    }

    /// Leaves the full file appended to for a new one without checkpointing the buffer:
    /// one manifest record whose `LOG` is the one in force (which names every file holding
    /// buffered commits, the one appended to last) plus the new file, all with the tree's
    /// `covered`. The tree, the buffer and the version stay as they are. Returns `false`,
    /// having done nothing, when that `LOG` already names [`MAX_LOG_FILES`] files or does
    /// not end with the file appended to.
    fn rotate_keeping_buffer(&mut self, now_ms: u64) -> TreeResult<bool> {
        let Ok(mut refs) = self.refs_in_force() else {
            return Ok(false);
        };
        let continues = match self.log.writer.as_ref() {
            Some(w) => refs.last().is_some_and(|r| r.file == *w.name()),
            // A fork's inherited log: its first file of its own is named after it.
            None => self.log.next_writer.is_none() && bough_manifest::inherited_only(&refs),
        };
        let Some(covered) = refs
            .last()
            .filter(|_| continues && refs.len() < MAX_LOG_FILES)
            .map(|r| r.covered)
        else {
            return Ok(false);
        };
        let next = if self.log.writer.is_some() {
            self.create_log_file(self.next_log_id()?)?
        } else {
            self.create_first_log()?
        };
        refs.push(next.reference(0, covered));
        let payload = encode_log_refs(&refs);
        let record = super::commit::record_of(
            &self.state,
            self.seq + 1,
            None,
            Vec::new(),
            vec![(LOG, payload.clone())],
        );
        // Syncs the full file first: the manifest never names a position not durable.
        self.append_record(&record, "a log rotation")?;
        self.seq += 1;
        bough_manifest::ext::set(&mut self.extensions, LOG, payload);
        self.log.writer = Some(next);
        let version = self.version();
        self.write_history_point(now_ms, version)?;
        Ok(true)
    }

    /// The `LOG` references of the manifest's state (none when it has no `LOG`).
    pub(super) fn refs_in_force(&self) -> TreeResult<Vec<LogRef>> {
        bough_manifest::ext::get(&self.extensions, LOG)
            .map(decode_log_refs)
            .transpose()
            .map_err(|e| TreeError::InvalidArgument {
                what: format!("{}: the LOG in force does not decode: {e:?}", self.branch),
            })
            .map(Option::unwrap_or_default)
    }

    /// Whether this head's log is all inherited from the branch it was forked from (no
    /// file of its own named yet).
    pub(super) fn inherits_log(&self) -> TreeResult<bool> {
        Ok(!self.log.has_writer() && bough_manifest::inherited_only(&self.refs_in_force()?))
    }

    /// Before a manifest record of a head whose log is all inherited: names a first log
    /// file of its own (a rotation that keeps the buffer), so the record's `LOG` names
    /// this head's file and never the parent's past the fork. A fork leaves room for that
    /// file ([`Head::fork_by_reference`]).
    pub(super) fn own_log_for_inherited(&mut self, now_ms: u64) -> TreeResult<()> {
        if !self.inherits_log()? {
            return Ok(());
        }
        if !self.rotate_keeping_buffer(now_ms)? {
            return Err(TreeError::InvalidArgument {
                what: format!(
                    "{}: no room to name a log file after the inherited ones",
                    self.manifest_path
                ),
            });
        }
        Ok(())
    }

    /// Creates this head's log file `id` (never an existing one).
    fn create_log_file(&self, id: u64) -> TreeResult<LogWriter> {
        let name = LogFileName::new(id, self.branch.clone(), self.term);
        LogWriter::create(
            self.files.storage().as_ref(),
            self.files.dir(),
            name,
            self.incarnation,
            self.log_cfg(),
        )
    }

    /// The first log file of a head whose log was all inherited: a new (branch, term) has
    /// none, unless a crash cut short the record naming one; only then is the directory
    /// listed (a listing costs O(files), and agents keep thousands of branches).
    fn create_first_log(&self) -> TreeResult<LogWriter> {
        let create = |id| self.create_log_file(id);
        match create(1) {
            Err(e) if e.kind() == bough_io::ErrorKind::AlreadyExists => create(self.next_log_id()?),
            other => other,
        }
    }

    /// A log id above every log file of this (branch, term) in the directory: a name is
    /// never reused, even for a file a crash left unnamed.
    fn next_log_id(&self) -> TreeResult<u64> {
        let mut max = 0;
        for name in self.files.storage().list(self.files.dir())? {
            if let bough_names::FileKind::Log(l) = bough_names::classify(&name)
                && l.branch == self.branch
                && l.term == self.term
            {
                max = max.max(l.log_id);
            }
        }
        Ok(max.saturating_add(1))
    }

    /// The ops a tree commit applies: the buffer's (frozen, oldest first) composed with
    /// `muts`, so the record that commits `muts` also checkpoints the buffer.
    pub(super) fn absorb_buffer(&mut self, muts: &[Mutation]) -> Option<Vec<Mutation>> {
        let (_, frozen) = self.log.buffer.frozen_batch()?;
        Some(merge_muts(frozen, muts.to_vec()))
    }

    /// [`absorb_buffer`](Self::absorb_buffer) for a record that starts from the parent's
    /// tree at fork version `v`, which holds the inherited runs: only the later ones.
    pub(super) fn absorb_buffer_after(&mut self, v: u64, muts: &[Mutation]) -> Vec<Mutation> {
        match self.log.buffer.frozen_batch_after(v) {
            Some((_, own)) => merge_muts(own, muts.to_vec()),
            None => muts.to_vec(),
        }
    }

    /// Adds the `LOG` reference a record appended now must carry (none for a head that
    /// never had a log).
    pub(super) fn with_log_ref(&self, log: &LogRecord) -> Option<LogRecord> {
        let r = self.log.reference(self.version_after_record())?;
        let mut log = log.clone();
        bough_manifest::ext::set(&mut log.extensions, LOG, encode_log_refs(&[r]));
        Some(log)
    }

    /// After a record carrying `LOG` is durable: the buffer is in the tree (or was
    /// replaced, for an adoption), the version moves past the record, and a file
    /// waiting to be named becomes the one appended to.
    pub(super) fn log_record_durable(&mut self, log: &LogRecord) {
        if let Some(v) = bough_manifest::ext::get(&log.extensions, LOG) {
            bough_manifest::ext::set(&mut self.extensions, LOG, v.to_vec());
        }
        self.log.version = Some(self.version_after_record());
        self.log.buffered = 0;
        self.log.buffer = WriteBuffer::new();
        self.charge_buffer();
        if let Some(w) = self.log.next_writer.take() {
            self.log.writer = Some(w);
        }
    }

    /// The tree holds every record of the file appended to (the buffer is empty: every
    /// manifest record absorbs it), and the file is large: the next commit starts a new
    /// one, and GC can delete this one once nothing names it.
    fn log_caught_up(&self) -> bool {
        self.log.buffer.is_empty()
            && self
                .log
                .writer
                .as_ref()
                .is_some_and(|w| w.offset() >= ROTATE_AFTER_BYTES)
    }

    /// The version once the record being written is durable.
    fn version_after_record(&self) -> u64 {
        let v = self.version();
        if self.log.housekeeping {
            v
        } else {
            v.saturating_add(1)
        }
    }

    /// The version while `LOG` is in force (see the module comment).
    pub(super) fn log_version(&self) -> Option<u64> {
        self.log.version
    }
}
