//! The `CURRENT_TERM.<branch>` record: a branch's current term, or its tombstone.

use bough_names::Term;

use crate::checksum::{Domain, checksum};
use crate::codec::{le_u32, le_u64};
use crate::error::{DecodeError, DecodeReason};

/// Size of a `CURRENT_TERM` record (version 3).
pub const CURRENT_TERM_LEN: usize = 48;

/// Size of a version-2 record, which has no expiry hint (still read; written as version 3).
pub const CURRENT_TERM_V2_LEN: usize = 40;

/// Format version of the `CURRENT_TERM` record.
pub const CURRENT_TERM_VERSION: u32 = 3;

/// Flag bit: the branch was deleted.
pub const FLAG_DELETED: u32 = 1;

/// Flag bit: bytes 40..48 hold an expiry hint.
pub const FLAG_EXPIRY_HINT: u32 = 2;

/// What a `CURRENT_TERM` record says about its branch's expiry, so that opening a partition
/// finds the branches due to expire without reading every manifest. The manifest's `POLICY`
/// stays the truth; the hint is never later than it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExpiryHint {
    /// Not recorded (a version-2 record, a tombstone, or a writer that did not know): read
    /// the manifest.
    #[default]
    Unknown,
    /// The branch has no expiry.
    Never,
    /// The branch expires at this instant (ms since the epoch) or later.
    NotBefore(u64),
}

impl ExpiryHint {
    /// The hint for a branch whose manifest records `expires_at_ms`.
    pub fn of(expires_at_ms: Option<u64>) -> ExpiryHint {
        match expires_at_ms {
            Some(at) if at != u64::MAX => ExpiryHint::NotBefore(at),
            _ => ExpiryHint::Never,
        }
    }

    /// The earlier of two hints (for a change whose old and new values may both be
    /// durable when a crash interrupts it).
    pub fn earlier(self, other: ExpiryHint) -> ExpiryHint {
        use ExpiryHint::*;
        match (self, other) {
            (Unknown, _) | (_, Unknown) => Unknown,
            (Never, x) | (x, Never) => x,
            (NotBefore(a), NotBefore(b)) => NotBefore(a.min(b)),
        }
    }
}

/// Contents of `CURRENT_TERM.<branch>`.
///
/// | bytes  | field                                                          |
/// |--------|----------------------------------------------------------------|
/// | 0..8   | `checksum(Domain::CurrentTerm, bytes[8..48])`, LE              |
/// | 8..12  | version = 3, LE                                                |
/// | 12..16 | flags, LE: bit 0 = deleted, bit 1 = expiry hint; others zero   |
/// | 16..24 | term, LE                                                       |
/// | 24..32 | first term of this incarnation, LE (≤ term)                     |
/// | 32..40 | incarnation id, LE (0 = unknown)                               |
/// | 40..48 | with bit 1: expiry hint, LE (`u64::MAX` = never); else zero    |
///
/// A version-2 record is the first 40 bytes of this layout (version 2, no bit 1): it is
/// read with an unknown expiry hint.
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
    /// When the branch can expire at the earliest (see [`ExpiryHint`]).
    pub expiry: ExpiryHint,
}

impl CurrentTerm {
    /// The record's 48 bytes (always version 3).
    pub fn encode(&self) -> [u8; CURRENT_TERM_LEN] {
        let mut out = [0u8; CURRENT_TERM_LEN];
        out[8..12].copy_from_slice(&CURRENT_TERM_VERSION.to_le_bytes());
        let mut flags = if self.deleted { FLAG_DELETED } else { 0 };
        let hint = match self.expiry {
            ExpiryHint::Unknown => 0,
            ExpiryHint::Never => u64::MAX,
            ExpiryHint::NotBefore(at) => at,
        };
        if self.expiry != ExpiryHint::Unknown {
            flags |= FLAG_EXPIRY_HINT;
        }
        out[12..16].copy_from_slice(&flags.to_le_bytes());
        out[16..24].copy_from_slice(&self.term.to_le_bytes());
        out[24..32].copy_from_slice(&self.first_term.to_le_bytes());
        out[32..40].copy_from_slice(&self.incarnation.to_le_bytes());
        out[40..48].copy_from_slice(&hint.to_le_bytes());
        let sum = checksum(Domain::CurrentTerm, &out[8..]);
        out[0..8].copy_from_slice(&sum.to_le_bytes());
        out
    }

