//! Log replay under torn writes and bit rot, as a property test (the `log_replay` fuzz
//! target checks the same invariants from arbitrary bytes): a valid log replays to exactly
//! its records; a truncated one (zero-filled, as preallocation leaves it) to exactly the
//! records wholly kept; a damaged one fails or returns a prefix, never a record that was
//! not written; and one whose unsynced records a power loss damaged in any pattern (kept,
//! zeroed, torn, garbled, in any order) replays without error to the synced records and a
//! prefix of the rest.

use bough_manifest::{
    BranchName, LOG_BLOCK, LOG_HEADER_LEN, LogEntry, LogMutation, LogOp, LogRecordKind, LogSalt,
    encode_log_entry, encode_log_record, replay_log,
};
use proptest::prelude::*;

fn salt() -> LogSalt {
    LogSalt::new(2, &BranchName::main(), 3, 77)
}

fn entries(sizes: &[(u8, u16)]) -> Vec<LogEntry> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &(n, vlen))| LogEntry {
            kind: LogRecordKind::Commit,
            version: 10 + i as u64,
            clock_ms: i as u64,
            mutations: (0..n)
                .map(|k| LogMutation {
                    key: vec![b'k', k],
                    op: LogOp::Put {
                        value: vec![k; usize::from(vlen)],
                        timestamp: u64::from(k),
                        expire_at: 0,
                    },
                })
                .collect(),
        })
        .collect()
}

/// Where each record's header and body end (its zero padding is indistinguishable from
/// the zeros a truncated, preallocated file holds, so a cut inside it loses nothing).
fn content_ends(bytes: &[u8], offsets: &[u64]) -> Vec<u64> {
    offsets[..offsets.len() - 1]
        .iter()
        .map(|&o| {
            let at = o as usize + 16;
            let body = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
            o + LOG_HEADER_LEN as u64 + u64::from(body)
        })
        .collect()
}

fn image(entries: &[LogEntry]) -> (Vec<u8>, Vec<u64>) {
    let mut out = Vec::new();
    let mut offsets = vec![0u64];
    for e in entries {
        out.extend(encode_log_entry(e, salt(), out.len() as u64).expect("encodes"));
        offsets.push(out.len() as u64);
    }
    (out, offsets)
}

/// What a power loss did to one unsynced record.
#[derive(Debug, Clone, Copy)]
enum Fate {
    Kept,
    Zeroed,
    /// Its second half zeroed (a torn write).
    Torn,
    /// A byte of it changed.
    Garbled(u16),
}

fn fate() -> impl Strategy<Value = Fate> {
    prop_oneof![
        Just(Fate::Kept),
        Just(Fate::Zeroed),
        Just(Fate::Torn),
        any::<u16>().prop_map(Fate::Garbled),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn truncation_keeps_exactly_the_whole_records(
        sizes in prop::collection::vec((0..20u8, 0..900u16), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let entries = entries(&sizes);
        let (bytes, offsets) = image(&entries);
        let len = cut.index(bytes.len() + 1);
        let mut torn = bytes[..len].to_vec();
        torn.resize(bytes.len() + LOG_BLOCK, 0);
        let r = replay_log(&torn, salt(), 0).map_err(|e| TestCaseError::fail(e.to_string()))?;
        // Kept: the records whose header and body survived the cut (zero bytes at the end of
        // a body survive a cut inside them, since the file is zero-filled).
        let whole = offsets
            .iter()
            .zip(content_ends(&bytes, &offsets))
            .take_while(|&(&o, end)| torn[o as usize..end as usize] == bytes[o as usize..end as usize])
            .count();
        prop_assert_eq!(r.records.len(), whole);
        for (got, want) in r.records.iter().zip(&entries) {
            prop_assert_eq!(&got.entry, want);
        }
        prop_assert_eq!(r.end_offset, offsets[whole]);
    }

    #[test]
    fn bit_rot_never_yields_an_unwritten_record(
        sizes in prop::collection::vec((0..20u8, 0..900u16), 1..6),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 0..8u8), 1..4),
    ) {
        let entries = entries(&sizes);
        let (mut bytes, offsets) = image(&entries);
        for (at, bit) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= 1 << bit;
        }
        if let Ok(r) = replay_log(&bytes, salt(), 0) {
            prop_assert!(r.records.len() <= entries.len());
            for (got, want) in r.records.iter().zip(&entries) {
                prop_assert_eq!(&got.entry, want);
            }
            prop_assert_eq!(r.end_offset, offsets[r.records.len()]);
        }
    }
    /// The first `synced` records were synced; the rest were appended without a sync (each
    /// carrying `synced` = the end of the synced ones), and a power loss did anything to each
    /// of them independently. Replay never fails, keeps every synced record, and returns a
    /// prefix of the written records.
    #[test]
    fn unsynced_records_are_lost_in_any_pattern_never_corruption(
        sizes in prop::collection::vec((0..20u8, 0..900u16), 1..7),
        synced in any::<prop::sample::Index>(),
        fates in prop::collection::vec(fate(), 7),
    ) {
        let entries = entries(&sizes);
        let synced = synced.index(entries.len() + 1);
        let mut bytes = Vec::new();
        let mut offsets = vec![0u64];
        for (i, e) in entries.iter().enumerate() {
            let at = bytes.len() as u64;
            let durable = if i < synced { at } else { offsets[synced] };
            bytes.extend(encode_log_record(e, salt(), at, durable).expect("encodes"));
            offsets.push(bytes.len() as u64);
        }
        bytes.resize(bytes.len() + LOG_BLOCK, 0);
        for i in synced..entries.len() {
            let (start, end) = (offsets[i] as usize, offsets[i + 1] as usize);
            match fates[i] {
                Fate::Kept => {}
                Fate::Zeroed => bytes[start..end].fill(0),
                Fate::Torn => bytes[(start + end) / 2..end].fill(0),
                // Within header and body: the padding was zeros before and after the write.
                Fate::Garbled(at) => {
                    let body = u32::from_le_bytes(bytes[start + 16..start + 20].try_into().expect("4 bytes"));
                    let content = LOG_HEADER_LEN + body as usize;
                    bytes[start + usize::from(at) % content] ^= 0x5a;
                }
            }
        }
        let r = replay_log(&bytes, salt(), 0).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(r.records.len() >= synced, "a synced record was lost");
        prop_assert!(r.records.len() <= entries.len());
        for (got, want) in r.records.iter().zip(&entries) {
            prop_assert_eq!(&got.entry, want);
        }
        prop_assert_eq!(r.end_offset, offsets[r.records.len()]);
    }
}
