//! Manifest records: the 24-byte header, the snapshot and log payloads, and their codecs.

use bough_names::{BranchName, FileId, Term};

use crate::checksum::{Domain, checksum};
use crate::codec::{Reader, le_u32, le_u64, put_bytes, put_u8, put_varint};
use crate::error::{DecodeError, DecodeReason, EncodeError};
use crate::ext::{self, Extensions};
use crate::page::{NO_PAGE, PageAddr, PageId};
use crate::ranges::{BranchFileMapping, BranchFileRange};

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

// ---------------------------------------------------------------------------------------
// Encoding

/// Encodes a snapshot record: header, payload and zero padding to a whole number of
/// [`BLOCK_SIZE`] blocks.
///
/// Fails if the reader would refuse the result (see [`EncodeError`]).
pub fn encode_snapshot(s: &Snapshot) -> Result<Vec<u8>, EncodeError> {
    encode_snapshot_with(s, ext::is_known)
}

/// Encodes a log record: header, payload and zero padding to a whole number of
/// [`BLOCK_SIZE`] blocks.
///
/// Fails if the reader would refuse the result (see [`EncodeError`]).
pub fn encode_log(l: &LogRecord) -> Result<Vec<u8>, EncodeError> {
    encode_log_with(l, ext::is_known)
}

pub(crate) fn encode_snapshot_with(s: &Snapshot, known: Known) -> Result<Vec<u8>, EncodeError> {
    let m = &s.meta;
    if !s.page_size.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&s.page_size) {
        return Err(EncodeError::InvalidPageSize(s.page_size));
    }
    if s.dict.len() > MAX_DICT_LEN {
        return Err(EncodeError::DictTooLarge(s.dict.len()));
    }
    check_ranges(&m.branch_file_ranges, s.max_file_id)?;
    check_ids(m.root, m.ttl_root, s.next_page_id, s.free_head, &s.overlay)?;
    check_extensions(&s.extensions, known)?;
    if known(crate::ext::VERSION) && crate::version::commit_version(&s.extensions).is_err() {
        return Err(EncodeError::InvalidExtension(crate::ext::VERSION));
    }

    build_record(m.root, m.ttl_root, |out| {
        put_u8(out, RecordKind::Snapshot as u8);
        put_branch(out, &m.branch);
        put_varint(out, m.term);
        put_varint(out, s.max_file_id);
        put_varint(out, u64::from(s.page_size));
        put_bytes(out, &s.dict);
        put_ranges(out, &m.branch_file_ranges);
        put_varint(out, s.mapping_root.to_u64());
        put_varint(out, u64::from(s.next_page_id));
        put_free_head(out, s.free_head);
        put_mapping(out, &s.overlay);
        put_extensions(out, &s.extensions);
    })
}

pub(crate) fn encode_log_with(l: &LogRecord, known: Known) -> Result<Vec<u8>, EncodeError> {
    if l.seq == 0 {
        return Err(EncodeError::InvalidSeq);
    }
    check_ranges(&l.branch_file_ranges, l.max_file_id)?;
    check_ids(l.root, l.ttl_root, l.next_page_id, l.free_head, &l.changes)?;
    check_extensions(&l.extensions, known)?;
    // A log record's version is the snapshot's plus its sequence number (see `version`).
    if known(crate::ext::VERSION) && ext::get(&l.extensions, crate::ext::VERSION).is_some() {
        return Err(EncodeError::MisplacedExtension(crate::ext::VERSION));
    }

    build_record(l.root, l.ttl_root, |out| {
        put_u8(out, RecordKind::Log as u8);
        put_varint(out, l.seq);
        put_varint(out, l.max_file_id);
        put_ranges(out, &l.branch_file_ranges);
        match l.checkpoint {
            None => put_u8(out, 0),
            Some(root) => {
                put_u8(out, 1);
                put_varint(out, root.to_u64());
            }
        }
        put_varint(out, u64::from(l.next_page_id));
        put_free_head(out, l.free_head);
        put_mapping(out, &l.changes);
        put_extensions(out, &l.extensions);
    })
}

