//! Golden bytes of the tree page payloads: any change to these dumps is a format change.

use bough_tree::page::index::IndexNode;
use bough_tree::page::leaf::{self, Entry, ValueLoc};
use bough_tree::page::mapping::{MappingNode, fanout};

fn hex(bytes: &[u8]) -> String {
    let mut out = format!("len {}\n", bytes.len());
    for (i, row) in bytes.chunks(16).enumerate() {
        let h: Vec<String> = row.iter().map(|b| format!("{b:02x}")).collect();
        out.push_str(&format!("{:04x}: {}\n", i * 16, h.join(" ")));
    }
    out
}

#[test]
fn leaf_page() {
    let entries = vec![
        Entry {
            key: b"apple".to_vec(),
            timestamp: 1,
            expire_at: 0,
            value: ValueLoc::Inline(b"red".to_vec()),
        },
        Entry {
            key: b"apricot".to_vec(),
            timestamp: 300,
            expire_at: 1_700_000_000_000,
            value: ValueLoc::Inline(Vec::new()),
        },
        Entry {
            key: b"banana".to_vec(),
            timestamp: 2,
            expire_at: 0,
            value: ValueLoc::Overflow {
                len: 10_000,
                first: 42,
                pages: 3,
            },
        },
    ];
    let bytes = leaf::encode(&entries);
    assert_eq!(
        leaf::LeafView::new(&bytes).unwrap().entries().unwrap(),
        entries
    );
    insta::assert_snapshot!(hex(&bytes));
}

/// Tombstones: flag bit 2 (0x04), no value bytes; with an expiry (when the sweep purges
/// it) the flags are 0x06. The entries around them encode exactly as before.
#[test]
fn leaf_page_with_tombstones() {
    let entries = vec![
        Entry {
            key: b"apple".to_vec(),
            timestamp: 1,
            expire_at: 0,
            value: ValueLoc::Inline(b"red".to_vec()),
        },
        Entry {
            key: b"apricot".to_vec(),
            timestamp: 300,
            expire_at: 1_700_000_000_000,
            value: ValueLoc::Tombstone,
        },
        Entry {
            key: b"banana".to_vec(),
            timestamp: 2,
            expire_at: 0,
            value: ValueLoc::Tombstone,
        },
    ];
    let bytes = leaf::encode(&entries);
    assert_eq!(
        leaf::LeafView::new(&bytes).unwrap().entries().unwrap(),
        entries
    );
    insta::assert_snapshot!(hex(&bytes));
}

#[test]
fn index_page() {
    let node = IndexNode::new([b"m", b"t"], vec![7, 8, 0x0102_0304]);
    let bytes = node.encode();
    assert_eq!(IndexNode::decode(&bytes).unwrap(), node);
    insta::assert_snapshot!(hex(&bytes));
}

#[test]
fn mapping_page() {
    let f = fanout(4080);
    let mut node = MappingNode::empty(0, f);
    node.slots[0] = (5 << 24) | 1;
    node.slots[2] = (1 << 63) | 4;
    let bytes = node.encode();
    assert_eq!(MappingNode::decode(&bytes, f).unwrap(), node);
    insta::assert_snapshot!(hex(&bytes));
}
