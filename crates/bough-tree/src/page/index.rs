//! Index pages: `n` children and `n - 1` separator keys.
//!
//! Payload: `n u16 | child_0 u32 | (key_len varint | key | child_i u32) for i in 1..n`.
//! Child `i` holds the keys in `[key_i, key_{i+1})`; child 0 everything below `key_1`.
//! Separators are strictly increasing.

use super::{CodecError, Reader};
use bough_manifest::PageId;
use bough_manifest::varint;
use std::sync::OnceLock;

/// A decoded index page. The separators sit in one buffer: a lookup's binary search
/// reads a few neighbouring cache lines instead of following a pointer per separator (with
/// a `Vec` per separator, warm gets spent a quarter of their time in those misses).
#[derive(Debug, Clone, Default)]
pub struct IndexNode {
    /// The separators' bytes, back to back.
    key_bytes: Vec<u8>,
    /// `key_ends[i]` is where separator `i` ends in `key_bytes` (it starts where `i - 1`
    /// ends). Separator `i` is the lowest key of `children[i + 1]`.
    key_ends: Vec<u32>,
    pub children: Vec<PageId>,
    /// Built at the first lookup of a node (a cached node is looked up many times; one
    /// being built, never), dropped when a separator is added.
    heads: OnceLock<Heads>,
}

impl PartialEq for IndexNode {
    fn eq(&self, other: &Self) -> bool {
        (&self.key_bytes, &self.key_ends, &self.children)
            == (&other.key_bytes, &other.key_ends, &other.children)
    }
}

impl Eq for IndexNode {}

/// The separators as fixed-size integers for the binary search: the bytes every separator
/// of the node shares (`prefix`) are compared once, and each separator's next 8 bytes,
/// big-endian and zero-padded, decide most comparisons without a `memcmp` call (keys with
/// a long common prefix, as counters and timestamps make, spent a tenth of a warm get in
/// `memcmp`). Equal heads fall back to comparing the rest of the bytes.
#[derive(Debug, Clone, Default)]
struct Heads {
    prefix: usize,
    heads: Vec<u64>,
}

/// The first 8 bytes of `b` as a big-endian integer, zero-padded: heads order as the
/// bytes do, except that equal heads may hide a difference further on.
fn head_of(b: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let n = b.len().min(8);
    if let (Some(dst), Some(src)) = (buf.get_mut(..n), b.get(..n)) {
        dst.copy_from_slice(src);
    }
    u64::from_be_bytes(buf)
}

impl Heads {
    fn of(node: &IndexNode) -> Heads {
        let (first, last) = (
            node.first_key().unwrap_or_default(),
            node.last_key().unwrap_or_default(),
        );
        // Separators are sorted: what the first and the last share, all share.
        let prefix = first.iter().zip(last).take_while(|(a, b)| a == b).count();
        let heads = node
            .keys()
            .map(|k| head_of(k.get(prefix..).unwrap_or_default()))
            .collect();
        Heads { prefix, heads }
    }
}

impl IndexNode {
    /// A node of `keys` (separators, strictly increasing) over `children` (one more).
    pub fn new<K: AsRef<[u8]>>(keys: impl IntoIterator<Item = K>, children: Vec<PageId>) -> Self {
        let mut node = IndexNode {
            children,
            ..IndexNode::default()
        };
        for k in keys {
            node.push_key(k.as_ref());
        }
        node
    }

    /// Appends a separator (without its child).
    fn push_key(&mut self, key: &[u8]) {
        self.heads.take();
        self.key_bytes.extend_from_slice(key);
        self.key_ends.push(self.key_bytes.len() as u32);
    }

    /// Appends separator `key` and the child to its right.
    pub fn push(&mut self, key: &[u8], child: PageId) {
        self.push_key(key);
        self.children.push(child);
    }

    /// Appends `other`'s children after this node's, `sep` between them.
    pub fn append(&mut self, sep: &[u8], other: &IndexNode) {
        self.push_key(sep);
        for k in other.keys() {
            self.push_key(k);
        }
        self.children.extend_from_slice(&other.children);
    }

    /// How many separators (one less than children).
    pub fn key_count(&self) -> usize {
        self.key_ends.len()
    }

    /// Separator `i`: the lowest key of child `i + 1`.
    pub fn key(&self, i: usize) -> Option<&[u8]> {
        let end = *self.key_ends.get(i)? as usize;
        let start = match i.checked_sub(1) {
            Some(j) => *self.key_ends.get(j)? as usize,
            None => 0,
        };
        self.key_bytes.get(start..end)
    }

