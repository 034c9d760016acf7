//! Index pages: `n` children and `n - 1` separator keys.
//!
//! Payload: `n u16 | child_0 u32 | (key_len varint | key | child_i u32) for i in 1..n`.
//! Child `i` holds the keys in `[key_i, key_{i+1})`; child 0 everything below `key_1`.
//! Separators are strictly increasing.

use super::{CodecError, Reader};
use bough_manifest::PageId;
use bough_manifest::varint;

/// A decoded index page.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IndexNode {
    /// `keys[i]` is the lowest key of `children[i + 1]`.
    pub keys: Vec<Vec<u8>>,
    pub children: Vec<PageId>,
}

impl IndexNode {
    /// The child whose range holds `key`.
    pub fn child_for(&self, key: &[u8]) -> usize {
        self.keys.partition_point(|k| k.as_slice() <= key)
    }

    /// Encoded size of a separator + child pointer.
    pub fn slot_len(key: &[u8]) -> usize {
        varint::encoded_len(key.len() as u64) + key.len() + 4
    }

    /// Encoded size of the whole node.
    pub fn encoded_len(&self) -> usize {
        2 + 4 + self.keys.iter().map(|k| Self::slot_len(k)).sum::<usize>()
    }

    /// Encodes the node.
    pub fn encode(&self) -> Vec<u8> {
        debug_assert_eq!(self.keys.len() + 1, self.children.len());
        let mut out = Vec::with_capacity(self.encoded_len());
        out.extend_from_slice(&(self.children.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.children[0].to_le_bytes());
        for (k, c) in self.keys.iter().zip(&self.children[1..]) {
            varint::put(&mut out, k.len() as u64);
            out.extend_from_slice(k);
            out.extend_from_slice(&c.to_le_bytes());
        }
        // Debug builds prove every index page they write decodes to what was encoded.
        debug_assert!(
            Self::decode(&out).is_ok_and(|n| n == *self),
            "an index page does not decode to itself"
        );
        out
    }

    /// Decodes and validates a payload.
    pub fn decode(payload: &[u8]) -> Result<Self, CodecError> {
        let mut r = Reader::new(payload);
        let n = r.u16()? as usize;
        if n == 0 {
            return Err(CodecError("index page without children"));
        }
        let mut children = Vec::with_capacity(n.min(payload.len() / 4 + 1));
        let mut keys: Vec<Vec<u8>> = Vec::with_capacity(n.min(payload.len() / 5 + 1));
        children.push(r.u32()?);
        for _ in 1..n {
            let len = r.len(r.remaining())?;
            let key = r.bytes(len)?.to_vec();
            if keys.last().is_some_and(|prev| *prev >= key) {
                return Err(CodecError("index separators out of order"));
            }
            keys.push(key);
            children.push(r.u32()?);
        }
        if r.remaining() != 0 {
            return Err(CodecError("trailing bytes after index entries"));
        }
        Ok(IndexNode { keys, children })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_route() {
        let node = IndexNode {
            keys: vec![b"b".to_vec(), b"d".to_vec()],
            children: vec![10, 20, 30],
        };
        let bytes = node.encode();
        assert_eq!(bytes.len(), node.encoded_len());
        let back = IndexNode::decode(&bytes).unwrap();
        assert_eq!(back, node);
        assert_eq!(node.child_for(b"a"), 0);
        assert_eq!(node.child_for(b"b"), 1);
        assert_eq!(node.child_for(b"c"), 1);
        assert_eq!(node.child_for(b"d"), 2);
        assert_eq!(node.child_for(b"z"), 2);
    }

    #[test]
    fn hostile_bytes_never_panic() {
        let node = IndexNode {
            keys: (1..30).map(|i| format!("k{i:03}").into_bytes()).collect(),
            children: (0..30).collect(),
        };
        let bytes = node.encode();
        for i in 0..bytes.len() {
            let _ = IndexNode::decode(&bytes[..i]);
            let mut b = bytes.clone();
            b[i] ^= 0x55;
            let _ = IndexNode::decode(&b);
        }
        assert!(IndexNode::decode(&[0, 0]).is_err());
        assert!(IndexNode::decode(&[0xff, 0xff, 1, 2, 3, 4]).is_err());
    }
}
