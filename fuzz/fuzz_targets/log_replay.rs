//! Write-ahead log records and log replay under hostile bytes, torn writes and bit rot.
//!
//! Two halves. First, the raw input is decoded as a log file as it is: decoding and replay
//! must never panic, and every record replay accepts must re-encode to the bytes it was read
//! from. Second, the input builds a valid log (up to 8 group commits with consecutive
//! versions), which must replay to exactly those records; the image is then damaged
//! (truncated, zero-extended, bits flipped), and replay must either fail or return a prefix
//! of the records ending at that prefix's offset. A pure truncation (with zero fill, as a
//! preallocated file leaves it) has exactly one right answer: the records wholly kept.
//! Records past the first `synced` are written as buffered durability writes them (version
//! 2, durable only below the last synced one); a power loss that does anything to each of
//! those alone (`LoseUnsynced`) must replay without error, keeping every synced record.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use bough_manifest::{
    BranchName, LOG_BLOCK, LOG_HEADER_LEN, LogEntry, LogMutation, LogOp, LogRecordKind, LogSalt,
    decode_log_entry, decode_log_record, encode_log_record, replay_log,
};
use libfuzzer_sys::fuzz_target;

const MAX_RECORDS: usize = 8;

#[derive(Debug, Arbitrary)]
struct MutationPlan {
    key: Vec<u8>,
    op: u8,
    value: Vec<u8>,
    timestamp: u64,
    expire_at: u64,
}

#[derive(Debug, Arbitrary)]
struct RecordPlan {
    clock_ms: u64,
    close: bool,
    mutations: Vec<MutationPlan>,
}

#[derive(Debug, Arbitrary)]
enum Damage {
    Truncate(u32),
    ZeroExtend(u8),
    Flip(Vec<(u32, u8)>),
    TruncateAndFlip(u32, Vec<(u32, u8)>),
    /// Per unsynced record: 0 kept, 1 zeroed, 2 its second half zeroed, 3 a byte of its
    /// header or body changed (at the position given).
    LoseUnsynced(Vec<(u8, u16)>),
}

#[derive(Debug, Arbitrary)]
struct Input {
    first_version: u32,
    incarnation: u64,
    /// How many of the records were synced (the rest were appended without a sync).
    synced: u8,
    records: Vec<RecordPlan>,
    damage: Damage,
}

fuzz_target!(|data: &[u8]| {
    raw(data);
    let Ok(input) = Input::arbitrary(&mut Unstructured::new(data)) else {
        return;
    };
    check(input);
});

fn salt(incarnation: u64) -> LogSalt {
    LogSalt::new(1, &BranchName::main(), 1, incarnation)
}

/// The raw bytes as a log file: never a panic; what replays re-encodes to its bytes.
fn raw(data: &[u8]) {
    let s = salt(0);
    let _ = decode_log_entry(data, 0, s);
    let _ = decode_log_record(data, 0, s);
    if let Ok(r) = replay_log(data, s, 0) {
        for rec in &r.records {
            let again = encode_log_record(&rec.entry, s, rec.offset, rec.synced)
                .expect("a decoded record encodes");
            let at = rec.offset as usize;
            assert_eq!(
                &data[at..at + again.len()],
                &again[..],
                "record at {at} re-encodes"
            );
        }
        let _ = r.commits_after(u64::from(data.first().copied().unwrap_or(0)));
    }
}

fn op(m: &MutationPlan) -> LogOp {
    let value: Vec<u8> = m.value.iter().copied().take(3000).collect();
    match m.op % 5 {
        0 => LogOp::Put {
            value,
            timestamp: m.timestamp,
            expire_at: m.expire_at,
        },
        1 => LogOp::Delete {
            timestamp: m.timestamp,
            expire_at: m.expire_at,
        },
        2 => LogOp::ForceDelete,
        3 => LogOp::ReplaceWithTombstone {
            timestamp: m.timestamp,
            expire_at: m.expire_at,
        },
        _ => LogOp::Replace {
            value,
            timestamp: m.timestamp,
            expire_at: m.expire_at,
        },
    }
}

fn build(input: &Input) -> Vec<LogEntry> {
    let mut version = u64::from(input.first_version).max(1);
    let mut out: Vec<LogEntry> = Vec::new();
    for (i, plan) in input.records.iter().take(MAX_RECORDS).enumerate() {
        let close = plan.close && i > 0;
        let mut mutations: Vec<LogMutation> = if close {
            Vec::new()
        } else {
            plan.mutations
                .iter()
                .take(32)
                .filter(|m| !m.key.is_empty())
                .map(|m| LogMutation {
                    key: m.key.iter().copied().take(64).collect(),
                    op: op(m),
                })
                .collect()
        };
        mutations.sort_by(|a, b| a.key.cmp(&b.key));
        mutations.dedup_by(|a, b| a.key == b.key);
        let v = if close {
            version - 1
        } else {
            version += 1;
            version - 1
        };
        out.push(LogEntry {
            kind: if close {
                LogRecordKind::Close
            } else {
                LogRecordKind::Commit
            },
            version: v,
            clock_ms: plan.clock_ms,
            mutations,
        });
    }
    out
}

