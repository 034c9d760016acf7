//! Write-ahead log files of a branch head: creating, appending with one `fdatasync` per
//! group commit, and replaying them into a [`WriteBuffer`] at open.
//!
//! Durability order (ARCHITECTURE.md, "Write path"):
//! - **Create:** `create_new` (a log file name is never reused, never overwritten) → the
//!   first stretch of the file laid out (zeros written, so the file's size already covers
//!   it) → file synced → directory synced. Only then may a manifest name it, and only after
//!   that may a record be appended to it ([`LogWriter::create`] does the first two steps;
//!   naming it is the head's).
//! - **Append:** record written at the next block boundary → one `fdatasync` → the commit
//!   may be acknowledged. Records land in laid-out space, so the sync carries no size
//!   change; when the laid-out space runs out, the next stretch is zeroed in the same write
//!   batch as the record (one sync still, which then also carries the size).
//! - **Unsynced append** (buffered durability): the record is written and not synced; the
//!   writer remembers where the durable part of the file ends (`synced`) and every record
//!   written while bytes before it wait for a sync carries that offset (format version 2),
//!   so replay tells unsynced records a power loss damaged out of order from damage.
//!   [`LogWriter::sync`] makes all of them durable with one `fdatasync`.
//! - **A failed sync poisons the writer**: it refuses every later append, and the record is
//!   not acknowledged. It is never retried (the page cache may have dropped the bytes while
//!   reporting success for the retry). A failed *write* (EIO, ENOSPC) only fails its
//!   commit: the position stays, and the next record is written over what landed of it.
//! - **Resume:** after replay, bytes of a torn last record (never acknowledged) or of lost
//!   unsynced records are zeroed and synced before the next append, so no byte of them can
//!   later pass for a record; records replayed past the manifest's position (maybe only in
//!   the page cache of a process that crashed) are synced, so `synced` starts exact.

use crate::error::{TreeError, TreeResult};
use std::sync::Arc;

use bough_io::{OpenOptions, Storage, StorageFile};
use bough_manifest::{
    LOG_BLOCK, LogEntry, LogEntryRef, LogMutationRef, LogOp, LogOpRef, LogRecordKind, LogRef,
    LogReplayed, LogSalt, encode_log_record_ref, replay_log,
};
use bough_names::LogFileName;

use crate::btree::{Mutation, Op};
use crate::buffer::WriteBuffer;

/// Sizes of log files.
#[derive(Debug, Clone, Copy)]
pub struct LogConfig {
    /// A log file is sealed (and the next one started) before it would grow past this.
    pub file_bytes: u64,
    /// Bytes laid out (zero-filled) ahead of the write position at a time; 0: none (for
    /// storage where every byte written is uploaded, and a size change costs nothing).
    pub layout_bytes: u64,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            file_bytes: 64 << 20,
            layout_bytes: 1 << 20,
        }
    }
}

/// Bytes a new log file lays out before its first record (see [`LogWriter::create`]).
const FIRST_STRETCH: u64 = 32 << 10;

/// Largest log file read back at open (a guard against hostile lengths).
pub const MAX_LOG_FILE_BYTES: u64 = 1 << 32;

/// The head's appender to its current log file.
#[derive(Debug)]
pub struct LogWriter {
    name: LogFileName,
    incarnation: u64,
    salt: LogSalt,
    file: Arc<dyn StorageFile>,
    cfg: LogConfig,
    /// Where the next record goes.
    offset: u64,
    /// Below this offset every byte of the file is durable; `offset` when no record waits
    /// for a sync.
    synced: u64,
    /// Bytes of the file written with zeros (or records): appends below this change no
    /// metadata (the size an unsynced append set goes out with the next sync).
    laid_out: u64,
    poisoned: Option<String>,
}

fn round_up(n: u64, to: u64) -> u64 {
    n.div_ceil(to.max(1)).saturating_mul(to.max(1))
}

