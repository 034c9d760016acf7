//! The envelope around every mutable or small object (manifests, archives, `CURRENT_TERM`):
//! a fixed header carrying the writer token that resolves ambiguous conditional writes and
//! the SEALED flag a new owner sets on the previous term's manifest. The payload is the
//! file's bytes exactly as the local backends store them — or, for an APPEND version of a
//! manifest chain, only the bytes one commit appended ([`AppendPayload`]). Data objects
//! carry no envelope (they are the data file's bytes, so page ranges can be read in place).
//!
//! Layout (little-endian), 48 bytes then the payload:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | checksum: CRC-64/NVME, domain `bough/object-envelope`, over bytes 8.. (payload included) |
//! | 8 | 4 | magic `BGOE` |
//! | 12 | 2 | version = 1 |
//! | 14 | 2 | flags: bit 0 = SEALED, bit 1 = APPEND (never both); other bits zero |
//! | 16 | 16 | writer token (u128) |
//! | 32 | 8 | payload length |
//! | 40 | 8 | reserved, zero |

use bough_io::IoError;
use bough_manifest::checksum::{Checksum, Domain};

/// Header length.
pub const ENVELOPE_HEADER: usize = 48;
const MAGIC: &[u8; 4] = b"BGOE";
const VERSION: u16 = 1;
const DOMAIN: Domain = Domain::Other("bough/object-envelope");
/// Flag: the object was sealed by a newer owner; its writer is fenced.
pub const FLAG_SEALED: u16 = 1;
/// Flag: a manifest version holding only what one commit appended to the version before
/// it (an [`AppendPayload`]), not the whole file.
pub const FLAG_APPEND: u16 = 2;
/// Length of an [`AppendPayload`]'s header.
pub const APPEND_HEADER: usize = 16;

/// A decoded envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// Flags (`FLAG_SEALED`).
    pub flags: u16,
    /// Who wrote this version.
    pub token: u128,
    /// The file's bytes.
    pub payload: Vec<u8>,
}

impl Envelope {
    /// Whether a newer owner sealed the object.
    pub fn sealed(&self) -> bool {
        self.flags & FLAG_SEALED != 0
    }

    /// Whether the payload is an [`AppendPayload`] rather than a whole file.
    pub fn appended(&self) -> bool {
        self.flags & FLAG_APPEND != 0
    }

    /// Serializes the envelope.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ENVELOPE_HEADER + self.payload.len());
        out.extend_from_slice(&[0u8; 8]);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        out.extend_from_slice(&self.token.to_le_bytes());
        out.extend_from_slice(&(self.payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&[0u8; 8]);
        out.extend_from_slice(&self.payload);
        let sum = Checksum::new(DOMAIN)
            .update(out.get(8..).unwrap_or_default())
            .finish();
        if let Some(head) = out.get_mut(..8) {
            head.copy_from_slice(&sum.to_le_bytes());
        }
        out
    }

    /// Parses and verifies an envelope; the error says what is wrong and where.
    pub fn decode(bytes: &[u8]) -> Result<Envelope, EnvelopeError> {
        if bytes.len() < ENVELOPE_HEADER {
            return Err(EnvelopeError::TooShort { len: bytes.len() });
        }
        if bytes.get(8..12) != Some(&MAGIC[..]) {
            return Err(EnvelopeError::BadMagic);
        }
        // The length was checked above: every fixed header field below is there.
        let u64_at = |o: usize| u64_le(bytes, o);
        let byte = |at: usize| bytes.get(at).copied().unwrap_or_default();
        let (covered, payload) = (
            bytes.get(8..).unwrap_or_default(),
            bytes.get(ENVELOPE_HEADER..).unwrap_or_default(),
        );
        let stored = u64_at(0);
        let computed = Checksum::new(DOMAIN).update(covered).finish();
        if stored != computed {
            return Err(EnvelopeError::BadChecksum { stored, computed });
        }
        let version = u16::from_le_bytes([byte(12), byte(13)]);
        if version != VERSION {
            return Err(EnvelopeError::UnknownVersion(version));
        }
        let flags = u16::from_le_bytes([byte(14), byte(15)]);
        if flags & !(FLAG_SEALED | FLAG_APPEND) != 0 {
            return Err(EnvelopeError::UnknownFlags(flags));
        }
        if flags & FLAG_SEALED != 0 && flags & FLAG_APPEND != 0 {
            return Err(EnvelopeError::SealedAndAppend);
        }
        let mut t = [0u8; 16];
        if let Some(token) = bytes.get(16..32) {
            t.copy_from_slice(token);
        }
        let len = u64_at(32);
        if u64_at(40) != 0 {
            return Err(EnvelopeError::ReservedNotZero);
        }
        let held = payload.len() as u64;
        if len != held {
            return Err(EnvelopeError::LengthMismatch { claimed: len, held });
        }
        Ok(Envelope {
            flags,
            token: u128::from_le_bytes(t),
            payload: payload.to_vec(),
        })
    }
}