fn check(input: Input) {
    let s = salt(input.incarnation);
    let entries = build(&input);
    let synced = usize::from(input.synced).min(entries.len());
    let mut image = Vec::new();
    let mut offsets = vec![0u64];
    for (i, e) in entries.iter().enumerate() {
        let at = image.len() as u64;
        let durable = if i < synced { at } else { offsets[synced] };
        image.extend(encode_log_record(e, s, at, durable).expect("valid record encodes"));
        offsets.push(image.len() as u64);
    }
    let whole = replay_log(&image, s, 0).expect("an intact log replays");
    let got: Vec<&LogEntry> = whole.records.iter().map(|r| &r.entry).collect();
    assert_eq!(got, entries.iter().collect::<Vec<_>>());
    assert_eq!(whole.end_offset, image.len() as u64);
    assert_eq!(whole.dropped_tail, None);

    let mut damaged = image.clone();
    let mut truncated_only = None;
    match &input.damage {
        Damage::Truncate(len) => {
            let len = *len as usize % (image.len() + 1);
            damaged.truncate(len);
            // Preallocation leaves zeros where nothing was written.
            damaged.resize(image.len() + LOG_BLOCK, 0);
            truncated_only = Some(len as u64);
        }
        Damage::ZeroExtend(blocks) => {
            damaged.resize(image.len() + usize::from(*blocks) * 512, 0);
            let r =
                replay_log(&damaged, s, 0).expect("zeros after the last record are a clean end");
            assert_eq!(r.records.len(), entries.len());
            assert_eq!(r.dropped_tail, None);
            return;
        }
        Damage::Flip(flips) => flip(&mut damaged, flips),
        Damage::TruncateAndFlip(len, flips) => {
            damaged.truncate(*len as usize % (image.len() + 1));
            flip(&mut damaged, flips);
        }
        Damage::LoseUnsynced(fates) => {
            for (i, &(fate, pos)) in (synced..entries.len()).zip(fates.iter().cycle()) {
                let (start, end) = (offsets[i] as usize, offsets[i + 1] as usize);
                let body =
                    u32::from_le_bytes(image[start + 16..start + 20].try_into().expect("4 bytes"))
                        as usize;
                match fate % 4 {
                    0 => {}
                    1 => damaged[start..end].fill(0),
                    2 => damaged[(start + end) / 2..end].fill(0),
                    _ => damaged[start + usize::from(pos) % (LOG_HEADER_LEN + body)] ^= 0xa5,
                }
            }
            let r = replay_log(&damaged, s, 0).expect("lost unsynced records are no corruption");
            let n = r.records.len();
            assert!(
                n >= synced && n <= entries.len(),
                "{n} records, {synced} synced"
            );
            for (rec, want) in r.records.iter().zip(&entries) {
                assert_eq!(
                    &rec.entry, want,
                    "replay returned a record that was not written"
                );
            }
            assert_eq!(r.end_offset, offsets[n]);
            return;
        }
    }
    match replay_log(&damaged, s, 0) {
        Ok(r) => {
            let n = r.records.len();
            assert!(
                n <= entries.len(),
                "replay found {n} records of {}",
                entries.len()
            );
            for (rec, want) in r.records.iter().zip(&entries) {
                assert_eq!(
                    &rec.entry, want,
                    "replay returned a record that was not written"
                );
            }
            assert_eq!(
                r.end_offset, offsets[n],
                "end offset of a {n}-record prefix"
            );
            if let Some(len) = truncated_only {
                // A record is kept when its header and body are: its zero padding, and zero
                // bytes ending its body, cannot be told from the zeros of a truncated,
                // preallocated file.
                let whole_records = offsets[..offsets.len() - 1]
                    .iter()
                    .take_while(|&&o| {
                        let at = o as usize;
                        let body = u32::from_le_bytes(
                            image[at + 16..at + 20].try_into().expect("4 bytes"),
                        );
                        let end = at + LOG_HEADER_LEN + body as usize;
                        damaged[at..end] == image[at..end]
                    })
                    .count();
                assert_eq!(n, whole_records, "truncated at {len}");
            }
        }
        Err(e) => {
            // A truncation leaves no valid record after a damaged one, so it never fails.
            assert!(truncated_only.is_none(), "truncation made replay fail: {e}");
        }
    }
}

fn flip(image: &mut [u8], flips: &[(u32, u8)]) {
    if image.is_empty() {
        return;
    }
    for &(pos, bit) in flips.iter().take(8) {
        let i = pos as usize % image.len();
        image[i] ^= 1 << (bit % 8);
    }
}
