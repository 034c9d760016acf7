//! Data-file header and page frames: untrusted bytes never panic the decoders, whatever
//! decodes re-encodes to the same bytes, and a sealed page opens to exactly what was
//! sealed — and to nothing after a bit flip or at another address.
//!
//! As with the manifest target, random bytes rarely carry a matching checksum, so the input
//! is also laid into a page with a correct checksum to reach the field checks behind it.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use bough_io::layout::{DATA_FILE_MAGIC, FRAME_HEADER_LEN};
use bough_io::{DataFileHeader, FileSalt, open_page, seal_page};
use bough_manifest::checksum::{Checksum, Domain, checksum};
use libfuzzer_sys::fuzz_target;

const PATH: &str = "fuzz/data_1_main_1";

fuzz_target!(|data: &[u8]| {
    check_header(data);
    check_header(&checksummed_header(data));
    if let Ok(input) = Input::arbitrary(&mut Unstructured::new(data)) {
        check_raw_page(&input);
        check_seal(&input);
    }
});

/// Decoding a header either fails or yields one that encodes to the same page.
fn check_header(bytes: &[u8]) {
    let peeked = DataFileHeader::peek_page_size(bytes, PATH);
    let Ok(header) = DataFileHeader::decode(bytes, PATH) else {
        return;
    };
    assert_eq!(peeked.ok(), Some(header.page_size));
    let page = header.encode();
    assert_eq!(page.len(), header.page_size as usize);
    assert_eq!(
        &page[..],
        &bytes[..page.len()],
        "header decoding is not canonical"
    );
    assert_eq!(DataFileHeader::decode(&page, PATH).ok(), Some(header));
}

/// `data` laid out as a header page (magic and a page size forced so decoding gets past
/// them, the rest as given) with a correct checksum.
fn checksummed_header(data: &[u8]) -> Vec<u8> {
    let page_size = 4096usize << (data.first().copied().unwrap_or(0) % 5);
    let mut page = vec![0u8; page_size];
    let n = data.len().min(page_size);
    page[..n].copy_from_slice(&data[..n]);
    page[12..16].copy_from_slice(&DATA_FILE_MAGIC);
    page[16..20].copy_from_slice(&(page_size as u32).to_le_bytes());
    // Short inputs leave a zero-padded header; longer ones exercise the padding check.
    let sum = checksum(Domain::DataFileHeader, &page[8..]);
    page[..8].copy_from_slice(&sum.to_le_bytes());
    page
}

#[derive(Debug, Arbitrary)]
struct Input {
    page_size_log: u8,
    page_index: u32,
    page_type: u8,
    salt: u64,
    payload: Vec<u8>,
    /// Raw frame header bytes for the checksummed-frame check.
    frame: [u8; FRAME_HEADER_LEN],
    flip_at: u32,
    flip_bit: u8,
}

impl Input {
    fn page_size(&self) -> usize {
        4096 << (self.page_size_log % 5)
    }

    fn page_index(&self) -> u32 {
        self.page_index.max(1)
    }
}

/// The frame checksum as the format defines it: over the salt, the page index and every
/// byte after the checksum field.
fn frame_checksum(page: &[u8], salt: FileSalt, page_index: u32) -> u64 {
    Checksum::new(Domain::Page)
        .update(&salt.get().to_le_bytes())
        .update(&page_index.to_le_bytes())
        .update(&page[8..])
        .finish()
}

/// A page whose frame header is the input's (with a correct checksum): opening it must
/// not panic, and what opens must reseal to the same page.
fn check_raw_page(input: &Input) {
    let salt = FileSalt::from_raw(input.salt);
    let index = input.page_index();
    let mut page = vec![0u8; input.page_size()];
    page[..FRAME_HEADER_LEN].copy_from_slice(&input.frame);
    let room = page.len() - FRAME_HEADER_LEN;
    let n = input.payload.len().min(room);
    page[FRAME_HEADER_LEN..FRAME_HEADER_LEN + n].copy_from_slice(&input.payload[..n]);
    let sum = frame_checksum(&page, salt, index);
    page[..8].copy_from_slice(&sum.to_le_bytes());

    let Ok((page_type, payload)) = open_page(&page, salt, index, PATH, 0) else {
        return;
    };
    assert_ne!(page_type, 0);
    let stored_len = u32::from_le_bytes(page[12..16].try_into().expect("4 bytes")) as usize;
    assert_eq!(payload.len(), stored_len);
    let mut resealed = page.clone();
    seal_page(&mut resealed, salt, index, page_type, payload.len())
        .expect("an opened page reseals");
    let tail_zero = page[FRAME_HEADER_LEN + payload.len()..]
        .iter()
        .all(|&b| b == 0);
    if tail_zero {
        assert_eq!(resealed, page, "sealing an opened page changed it");
    }
    let (t2, p2) = open_page(&resealed, salt, index, PATH, 0).expect("a resealed page opens");
    assert_eq!((t2, p2), (page_type, payload));
}

/// Seal → open is the identity; any bit flip, another index or another salt fails.
fn check_seal(input: &Input) {
    let salt = FileSalt::from_raw(input.salt);
    let index = input.page_index();
    let mut page = vec![0x5Au8; input.page_size()];
    let payload_len = input.payload.len().min(page.len() - FRAME_HEADER_LEN);
    page[FRAME_HEADER_LEN..FRAME_HEADER_LEN + payload_len]
        .copy_from_slice(&input.payload[..payload_len]);

    let sealed = seal_page(&mut page, salt, index, input.page_type, payload_len);
    if input.page_type == 0 {
        assert!(sealed.is_err(), "page type 0 must be refused");
        return;
    }
    sealed.expect("a valid page seals");
    let (page_type, payload) = open_page(&page, salt, index, PATH, 0).expect("a sealed page opens");
    assert_eq!(page_type, input.page_type);
    assert_eq!(payload, &input.payload[..payload_len]);

    let other_index = if index == u32::MAX { 1 } else { index + 1 };
    assert!(
        open_page(&page, salt, other_index, PATH, 0).is_err(),
        "opened at another index"
    );
    let other_salt = FileSalt::from_raw(input.salt ^ 1);
    assert!(
        open_page(&page, other_salt, index, PATH, 0).is_err(),
        "opened with another salt"
    );

    let at = input.flip_at as usize % page.len();
    page[at] ^= 1 << (input.flip_bit % 8);
    assert!(
        open_page(&page, salt, index, PATH, 0).is_err(),
        "bit flip at {at} went unnoticed"
    );
}
