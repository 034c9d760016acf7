//! Manifest records: the 24-byte header, the snapshot and log payloads, and their codecs.

use bough_names::{BranchName, FileId, Term};

use crate::checksum::{Domain, checksum};
use crate::codec::{Reader, le_u32, le_u64, put_at, put_bytes, put_u8, put_varint};
use crate::error::{DecodeError, DecodeReason, EncodeError};
use crate::ext::{self, Extensions};
use crate::page::{NO_PAGE, PageAddr, PageId};
use crate::ranges::{BranchFileMapping, BranchFileRange};

mod decode;
mod encode;

pub use decode::decode_record;
pub(crate) use decode::*;
#[cfg(test)]
pub(crate) use encode::{build_record, encode_log_with, encode_snapshot_with};
pub use encode::{encode_log, encode_snapshot};
// The log references' codec spells branch names the same way.
pub(crate) use encode::put_branch;

/// Records start at multiples of this many bytes and are zero-padded to it, so appending a
/// record never rewrites a block that holds an acknowledged one. Fixed in format version 1.
pub const BLOCK_SIZE: usize = 4096;

/// Size of the record header.
pub const HEADER_LEN: usize = 24;

/// The record format version this crate writes and reads.
pub const FORMAT_VERSION: u32 = 2;

/// Largest payload a record may have (64 MiB). Checked before anything is read or allocated
/// from the header's length; large enough for a snapshot overlay of millions of entries.
pub const MAX_RECORD_PAYLOAD: u32 = 64 << 20;

/// Largest compression dictionary a snapshot may carry (1 MiB).
pub const MAX_DICT_LEN: usize = 1 << 20;

/// Smallest page size a store may use.
pub const MIN_PAGE_SIZE: u32 = 4096;

/// Largest page size a store may use.
pub const MAX_PAGE_SIZE: u32 = 65536;

/// Longest branch name in bytes (checked before `BranchName::new` sees the bytes).
const MAX_BRANCH_LEN: usize = bough_names::MAX_BRANCH_LEN;

/// The kind byte that starts every payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordKind {
    /// A whole manifest state: record 0 of a manifest file, or an archive file.
    Snapshot = 1,
    /// Changes since the previous record.
    Log = 2,
}

/// The fixed header in front of every record payload.
///
/// | bytes  | field                                      |
/// |--------|--------------------------------------------|
/// | 0..8   | checksum of bytes `8 .. 24 + payload_len`  |
/// | 8..12  | format version                             |
/// | 12..16 | B+tree root (logical id)                   |
/// | 16..20 | TTL-index root (logical id)                |
/// | 20..24 | payload length                             |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// `checksum(Domain::ManifestRecord, record[8 .. 24 + payload_len])`.
    pub checksum: u64,
    /// Format version; [`FORMAT_VERSION`] for records this crate writes.
    pub version: u32,
    /// Logical id of the B+tree root, or [`NO_PAGE`].
    pub root: PageId,
    /// Logical id of the TTL-index root, or [`NO_PAGE`].
    pub ttl_root: PageId,
    /// Payload bytes following the header (padding excluded).
    pub payload_len: u32,
}

impl RecordHeader {
    /// The header's 24 bytes, little-endian.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..8].copy_from_slice(&self.checksum.to_le_bytes());
        out[8..12].copy_from_slice(&self.version.to_le_bytes());
        out[12..16].copy_from_slice(&self.root.to_le_bytes());
        out[16..20].copy_from_slice(&self.ttl_root.to_le_bytes());
        out[20..24].copy_from_slice(&self.payload_len.to_le_bytes());
        out
    }

    /// Parses the fields from the first 24 bytes of `bytes` without checking anything;
    /// `None` if there are fewer than 24 bytes.
    pub fn parse(bytes: &[u8]) -> Option<RecordHeader> {
        let h = bytes.get(..HEADER_LEN)?;
        Some(RecordHeader {
            checksum: le_u64(h, 0),
            version: le_u32(h, 8),
            root: le_u32(h, 12),
            ttl_root: le_u32(h, 16),
            payload_len: le_u32(h, 20),
        })
    }

    /// Bytes the record occupies on disk: header + payload, rounded up to [`BLOCK_SIZE`].
    pub fn record_len(&self) -> u64 {
        record_len(self.payload_len)
    }
}

