//! Golden bytes of the cloud tier's own objects: the envelope around manifests, archives,
//! `CURRENT_TERM` and the GC lease, and the lease record inside `GC_LEASE`. Any change to
//! these dumps is a format change (docs/format.md, "Object storage layout").

use bough_object::envelope::{Envelope, FLAG_SEALED};
use bough_object::{LEASE_RECORD_LEN, LeaseRecord};

fn hex_dump(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, line) in bytes.chunks(16).enumerate() {
        let hex: Vec<String> = line.iter().map(|b| format!("{b:02x}")).collect();
        out.push_str(&format!("{:04x}: {}\n", i * 16, hex.join(" ")));
    }
    out.push_str(&format!("total length: {}\n", bytes.len()));
    out
}

#[test]
fn sealed_envelope() {
    let e = Envelope {
        flags: FLAG_SEALED,
        token: 0x0123_4567_89ab_cdef_0000_0000_0000_002a,
        payload: b"manifest".to_vec(),
    };
    let bytes = e.encode();
    assert_eq!(Envelope::decode(&bytes), Ok(e));
    insta::assert_snapshot!(hex_dump(&bytes));
}

#[test]
fn gc_lease_record() {
    let r = LeaseRecord {
        holder: 0x0123_4567_89ab_cdef_0000_0000_0000_0007,
        acquired_ms: 1_700_000_000_000,
        expires_ms: 1_700_000_060_000,
        released: false,
    };
    let bytes = r.encode();
    assert_eq!(bytes.len(), LEASE_RECORD_LEN);
    assert_eq!(LeaseRecord::decode(&bytes), Ok(r));
    insta::assert_snapshot!(hex_dump(&bytes));
}

#[test]
fn released_gc_lease_in_its_envelope() {
    let r = LeaseRecord {
        holder: 7,
        acquired_ms: 1_000,
        expires_ms: 61_000,
        released: true,
    };
    let bytes = Envelope {
        flags: 0,
        token: 9,
        payload: r.encode(),
    }
    .encode();
    insta::assert_snapshot!(hex_dump(&bytes));
}

#[test]
fn append_version_of_a_manifest_chain() {
    use bough_object::envelope::{AppendPayload, FLAG_APPEND};
    let mut record = b"log record".to_vec();
    record.resize(64, 0);
    let e = Envelope {
        flags: FLAG_APPEND,
        token: 0x0123_4567_89ab_cdef_0000_0000_0000_002b,
        payload: AppendPayload::encode(4096, &record),
    };
    let bytes = e.encode();
    assert_eq!(Envelope::decode(&bytes), Ok(e));
    insta::assert_snapshot!(hex_dump(&bytes));
}
