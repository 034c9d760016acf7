//! Typed errors for decoding (untrusted bytes) and encoding (caller's structures).

use crate::varint::VarintError;
use bough_names::FileId;

/// Decoding failed: `reason` happened in the structure starting at byte `offset` of the
/// input (the record's first byte for manifest records, 0 for a `CURRENT_TERM` record).
///
/// The I/O layer adds the file name; this crate never sees one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Byte offset of the record (or structure) that failed to decode.
    pub offset: u64,
    /// What was wrong with it.
    pub reason: DecodeReason,
}

impl DecodeError {
    pub(crate) fn new(offset: u64, reason: DecodeReason) -> Self {
        DecodeError { offset, reason }
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at offset {}: {}", self.offset, self.reason)
    }
}

impl std::error::Error for DecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.reason {
            DecodeReason::Varint(e) => Some(e),
            _ => None,
        }
    }
}

/// Why a record (or `CURRENT_TERM` record) could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeReason {
    /// The file holds no snapshot record at offset 0 (empty or all zeros).
    NoSnapshot,
    /// The stored checksum does not match the bytes.
    BadChecksum {
        /// Checksum stored in the record.
        stored: u64,
        /// Checksum computed over the record's bytes.
        computed: u64,
    },
    /// The record's format version is not one this crate reads (written by a newer Bough).
    UnsupportedVersion(u32),
    /// The header's payload length exceeds [`crate::MAX_RECORD_PAYLOAD`].
    PayloadTooLarge(u32),
    /// The input ends before the structure does.
    Truncated,
    /// The structure has the wrong size (`CURRENT_TERM` records are exactly 32 bytes).
    WrongLength(usize),
    /// A varint is truncated, overflowing or not canonical.
    Varint(VarintError),
    /// The bytes between the payload's end and the next block boundary are not all zero.
    NonZeroPadding,
    /// The payload's kind byte is not a known record kind.
    UnknownRecordKind(u8),
    /// A record of the wrong kind for its position (a log at offset 0, a snapshot later).
    UnexpectedRecordKind {
        /// The kind the position requires.
        expected: crate::RecordKind,
        /// The kind found.
        found: crate::RecordKind,
    },
    /// A branch name is empty, too long or has characters outside `[a-zA-Z0-9_-]`.
    InvalidBranchName,
    /// The page size is not a power of two in `4096..=65536`.
    InvalidPageSize(u64),
    /// The compression dictionary is longer than [`crate::MAX_DICT_LEN`].
    DictTooLarge(u64),
    /// A count is larger than the remaining bytes could possibly hold.
    CountTooLarge(u64),
    /// Branch file ranges are not strictly increasing by `max_file_id`.
    RangesNotSorted,
    /// A branch file range ends above the branch's file-id high-water mark.
    RangesExceedMaxFileId {
        /// The highest range end.
        range_max: FileId,
        /// The record's `max_file_id`.
        max_file_id: FileId,
    },
    /// A packed page address has page index 0 but is not 0 ("none").
    InvalidPageAddr(u64),
    /// A logical page id (root, free head, mapping entry) is not below `next_page_id`, or
    /// `next_page_id` itself does not fit in 32 bits.
    PageIdOutOfRange(u64),
    /// Mapping entries are not strictly increasing by logical id.
    PageIdsNotSorted,
    /// The mapping checkpoint flag is neither 0 nor 1.
    InvalidCheckpointFlag(u8),
    /// A log record's sequence number is 0.
    InvalidSeq,
    /// Extension tags are not strictly increasing.
    ExtensionsNotSorted,
    /// An odd (must-understand) extension tag this version does not know.
    UnknownMandatoryExtension(u64),
    /// A known extension in a record kind it may not appear in (`VERSION` in a log record).
    MisplacedExtension(u64),
    /// A known extension whose payload does not decode.
    InvalidExtension {
        /// The extension's tag.
        tag: u64,
        /// Why its payload was refused.
        reason: Box<DecodeReason>,
    },
    /// The payload has this many bytes left after its last field.
    TrailingBytes(usize),
    /// A log record's sequence number is not the previous one plus 1.
    SeqGap {
        /// The sequence number that should come next.
        expected: u64,
        /// The one found.
        found: u64,
    },
    /// A log record lowers the branch's file-id high-water mark.
    MaxFileIdRegressed {
        /// The high-water mark before the record.
        previous: FileId,
        /// The record's value.
        found: FileId,
    },
    /// A log record lowers the logical page-id high-water mark.
    NextPageIdRegressed {
        /// The high-water mark before the record.
        previous: u32,
        /// The record's value.
        found: u32,
    },
    /// A `CURRENT_TERM` record has flag bits this version does not define.
    UnknownFlags(u32),
    /// A `CURRENT_TERM` record holds an expiry hint without the flag that says it has one.
    HintWithoutFlag(u64),
    /// A `CURRENT_TERM` record's first term (where this incarnation of the branch began) is
    /// above its current term.
    FirstTermAboveTerm {
        /// The record's first term.
        first_term: u64,
        /// The record's term.
        term: u64,
    },
    /// A log record does not start with the log magic (zeros, or not a log record).
    BadMagic,
    /// A log record was asked for at an offset that is not a block boundary.
    MisalignedOffset,
    /// A logged batch breaks a batch rule (empty key, keys not strictly increasing, a close
    /// record with mutations).
    InvalidBatch(&'static str),
    /// A logged mutation's op byte is not a known op.
    UnknownLogOp(u8),
    /// A log record's commit version is not the one that must come next.
    LogVersionGap {
        /// The version that should come next.
        expected: u64,
        /// The one found.
        found: u64,
    },
    /// A table-op record (the store's branch registry) breaks a rule of its format.
    InvalidTableOp(&'static str),
    /// A version-2 log record's `synced` offset is not a block boundary below the record.
    InvalidSynced(u64),
    /// A log ends before the version the manifest says it covers.
    LogEndsEarly {
        /// The version the manifest names.
        needed: u64,
        /// The last version the log holds (0: none).
        last: u64,
    },
}

impl From<VarintError> for DecodeReason {
    fn from(e: VarintError) -> Self {
        DecodeReason::Varint(e)
    }
}

impl std::fmt::Display for DecodeReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use DecodeReason::*;
        match self {
            InvalidTableOp(what) => write!(f, "invalid table-op record: {what}"),
            NoSnapshot => f.write_str("no snapshot record (empty or all-zero file)"),
            BadChecksum { stored, computed } => {
                write!(
                    f,
                    "checksum mismatch (stored {stored:#018x}, computed {computed:#018x})"
                )
            }
            UnsupportedVersion(v) => write!(f, "unsupported format version {v}"),
            PayloadTooLarge(n) => write!(f, "payload length {n} exceeds the maximum"),
            Truncated => f.write_str("truncated"),
            WrongLength(n) => write!(f, "wrong length {n}"),
            Varint(e) => write!(f, "{e}"),
            NonZeroPadding => f.write_str("non-zero bytes in block padding"),
            UnknownRecordKind(k) => write!(f, "unknown record kind {k}"),
            UnexpectedRecordKind { expected, found } => {
                write!(
                    f,
                    "expected a {expected:?} record, found a {found:?} record"
                )
            }
            InvalidBranchName => f.write_str("invalid branch name"),
            InvalidPageSize(n) => write!(f, "invalid page size {n}"),
            DictTooLarge(n) => write!(f, "dictionary length {n} exceeds the maximum"),
            CountTooLarge(n) => write!(f, "count {n} exceeds the remaining bytes"),
            RangesNotSorted => f.write_str("branch file ranges not strictly increasing"),
            RangesExceedMaxFileId {
                range_max,
                max_file_id,
            } => write!(
                f,
                "branch file range ends at {range_max}, above max_file_id {max_file_id}"
            ),
            InvalidPageAddr(v) => write!(f, "invalid page address {v:#x}"),
            PageIdOutOfRange(v) => write!(f, "logical page id {v} out of range"),
            PageIdsNotSorted => f.write_str("mapping entries not strictly increasing"),
            InvalidCheckpointFlag(v) => write!(f, "invalid checkpoint flag {v}"),
            InvalidSeq => f.write_str("log sequence number 0"),
            ExtensionsNotSorted => f.write_str("extension tags not strictly increasing"),
            UnknownMandatoryExtension(t) => write!(f, "unknown must-understand extension {t}"),
            MisplacedExtension(t) => write!(f, "extension {t} is not allowed in this record kind"),
            InvalidExtension { tag, reason } => write!(f, "extension {tag}: {reason}"),
            TrailingBytes(n) => write!(f, "{n} trailing bytes after the payload"),
            SeqGap { expected, found } => {
                write!(f, "log sequence gap: expected {expected}, found {found}")
            }
            MaxFileIdRegressed { previous, found } => {
                write!(f, "max_file_id went down from {previous} to {found}")
            }
            NextPageIdRegressed { previous, found } => {
                write!(f, "next_page_id went down from {previous} to {found}")
            }
            UnknownFlags(v) => write!(f, "unknown flag bits {v:#x}"),
            HintWithoutFlag(v) => write!(f, "expiry hint {v:#x} without its flag"),
            FirstTermAboveTerm { first_term, term } => {
                write!(f, "first term {first_term} is above the term {term}")
            }
            BadMagic => f.write_str("no log record magic"),
            MisalignedOffset => f.write_str("offset is not a block boundary"),
            InvalidBatch(why) => write!(f, "invalid logged batch: {why}"),
            UnknownLogOp(op) => write!(f, "unknown logged op {op}"),
            LogVersionGap { expected, found } => {
                write!(f, "log version gap: expected {expected}, found {found}")
            }
            InvalidSynced(at) => write!(
                f,
                "synced offset {at} is not a block boundary below the log record"
            ),
            LogEndsEarly { needed, last } => write!(
                f,
                "the log ends at version {last}, before version {needed} the manifest covers"
            ),
        }
    }
}

