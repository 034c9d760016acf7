//! Golden bytes and properties of the data-file header and the page frame.

use std::fmt::Write as _;

use bough_io::layout::{self, DataFileHeader, FileSalt, max_payload, open_page, seal_page};
use bough_io::{ErrorKind, FRAME_HEADER_LEN, MemoryStorage, OpenOptions, Storage};
use bough_names::BranchName;
use proptest::prelude::*;

/// Hex dump of the non-zero prefix, with the total length.
fn dump(bytes: &[u8]) -> String {
    let end = bytes.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    let mut out = format!("length {}, non-zero prefix {end} bytes\n", bytes.len());
    for (i, chunk) in bytes[..end].chunks(16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        let _ = writeln!(out, "{:04x}: {}", i * 16, hex.join(" "));
    }
    out
}

fn branch(s: &str) -> BranchName {
    BranchName::new(s).expect("valid branch")
}

#[test]
fn golden_data_file_header() {
    let h = DataFileHeader::new(
        4096,
        7,
        branch("feature-x"),
        3,
        0x0bad_cafe_f00d_d00d,
        1_700_000_000_123,
    );
    let bytes = h.encode();
    insta::assert_snapshot!("data_file_header", dump(&bytes));
    assert_eq!(DataFileHeader::decode(&bytes, "golden").expect("decode"), h);
}

#[test]
fn golden_page_frame() {
    let salt = FileSalt::from_raw(0x0123_4567_89ab_cdef);
    let mut page = vec![0u8; 4096];
    let payload = b"bough page payload";
    page[FRAME_HEADER_LEN..FRAME_HEADER_LEN + payload.len()].copy_from_slice(payload);
    seal_page(&mut page, salt, 5, 2, payload.len()).expect("seal");
    insta::assert_snapshot!("page_frame", dump(&page));
    let (ty, got) = open_page(&page, salt, 5, "golden", 5 * 4096).expect("open");
    assert_eq!((ty, got), (2, &payload[..]));
}

#[test]
fn golden_file_salt() {
    let salt = FileSalt::new(7, &branch("feature-x"), 3, 0x0bad_cafe_f00d_d00d);
    insta::assert_snapshot!("file_salt", format!("{:#018x}", salt.get()));
    // Another incarnation of the same name, term and file id: another salt.
    assert_ne!(salt, FileSalt::new(7, &branch("feature-x"), 3, 1));
}

#[test]
fn header_read_from_a_file() {
    let s = MemoryStorage::new();
    let h = DataFileHeader::new(16384, 9, BranchName::main(), 1, 77, 5);
    let f = s
        .open("data_9_main_1", OpenOptions::write_new(0))
        .expect("create");
    f.write_at(0, &h.encode()).expect("write");
    assert_eq!(DataFileHeader::read_from(&*f).expect("read"), h);
    f.set_len(8192).expect("truncate");
    let e = DataFileHeader::read_from(&*f).expect_err("truncated header");
    assert_eq!(e.kind(), ErrorKind::Corruption);
    f.set_len(100).expect("truncate");
    let e = DataFileHeader::read_from(&*f).expect_err("tiny file");
    assert_eq!(e.kind(), ErrorKind::Corruption);
}

