//! The commit version of a branch: the `VERSION` extension of snapshot records.
//!
//! A branch's version grows by one with every record its head appends (every commit,
//! checkpoint, adoption) and never goes back: not when the manifest is rewritten as a fresh
//! snapshot, not at a new term, not at a restore. The log sequence number restarts at 0 in
//! every new manifest, so the version is kept apart from it: a snapshot record carries the
//! version of its own state under [`VERSION`], and the state after log record `seq` has
//! version `VERSION + seq`. A snapshot without the extension (written before it existed)
//! counts as version 0.
//!
//! Payload: one canonical varint, nothing after it. Log records never carry it (refused on
//! encode and decode), so a state's version is always the snapshot's plus the log length.

use crate::codec::{Reader, put_varint};
use crate::error::DecodeReason;
use crate::ext::{self, Extensions};

pub use crate::ext::VERSION;

/// Encodes a `VERSION` payload.
pub fn encode_version(version: u64) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, version);
    out
}

/// Decodes a `VERSION` payload: exactly one canonical varint.
pub fn decode_version(bytes: &[u8]) -> Result<u64, DecodeReason> {
    let mut r = Reader::new(bytes);
    let v = r.varint()?;
    r.finish()?;
    Ok(v)
}

/// The commit version stored in an extension list, if any.
pub fn commit_version(exts: &[(u64, Vec<u8>)]) -> Result<Option<u64>, DecodeReason> {
    ext::get(exts, VERSION).map(decode_version).transpose()
}

/// Stores the commit version in an extension list.
pub fn set_commit_version(exts: &mut Extensions, version: u64) {
    ext::set(exts, VERSION, encode_version(version));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        for v in [0, 1, 127, 128, 300, u64::MAX] {
            assert_eq!(decode_version(&encode_version(v)), Ok(v));
            let mut exts = Vec::new();
            set_commit_version(&mut exts, v);
            assert_eq!(commit_version(&exts), Ok(Some(v)));
        }
        assert_eq!(commit_version(&[]), Ok(None));
        // Empty, overlong (0 as two bytes), unterminated, 11 bytes, trailing byte.
        for bad in [&[][..], &[0x80, 0x00], &[0x80], &[0xff; 11], &[0x05, 0x00]] {
            assert!(decode_version(bad).is_err(), "{bad:?}");
        }
    }
}
