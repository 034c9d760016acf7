//! Replaying a write-ahead log file: its records in order, and the rule that tells a torn
//! last append (an unacknowledged commit) or lost unsynced appends (never promised durable)
//! from damage (`docs/format.md`, "Log replay").

use crate::error::{DecodeError, DecodeReason};
use crate::log::{
    LOG_BLOCK, LogEntry, LogRecordKind, LogSalt, decode_log_entry, decode_log_record,
    log_record_is_intact,
};

/// One record found by [`replay_log`], with where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedRecord {
    /// Byte offset of the record in the file.
    pub offset: u64,
    pub entry: LogEntry,
    /// Below this offset the file was durable when the record was written (`offset` for a
    /// version-1 record).
    pub synced: u64,
}

/// The outcome of [`replay_log`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogReplayed {
    /// Every intact record from the start offset on, in file order.
    pub records: Vec<LoggedRecord>,
    /// Where the next record goes: just past the last intact record.
    pub end_offset: u64,
    /// `Some(end_offset)` when non-zero bytes lie at or after `end_offset`: a torn last
    /// append (never acknowledged), or unsynced appends a power loss damaged or lost, was
    /// dropped. The writer zeroes them before appending.
    pub dropped_tail: Option<u64>,
    /// Intact records after `end_offset` that were dropped with it: written while the file
    /// was durable only below `end_offset`, so never promised durable (0 for a torn tail).
    pub dropped_records: usize,
}

impl LogReplayed {
    /// The last commit version the log holds (a close record repeats it), if any.
    pub fn last_version(&self) -> Option<u64> {
        self.records.last().map(|r| r.entry.version)
    }

    /// Whether the log ends with a close record: everything before it is complete.
    pub fn closed(&self) -> bool {
        self.records
            .last()
            .is_some_and(|r| r.entry.kind == LogRecordKind::Close)
    }

    /// The commit records above `covered` (the version a checkpoint already holds), after
    /// checking that the log continues it: a log whose first commit lies above
    /// `covered + 1` misses commits, and one that ends below `covered` misses what the
    /// manifest says exists. Both are `Corruption` (the error names the file's start or
    /// end offset).
    pub fn commits_after(&self, covered: u64) -> Result<Vec<&LoggedRecord>, DecodeError> {
        let first = self
            .records
            .iter()
            .find(|r| r.entry.kind == LogRecordKind::Commit);
        if let Some(f) = first
            && f.entry.version > covered.saturating_add(1)
        {
            return Err(DecodeError::new(
                f.offset,
                DecodeReason::LogVersionGap {
                    expected: covered.saturating_add(1),
                    found: f.entry.version,
                },
            ));
        }
        let last = self.last_version().unwrap_or(0);
        if last < covered {
            return Err(DecodeError::new(
                self.end_offset,
                DecodeReason::LogEndsEarly {
                    needed: covered,
                    last,
                },
            ));
        }
        Ok(self
            .records
            .iter()
            .filter(|r| r.entry.kind == LogRecordKind::Commit && r.entry.version > covered)
            .collect())
    }
}