impl LogWriter {
    /// Creates log file `name` in `dir` (never an existing one), lays out its first stretch
    /// and makes both the file and its directory entry durable.
    pub fn create(
        storage: &dyn Storage,
        dir: &str,
        name: LogFileName,
        incarnation: u64,
        cfg: LogConfig,
    ) -> TreeResult<LogWriter> {
        let path = format!("{dir}/{name}");
        // A small first stretch: a branch that writes little (agents keep thousands) holds
        // little; each later stretch doubles the laid-out space up to `layout_bytes`.
        let layout = round_up(
            FIRST_STRETCH.min(cfg.layout_bytes).min(cfg.file_bytes),
            LOG_BLOCK as u64,
        );
        let file = storage.open(&path, OpenOptions::write_new(layout))?;
        file.write_at(0, &vec![0u8; layout as usize])?;
        file.sync()?;
        storage.sync_dir(dir)?;
        let salt = LogSalt::new(name.log_id, &name.branch, name.term, incarnation);
        Ok(LogWriter {
            name,
            incarnation,
            salt,
            file,
            cfg,
            offset: 0,
            synced: 0,
            laid_out: layout,
            poisoned: None,
        })
    }

    /// Reopens log file `name` after `replayed` (its replay) to append after its last
    /// intact record. A dropped tail is zeroed and synced first; records replayed are
    /// synced (one `fdatasync`), since a crashed writer may have left them unsynced.
    pub fn resume(
        storage: &dyn Storage,
        dir: &str,
        name: LogFileName,
        incarnation: u64,
        cfg: LogConfig,
        replayed: &LogReplayed,
    ) -> TreeResult<LogWriter> {
        let path = format!("{dir}/{name}");
        let file = storage.open(
            &path,
            OpenOptions {
                write: true,
                ..OpenOptions::default()
            },
        )?;
        let len = file.len()?;
        let offset = replayed.end_offset;
        let zero = replayed.dropped_tail.is_some() && len > offset;
        if zero {
            // Zero rather than truncate: the file stays laid out.
            file.write_at(offset, &vec![0u8; (len - offset) as usize])?;
        }
        if zero || !replayed.records.is_empty() {
            file.sync()?;
        }
        let salt = LogSalt::new(name.log_id, &name.branch, name.term, incarnation);
        Ok(LogWriter {
            name,
            incarnation,
            salt,
            file,
            cfg,
            offset,
            synced: offset,
            laid_out: len,
            poisoned: None,
        })
    }

    /// Gives back the laid-out space after the last record (at a clean close, when the
    /// buffer is checkpointed): an idle branch's log then holds only its records. Zeros
    /// beyond the end are no records, so a crash before or after changes nothing replay
    /// sees; the size change needs no sync of its own.
    pub fn trim(&mut self) -> TreeResult<()> {
        if self.poisoned.is_some() || self.laid_out <= self.offset {
            return Ok(());
        }
        self.file.set_len(self.offset)?;
        self.laid_out = self.offset;
        Ok(())
    }

    /// The file this writer appends to.
    pub fn name(&self) -> &LogFileName {
        &self.name
    }

    /// Where the next record goes.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The reference a manifest records for this file, replay starting at `start` and the
    /// tree covering every version up to `covered`.
    pub fn reference(&self, start: u64, covered: u64) -> LogRef {
        LogRef {
            file: self.name.clone(),
            incarnation: self.incarnation,
            start,
            covered,
            until: 0,
        }
    }

    /// Why this writer refuses appends, if it does.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// Whether a record of `record_len` bytes (padding included) still fits in this file;
    /// if not, the head starts the next file first.
    pub fn fits(&self, record_len: u64) -> bool {
        self.offset.saturating_add(record_len) <= self.cfg.file_bytes
    }

    /// Whether records were written that no sync has made durable yet.
    pub fn unsynced(&self) -> bool {
        self.synced < self.offset
    }

    /// Appends one record and makes it (and every record before it) durable with one
    /// `fdatasync`. Returns the record's offset. On any failure the record must not be
    /// acknowledged; a failed sync also poisons the writer.
    pub fn append(&mut self, entry: &LogEntryRef<'_>) -> TreeResult<u64> {
        self.append_as(entry, true)
    }

