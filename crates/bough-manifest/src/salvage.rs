//! Reading what is left of a damaged manifest, for repairs: the state of its intact prefix
//! and how many records after the damage could not be applied.
//!
//! [`replay`](crate::replay) refuses a manifest with a damaged record that is not the last
//! (the state after it is unknown). A repair that brings the branch back from an archive
//! needs to tell what it loses: the changes from the archive up to the last state that can
//! still be read, and the records after the damage, whose changes cannot be read at all.

use crate::error::DecodeReason;
use crate::ext;
use crate::record::{BLOCK_SIZE, Record, decode_payload, frame, has_valid_checksum};
use crate::replay::ManifestState;

/// What [`salvage`] recovered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Salvaged {
    /// The state after the last record that could be applied; `None` when the snapshot at
    /// offset 0 is damaged.
    pub state: Option<ManifestState>,
    /// Records applied, the snapshot included.
    pub records: usize,
    /// Offset of the first record that could not be read or applied, and why.
    pub damaged_at: Option<(u64, DecodeReason)>,
    /// Block boundaries after the damage that start a record with a valid checksum: commits
    /// written after the damaged one, lost with it.
    pub later_records: usize,
}

/// Applies the records of `bytes` up to the first one that fails (see the module comment).
pub fn salvage(bytes: &[u8]) -> Salvaged {
    let known = ext::is_known;
    let mut out = Salvaged {
        state: None,
        records: 0,
        damaged_at: None,
        later_records: 0,
    };
    let first = frame(bytes, 0).and_then(|f| decode_payload(&f, known).map(|r| (r, f.len)));
    let mut offset = match first {
        Ok((Record::Snapshot(s), len)) => {
            out.state = Some(ManifestState::from_snapshot(s));
            out.records = 1;
            len
        }
        Ok((Record::Log(_), _)) => {
            out.damaged_at = Some((
                0,
                DecodeReason::UnexpectedRecordKind {
                    expected: crate::record::RecordKind::Snapshot,
                    found: crate::record::RecordKind::Log,
                },
            ));
            return count_later(out, bytes, 0);
        }
        Err(reason) => {
            out.damaged_at = Some((0, reason));
            return count_later(out, bytes, 0);
        }
    };
    loop {
        let applied = frame(bytes, offset).and_then(|f| {
            let len = f.len;
            match decode_payload(&f, known)? {
                Record::Log(log) => match out.state.as_mut() {
                    Some(st) => st.apply(log).map(|()| len),
                    None => Err(DecodeReason::Truncated),
                },
                Record::Snapshot(_) => Err(DecodeReason::UnexpectedRecordKind {
                    expected: crate::record::RecordKind::Log,
                    found: crate::record::RecordKind::Snapshot,
                }),
            }
        });
        match applied {
            Ok(len) => {
                out.records += 1;
                offset += len;
            }
            Err(reason) => {
                // The clean end of the log is no damage: nothing but zeros (or nothing)
                // follows, and no later record exists.
                let start = usize::try_from(offset).unwrap_or(usize::MAX);
                let rest_zero = bytes.get(start..).is_none_or(|r| r.iter().all(|&b| b == 0));
                out = count_later(out, bytes, start);
                if !(rest_zero && out.later_records == 0) {
                    out.damaged_at = Some((offset, reason));
                }
                return out;
            }
        }
    }
}

fn count_later(mut out: Salvaged, bytes: &[u8], start: usize) -> Salvaged {
    out.later_records = (start.saturating_add(BLOCK_SIZE)..bytes.len())
        .step_by(BLOCK_SIZE)
        .filter(|&b| has_valid_checksum(bytes, b))
        .count();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{LogRecord, Snapshot, encode_log, encode_snapshot};
    use crate::{BranchFileMapping, NO_PAGE};
    use bough_names::BranchName;

    fn log(seq: u64) -> Vec<u8> {
        encode_log(&LogRecord {
            seq,
            root: NO_PAGE,
            ttl_root: NO_PAGE,
            max_file_id: seq,
            branch_file_ranges: BranchFileMapping::new(),
            checkpoint: None,
            next_page_id: 0,
            free_head: None,
            changes: vec![],
            extensions: vec![],
        })
        .expect("encodes")
    }

    #[test]
    fn keeps_the_prefix_before_a_damaged_record_and_counts_what_follows() {
        let s = Snapshot::empty(BranchName::main(), 0, 4096);
        let mut file = encode_snapshot(&s).expect("encodes");
        for seq in 1..=4 {
            file.extend(log(seq));
        }
        let clean = salvage(&file);
        assert_eq!((clean.records, clean.later_records), (5, 0));
        assert_eq!(clean.damaged_at, None);
        // Damage the second log record: the first applies, two intact records follow.
        let at = 2 * BLOCK_SIZE;
        file[at + 30] ^= 0xff;
        let s = salvage(&file);
        assert_eq!(s.records, 2);
        assert_eq!(s.damaged_at.as_ref().map(|d| d.0), Some(at as u64));
        assert_eq!(s.later_records, 2);
        assert_eq!(s.state.expect("prefix").max_file_id, 1);
        // A damaged snapshot leaves no state.
        file[10] ^= 0xff;
        let s = salvage(&file);
        assert!(s.state.is_none());
        assert_eq!(s.damaged_at.as_ref().map(|d| d.0), Some(0));
        assert!(s.later_records >= 3);
        // Garbage never panics.
        for n in [0, 1, 100, 5000] {
            let _ = salvage(&vec![0xa5; n]);
        }
    }
}