/// Replays the log file `bytes` (salted with `salt`) from `start`, a block boundary.
///
/// - At each record boundary, an intact record (magic, bounded length, checksum salted
///   with the file and the offset) must decode and carry the next version: a commit the
///   previous version + 1 (the first record any version), a close record the previous
///   version itself. Anything else about it is an error naming its offset, and so is a
///   record whose checksum matches but whose version is unknown.
/// - The first boundary `D` without an intact record (zeros, end of data, torn or damaged
///   bytes) ends the log, but only if every later block boundary that starts an intact
///   record starts one written while the file was durable only below `D` (its `synced` ≤
///   `D`): those were unsynced appends a power loss may reorder, and they are dropped. If
///   any later intact record says the file was durable past `D`, the record at `D` was
///   damaged after it was durable, and the error names it.
pub fn replay_log(bytes: &[u8], salt: LogSalt, start: u64) -> Result<LogReplayed, DecodeError> {
    if !start.is_multiple_of(LOG_BLOCK as u64) {
        return Err(DecodeError::new(start, DecodeReason::MisalignedOffset));
    }
    let len = bytes.len() as u64;
    let mut records: Vec<LoggedRecord> = Vec::new();
    let mut offset = start;
    loop {
        if offset < len && log_record_is_intact(bytes, offset, salt) {
            let (entry, synced, padded) = decode_log_record(bytes, offset, salt)?;
            check_version(records.last().map(|r| &r.entry), &entry)
                .map_err(|reason| DecodeError::new(offset, reason))?;
            records.push(LoggedRecord {
                offset,
                entry,
                synced,
            });
            offset += padded as u64;
            continue;
        }
        // Not intact: the end, unless an intact record follows that was written after this
        // one was durable (then this was damage). An intact record that does not decode
        // counts as such proof, as before version 2.
        let mut later = offset.saturating_add(LOG_BLOCK as u64);
        let mut dropped_records = 0;
        while later < len {
            if log_record_is_intact(bytes, later, salt) {
                match decode_log_record(bytes, later, salt) {
                    // Every boundary is checked, inside such a record's extent too (as
                    // before version 2): a hostile extent hides no proof of damage.
                    Ok((_, synced, _)) if synced <= offset => dropped_records += 1,
                    _ => {
                        let reason = decode_log_entry(bytes, offset, salt)
                            .err()
                            .map_or(DecodeReason::Truncated, |e| e.reason);
                        return Err(DecodeError::new(offset, reason));
                    }
                }
            }
            later += LOG_BLOCK as u64;
        }
        let tail = usize::try_from(offset)
            .ok()
            .and_then(|o| bytes.get(o..))
            .unwrap_or(&[]);
        let dropped_tail = tail.iter().any(|&b| b != 0).then_some(offset);
        return Ok(LogReplayed {
            records,
            end_offset: offset,
            dropped_tail,
            dropped_records,
        });
    }
}