/// Bytes a record with `payload_len` payload bytes occupies, padding included.
pub fn record_len(payload_len: u32) -> u64 {
    (HEADER_LEN as u64 + u64::from(payload_len)).next_multiple_of(BLOCK_SIZE as u64)
}

/// The seed's manifest metadata: whose manifest this is and where its trees start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestMetadata {
    /// The branch this manifest belongs to.
    pub branch: BranchName,
    /// The branch's term that writes this manifest.
    pub term: Term,
    /// Logical id of the B+tree root, or [`NO_PAGE`].
    pub root: PageId,
    /// Logical id of the TTL-index root, or [`NO_PAGE`].
    pub ttl_root: PageId,
    /// Which lineage allocated each file id this branch can reach.
    pub branch_file_ranges: BranchFileMapping,
}

/// A whole manifest state: record 0 of a manifest file, or the only record of an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Branch, term, roots and file ranges.
    pub meta: ManifestMetadata,
    /// The branch's file-id high-water mark: the highest file id this branch has allocated
    /// in any term (the seed's `MaxFpId`). Never below any range's `max_file_id`.
    pub max_file_id: FileId,
    /// The store's page size: a power of two in `4096..=65536`.
    pub page_size: u32,
    /// Reserved for a compression dictionary (at most [`MAX_DICT_LEN`] bytes); empty today.
    pub dict: Vec<u8>,
    /// Physical address of the mapping table's root page, or [`PageAddr::NONE`].
    pub mapping_root: PageAddr,
    /// Logical page-id high-water: ids at or above it have never been allocated.
    pub next_page_id: PageId,
    /// Head of the chain of free logical ids (the chain lives in the mapping table).
    pub free_head: Option<PageId>,
    /// Mapping changes not yet checkpointed into mapping pages, strictly increasing by id;
    /// [`PageAddr::NONE`] unmaps an id.
    pub overlay: Vec<(PageId, u64)>,
    /// Extensions, tags strictly increasing (see [`crate::ext`]).
    pub extensions: Extensions,
}

impl Snapshot {
    /// The snapshot of a new, empty store: no trees, no pages, no files.
    pub fn empty(branch: BranchName, term: Term, page_size: u32) -> Snapshot {
        Snapshot {
            meta: ManifestMetadata {
                branch,
                term,
                root: NO_PAGE,
                ttl_root: NO_PAGE,
                branch_file_ranges: BranchFileMapping::new(),
            },
            max_file_id: 0,
            page_size,
            dict: Vec::new(),
            mapping_root: PageAddr::NONE,
            next_page_id: 0,
            free_head: None,
            overlay: Vec::new(),
            extensions: Extensions::new(),
        }
    }

    /// The bytes stored under extension `tag`.
    pub fn extension(&self, tag: u64) -> Option<&[u8]> {
        ext::get(&self.extensions, tag)
    }
}

/// The changes one append makes to the manifest state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// 1 for the first log record after the snapshot, then +1 per record.
    pub seq: u64,
    /// New B+tree root (logical id), or [`NO_PAGE`].
    pub root: PageId,
    /// New TTL-index root (logical id), or [`NO_PAGE`].
    pub ttl_root: PageId,
    /// New file-id high-water mark (never lower than the previous one).
    pub max_file_id: FileId,
    /// The full new branch file ranges.
    pub branch_file_ranges: BranchFileMapping,
    /// If set, the mapping table was checkpointed into pages rooted here: the accumulated
    /// overlay is cleared before `changes` apply.
    pub checkpoint: Option<PageAddr>,
    /// New logical page-id high-water (never lower than the previous one).
    pub next_page_id: PageId,
    /// New head of the free logical-id chain.
    pub free_head: Option<PageId>,
    /// Mapping changes, strictly increasing by id; [`PageAddr::NONE`] unmaps an id.
    pub changes: Vec<(PageId, u64)>,
    /// Extensions, tags strictly increasing (see [`crate::ext`]).
    pub extensions: Extensions,
}

impl LogRecord {
    /// The bytes stored under extension `tag`.
    pub fn extension(&self, tag: u64) -> Option<&[u8]> {
        ext::get(&self.extensions, tag)
    }
}

/// One decoded record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A snapshot record.
    Snapshot(Snapshot),
    /// A log record.
    Log(LogRecord),
}

impl Record {
    /// Which kind of record this is.
    pub fn kind(&self) -> RecordKind {
        match self {
            Record::Snapshot(_) => RecordKind::Snapshot,
            Record::Log(_) => RecordKind::Log,
        }
    }

