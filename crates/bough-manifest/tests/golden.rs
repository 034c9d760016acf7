//! Golden bytes: any change to these dumps is a format change (bump the version or add an
//! extension instead).

mod common;

use bough_manifest::{
    CurrentTerm, FORMAT_VERSION, NO_PAGE, RecordHeader, encode_log, encode_snapshot,
    encode_version, set_commit_version,
};
use common::{hex_dump, hex_record, sample_log, sample_snapshot};

#[test]
fn record_header() {
    let header = RecordHeader {
        checksum: 0x0123_4567_89ab_cdef,
        version: FORMAT_VERSION,
        root: 7,
        ttl_root: NO_PAGE,
        payload_len: 0x0102,
    };
    let bytes = header.encode();
    assert_eq!(RecordHeader::parse(&bytes), Some(header));
    insta::assert_snapshot!(hex_dump(&bytes, bytes.len()));
}

#[test]
fn snapshot_record() {
    let bytes = encode_snapshot(&sample_snapshot()).expect("encodes");
    insta::assert_snapshot!(hex_record(&bytes));
}

/// The sample snapshot carrying commit version 300 (`VERSION`, tag 5): the same bytes as
/// [`snapshot_record`] up to the extension list, which is `01 05 02 ac 02` (one extension,
/// tag 5, 2 bytes, varint 300) instead of `00`.
#[test]
fn snapshot_record_with_version() {
    let mut s = sample_snapshot();
    set_commit_version(&mut s.extensions, 300);
    insta::assert_snapshot!(hex_record(&encode_snapshot(&s).expect("encodes")));
}

/// The sample snapshot marked as a staging branch (`STAGING`, tag 6): the extension list
/// `00` becomes `01 06 19` and the 25 bytes of `import into orders.0@main`.
#[test]
fn snapshot_record_with_staging() {
    let mut s = sample_snapshot();
    bough_manifest::set_staging(&mut s.extensions, "import into orders.0@main");
    insta::assert_snapshot!(hex_record(&encode_snapshot(&s).expect("encodes")));
}

/// The sample snapshot of a protected branch that expires at 1 700 000 000 000 ms
/// (`POLICY`, tag 11): the extension list `00` becomes `01 0b 07 03` then the varint
/// `80 d0 95 ff bc 31` (one extension, tag 11, 7 bytes: flags 3 = protected | expires).
#[test]
fn snapshot_record_with_policy() {
    let mut s = sample_snapshot();
    bough_manifest::BranchPolicy {
        protected: true,
        expires_at_ms: Some(1_700_000_000_000),
    }
    .store(&mut s.extensions);
    insta::assert_snapshot!(hex_record(&encode_snapshot(&s).expect("encodes")));
}

/// The `POLICY` payload alone: flags, then the expiry when bit 1 is set.
#[test]
fn policy_extension_payload() {
    let mut out = String::new();
    for (protected, expires_at_ms) in [
        (false, None),
        (true, None),
        (false, Some(300)),
        (true, Some(300)),
    ] {
        let bytes = bough_manifest::BranchPolicy {
            protected,
            expires_at_ms,
        }
        .encode();
        out.push_str(&format!(
            "{protected} {expires_at_ms:?}: {}",
            hex_dump(&bytes, bytes.len())
        ));
    }
    insta::assert_snapshot!(out);
}

/// The `VERSION` payload alone: one canonical LEB128 varint.
#[test]
fn version_extension_payload() {
    let mut out = String::new();
    for v in [0u64, 127, 128, 300, u64::MAX] {
        let bytes = encode_version(v);
        out.push_str(&format!("{v}: {}", hex_dump(&bytes, bytes.len())));
    }
    insta::assert_snapshot!(out);
}

#[test]
fn log_record_without_checkpoint() {
    let log = sample_log(1);
    assert_eq!(log.checkpoint, None);
    insta::assert_snapshot!(hex_record(&encode_log(&log).expect("encodes")));
}

#[test]
fn log_record_with_checkpoint() {
    let log = sample_log(3);
    assert!(log.checkpoint.is_some());
    insta::assert_snapshot!(hex_record(&encode_log(&log).expect("encodes")));
}

#[test]
fn current_term_live() {
    let bytes = CurrentTerm {
        term: 5,
        deleted: false,
        first_term: 0,
        incarnation: 0x0123_4567_89ab_cdef,
        expiry: bough_manifest::ExpiryHint::Unknown,
    }
    .encode();
    insta::assert_snapshot!(hex_dump(&bytes, bytes.len()));
}

#[test]
fn current_term_tombstone() {
    let bytes = CurrentTerm {
        term: 0x1_0000_0005,
        deleted: true,
        first_term: 0,
        incarnation: 0x0123_4567_89ab_cdef,
        expiry: bough_manifest::ExpiryHint::Unknown,
    }
    .encode();
    insta::assert_snapshot!(hex_dump(&bytes, bytes.len()));
}