/// Writes the payload after a placeholder header, then fills in the header and checksum
/// and pads to whole blocks.
fn build_record(
    root: PageId,
    ttl_root: PageId,
    payload: impl FnOnce(&mut Vec<u8>),
) -> Result<Vec<u8>, EncodeError> {
    let mut out = vec![0u8; HEADER_LEN];
    payload(&mut out);
    let payload_len = out.len() - HEADER_LEN;
    let len32 = u32::try_from(payload_len)
        .ok()
        .filter(|&n| n <= MAX_RECORD_PAYLOAD)
        .ok_or(EncodeError::PayloadTooLarge(payload_len))?;
    let mut header = RecordHeader {
        checksum: 0,
        version: FORMAT_VERSION,
        root,
        ttl_root,
        payload_len: len32,
    };
    out[..HEADER_LEN].copy_from_slice(&header.encode());
    header.checksum = checksum(Domain::ManifestRecord, &out[8..]);
    out[..8].copy_from_slice(&header.checksum.to_le_bytes());
    // record_len(len32) <= 24 + 64 MiB + 4095, which fits any usize this crate runs on.
    out.resize(record_len(len32) as usize, 0);
    Ok(out)
}

fn check_ranges(ranges: &BranchFileMapping, max_file_id: FileId) -> Result<(), EncodeError> {
    // BranchFileMapping keeps itself sorted; only the bound against max_file_id is left.
    match ranges.max_file_id() {
        Some(top) if top > max_file_id => Err(EncodeError::RangesExceedMaxFileId),
        _ => Ok(()),
    }
}

fn check_ids(
    root: PageId,
    ttl_root: PageId,
    next_page_id: PageId,
    free_head: Option<PageId>,
    mapping: &[(PageId, u64)],
) -> Result<(), EncodeError> {
    for r in [root, ttl_root] {
        if r != NO_PAGE && r >= next_page_id {
            return Err(EncodeError::PageIdOutOfRange(r));
        }
    }
    if let Some(id) = free_head.filter(|&id| id >= next_page_id) {
        return Err(EncodeError::PageIdOutOfRange(id));
    }
    if let Some(&(id, _)) = mapping.iter().find(|(id, _)| *id >= next_page_id) {
        return Err(EncodeError::PageIdOutOfRange(id));
    }
    if mapping.windows(2).any(|w| w[1].0 <= w[0].0) {
        return Err(EncodeError::PageIdsNotSorted);
    }
    if let Some(&(id, _)) = mapping
        .iter()
        .find(|(_, raw)| !crate::page::slot_is_valid(*raw))
    {
        return Err(EncodeError::PageIdOutOfRange(id));
    }
    Ok(())
}

fn check_extensions(exts: &[(u64, Vec<u8>)], known: Known) -> Result<(), EncodeError> {
    if exts.windows(2).any(|w| w[1].0 <= w[0].0) {
        return Err(EncodeError::ExtensionsNotSorted);
    }
    match exts.iter().find(|(tag, _)| !known(*tag)) {
        Some(&(tag, _)) => Err(EncodeError::UnknownExtension(tag)),
        None => Ok(()),
    }
}

pub(crate) fn put_branch(out: &mut Vec<u8>, branch: &BranchName) {
    // BranchName guarantees 1..=64 bytes, so the length always fits its u8.
    let name = branch.as_str().as_bytes();
    put_u8(out, name.len() as u8);
    out.extend_from_slice(name);
}

fn put_ranges(out: &mut Vec<u8>, ranges: &BranchFileMapping) {
    put_varint(out, ranges.len() as u64);
    for r in ranges {
        put_branch(out, &r.branch);
        put_varint(out, r.term);
        out.extend_from_slice(&r.incarnation.to_le_bytes());
        put_varint(out, r.max_file_id);
    }
}

fn put_free_head(out: &mut Vec<u8>, free_head: Option<PageId>) {
    // 0 means "no free id", so a present id is stored plus one.
    put_varint(out, free_head.map_or(0, |id| u64::from(id) + 1));
}