    /// Decodes a whole `CURRENT_TERM` file (48 bytes, or 40 for version 2). Errors name
    /// offset 0.
    pub fn decode(bytes: &[u8]) -> Result<CurrentTerm, DecodeError> {
        Self::decode_reason(bytes).map_err(|reason| DecodeError::new(0, reason))
    }

    fn decode_reason(bytes: &[u8]) -> Result<CurrentTerm, DecodeReason> {
        let expected_version = match bytes.len() {
            CURRENT_TERM_LEN => CURRENT_TERM_VERSION,
            CURRENT_TERM_V2_LEN => 2,
            n => return Err(DecodeReason::WrongLength(n)),
        };
        let stored = le_u64(bytes, 0);
        let computed = checksum(Domain::CurrentTerm, bytes.get(8..).unwrap_or_default());
        if stored != computed {
            return Err(DecodeReason::BadChecksum { stored, computed });
        }
        let version = le_u32(bytes, 8);
        if version != expected_version {
            return Err(DecodeReason::UnsupportedVersion(version));
        }
        let flags = le_u32(bytes, 12);
        let known = if version == 2 {
            FLAG_DELETED
        } else {
            FLAG_DELETED | FLAG_EXPIRY_HINT
        };
        if flags & !known != 0 {
            return Err(DecodeReason::UnknownFlags(flags & !known));
        }
        let (term, first_term) = (le_u64(bytes, 16), le_u64(bytes, 24));
        if first_term > term {
            return Err(DecodeReason::FirstTermAboveTerm { first_term, term });
        }
        let expiry = match (version, flags & FLAG_EXPIRY_HINT != 0, le_u64(bytes, 40)) {
            (2, _, _) => ExpiryHint::Unknown,
            (_, false, 0) => ExpiryHint::Unknown,
            // Without the flag the field is zero: anything else is not what a writer wrote.
            (_, false, other) => return Err(DecodeReason::HintWithoutFlag(other)),
            (_, true, u64::MAX) => ExpiryHint::Never,
            (_, true, at) => ExpiryHint::NotBefore(at),
        };
        Ok(CurrentTerm {
            term,
            deleted: flags & FLAG_DELETED != 0,
            first_term,
            incarnation: le_u64(bytes, 32),
            expiry,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Re-seals `bytes` after a test edits a field, so the check after the checksum fires.
    fn reseal(mut bytes: [u8; 48]) -> [u8; 48] {
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
                expiry: ExpiryHint::Unknown,
            },
            CurrentTerm {
                term: 7,
                deleted: true,
                first_term: 3,
                incarnation: 0x1234_5678_9abc_def0,
                expiry: ExpiryHint::NotBefore(1_700_000_000_000),
            },
            CurrentTerm {
                term: u64::MAX,
                deleted: false,
                first_term: u64::MAX,
                incarnation: u64::MAX,
                expiry: ExpiryHint::Never,
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
            expiry: ExpiryHint::NotBefore(5),
        }
        .encode();
        let reason = |b: &[u8]| CurrentTerm::decode(b).map_err(|e| e.reason);

        assert_eq!(reason(&good[..47]), Err(DecodeReason::WrongLength(47)));
        // A version-1 record (32 bytes) is refused by its length.
        assert_eq!(reason(&good[..32]), Err(DecodeReason::WrongLength(32)));
        assert_eq!(
            reason(&[good.as_slice(), &[0]].concat()),
            Err(DecodeReason::WrongLength(49))
        );
        assert!(matches!(
            reason(&[0u8; 48]),
            Err(DecodeReason::BadChecksum { .. })
        ));
        assert!(matches!(
            reason(&[0u8; 40]),
            Err(DecodeReason::BadChecksum { .. })
        ));
        // The first 40 bytes of a version-3 record fail their checksum as a version-2 one.
        assert!(matches!(
            reason(&good[..40]),
            Err(DecodeReason::BadChecksum { .. })
        ));
        for bit in 0..384 {
            let mut b = good;
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(reason(&b).is_err(), "bit {bit} flip undetected");
        }

        let mut b = good;
        b[8] = 1;
        assert_eq!(reason(&reseal(b)), Err(DecodeReason::UnsupportedVersion(1)));
        let mut b = good;
        b[12] = 0b110;
        assert_eq!(reason(&reseal(b)), Err(DecodeReason::UnknownFlags(0b100)));
        // No hint flag, but a hint: not what any writer writes.
        let mut b = good;
        b[12] = 0;
        assert_eq!(reason(&reseal(b)), Err(DecodeReason::HintWithoutFlag(5)));
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

    /// A version-2 record (40 bytes, written before the expiry hint existed) still reads,
    /// with the hint unknown; it is rewritten as version 3.
    #[test]
    fn reads_version_2_records() {
        let mut v2 = [0u8; CURRENT_TERM_V2_LEN];
        v2[8..12].copy_from_slice(&2u32.to_le_bytes());
        v2[12..16].copy_from_slice(&FLAG_DELETED.to_le_bytes());
        v2[16..24].copy_from_slice(&9u64.to_le_bytes());
        v2[24..32].copy_from_slice(&4u64.to_le_bytes());
        v2[32..40].copy_from_slice(&77u64.to_le_bytes());
        let sum = checksum(Domain::CurrentTerm, &v2[8..]);
        v2[0..8].copy_from_slice(&sum.to_le_bytes());
        let ct = CurrentTerm::decode(&v2).expect("a version-2 record reads");
        assert_eq!(
            ct,
            CurrentTerm {
                term: 9,
                deleted: true,
                first_term: 4,
                incarnation: 77,
                expiry: ExpiryHint::Unknown,
            }
        );
        assert_eq!(ct.encode().len(), CURRENT_TERM_LEN);
        // Version 2 has no hint flag.
        v2[12] = 0b11;
        let sum = checksum(Domain::CurrentTerm, &v2[8..]);
        v2[0..8].copy_from_slice(&sum.to_le_bytes());
        assert_eq!(
            CurrentTerm::decode(&v2).map_err(|e| e.reason),
            Err(DecodeReason::UnknownFlags(0b10))
        );
        // A version-3 number in a 40-byte record is refused.
        v2[8] = 3;
        v2[12] = 0;
        let sum = checksum(Domain::CurrentTerm, &v2[8..]);
        v2[0..8].copy_from_slice(&sum.to_le_bytes());
        assert_eq!(
            CurrentTerm::decode(&v2).map_err(|e| e.reason),
            Err(DecodeReason::UnsupportedVersion(3))
        );
    }

    #[test]
    fn earlier_hint_is_the_lower_bound() {
        use ExpiryHint::*;
        assert_eq!(Never.earlier(NotBefore(5)), NotBefore(5));
        assert_eq!(NotBefore(7).earlier(NotBefore(5)), NotBefore(5));
        assert_eq!(Never.earlier(Never), Never);
        assert_eq!(Unknown.earlier(NotBefore(5)), Unknown);
        assert_eq!(ExpiryHint::of(None), Never);
        assert_eq!(ExpiryHint::of(Some(u64::MAX)), Never);
        assert_eq!(ExpiryHint::of(Some(3)), NotBefore(3));
    }

    #[test]
    fn another_domain_does_not_validate() {
        let mut b = CurrentTerm {
            term: 1,
            deleted: false,
            first_term: 0,
            incarnation: 1,
            expiry: ExpiryHint::Never,
        }
        .encode();
        let sum = checksum(Domain::ManifestRecord, &b[8..]);
        b[0..8].copy_from_slice(&sum.to_le_bytes());
        assert!(CurrentTerm::decode(&b).is_err());
    }
}