    /// Writes one record without syncing it (buffered durability): it is durable after the
    /// next [`sync`](Self::sync) or synced [`append`](Self::append). Returns its offset. A
    /// failed write fails only this record.
    pub fn append_unsynced(&mut self, entry: &LogEntryRef<'_>) -> TreeResult<u64> {
        self.append_as(entry, false)
    }

    /// Makes every record written so far durable with one `fdatasync`; nothing when none
    /// waits for one. A failure poisons the writer, and is never retried (the page cache
    /// may have dropped the bytes while a retry reported success).
    pub fn sync(&mut self) -> TreeResult<()> {
        if let Some(why) = &self.poisoned {
            return Err(TreeError::Poisoned { cause: why.clone() });
        }
        if !self.unsynced() {
            return Ok(());
        }
        match self.file.sync() {
            Ok(()) => {
                self.synced = self.offset;
                Ok(())
            }
            Err(e) => {
                self.poisoned = Some(format!("log sync of {} failed: {e}", self.name));
                Err(e.into())
            }
        }
    }

    fn append_as(&mut self, entry: &LogEntryRef<'_>, sync: bool) -> TreeResult<u64> {
        if let Some(why) = &self.poisoned {
            return Err(TreeError::Poisoned { cause: why.clone() });
        }
        let at = self.offset;
        // Written while bytes before it may not be durable: it says how far they are.
        let rec = encode_log_record_ref(entry, self.salt, at, self.synced).map_err(|e| {
            TreeError::InvalidArgument {
                what: format!("cannot encode a log record for {}: {e}", self.name),
            }
        })?;
        let end = at + rec.len() as u64;
        let laid_out = if end <= self.laid_out {
            self.laid_out
        } else if self.cfg.layout_bytes == 0 {
            // Nothing laid out ahead (object stores: every byte written is uploaded).
            end
        } else {
            round_up(
                end.max(
                    self.laid_out
                        + self.laid_out.clamp(
                            LOG_BLOCK as u64,
                            self.cfg.layout_bytes.max(LOG_BLOCK as u64),
                        ),
                ),
                LOG_BLOCK as u64,
            )
            .min(self.cfg.file_bytes.max(end))
        };
        let written = if laid_out == self.laid_out {
            self.file.write_at(at, &rec)
        } else {
            // Lay out the next stretch with the record, in one batch and under one sync.
            let zeros = vec![0u8; (laid_out - end) as usize];
            self.file.write_batch(&[(at, &rec), (end, &zeros)])
        };
        // A failed write (EIO, ENOSPC) acknowledges nothing and is no failed sync: the
        // position stays, and the next record is written over whatever part of this one
        // landed. Only a failed sync poisons.
        written?;
        self.offset = end;
        self.laid_out = laid_out;
        if sync {
            self.sync()?;
        }
        Ok(at)
    }
}

/// The log record of a commit: `version`, at store-clock time `clock_ms`, of `muts`
/// (borrowed: the record is encoded straight from the batch).
pub fn commit_entry(version: u64, clock_ms: u64, muts: &[Mutation]) -> LogEntryRef<'_> {
    LogEntryRef {
        kind: LogRecordKind::Commit,
        version,
        clock_ms,
        mutations: muts
            .iter()
            .map(|m| LogMutationRef {
                key: &m.key,
                op: to_log_op(&m.op),
            })
            .collect(),
    }
}

fn to_log_op(op: &Op) -> LogOpRef<'_> {
    match *op {
        Op::Put {
            ref value,
            timestamp,
            expire_at,
        } => LogOpRef::Put {
            value,
            timestamp,
            expire_at,
        },
        Op::Delete {
            timestamp,
            expire_at,
        } => LogOpRef::Delete {
            timestamp,
            expire_at,
        },
        Op::ForceDelete => LogOpRef::ForceDelete,
        Op::ReplaceWithTombstone {
            timestamp,
            expire_at,
        } => LogOpRef::ReplaceWithTombstone {
            timestamp,
            expire_at,
        },
        Op::Replace {
            ref value,
            timestamp,
            expire_at,
        } => LogOpRef::Replace {
            value,
            timestamp,
            expire_at,
        },
    }
}