fn check_version(prev: Option<&LogEntry>, next: &LogEntry) -> Result<(), DecodeReason> {
    let Some(prev) = prev else {
        return Ok(());
    };
    let expected = match next.kind {
        LogRecordKind::Commit => prev.version.checked_add(1),
        LogRecordKind::Close => Some(prev.version),
    };
    if expected == Some(next.version) {
        Ok(())
    } else {
        Err(DecodeReason::LogVersionGap {
            expected: expected.unwrap_or(u64::MAX),
            found: next.version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{LogMutation, LogOp, encode_log_entry, encode_log_record};
    use bough_names::BranchName;

    fn salt() -> LogSalt {
        LogSalt::new(4, &BranchName::main(), 1, 99)
    }

    fn commit(version: u64, n: usize) -> LogEntry {
        LogEntry {
            kind: LogRecordKind::Commit,
            version,
            clock_ms: version * 10,
            mutations: (0..n)
                .map(|i| LogMutation {
                    key: format!("k{i:05}").into_bytes(),
                    op: LogOp::Put {
                        value: vec![b'v'; 300],
                        timestamp: version,
                        expire_at: 0,
                    },
                })
                .collect(),
        }
    }

    /// A file of `entries` appended in order, plus `zeros` blocks of preallocation.
    fn file(entries: &[LogEntry], zeros: usize) -> (Vec<u8>, Vec<u64>) {
        let mut out = Vec::new();
        let mut offsets = Vec::new();
        for e in entries {
            offsets.push(out.len() as u64);
            let rec = encode_log_entry(e, salt(), out.len() as u64).expect("encodes");
            out.extend(rec);
        }
        out.resize(out.len() + zeros * LOG_BLOCK, 0);
        (out, offsets)
    }

    #[test]
    fn clean_file_replays_every_record() {
        let entries = [commit(5, 1), commit(6, 30), commit(7, 2)];
        let (bytes, offsets) = file(&entries, 3);
        let r = replay_log(&bytes, salt(), 0).expect("replays");
        assert_eq!(r.records.len(), 3);
        assert_eq!(r.records[1].offset, offsets[1]);
        assert_eq!(r.dropped_tail, None);
        assert_eq!(r.end_offset, bytes.len() as u64 - 3 * LOG_BLOCK as u64);
        assert_eq!(r.last_version(), Some(7));
        let after: Vec<u64> = r
            .commits_after(5)
            .expect("continues")
            .iter()
            .map(|r| r.entry.version)
            .collect();
        assert_eq!(after, vec![6, 7]);
        // Starting at the second record's offset skips the first.
        let r = replay_log(&bytes, salt(), offsets[1]).expect("replays");
        assert_eq!(r.records.len(), 2);
    }

    #[test]
    fn torn_last_record_is_dropped() {
        let entries = [commit(1, 1), commit(2, 40)];
        let (bytes, offsets) = file(&entries, 2);
        // Cut inside the last record, then zero-fill (as preallocation leaves it).
        let cut = offsets[1] as usize + 5000;
        let mut torn = bytes[..cut].to_vec();
        torn.resize(bytes.len(), 0);
        let r = replay_log(&torn, salt(), 0).expect("a torn tail is not corruption");
        assert_eq!(r.records.len(), 1);
        assert_eq!(r.end_offset, offsets[1]);
        assert_eq!(r.dropped_tail, Some(offsets[1]));
    }

    /// The file ends inside the last record's padding (its header and body survived, the
    /// file length did not): a torn last append, not corruption.
    #[test]
    fn a_record_cut_in_its_padding_is_torn() {
        let (bytes, offsets) = file(&[commit(1, 1), commit(2, 1)], 0);
        let cut = &bytes[..offsets[1] as usize + 200];
        let r = replay_log(cut, salt(), 0).expect("torn, not corruption");
        assert_eq!(r.records.len(), 1);
        assert_eq!(r.dropped_tail, Some(offsets[1]));
    }

    #[test]
    fn damage_followed_by_a_valid_record_is_corruption() {
        let entries = [commit(1, 1), commit(2, 1), commit(3, 1)];
        let (mut bytes, offsets) = file(&entries, 1);
        bytes[offsets[1] as usize + 30] ^= 1;
        let e = replay_log(&bytes, salt(), 0).expect_err("a hole before an intact record");
        assert_eq!(e.offset, offsets[1]);
        assert!(matches!(e.reason, DecodeReason::BadChecksum { .. }), "{e}");
    }

    #[test]
    fn versions_must_be_consecutive() {
        let (bytes, offsets) = file(&[commit(1, 1), commit(3, 1)], 0);
        let e = replay_log(&bytes, salt(), 0).expect_err("gap");
        assert_eq!(e.offset, offsets[1]);
        assert_eq!(
            e.reason,
            DecodeReason::LogVersionGap {
                expected: 2,
                found: 3
            }
        );
        let close = LogEntry {
            kind: LogRecordKind::Close,
            version: 2,
            clock_ms: 0,
            mutations: Vec::new(),
        };
        let (bytes, _) = file(
            &[commit(1, 1), commit(2, 1), close.clone(), commit(3, 1)],
            0,
        );
        let r = replay_log(&bytes, salt(), 0).expect("a close repeats the last version");
        assert!(!r.closed());
        let (bytes, _) = file(&[commit(1, 1), commit(2, 1), close], 0);
        assert!(replay_log(&bytes, salt(), 0).expect("replays").closed());
    }

    #[test]
    fn coverage_is_checked() {
        let (bytes, _) = file(&[commit(4, 1), commit(5, 1)], 0);
        let r = replay_log(&bytes, salt(), 0).expect("replays");
        assert!(r.commits_after(3).is_ok());
        assert!(matches!(
            r.commits_after(2).map_err(|e| e.reason),
            Err(DecodeReason::LogVersionGap { .. })
        ));
        assert_eq!(
            r.commits_after(6).map_err(|e| e.reason),
            Err(DecodeReason::LogEndsEarly { needed: 6, last: 5 })
        );
        let empty = replay_log(&[], salt(), 0).expect("an empty file is an empty log");
        assert_eq!(empty.records.len(), 0);
        assert!(empty.commits_after(0).expect("nothing needed").is_empty());
    }

    #[test]
    fn records_of_another_file_are_not_read() {
        let (bytes, _) = file(&[commit(1, 1)], 1);
        let other = LogSalt::new(5, &BranchName::main(), 1, 99);
        let r = replay_log(&bytes, other, 0).expect("foreign bytes end the log");
        assert!(r.records.is_empty());
        assert_eq!(r.dropped_tail, Some(0));
    }
    /// A file of `entries`, record `i` written while the file was durable only below
    /// `synced(i, its offset)`, plus one block of preallocation.
    fn file_unsynced(
        entries: &[LogEntry],
        synced: impl Fn(usize, u64) -> u64,
    ) -> (Vec<u8>, Vec<u64>) {
        let mut out = Vec::new();
        let mut offsets = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let at = out.len() as u64;
            offsets.push(at);
            out.extend(encode_log_record(e, salt(), at, synced(i, at)).expect("encodes"));
        }
        out.resize(out.len() + LOG_BLOCK, 0);
        (out, offsets)
    }

    /// Records 1.. appended without a sync (the file durable only below record 1): a power
    /// loss that damages record 1 and keeps record 2 loses both, never promised durable.
    #[test]
    fn damage_before_intact_unsynced_records_is_their_loss() {
        let entries = [commit(1, 1), commit(2, 1), commit(3, 1), commit(4, 1)];
        let (mut bytes, offsets) =
            file_unsynced(&entries, |i, at| if i == 0 { at } else { offsets_of(1) });
        for b in &mut bytes[offsets[1] as usize..offsets[2] as usize] {
            *b = 0;
        }
        let r = replay_log(&bytes, salt(), 0).expect("unsynced records lost, not corruption");
        assert_eq!(r.records.len(), 1);
        assert_eq!(r.end_offset, offsets[1]);
        assert_eq!(r.dropped_tail, Some(offsets[1]));
        assert_eq!(r.dropped_records, 2);
        assert_eq!(r.records[0].synced, 0);
        // A bit flipped in record 2 instead: records 2 and 3 survive only up to it.
        let (mut bytes, offsets) =
            file_unsynced(&entries, |i, at| if i == 0 { at } else { offsets_of(1) });
        bytes[offsets[2] as usize + 30] ^= 1;
        let r = replay_log(&bytes, salt(), 0).expect("lost, not corruption");
        assert_eq!(r.records.len(), 2);
        assert_eq!(r.records[1].synced, offsets[1]);
        assert_eq!(r.dropped_records, 1);
    }

    /// The offset of record `i` in a file of one-block records.
    fn offsets_of(i: u64) -> u64 {
        i * LOG_BLOCK as u64
    }

    /// Damage to a record the file was durable past when a later intact record was written
    /// stays corruption: a version-2 record whose `synced` lies above the damage, or a
    /// version-1 record (durable through its own offset) anywhere after it.
    #[test]
    fn damage_to_a_synced_record_before_an_intact_one_stays_corruption() {
        let entries = [commit(1, 1), commit(2, 1), commit(3, 1), commit(4, 1)];
        // Records 0 and 1 synced; 2 and 3 written with the file durable below record 2.
        let (mut bytes, offsets) =
            file_unsynced(&entries, |i, at| if i < 2 { at } else { offsets_of(2) });
        bytes[offsets[1] as usize + 30] ^= 1;
        let e = replay_log(&bytes, salt(), 0).expect_err("record 1 was durable");
        assert_eq!(e.offset, offsets[1]);
        assert!(matches!(e.reason, DecodeReason::BadChecksum { .. }), "{e}");
        // Unsynced records, then a synced (version-1) one: damage before it is corruption.
        let (mut bytes, offsets) =
            file_unsynced(
                &entries,
                |i, at| if i == 3 || i == 0 { at } else { offsets_of(1) },
            );
        bytes[offsets[1] as usize + 30] ^= 1;
        let e = replay_log(&bytes, salt(), 0).expect_err("record 3 was written durable");
        assert_eq!(e.offset, offsets[1]);
    }
}
