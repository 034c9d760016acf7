//! Write-ahead log records: one group commit of a branch, appended to its log file
//! (`wal_<log_id>_<branch>_<term>`) and acknowledged after one `fdatasync` — or, for a
//! buffered-durability commit, once written to the OS (then the record says how far the
//! file was durable when it was written: version 2, below).
//!
//! A record starts on a [`LOG_BLOCK`] boundary and is zero-padded to the next one, so an
//! append only writes blocks no acknowledged record uses. Its checksum is salted with the
//! file's identity (log id, branch, term, incarnation: [`LogSalt`]) and the record's own
//! offset, so all-zero bytes, a record of another file or incarnation, and a record copied
//! to another offset of the same file never validate. The byte layout is in
//! `docs/format.md` ("Log records"); [`crate::replay_log`] applies the tail rules.
//!
//! Decoding treats the bytes as hostile: every length and count is checked against the
//! bytes present (and a maximum) before anything is sliced or allocated, and every failure
//! is a [`DecodeError`] naming the record's offset.

use crate::checksum::{Checksum, Domain, checksum};
use crate::codec::{Reader, le_u32, le_u64, put_at, put_u8, put_varint};
use crate::error::{DecodeError, DecodeReason, EncodeError};
use bough_names::BranchName;

/// Records start on multiples of this and are zero-padded up to the next one.
pub const LOG_BLOCK: usize = 4096;
/// Magic bytes at offset 8 of every log record.
pub const LOG_MAGIC: [u8; 4] = *b"BWAL";
/// Newest format version of log records. Version 1: written with every byte before the
/// record durable. Version 2 (buffered durability): the body also carries `synced`, the
/// offset below which the file was durable when the record was written (below the record's
/// own offset), so replay can tell a lost unsynced record from damage (`replay_log`).
pub const LOG_VERSION: u16 = 2;
/// The version of a record written with every byte before it durable (what every writer
/// wrote before version 2 existed; a writer still does whenever `synced` is its offset).
pub const LOG_VERSION_SYNCED: u16 = 1;
/// Bytes of the fixed record header.
pub const LOG_HEADER_LEN: usize = 20;
/// Largest body a record may claim. A batch larger than this does not go through the log
/// (the writer commits it to the tree directly).
pub const MAX_LOG_BODY: u32 = 64 << 20;
/// Bytes of the fixed part of a body (version, clock; version 2 adds `synced`).
const BODY_FIXED: usize = 16;
/// Smallest encoding of a mutation: op, key length, one key byte (ForceDelete).
const MIN_MUTATION_LEN: usize = 3;

const RECORD_TAG: &str = "bough/log-record";
const FILE_TAG: &str = "bough/log-file";

/// What a log record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogRecordKind {
    /// A group commit: the batch producing `version`.
    Commit,
    /// A clean close: every record before it is complete; `version` is the last commit's.
    Close,
}

impl LogRecordKind {
    fn byte(self) -> u8 {
        match self {
            LogRecordKind::Commit => 1,
            LogRecordKind::Close => 2,
        }
    }

    fn from_byte(b: u8) -> Option<Self> {
        match b {
            1 => Some(LogRecordKind::Commit),
            2 => Some(LogRecordKind::Close),
            _ => None,
        }
    }
}

/// A change to one key, as the log stores it (the tree's `Op` without the tree).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LogOp {
    /// Insert or replace by last-writer-wins.
    Put {
        value: Vec<u8>,
        timestamp: u64,
        expire_at: u64,
    },
    /// A tombstone by last-writer-wins.
    Delete { timestamp: u64, expire_at: u64 },
    /// Remove regardless of timestamps.
    ForceDelete,
    /// A tombstone regardless of timestamps.
    ReplaceWithTombstone { timestamp: u64, expire_at: u64 },
    /// Insert or replace regardless of timestamps.
    Replace {
        value: Vec<u8>,
        timestamp: u64,
        expire_at: u64,
    },
}

/// One mutation of a logged batch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LogMutation {
    /// Non-empty; strictly increasing within a record.
    pub key: Vec<u8>,
    pub op: LogOp,
}

