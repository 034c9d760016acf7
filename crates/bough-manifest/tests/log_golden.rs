//! Golden bytes of write-ahead log records and the `LOG` extension payload: any change to
//! these dumps is a format change (bump `LOG_VERSION` instead).

mod common;

use bough_manifest::{
    BranchName, LOG_BLOCK, LOG_HEADER_LEN, LogEntry, LogMutation, LogOp, LogRecordKind, LogRef,
    LogSalt, decode_log_entry, decode_log_record, encode_log_entry, encode_log_record,
    encode_log_refs,
};
use bough_names::LogFileName;
use common::hex_dump;

fn salt() -> LogSalt {
    LogSalt::new(3, &BranchName::main(), 2, 0x0102_0304_0506_0708)
}

/// The header and body of a record (the zero padding is only counted).
fn hex_log_record(bytes: &[u8]) -> String {
    let body_len = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes")) as usize;
    hex_dump(&bytes[..LOG_HEADER_LEN + body_len], bytes.len())
}

fn sample_commit() -> LogEntry {
    LogEntry {
        kind: LogRecordKind::Commit,
        version: 300,
        clock_ms: 1_700_000_000_000,
        mutations: vec![
            LogMutation {
                key: b"apple".to_vec(),
                op: LogOp::Put {
                    value: b"red".to_vec(),
                    timestamp: 42,
                    expire_at: 0,
                },
            },
            LogMutation {
                key: b"kiwi".to_vec(),
                op: LogOp::Delete {
                    timestamp: 43,
                    expire_at: 1_700_000_600_000,
                },
            },
            LogMutation {
                key: b"lime".to_vec(),
                op: LogOp::ForceDelete,
            },
            LogMutation {
                key: b"pear".to_vec(),
                op: LogOp::ReplaceWithTombstone {
                    timestamp: 7,
                    expire_at: 9,
                },
            },
            LogMutation {
                key: b"plum".to_vec(),
                op: LogOp::Replace {
                    value: b"p".to_vec(),
                    timestamp: 1,
                    expire_at: 2,
                },
            },
        ],
    }
}

#[test]
fn log_salt() {
    insta::assert_snapshot!(format!("{:#018x}", salt().0));
}

#[test]
fn log_commit_record() {
    let bytes = encode_log_entry(&sample_commit(), salt(), 0).expect("encodes");
    assert_eq!(
        decode_log_entry(&bytes, 0, salt()),
        Ok((sample_commit(), LOG_BLOCK))
    );
    insta::assert_snapshot!(hex_log_record(&bytes));
}

/// The same record at the second block: only the checksum (bytes 0..8) differs.
#[test]
fn log_commit_record_at_second_block() {
    let first = encode_log_entry(&sample_commit(), salt(), 0).expect("encodes");
    let second = encode_log_entry(&sample_commit(), salt(), LOG_BLOCK as u64).expect("encodes");
    assert_ne!(first[..8], second[..8]);
    assert_eq!(first[8..], second[8..]);
    insta::assert_snapshot!(hex_log_record(&second));
}

/// A commit written while the file was durable only below block 1 (buffered durability):
/// version 2, its body carrying `synced` = 4096 after the clock.
#[test]
fn log_unsynced_commit_record() {
    let at = 3 * LOG_BLOCK as u64;
    let bytes = encode_log_record(&sample_commit(), salt(), at, LOG_BLOCK as u64).expect("encodes");
    let mut file = vec![0u8; at as usize];
    file.extend_from_slice(&bytes);
    assert_eq!(
        decode_log_record(&file, at, salt()),
        Ok((sample_commit(), LOG_BLOCK as u64, LOG_BLOCK))
    );
    insta::assert_snapshot!(hex_log_record(&bytes));
}

#[test]
fn log_close_record() {
    let close = LogEntry {
        kind: LogRecordKind::Close,
        version: 300,
        clock_ms: 1_700_000_000_500,
        mutations: Vec::new(),
    };
    insta::assert_snapshot!(hex_log_record(
        &encode_log_entry(&close, salt(), 2 * LOG_BLOCK as u64).expect("encodes")
    ));
}

#[test]
fn log_refs_payload() {
    let refs = [LogRef {
        file: LogFileName::new(3, BranchName::main(), 2),
        incarnation: 0x0102_0304_0506_0708,
        start: 8192,
        covered: 299,
        until: 0,
    }];
    let bytes = encode_log_refs(&refs);
    insta::assert_snapshot!(hex_dump(&bytes, bytes.len()));
}
