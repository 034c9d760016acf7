//! Where a branch came from: the `ORIGIN` extension of a branch's manifests.
//!
//! Payload: `flags u8 (bit 0: has parent) | [parent len u8 | parent bytes | parent term
//! varint] | fork version varint | created_at_ms varint`. The fork version is the parent's
//! commit version at the fork (see `crate::version`); `created_at_ms` is the branch's
//! creation time.

use bough_names::{BranchName, Term};

use crate::codec::{Reader, put_u8, put_varint};
use crate::error::DecodeReason;
use crate::ext;

pub use crate::ext::{MERGE_BASES, ORIGIN};

/// A branch's parent, fork point and creation time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchOrigin {
    /// The parent branch and its term at the fork (`None` for `main` and restored roots).
    pub parent: Option<(BranchName, Term)>,
    /// The parent's commit version at the fork (0 for a branch made from an archive).
    pub fork_version: u64,
    /// Creation time, ms since the epoch.
    pub created_at_ms: u64,
}

impl BranchOrigin {
    /// Encodes the extension payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match &self.parent {
            Some((name, term)) => {
                put_u8(&mut out, 1);
                put_u8(&mut out, name.as_str().len() as u8);
                out.extend_from_slice(name.as_str().as_bytes());
                put_varint(&mut out, *term);
            }
            None => put_u8(&mut out, 0),
        }
        put_varint(&mut out, self.fork_version);
        put_varint(&mut out, self.created_at_ms);
        out
    }

    /// Decodes an extension payload.
    pub fn decode(bytes: &[u8]) -> Result<BranchOrigin, DecodeReason> {
        let mut r = Reader::new(bytes);
        let parent = match r.u8()? {
            0 => None,
            1 => {
                let len = r.u8()? as usize;
                let name = std::str::from_utf8(r.bytes(len as u64)?)
                    .ok()
                    .and_then(|s| BranchName::new(s).ok())
                    .ok_or(DecodeReason::InvalidBranchName)?;
                Some((name, r.varint()?))
            }
            f => return Err(DecodeReason::UnknownFlags(u32::from(f))),
        };
        let fork_version = r.varint()?;
        let created_at_ms = r.varint()?;
        r.finish()?;
        Ok(BranchOrigin {
            parent,
            fork_version,
            created_at_ms,
        })
    }

    /// Reads the origin from an extension list, if present.
    pub fn from_extensions(exts: &[(u64, Vec<u8>)]) -> Result<Option<BranchOrigin>, DecodeReason> {
        ext::get(exts, ORIGIN).map(BranchOrigin::decode).transpose()
    }

    /// Stores the origin in an extension list.
    pub fn store(&self, exts: &mut ext::Extensions) {
        ext::set(exts, ORIGIN, self.encode());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        for o in [
            BranchOrigin {
                parent: Some((BranchName::new("feature").unwrap(), 7)),
                fork_version: 42,
                created_at_ms: 1_700_000_000_000,
            },
            BranchOrigin {
                parent: None,
                fork_version: 0,
                created_at_ms: 0,
            },
        ] {
            assert_eq!(BranchOrigin::decode(&o.encode()), Ok(o.clone()));
            let mut exts = Vec::new();
            o.store(&mut exts);
            assert_eq!(BranchOrigin::from_extensions(&exts), Ok(Some(o)));
        }
        assert!(BranchOrigin::decode(&[2]).is_err());
        assert!(BranchOrigin::decode(&[1, 3, b'a', b'_', b'1', 0, 0, 0]).is_err());
        assert!(BranchOrigin::decode(&[0, 0, 0, 9]).is_err());
    }
}

/// The last common state of this branch and another: what a three-way merge compares both
/// sides against. Stored per other branch in the `MERGE_BASES` extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeBase {
    /// The other branch.
    pub branch: BranchName,
    /// When the base was recorded (ms since the epoch); the newer of two candidates wins.
    pub recorded_at_ms: u64,
    /// The common state, as a checkpointed snapshot (no overlay).
    pub state: crate::record::Snapshot,
}