/// One log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    pub kind: LogRecordKind,
    /// The branch commit version the batch produces (for a close: the last one).
    pub version: u64,
    /// Store-clock time of the commit, ms since the epoch (point-in-time reads use it).
    pub clock_ms: u64,
    /// The batch, keys strictly increasing; empty for a close record.
    pub mutations: Vec<LogMutation>,
}

/// A log record's fields with its batch borrowed: what the encoder reads, so a commit
/// encodes its batch without copying every key and value first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntryRef<'a> {
    pub kind: LogRecordKind,
    pub version: u64,
    pub clock_ms: u64,
    /// Keys strictly increasing; empty for a close record.
    pub mutations: Vec<LogMutationRef<'a>>,
}

/// One mutation of a [`LogEntryRef`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogMutationRef<'a> {
    pub key: &'a [u8],
    pub op: LogOpRef<'a>,
}

/// A [`LogOp`] with its value borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogOpRef<'a> {
    Put {
        value: &'a [u8],
        timestamp: u64,
        expire_at: u64,
    },
    Delete {
        timestamp: u64,
        expire_at: u64,
    },
    ForceDelete,
    ReplaceWithTombstone {
        timestamp: u64,
        expire_at: u64,
    },
    Replace {
        value: &'a [u8],
        timestamp: u64,
        expire_at: u64,
    },
}

impl LogOpRef<'_> {
    fn byte(&self) -> u8 {
        match self {
            LogOpRef::Put { .. } => 1,
            LogOpRef::Delete { .. } => 2,
            LogOpRef::ForceDelete => 3,
            LogOpRef::ReplaceWithTombstone { .. } => 4,
            LogOpRef::Replace { .. } => 5,
        }
    }
}

impl LogOp {
    /// This op with its value borrowed.
    pub fn borrowed(&self) -> LogOpRef<'_> {
        match self {
            LogOp::Put {
                value,
                timestamp,
                expire_at,
            } => LogOpRef::Put {
                value,
                timestamp: *timestamp,
                expire_at: *expire_at,
            },
            LogOp::Delete {
                timestamp,
                expire_at,
            } => LogOpRef::Delete {
                timestamp: *timestamp,
                expire_at: *expire_at,
            },
            LogOp::ForceDelete => LogOpRef::ForceDelete,
            LogOp::ReplaceWithTombstone {
                timestamp,
                expire_at,
            } => LogOpRef::ReplaceWithTombstone {
                timestamp: *timestamp,
                expire_at: *expire_at,
            },
            LogOp::Replace {
                value,
                timestamp,
                expire_at,
            } => LogOpRef::Replace {
                value,
                timestamp: *timestamp,
                expire_at: *expire_at,
            },
        }
    }
}

impl LogEntry {
    /// This record with its batch borrowed.
    pub fn borrowed(&self) -> LogEntryRef<'_> {
        LogEntryRef {
            kind: self.kind,
            version: self.version,
            clock_ms: self.clock_ms,
            mutations: self
                .mutations
                .iter()
                .map(|m| LogMutationRef {
                    key: &m.key,
                    op: m.op.borrowed(),
                })
                .collect(),
        }
    }
}

/// The identity a log file's records are salted with: which file, written by whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LogSalt(pub u64);

impl LogSalt {
    /// The salt of `wal_<log_id>_<branch>_<term>` written by `incarnation`.
    pub fn new(log_id: u64, branch: &BranchName, term: u64, incarnation: u64) -> Self {
        let mut b = Vec::with_capacity(24 + branch.as_str().len());
        b.extend_from_slice(&log_id.to_le_bytes());
        b.extend_from_slice(&term.to_le_bytes());
        b.extend_from_slice(&incarnation.to_le_bytes());
        b.extend_from_slice(branch.as_str().as_bytes());
        LogSalt(checksum(Domain::Other(FILE_TAG), &b))
    }
}

/// The parsed fixed header of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogHeader {
    pub checksum: u64,
    pub version: u16,
    pub kind: u8,
    pub flags: u8,
    pub body_len: u32,
}

