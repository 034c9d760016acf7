//! Replaying a manifest file: the snapshot at offset 0 with every intact log record after
//! it applied in order, and the rule that tells a torn last append from damage.

use std::collections::BTreeMap;

use bough_names::FileId;

use crate::error::{DecodeError, DecodeReason};
use crate::ext::{self, Extensions};
use crate::page::{PageAddr, PageId};
use crate::record::{
    BLOCK_SIZE, HEADER_LEN, Known, LogRecord, ManifestMetadata, Record, RecordKind, Snapshot,
    decode_payload, frame, has_valid_checksum,
};

/// The manifest state after replay: the snapshot with every log record applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestState {
    /// Branch, term, current roots and current file ranges.
    pub meta: ManifestMetadata,
    /// Current file-id high-water mark.
    pub max_file_id: FileId,
    /// The store's page size.
    pub page_size: u32,
    /// The compression dictionary (from the snapshot).
    pub dict: Vec<u8>,
    /// Root of the last checkpointed mapping table, or [`PageAddr::NONE`].
    pub mapping_root: PageAddr,
    /// Logical page-id high-water.
    pub next_page_id: PageId,
    /// Head of the free logical-id chain.
    pub free_head: Option<PageId>,
    /// Mapping changes since the last checkpoint; they override the mapping pages, and
    /// [`PageAddr::NONE`] means the id is unmapped.
    pub overlay: BTreeMap<PageId, u64>,
    /// Extensions: the snapshot's, each overwritten by the latest log record carrying the
    /// same tag.
    pub extensions: Extensions,
    /// Sequence number of the last applied log record (0 if none).
    pub last_seq: u64,
}

impl ManifestState {
    /// The state a snapshot describes, before any log record.
    pub fn from_snapshot(s: Snapshot) -> ManifestState {
        ManifestState {
            meta: s.meta,
            max_file_id: s.max_file_id,
            page_size: s.page_size,
            dict: s.dict,
            mapping_root: s.mapping_root,
            next_page_id: s.next_page_id,
            free_head: s.free_head,
            overlay: s.overlay.into_iter().collect(),
            extensions: s.extensions,
            last_seq: 0,
        }
    }

    /// Applies the next log record. On error the state is unchanged.
    ///
    /// Refused: a sequence number other than `last_seq + 1`, a record that lowers
    /// `max_file_id` or `next_page_id` (both are high-water marks; lowering them would let
    /// ids be handed out twice), and a record carrying `VERSION`.
    pub fn apply(&mut self, log: LogRecord) -> Result<(), DecodeReason> {
        let expected = self.last_seq.saturating_add(1);
        if log.seq != expected {
            return Err(DecodeReason::SeqGap {
                expected,
                found: log.seq,
            });
        }
        if log.max_file_id < self.max_file_id {
            return Err(DecodeReason::MaxFileIdRegressed {
                previous: self.max_file_id,
                found: log.max_file_id,
            });
        }
        // The version is the snapshot's plus the log length; a log record cannot reset it.
        if ext::get(&log.extensions, crate::ext::VERSION).is_some() {
            return Err(DecodeReason::MisplacedExtension(crate::ext::VERSION));
        }
        if log.next_page_id < self.next_page_id {
            return Err(DecodeReason::NextPageIdRegressed {
                previous: self.next_page_id,
                found: log.next_page_id,
            });
        }
        self.meta.root = log.root;
        self.meta.ttl_root = log.ttl_root;
        self.meta.branch_file_ranges = log.branch_file_ranges;
        self.max_file_id = log.max_file_id;
        if let Some(root) = log.checkpoint {
            // The checkpoint wrote every earlier change into the mapping pages.
            self.mapping_root = root;
            self.overlay.clear();
        }
        self.next_page_id = log.next_page_id;
        self.free_head = log.free_head;
        self.overlay.extend(log.changes);
        for (tag, value) in log.extensions {
            ext::set(&mut self.extensions, tag, value);
        }
        self.last_seq = log.seq;
        Ok(())
    }