/// Encodes a list of merge bases (payload of `MERGE_BASES`).
pub fn encode_merge_bases(bases: &[MergeBase]) -> Result<Vec<u8>, crate::error::EncodeError> {
    let mut out = Vec::new();
    put_varint(&mut out, bases.len() as u64);
    for b in bases {
        put_u8(&mut out, b.branch.as_str().len() as u8);
        out.extend_from_slice(b.branch.as_str().as_bytes());
        put_varint(&mut out, b.recorded_at_ms);
        let rec = crate::record::encode_snapshot(&b.state)?;
        // The record is embedded without its block padding: a manifest's records are
        // padded so an append never rewrites a block, which means nothing inside another
        // record, and the padding alone was most of a new branch's manifest (4 KiB).
        let unpadded = unpadded_len(&rec);
        let rec = rec.get(..unpadded).unwrap_or(&rec);
        put_varint(&mut out, rec.len() as u64);
        out.extend_from_slice(rec);
    }
    Ok(out)
}

/// Header plus payload of an encoded record: its length without the block padding.
fn unpadded_len(rec: &[u8]) -> usize {
    crate::record::RecordHeader::parse(rec)
        .map(|h| crate::record::HEADER_LEN + h.payload_len as usize)
        .filter(|&n| n <= rec.len())
        .unwrap_or(rec.len())
}

/// An embedded record as [`decode_record`](crate::record::decode_record) takes it: with its
/// padding. Stores written before the padding was dropped embed it padded (returned as
/// is); otherwise exactly header plus payload must be present, so the zeros added are
/// fewer than one block and never sized from an unchecked length.
fn repad(rec: &[u8]) -> Result<std::borrow::Cow<'_, [u8]>, DecodeReason> {
    let header = crate::record::RecordHeader::parse(rec).ok_or(DecodeReason::Truncated)?;
    let padded = header.record_len();
    if rec.len() as u64 >= padded {
        return Ok(std::borrow::Cow::Borrowed(rec));
    }
    if rec.len() != crate::record::HEADER_LEN + header.payload_len as usize {
        return Err(DecodeReason::Truncated);
    }
    let mut out = rec.to_vec();
    // padded - rec.len() < BLOCK_SIZE here (record_len rounds header + payload up).
    out.resize(padded as usize, 0);
    Ok(std::borrow::Cow::Owned(out))
}

/// Decodes a `MERGE_BASES` payload.
pub fn decode_merge_bases(bytes: &[u8]) -> Result<Vec<MergeBase>, DecodeReason> {
    let mut r = Reader::new(bytes);
    // Smallest entry: name length, one name byte, a time and a record length.
    let count = r.count(4)?;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let len = r.u8()? as usize;
        let branch = std::str::from_utf8(r.bytes(len as u64)?)
            .ok()
            .and_then(|s| BranchName::new(s).ok())
            .ok_or(DecodeReason::InvalidBranchName)?;
        let recorded_at_ms = r.varint()?;
        let rec_len = r.varint()?;
        let rec = repad(r.bytes(rec_len)?)?;
        let state = match crate::record::decode_record(&rec, 0).map_err(|e| e.reason)? {
            crate::record::Record::Snapshot(s) => s,
            crate::record::Record::Log(_) => {
                return Err(DecodeReason::UnexpectedRecordKind {
                    expected: crate::RecordKind::Snapshot,
                    found: crate::RecordKind::Log,
                });
            }
        };
        out.push(MergeBase {
            branch,
            recorded_at_ms,
            state,
        });
    }
    r.finish()?;
    Ok(out)
}

/// The merge bases stored in an extension list (empty when absent).
pub fn merge_bases(exts: &[(u64, Vec<u8>)]) -> Result<Vec<MergeBase>, DecodeReason> {
    match ext::get(exts, MERGE_BASES) {
        Some(b) => decode_merge_bases(b),
        None => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod merge_base_tests {
    use super::*;

    #[test]
    fn merge_bases_round_trip() {
        let mut state = crate::record::Snapshot::empty(BranchName::main(), 3, 4096);
        state.max_file_id = 9;
        let bases = vec![MergeBase {
            branch: BranchName::new("feature").unwrap(),
            recorded_at_ms: 77,
            state,
        }];
        let bytes = encode_merge_bases(&bases).unwrap();
        assert_eq!(decode_merge_bases(&bytes).unwrap(), bases);
        assert!(decode_merge_bases(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode_merge_bases(&[200]).is_err());
    }
}
