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
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, CodecError> {
        let s = self.bytes(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, CodecError> {
        let s = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }

    pub(crate) fn varint(&mut self) -> Result<u64, CodecError> {
        let (v, n) =
            varint::get(&self.bytes[self.pos..]).map_err(|_| CodecError("bad varint in page"))?;
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

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or(CodecError("page truncated"))?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }
}
