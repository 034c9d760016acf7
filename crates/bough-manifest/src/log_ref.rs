//! The `LOG` extension: the write-ahead log files a branch's state still needs, and from
//! where. A checkpoint's manifest record names the log position it covers, so open knows
//! where replay starts and GC keeps every log file a manifest names.
//!
//! Payload: `count` varint, then per reference, in replay order: `log_id` varint, `term`
//! varint, branch (`len u8` + bytes), `incarnation` u64 LE, `start` varint (the block
//! boundary replay starts at), `covered` varint (the tree holds every version up to it),
//! `until` varint (the last version to read, for a fork's inherited prefix of its parent's
//! log; 0 = to the end).
//!
//! The tag is in [`crate::ext::KNOWN`]: heads read it at open (replaying the log into the
//! write buffer) and write it with every manifest record of a buffered head. While `LOG` is
//! present, a state's commit version is the last reference's `covered` (see
//! [`crate::ManifestState::version`]): a checkpoint absorbs several logged commits in one
//! record, so `VERSION` plus the record count no longer says it.

use crate::codec::{Reader, put_varint};
use crate::error::DecodeReason;
use crate::ext::LOG;
use crate::log::{LOG_BLOCK, LogSalt};
use crate::record::{get_branch, put_branch};
use bough_names::{BranchName, LogFileName};

/// Smallest encoding of a reference: five one-byte varints, a one-byte branch, 8 bytes.
const MIN_REF_LEN: usize = 15;

/// One log file a branch's state reads, and which part of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LogRef {
    /// The file: `wal_<log_id>_<branch>_<term>`.
    pub file: LogFileName,
    /// The incarnation that wrote it (its records are salted with it).
    pub incarnation: u64,
    /// Offset replay starts at (a block boundary).
    pub start: u64,
    /// Versions up to this one are in the tree already.
    pub covered: u64,
    /// The last version to read (0: to the end of the file).
    pub until: u64,
}

impl LogRef {
    /// The salt the file's records carry.
    pub fn salt(&self) -> LogSalt {
        LogSalt::new(
            self.file.log_id,
            &self.file.branch,
            self.file.term,
            self.incarnation,
        )
    }

    /// The branch whose log this is.
    pub fn branch(&self) -> &BranchName {
        &self.file.branch
    }
}

/// Whether `refs` are all a fork's inherited log (each read up to its `until`, none that
/// the branch appends to): a `LOG` written by a fork by reference that has not written.
pub fn inherited_only(refs: &[LogRef]) -> bool {
    !refs.is_empty() && refs.iter().all(|r| r.until != 0)
}

/// Encodes a `LOG` payload.
pub fn encode_log_refs(refs: &[LogRef]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, refs.len() as u64);
    for r in refs {
        put_varint(&mut out, r.file.log_id);
        put_varint(&mut out, r.file.term);
        put_branch(&mut out, &r.file.branch);
        out.extend_from_slice(&r.incarnation.to_le_bytes());
        put_varint(&mut out, r.start);
        put_varint(&mut out, r.covered);
        put_varint(&mut out, r.until);
    }
    out
}

/// The `LOG` references of an extension list (`None` when it has none).
pub fn log_refs(exts: &[(u64, Vec<u8>)]) -> Result<Option<Vec<LogRef>>, DecodeReason> {
    crate::ext::get(exts, LOG).map(decode_log_refs).transpose()
}

/// Decodes a `LOG` payload; refuses a start off a block boundary, an `until` below
/// `covered`, and trailing bytes.
pub fn decode_log_refs(bytes: &[u8]) -> Result<Vec<LogRef>, DecodeReason> {
    let mut r = Reader::new(bytes);
    let count = r.count(MIN_REF_LEN)?;
    let mut refs = Vec::with_capacity(count);
    for _ in 0..count {
        let log_id = r.varint()?;
        let term = r.varint()?;
        let branch = get_branch(&mut r)?;
        let inc = r.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(inc);
        let start = r.varint()?;
        let covered = r.varint()?;
        let until = r.varint()?;
        if !start.is_multiple_of(LOG_BLOCK as u64) {
            return Err(DecodeReason::MisalignedOffset);
        }
        if until != 0 && until < covered {
            return Err(DecodeReason::LogEndsEarly {
                needed: covered,
                last: until,
            });
        }
        refs.push(LogRef {
            file: LogFileName::new(log_id, branch, term),
            incarnation: u64::from_le_bytes(a),
            start,
            covered,
            until,
        });
    }
    r.finish()?;
    Ok(refs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<LogRef> {
        vec![
            LogRef {
                file: LogFileName::new(3, BranchName::main(), 2),
                incarnation: 0x0102_0304_0506_0708,
                start: 8192,
                covered: 40,
                until: 57,
            },
            LogRef {
                file: LogFileName::new(1, BranchName::new("dev").expect("valid"), 4),
                incarnation: 9,
                start: 0,
                covered: 57,
                until: 0,
            },
        ]
    }

    #[test]
    fn round_trips() {
        let bytes = encode_log_refs(&sample());
        assert_eq!(decode_log_refs(&bytes), Ok(sample()));
        assert_eq!(decode_log_refs(&encode_log_refs(&[])), Ok(Vec::new()));
    }

    #[test]
    fn refuses_hostile_payloads() {
        let bytes = encode_log_refs(&sample());
        for cut in 0..bytes.len() {
            assert!(decode_log_refs(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(decode_log_refs(&long), Err(DecodeReason::TrailingBytes(1)));
        let mut bad = sample();
        bad[0].start = 100;
        assert_eq!(
            decode_log_refs(&encode_log_refs(&bad)),
            Err(DecodeReason::MisalignedOffset)
        );
        assert!(decode_log_refs(&[0xff, 0xff, 0xff, 0x0f]).is_err());
    }
}