impl LogHeader {
    /// Parses the header at the start of `bytes`: `None` if fewer than
    /// [`LOG_HEADER_LEN`] bytes are present or the magic is wrong.
    pub fn parse(bytes: &[u8]) -> Option<LogHeader> {
        let h = bytes.get(..LOG_HEADER_LEN)?;
        if h.get(8..12) != Some(&LOG_MAGIC[..]) {
            return None;
        }
        let byte = |at: usize| h.get(at).copied().unwrap_or_default();
        Some(LogHeader {
            checksum: le_u64(h, 0),
            version: u16::from_le_bytes([byte(12), byte(13)]),
            kind: byte(14),
            flags: byte(15),
            body_len: le_u32(h, 16),
        })
    }
}

/// Bytes a record with a body of `body_len` bytes occupies, padding included.
pub fn log_record_len(body_len: usize) -> usize {
    (LOG_HEADER_LEN + body_len).div_ceil(LOG_BLOCK) * LOG_BLOCK
}

fn record_checksum(salt: LogSalt, offset: u64, covered: &[u8]) -> u64 {
    Checksum::new(Domain::Other(RECORD_TAG))
        .update(&salt.0.to_le_bytes())
        .update(&offset.to_le_bytes())
        .update(covered)
        .finish()
}

/// Encodes `entry` as the record at `offset` (a multiple of [`LOG_BLOCK`]) of the file
/// salted with `salt`, padding included, written with every byte before it durable
/// (version 1: [`encode_log_record`] with `synced = offset`).
///
/// Refused as the reader would refuse it: an offset off a block boundary, a close record
/// with mutations, an empty key, keys not strictly increasing, a body above
/// [`MAX_LOG_BODY`].
pub fn encode_log_entry(
    entry: &LogEntry,
    salt: LogSalt,
    offset: u64,
) -> Result<Vec<u8>, EncodeError> {
    encode_log_record(entry, salt, offset, offset)
}

/// Encodes `entry` as the record at `offset`, written while the file was durable only below
/// `synced` (a block boundary, at most `offset`). `synced == offset` is a version-1 record,
/// byte for byte what [`encode_log_entry`] writes; below it, a version-2 record carrying
/// `synced`.
pub fn encode_log_record(
    entry: &LogEntry,
    salt: LogSalt,
    offset: u64,
    synced: u64,
) -> Result<Vec<u8>, EncodeError> {
    encode_log_record_ref(&entry.borrowed(), salt, offset, synced)
}

/// [`encode_log_record`] of a record whose batch is borrowed: the same bytes.
pub fn encode_log_record_ref(
    entry: &LogEntryRef<'_>,
    salt: LogSalt,
    offset: u64,
    synced: u64,
) -> Result<Vec<u8>, EncodeError> {
    if !offset.is_multiple_of(LOG_BLOCK as u64) {
        return Err(EncodeError::MisalignedOffset(offset));
    }
    if synced > offset || !synced.is_multiple_of(LOG_BLOCK as u64) {
        return Err(EncodeError::InvalidSynced(synced));
    }
    let version = if synced == offset {
        LOG_VERSION_SYNCED
    } else {
        LOG_VERSION
    };
    if entry.kind == LogRecordKind::Close && !entry.mutations.is_empty() {
        return Err(EncodeError::InvalidBatch(
            "a close record holds no mutations",
        ));
    }
    if entry.mutations.iter().any(|m| m.key.is_empty()) {
        return Err(EncodeError::InvalidBatch("empty key"));
    }
    if !entry.mutations.is_sorted_by(|a, b| a.key < b.key) {
        return Err(EncodeError::InvalidBatch("keys not strictly increasing"));
    }
    let mut out = vec![0u8; LOG_HEADER_LEN];
    out.extend_from_slice(&entry.version.to_le_bytes());
    out.extend_from_slice(&entry.clock_ms.to_le_bytes());
    if version == LOG_VERSION {
        out.extend_from_slice(&synced.to_le_bytes());
    }
    put_varint(&mut out, entry.mutations.len() as u64);
    for m in &entry.mutations {
        put_mutation(&mut out, *m);
    }
    let body_len = out.len() - LOG_HEADER_LEN;
    let body_len = u32::try_from(body_len)
        .ok()
        .filter(|&n| n <= MAX_LOG_BODY)
        .ok_or(EncodeError::PayloadTooLarge(body_len))?;
    // `out` starts with LOG_HEADER_LEN zero bytes reserved for the header.
    put_at(&mut out, 8, &LOG_MAGIC);
    put_at(&mut out, 12, &version.to_le_bytes());
    put_at(&mut out, 14, &[entry.kind.byte(), 0]);
    put_at(&mut out, 16, &body_len.to_le_bytes());
    let sum = record_checksum(salt, offset, out.get(8..).unwrap_or_default());
    put_at(&mut out, 0, &sum.to_le_bytes());
    out.resize(log_record_len(body_len as usize), 0);
    Ok(out)
}

