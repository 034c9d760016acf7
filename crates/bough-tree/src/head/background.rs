//! Background checkpoints (ARCHITECTURE.md, "Write path", "Checkpoints off the commit
//! path"): a commit that fills the write buffer freezes it and hands the frozen runs to a
//! thread that applies them to a copy of the tree and writes and syncs their pages, while
//! commits go on appending to the log and the buffer. The result — one manifest record,
//! then the frozen runs are dropped — is installed as soon as it is ready: by the
//! [`BackgroundDone`] hook (the store takes the head when it is free), during the commit
//! the head is in, or at its next operation; an operation that needs the tree waits for
//! the thread.
//!
//! Rules this module keeps:
//! - **The tree state does not change while a checkpoint runs.** The thread works on a
//!   copy taken at the freeze, and every head operation that changes the tree state, the
//!   data files or the manifest waits for it and installs it first
//!   ([`Head::finish_background`]); only buffered commits (log appends) run beside it,
//!   and rotations that keep the buffer: they only add a file to the `LOG` in force, which
//!   keeps naming the file the checkpoint's `LOG` resumes in (a rotation that cannot, the
//!   `LOG` naming `MAX_LOG_FILES` files already, waits for the checkpoint).
//! - **Durability order as for every checkpoint:** pages written and synced (the thread)
//!   → log synced → manifest record synced (the head) → readers get the new tree → frozen
//!   runs dropped. The record's `LOG` starts at the log position right after the frozen
//!   version, in the file it was in, with `covered` = that version, followed by the files
//!   the `LOG` in force names after it.
//! - **History:** the record's history point is stamped with the freeze time and the frozen
//!   version as its `before`, so the point before it reads the log up to the freeze
//!   position, and this one from there.
//! - **Failures:** a failed sync in the thread poisons the head when it installs; any other
//!   failure drops the result (the buffer keeps the runs, a later checkpoint applies them)
//!   and the data files it created are skipped, as after a failed commit. A head dropped
//!   while its checkpoint runs waits for the thread and drops the result.

use super::*;
use crate::buffer::WriteBuffer;
use crate::error::{TreeError, TreeResult};
use bough_manifest::{LOG, encode_log_refs};
use bough_names::LogFileName;
use commit::{WriteFailure, record_of, write_staged};

/// A checkpoint running on its own thread.
#[derive(Debug)]
pub(crate) struct Background {
    /// Every buffered commit up to this version is in the checkpoint.
    upto: u64,
    /// The log file and offset the first commit after `upto` went (or goes) to.
    resume_at: (LogFileName, u64),
    /// Store-clock time of the freeze.
    frozen_ms: u64,
    /// Where the thread leaves its result before it calls the head's
    /// [`BackgroundDone`] hook (so the hook may install it while the thread still runs).
    slot: Arc<parking_lot::Mutex<Option<Done>>>,
    thread: std::thread::JoinHandle<()>,
}

/// Called on the checkpoint's thread once its result is ready: the store uses it to have
/// the result installed at once (it takes the head's lock if free and calls
/// [`Head::install_finished_background`]), not at the head's next operation.
#[derive(Clone)]
pub struct BackgroundDone(Arc<dyn Fn() + Send + Sync>);

impl BackgroundDone {
    /// A hook calling `f`.
    pub fn new(f: impl Fn() + Send + Sync + 'static) -> Self {
        BackgroundDone(Arc::new(f))
    }
}

impl std::fmt::Debug for BackgroundDone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BackgroundDone")
    }
}

/// What the thread hands back.
struct Done {
    result: Result<Staged, (WriteFailure, Vec<FileId>)>,
    /// The reservation of the data file appended to, as the thread left it.
    spot: ((FileId, u64), u64),
}

impl std::fmt::Debug for Done {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Done").finish_non_exhaustive()
    }
}

/// What the thread needs, owned.
struct Job {
    files: Arc<FileTable>,
    cfg: HeadConfig,
    branch: BranchName,
    term: Term,
    incarnation: u64,
    state: HeadState,
    frozen: WriteBuffer,
    spot: ((FileId, u64), u64),
    now_ms: u64,
}

