//! Fixtures shared by the integration tests.
#![allow(dead_code)] // each test binary uses a different subset

use bough_manifest::checksum::{Domain, checksum};
use bough_manifest::{
    BranchFileMapping, BranchFileRange, BranchName, HEADER_LEN, LogRecord, ManifestMetadata,
    PageAddr, Snapshot,
};

pub fn name(s: &str) -> BranchName {
    BranchName::new(s).expect("valid branch name")
}

pub fn addr(file_id: u64, page_index: u32) -> PageAddr {
    PageAddr::new(file_id, page_index).expect("valid address")
}

pub fn ranges(entries: &[(&str, u64, u64)]) -> BranchFileMapping {
    BranchFileMapping::from_ranges(
        entries
            .iter()
            .map(|&(b, term, max_file_id)| BranchFileRange {
                branch: name(b),
                term,
                incarnation: if b == "feature" {
                    FEATURE_INCARNATION
                } else {
                    MAIN_INCARNATION
                },
                max_file_id,
            })
            .collect(),
    )
    .expect("sorted ranges")
}

/// The incarnation ids the fixtures' `main` and `feature` ranges carry.
pub const MAIN_INCARNATION: u64 = 0x1111_2222_3333_4444;
/// See [`MAIN_INCARNATION`].
pub const FEATURE_INCARNATION: u64 = 0xaaaa_bbbb_cccc_dddd;

/// A branch `feature` at term 2, forked from `main`.
pub fn sample_snapshot() -> Snapshot {
    Snapshot {
        meta: ManifestMetadata {
            branch: name("feature"),
            term: 2,
            root: 7,
            ttl_root: 300,
            branch_file_ranges: ranges(&[("main", 3, 10), ("feature", 1, 12)]),
        },
        max_file_id: 12,
        page_size: 4096,
        dict: vec![],
        mapping_root: addr(4, 2),
        next_page_id: 400,
        free_head: Some(5),
        overlay: vec![
            (0, addr(12, 1).to_u64()),
            (7, addr(12, 2).to_u64()),
            (300, 0),
            (301, bough_manifest::FREE_SLOT_BIT | 6),
        ],
        extensions: vec![],
    }
}

/// Log record `seq` following [`sample_snapshot`]: allocates file 12 + seq, maps page 100 +
/// seq there and moves the root; every third record checkpoints the mapping.
pub fn sample_log(seq: u64) -> LogRecord {
    let file = 12 + seq;
    let mut ranges = sample_snapshot().meta.branch_file_ranges;
    ranges
        .extend_own(&name("feature"), 2, FEATURE_INCARNATION, file)
        .expect("grows");
    LogRecord {
        seq,
        root: 100 + seq as u32,
        ttl_root: 300,
        max_file_id: file,
        branch_file_ranges: ranges,
        checkpoint: seq.is_multiple_of(3).then(|| addr(file, 9)),
        next_page_id: 400 + seq as u32,
        free_head: None,
        changes: vec![
            (100 + seq as u32, addr(file, 1).to_u64()),
            (399 + seq as u32, addr(file, 2).to_u64()),
        ],
        extensions: vec![],
    }
}

/// Offset-annotated hex dump of the record's header and payload (padding left out), plus
/// the total length including padding.
pub fn hex_record(bytes: &[u8]) -> String {
    let payload_len = u32::from_le_bytes(bytes[20..24].try_into().expect("4 bytes")) as usize;
    hex_dump(&bytes[..HEADER_LEN + payload_len], bytes.len())
}

pub fn hex_dump(bytes: &[u8], total_len: usize) -> String {
    let mut out = String::new();
    for (i, line) in bytes.chunks(16).enumerate() {
        let hex: Vec<String> = line.iter().map(|b| format!("{b:02x}")).collect();
        out.push_str(&format!("{:04x}: {}\n", i * 16, hex.join(" ")));
    }
    out.push_str(&format!("total length: {total_len}\n"));
    out
}

/// Recomputes the checksum of the record at `offset` after a test edited it, so that the
/// edit reaches the checks behind the checksum.
pub fn reseal(file: &mut [u8], offset: usize) {
    let rec = &mut file[offset..];
    let payload_len = u32::from_le_bytes(rec[20..24].try_into().expect("4 bytes")) as usize;
    let end = (HEADER_LEN + payload_len).min(rec.len());
    let sum = checksum(Domain::ManifestRecord, &rec[8..end]);
    rec[..8].copy_from_slice(&sum.to_le_bytes());
}
