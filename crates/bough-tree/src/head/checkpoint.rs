//! Checkpoints and manifest rewrites: folding dirty mapping chunks into pages, the durable
//! snapshot a fork starts from, and replacing a manifest's log by one snapshot record.

use super::*;
use crate::error::{TreeError, TreeResult};

/// A rewrite looks for branch file ranges no page references (a walk over every page)
/// only when the ranges grew since the last look, or this many commits after it: in cloud
/// mode the manifest is rewritten every few commits, and the walk costs O(pages).
pub(crate) const PRUNE_RANGES_EVERY: u64 = 1024;

/// Everything a new branch needs from its parent to start at the parent's current commit.
#[derive(Debug, Clone)]
pub struct ForkPoint {
    /// The parent's durable snapshot: checkpointed (no overlay, no `LOG`), or, for a fork
    /// by reference, its last checkpoint with the mapping changes since as the overlay and
    /// a `LOG` naming the parent's log up to the fork version.
    pub snapshot: Snapshot,
    /// The parent's buffered commits a fork by reference starts with.
    pub inherited: Option<InheritedLog>,
}

impl ForkPoint {
    /// A fork point of a checkpointed state (nothing inherited from a log).
    pub fn checkpointed(snapshot: Snapshot) -> ForkPoint {
        ForkPoint {
            snapshot,
            inherited: None,
        }
    }
}

/// What a branch forked by reference takes over of its parent's log (ARCHITECTURE.md,
/// "Forks"): the parent's buffered runs (shared, nothing copied) and the references to the
/// log files holding them, each read no further than the fork version.
#[derive(Debug, Clone)]
pub struct InheritedLog {
    /// The parent's runs at the fork, unfrozen.
    pub buffer: crate::buffer::WriteBuffer,
    /// The parent's `LOG` in force, each reference's `until` at most the fork version.
    pub refs: Vec<bough_manifest::LogRef>,
    /// The fork version: the newest commit the buffer holds.
    pub version: u64,
    /// Where the parent leaves its tree at the fork version (`head/fork_share.rs`).
    pub(crate) share: Arc<super::fork_share::ShareSlot>,
}

impl Head {
    /// Mapping chunks changed since the last checkpoint.
    pub fn dirty_chunks(&self) -> usize {
        self.state.mapping.current().dirty_chunks()
    }

    /// Writes the mapping's dirty chunks into mapping pages and records the new root.
    pub fn checkpoint(&mut self, now_ms: u64) -> TreeResult<()> {
        self.commit_inner(&[], true, now_ms, |_, _| Ok(()))
            .map(|_| ())
    }

    /// The durable state as a snapshot record (after a checkpoint, so it has no overlay).
    pub fn fork_point(&mut self, now_ms: u64) -> TreeResult<ForkPoint> {
        // A new term's manifest replaces this one, which is then deleted: keep the evidence.
        self.keep_tail_aside()?;
        // The simplest correct rule for now (ARCHITECTURE.md, "Forks"): the fork starts from
        // a tree holding every buffered write, so it needs nothing of this head's log.
        self.checkpoint_buffer(now_ms)?;
        if self.state.mapping.current().dirty_chunks() > 0 {
            self.checkpoint(now_ms)?;
        }
        let mut snapshot = self.durable_snapshot();
        bough_manifest::ext::remove(&mut snapshot.extensions, bough_manifest::LOG);
        Ok(ForkPoint::checkpointed(snapshot))
    }

