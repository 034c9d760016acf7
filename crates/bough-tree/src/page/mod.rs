//! Page layouts of the tree: leaf (data) pages, index pages, overflow pages and mapping
//! pages. Each function here works on a page *payload* (the bytes after the frame header
//! that `bough-io` verifies), so it can be tested and fuzzed without any I/O.
//!
//! Every decoder treats its input as hostile: every length is checked against the bytes
//! that are left before it is used, and every failure is a [`CodecError`].

pub mod index;
pub mod leaf;
pub mod mapping;

use bough_manifest::varint;

/// Page types stored in the frame header's type byte.
pub mod kind {
    /// A leaf of the key tree.
    pub const LEAF: u8 = 1;
    /// An index (interior) page.
    pub const INDEX: u8 = 2;
    /// A piece of a value too large to live in a leaf.
    pub const OVERFLOW: u8 = 3;
    /// A page of the page-mapping table (a radix node).
    pub const MAPPING: u8 = 4;
    /// A leaf of the TTL index (the leaf layout; a distinct type so a diff of the key tree
    /// can tell the two trees' leaves apart from the page alone).
    pub const TTL_LEAF: u8 = 5;
}

/// Why a page payload could not be decoded. The caller adds the file and offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodecError(pub &'static str);

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for CodecError {}

/// A bounds-checked reader over a payload.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    pub(crate) fn at(bytes: &'a [u8], pos: usize) -> Result<Self, CodecError> {
        if pos > bytes.len() {
            return Err(CodecError("offset past the end of the page"));
        }
        Ok(Reader { bytes, pos })
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub(crate) fn u8(&mut self) -> Result<u8, CodecError> {
        let b = *self
            .bytes
            .get(self.pos)
            .ok_or(CodecError("page truncated"))?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn u16(&mut self) -> Result<u16, CodecError> {
        let s = self.bytes(2)?;
        let mut a = [0u8; 2];
        a.copy_from_slice(s);
        Ok(u16::from_le_bytes(a))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, CodecError> {
        let s = self.bytes(4)?;
        let mut a = [0u8; 4];
        a.copy_from_slice(s);
        Ok(u32::from_le_bytes(a))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, CodecError> {
        let s = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }

    /// One canonical LEB128 varint, decoded in one pass over its bytes (the hot path of
    /// every leaf search). Accepts exactly what [`varint::get`] accepts.
    pub(crate) fn varint(&mut self) -> Result<u64, CodecError> {
        // Lengths and small values are one byte: no loop for them.
        if let Some(&b) = self.bytes.get(self.pos)
            && b < 0x80
        {
            self.pos += 1;
            return Ok(u64::from(b));
        }
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        let (v, n) = decode_varint(rest)?;
        self.pos += n;
        Ok(v)
    }

    /// A varint that must fit in `usize` and be at most `max`.
    pub(crate) fn len(&mut self, max: usize) -> Result<usize, CodecError> {
        let v = self.varint()?;
        if v > max as u64 {
            return Err(CodecError("length out of bounds"));
        }
        Ok(v as usize)
    }

    /// The bytes from `start` to the current position (`start` ≤ the position).
    pub(crate) fn since(&self, start: usize) -> &'a [u8] {
        self.bytes
            .get(start.min(self.pos)..self.pos)
            .unwrap_or_default()
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or(CodecError("page truncated"))?;
        let s = self
            .bytes
            .get(self.pos..end)
            .ok_or(CodecError("page truncated"))?;
        self.pos = end;
        Ok(s)
    }
}

/// Decodes one canonical varint from the start of `input` in a single pass: the value and
/// the bytes it took. Refuses what `bough_manifest::varint::get` refuses — a truncated
/// encoding, one past 64 bits, and an overlong one (a zero final byte after the first).
pub(crate) fn decode_varint(input: &[u8]) -> Result<(u64, usize), CodecError> {
    const BAD: CodecError = CodecError("bad varint in page");
    let mut value = 0u64;
    for (i, &b) in input.iter().take(varint::MAX_LEN).enumerate() {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            // The 10th byte may carry only the top bit; a zero last byte has a shorter form.
            if (i == varint::MAX_LEN - 1 && b > 1) || (i > 0 && b == 0) {
                return Err(BAD);
            }
            return Ok((value, i + 1));
        }
    }
    Err(BAD)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(input: &[u8]) -> Option<(u64, usize)> {
        varint::get(input).ok()
    }

    #[test]
    fn one_pass_varint_agrees_with_the_manifest_decoder() {
        // Every input of up to two bytes, and a continuation byte before each of them.
        for a in 0..=255u8 {
            for input in [vec![a], vec![a, 0x80]] {
                assert_eq!(decode_varint(&input).ok(), reference(&input), "{input:?}");
            }
            for b in 0..=255u8 {
                for input in [vec![a, b], vec![0x80, a, b], vec![0xff, a, b]] {
                    assert_eq!(decode_varint(&input).ok(), reference(&input), "{input:?}");
                }
            }
        }
        // Canonical encodings round-trip; edges of every length, and long hostile runs.
        let mut x = 0x243f_6a88_85a3_08d3u64;
        for shift in 0..64 {
            for v in [1u64 << shift, (1u64 << shift) - 1, u64::MAX >> shift] {
                let mut buf = Vec::new();
                varint::put(&mut buf, v);
                assert_eq!(decode_varint(&buf), Ok((v, buf.len())));
                buf.push(0x55);
                assert_eq!(decode_varint(&buf), Ok((v, buf.len() - 1)));
            }
        }
        eprintln!("seed {x:#x}");
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 12) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|i| {
                    let b = (x >> (i * 5)) as u8;
                    if i + 1 < len { b | 0x80 } else { b }
                })
                .collect();
            assert_eq!(decode_varint(&bytes).ok(), reference(&bytes), "{bytes:?}");
        }
        assert!(decode_varint(&[]).is_err());
        assert!(decode_varint(&[0xff; 11]).is_err());
        assert!(
            decode_varint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]).is_err()
        );
        assert_eq!(
            decode_varint(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
            Ok((u64::MAX, 10))
        );
    }
}