#[test]
fn corruption_names_path_and_offset() {
    let salt = FileSalt::from_raw(1);
    let mut page = vec![0u8; 4096];
    seal_page(&mut page, salt, 3, 1, 0).expect("seal");
    page[100] ^= 1;
    match open_page(&page, salt, 3, "p.0/data_1_main_0", 3 * 4096) {
        Err(bough_io::IoError::Corruption { path, offset, .. }) => {
            assert_eq!(path, "p.0/data_1_main_0");
            assert_eq!(offset, 3 * 4096);
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

fn branch_strategy() -> impl Strategy<Value = BranchName> {
    "[a-zA-Z][a-zA-Z0-9-]{0,30}(_[a-z][a-z0-9]{0,8}){0,3}"
        .prop_filter_map("valid branch", |s| BranchName::new(&s).ok())
}

fn header_strategy() -> impl Strategy<Value = DataFileHeader> {
    (
        prop::sample::select(vec![4096u32, 8192, 16384]),
        any::<u64>(),
        branch_strategy(),
        any::<u64>(),
        any::<u64>(),
        any::<u64>(),
    )
        .prop_map(|(ps, id, b, term, inc, ts)| DataFileHeader::new(ps, id, b, term, inc, ts))
}

/// A sealed 4096-byte page with a random payload.
fn page_strategy() -> impl Strategy<Value = (Vec<u8>, u64, u32, u8, usize)> {
    (
        prop::collection::vec(any::<u8>(), 0..=max_payload(4096)),
        any::<u64>(),
        1u32..,
        1u8..,
    )
        .prop_map(|(payload, salt, index, ty)| {
            let mut page = vec![0xEEu8; 4096];
            page[FRAME_HEADER_LEN..FRAME_HEADER_LEN + payload.len()].copy_from_slice(&payload);
            let len = payload.len();
            seal_page(&mut page, FileSalt::from_raw(salt), index, ty, len).expect("seal");
            (page, salt, index, ty, len)
        })
}

proptest! {
    #[test]
    fn header_round_trips(h in header_strategy()) {
        let bytes = h.encode();
        prop_assert_eq!(bytes.len(), h.page_size as usize);
        prop_assert_eq!(DataFileHeader::decode(&bytes, "f").expect("decode"), h);
    }

    #[test]
    fn any_header_bit_flip_is_detected(h in header_strategy(), bit in any::<prop::sample::Index>()) {
        let mut bytes = h.encode();
        let bit = bit.index(bytes.len() * 8);
        bytes[bit / 8] ^= 1 << (bit % 8);
        let e = DataFileHeader::decode(&bytes, "f").expect_err("flip must be detected");
        prop_assert_eq!(e.kind(), ErrorKind::Corruption);
    }

    #[test]
    fn page_round_trips((page, salt, index, ty, len) in page_strategy()) {
        let (t, payload) = open_page(&page, FileSalt::from_raw(salt), index, "f", 0).expect("open");
        prop_assert_eq!(t, ty);
        prop_assert_eq!(payload, &page[FRAME_HEADER_LEN..FRAME_HEADER_LEN + len]);
        prop_assert!(page[FRAME_HEADER_LEN + len..].iter().all(|&b| b == 0));
    }

    #[test]
    fn any_page_bit_flip_is_detected(
        (mut page, salt, index, _ty, _len) in page_strategy(),
        bit in any::<prop::sample::Index>(),
    ) {
        let bit = bit.index(page.len() * 8);
        page[bit / 8] ^= 1 << (bit % 8);
        let e = open_page(&page, FileSalt::from_raw(salt), index, "f", 0).expect_err("flip");
        prop_assert_eq!(e.kind(), ErrorKind::Corruption);
    }

    #[test]
    fn a_page_at_the_wrong_address_fails(
        (page, salt, index, _ty, _len) in page_strategy(),
        other_salt in any::<u64>(),
        other_index in 1u32..,
    ) {
        prop_assume!(other_salt != salt && other_index != index);
        prop_assert!(open_page(&page, FileSalt::from_raw(salt), other_index, "f", 0).is_err());
        prop_assert!(open_page(&page, FileSalt::from_raw(other_salt), index, "f", 0).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..9000), index in 0u32..4) {
        let _ = open_page(&bytes, FileSalt::from_raw(7), index, "f", 0);
        let _ = DataFileHeader::decode(&bytes, "f");
        let _ = DataFileHeader::peek_page_size(&bytes, "f");
    }

    /// Random pages and headers that pass the checksum, to reach the checks behind it.
    #[test]
    fn arbitrary_checksummed_bytes_never_panic(mut bytes in prop::collection::vec(any::<u8>(), 4096)) {
        // As a page: store the right checksum, then open.
        let salt = FileSalt::from_raw(9);
        let ty = bytes[8].max(1);
        let len = u32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]) as usize;
        let mut page = bytes.clone();
        if seal_page(&mut page, salt, 1, ty, len % 5000).is_ok() {
            // Then scribble over the frame header fields and fix the checksum by hand.
            page[8..16].copy_from_slice(&bytes[8..16]);
            let sum = bough_manifest::checksum::Checksum::new(bough_manifest::checksum::Domain::Page)
                .update(&9u64.to_le_bytes())
                .update(&1u32.to_le_bytes())
                .update(&page[8..])
                .finish();
            page[..8].copy_from_slice(&sum.to_le_bytes());
            if let Ok((_, payload)) = open_page(&page, salt, 1, "f", 0) {
                prop_assert!(payload.len() <= max_payload(4096));
            }
        }
        // As a header: valid magic and page size, right checksum, random fields.
        bytes[12..16].copy_from_slice(b"BGDF");
        bytes[16..20].copy_from_slice(&4096u32.to_le_bytes());
        let sum = bough_manifest::checksum::checksum(
            bough_manifest::checksum::Domain::DataFileHeader,
            &bytes[8..],
        );
        bytes[..8].copy_from_slice(&sum.to_le_bytes());
        let _ = DataFileHeader::decode(&bytes, "f");
    }
}

#[test]
fn page_sizes_and_offsets() {
    assert!(layout::validate_page_size(layout::MIN_PAGE_SIZE).is_ok());
    assert!(layout::validate_page_size(layout::MAX_PAGE_SIZE).is_ok());
    assert!(layout::validate_page_size(0).is_err());
    assert_eq!(
        layout::page_offset(u32::MAX, 65536),
        u64::from(u32::MAX) * 65536
    );
}
