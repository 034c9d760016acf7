//! Crafted key-tree pages: index pages with a valid checksum whose child is the page itself,
//! its parent, or a page of another level (what a buggy writer or a crafted file holds).
//! Every walk of the key tree — cursors, paging scans, floors, lookups, commits — must end
//! with `Corruption` naming the page, never loop, and never yield a key twice, out of
//! order, or miss keys without an error.
//!
//! The reliability harness's crafted-page class found the first of these (seed
//! 8159836752548247661): a cursor over an index page whose child is itself climbs back to
//! keys it already yielded, so a paging scan restarting from the cursor's next key never
//! ended.

use std::collections::BTreeMap;
use std::sync::Arc;

use bough_io::layout::{DataFileHeader, FRAME_HEADER_LEN, seal_page};
use bough_io::memory::MemoryStorage;
use bough_io::{OpenOptions, Storage};
use bough_manifest::PageId;
use bough_names::BranchName;
use bough_tree::btree::{self, Mutation, Op, TreeRead};
use bough_tree::cache::PageCache;
use bough_tree::error::TreeError;
use bough_tree::files::FileTable;
use bough_tree::head::{Head, HeadConfig, TreeSnapshot};
use bough_tree::page::index::IndexNode;
use bough_tree::page::kind;
use bough_tree::page::leaf::{Entry, ValueLoc};

const PAGE: u32 = 4096;

fn cfg() -> HeadConfig {
    HeadConfig {
        page_size: PAGE,
        file_pages: 1024,
        preallocate: 1024 * u64::from(PAGE),
        checkpoint_chunks: 4,
        manifest_rewrite_bytes: 256 * 1024,
        file_per_commit: false,
        ..HeadConfig::default()
    }
}