    /// The separators in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &[u8]> + ExactSizeIterator {
        (0..self.key_count()).map(|i| self.key(i).unwrap_or_default())
    }

    /// The first separator.
    pub fn first_key(&self) -> Option<&[u8]> {
        self.key(0)
    }

    /// The last separator.
    pub fn last_key(&self) -> Option<&[u8]> {
        self.key(self.key_count().checked_sub(1)?)
    }

    /// The child whose range holds `key`: the number of separators ≤ `key`.
    pub fn child_for(&self, key: &[u8]) -> usize {
        let h = self.heads.get_or_init(|| Heads::of(self));
        let shared = self
            .first_key()
            .and_then(|k| k.get(..h.prefix))
            .unwrap_or_default();
        let (mine, rest) = key.split_at(h.prefix.min(key.len()));
        // Every separator starts with `shared`: a key below or above it is below or above
        // them all.
        match crate::key_order::cmp(mine, shared) {
            std::cmp::Ordering::Less => return 0,
            std::cmp::Ordering::Greater => return self.key_count(),
            std::cmp::Ordering::Equal => {}
        }
        let want = head_of(rest);
        let (mut lo, mut hi) = (0, self.key_count());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let at_most = match h.heads.get(mid) {
                Some(&sep) if sep != want => sep < want,
                _ => self
                    .key(mid)
                    .and_then(|k| k.get(h.prefix..))
                    .is_some_and(|k| !crate::key_order::less(rest, k)),
            };
            if at_most {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Encoded size of a separator + child pointer.
    pub fn slot_len(key: &[u8]) -> usize {
        varint::encoded_len(key.len() as u64) + key.len() + 4
    }

    /// Encoded size of the whole node.
    pub fn encoded_len(&self) -> usize {
        2 + 4 + self.keys().map(Self::slot_len).sum::<usize>()
    }

    /// Encodes the node.
    #[expect(
        clippy::indexing_slicing,
        reason = "an index node always has keys.len() + 1 children, at least one"
    )]
    pub fn encode(&self) -> Vec<u8> {
        debug_assert_eq!(self.key_count() + 1, self.children.len());
        let mut out = Vec::with_capacity(self.encoded_len());
        out.extend_from_slice(&(self.children.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.children[0].to_le_bytes());
        for (k, c) in self.keys().zip(&self.children[1..]) {
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
        let mut node = IndexNode {
            key_bytes: Vec::with_capacity(payload.len()),
            key_ends: Vec::with_capacity(n.min(payload.len() / 5 + 1)),
            children: Vec::with_capacity(n.min(payload.len() / 4 + 1)),
            heads: OnceLock::new(),
        };
        node.children.push(r.u32()?);
        for _ in 1..n {
            let len = r.len(r.remaining())?;
            let key = r.bytes(len)?;
            if node.last_key().is_some_and(|prev| prev >= key) {
                return Err(CodecError("index separators out of order"));
            }
            node.push_key(key);
            node.children.push(r.u32()?);
        }
        if r.remaining() != 0 {
            return Err(CodecError("trailing bytes after index entries"));
        }
        Ok(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_route() {
        let node = IndexNode::new([b"b", b"d"], vec![10, 20, 30]);
        assert_eq!(node.keys().collect::<Vec<_>>(), [b"b", b"d"]);
        assert_eq!(
            (node.first_key(), node.last_key()),
            (Some(&b"b"[..]), Some(&b"d"[..]))
        );
        assert_eq!(node.key(2), None);
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

    /// The number of separators ≤ `key`, by plain comparison.
    fn naive_child_for(node: &IndexNode, key: &[u8]) -> usize {
        node.keys().filter(|k| *k <= key).count()
    }

    #[test]
    fn routing_by_heads_matches_plain_comparison() {
        // Shared prefixes of every length, keys shorter than the prefix, zero bytes (the
        // heads' padding), equal heads with later differences.
        let alphabet: &[&[u8]] = &[b"", b"\0", b"a", b"ab", b"k", b"key-000", b"key-0001"];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..400 {
            let mut keys = std::collections::BTreeSet::new();
            let n = 1 + next() % 24;
            let stem = alphabet[(next() % alphabet.len() as u64) as usize];
            while (keys.len() as u64) < n {
                let mut k = stem.to_vec();
                for _ in 0..next() % 12 {
                    k.push(b"\0\x01az\xff"[(next() % 5) as usize]);
                }
                keys.insert(k);
            }
            let node = IndexNode::new(&keys, (0..=n as u32).collect());
            let mut probes: Vec<Vec<u8>> = keys.iter().cloned().collect();
            for k in &keys {
                let mut longer = k.clone();
                longer.push(0);
                probes.push(longer);
                probes.push(k[..k.len() / 2].to_vec());
                if let Some(last) = k.last() {
                    let mut smaller = k.clone();
                    *smaller.last_mut().unwrap() = last.wrapping_sub(1);
                    probes.push(smaller);
                }
            }
            probes.extend([Vec::new(), vec![0], vec![0xff; 20], stem.to_vec()]);
            for p in probes {
                assert_eq!(
                    node.child_for(&p),
                    naive_child_for(&node, &p),
                    "round {round}: keys {keys:?}, probe {p:?}"
                );
            }
        }
    }

    #[test]
    fn hostile_bytes_never_panic() {
        let node = IndexNode::new(
            (1..30).map(|i| format!("k{i:03}").into_bytes()),
            (0..30).collect(),
        );
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