    /// The commit version of this state: the snapshot's `VERSION` (0 when absent) plus the
    /// log records applied since (see `crate::version`). Saturates instead of wrapping.
    pub fn version(&self) -> u64 {
        // A buffered head's records carry `LOG`, whose `covered` is the state's version (a
        // checkpoint absorbs many logged commits in one record).
        if let Ok(Some(refs)) = crate::log_ref::log_refs(&self.extensions)
            && let Some(last) = refs.last()
        {
            return last.covered;
        }
        // Decoding checked the payload; a state built by hand with a bad one counts as 0.
        let base = crate::version::commit_version(&self.extensions)
            .ok()
            .flatten()
            .unwrap_or(0);
        base.saturating_add(self.last_seq)
    }

    /// The snapshot that describes this state (for rewriting the manifest or archiving it).
    /// It carries the state's version, so a manifest rewritten from it continues the count.
    pub fn to_snapshot(&self) -> Snapshot {
        let mut extensions = self.extensions.clone();
        let version = self.version();
        if version != 0 || ext::get(&extensions, crate::ext::VERSION).is_some() {
            crate::version::set_commit_version(&mut extensions, version);
        }
        Snapshot {
            meta: self.meta.clone(),
            max_file_id: self.max_file_id,
            page_size: self.page_size,
            dict: self.dict.clone(),
            mapping_root: self.mapping_root,
            next_page_id: self.next_page_id,
            free_head: self.free_head,
            overlay: self.overlay.iter().map(|(&id, &addr)| (id, addr)).collect(),
            extensions,
        }
    }

    /// The bytes stored under extension `tag`.
    pub fn extension(&self, tag: u64) -> Option<&[u8]> {
        ext::get(&self.extensions, tag)
    }
}

/// The outcome of [`replay`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// The state after every intact record.
    pub state: ManifestState,
    /// Records applied, the snapshot included.
    pub records: usize,
    /// Where the next record goes: just past the last intact record (a block boundary).
    pub end_offset: u64,
    /// Set to `end_offset` when non-zero bytes follow the last intact record: a torn last
    /// append that was dropped. The next append overwrites it.
    pub dropped_tail: Option<u64>,
}

/// What a dropped tail means, in the words every tool reports it with: the bytes at
/// `offset` (the first block boundary without an intact record, with non-zero bytes at or
/// after it and no intact record later) are either a torn last append or damage to the
/// last record. Replay cannot tell which, so the commit they held, if any, is not applied.
pub fn dropped_tail_finding(offset: u64) -> String {
    format!(
        "tail record at offset {offset} fails its checksum: a torn write or damage; \
         the commit it held, if any, was discarded"
    )
}

/// Replays a whole manifest file.
///
/// - Offset 0 must hold an intact, decodable snapshot; otherwise the error names offset 0
///   (a damaged snapshot is never skipped).
/// - At each following block boundary, an intact record (checksum matches, version 1,
///   padded extent present, zero padding) must be a decodable log record with the next
///   sequence number; anything else about it is an error naming its offset. So is a record
///   whose checksum matches but whose version is unknown (a newer writer's record).
/// - The first boundary without an intact record (all zeros, end of data, torn or damaged
///   bytes) ends the log — but only if no later block boundary starts a record whose
///   checksum matches. If one does, the bytes were not the last append, and the error names
///   the first bad offset.
pub fn replay(bytes: &[u8]) -> Result<Replayed, DecodeError> {
    replay_with(bytes, ext::is_known)
}