fn put_mutation(out: &mut Vec<u8>, m: LogMutationRef<'_>) {
    put_u8(out, m.op.byte());
    put_varint(out, m.key.len() as u64);
    out.extend_from_slice(m.key);
    match m.op {
        LogOpRef::Put {
            value,
            timestamp,
            expire_at,
        }
        | LogOpRef::Replace {
            value,
            timestamp,
            expire_at,
        } => {
            put_varint(out, timestamp);
            put_varint(out, expire_at);
            put_varint(out, value.len() as u64);
            out.extend_from_slice(value);
        }
        LogOpRef::Delete {
            timestamp,
            expire_at,
        }
        | LogOpRef::ReplaceWithTombstone {
            timestamp,
            expire_at,
        } => {
            put_varint(out, timestamp);
            put_varint(out, expire_at);
        }
        LogOpRef::ForceDelete => {}
    }
}

/// Whether a record at `offset` is *intact*: header present with the magic, a body length
/// within the maximum, its padded extent within `bytes` and zero past the body, and a
/// matching checksum. Intact says nothing about the version or whether the body decodes.
///
/// The padding is part of it because an unsynced append's padding may land on bytes the
/// laying out had not yet made durable zeros: such a record is torn, like one whose body
/// did not land (and with every append synced, a damaged padding is damage like any other).
pub fn log_record_is_intact(bytes: &[u8], offset: u64, salt: LogSalt) -> bool {
    frame(bytes, offset, salt).is_ok()
}

/// The checked extent of the record at `offset`: (header, covered bytes, padded length).
fn frame(bytes: &[u8], offset: u64, salt: LogSalt) -> Result<(LogHeader, &[u8]), DecodeReason> {
    let start = usize::try_from(offset).map_err(|_| DecodeReason::Truncated)?;
    let rest = bytes.get(start..).ok_or(DecodeReason::Truncated)?;
    if rest.len() < LOG_HEADER_LEN {
        return Err(DecodeReason::Truncated);
    }
    let h = LogHeader::parse(rest).ok_or(DecodeReason::BadMagic)?;
    if h.body_len > MAX_LOG_BODY {
        return Err(DecodeReason::PayloadTooLarge(h.body_len));
    }
    let end = LOG_HEADER_LEN + h.body_len as usize;
    // The padded extent must be present too: a file that ends inside a record's padding
    // was cut during that record's append (its last one), which is a torn record.
    if rest.len() < log_record_len(h.body_len as usize) {
        return Err(DecodeReason::Truncated);
    }
    let covered = rest.get(8..end).ok_or(DecodeReason::Truncated)?;
    let computed = record_checksum(salt, offset, covered);
    if computed != h.checksum {
        return Err(DecodeReason::BadChecksum {
            stored: h.checksum,
            computed,
        });
    }
    let padding = rest
        .get(end..log_record_len(h.body_len as usize))
        .ok_or(DecodeReason::Truncated)?;
    if padding.iter().any(|&b| b != 0) {
        return Err(DecodeReason::NonZeroPadding);
    }
    let record = rest.get(..end).ok_or(DecodeReason::Truncated)?;
    Ok((h, record))
}

/// Decodes the record at `offset` of a log file salted with `salt`. Returns it and its
/// padded length (where the next record starts, relative to `offset`).
pub fn decode_log_entry(
    bytes: &[u8],
    offset: u64,
    salt: LogSalt,
) -> Result<(LogEntry, usize), DecodeError> {
    decode_log_record(bytes, offset, salt).map(|(entry, _, padded)| (entry, padded))
}

