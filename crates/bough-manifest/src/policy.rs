//! What a branch's owner decided about it: the `POLICY` extension (protection and expiry).
//!
//! Payload: `flags u8` (bit 0: protected, bit 1: has an expiry; other bits refused) · if bit
//! 1: `expires_at_ms` varint (ms since the epoch, store clock). An absent extension is the
//! default policy: not protected, never expires.
//!
//! A *protected* branch refuses deletion, reset, restore and non-fast-forward merges into it
//! until it is unprotected. An *expiring* branch is deleted, as a user would delete it, once
//! the store clock passes `expires_at_ms`. The tag is odd (must-understand): a binary that
//! dropped it would let a protected branch be deleted, or keep an expired one forever.
//!
//! The policy belongs to one branch: a fork, a tag, an archive taken of it and a merge base
//! do not carry it (the catalog strips it), a new term and a restore do.

use crate::codec::{Reader, put_u8, put_varint};
use crate::error::DecodeReason;
use crate::ext::{self, Extensions};

pub use crate::ext::POLICY;

const PROTECTED: u8 = 1;
const EXPIRES: u8 = 2;

/// Protection and expiry of a branch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BranchPolicy {
    /// Refuses delete, reset, restore and non-fast-forward merges into the branch.
    pub protected: bool,
    /// When the branch is deleted (ms since the epoch, store clock), if ever.
    pub expires_at_ms: Option<u64>,
}

impl BranchPolicy {
    /// Encodes the extension payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut flags = 0;
        if self.protected {
            flags |= PROTECTED;
        }
        if self.expires_at_ms.is_some() {
            flags |= EXPIRES;
        }
        put_u8(&mut out, flags);
        if let Some(at) = self.expires_at_ms {
            put_varint(&mut out, at);
        }
        out
    }

    /// Decodes an extension payload.
    pub fn decode(bytes: &[u8]) -> Result<BranchPolicy, DecodeReason> {
        let mut r = Reader::new(bytes);
        let flags = r.u8()?;
        if flags & !(PROTECTED | EXPIRES) != 0 {
            return Err(DecodeReason::UnknownFlags(u32::from(flags)));
        }
        let expires_at_ms = if flags & EXPIRES != 0 {
            Some(r.varint()?)
        } else {
            None
        };
        r.finish()?;
        Ok(BranchPolicy {
            protected: flags & PROTECTED != 0,
            expires_at_ms,
        })
    }

    /// The policy an extension list records (the default when it records none).
    pub fn from_extensions(exts: &[(u64, Vec<u8>)]) -> Result<BranchPolicy, DecodeReason> {
        match ext::get(exts, POLICY) {
            None => Ok(BranchPolicy::default()),
            Some(b) => BranchPolicy::decode(b).map_err(|reason| DecodeReason::InvalidExtension {
                tag: POLICY,
                reason: Box::new(reason),
            }),
        }
    }

    /// Stores the policy in an extension list.
    pub fn store(&self, exts: &mut Extensions) {
        ext::set(exts, POLICY, self.encode());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_garbage() {
        for p in [
            BranchPolicy::default(),
            BranchPolicy {
                protected: true,
                expires_at_ms: None,
            },
            BranchPolicy {
                protected: false,
                expires_at_ms: Some(1_700_000_000_000),
            },
            BranchPolicy {
                protected: true,
                expires_at_ms: Some(u64::MAX),
            },
        ] {
            assert_eq!(BranchPolicy::decode(&p.encode()), Ok(p));
            let mut exts = Vec::new();
            p.store(&mut exts);
            assert_eq!(BranchPolicy::from_extensions(&exts), Ok(p));
        }
        assert_eq!(
            BranchPolicy::from_extensions(&[]),
            Ok(BranchPolicy::default())
        );
        // Empty, unknown flags, a missing or non-canonical expiry, trailing bytes.
        for bad in [
            &[][..],
            &[4],
            &[2],
            &[2, 0x80],
            &[2, 0x80, 0x00],
            &[1, 0],
            &[0, 0],
        ] {
            assert!(BranchPolicy::decode(bad).is_err(), "{bad:?}");
        }
        let exts = vec![(POLICY, vec![8])];
        assert!(matches!(
            BranchPolicy::from_extensions(&exts),
            Err(DecodeReason::InvalidExtension { tag: POLICY, .. })
        ));
    }
}