fn from_log_op(op: LogOp) -> Op {
    match op {
        LogOp::Put {
            value,
            timestamp,
            expire_at,
        } => Op::Put {
            value,
            timestamp,
            expire_at,
        },
        LogOp::Delete {
            timestamp,
            expire_at,
        } => Op::Delete {
            timestamp,
            expire_at,
        },
        LogOp::ForceDelete => Op::ForceDelete,
        LogOp::ReplaceWithTombstone {
            timestamp,
            expire_at,
        } => Op::ReplaceWithTombstone {
            timestamp,
            expire_at,
        },
        LogOp::Replace {
            value,
            timestamp,
            expire_at,
        } => Op::Replace {
            value,
            timestamp,
            expire_at,
        },
    }
}

/// A logged commit's batch as the tree's mutations.
fn entry_mutations(entry: &LogEntry) -> Vec<Mutation> {
    entry
        .mutations
        .iter()
        .cloned()
        .map(|m| Mutation {
            key: m.key,
            op: from_log_op(m.op),
        })
        .collect()
}

/// Reads and replays the log file a reference names. Damage is `Corruption` naming the
/// file and the record's offset; a torn last record is dropped (and logged).
pub fn replay_ref(storage: &dyn Storage, dir: &str, r: &LogRef) -> TreeResult<LogReplayed> {
    let path = format!("{dir}/{}", r.file);
    let bytes = storage.read_file(&path, MAX_LOG_FILE_BYTES)?;
    let replayed =
        replay_log(&bytes, r.salt(), r.start).map_err(|e| TreeError::manifest(path.clone(), e))?;
    if let Some(off) = replayed.dropped_tail {
        if replayed.dropped_records > 0 {
            tracing::warn!(log = %path, offset = off, records = replayed.dropped_records, "dropped log records written without a sync and damaged or lost by a power loss (never promised durable)");
        } else {
            tracing::warn!(log = %path, offset = off, "dropped a torn last log record (never acknowledged)");
        }
    }
    Ok(replayed)
}

/// Rebuilds the write buffer from the log references of a manifest, in order: every commit
/// above each reference's `covered` version and the versions replayed before it (and up
/// to its `until`, when set) becomes a run. Versions must continue across files. Returns the buffer and each file's replay
/// (the head resumes appending to the last one).
pub fn recover(
    storage: &dyn Storage,
    dir: &str,
    refs: &[LogRef],
) -> TreeResult<(WriteBuffer, Vec<LogReplayed>)> {
    let mut buffer = WriteBuffer::new();
    let mut replays = Vec::with_capacity(refs.len());
    // The newest version a bounded reference (a fork's inherited log) promises.
    let mut promised: Option<(u64, &LogRef)> = None;
    for r in refs {
        let path = format!("{dir}/{}", r.file);
        let replayed = if r.until == 0 {
            replay_ref(storage, dir, r)?
        } else {
            // Another branch's log, read up to the fork: past it that branch may have
            // taken versions with no record (a gap there is its business, not damage).
            promised = Some((r.until, r));
            replay_span(storage, dir, r, None)?.0
        };
        // A head's reference starts where its next record goes, so nothing after `start`
        // is the normal state right after a checkpoint or rotation; records that are there
        // must continue `covered`, or the file before (a full file left with its records
        // still buffered is named before the next one, both with the tree's `covered`).
        let floor = buffer
            .last_version()
            .map_or(r.covered, |v| v.max(r.covered));
        let commits = if replayed.records.is_empty() {
            Vec::new()
        } else {
            replayed
                .commits_after(floor)
                .map_err(|e| TreeError::manifest(path.clone(), e))?
        };
        for c in commits {
            if r.until != 0 && c.entry.version > r.until {
                break;
            }
            if let Some(last) = buffer.last_version()
                && c.entry.version != last + 1
            {
                return Err(TreeError::manifest_content(
                    path,
                    c.offset,
                    format!(
                        "log version {} does not follow version {last} of the previous log",
                        c.entry.version
                    ),
                ));
            }
            buffer.push(c.entry.version, entry_mutations(&c.entry));
        }
        replays.push(replayed);
    }
    if let Some((until, r)) = promised
        && buffer.last_version().is_none_or(|v| v < until)
    {
        return Err(TreeError::manifest_content(
            format!("{dir}/{}", r.file),
            r.start,
            format!(
                "the inherited log ends at version {:?}, before version {until} its reference names",
                buffer.last_version()
            ),
        ));
    }
    Ok((buffer, replays))
}