    /// The fork point of a new branch that does not checkpoint this head's buffer
    /// (ARCHITECTURE.md, "Forks"): the last checkpoint's tree, the mapping's changes since
    /// its last mapping checkpoint as the snapshot's overlay (no page written), and the
    /// `LOG` in force cut at the current version, with the buffered runs to share. Its
    /// cost does not follow the buffered bytes: the log is synced when buffered-durability
    /// records wait (the child names them), nothing else is written. Falls back to
    /// [`fork_point`](Self::fork_point) when nothing is buffered, when this head has no log
    /// file of its own yet (commits replayed at open that a crashed process may have left
    /// unsynced), or when the child could not name one more log file.
    pub fn fork_by_reference(&mut self, now_ms: u64) -> TreeResult<ForkPoint> {
        self.check_poisoned()?;
        let refs = self.refs_in_force()?;
        let own_last = match self.log.writer.as_ref() {
            Some(w) => refs
                .last()
                .is_some_and(|r| r.file == *w.name() && r.until == 0),
            // This head is a fork that has not written: its child inherits the same log.
            None => self.inherits_log()?,
        };
        // The child names one more file of its own at its first record (room for it).
        if self.log.buffer.is_empty() || !own_last || refs.len() >= super::buffered::MAX_LOG_FILES {
            return self.fork_point(now_ms);
        }
        self.keep_tail_aside()?;
        // The child's manifest names every commit buffered: they must be durable first.
        self.sync_log_writer()?;
        let version = self.version();
        let refs: Vec<bough_manifest::LogRef> = refs
            .into_iter()
            .map(|mut r| {
                // An inherited reference (this head is itself a fork) keeps its own bound.
                r.until = if r.until == 0 {
                    version
                } else {
                    r.until.min(version)
                };
                r
            })
            .collect();
        let mut snapshot = self.snapshot_with_overlay()?;
        bough_manifest::ext::set(
            &mut snapshot.extensions,
            bough_manifest::LOG,
            bough_manifest::encode_log_refs(&refs),
        );
        let buffer = self.log.buffer.fenced_at(version);
        let share = self.share_fork();
        Ok(ForkPoint {
            snapshot,
            inherited: Some(InheritedLog {
                buffer,
                refs,
                version,
                share,
            }),
        })
    }

    /// The state a new term of this branch starts from. A head that has appended
    /// nothing since it was opened (a takeover: another process owned the term, and only
    /// it could write data files or records of it) hands over its manifest's state as it
    /// is, `LOG` included: the new term replays the old term's log (immutable from now on:
    /// the store fences it) and absorbs it at its own first checkpoint. Any other head
    /// checkpoints first, as a fork does.
    pub fn new_term_point(&mut self, now_ms: u64) -> TreeResult<ForkPoint> {
        let untouched = !self.log.buffer.is_empty()
            && !self.log.has_writer()
            && self.state.mapping.current().dirty_chunks() == 0;
        if !untouched {
            return self.fork_point(now_ms);
        }
        self.keep_tail_aside()?;
        Ok(ForkPoint::checkpointed(self.durable_snapshot()))
    }

    /// The durable state as a snapshot record whose overlay is the mapping's changes since
    /// its last mapping checkpoint (nothing written: what a record on this state names).
    pub(crate) fn snapshot_with_overlay(&self) -> TreeResult<Snapshot> {
        let fetch = Fetch {
            files: &self.files,
            ranges: &self.state.ranges,
            staged: None,
            kept: None,
        };
        let overlay = self.state.mapping.overlay(&fetch)?;
        let mut snapshot = self.durable_snapshot();
        snapshot.overlay = overlay;
        Ok(snapshot)
    }

    pub(crate) fn durable_snapshot(&self) -> Snapshot {
        let mut extensions = self.extensions.clone();
        bough_manifest::set_commit_version(&mut extensions, self.version());
        Snapshot {
            meta: ManifestMetadata {
                branch: self.branch.clone(),
                term: self.term,
                root: self.state.root,
                ttl_root: self.state.ttl_root,
                branch_file_ranges: self.state.ranges.clone(),
            },
            max_file_id: self.state.max_file_id,
            page_size: self.cfg.page_size,
            dict: self.dict.clone(),
            mapping_root: self.state.mapping.current().root(),
            next_page_id: self.state.mapping.next_page_id(),
            free_head: self.state.mapping.free_head(),
            overlay: Vec::new(),
            extensions,
        }
    }

