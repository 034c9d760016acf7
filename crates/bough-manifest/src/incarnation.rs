//! The incarnation of a branch: the `INCARNATION` extension.
//!
//! A branch name can be deleted and created again. Each creation picks a random 64-bit id,
//! the *incarnation*, kept in every snapshot of the branch's manifests (this extension), in
//! its `CURRENT_TERM` record, in every branch file range its lineage allocates and in the
//! header of every data file it writes. It is hashed into the page checksum salt, so a page
//! written by one incarnation of a name never validates as a page of another: a file that
//! replaced another of the same name reads as corruption, never as the other's data.
//!
//! Payload: the id as 8 bytes little-endian, nothing else. 0 means "none" (a head created
//! without one, in tests of the layers below the catalog).

use crate::error::DecodeReason;
use crate::ext::{self, Extensions};

pub use crate::ext::INCARNATION;

/// The incarnation stored in an extension list, if any.
pub fn incarnation(exts: &[(u64, Vec<u8>)]) -> Result<Option<u64>, DecodeReason> {
    match ext::get(exts, INCARNATION) {
        None => Ok(None),
        Some(b) => <[u8; 8]>::try_from(b)
            .map(|a| Some(u64::from_le_bytes(a)))
            .map_err(|_| DecodeReason::InvalidExtension {
                tag: INCARNATION,
                reason: Box::new(DecodeReason::WrongLength(b.len())),
            }),
    }
}

/// Stores the incarnation in an extension list.
pub fn set_incarnation(exts: &mut Extensions, incarnation: u64) {
    ext::set(exts, INCARNATION, incarnation.to_le_bytes().to_vec());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_other_lengths() {
        for v in [0, 1, u64::MAX, 0x0123_4567_89ab_cdef] {
            let mut exts = Vec::new();
            set_incarnation(&mut exts, v);
            assert_eq!(incarnation(&exts), Ok(Some(v)));
        }
        assert_eq!(incarnation(&[]), Ok(None));
        for bad in [vec![], vec![1; 7], vec![1; 9]] {
            assert!(incarnation(&[(INCARNATION, bad)]).is_err());
        }
    }
}
