//! Replay of whole manifest files: clean files, torn tails, damage in the middle.

mod common;

use bough_manifest::{
    BLOCK_SIZE, DecodeReason, EncodeError, HEADER_LEN, LogRecord, ManifestState, ORIGIN,
    RecordKind, VERSION, commit_version, decode_record, encode_log, encode_snapshot, replay,
    set_commit_version,
};
use common::{addr, reseal, sample_log, sample_snapshot};

/// A manifest file: the sample snapshot and `n` sample logs; also each record's offset.
fn file_with_logs(n: u64) -> (Vec<u8>, Vec<usize>) {
    let mut file = encode_snapshot(&sample_snapshot()).expect("encodes");
    let mut offsets = vec![0];
    for seq in 1..=n {
        offsets.push(file.len());
        file.extend(encode_log(&sample_log(seq)).expect("encodes"));
    }
    (file, offsets)
}

/// The state after the snapshot and logs `1..=n`, built without the codec.
fn expected_state(n: u64) -> ManifestState {
    let mut state = ManifestState::from_snapshot(sample_snapshot());
    for seq in 1..=n {
        state.apply(sample_log(seq)).expect("applies");
    }
    state
}

fn error_at(file: &[u8]) -> (u64, DecodeReason) {
    let e = replay(file).expect_err("must fail");
    (e.offset, e.reason)
}

#[test]
fn clean_file_replays_every_record() {
    for n in [0, 1, 5] {
        let (file, _) = file_with_logs(n);
        let r = replay(&file).expect("replays");
        assert_eq!(r.records, n as usize + 1);
        assert_eq!(r.end_offset, file.len() as u64);
        assert_eq!(r.dropped_tail, None);
        assert_eq!(r.state, expected_state(n));
        assert_eq!(r.state.last_seq, n);
    }
}

#[test]
fn state_follows_the_logs() {
    let state = replay(&file_with_logs(4).0).expect("replays").state;
    assert_eq!(state.meta.root, 104);
    assert_eq!(state.max_file_id, 16);
    assert_eq!(state.next_page_id, 404);
    assert_eq!(state.free_head, None);
    assert_eq!(
        state.meta.branch_file_ranges.resolve(16).map(|r| r.term),
        Some(2)
    );
    // Log 3 checkpointed the mapping: the snapshot overlay and logs 1-2 are gone.
    assert_eq!(state.mapping_root, addr(15, 9));
    let overlay: Vec<_> = state.overlay.into_iter().collect();
    assert_eq!(
        overlay,
        vec![
            (103, addr(15, 1).to_u64()),
            (104, addr(16, 1).to_u64()),
            (402, addr(15, 2).to_u64()),
            (403, addr(16, 2).to_u64()),
        ]
    );
}

#[test]
fn overlay_accumulates_and_unmaps_without_checkpoint() {
    let state = replay(&file_with_logs(2).0).expect("replays").state;
    assert_eq!(state.mapping_root, sample_snapshot().mapping_root);
    assert_eq!(state.overlay.get(&300), Some(&0));
    assert_eq!(state.overlay.get(&101), Some(&addr(13, 1).to_u64()));
    assert_eq!(state.overlay.len(), 4 + 4);
    // The state re-encodes as a snapshot that replays to itself, its version (the two log
    // records) now carried by the snapshot.
    let again = encode_snapshot(&state.to_snapshot()).expect("encodes");
    let mut expected = state.clone();
    expected.last_seq = 0;
    set_commit_version(&mut expected.extensions, 2);
    let replayed = replay(&again).expect("replays").state;
    assert_eq!(replayed, expected);
    assert_eq!(replayed.version(), state.version());
}

#[test]
fn preallocated_zero_tail_is_a_clean_end() {
    let (mut file, _) = file_with_logs(2);
    let end = file.len() as u64;
    file.resize(file.len() + 5 * BLOCK_SIZE + 100, 0);
    let r = replay(&file).expect("replays");
    assert_eq!((r.records, r.end_offset, r.dropped_tail), (3, end, None));
}

#[test]
fn torn_last_record_is_dropped() {
    let (file, offsets) = file_with_logs(3);
    let last = offsets[3];
    let check = |file: &[u8], what: &str| {
        let r = replay(file).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(r.records, 3, "{what}");
        assert_eq!(r.end_offset, last as u64, "{what}");
        assert_eq!(r.dropped_tail, Some(last as u64), "{what}");
        assert_eq!(r.state, expected_state(2), "{what}");
    };

    // Truncated mid-record: the file length is no longer a block multiple.
    for cut in [1, 10, 24, 40, 75, 100, BLOCK_SIZE - 1] {
        check(&file[..last + cut], &format!("cut at {cut}"));
    }
    // Garbage where the last record should be.
    let mut garbage = file[..last].to_vec();
    garbage.extend((0..BLOCK_SIZE).map(|i| (i * 7 + 3) as u8));
    check(&garbage, "garbage");
    // A bit flip anywhere in the last record, padding included.
    for bit in [0, 70, 100, 8 * 23 + 7, 8 * 30, 8 * (BLOCK_SIZE - 1)] {
        let mut f = file.clone();
        f[last + bit / 8] ^= 1 << (bit % 8);
        check(&f, &format!("bit {bit}"));
    }
}