impl Job {
    fn run(self) -> Done {
        let Job {
            files,
            cfg,
            branch,
            term,
            incarnation,
            state,
            mut frozen,
            mut spot,
            now_ms,
        } = self;
        let ctx = TreeCtx {
            files: &files,
            cfg: &cfg,
            branch: &branch,
            term,
            incarnation,
        };
        let no_files = |err: TreeError| (WriteFailure { err, poison: None }, Vec::new());
        let result = (|| {
            let Some((_, batch)) = frozen.frozen_batch() else {
                return Err(no_files(TreeError::InvalidArgument {
                    what: format!("{branch}: a background checkpoint of an empty buffer"),
                }));
            };
            drop(frozen);
            let mut applied = Applied::default();
            let staged =
                stage(&ctx, state, &batch, false, &mut applied, |_, _| Ok(())).map_err(no_files)?;
            drop(batch);
            match write_staged(
                &ctx,
                &mut spot,
                &staged.st,
                &staged.pages,
                &staged.new_files,
                now_ms,
            ) {
                Ok(()) => Ok(staged),
                Err(f) => Err((f, staged.new_files)),
            }
        })();
        Done { result, spot }
    }
}

impl Head {
    /// Starts a checkpoint of everything buffered on its own thread. `false` (nothing
    /// started) when background checkpoints are off, one is running, the head appends to
    /// no log file of its own, or the thread cannot be started: the caller checkpoints in
    /// line then.
    pub(super) fn start_background(&mut self, now_ms: u64) -> bool {
        // A fork that may still take its parent's tree checkpoints in line (`commit_inner`
        // takes it there).
        if !self.cfg.background_checkpoints
            || self.background.is_some()
            || self.log.fork_base.is_some()
        {
            return false;
        }
        let Some(writer) = self.log.writer.as_ref() else {
            return false;
        };
        let resume_at = (writer.name().clone(), writer.offset());
        let Some(upto) = self.log.buffer.freeze() else {
            return false;
        };
        let job = Job {
            files: Arc::clone(&self.files),
            cfg: self.cfg.clone(),
            branch: self.branch.clone(),
            term: self.term,
            incarnation: self.incarnation,
            state: self.state.clone(),
            frozen: self.log.buffer.clone(),
            spot: (self.reserved, self.reserve_base),
            now_ms,
        };
        let slot = Arc::new(parking_lot::Mutex::new(None));
        let filled = Arc::clone(&slot);
        let on_done = self.background_done.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("bough-checkpoint-{}", self.branch))
            .spawn(move || {
                let done = job.run();
                *filled.lock() = Some(done);
                if let Some(hook) = on_done {
                    (hook.0)();
                }
            });
        match spawned {
            Ok(thread) => {
                if let Some(b) = &self.cfg.buffer_budget {
                    b.note_background();
                }
                self.background = Some(Background {
                    upto,
                    resume_at,
                    frozen_ms: now_ms,
                    slot,
                    thread,
                });
                true
            }
            Err(e) => {
                tracing::warn!(branch = %self.branch, error = %e, "could not start a checkpoint thread; checkpointing in line");
                false
            }
        }
    }

    /// Whether a background checkpoint is running (or done and not yet installed).
    pub fn checkpoint_running(&self) -> bool {
        self.background.is_some()
    }

    /// Installs a background checkpoint whose result is ready; returns at once when none
    /// is, or it is still running.
    pub(super) fn poll_background(&mut self) -> TreeResult<()> {
        if self
            .background
            .as_ref()
            .is_some_and(|b| b.slot.lock().is_some())
        {
            return self.finish_background();
        }
        Ok(())
    }

    /// Installs a background checkpoint whose result is ready (nothing when none is): what
    /// the [`BackgroundDone`] hook calls, holding the head. A failure is logged; the head's
    /// next operation meets its consequences (a poisoned head refuses it).
    pub fn install_finished_background(&mut self) {
        if let Err(e) = self.poll_background() {
            tracing::warn!(branch = %self.branch, error = %e, "background checkpoint not installed");
        }
    }

    /// Sets the hook the checkpoint thread calls once its result is ready.
    pub fn set_background_done(&mut self, hook: BackgroundDone) {
        self.background_done = Some(hook);
    }

    /// Waits for a running background checkpoint and installs it (nothing when none
    /// runs). An error is a failure to install it (a failed manifest append, which
    /// poisons as any does) or a failed sync of the thread's (which poisons); the thread's
    /// other failures only drop its result.
    pub(crate) fn finish_background(&mut self) -> TreeResult<()> {
        let Some(bg) = self.background.take() else {
            return Ok(());
        };
        let Some(done) = self.join_background(bg.thread, &bg.slot) else {
            return Ok(());
        };
        let staged = match done.result {
            Ok(staged) => staged,
            Err((f, created)) => {
                self.skip_file_ids(&created);
                if let Some(cause) = f.poison {
                    // The operation that finds it did not fail a sync itself: it is refused
                    // because the head is poisoned (reopen), as every later one is.
                    tracing::error!(branch = %self.branch, error = %f.err, "background checkpoint's sync failed: head poisoned");
                    self.poisoned = Some(cause.clone());
                    return Err(TreeError::Poisoned { cause });
                }
                tracing::warn!(branch = %self.branch, error = %f.err, "background checkpoint failed; the buffer keeps its writes");
                return Ok(());
            }
        };
        let new_files = staged.new_files.clone();
        let installed = self.install_background(&bg.resume_at, bg.upto, bg.frozen_ms, staged);
        if installed.is_err() {
            self.skip_file_ids(&new_files);
        }
        installed
    }

    /// Waits for a background checkpoint's thread and drops its result (the head goes).
    pub(super) fn abandon_background(&mut self) {
        if let Some(bg) = self.background.take()
            && let Some(Done {
                result:
                    Err((_, created))
                    | Ok(Staged {
                        new_files: created, ..
                    }),
                ..
            }) = self.join_background(bg.thread, &bg.slot)
        {
            self.skip_file_ids(&created);
        }
    }

    /// The thread's result, waiting for the thread when it is not ready (a thread whose
    /// result is in its slot does no more I/O: it is left to end on its own, which also
    /// lets its hook install the result), and the data file reservation it held taken
    /// back. `None` (and the head poisoned) if the thread panicked.
    fn join_background(
        &mut self,
        thread: std::thread::JoinHandle<()>,
        slot: &parking_lot::Mutex<Option<Done>>,
    ) -> Option<Done> {
        let ready = slot.lock().take();
        let done = match ready {
            Some(done) => Some(done),
            None if thread.thread().id() == std::thread::current().id() => None,
            None => match thread.join() {
                Ok(()) => slot.lock().take(),
                Err(_) => None,
            },
        };
        match done {
            Some(done) => {
                (self.reserved, self.reserve_base) = done.spot;
                Some(done)
            }
            None => {
                self.poisoned = Some(format!(
                    "the background checkpoint of {} ended without a result",
                    self.branch
                ));
                None
            }
        }
    }

    /// Appends the record of a checkpoint staged and written in the background (the tree
    /// up to `upto`; the log after it from `resume_at`), then publishes it and drops the
    /// runs it holds.
    fn install_background(
        &mut self,
        resume_at: &(LogFileName, u64),
        upto: u64,
        frozen_ms: u64,
        staged: Staged,
    ) -> TreeResult<()> {
        self.check_poisoned()?;
        let refs = self.refs_after_freeze(resume_at, upto)?;
        let payload = encode_log_refs(&refs);
        let Staged {
            st,
            pages,
            staged,
            checkpoint,
            changes,
            ..
        } = staged;
        let record = record_of(
            &st,
            self.seq + 1,
            checkpoint,
            changes,
            vec![(LOG, payload.clone())],
        );
        self.append_record(&record, "a checkpoint")?;
        self.seq += 1;
        self.state = st;
        bough_manifest::ext::set(&mut self.extensions, LOG, payload);
        self.log.buffer.release(upto);
        self.log.buffered = self.version().saturating_sub(upto);
        self.charge_buffer();
        let written = pages.len();
        self.publish_deferring(&pages, staged);
        self.notice_checkpoint(written);
        // Forks this tree has passed let go; one at exactly `upto` is offered the tree by
        // this head's next checkpoint in line, never here (see `head/fork_share.rs`).
        self.drop_passed_forks();
        self.write_history_point(frozen_ms, upto)?;
        Ok(())
    }

    /// The `LOG` of a checkpoint up to `upto`: the references in force from the file the
    /// first later commit is in (starting there at `resume_at`), all with `covered` =
    /// `upto`.
    fn refs_after_freeze(
        &self,
        resume_at: &(LogFileName, u64),
        upto: u64,
    ) -> TreeResult<Vec<bough_manifest::LogRef>> {
        let in_force = self.refs_in_force()?;
        let Some(at) = in_force.iter().position(|r| r.file == resume_at.0) else {
            return Err(TreeError::InvalidArgument {
                what: format!(
                    "{}: the LOG in force no longer names {}, where the checkpoint's log resumes",
                    self.branch, resume_at.0
                ),
            });
        };
        let mut refs: Vec<_> = in_force.into_iter().skip(at).collect();
        for (i, r) in refs.iter_mut().enumerate() {
            r.covered = upto;
            if i == 0 {
                r.start = resume_at.1;
            }
        }
        Ok(refs)
    }
}