    /// Replaces the manifest with one snapshot record (tmp + fsync + rename + dir fsync),
    /// dropping branch file ranges no page references any more (looked for when the ranges
    /// grew since the last look, or [`PRUNE_RANGES_EVERY`] commits after it).
    pub fn rewrite_manifest(&mut self, now_ms: u64) -> TreeResult<()> {
        self.keep_tail_aside()?;
        self.checkpoint(now_ms)?;
        let ranges = self.state.ranges.len();
        let prune = ranges > 1
            && self.ranges_pruned.is_none_or(|(left, at)| {
                ranges > left || self.version().saturating_sub(at) >= PRUNE_RANGES_EVERY
            });
        if prune {
            let snap = self.snapshot();
            let mut referenced = Vec::new();
            snap.for_each_page(&mut |a| referenced.push(a.file_id()))?;
            for a in [self.state.active, self.state.resume].into_iter().flatten() {
                referenced.push(a.file_id);
            }
            self.state
                .ranges
                .retain_referenced(referenced.into_iter(), (&self.branch, self.term));
            self.ranges_pruned = Some((self.state.ranges.len(), self.version()));
        }
        let snapshot = self.durable_snapshot();
        self.check_snapshot_invariants(&snapshot)?;
        let bytes = encode_snapshot(&snapshot).map_err(|e| TreeError::InvalidArgument {
            what: format!("cannot encode the snapshot of {}: {e}", self.manifest_path),
        })?;
        // Checkpointed just above: no overlay.
        self.install_snapshot(&bytes, &[])
    }

    /// Replaces the manifest with `bytes`, one snapshot record of the durable state (whose
    /// overlay is `overlay`), and goes on from the version it carries.
    pub(crate) fn install_snapshot(
        &mut self,
        bytes: &[u8],
        overlay: &[(PageId, u64)],
    ) -> TreeResult<()> {
        self.replace_manifest(bytes)?;
        if let Some(h) = self.history.as_mut() {
            h.replaced(overlay);
        }
        // The new snapshot carries the version: it continues from there, not from 0.
        self.version_base = self.version();
        self.seq = 0;
        self.publish();
        Ok(())
    }

    /// Replaces the manifest with `bytes` (one snapshot record: tmp + fsync + rename + dir
    /// fsync) and reopens it for appending; `manifest_end` follows. The caller sets the
    /// version and sequence the snapshot carries.
    pub(crate) fn replace_manifest(&mut self, bytes: &[u8]) -> TreeResult<()> {
        // The bytes describe the state as it is; no checkpoint may land behind them.
        if self.background.is_some() {
            return Err(TreeError::InvalidArgument {
                what: format!(
                    "{}: a manifest rewrite while a checkpoint runs",
                    self.manifest_path
                ),
            });
        }
        // As for an appended record: the log is durable up to what the manifest names.
        self.sync_log_writer()?;
        if let Err(e) = self
            .files
            .storage()
            .write_atomic(&self.manifest_path, bytes)
        {
            // Creating or writing the temporary file failed (ENOSPC, EIO): the manifest was
            // not touched and this head goes on appending to it, like after any failed
            // write. A failure at the rename or a sync may have replaced it (and a failed
            // sync poisoned the storage): then this head must stop.
            let untouched =
                matches!(&e, IoError::Os { op, .. } if matches!(*op, "create" | "write"));
            if e.kind() == ErrorKind::Poisoned || (e.raw_os_error().is_some() && !untouched) {
                self.poisoned = Some(format!("rewrite of {} failed: {e}", self.manifest_path));
            }
            return Err(e.into());
        }
        // The manifest was replaced: appends go to the new file from now on (opened, never
        // created: it exists). If it cannot be opened, this head must stop — its handle is
        // on the replaced file, and commits appended there would be lost at the next open.
        let reopened = self.files.storage().open(
            &self.manifest_path,
            OpenOptions {
                write: true,
                ..OpenOptions::default()
            },
        );
        self.manifest = match reopened {
            Ok(m) => m,
            Err(e) => {
                self.poisoned = Some(format!(
                    "reopening {} after its rewrite failed: {e}",
                    self.manifest_path
                ));
                return Err(e.into());
            }
        };
        self.manifest_end = bytes.len() as u64;
        Ok(())
    }
}