/// Why an envelope (or the APPEND payload inside one) is refused: one variant per check.
/// [`EnvelopeError::offset`] says where in the object; the caller knows the object's key
/// ([`EnvelopeError::at`] makes the storage error naming both).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EnvelopeError {
    /// The object is shorter than the envelope header.
    TooShort { len: usize },
    /// Bytes 8..12 are not `BGOE`.
    BadMagic,
    /// The stored checksum does not match the bytes.
    BadChecksum { stored: u64, computed: u64 },
    /// A version this build does not read.
    UnknownVersion(u16),
    /// Flag bits this build does not know.
    UnknownFlags(u16),
    /// SEALED and APPEND together (a sealed version is never an append).
    SealedAndAppend,
    /// The reserved field is not zero.
    ReservedNotZero,
    /// The header's payload length is not what the object holds.
    LengthMismatch { claimed: u64, held: u64 },
    /// An APPEND payload shorter than its own header.
    AppendTooShort { len: usize },
    /// An APPEND payload storing more bytes than the append it describes.
    AppendStoresTooMuch { stored: usize, len: u64 },
    /// An APPEND whose end does not fit in 64 bits.
    AppendOverflows { offset: u64, len: u64 },
    /// An APPEND that does not start where the version before it ends.
    AppendMisplaced { offset: u64, file_end: u64 },
    /// An APPEND that makes the assembled file longer than the tier allows.
    AppendTooLong { len: u64, at: u64 },
}

impl EnvelopeError {
    /// The byte of the object the failed check read.
    pub fn offset(&self) -> u64 {
        let append = ENVELOPE_HEADER as u64;
        match self {
            EnvelopeError::TooShort { .. } | EnvelopeError::BadChecksum { .. } => 0,
            EnvelopeError::BadMagic => 8,
            EnvelopeError::UnknownVersion(_) => 12,
            EnvelopeError::UnknownFlags(_) | EnvelopeError::SealedAndAppend => 14,
            EnvelopeError::LengthMismatch { .. } => 32,
            EnvelopeError::ReservedNotZero => 40,
            EnvelopeError::AppendTooShort { .. }
            | EnvelopeError::AppendOverflows { .. }
            | EnvelopeError::AppendMisplaced { .. } => append,
            EnvelopeError::AppendStoresTooMuch { .. } | EnvelopeError::AppendTooLong { .. } => {
                append + 8
            }
        }
    }

    /// The storage error for this refusal in the object `key`: `Corruption` naming the key
    /// and the offset.
    pub fn at(self, key: &str) -> IoError {
        IoError::corruption(key, self.offset(), self.to_string())
    }
}

impl std::fmt::Display for EnvelopeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EnvelopeError::TooShort { len } => {
                write!(f, "object of {len} bytes is shorter than its envelope")
            }
            EnvelopeError::BadMagic => f.write_str("bad envelope magic"),
            EnvelopeError::BadChecksum { stored, computed } => write!(
                f,
                "envelope checksum mismatch (stored {stored:#018x}, computed {computed:#018x})"
            ),
            EnvelopeError::UnknownVersion(v) => write!(f, "unknown envelope version {v}"),
            EnvelopeError::UnknownFlags(x) => write!(f, "unknown envelope flags {x:#x}"),
            EnvelopeError::SealedAndAppend => {
                f.write_str("an envelope cannot be both SEALED and APPEND")
            }
            EnvelopeError::ReservedNotZero => f.write_str("envelope reserved field is not zero"),
            EnvelopeError::LengthMismatch { claimed, held } => write!(
                f,
                "envelope claims {claimed} payload bytes, object holds {held}"
            ),
            EnvelopeError::AppendTooShort { len } => {
                write!(
                    f,
                    "APPEND payload of {len} bytes is shorter than its header"
                )
            }
            EnvelopeError::AppendStoresTooMuch { stored, len } => {
                write!(
                    f,
                    "APPEND payload stores {stored} bytes of an append of {len}"
                )
            }
            EnvelopeError::AppendOverflows { offset, len } => {
                write!(f, "APPEND of {len} bytes at {offset} overflows")
            }
            EnvelopeError::AppendMisplaced { offset, file_end } => write!(
                f,
                "appends at {offset}, but the file before it ends at {file_end}"
            ),
            EnvelopeError::AppendTooLong { len, at } => {
                write!(f, "an append of {len} bytes at {at} is too long")
            }
        }
    }
}