/// A fresh file table (and page cache) over the partition, so crafted pages are read.
fn files(mem: &MemoryStorage) -> Arc<FileTable> {
    let s: Arc<dyn Storage> = Arc::new(mem.clone());
    s.create_dir("t.0").unwrap();
    Arc::new(FileTable::new(
        s,
        "t.0".into(),
        PAGE,
        Arc::new(PageCache::new(1 << 20)),
        true,
    ))
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// A branch holding `n` keys with 100-byte values: with 4 KiB pages, 20,000 keys make a
/// root over a few index pages over the leaves.
fn build(n: usize) -> (MemoryStorage, BTreeMap<Vec<u8>, Vec<u8>>) {
    let mem = MemoryStorage::new();
    let mut head =
        Head::create(files(&mem), cfg(), BranchName::main(), 0, None, Vec::new()).expect("create");
    let mut model = BTreeMap::new();
    for chunk in (0..n).collect::<Vec<_>>().chunks(5_000) {
        let muts: Vec<Mutation> = chunk
            .iter()
            .map(|&i| {
                let value = format!("{i:0100}").into_bytes();
                model.insert(key(i), value.clone());
                Mutation {
                    key: key(i),
                    op: Op::Put {
                        value,
                        timestamp: 1,
                        expire_at: 0,
                    },
                }
            })
            .collect();
        head.commit(&muts, 1).expect("commit");
    }
    head.checkpoint(2).expect("checkpoint");
    drop(head);
    (mem, model)
}

fn open(mem: &MemoryStorage) -> Head {
    Head::open(files(mem), cfg(), BranchName::main(), 0).expect("open")
}

fn index(s: &TreeSnapshot, id: PageId) -> Arc<IndexNode> {
    match s.node(id).expect("page") {
        btree::Node::Index(n) => n,
        btree::Node::Leaf(_) => panic!("page {id} is a leaf"),
    }
}

/// Where page `id` is: (file, byte offset).
fn place(s: &TreeSnapshot, id: PageId) -> (String, u64) {
    let addr = s.mapping.addr(id, s).expect("mapped");
    let h = s.files.handle(&s.ranges, addr.file_id()).expect("file");
    (
        h.path.clone(),
        u64::from(addr.page_index()) * u64::from(PAGE),
    )
}

/// Rewrites index page `id` as `change` makes it, sealed with a valid checksum.
fn craft(mem: &MemoryStorage, id: PageId, change: impl FnOnce(&mut IndexNode)) {
    let head = open(mem);
    let s = head.snapshot();
    let mut n = (*index(&s, id)).clone();
    change(&mut n);
    let payload = n.encode();
    let (path, offset) = place(&s, id);
    let f = mem
        .open(&path, OpenOptions::write_create())
        .expect("open file");
    let mut header = vec![0u8; PAGE as usize];
    f.read_at(0, &mut header).expect("header");
    let salt = DataFileHeader::decode(&header, &path)
        .expect("header")
        .salt();
    let mut page = vec![0u8; PAGE as usize];
    page[FRAME_HEADER_LEN..FRAME_HEADER_LEN + payload.len()].copy_from_slice(&payload);
    let page_index = u32::try_from(offset / u64::from(PAGE)).expect("index");
    seal_page(&mut page, salt, page_index, kind::INDEX, payload.len()).expect("seal");
    f.write_at(offset, &page).expect("write");
    f.sync().expect("sync");
}

/// Asserts `e` is `Corruption` naming page `id`'s file and offset in snapshot `s`.
fn names_page(e: &TreeError, s: &TreeSnapshot, id: PageId, what: &str) {
    let (file, off) = place(s, id);
    match e {
        TreeError::Page {
            file: path, offset, ..
        } => assert!(
            *path == file && *offset == off,
            "{what}: {e} names {path} at {offset}, not page {id} ({file} at {off})"
        ),
        other => panic!("{what}: {other:?}, not Corruption"),
    }
}

/// The two forward walks of the key tree: the cursor that decodes a leaf on arrival and
/// the one that reads entries from the page as it goes; every crafted tree is walked with
/// both.
trait Walk: Sized {
    fn seek(s: &TreeSnapshot, key: Option<&[u8]>) -> Result<Self, TreeError>;
    fn next(&mut self, s: &TreeSnapshot) -> Result<Option<Entry>, TreeError>;
}

impl Walk for btree::Cursor {
    fn seek(s: &TreeSnapshot, key: Option<&[u8]>) -> Result<Self, TreeError> {
        btree::Cursor::seek(s, s.root, key)
    }
    fn next(&mut self, s: &TreeSnapshot) -> Result<Option<Entry>, TreeError> {
        self.next_entry(s)
    }
}

impl Walk for btree::ForwardCursor {
    fn seek(s: &TreeSnapshot, key: Option<&[u8]>) -> Result<Self, TreeError> {
        btree::ForwardCursor::seek(s, s.root, key)
    }
    fn next(&mut self, s: &TreeSnapshot) -> Result<Option<Entry>, TreeError> {
        self.next_entry(s)
    }
}

/// A full cursor scan with both walks: the keys it yields (each above the one before, or
/// the test fails) and how it ended, the same for both (or the test fails).
fn scan(s: &TreeSnapshot) -> (Vec<Vec<u8>>, Result<(), TreeError>) {
    let decoded = scan_with::<btree::Cursor>(s);
    let lazy = scan_with::<btree::ForwardCursor>(s);
    assert_eq!(decoded.0, lazy.0, "both walks yield the same keys");
    assert_eq!(
        decoded.1.as_ref().err().map(ToString::to_string),
        lazy.1.as_ref().err().map(ToString::to_string),
        "both walks end alike"
    );
    decoded
}

fn scan_with<W: Walk>(s: &TreeSnapshot) -> (Vec<Vec<u8>>, Result<(), TreeError>) {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut c = match W::seek(s, None) {
        Ok(c) => c,
        Err(e) => return (out, Err(e)),
    };
    loop {
        match c.next(s) {
            Ok(Some(e)) => {
                if let Some(prev) = out.last() {
                    assert!(
                        *prev < e.key,
                        "the cursor yielded {} after {}",
                        String::from_utf8_lossy(&e.key),
                        String::from_utf8_lossy(prev)
                    );
                }
                out.push(e.key);
            }
            Ok(None) => return (out, Ok(())),
            Err(e) => return (out, Err(e)),
        }
    }
}

/// A scan in pages of 64 keys, each restarting at the key the last one stopped at (how
/// the store's paged scans and the harness read a branch). The number of pages is
/// bounded: a scan that goes back to keys it already read would never end.
fn paged_scan(s: &TreeSnapshot, keys: usize) -> Result<usize, TreeError> {
    let decoded = paged_scan_with::<btree::Cursor>(s, keys);
    let lazy = paged_scan_with::<btree::ForwardCursor>(s, keys);
    assert_eq!(
        decoded.as_ref().map_err(ToString::to_string),
        lazy.as_ref().map_err(ToString::to_string),
        "both walks page alike"
    );
    decoded
}

fn paged_scan_with<W: Walk>(s: &TreeSnapshot, keys: usize) -> Result<usize, TreeError> {
    let mut begin: Option<Vec<u8>> = None;
    let mut read = 0;
    for _ in 0..keys / 64 + 2 {
        let mut c = W::seek(s, begin.as_deref())?;
        let mut n = 0;
        loop {
            let Some(e) = c.next(s)? else {
                return Ok(read);
            };
            if n == 64 {
                assert!(
                    begin.as_ref().is_none_or(|b| *b < e.key),
                    "the next page starts at {}, before this one did",
                    String::from_utf8_lossy(&e.key)
                );
                begin = Some(e.key);
                break;
            }
            n += 1;
            read += 1;
        }
    }
    panic!(
        "a paged scan of {keys} keys did not end within {} pages",
        keys / 64 + 2
    )
}

/// The walks that must all refuse the crafted tree; `id` is the crafted page, `routed` a
/// key whose lookup passes through the crafted child.
fn assert_refused(
    mem: &MemoryStorage,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    id: PageId,
    routed: &[u8],
) {
    let mut head = open(mem);
    let s = head.snapshot();
    let (keys, end) = scan(&s);
    let e = end.expect_err("a full scan of the crafted tree ends in an error");
    names_page(&e, &s, id, "the full scan");
    assert!(keys.iter().all(|k| model.contains_key(k)));
    let e = paged_scan(&s, model.len()).expect_err("a paged scan ends in an error");
    names_page(&e, &s, id, "the paged scan");
    // A lookup, a floor and a commit through the crafted child.
    let e = btree::get(s.as_ref(), s.root, routed).expect_err("a lookup through it fails");
    names_page(&e, &s, id, "the lookup");
    // Again: a kept node's check is skipped only once one has passed.
    let e = btree::get(s.as_ref(), s.root, routed).expect_err("a second lookup fails");
    names_page(&e, &s, id, "the second lookup");
    let e = btree::Cursor::floor(s.as_ref(), s.root, routed).expect_err("a floor fails");
    names_page(&e, &s, id, "the floor");
    let m = Mutation {
        key: routed.to_vec(),
        op: Op::Put {
            value: b"new".to_vec(),
            timestamp: 9,
            expire_at: 0,
        },
    };
    let e = head.commit(&[m], 9).expect_err("a commit through it fails");
    assert!(matches!(e, TreeError::Page { .. }), "{e:?}");
    // Keys routed elsewhere still read right.
    let first = model.keys().next().expect("keys");
    let got = btree::get(s.as_ref(), s.root, first).expect("lookup beside it");
    assert!(matches!(got.map(|e| e.value), Some(ValueLoc::Inline(v)) if v == model[first]));
}

#[test]
fn regression_a_scan_over_an_index_page_that_is_its_own_child_ends_in_corruption() {
    let (mem, model) = build(20_000);
    let s = open(&mem).snapshot();
    let root = s.root;
    let n = index(&s, root);
    assert!(n.children.len() >= 2, "the root has children");
    // Child 1's keys start at separator 0: they route back into the root.
    let routed = n.key(0).expect("a separator").to_vec();
    craft(&mem, root, |n| n.children[1] = root);
    assert_refused(&mem, &model, root, &routed);
}

#[test]
fn regression_a_scan_over_an_index_child_pointing_at_its_parent_ends_in_corruption() {
    let (mem, model) = build(20_000);
    let s = open(&mem).snapshot();
    let root = s.root;
    let top = index(&s, root);
    let mid = top.children[0];
    let m = index(&s, mid);
    assert!(
        matches!(s.node(m.children[0]).expect("child"), btree::Node::Leaf(_)),
        "a root over index pages over leaves"
    );
    let last = m.children.len() - 1;
    let routed = m.key(last - 1).expect("a separator").to_vec();
    craft(&mem, mid, |n| n.children[last] = root);
    assert_refused(&mem, &model, root, &routed);
}

#[test]
fn regression_a_leaf_where_an_index_page_belongs_is_a_child_level_mismatch() {
    let (mem, model) = build(20_000);
    let s = open(&mem).snapshot();
    let root = s.root;
    let top = index(&s, root);
    // Child 1 of the root (an index page) replaced by its own first leaf: every key that
    // leaf holds is in the range the root gives child 1, so only its level tells it from
    // the index page it stands for. Read as it is, a scan would skip the rest of that
    // subtree without an error.
    let leaf = index(&s, top.children[1]).children[0];
    craft(&mem, root, |n| n.children[1] = leaf);
    let head = open(&mem);
    let s = head.snapshot();
    let (keys, end) = scan(&s);
    let e = end.expect_err("the scan notices the leaf at the wrong level");
    names_page(&e, &s, leaf, "the full scan");
    assert!(e.to_string().contains("child level mismatch"), "{e}");
    assert!(keys.len() < model.len());
    let e = paged_scan(&s, model.len()).expect_err("a paged scan notices it too");
    names_page(&e, &s, leaf, "the paged scan");
    // Before the leaf the scan is exact.
    assert!(keys.iter().zip(model.keys()).all(|(a, b)| a == b));
}