#[test]
fn torn_multi_block_record_is_dropped() {
    let (mut file, _) = file_with_logs(1);
    let last = file.len();
    let mut big = sample_log(2);
    big.next_page_id = 100_000;
    big.changes = (0..5000)
        .map(|i| (i * 7, addr(14, i + 1).to_u64()))
        .collect();
    let bytes = encode_log(&big).expect("encodes");
    assert!(bytes.len() >= 4 * BLOCK_SIZE);
    file.extend(&bytes);
    assert_eq!(replay(&file).expect("whole").records, 3);
    // Cut at a later block boundary inside the record, and at its first block's end.
    for cut in [BLOCK_SIZE, 2 * BLOCK_SIZE, bytes.len() - BLOCK_SIZE] {
        let r = replay(&file[..last + cut]).expect("replays");
        assert_eq!(
            (r.records, r.dropped_tail),
            (2, Some(last as u64)),
            "cut {cut}"
        );
    }
    // Its first block never reached the disk but later ones did.
    let mut f = file.clone();
    f[last..last + BLOCK_SIZE].fill(0);
    let r = replay(&f).expect("replays");
    assert_eq!((r.records, r.dropped_tail), (2, Some(last as u64)));
}

#[test]
fn corrupt_middle_record_is_an_error() {
    let (file, offsets) = file_with_logs(4);
    for victim in [1, 2, 3] {
        let at = offsets[victim];
        let mut f = file.clone();
        f[at + 30] ^= 0x10;
        let (offset, reason) = error_at(&f);
        assert_eq!(offset, at as u64);
        assert!(
            matches!(reason, DecodeReason::BadChecksum { .. }),
            "{reason:?}"
        );

        // A middle record that was zeroed is not a clean end either.
        let mut f = file.clone();
        f[at..at + BLOCK_SIZE].fill(0);
        assert_eq!(error_at(&f).0, at as u64);
    }
}

#[test]
fn corrupt_snapshot_is_an_error_at_offset_0() {
    let (file, _) = file_with_logs(2);
    for bit in [0, 100, 8 * 30, 8 * (BLOCK_SIZE - 1)] {
        let mut f = file.clone();
        f[bit / 8] ^= 1 << (bit % 8);
        assert_eq!(error_at(&f).0, 0, "bit {bit}");
    }
    assert_eq!(error_at(&file[..100]), (0, DecodeReason::Truncated));
}

#[test]
fn empty_or_zero_file_has_no_snapshot() {
    assert_eq!(error_at(&[]), (0, DecodeReason::NoSnapshot));
    assert_eq!(error_at(&[0; 10]), (0, DecodeReason::NoSnapshot));
    assert_eq!(
        error_at(&vec![0; 3 * BLOCK_SIZE]),
        (0, DecodeReason::NoSnapshot)
    );
    // Zeros at offset 0 with intact logs after it: still no snapshot.
    let (mut file, _) = file_with_logs(2);
    file[..BLOCK_SIZE].fill(0);
    assert_eq!(error_at(&file), (0, DecodeReason::NoSnapshot));
}

#[test]
fn record_kinds_must_match_positions() {
    let log = encode_log(&sample_log(1)).expect("encodes");
    assert_eq!(
        error_at(&log),
        (
            0,
            DecodeReason::UnexpectedRecordKind {
                expected: RecordKind::Snapshot,
                found: RecordKind::Log
            }
        )
    );
    let (mut file, _) = file_with_logs(1);
    let at = file.len() as u64;
    file.extend(encode_snapshot(&sample_snapshot()).expect("encodes"));
    assert_eq!(
        error_at(&file),
        (
            at,
            DecodeReason::UnexpectedRecordKind {
                expected: RecordKind::Log,
                found: RecordKind::Snapshot
            }
        )
    );
}

#[test]
fn seq_must_be_consecutive() {
    let (mut file, _) = file_with_logs(1);
    let at = file.len() as u64;
    file.extend(encode_log(&sample_log(3)).expect("encodes"));
    assert_eq!(
        error_at(&file),
        (
            at,
            DecodeReason::SeqGap {
                expected: 2,
                found: 3
            }
        )
    );
    // A repeated record is a gap too.
    let (mut file, _) = file_with_logs(2);
    let at = file.len() as u64;
    file.extend(encode_log(&sample_log(2)).expect("encodes"));
    assert_eq!(
        error_at(&file).1,
        DecodeReason::SeqGap {
            expected: 3,
            found: 2
        }
    );
    assert_eq!(error_at(&file).0, at);
}