/// A branch name reused after deletion: its incarnation began at term 3 (bytes 24..32).
#[test]
fn current_term_reused_name() {
    let bytes = CurrentTerm {
        term: 5,
        deleted: false,
        first_term: 3,
        incarnation: 0xfedc_ba98_7654_3210,
        expiry: bough_manifest::ExpiryHint::Unknown,
    }
    .encode();
    insta::assert_snapshot!(hex_dump(&bytes, bytes.len()));
}

/// A live branch whose manifest records an expiry: flag bit 1 and the instant (ms since the
/// epoch) in bytes 40..48. `u64::MAX` there would mean "never expires".
#[test]
fn current_term_with_expiry_hint() {
    let bytes = CurrentTerm {
        term: 5,
        deleted: false,
        first_term: 2,
        incarnation: 0x0123_4567_89ab_cdef,
        expiry: bough_manifest::ExpiryHint::NotBefore(1_796_428_800_000),
    }
    .encode();
    insta::assert_snapshot!(hex_dump(&bytes, bytes.len()));
}

/// The checksum is CRC-64/NVME over the domain tag followed by bytes `8 .. 24 + payload_len`;
/// checked here against the `crc` crate's independent table implementation.
#[test]
fn checksums_match_the_reference_crc() {
    let reference = crc::Crc::<u64>::new(&crc::CRC_64_NVME);
    let record = encode_snapshot(&sample_snapshot()).expect("encodes");
    let payload_len = u32::from_le_bytes(record[20..24].try_into().expect("4 bytes")) as usize;
    let covered = [&b"bough/manifest-record"[..], &record[8..24 + payload_len]].concat();
    assert_eq!(record[..8], reference.checksum(&covered).to_le_bytes());

    let term = CurrentTerm {
        term: 5,
        deleted: true,
        first_term: 2,
        incarnation: 9,
        expiry: bough_manifest::ExpiryHint::Unknown,
    }
    .encode();
    let covered = [&b"bough/current-term"[..], &term[8..]].concat();
    assert_eq!(term[..8], reference.checksum(&covered).to_le_bytes());
}

/// A `MERGE_BASES` payload (tag 3) with one base: the other branch `main` (`01`, `04`,
/// `main`), recorded at 77 ms (`4d`), then the embedded snapshot record's length and the
/// record — the sample snapshot, whose extension list carries only the `VERSION` of the
/// named branch at that state (300: `01 05 02 ac 02`), which the lineage rule compares.
#[test]
fn merge_bases_payload_with_version() {
    let mut state = sample_snapshot();
    set_commit_version(&mut state.extensions, 300);
    let bases = [bough_manifest::MergeBase {
        branch: bough_names::BranchName::main(),
        recorded_at_ms: 77,
        state,
    }];
    let bytes = bough_manifest::encode_merge_bases(&bases).expect("encodes");
    assert_eq!(
        bough_manifest::decode_merge_bases(&bytes).expect("decodes"),
        bases
    );
    insta::assert_snapshot!(hex_dump(&bytes, bytes.len()));
}

/// Stores written before the embedded record lost its padding still decode (the record is
/// taken as it is when it is whole), and an embedded record cut inside its payload is
/// refused rather than padded out.
#[test]
fn merge_bases_payload_padded_or_cut() {
    let mut state = sample_snapshot();
    set_commit_version(&mut state.extensions, 300);
    let base = bough_manifest::MergeBase {
        branch: bough_names::BranchName::main(),
        recorded_at_ms: 77,
        state: state.clone(),
    };
    let rec = bough_manifest::encode_snapshot(&state).expect("encodes");
    let embed = |rec: &[u8]| {
        let mut out = vec![1u8, 4];
        out.extend_from_slice(b"main");
        out.push(77);
        let mut n = rec.len() as u64;
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            out.push(if n > 0 { b | 0x80 } else { b });
            if n == 0 {
                break;
            }
        }
        out.extend_from_slice(rec);
        out
    };
    assert_eq!(
        bough_manifest::decode_merge_bases(&embed(&rec)).expect("a padded record decodes"),
        vec![base.clone()]
    );
    let unpadded =
        bough_manifest::encode_merge_bases(std::slice::from_ref(&base)).expect("encodes");
    assert!(
        unpadded.len() < rec.len(),
        "the embedded record is stored without padding"
    );
    let payload_end = bough_manifest::RecordHeader::parse(&rec)
        .expect("header")
        .payload_len as usize
        + 24;
    assert!(bough_manifest::decode_merge_bases(&embed(&rec[..payload_end - 1])).is_err());
}