fn put_mapping(out: &mut Vec<u8>, entries: &[(PageId, u64)]) {
    put_varint(out, entries.len() as u64);
    let mut prev = 0;
    for &(id, addr) in entries {
        // Ids are strictly increasing (checked), so deltas are small and non-negative.
        put_varint(out, u64::from(id - prev));
        put_varint(out, addr);
        prev = id;
    }
}

fn put_extensions(out: &mut Vec<u8>, exts: &[(u64, Vec<u8>)]) {
    put_varint(out, exts.len() as u64);
    for (tag, bytes) in exts {
        put_varint(out, *tag);
        put_bytes(out, bytes);
    }
}

// ---------------------------------------------------------------------------------------
// Decoding

/// A record whose framing checked out: checksum matches, version is known, the padded
/// extent is present and the padding is zero. Its payload may still be undecodable.
#[derive(Debug)]
pub(crate) struct Frame<'a> {
    pub(crate) header: RecordHeader,
    pub(crate) payload: &'a [u8],
    /// Padded length: the next record starts this many bytes after this one.
    pub(crate) len: u64,
}

/// Checks the framing of the record at `offset` of `bytes`.
pub(crate) fn frame(bytes: &[u8], offset: u64) -> Result<Frame<'_>, DecodeReason> {
    let rest = usize::try_from(offset)
        .ok()
        .and_then(|start| bytes.get(start..))
        .ok_or(DecodeReason::Truncated)?;
    let header = RecordHeader::parse(rest).ok_or(DecodeReason::Truncated)?;
    if header.payload_len > MAX_RECORD_PAYLOAD {
        return Err(DecodeReason::PayloadTooLarge(header.payload_len));
    }
    // payload_len <= 64 MiB, so these sums cannot overflow.
    let end = HEADER_LEN + header.payload_len as usize;
    let covered = rest.get(8..end).ok_or(DecodeReason::Truncated)?;
    let computed = checksum(Domain::ManifestRecord, covered);
    if computed != header.checksum {
        return Err(DecodeReason::BadChecksum {
            stored: header.checksum,
            computed,
        });
    }
    // The checksum matched, so the version field is what the writer wrote.
    if header.version != FORMAT_VERSION {
        return Err(DecodeReason::UnsupportedVersion(header.version));
    }
    let len = header.record_len();
    let padding = rest.get(end..len as usize).ok_or(DecodeReason::Truncated)?;
    if padding.iter().any(|&b| b != 0) {
        return Err(DecodeReason::NonZeroPadding);
    }
    Ok(Frame {
        header,
        payload: &rest[HEADER_LEN..end],
        len,
    })
}

/// Whether a record with a matching checksum starts at `offset` (version, padding and
/// payload are not checked). Used to tell a torn last append from damage in the middle.
pub(crate) fn has_valid_checksum(bytes: &[u8], offset: usize) -> bool {
    let Some(rest) = bytes.get(offset..) else {
        return false;
    };
    let Some(header) = RecordHeader::parse(rest) else {
        return false;
    };
    if header.payload_len > MAX_RECORD_PAYLOAD {
        return false;
    }
    rest.get(8..HEADER_LEN + header.payload_len as usize)
        .is_some_and(|covered| checksum(Domain::ManifestRecord, covered) == header.checksum)
}

/// Decodes the record starting at byte `offset` of `bytes` (normally a block boundary of a
/// manifest file read whole; `offset` 0 for an archive file).
///
/// The whole padded record must be present. Errors carry `offset`.
pub fn decode_record(bytes: &[u8], offset: u64) -> Result<Record, DecodeError> {
    decode_record_with(bytes, offset, ext::is_known)
}

pub(crate) fn decode_record_with(
    bytes: &[u8],
    offset: u64,
    known: Known,
) -> Result<Record, DecodeError> {
    let f = frame(bytes, offset).map_err(|r| DecodeError::new(offset, r))?;
    decode_payload(&f, known).map_err(|r| DecodeError::new(offset, r))
}