/// The structure cannot be encoded because the reader would reject the result.
///
/// Encoding checks the same invariants decoding does, so a record that was written (and
/// perhaps acknowledged) can always be read back.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// The payload would exceed [`crate::MAX_RECORD_PAYLOAD`] bytes.
    PayloadTooLarge(usize),
    /// The page size is not a power of two in `4096..=65536`.
    InvalidPageSize(u32),
    /// The dictionary exceeds [`crate::MAX_DICT_LEN`] bytes.
    DictTooLarge(usize),
    /// A branch file range ends above `max_file_id`.
    RangesExceedMaxFileId,
    /// A root, free head or mapping entry is not below `next_page_id` (roots may be
    /// [`crate::NO_PAGE`]).
    PageIdOutOfRange(u32),
    /// Mapping entries are not strictly increasing by logical id.
    PageIdsNotSorted,
    /// Extension tags are not strictly increasing.
    ExtensionsNotSorted,
    /// An extension tag this version does not know (add it to [`crate::ext::KNOWN`]).
    UnknownExtension(u64),
    /// A known extension in a record kind it may not appear in (`VERSION` in a log record).
    MisplacedExtension(u64),
    /// A known extension whose payload the reader would refuse.
    InvalidExtension(u64),
    /// A log record's sequence number is 0.
    InvalidSeq,
    /// A log record's offset is not a block boundary.
    MisalignedOffset(u64),
    /// A batch the log reader would refuse (empty key, keys out of order, a close record
    /// with mutations).
    InvalidBatch(&'static str),
    /// A log record's `synced` offset is not a block boundary at or below the record's.
    InvalidSynced(u64),
}

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use EncodeError::*;
        match self {
            PayloadTooLarge(n) => write!(f, "payload of {n} bytes exceeds the maximum"),
            InvalidPageSize(n) => write!(f, "invalid page size {n}"),
            DictTooLarge(n) => write!(f, "dictionary of {n} bytes exceeds the maximum"),
            RangesExceedMaxFileId => f.write_str("a branch file range ends above max_file_id"),
            PageIdOutOfRange(v) => write!(f, "logical page id {v} not below next_page_id"),
            PageIdsNotSorted => f.write_str("mapping entries not strictly increasing"),
            ExtensionsNotSorted => f.write_str("extension tags not strictly increasing"),
            UnknownExtension(t) => write!(f, "unknown extension tag {t}"),
            MisplacedExtension(t) => write!(f, "extension {t} is not allowed in this record kind"),
            InvalidExtension(t) => write!(f, "extension {t} has an invalid payload"),
            InvalidSeq => f.write_str("log sequence number 0"),
            MisalignedOffset(o) => write!(f, "log record offset {o} is not a block boundary"),
            InvalidBatch(why) => write!(f, "invalid batch: {why}"),
            InvalidSynced(at) => write!(
                f,
                "synced offset {at} is not a block boundary at or below the log record"
            ),
        }
    }
}

impl std::error::Error for EncodeError {}
