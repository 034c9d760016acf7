//! Where a branch came from: the `ORIGIN` extension of a branch's manifests.
//!
//! Payload: `flags u8 (bit 0: has parent) | [parent len u8 | parent bytes | parent term
//! varint] | fork version varint | created_at_ms varint`. The fork version is the parent's
//! commit sequence number at the fork; `created_at_ms` is the branch's creation time.

use bough_names::{BranchName, Term};

use crate::codec::{Reader, put_u8, put_varint};
use crate::error::DecodeReason;
use crate::ext;

/// Tag of the origin extension (odd: a reader that cannot interpret it must refuse).
pub const ORIGIN: u64 = 1;

/// A branch's parent, fork point and creation time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchOrigin {
    /// The parent branch and its term at the fork (`None` for `main` and restored roots).
    pub parent: Option<(BranchName, Term)>,
    /// The parent's commit sequence number at the fork.
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