#[test]
fn high_water_marks_never_go_down() {
    let lowered = |edit: fn(&mut LogRecord)| {
        let (mut file, _) = file_with_logs(1);
        let mut log = sample_log(2);
        edit(&mut log);
        file.extend(encode_log(&log).expect("encodes"));
        error_at(&file).1
    };
    assert_eq!(
        lowered(|l| {
            l.max_file_id = 12;
            l.branch_file_ranges = sample_snapshot().meta.branch_file_ranges;
        }),
        DecodeReason::MaxFileIdRegressed {
            previous: 13,
            found: 12
        }
    );
    assert_eq!(
        lowered(|l| {
            l.next_page_id = 400;
            l.root = 5;
            l.changes.clear();
        }),
        DecodeReason::NextPageIdRegressed {
            previous: 401,
            found: 400
        }
    );
}

/// Records whose checksum matches were fully written: at the tail they are errors, never
/// silently dropped (dropping would let the next append overwrite them).
#[test]
fn intact_but_unreadable_tail_record_is_an_error() {
    let (mut file, _) = file_with_logs(1);
    let at = file.len();
    file.extend(encode_log(&sample_log(2)).expect("encodes"));

    let mut newer = file.clone();
    newer[at + 8] = 3; // version 3
    reseal(&mut newer, at);
    assert_eq!(
        error_at(&newer),
        (at as u64, DecodeReason::UnsupportedVersion(3))
    );

    let mut bad_payload = file.clone();
    bad_payload[at + 24] = 9; // kind byte
    reseal(&mut bad_payload, at);
    assert_eq!(
        error_at(&bad_payload),
        (at as u64, DecodeReason::UnknownRecordKind(9))
    );
}

#[test]
fn torn_record_followed_by_garbage_only_is_dropped() {
    let (file, offsets) = file_with_logs(2);
    let mut f = file.clone();
    f[offsets[2] + 30] ^= 1;
    f.extend(vec![0xa5; 3 * BLOCK_SIZE]);
    let r = replay(&f).expect("replays");
    assert_eq!((r.records, r.dropped_tail), (2, Some(offsets[2] as u64)));
}

/// A manifest written before `VERSION` existed (the golden sample snapshot has no
/// extensions) decodes, and its versions count from 0: the snapshot is version 0 and each
/// log record adds one.
#[test]
fn a_manifest_without_version_counts_from_zero() {
    for n in [0, 1, 4] {
        let (file, _) = file_with_logs(n);
        let state = replay(&file).expect("replays").state;
        assert_eq!(commit_version(&state.extensions), Ok(None));
        assert_eq!(state.version(), n);
    }
}

/// The version continues across a rewrite: the snapshot written from a replayed state
/// carries that state's version, and the new manifest's logs count on from it.
#[test]
fn version_survives_a_manifest_rewrite() {
    let mut snap = sample_snapshot();
    set_commit_version(&mut snap.extensions, 300);
    let mut file = encode_snapshot(&snap).expect("encodes");
    for seq in 1..=2 {
        file.extend(encode_log(&sample_log(seq)).expect("encodes"));
    }
    let state = replay(&file).expect("replays").state;
    assert_eq!(state.version(), 302);
    let mut rewritten = encode_snapshot(&state.to_snapshot()).expect("encodes");
    assert_eq!(replay(&rewritten).expect("replays").state.version(), 302);
    // The next log of the rewritten manifest is its first (seq 1) and moves on from the
    // rewritten state (log 3's file and page ids are above it).
    let next = LogRecord {
        seq: 1,
        ..sample_log(3)
    };
    rewritten.extend(encode_log(&next).expect("encodes"));
    assert_eq!(replay(&rewritten).expect("replays").state.version(), 303);
    // A state that never had a version gets none written while it is 0.
    let zero = ManifestState::from_snapshot(sample_snapshot()).to_snapshot();
    assert_eq!(commit_version(&zero.extensions), Ok(None));
}

/// Turns the first extension's tag of an encoded record into `VERSION` (the encoders refuse
/// to write the records these tests need) and reseals it.
fn retag_last_extension(mut record: Vec<u8>, payload: &[u8]) -> Vec<u8> {
    let payload_len = u32::from_le_bytes(record[20..24].try_into().expect("4 bytes")) as usize;
    // The record ends with: count 1, tag, length, payload.
    let tag_at = HEADER_LEN + payload_len - payload.len() - 2;
    assert_eq!(record[tag_at], ORIGIN as u8, "layout as expected");
    record[tag_at] = VERSION as u8;
    reseal(&mut record, 0);
    record
}