pub(crate) fn replay_with(bytes: &[u8], known: Known) -> Result<Replayed, DecodeError> {
    let head = bytes.get(..HEADER_LEN).unwrap_or(bytes);
    if head.iter().all(|&b| b == 0) {
        return Err(DecodeError::new(0, DecodeReason::NoSnapshot));
    }
    let at0 = |reason| DecodeError::new(0, reason);
    let first = frame(bytes, 0).map_err(at0)?;
    let snapshot = match decode_payload(&first, known).map_err(at0)? {
        Record::Snapshot(s) => s,
        Record::Log(_) => {
            return Err(at0(DecodeReason::UnexpectedRecordKind {
                expected: RecordKind::Snapshot,
                found: RecordKind::Log,
            }));
        }
    };
    let mut state = ManifestState::from_snapshot(snapshot);
    let mut records = 1;
    let mut offset = first.len;

    loop {
        let at = |reason| DecodeError::new(offset, reason);
        match frame(bytes, offset) {
            Ok(f) => {
                match decode_payload(&f, known).map_err(at)? {
                    Record::Log(log) => state.apply(log).map_err(at)?,
                    Record::Snapshot(_) => {
                        return Err(at(DecodeReason::UnexpectedRecordKind {
                            expected: RecordKind::Log,
                            found: RecordKind::Snapshot,
                        }));
                    }
                }
                records += 1;
                offset += f.len;
            }
            // The checksum matched, so a newer writer wrote this record in full: refusing
            // it is the only choice that does not let the next append overwrite it.
            Err(reason @ DecodeReason::UnsupportedVersion(_)) => return Err(at(reason)),
            Err(reason) => {
                // Every intact record's padded extent lies inside `bytes`, so offset <= len.
                let start = offset as usize;
                if later_record_exists(bytes, start) {
                    return Err(at(reason));
                }
                let dirty = bytes
                    .get(start..)
                    .is_some_and(|t| t.iter().any(|&b| b != 0));
                return Ok(Replayed {
                    state,
                    records,
                    end_offset: offset,
                    dropped_tail: dirty.then_some(offset),
                });
            }
        }
    }
}

/// Whether any block boundary after `start` begins a record with a matching checksum.
///
/// Cost: one checksum per later boundary whose header claims a payload that fits, over that
/// payload. After a clean end the rest of the file is absent or zero, and zero headers are
/// rejected after hashing 16 bytes.
fn later_record_exists(bytes: &[u8], start: usize) -> bool {
    (start.saturating_add(BLOCK_SIZE)..bytes.len())
        .step_by(BLOCK_SIZE)
        .any(|b| has_valid_checksum(bytes, b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{encode_log_with, encode_snapshot_with};
    use crate::{BranchFileMapping, NO_PAGE};
    use bough_names::BranchName;

    fn known_small(tag: u64) -> bool {
        tag < 10
    }

    fn log(seq: u64, extensions: Extensions) -> LogRecord {
        LogRecord {
            seq,
            root: NO_PAGE,
            ttl_root: NO_PAGE,
            max_file_id: 0,
            branch_file_ranges: BranchFileMapping::new(),
            checkpoint: None,
            next_page_id: 0,
            free_head: None,
            changes: vec![],
            extensions,
        }
    }

    #[test]
    fn log_extensions_overwrite_the_snapshot_s_per_tag() {
        let mut s = Snapshot::empty(BranchName::main(), 0, 4096);
        s.extensions = vec![(2, b"a".to_vec()), (4, b"b".to_vec())];
        let mut file = encode_snapshot_with(&s, known_small).expect("encodes");
        for l in [
            log(1, vec![(4, b"c".to_vec())]),
            log(2, vec![(3, b"d".to_vec()), (4, b"e".to_vec())]),
        ] {
            file.extend(encode_log_with(&l, known_small).expect("encodes"));
        }
        let state = replay_with(&file, known_small).expect("replays").state;
        assert_eq!(
            state.extensions,
            vec![(2, b"a".to_vec()), (3, b"d".to_vec()), (4, b"e".to_vec())]
        );
        assert_eq!(state.extension(3), Some(&b"d"[..]));
        // A reader that does not know the odd tag 3 refuses the record carrying it, and
        // since its checksum matches, that is an error rather than a dropped tail.
        let only_even = |t: u64| t.is_multiple_of(2);
        let e = replay_with(&file, only_even).expect_err("must fail");
        assert_eq!(e.offset, 2 * BLOCK_SIZE as u64);
        assert_eq!(e.reason, DecodeReason::UnknownMandatoryExtension(3));
    }

    #[test]
    fn failed_apply_leaves_the_state_unchanged() {
        let mut state = ManifestState::from_snapshot(Snapshot::empty(BranchName::main(), 0, 4096));
        let before = state.clone();
        assert_eq!(
            state.apply(log(2, vec![])),
            Err(DecodeReason::SeqGap {
                expected: 1,
                found: 2
            })
        );
        assert_eq!(state, before);
    }
}