/// [`decode_log_entry`], also returning the record's `synced` offset: below it the file
/// was durable when the record was written (a version-1 record: its own offset).
pub fn decode_log_record(
    bytes: &[u8],
    offset: u64,
    salt: LogSalt,
) -> Result<(LogEntry, u64, usize), DecodeError> {
    let at = |reason| DecodeError::new(offset, reason);
    if !offset.is_multiple_of(LOG_BLOCK as u64) {
        return Err(at(DecodeReason::MisalignedOffset));
    }
    let (h, record) = frame(bytes, offset, salt).map_err(at)?;
    if h.version != LOG_VERSION && h.version != LOG_VERSION_SYNCED {
        return Err(at(DecodeReason::UnsupportedVersion(u32::from(h.version))));
    }
    let kind =
        LogRecordKind::from_byte(h.kind).ok_or(at(DecodeReason::UnknownRecordKind(h.kind)))?;
    if h.flags != 0 {
        return Err(at(DecodeReason::UnknownFlags(u32::from(h.flags))));
    }
    // `frame` checked the record, its padding included.
    let padded = log_record_len(h.body_len as usize);
    let body = record.get(LOG_HEADER_LEN..).unwrap_or_default();
    let (entry, synced) = decode_body(kind, h.version, offset, body).map_err(at)?;
    Ok((entry, synced, padded))
}

fn decode_body(
    kind: LogRecordKind,
    format: u16,
    offset: u64,
    body: &[u8],
) -> Result<(LogEntry, u64), DecodeReason> {
    let mut r = Reader::new(body);
    let fixed = r.bytes(BODY_FIXED as u64)?;
    let version = le_u64(fixed, 0);
    let clock_ms = le_u64(fixed, 8);
    let synced = if format == LOG_VERSION {
        let synced = le_u64(r.bytes(8)?, 0);
        // Version 2 exists only for `synced` below the record: one record, one encoding.
        if synced >= offset || !synced.is_multiple_of(LOG_BLOCK as u64) {
            return Err(DecodeReason::InvalidSynced(synced));
        }
        synced
    } else {
        offset
    };
    let count = r.count(MIN_MUTATION_LEN)?;
    if kind == LogRecordKind::Close && count != 0 {
        return Err(DecodeReason::InvalidBatch(
            "a close record holds no mutations",
        ));
    }
    let mut mutations: Vec<LogMutation> = Vec::with_capacity(count);
    for _ in 0..count {
        let m = decode_mutation(&mut r)?;
        if mutations.last().is_some_and(|prev| prev.key >= m.key) {
            return Err(DecodeReason::InvalidBatch("keys not strictly increasing"));
        }
        mutations.push(m);
    }
    r.finish()?;
    let entry = LogEntry {
        kind,
        version,
        clock_ms,
        mutations,
    };
    Ok((entry, synced))
}

