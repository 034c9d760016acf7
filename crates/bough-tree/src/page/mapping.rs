//! Mapping pages: nodes of the radix tree that stores the page-mapping table.
//!
//! The table maps a logical page id to a [`MappingValue`]. It is stored as a radix tree of
//! fixed-fan-out pages so that a branch shares every unchanged node with its parent: creating a
//! branch copies one root address, not the table (see ARCHITECTURE.md, "paged mapping").
//!
//! Payload: `level u8 | reserved u8 (0) | n u16 | n × u64`. A level-0 node holds the values
//! of `fanout` consecutive logical ids; a level-k node holds the addresses of its children
//! (0 = absent). Trailing zero slots are not stored (`n` ≤ fanout).

use super::{CodecError, Reader};

/// Bytes before the slots.
const HEADER: usize = 4;

/// Number of slots per mapping page for a page payload capacity.
pub fn fanout(payload_capacity: usize) -> usize {
    (payload_capacity - HEADER) / 8
}

/// One decoded radix node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappingNode {
    pub level: u8,
    /// Exactly `fanout` slots (missing trailing slots are zero).
    pub slots: Vec<u64>,
}

impl MappingNode {
    /// An empty node.
    pub fn empty(level: u8, fanout: usize) -> Self {
        MappingNode {
            level,
            slots: vec![0; fanout],
        }
    }

    /// Encodes the node; debug builds check that it decodes back to itself.
    pub fn encode(&self) -> Vec<u8> {
        let out = self.encode_unchecked();
        // Debug builds prove every mapping page they write decodes to what was encoded.
        debug_assert!(
            Self::decode(&out, self.slots.len()).is_ok_and(|n| n == *self),
            "a mapping page does not decode to itself"
        );
        out
    }

    /// Encodes whatever the node holds, even contents every reader must refuse (a level
    /// past the limit, slots no address decodes from): for tests and fuzz targets that
    /// build hostile pages. The writer uses [`encode`](Self::encode).
    #[expect(
        clippy::indexing_slicing,
        reason = "n is the last used slot + 1, at most slots.len()"
    )]
    pub fn encode_unchecked(&self) -> Vec<u8> {
        let n = self
            .slots
            .iter()
            .rposition(|&s| s != 0)
            .map_or(0, |p| p + 1);
        let mut out = Vec::with_capacity(HEADER + 8 * n);
        out.push(self.level);
        out.push(0);
        out.extend_from_slice(&(n as u16).to_le_bytes());
        for s in &self.slots[..n] {
            out.extend_from_slice(&s.to_le_bytes());
        }
        out
    }

    /// Decodes a node; `fanout` comes from the partition's page size.
    pub fn decode(payload: &[u8], fanout: usize) -> Result<Self, CodecError> {
        let mut r = Reader::new(payload);
        let level = r.u8()?;
        if level > 8 {
            return Err(CodecError("mapping node level too deep"));
        }
        if r.u8()? != 0 {
            return Err(CodecError("mapping node reserved byte set"));
        }
        let n = r.u16()? as usize;
        if n > fanout {
            return Err(CodecError("mapping node has more slots than its fanout"));
        }
        let mut slots = vec![0u64; fanout];
        for slot in slots.iter_mut().take(n) {
            *slot = r.u64()?;
        }
        if r.remaining() != 0 {
            return Err(CodecError("trailing bytes after mapping slots"));
        }
        Ok(MappingNode { level, slots })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let f = fanout(4080);
        assert_eq!(f, 509);
        let mut node = MappingNode::empty(0, f);
        node.slots[0] = 5;
        node.slots[100] = 77;
        let bytes = node.encode();
        assert_eq!(bytes.len(), 4 + 8 * 101);
        assert_eq!(MappingNode::decode(&bytes, f).unwrap(), node);
        assert!(MappingNode::decode(&bytes, 50).is_err());
        assert!(MappingNode::decode(&bytes[..bytes.len() - 1], f).is_err());
    }
}