/// Decodes a framed record's payload.
pub(crate) fn decode_payload(f: &Frame<'_>, known: Known) -> Result<Record, DecodeReason> {
    let mut r = Reader::new(f.payload);
    let record = match r.u8()? {
        1 => Record::Snapshot(decode_snapshot(&mut r, &f.header, known)?),
        2 => Record::Log(decode_log(&mut r, &f.header, known)?),
        k => return Err(DecodeReason::UnknownRecordKind(k)),
    };
    r.finish()?;
    Ok(record)
}

fn decode_snapshot(
    r: &mut Reader<'_>,
    h: &RecordHeader,
    known: Known,
) -> Result<Snapshot, DecodeReason> {
    let branch = get_branch(r)?;
    let term = r.varint()?;
    let max_file_id = r.varint()?;
    let page_size = r.varint()?;
    let page_size = u32::try_from(page_size)
        .ok()
        .filter(|p| p.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(p))
        .ok_or(DecodeReason::InvalidPageSize(page_size))?;
    let dict_len = r.varint()?;
    if dict_len > MAX_DICT_LEN as u64 {
        return Err(DecodeReason::DictTooLarge(dict_len));
    }
    let dict = r.bytes(dict_len)?.to_vec();
    let branch_file_ranges = get_ranges(r, max_file_id)?;
    let mapping_root = get_addr(r)?;
    let next_page_id = get_next_page_id(r)?;
    let free_head = get_free_head(r, next_page_id)?;
    let overlay = get_mapping(r, next_page_id)?;
    let extensions = get_extensions(r, known)?;
    if known(crate::ext::VERSION) {
        crate::version::commit_version(&extensions).map_err(|e| {
            DecodeReason::InvalidExtension {
                tag: crate::ext::VERSION,
                reason: Box::new(e),
            }
        })?;
    }
    check_root(h.root, next_page_id)?;
    check_root(h.ttl_root, next_page_id)?;
    Ok(Snapshot {
        meta: ManifestMetadata {
            branch,
            term,
            root: h.root,
            ttl_root: h.ttl_root,
            branch_file_ranges,
        },
        max_file_id,
        page_size,
        dict,
        mapping_root,
        next_page_id,
        free_head,
        overlay,
        extensions,
    })
}

fn decode_log(
    r: &mut Reader<'_>,
    h: &RecordHeader,
    known: Known,
) -> Result<LogRecord, DecodeReason> {
    let seq = r.varint()?;
    if seq == 0 {
        return Err(DecodeReason::InvalidSeq);
    }
    let max_file_id = r.varint()?;
    let branch_file_ranges = get_ranges(r, max_file_id)?;
    let checkpoint = match r.u8()? {
        0 => None,
        1 => Some(get_addr(r)?),
        flag => return Err(DecodeReason::InvalidCheckpointFlag(flag)),
    };
    let next_page_id = get_next_page_id(r)?;
    let free_head = get_free_head(r, next_page_id)?;
    let changes = get_mapping(r, next_page_id)?;
    let extensions = get_extensions(r, known)?;
    if known(crate::ext::VERSION) && ext::get(&extensions, crate::ext::VERSION).is_some() {
        return Err(DecodeReason::MisplacedExtension(crate::ext::VERSION));
    }
    check_root(h.root, next_page_id)?;
    check_root(h.ttl_root, next_page_id)?;
    Ok(LogRecord {
        seq,
        root: h.root,
        ttl_root: h.ttl_root,
        max_file_id,
        branch_file_ranges,
        checkpoint,
        next_page_id,
        free_head,
        changes,
        extensions,
    })
}

pub(crate) fn get_branch(r: &mut Reader<'_>) -> Result<BranchName, DecodeReason> {
    let len = r.u8()?;
    if len == 0 || usize::from(len) > MAX_BRANCH_LEN {
        return Err(DecodeReason::InvalidBranchName);
    }
    let bytes = r.bytes(u64::from(len))?;
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| BranchName::new(s).ok())
        .ok_or(DecodeReason::InvalidBranchName)
}