fn decode_mutation(r: &mut Reader<'_>) -> Result<LogMutation, DecodeReason> {
    let op = r.u8()?;
    let key_len = r.varint()?;
    let key = r.bytes(key_len)?.to_vec();
    if key.is_empty() {
        return Err(DecodeReason::InvalidBatch("empty key"));
    }
    let op = match op {
        1 | 5 => {
            let timestamp = r.varint()?;
            let expire_at = r.varint()?;
            let len = r.varint()?;
            let value = r.bytes(len)?.to_vec();
            if op == 1 {
                LogOp::Put {
                    value,
                    timestamp,
                    expire_at,
                }
            } else {
                LogOp::Replace {
                    value,
                    timestamp,
                    expire_at,
                }
            }
        }
        2 | 4 => {
            let timestamp = r.varint()?;
            let expire_at = r.varint()?;
            if op == 2 {
                LogOp::Delete {
                    timestamp,
                    expire_at,
                }
            } else {
                LogOp::ReplaceWithTombstone {
                    timestamp,
                    expire_at,
                }
            }
        }
        3 => LogOp::ForceDelete,
        other => return Err(DecodeReason::UnknownLogOp(other)),
    };
    Ok(LogMutation { key, op })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn salt() -> LogSalt {
        LogSalt::new(1, &BranchName::main(), 2, 3)
    }

    fn entry() -> LogEntry {
        LogEntry {
            kind: LogRecordKind::Commit,
            version: 7,
            clock_ms: 1_700_000_000_000,
            mutations: vec![
                LogMutation {
                    key: b"a".to_vec(),
                    op: LogOp::Put {
                        value: b"1".to_vec(),
                        timestamp: 5,
                        expire_at: 0,
                    },
                },
                LogMutation {
                    key: b"b".to_vec(),
                    op: LogOp::ForceDelete,
                },
            ],
        }
    }

    #[test]
    fn round_trips_at_its_offset_only() {
        let e = entry();
        let bytes = encode_log_entry(&e, salt(), 0).expect("encodes");
        assert_eq!(bytes.len(), LOG_BLOCK);
        assert_eq!(
            decode_log_entry(&bytes, 0, salt()),
            Ok((e.clone(), LOG_BLOCK))
        );
        // The same bytes at another offset, or read with another file's salt, do not validate.
        let mut moved = vec![0u8; LOG_BLOCK];
        moved.extend_from_slice(&bytes);
        assert!(matches!(
            decode_log_entry(&moved, LOG_BLOCK as u64, salt()).map_err(|e| e.reason),
            Err(DecodeReason::BadChecksum { .. })
        ));
        for other in [
            LogSalt::new(2, &BranchName::main(), 2, 3),
            LogSalt::new(1, &BranchName::main(), 3, 3),
            LogSalt::new(1, &BranchName::main(), 2, 4),
        ] {
            assert!(!log_record_is_intact(&bytes, 0, other));
        }
    }

    #[test]
    fn zeros_never_validate() {
        let zeros = vec![0u8; LOG_BLOCK];
        assert_eq!(
            decode_log_entry(&zeros, 0, salt()).map_err(|e| e.reason),
            Err(DecodeReason::BadMagic)
        );
        // Even with the magic in place, a zero checksum over zero bytes fails.
        let mut z = zeros.clone();
        z[8..12].copy_from_slice(&LOG_MAGIC);
        assert!(!log_record_is_intact(&z, 0, salt()));
    }

    #[test]
    fn encoder_refuses_what_the_decoder_refuses() {
        let mut e = entry();
        e.mutations.swap(0, 1);
        assert!(encode_log_entry(&e, salt(), 0).is_err());
        let mut e = entry();
        e.mutations[0].key.clear();
        assert!(encode_log_entry(&e, salt(), 0).is_err());
        let mut e = entry();
        e.kind = LogRecordKind::Close;
        assert!(encode_log_entry(&e, salt(), 0).is_err());
        assert_eq!(
            encode_log_entry(&entry(), salt(), 12),
            Err(EncodeError::MisalignedOffset(12))
        );
    }

    #[test]
    fn hostile_lengths_are_refused_before_allocation() {
        let e = entry();
        let mut bytes = encode_log_entry(&e, salt(), 0).expect("encodes");
        // A body length above the maximum, and one running past the input.
        bytes[16..20].copy_from_slice(&(MAX_LOG_BODY + 1).to_le_bytes());
        assert_eq!(
            decode_log_entry(&bytes, 0, salt()).map_err(|e| e.reason),
            Err(DecodeReason::PayloadTooLarge(MAX_LOG_BODY + 1))
        );
        bytes[16..20].copy_from_slice(&(MAX_LOG_BODY).to_le_bytes());
        assert_eq!(
            decode_log_entry(&bytes, 0, salt()).map_err(|e| e.reason),
            Err(DecodeReason::Truncated)
        );
        // A record whose padding is cut off is not intact (a torn last append).
        let whole = encode_log_entry(&e, salt(), 0).expect("encodes");
        assert!(log_record_is_intact(&whole, 0, salt()));
        assert!(!log_record_is_intact(&whole[..100], 0, salt()));
        // Non-zero padding.
        let mut bytes = encode_log_entry(&e, salt(), 0).expect("encodes");
        bytes[LOG_BLOCK - 1] = 1;
        assert_eq!(
            decode_log_entry(&bytes, 0, salt()).map_err(|e| e.reason),
            Err(DecodeReason::NonZeroPadding)
        );
        // Misaligned offsets and offsets past the end.
        assert!(decode_log_entry(&bytes, 1, salt()).is_err());
        assert!(decode_log_entry(&bytes, u64::MAX - 4095, salt()).is_err());
    }
    /// Re-seals a record's checksum after a test edited its bytes, so the decoder (not the
    /// checksum) must refuse the edit.
    fn reseal(bytes: &mut [u8], offset: u64) {
        let body_len = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes")) as usize;
        let sum = record_checksum(salt(), offset, &bytes[8..LOG_HEADER_LEN + body_len]);
        bytes[..8].copy_from_slice(&sum.to_le_bytes());
    }

    #[test]
    fn a_record_written_unsynced_carries_synced_and_round_trips() {
        let at = 3 * LOG_BLOCK as u64;
        let e = entry();
        // `synced` equal to the offset is the version-1 record, byte for byte.
        assert_eq!(
            encode_log_record(&e, salt(), at, at),
            encode_log_entry(&e, salt(), at)
        );
        let mut file = vec![0u8; at as usize];
        let rec = encode_log_record(&e, salt(), at, LOG_BLOCK as u64).expect("encodes");
        assert_eq!(u16::from_le_bytes([rec[12], rec[13]]), LOG_VERSION);
        file.extend_from_slice(&rec);
        assert_eq!(
            decode_log_record(&file, at, salt()),
            Ok((e.clone(), LOG_BLOCK as u64, LOG_BLOCK))
        );
        assert_eq!(decode_log_entry(&file, at, salt()), Ok((e, LOG_BLOCK)));
        let v1 = encode_log_entry(&entry(), salt(), 0).expect("encodes");
        assert_eq!(
            decode_log_record(&v1, 0, salt()).map(|(_, synced, _)| synced),
            Ok(0)
        );
    }

    #[test]
    fn the_encoder_refuses_a_synced_offset_past_the_record_or_off_a_boundary() {
        let at = 2 * LOG_BLOCK as u64;
        for synced in [at + LOG_BLOCK as u64, 100, at - 1] {
            assert_eq!(
                encode_log_record(&entry(), salt(), at, synced),
                Err(EncodeError::InvalidSynced(synced))
            );
        }
    }

    /// Hostile version-2 records whose checksum matches: a `synced` at or past the record
    /// (one record would have two encodings, or claim bytes after it durable), off a block
    /// boundary, or missing (the body ends first); and a version no reader knows.
    #[test]
    fn hostile_synced_offsets_are_refused() {
        let at = LOG_BLOCK as u64;
        let mut file = vec![0u8; LOG_BLOCK];
        file.extend(encode_log_record(&entry(), salt(), at, 0).expect("encodes"));
        let synced_at = LOG_BLOCK + LOG_HEADER_LEN + BODY_FIXED;
        for bad in [at, at + LOG_BLOCK as u64, 17, u64::MAX] {
            let mut f = file.clone();
            f[synced_at..synced_at + 8].copy_from_slice(&bad.to_le_bytes());
            reseal(&mut f[LOG_BLOCK..], at);
            assert_eq!(
                decode_log_record(&f, at, salt()).map_err(|e| e.reason),
                Err(DecodeReason::InvalidSynced(bad)),
                "synced {bad}"
            );
        }
        // A version-1 header over a version-2 body: the extra 8 bytes misparse, and the
        // body no longer ends where it should (or the count is refused).
        let mut f = file.clone();
        f[LOG_BLOCK + 12..LOG_BLOCK + 14].copy_from_slice(&LOG_VERSION_SYNCED.to_le_bytes());
        reseal(&mut f[LOG_BLOCK..], at);
        assert!(decode_log_record(&f, at, salt()).is_err());
        // A version-2 header over a body too short to hold `synced`.
        let close = LogEntry {
            kind: LogRecordKind::Close,
            version: 1,
            clock_ms: 0,
            mutations: Vec::new(),
        };
        let mut f = vec![0u8; LOG_BLOCK];
        f.extend(encode_log_entry(&close, salt(), at).expect("encodes"));
        f[LOG_BLOCK + 12..LOG_BLOCK + 14].copy_from_slice(&LOG_VERSION.to_le_bytes());
        reseal(&mut f[LOG_BLOCK..], at);
        assert!(decode_log_record(&f, at, salt()).is_err());
        // Version 3 is refused even with a matching checksum.
        let mut f = file.clone();
        f[LOG_BLOCK + 12..LOG_BLOCK + 14].copy_from_slice(&3u16.to_le_bytes());
        reseal(&mut f[LOG_BLOCK..], at);
        assert_eq!(
            decode_log_record(&f, at, salt()).map_err(|e| e.reason),
            Err(DecodeReason::UnsupportedVersion(3))
        );
    }
}
