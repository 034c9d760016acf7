//! Byte-level helpers shared by the record codecs: a bounds-checked reader over untrusted
//! bytes and the matching writers.

use crate::error::DecodeReason;
use crate::varint;

/// A cursor over untrusted bytes. Every read checks the remaining length first, so no read
/// can panic or run past the slice.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeReason> {
        let (&first, rest) = self.buf.split_first().ok_or(DecodeReason::Truncated)?;
        self.buf = rest;
        Ok(first)
    }

    /// The next `len` bytes; `len` comes from the input, so it is compared with what is left
    /// before anything is sliced or allocated.
    pub(crate) fn bytes(&mut self, len: u64) -> Result<&'a [u8], DecodeReason> {
        let len = usize::try_from(len)
            .ok()
            .filter(|&n| n <= self.buf.len())
            .ok_or(DecodeReason::Truncated)?;
        let (head, rest) = self.buf.split_at(len);
        self.buf = rest;
        Ok(head)
    }

    pub(crate) fn varint(&mut self) -> Result<u64, DecodeReason> {
        let (value, used) = varint::get(self.buf)?;
        self.buf = self.buf.get(used..).unwrap_or_default();
        Ok(value)
    }

    /// A count of entries that each take at least `min_entry_len` bytes. A count the
    /// remaining bytes cannot hold is refused here, so callers may size allocations from it.
    pub(crate) fn count(&mut self, min_entry_len: usize) -> Result<usize, DecodeReason> {
        let count = self.varint()?;
        let max = self.buf.len() / min_entry_len.max(1);
        usize::try_from(count)
            .ok()
            .filter(|&n| n <= max)
            .ok_or(DecodeReason::CountTooLarge(count))
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Succeeds only if every byte was consumed.
    pub(crate) fn finish(self) -> Result<(), DecodeReason> {
        match self.buf.len() {
            0 => Ok(()),
            n => Err(DecodeReason::TrailingBytes(n)),
        }
    }
}

pub(crate) fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

pub(crate) fn put_varint(out: &mut Vec<u8>, v: u64) {
    varint::put(out, v);
}

/// Length-prefixed bytes (varint length).
pub(crate) fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Writes `bytes` at `at` in a buffer the caller sized to hold them (a header it reserved).
pub(crate) fn put_at(out: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = out.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

/// Reads a fixed-size little-endian field; the caller has checked the length.
pub(crate) fn le_u32(bytes: &[u8], at: usize) -> u32 {
    let mut b = [0u8; 4];
    if let Some(field) = bytes.get(at..at + 4) {
        b.copy_from_slice(field);
    }
    u32::from_le_bytes(b)
}

/// Reads a fixed-size little-endian field; the caller has checked the length.
pub(crate) fn le_u64(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(field) = bytes.get(at..at + 8) {
        b.copy_from_slice(field);
    }
    u64::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_refuses_oversized_lengths_and_counts() {
        let mut r = Reader::new(&[3, 1, 2]);
        assert_eq!(r.bytes(4), Err(DecodeReason::Truncated));
        assert_eq!(r.bytes(u64::MAX), Err(DecodeReason::Truncated));
        assert_eq!(r.count(1), Err(DecodeReason::CountTooLarge(3)));
        let mut r = Reader::new(&[2, 0, 0, 0, 0]);
        assert_eq!(r.count(2), Ok(2));
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(r.count(1), Err(DecodeReason::CountTooLarge(u64::MAX)));
        assert_eq!(
            Reader::new(&[1]).finish(),
            Err(DecodeReason::TrailingBytes(1))
        );
        assert_eq!(Reader::new(&[]).u8(), Err(DecodeReason::Truncated));
    }
}
