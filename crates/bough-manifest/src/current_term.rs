//! The `CURRENT_TERM.<branch>` record: a branch's current term, or its tombstone.

use bough_names::Term;

use crate::checksum::{Domain, checksum};
use crate::codec::{le_u32, le_u64};
use crate::error::{DecodeError, DecodeReason};

/// Size of a `CURRENT_TERM` record.
pub const CURRENT_TERM_LEN: usize = 40;

/// Format version of the `CURRENT_TERM` record.
pub const CURRENT_TERM_VERSION: u32 = 2;

/// Flag bit: the branch was deleted.
pub const FLAG_DELETED: u32 = 1;

/// Contents of `CURRENT_TERM.<branch>`.
///
/// | bytes  | field                                              |
/// |--------|----------------------------------------------------|
/// | 0..8   | `checksum(Domain::CurrentTerm, bytes[8..40])`, LE  |
/// | 8..12  | version = 2, LE                                    |
/// | 12..16 | flags, LE: bit 0 = deleted; other bits zero        |
/// | 16..24 | term, LE                                           |
/// | 24..32 | first term of this incarnation, LE (≤ term)         |
/// | 32..40 | incarnation id, LE (0 = unknown)                   |
///
/// A deleted branch keeps its file as a tombstone with its last term, so a branch created
/// again under the same name continues above that term and never reuses a (branch, term)
/// pair (and with it, data file names).
///
/// The first term tells incarnations of one name apart: a merge base another branch
/// recorded with a state of this branch at a term below it belongs to an earlier branch of
/// the same name, deleted since, and must never be used (or kept) for this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CurrentTerm {
    /// The branch's current term (for a tombstone: the last term it used).
    pub term: Term,
    /// Whether the branch was deleted.
    pub deleted: bool,
    /// The term this incarnation of the branch was created at (new terms and restores keep
    /// it; a name reused after deletion starts a new one). 0 when unknown: every term is
    /// then taken to belong to the current incarnation.
    pub first_term: Term,
    /// The incarnation id of the branch (chosen at its creation, recorded in its manifests;
    /// see `crate::incarnation`). 0 when unknown (rebuilt from nothing).
    pub incarnation: u64,
}

impl CurrentTerm {
    /// The record's 40 bytes.
    pub fn encode(&self) -> [u8; CURRENT_TERM_LEN] {
        let mut out = [0u8; CURRENT_TERM_LEN];
        out[8..12].copy_from_slice(&CURRENT_TERM_VERSION.to_le_bytes());
        let flags = if self.deleted { FLAG_DELETED } else { 0 };
        out[12..16].copy_from_slice(&flags.to_le_bytes());
        out[16..24].copy_from_slice(&self.term.to_le_bytes());
        out[24..32].copy_from_slice(&self.first_term.to_le_bytes());
        out[32..40].copy_from_slice(&self.incarnation.to_le_bytes());
        let sum = checksum(Domain::CurrentTerm, &out[8..]);
        out[0..8].copy_from_slice(&sum.to_le_bytes());
        out
    }

    /// Decodes a whole `CURRENT_TERM` file (exactly 40 bytes). Errors name offset 0.
    pub fn decode(bytes: &[u8]) -> Result<CurrentTerm, DecodeError> {
        Self::decode_reason(bytes).map_err(|reason| DecodeError::new(0, reason))
    }

    fn decode_reason(bytes: &[u8]) -> Result<CurrentTerm, DecodeReason> {
        if bytes.len() != CURRENT_TERM_LEN {
            return Err(DecodeReason::WrongLength(bytes.len()));
        }
        let stored = le_u64(bytes, 0);
        let computed = checksum(Domain::CurrentTerm, bytes.get(8..).unwrap_or_default());
        if stored != computed {
            return Err(DecodeReason::BadChecksum { stored, computed });
        }
        let version = le_u32(bytes, 8);
        if version != CURRENT_TERM_VERSION {
            return Err(DecodeReason::UnsupportedVersion(version));
        }
        let flags = le_u32(bytes, 12);
        if flags & !FLAG_DELETED != 0 {
            return Err(DecodeReason::UnknownFlags(flags & !FLAG_DELETED));
        }
        let (term, first_term) = (le_u64(bytes, 16), le_u64(bytes, 24));
        if first_term > term {
            return Err(DecodeReason::FirstTermAboveTerm { first_term, term });
        }
        Ok(CurrentTerm {
            term,
            deleted: flags & FLAG_DELETED != 0,
            first_term,
            incarnation: le_u64(bytes, 32),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Re-seals `bytes` after a test edits a field, so the check after the checksum fires.
    fn reseal(mut bytes: [u8; 40]) -> [u8; 40] {
        let sum = checksum(Domain::CurrentTerm, bytes.get(8..).unwrap_or_default());
        bytes[0..8].copy_from_slice(&sum.to_le_bytes());
        bytes
    }

    #[test]
    fn round_trips() {
        for ct in [
            CurrentTerm {
                term: 0,
                deleted: false,
                first_term: 0,
                incarnation: 0,
            },
            CurrentTerm {
                term: 7,
                deleted: true,
                first_term: 3,
                incarnation: 0x1234_5678_9abc_def0,
            },
            CurrentTerm {
                term: u64::MAX,
                deleted: false,
                first_term: u64::MAX,
                incarnation: u64::MAX,
            },
        ] {
            assert_eq!(CurrentTerm::decode(&ct.encode()), Ok(ct));
        }
    }

    #[test]
    fn rejects_damage_and_unknown_fields() {
        let good = CurrentTerm {
            term: 9,
            deleted: false,
            first_term: 4,
            incarnation: 77,
        }
        .encode();
        let reason = |b: &[u8]| CurrentTerm::decode(b).map_err(|e| e.reason);

        assert_eq!(reason(&good[..39]), Err(DecodeReason::WrongLength(39)));
        // A version-1 record (32 bytes) is refused by its length.
        assert_eq!(reason(&good[..32]), Err(DecodeReason::WrongLength(32)));
        assert_eq!(
            reason(&[good.as_slice(), &[0]].concat()),
            Err(DecodeReason::WrongLength(41))
        );
        assert!(matches!(
            reason(&[0u8; 40]),
            Err(DecodeReason::BadChecksum { .. })
        ));
        for bit in 0..320 {
            let mut b = good;
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(reason(&b).is_err(), "bit {bit} flip undetected");
        }

        let mut b = good;
        b[8] = 1;
        assert_eq!(reason(&reseal(b)), Err(DecodeReason::UnsupportedVersion(1)));
        let mut b = good;
        b[12] = 0b110;
        assert_eq!(reason(&reseal(b)), Err(DecodeReason::UnknownFlags(0b110)));
        let mut b = good;
        b[24] = 10;
        assert_eq!(
            reason(&reseal(b)),
            Err(DecodeReason::FirstTermAboveTerm {
                first_term: 10,
                term: 9
            })
        );
    }

    #[test]
    fn another_domain_does_not_validate() {
        let mut b = CurrentTerm {
            term: 1,
            deleted: false,
            first_term: 0,
            incarnation: 1,
        }
        .encode();
        let sum = checksum(Domain::ManifestRecord, &b[8..]);
        b[0..8].copy_from_slice(&sum.to_le_bytes());
        assert!(CurrentTerm::decode(&b).is_err());
    }
}