impl std::error::Error for EnvelopeError {}

/// The little-endian u64 at `at` (the caller checked that 8 bytes are there).
fn u64_le(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(field) = bytes.get(at..at + 8) {
        b.copy_from_slice(field);
    }
    u64::from_le_bytes(b)
}

/// The payload of an APPEND manifest version: the bytes one commit appended to the file
/// at `offset`, `len` bytes long. Log records are padded to 4 KiB blocks with zeros, so the
/// zeros at the end are not stored (`bytes` is at most `len` long; the rest is zero).
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 8 | u64 LE: where the appended bytes start in the file (the length before them) |
/// | 8 | 8 | u64 LE: how many bytes were appended |
/// | 16 | n | the appended bytes without their trailing zeros (n ≤ the length above) |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendPayload<'a> {
    /// Where the appended bytes start.
    pub offset: u64,
    /// How many bytes were appended (stored bytes, then zeros).
    pub len: u64,
    /// The stored bytes.
    pub bytes: &'a [u8],
}

impl<'a> AppendPayload<'a> {
    /// The payload for `appended` written at `offset`, its trailing zeros left out.
    pub fn encode(offset: u64, appended: &[u8]) -> Vec<u8> {
        let kept = appended.len() - appended.iter().rev().take_while(|&&b| b == 0).count();
        let mut out = Vec::with_capacity(APPEND_HEADER + kept);
        out.extend_from_slice(&offset.to_le_bytes());
        out.extend_from_slice(&(appended.len() as u64).to_le_bytes());
        out.extend_from_slice(appended.get(..kept).unwrap_or_default());
        out
    }

    /// Parses an APPEND payload; the error says what is wrong.
    pub fn decode(payload: &'a [u8]) -> Result<AppendPayload<'a>, EnvelopeError> {
        if payload.len() < APPEND_HEADER {
            return Err(EnvelopeError::AppendTooShort { len: payload.len() });
        }
        let u64_at = |o: usize| u64_le(payload, o);
        let (offset, len) = (u64_at(0), u64_at(8));
        let bytes = payload.get(APPEND_HEADER..).unwrap_or_default();
        if bytes.len() as u64 > len {
            return Err(EnvelopeError::AppendStoresTooMuch {
                stored: bytes.len(),
                len,
            });
        }
        if offset.checked_add(len).is_none() {
            return Err(EnvelopeError::AppendOverflows { offset, len });
        }
        Ok(AppendPayload { offset, len, bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_payloads_drop_trailing_zeros_and_check_lengths() {
        let mut record = b"record".to_vec();
        record.resize(4096, 0);
        let p = AppendPayload::encode(8192, &record);
        assert_eq!(p.len(), APPEND_HEADER + 6);
        let d = AppendPayload::decode(&p).expect("decode");
        assert_eq!((d.offset, d.len, d.bytes), (8192, 4096, &b"record"[..]));
        assert!(AppendPayload::decode(&p[..APPEND_HEADER - 1]).is_err());
        let mut bad = p.clone();
        bad[8..16].copy_from_slice(&3u64.to_le_bytes());
        assert!(
            AppendPayload::decode(&bad).is_err(),
            "more bytes than appended"
        );
        let mut bad = p;
        bad[0..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(AppendPayload::decode(&bad).is_err(), "overflowing end");
        assert_eq!(AppendPayload::encode(0, &[0; 10]).len(), APPEND_HEADER);
    }

    #[test]
    fn sealed_and_append_together_are_refused() {
        let e = Envelope {
            flags: FLAG_SEALED | FLAG_APPEND,
            token: 1,
            payload: Vec::new(),
        };
        assert!(Envelope::decode(&e.encode()).is_err());
    }

    #[test]
    fn round_trip_and_damage() {
        let e = Envelope {
            flags: FLAG_SEALED,
            token: 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10,
            payload: b"hello".to_vec(),
        };
        let bytes = e.encode();
        assert_eq!(Envelope::decode(&bytes), Ok(e));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(Envelope::decode(&bad).is_err(), "flip at {i} accepted");
        }
        assert!(Envelope::decode(&bytes[..bytes.len() - 1]).is_err());
        assert_eq!(Envelope::decode(&[0u8; 64]), Err(EnvelopeError::BadMagic));
        let mut bad = bytes.clone();
        bad[8] ^= 1;
        let e = Envelope::decode(&bad).expect_err("bad magic");
        assert_eq!((e.clone(), e.offset()), (EnvelopeError::BadMagic, 8));
        let io = e.at("p.0/manifest_main_1");
        assert_eq!(
            io.to_string(),
            "corruption in p.0/manifest_main_1 at offset 8: bad envelope magic"
        );
    }
}
