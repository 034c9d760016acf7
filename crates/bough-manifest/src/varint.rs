//! Unsigned LEB128 varints for on-disk structures.
//!
//! Encoding uses `varint-rs`. Decoding is guarded: `varint-rs` silently turns an overflowing
//! 10-byte encoding into `u64::MAX` and accepts overlong forms (`[0x80, 0x00]` for 0), so the
//! decoder below bounds the length itself and then requires the bytes to be exactly the
//! canonical encoding of the value it produced. On-disk varints are therefore canonical:
//! one value, one encoding — which keeps decode → encode the identity and lets fuzzers
//! check canonicality.

use varint_rs::{VarintReader, VarintWriter};

/// The longest canonical encoding of a `u64`.
pub const MAX_LEN: usize = 10;

/// Why a varint could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarintError {
    /// The input ended inside the varint.
    Truncated,
    /// The value does not fit in 64 bits.
    Overflow,
    /// A shorter encoding of the same value exists.
    NonCanonical,
}

impl std::fmt::Display for VarintError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VarintError::Truncated => "varint truncated",
            VarintError::Overflow => "varint overflows 64 bits",
            VarintError::NonCanonical => "varint is not canonically encoded",
        })
    }
}

impl std::error::Error for VarintError {}

/// Appends the canonical encoding of `value`.
pub fn put(out: &mut Vec<u8>, value: u64) {
    // Writing into a Vec cannot fail.
    let _ = out.write_u64_varint(value);
}

/// Number of bytes `value` encodes to.
pub fn encoded_len(value: u64) -> usize {
    let bits = 64 - (value | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Decodes one varint from the start of `input`; returns the value and the bytes consumed.
pub fn get(input: &[u8]) -> Result<(u64, usize), VarintError> {
    // Bound the scan ourselves: the terminating byte (high bit clear) must come within MAX_LEN.
    let len = match input.iter().take(MAX_LEN).position(|b| b & 0x80 == 0) {
        Some(pos) => pos + 1,
        None if input.len() < MAX_LEN => return Err(VarintError::Truncated),
        None => return Err(VarintError::Overflow),
    };
    let bytes = input.get(..len).ok_or(VarintError::Truncated)?;
    // The 10th byte may only carry the single top bit of a u64.
    if len == MAX_LEN && bytes.last().is_some_and(|&b| b > 1) {
        return Err(VarintError::Overflow);
    }
    let mut reader = std::io::Cursor::new(bytes);
    let value = reader
        .read_u64_varint()
        .map_err(|_| VarintError::Truncated)?;
    if encoded_len(value) != len {
        return Err(VarintError::NonCanonical);
    }
    Ok((value, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_edges() {
        for v in [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut buf = Vec::new();
            put(&mut buf, v);
            assert_eq!(buf.len(), encoded_len(v));
            assert_eq!(get(&buf), Ok((v, buf.len())));
        }
    }

    #[test]
    fn rejects_overflow_that_varint_rs_accepts() {
        let overflowing = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        let mut r = std::io::Cursor::new(&overflowing[..]);
        assert_eq!(
            r.read_u64_varint().unwrap(),
            u64::MAX,
            "varint-rs accepts it"
        );
        assert_eq!(get(&overflowing), Err(VarintError::Overflow));
        assert_eq!(get(&[0xff; 11]), Err(VarintError::Overflow));
    }

    #[test]
    fn rejects_overlong_and_truncated() {
        assert_eq!(get(&[0x80, 0x00]), Err(VarintError::NonCanonical));
        assert_eq!(get(&[0x81, 0x80, 0x00]), Err(VarintError::NonCanonical));
        assert_eq!(get(&[]), Err(VarintError::Truncated));
        assert_eq!(get(&[0x80]), Err(VarintError::Truncated));
    }
}
