//! Untrusted bytes into the manifest decoders: never a panic, and whatever decodes
//! re-encodes to bytes that decode to the same value.
//!
//! Random bytes almost never carry a matching checksum, so besides feeding the input as
//! is, the target also frames it: the first 8 bytes become the header's root ids and the
//! rest the payload, under a correct header and checksum. That sends the fuzzer's bytes
//! through the payload decoders and replay.
#![no_main]

use bough_manifest::checksum::{Domain, checksum};
use bough_manifest::{
    BLOCK_SIZE, CURRENT_TERM_LEN, CURRENT_TERM_V2_LEN, CurrentTerm, FORMAT_VERSION, HEADER_LEN,
    ManifestState, Record, RecordHeader, decode_record, encode_snapshot, record_len, replay,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A record at offset 0, then at offsets the decoder must bound-check.
    check_record(data, 0);
    for offset in [BLOCK_SIZE as u64, data.len() as u64, u64::MAX] {
        if let Ok(record) = decode_record(data, offset) {
            round_trip(&record);
        }
    }
    check_replay(data);
    check_current_term(data);

    if let Some(framed) = frame(data) {
        check_record(&framed, 0);
        check_replay(&framed);
    }
});

/// `[root: u32 LE][ttl_root: u32 LE][payload...]` as one correctly framed record.
fn frame(data: &[u8]) -> Option<Vec<u8>> {
    let (ids, payload) = data.split_at_checked(8)?;
    let payload_len = u32::try_from(payload.len()).ok()?;
    let header = RecordHeader {
        checksum: 0,
        version: FORMAT_VERSION,
        root: u32::from_le_bytes(ids[0..4].try_into().ok()?),
        ttl_root: u32::from_le_bytes(ids[4..8].try_into().ok()?),
        payload_len,
    };
    let mut out = header.encode().to_vec();
    out.extend_from_slice(payload);
    let sum = checksum(Domain::ManifestRecord, &out[8..]);
    out[..8].copy_from_slice(&sum.to_le_bytes());
    out.resize(usize::try_from(record_len(payload_len)).ok()?, 0);
    debug_assert_eq!(out.len() % BLOCK_SIZE, 0);
    debug_assert!(out.len() >= HEADER_LEN);
    Some(out)
}

fn check_record(data: &[u8], offset: u64) {
    let Ok(record) = decode_record(data, offset) else {
        return;
    };
    // A decoded record's header says how long it is, and all of it was present.
    let header = RecordHeader::parse(data).expect("a decoded record has a header");
    assert!(header.record_len() <= data.len() as u64);
    assert_eq!(header.record_len() % BLOCK_SIZE as u64, 0);
    round_trip(&record);
}

/// Encoding a decoded record succeeds (the decoder accepted nothing the encoder refuses),
/// and the encoding decodes to the same value and is a fixpoint.
fn round_trip(record: &Record) {
    let bytes = record
        .encode()
        .unwrap_or_else(|e| panic!("decoded record does not re-encode: {e}\n{record:?}"));
    assert_eq!(bytes.len() % BLOCK_SIZE, 0);
    let again = decode_record(&bytes, 0)
        .unwrap_or_else(|e| panic!("re-encoded record does not decode: {e}\n{record:?}"));
    assert_eq!(&again, record);
    assert_eq!(again.encode().ok().as_deref(), Some(&bytes[..]));
}

fn check_replay(data: &[u8]) {
    let Ok(replayed) = replay(data) else {
        return;
    };
    assert!(replayed.records >= 1);
    assert!(replayed.end_offset <= data.len() as u64);
    assert_eq!(replayed.end_offset % BLOCK_SIZE as u64, 0);
    if let Some(tail) = replayed.dropped_tail {
        assert_eq!(tail, replayed.end_offset);
        assert!(data[tail as usize..].iter().any(|&b| b != 0));
    } else {
        assert!(data[replayed.end_offset as usize..].iter().all(|&b| b == 0));
    }
    // The replayed state is a valid snapshot: it encodes, and replays to itself.
    let snapshot = replayed.state.to_snapshot();
    let bytes = encode_snapshot(&snapshot)
        .unwrap_or_else(|e| panic!("replayed state does not encode as a snapshot: {e}"));
    let again = replay(&bytes).expect("an encoded snapshot replays");
    assert_eq!(again.records, 1);
    let mut expected = replayed.state.clone();
    expected.last_seq = 0;
    assert_eq!(again.state, expected);
    assert_eq!(ManifestState::from_snapshot(snapshot), expected);
}

fn check_current_term(data: &[u8]) {
    if let Ok(ct) = CurrentTerm::decode(data) {
        // Version 3 is canonical; a version-2 record re-encodes as version 3 and reads back
        // the same.
        if data.len() == CURRENT_TERM_LEN {
            assert_eq!(
                &ct.encode()[..],
                data,
                "CURRENT_TERM decoding is not canonical"
            );
        } else {
            assert_eq!(data.len(), CURRENT_TERM_V2_LEN);
            assert_eq!(CurrentTerm::decode(&ct.encode()), Ok(ct));
        }
    }
    if let Some(head) = data.get(..CURRENT_TERM_LEN)
        && let Ok(ct) = CurrentTerm::decode(head)
    {
        assert_eq!(CurrentTerm::decode(&ct.encode()), Ok(ct));
    }
}