fn get_ranges(r: &mut Reader<'_>, max_file_id: FileId) -> Result<BranchFileMapping, DecodeReason> {
    // Smallest entry: name length, one name byte, term varint, incarnation (8 bytes),
    // max_file_id varint.
    let count = r.count(12)?;
    let mut ranges = Vec::with_capacity(count);
    for _ in 0..count {
        let branch = get_branch(r)?;
        let term = r.varint()?;
        let incarnation = le_u64(r.bytes(8)?, 0);
        let max = r.varint()?;
        ranges.push(BranchFileRange {
            branch,
            term,
            incarnation,
            max_file_id: max,
        });
    }
    let ranges =
        BranchFileMapping::from_ranges(ranges).map_err(|_| DecodeReason::RangesNotSorted)?;
    match ranges.max_file_id() {
        Some(range_max) if range_max > max_file_id => Err(DecodeReason::RangesExceedMaxFileId {
            range_max,
            max_file_id,
        }),
        _ => Ok(ranges),
    }
}

fn get_addr(r: &mut Reader<'_>) -> Result<PageAddr, DecodeReason> {
    let v = r.varint()?;
    PageAddr::from_u64(v).ok_or(DecodeReason::InvalidPageAddr(v))
}

fn get_next_page_id(r: &mut Reader<'_>) -> Result<PageId, DecodeReason> {
    let v = r.varint()?;
    PageId::try_from(v).map_err(|_| DecodeReason::PageIdOutOfRange(v))
}

fn get_free_head(r: &mut Reader<'_>, next_page_id: PageId) -> Result<Option<PageId>, DecodeReason> {
    match r.varint()? {
        0 => Ok(None),
        v if v - 1 < u64::from(next_page_id) => Ok(Some((v - 1) as PageId)),
        v => Err(DecodeReason::PageIdOutOfRange(v - 1)),
    }
}

fn get_mapping(
    r: &mut Reader<'_>,
    next_page_id: PageId,
) -> Result<Vec<(PageId, u64)>, DecodeReason> {
    // Smallest entry: two one-byte varints.
    let count = r.count(2)?;
    let mut entries = Vec::with_capacity(count);
    let mut prev: Option<u64> = None;
    for _ in 0..count {
        let delta = r.varint()?;
        let id = match prev {
            None => delta,
            Some(_) if delta == 0 => return Err(DecodeReason::PageIdsNotSorted),
            Some(p) => p.saturating_add(delta),
        };
        if id >= u64::from(next_page_id) {
            return Err(DecodeReason::PageIdOutOfRange(id));
        }
        let addr = r.varint()?;
        if !crate::page::slot_is_valid(addr) {
            return Err(DecodeReason::InvalidPageAddr(addr));
        }
        // id < next_page_id <= u32::MAX, so the cast is lossless.
        entries.push((id as PageId, addr));
        prev = Some(id);
    }
    Ok(entries)
}

fn get_extensions(r: &mut Reader<'_>, known: Known) -> Result<Extensions, DecodeReason> {
    // Smallest entry: tag and length varints.
    let count = r.count(2)?;
    let mut exts = Extensions::with_capacity(count);
    let mut prev: Option<u64> = None;
    for _ in 0..count {
        let tag = r.varint()?;
        if prev.is_some_and(|p| tag <= p) {
            return Err(DecodeReason::ExtensionsNotSorted);
        }
        prev = Some(tag);
        let len = r.varint()?;
        let bytes = r.bytes(len)?;
        if known(tag) {
            exts.push((tag, bytes.to_vec()));
        } else if ext::is_mandatory(tag) {
            return Err(DecodeReason::UnknownMandatoryExtension(tag));
        }
        // Unknown even tags are optional: skipped, and not carried forward.
    }
    Ok(exts)
}

fn check_root(root: PageId, next_page_id: PageId) -> Result<(), DecodeReason> {
    if root != NO_PAGE && root >= next_page_id {
        return Err(DecodeReason::PageIdOutOfRange(u64::from(root)));
    }
    Ok(())
}

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
