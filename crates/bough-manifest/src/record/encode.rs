//! Encoding manifest records: snapshot and log payloads, framed, checksummed and padded to
//! whole blocks; every check the decoder makes is made before bytes are written.

use super::*;

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

    let bytes = build_record(m.root, m.ttl_root, |out| {
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
    })?;
    // Debug builds prove every record they write decodes to what was encoded.
    debug_assert_eq!(
        decode_record_with(&bytes, 0, known).ok(),
        Some(Record::Snapshot(s.clone())),
        "a snapshot record does not decode to itself"
    );
    Ok(bytes)
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

    let bytes = build_record(l.root, l.ttl_root, |out| {
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
    })?;
    debug_assert_eq!(
        decode_record_with(&bytes, 0, known).ok(),
        Some(Record::Log(l.clone())),
        "a log record does not decode to itself"
    );
    Ok(bytes)
}

/// Writes the payload after a placeholder header, then fills in the header and checksum
/// and pads to whole blocks.
pub(crate) fn build_record(
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
    put_at(&mut out, 0, &header.encode());
    header.checksum = checksum(Domain::ManifestRecord, out.get(8..).unwrap_or_default());
    put_at(&mut out, 0, &header.checksum.to_le_bytes());
    // record_len(len32) <= 24 + 64 MiB + 4095, which fits any usize this crate runs on.
    out.resize(record_len(len32) as usize, 0);
    Ok(out)
}

pub(crate) fn check_ranges(
    ranges: &BranchFileMapping,
    max_file_id: FileId,
) -> Result<(), EncodeError> {
    // BranchFileMapping keeps itself sorted; only the bound against max_file_id is left.
    match ranges.max_file_id() {
        Some(top) if top > max_file_id => Err(EncodeError::RangesExceedMaxFileId),
        _ => Ok(()),
    }
}

pub(crate) fn check_ids(
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
    if !mapping.is_sorted_by(|a, b| a.0 < b.0) {
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

pub(crate) fn check_extensions(exts: &[(u64, Vec<u8>)], known: Known) -> Result<(), EncodeError> {
    if !exts.is_sorted_by(|a, b| a.0 < b.0) {
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

pub(crate) fn put_ranges(out: &mut Vec<u8>, ranges: &BranchFileMapping) {
    put_varint(out, ranges.len() as u64);
    for r in ranges {
        put_branch(out, &r.branch);
        put_varint(out, r.term);
        out.extend_from_slice(&r.incarnation.to_le_bytes());
        put_varint(out, r.max_file_id);
    }
}

pub(crate) fn put_free_head(out: &mut Vec<u8>, free_head: Option<PageId>) {
    // 0 means "no free id", so a present id is stored plus one.
    put_varint(out, free_head.map_or(0, |id| u64::from(id) + 1));
}

pub(crate) fn put_mapping(out: &mut Vec<u8>, entries: &[(PageId, u64)]) {
    put_varint(out, entries.len() as u64);
    let mut prev = 0;
    for &(id, addr) in entries {
        // Ids are strictly increasing (checked), so deltas are small and non-negative.
        put_varint(out, u64::from(id - prev));
        put_varint(out, addr);
        prev = id;
    }
}

pub(crate) fn put_extensions(out: &mut Vec<u8>, exts: &[(u64, Vec<u8>)]) {
    put_varint(out, exts.len() as u64);
    for (tag, bytes) in exts {
        put_varint(out, *tag);
        put_bytes(out, bytes);
    }
}