/// What a point-in-time read finds in the log a history point names.
#[derive(Debug, Default)]
pub struct LogSpan {
    /// The commits stamped at or before the instant, in order.
    pub commits: WriteBuffer,
    /// The last version the span holds (any stamp); `None`: no commit.
    pub reached: Option<u64>,
    /// The store-clock time of that commit.
    pub last_clock: Option<u64>,
    /// The span skips a version (a state change with no log record and no history point:
    /// its point's write failed). Nothing after the skip is read.
    pub skips: bool,
}

/// Reads the log `refs` name (a history point's `LOG`) for a point-in-time read at
/// `at_ms`: every commit up to `end` (a file and offset: where the branch's next point
/// left the log, since a record that changes content takes a version with no log record
/// there), the ones stamped at or before `at_ms` collected. A version the log skips before
/// `end` ends the span (`skips`) instead of failing: what follows it cannot be told
/// without the point that is missing there, and the caller refuses those instants.
pub fn read_span(
    storage: &dyn Storage,
    dir: &str,
    refs: &[LogRef],
    at_ms: u64,
    end: Option<(&LogFileName, u64)>,
) -> TreeResult<LogSpan> {
    let mut span = LogSpan::default();
    let mut passed = false;
    for r in refs {
        let bound = end
            .filter(|(f, at)| *f == &r.file && *at >= r.start)
            .map(|(_, at)| at);
        let (replayed, skips) = replay_span(storage, dir, r, bound)?;
        // Another branch's log (a fork's inherited one) counts only up to the fork: a
        // version that branch took past it with no record is its business (as in replay).
        let past_fork = r.until != 0
            && (r.until <= r.covered
                || replayed
                    .records
                    .iter()
                    .any(|c| c.entry.kind == LogRecordKind::Commit && c.entry.version >= r.until));
        span.skips |= skips && !past_fork;
        for c in replayed
            .records
            .iter()
            .filter(|c| c.entry.kind == LogRecordKind::Commit && c.entry.version > r.covered)
        {
            if r.until != 0 && c.entry.version > r.until {
                break;
            }
            if c.entry.version != span.reached.unwrap_or(r.covered).saturating_add(1) {
                // The first commit after the point is not the next version: a state change
                // between them has no point.
                span.skips = true;
                break;
            }
            span.reached = Some(c.entry.version);
            span.last_clock = Some(c.entry.clock_ms);
            if passed || c.entry.clock_ms > at_ms {
                passed = true;
                continue;
            }
            span.commits
                .push(c.entry.version, entry_mutations(&c.entry));
        }
        if span.skips {
            break;
        }
    }
    Ok(span)
}

/// Replays the file `r` names up to `end`, ending at a version the log skips (returned
/// as `true`) instead of failing there; other damage is `Corruption` as for [`replay_ref`].
fn replay_span(
    storage: &dyn Storage,
    dir: &str,
    r: &LogRef,
    end: Option<u64>,
) -> TreeResult<(LogReplayed, bool)> {
    let path = format!("{dir}/{}", r.file);
    let mut bytes = storage.read_file(&path, MAX_LOG_FILE_BYTES)?;
    if let Some(end) = end.and_then(|e| usize::try_from(e).ok()) {
        bytes.truncate(end);
    }
    match replay_log(&bytes, r.salt(), r.start) {
        Ok(replayed) => Ok((replayed, false)),
        Err(e) if matches!(e.reason, bough_manifest::DecodeReason::LogVersionGap { .. }) => {
            let at = usize::try_from(e.offset).unwrap_or(usize::MAX);
            bytes.truncate(at);
            let replayed = replay_log(&bytes, r.salt(), r.start)
                .map_err(|e| TreeError::manifest(path.clone(), e))?;
            Ok((replayed, true))
        }
        Err(e) => Err(TreeError::manifest(path, e)),
    }
}

#[cfg(test)]
mod tests;
