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

/// `entries` as a leaf payload, checked to decode back to them.
fn encode_leaf(entries: &[Entry]) -> Vec<u8> {
    let bytes = leaf::encode(entries);
    assert_eq!(
        leaf::LeafView::new(&bytes).unwrap().entries().unwrap(),
        entries
    );
    bytes
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
    let bytes = encode_leaf(&entries);
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
    let bytes = encode_leaf(&entries);
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

/// Entries `0..n` of the leaves below: every sixth a tombstone, every fifth expiring.
fn numbered_entries(n: u64) -> Vec<Entry> {
    (0..n)
        .map(|i| Entry {
            key: format!("key{:03}", i * 7).into_bytes(),
            timestamp: i + 1,
            expire_at: if i % 5 == 0 { 1_700_000_000_000 + i } else { 0 },
            value: if i % 6 == 5 {
                ValueLoc::Tombstone
            } else {
                ValueLoc::Inline(format!("v{i}").into_bytes())
            },
        })
        .collect()
}

/// Tree pages version 2: a restart point every 4 entries (6 entries: `r` = 2, at entries 0
/// and 4, which share nothing with the key before).
#[test]
fn leaf_page_restarts_every_four_entries() {
    let entries = numbered_entries(6);
    let bytes = encode_leaf(&entries);
    assert_eq!(&bytes[..4], &[6, 0, 2, 0]);
    insta::assert_snapshot!(hex(&bytes));
}

/// A leaf of tree pages version 1 (a restart point every 16 entries: 20 entries, `r` = 2),
/// as the version before wrote it: it reads the same, every key is found through its
/// restart block, and a key between two is not.
#[test]
fn a_leaf_of_tree_pages_version_1_reads_the_same() {
    const V1: &str = "140002000800af000006020180d095ffbc316b6579303030027630050100023702763104020003\
313402763204020004323102763305010005380276340402060685d095ffbc31333504020007343202763605010008\
390276370402000935360276380402000a36330276390402020b8ad095ffbc313730037631300501040c370402000d\
3834037631320402000e3931037631330501000f3803763134030302108fd095ffbc3131303503763135000600116b\
65793131320376313605010412390402001332360376313804020014333303763139";
    let bytes: Vec<u8> = (0..V1.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&V1[i..i + 2], 16).unwrap())
        .collect();
    let entries = numbered_entries(20);
    let view = leaf::LeafView::new(&bytes).unwrap();
    assert_eq!(view.entries().unwrap(), entries);
    for e in &entries {
        let got = view.get(&e.key).unwrap().map(|r| r.to_entry());
        assert_eq!(
            got.as_ref(),
            Some(e),
            "{:?}",
            String::from_utf8_lossy(&e.key)
        );
        let (floor, _) = view.seek_floor(&e.key).unwrap().unwrap();
        assert_eq!(&floor, e);
    }
    assert!(view.get(b"key008").unwrap().is_none());
    // Written now, the same entries take restarts every 4 (and so more bytes).
    let now = encode_leaf(&entries);
    assert_eq!(&now[..4], &[20, 0, 5, 0]);
}