/// `VERSION` belongs to snapshots: a log record carrying it is refused by the encoder, by
/// the decoder and by `apply`, so a log can never move a version back.
#[test]
fn version_in_a_log_record_is_refused() {
    let mut log = sample_log(1);
    set_commit_version(&mut log.extensions, 7);
    assert_eq!(
        encode_log(&log),
        Err(EncodeError::MisplacedExtension(VERSION))
    );
    let mut state = ManifestState::from_snapshot(sample_snapshot());
    assert_eq!(
        state.apply(log),
        Err(DecodeReason::MisplacedExtension(VERSION))
    );
    assert_eq!(state.last_seq, 0, "a refused record changes nothing");

    let mut carrier = sample_log(1);
    carrier.extensions = vec![(ORIGIN, vec![7])];
    let bytes = retag_last_extension(encode_log(&carrier).expect("encodes"), &[7]);
    assert_eq!(
        decode_record(&bytes, 0).map_err(|e| e.reason),
        Err(DecodeReason::MisplacedExtension(VERSION))
    );
    let mut file = encode_snapshot(&sample_snapshot()).expect("encodes");
    let at = file.len() as u64;
    file.extend(bytes);
    let e = replay(&file).expect_err("refused");
    assert_eq!(
        (e.offset, e.reason),
        (at, DecodeReason::MisplacedExtension(VERSION))
    );
}

/// A damaged `VERSION` payload behind a valid checksum is a decode error naming the
/// extension, never a panic or a silent 0; the encoder refuses to write one.
#[test]
fn malformed_version_payloads_are_refused() {
    for payload in [
        &[][..],
        &[0x80][..],
        &[0x80, 0x00][..],
        &[0x01, 0x00][..],
        &[0xff; 11][..],
    ] {
        let mut snap = sample_snapshot();
        snap.extensions = vec![(VERSION, payload.to_vec())];
        assert_eq!(
            encode_snapshot(&snap),
            Err(EncodeError::InvalidExtension(VERSION)),
            "{payload:?}"
        );
        snap.extensions = vec![(ORIGIN, payload.to_vec())];
        let bytes = retag_last_extension(encode_snapshot(&snap).expect("encodes"), payload);
        let e = replay(&bytes).expect_err("refused");
        assert_eq!(e.offset, 0);
        assert!(
            matches!(
                e.reason,
                DecodeReason::InvalidExtension { tag: VERSION, .. }
            ),
            "{payload:?}: {e}"
        );
    }
}

/// Issue 14 §3: only the last record can be a torn tail. Damage of any kind (a flipped bit
/// anywhere in its block — header, payload or padding — zeros, garbage, a cut-down length
/// field) to a record that a valid record follows is an error naming that record, never a
/// dropped tail, whichever record it is and however far the next valid record lies.
#[test]
fn a_record_followed_by_a_valid_record_is_never_a_torn_tail() {
    let (file, offsets) = file_with_logs(5);
    let inner = &offsets[..offsets.len() - 1];
    for (victim, &at) in inner.iter().enumerate().skip(1) {
        let mut damaged: Vec<(String, Vec<u8>)> = Vec::new();
        for bit in (0..8 * BLOCK_SIZE).step_by(61) {
            let mut f = file.clone();
            f[at + bit / 8] ^= 1 << (bit % 8);
            damaged.push((format!("bit {bit}"), f));
        }
        let mut zeroed = file.clone();
        zeroed[at..at + BLOCK_SIZE].fill(0);
        damaged.push(("zeroed".into(), zeroed));
        let mut garbage = file.clone();
        for (i, b) in garbage[at..at + BLOCK_SIZE].iter_mut().enumerate() {
            *b = (i * 13 + 5) as u8;
        }
        damaged.push(("garbage".into(), garbage));
        let mut long = file.clone();
        long[at + 20..at + 24].copy_from_slice(&u32::MAX.to_le_bytes());
        damaged.push(("payload length too long".into(), long));
        for (what, f) in damaged {
            let e = replay(&f).expect_err(&format!("record {victim}, {what}: must fail"));
            assert_eq!(e.offset, at as u64, "record {victim}, {what}");
        }
    }
    // The valid record may lie several blocks after the damaged one (a damaged multi-block
    // record): still an error, not a tail.
    let (mut file, _) = file_with_logs(1);
    let at = file.len();
    let mut big = sample_log(2);
    big.next_page_id = 100_000;
    big.changes = (0..5000)
        .map(|i| (i * 7, addr(14, i + 1).to_u64()))
        .collect();
    let bytes = encode_log(&big).expect("encodes");
    file.extend(&bytes);
    file.extend(encode_log(&sample_log(3)).expect("encodes"));
    for flip in [at + 3, at + bytes.len() / 2, at + bytes.len() - 1] {
        let mut f = file.clone();
        f[flip] ^= 0x40;
        assert_eq!(error_at(&f).0, at as u64, "flip at {flip}");
    }
}
