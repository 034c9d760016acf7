//! Decoding manifest records: framing (checksum, version, padding) first, then payloads, every
//! length and id checked against its bound before it is used.

use super::*;

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
        payload: rest.get(HEADER_LEN..end).ok_or(DecodeReason::Truncated)?,
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

pub(crate) fn decode_snapshot(
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

pub(crate) fn decode_log(
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

pub(crate) fn get_ranges(
    r: &mut Reader<'_>,
    max_file_id: FileId,
) -> Result<BranchFileMapping, DecodeReason> {
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

pub(crate) fn get_addr(r: &mut Reader<'_>) -> Result<PageAddr, DecodeReason> {
    let v = r.varint()?;
    PageAddr::from_u64(v).ok_or(DecodeReason::InvalidPageAddr(v))
}

pub(crate) fn get_next_page_id(r: &mut Reader<'_>) -> Result<PageId, DecodeReason> {
    let v = r.varint()?;
    PageId::try_from(v).map_err(|_| DecodeReason::PageIdOutOfRange(v))
}

pub(crate) fn get_free_head(
    r: &mut Reader<'_>,
    next_page_id: PageId,
) -> Result<Option<PageId>, DecodeReason> {
    match r.varint()? {
        0 => Ok(None),
        v if v - 1 < u64::from(next_page_id) => Ok(Some((v - 1) as PageId)),
        v => Err(DecodeReason::PageIdOutOfRange(v - 1)),
    }
}

pub(crate) fn get_mapping(
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

pub(crate) fn get_extensions(r: &mut Reader<'_>, known: Known) -> Result<Extensions, DecodeReason> {
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

pub(crate) fn check_root(root: PageId, next_page_id: PageId) -> Result<(), DecodeReason> {
    if root != NO_PAGE && root >= next_page_id {
        return Err(DecodeReason::PageIdOutOfRange(u64::from(root)));
    }
    Ok(())
}