    /// Encodes the record (see [`encode_snapshot`], [`encode_log`]).
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        match self {
            Record::Snapshot(s) => encode_snapshot(s),
            Record::Log(l) => encode_log(l),
        }
    }
}

/// Which extension tags a codec understands; the public codecs use [`ext::is_known`], unit
/// tests substitute their own set.
pub(crate) type Known = fn(u64) -> bool;

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> BranchName {
        BranchName::new(s).expect("valid name")
    }

    /// Seals a hand-made payload into a record, the way the encoder would.
    fn seal(root: PageId, ttl_root: PageId, payload: &[u8]) -> Vec<u8> {
        build_record(root, ttl_root, |out| out.extend_from_slice(payload)).expect("small")
    }

    fn reason(bytes: &[u8], known: Known) -> DecodeReason {
        decode_record_with(bytes, 0, known)
            .expect_err("must fail")
            .reason
    }

    /// A minimal snapshot payload with the given tail (mapping + extensions part).
    fn snapshot_payload(next_page_id: u64, tail: &[u8]) -> Vec<u8> {
        let mut p = vec![1, 4];
        p.extend_from_slice(b"main");
        p.extend_from_slice(&[0, 0]); // term, max_file_id
        put_varint(&mut p, 4096);
        p.extend_from_slice(&[0, 0, 0]); // dict len, ranges count, mapping_root
        put_varint(&mut p, next_page_id);
        p.push(0); // free_head
        p.extend_from_slice(tail);
        p
    }

    fn known_small(tag: u64) -> bool {
        tag < 10
    }

    #[test]
    fn known_extensions_round_trip_and_unknown_even_are_skipped() {
        let mut s = Snapshot::empty(name("main"), 1, 4096);
        s.extensions = vec![(2, b"two".to_vec()), (3, vec![]), (9, vec![9; 300])];
        let bytes = encode_snapshot_with(&s, known_small).expect("encodes");
        assert_eq!(
            decode_record_with(&bytes, 0, known_small),
            Ok(Record::Snapshot(s.clone()))
        );
        // A reader that knows only tag 2 skips the even tags it does not know…
        let only_2 = |t: u64| t == 2;
        let mut even = s.clone();
        even.extensions = vec![(2, b"two".to_vec()), (4, vec![1]), (6, vec![])];
        let bytes = encode_snapshot_with(&even, known_small).expect("encodes");
        let Ok(Record::Snapshot(got)) = decode_record_with(&bytes, 0, only_2) else {
            panic!("decodes");
        };
        assert_eq!(got.extensions, vec![(2, b"two".to_vec())]);
        assert_eq!(got.extension(2), Some(&b"two"[..]));
        // …and refuses the odd ones.
        let bytes = encode_snapshot_with(&s, known_small).expect("encodes");
        assert_eq!(
            reason(&bytes, only_2),
            DecodeReason::UnknownMandatoryExtension(3)
        );
        // Encoding refuses tags it does not know and unsorted tags.
        assert_eq!(encode_snapshot(&s), Err(EncodeError::UnknownExtension(2)));
        s.extensions.swap(0, 1);
        assert_eq!(
            encode_snapshot_with(&s, known_small),
            Err(EncodeError::ExtensionsNotSorted)
        );
    }

    #[test]
    fn log_extensions_round_trip() {
        let log = LogRecord {
            seq: 3,
            root: NO_PAGE,
            ttl_root: NO_PAGE,
            max_file_id: 0,
            branch_file_ranges: BranchFileMapping::new(),
            checkpoint: None,
            next_page_id: 0,
            free_head: None,
            changes: vec![],
            // Not 5: that is `VERSION`, which log records may not carry.
            extensions: vec![(7, vec![7, 7])],
        };
        let bytes = encode_log_with(&log, known_small).expect("encodes");
        assert_eq!(
            decode_record_with(&bytes, 0, known_small),
            Ok(Record::Log(log.clone()))
        );
        assert_eq!(log.extension(7), Some(&[7u8, 7][..]));
    }

    #[test]
    fn minimal_payload_decodes_and_tail_errors_are_named() {
        let ok = seal(NO_PAGE, NO_PAGE, &snapshot_payload(0, &[0, 0]));
        assert_eq!(
            decode_record(&ok, 0),
            Ok(Record::Snapshot(Snapshot::empty(name("main"), 0, 4096)))
        );
        let cases: &[(Vec<u8>, DecodeReason)] = &[
            (
                snapshot_payload(0, &[0, 0, 7]),
                DecodeReason::TrailingBytes(1),
            ),
            (
                snapshot_payload(0, &[0]),
                DecodeReason::Varint(crate::varint::VarintError::Truncated),
            ),
            // Mapping: count 2 with the second delta 0 (ids not increasing).
            (
                snapshot_payload(9, &[2, 1, 0, 0, 0, 0]),
                DecodeReason::PageIdsNotSorted,
            ),
            (
                snapshot_payload(9, &[1, 9, 0, 0]),
                DecodeReason::PageIdOutOfRange(9),
            ),
            // Page address with page index 0.
            (
                snapshot_payload(9, &[1, 0, 0x80, 0x80, 0x80, 0x08, 0]),
                DecodeReason::InvalidPageAddr(1 << 24),
            ),
            // Count far beyond the remaining bytes: refused before any allocation.
            (
                snapshot_payload(0, &[0xff, 0xff, 0xff, 0xff, 0x0f, 0]),
                DecodeReason::CountTooLarge(u32::MAX as u64),
            ),
            // Extensions: tags 4 then 2.
            (
                snapshot_payload(0, &[0, 2, 4, 0, 2, 0]),
                DecodeReason::ExtensionsNotSorted,
            ),
            (
                snapshot_payload(1u64 << 32, &[0, 0]),
                DecodeReason::PageIdOutOfRange(1 << 32),
            ),
            (vec![], DecodeReason::Truncated),
            (vec![3], DecodeReason::UnknownRecordKind(3)),
        ];
        for (payload, want) in cases {
            let bytes = seal(NO_PAGE, NO_PAGE, payload);
            assert_eq!(&reason(&bytes, ext::is_known), want, "payload {payload:?}");
        }
        // A root at or above next_page_id.
        let bytes = seal(0, NO_PAGE, &snapshot_payload(0, &[0, 0]));
        assert_eq!(
            reason(&bytes, ext::is_known),
            DecodeReason::PageIdOutOfRange(0)
        );
    }

    #[test]
    fn snapshot_field_errors() {
        let patch = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut p = snapshot_payload(0, &[0, 0]);
            f(&mut p);
            reason(&seal(NO_PAGE, NO_PAGE, &p), ext::is_known)
        };
        assert_eq!(patch(&|p| p[2] = b'!'), DecodeReason::InvalidBranchName);
        assert_eq!(patch(&|p| p[1] = 0), DecodeReason::InvalidBranchName);
        assert_eq!(patch(&|p| p[1] = 65), DecodeReason::InvalidBranchName);
        assert_eq!(patch(&|p| p[1] = 200), DecodeReason::InvalidBranchName);
        // page_size 4096 is [0x80, 0x20] at 8..10; make it 8192+4096 (not a power of two).
        assert_eq!(
            patch(&|p| p[9] = 0x60),
            DecodeReason::InvalidPageSize(12288)
        );
        assert_eq!(patch(&|p| p[9] = 0x10), DecodeReason::InvalidPageSize(2048));
        // Dictionary longer than 1 MiB: [0x81, 0x80, 0x40] = 1 MiB + 1.
        assert_eq!(
            patch(&|p| {
                p.splice(10..11, [0x81, 0x80, 0x40]);
            }),
            DecodeReason::DictTooLarge((1 << 20) + 1)
        );
        // Ranges: two entries out of order, then one above max_file_id (0).
        fn ranges(entries: &[u8]) -> impl Fn(&mut Vec<u8>) + '_ {
            move |p: &mut Vec<u8>| {
                p.splice(11..12, entries.iter().copied());
            }
        }
        // Each entry: name length, name, term, incarnation (8 bytes), max_file_id.
        let two = [
            2, 1, b'a', 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, b'b', 0, 1, 2, 3, 4, 5, 6, 7, 8, 0,
        ];
        assert_eq!(patch(&ranges(&two)), DecodeReason::RangesNotSorted);
        let high = [1, 1, b'a', 0, 1, 2, 3, 4, 5, 6, 7, 8, 5];
        assert_eq!(
            patch(&ranges(&high)),
            DecodeReason::RangesExceedMaxFileId {
                range_max: 5,
                max_file_id: 0
            }
        );
    }

    #[test]
    fn log_field_errors() {
        let payload = |seq: u8, flag: &[u8]| {
            let mut p = vec![2, seq, 0, 0];
            p.extend_from_slice(flag);
            p.extend_from_slice(&[0, 0, 0, 0]);
            seal(NO_PAGE, NO_PAGE, &p)
        };
        assert!(decode_record(&payload(1, &[0]), 0).is_ok());
        assert!(decode_record(&payload(1, &[1, 0]), 0).is_ok());
        assert_eq!(
            reason(&payload(0, &[0]), ext::is_known),
            DecodeReason::InvalidSeq
        );
        assert_eq!(
            reason(&payload(1, &[2]), ext::is_known),
            DecodeReason::InvalidCheckpointFlag(2)
        );
    }

    #[test]
    fn framing_errors() {
        let good = encode_snapshot(&Snapshot::empty(name("main"), 0, 4096)).expect("encodes");
        assert_eq!(good.len(), BLOCK_SIZE);
        assert_eq!(reason(&good[..23], ext::is_known), DecodeReason::Truncated);
        // Padding missing (torn inside the padding).
        assert_eq!(reason(&good[..100], ext::is_known), DecodeReason::Truncated);
        assert_eq!(
            decode_record(&good, 5000).map_err(|e| e.offset),
            Err(5000),
            "offset past the end"
        );
        let mut big = good.clone();
        big[20..24].copy_from_slice(&(MAX_RECORD_PAYLOAD + 1).to_le_bytes());
        assert_eq!(
            reason(&big, ext::is_known),
            DecodeReason::PayloadTooLarge(MAX_RECORD_PAYLOAD + 1)
        );
        let mut padded = good.clone();
        padded[4095] = 1;
        assert_eq!(reason(&padded, ext::is_known), DecodeReason::NonZeroPadding);
        // A newer version with a matching checksum is refused, not mistaken for damage.
        // Version 1 (before incarnations) and a future version 3 alike.
        for v in [1u8, 3] {
            let mut other = good.clone();
            other[8] = v;
            let len =
                24 + u32::from_le_bytes([other[20], other[21], other[22], other[23]]) as usize;
            let sum = checksum(Domain::ManifestRecord, &other[8..len]);
            other[..8].copy_from_slice(&sum.to_le_bytes());
            assert_eq!(
                reason(&other, ext::is_known),
                DecodeReason::UnsupportedVersion(u32::from(v))
            );
        }
        assert!(matches!(
            reason(&vec![0; BLOCK_SIZE], ext::is_known),
            DecodeReason::BadChecksum { .. }
        ));
    }

    #[test]
    fn encode_refuses_what_decode_would_refuse() {
        let mut s = Snapshot::empty(name("main"), 0, 4096);
        s.page_size = 1000;
        assert_eq!(encode_snapshot(&s), Err(EncodeError::InvalidPageSize(1000)));
        s.page_size = 1 << 17;
        assert_eq!(
            encode_snapshot(&s),
            Err(EncodeError::InvalidPageSize(1 << 17))
        );
        s.page_size = 4096;
        s.dict = vec![0; MAX_DICT_LEN + 1];
        assert_eq!(
            encode_snapshot(&s),
            Err(EncodeError::DictTooLarge(MAX_DICT_LEN + 1))
        );
        s.dict.clear();
        s.meta.root = 0;
        assert_eq!(encode_snapshot(&s), Err(EncodeError::PageIdOutOfRange(0)));
        s.next_page_id = 10;
        s.free_head = Some(10);
        assert_eq!(encode_snapshot(&s), Err(EncodeError::PageIdOutOfRange(10)));
        s.free_head = Some(9);
        s.overlay = vec![(3, 0), (3, 0)];
        assert_eq!(encode_snapshot(&s), Err(EncodeError::PageIdsNotSorted));
        s.overlay = vec![(3, 0), (10, 0)];
        assert_eq!(encode_snapshot(&s), Err(EncodeError::PageIdOutOfRange(10)));
        s.overlay.pop();
        s.meta
            .branch_file_ranges
            .extend_own(&name("main"), 0, 7, 1)
            .expect("first");
        assert_eq!(encode_snapshot(&s), Err(EncodeError::RangesExceedMaxFileId));
        s.max_file_id = 1;
        assert!(encode_snapshot(&s).is_ok());
    }
}
