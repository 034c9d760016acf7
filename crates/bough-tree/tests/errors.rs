//! Errors of the tree layer say what and where: a damaged page is a [`TreeError`] naming the
//! data file (`t.0/data_…`) and the page's byte offset in it, however it is reached — a
//! lookup, a commit merging into the page, a mapping slot leading to nothing. Before the
//! tree had its own error, a leaf that failed while a commit merged into it, and a mapping
//! slot that held no page, were reported as `"<tree>"` / `"<mapping>"` at offset 0 (or at
//! the page id).

use std::sync::Arc;

use bough_io::layout::{DataFileHeader, FRAME_HEADER_LEN, seal_page};
use bough_io::memory::MemoryStorage;
use bough_io::{ErrorKind, OpenOptions, Storage};
use bough_manifest::{PageAddr, PageId};
use bough_names::BranchName;
use bough_tree::btree::{self, Mutation, Op};
use bough_tree::cache::PageCache;
use bough_tree::error::{Location, TreeError};
use bough_tree::files::FileTable;
use bough_tree::head::{Head, HeadConfig, TreeSnapshot};
use bough_tree::page::kind;

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

/// A fresh file table and page cache, so damaged pages are read from storage.
fn files(mem: &MemoryStorage) -> Arc<FileTable> {
    let s: Arc<dyn Storage> = Arc::new(mem.clone());
    s.create_dir("t.0").expect("dir");
    Arc::new(FileTable::new(
        s,
        "t.0".into(),
        PAGE,
        Arc::new(PageCache::new(1 << 20)),
        true,
    ))
}

fn put(k: &str) -> Mutation {
    Mutation {
        key: k.as_bytes().to_vec(),
        op: Op::Put {
            value: b"value".to_vec(),
            timestamp: 1,
            expire_at: 0,
        },
    }
}

/// A branch whose tree is one leaf (keys `a`, `c`), checkpointed so its mapping is on disk.
fn build() -> MemoryStorage {
    let mem = MemoryStorage::new();
    let mut head =
        Head::create(files(&mem), cfg(), BranchName::main(), 0, None, Vec::new()).expect("create");
    head.commit(&[put("a"), put("c")], 1).expect("commit");
    head.checkpoint(2).expect("checkpoint");
    mem
}

fn open(mem: &MemoryStorage) -> Head {
    Head::open(files(mem), cfg(), BranchName::main(), 0).expect("open")
}

/// Where the page at `addr` is: (file, byte offset).
fn place(s: &TreeSnapshot, addr: PageAddr) -> (String, u64) {
    let h = s.files.handle(&s.ranges, addr.file_id()).expect("file");
    (
        h.path.clone(),
        u64::from(addr.page_index()) * u64::from(PAGE),
    )
}

fn place_of(s: &TreeSnapshot, id: PageId) -> (String, u64) {
    place(s, s.mapping.addr(id, s).expect("mapped"))
}

/// Writes `payload` as the page at `offset` of `path`, sealed with a valid checksum.
fn write_page(mem: &MemoryStorage, path: &str, offset: u64, page_kind: u8, payload: &[u8]) {
    let f = mem
        .open(path, OpenOptions::write_create())
        .expect("open file");
    let mut header = vec![0u8; PAGE as usize];
    f.read_at(0, &mut header).expect("header");
    let salt = DataFileHeader::decode(&header, path)
        .expect("header")
        .salt();
    let mut page = vec![0u8; PAGE as usize];
    page[FRAME_HEADER_LEN..FRAME_HEADER_LEN + payload.len()].copy_from_slice(payload);
    let index = u32::try_from(offset / u64::from(PAGE)).expect("index");
    seal_page(&mut page, salt, index, page_kind, payload.len()).expect("seal");
    f.write_at(offset, &page).expect("write");
    f.sync().expect("sync");
}

fn assert_names(e: &TreeError, file: &str, offset: u64) {
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(e.location(), Some((file, offset)), "{e:?}");
    assert!(file.starts_with("t.0/data_"), "{file}");
    let shown = e.to_string();
    assert!(
        shown.contains(file) && shown.contains(&format!("offset {offset}")),
        "{shown}"
    );
    assert!(
        !shown.contains("<tree>") && !shown.contains("<mapping>"),
        "{shown}"
    );
}

/// A flipped bit in a leaf: the lookup's error names the leaf's data file and offset.
#[test]
fn a_flipped_bit_in_a_leaf_names_its_file_and_offset() {
    let mem = build();
    let (file, offset) = {
        let head = open(&mem);
        let s = head.snapshot();
        place_of(&s, s.root)
    };
    let f = mem.open(&file, OpenOptions::write_create()).expect("open");
    let mut b = [0u8; 1];
    f.read_at(offset + 100, &mut b).expect("read");
    f.write_at(offset + 100, &[b[0] ^ 0x10]).expect("flip");
    let head = open(&mem);
    let s = head.snapshot();
    let e = btree::get(s.as_ref(), s.root, b"a").expect_err("damaged");
    assert_names(&e, &file, offset);
}

/// A leaf whose header is sound but whose entry is not (an unknown flag byte), with a valid
/// checksum: a commit merging into it fails naming it. This said `"<tree>"` at offset 0.
#[test]
fn regression_a_commit_into_a_bad_leaf_names_the_leaf() {
    let mem = build();
    let (file, offset) = {
        let head = open(&mem);
        let s = head.snapshot();
        place_of(&s, s.root)
    };
    // count 1, restarts 1, the restart at byte 6; the entry: shared 0, unshared 1,
    // flags 0x80 (unknown), then junk.
    let payload = [1, 0, 1, 0, 6, 0, 0, 1, 0x80, 1, b'b', 0];
    write_page(&mem, &file, offset, kind::LEAF, &payload);
    let mut head = open(&mem);
    let e = head.commit(&[put("b")], 3).expect_err("damaged leaf");
    assert_names(&e, &file, offset);
}

/// A mapping page whose slot for the tree's root holds no page: the error names the
/// logical page and the mapping page (its data file and offset). This said `"<mapping>"`
/// at the page id.
#[test]
fn regression_an_unmapped_slot_names_the_mapping_page() {
    let mem = build();
    let (root, map_addr, file, offset, mut node) = {
        let head = open(&mem);
        let s = head.snapshot();
        let map_addr = s.mapping.root();
        let (file, offset) = place(&s, map_addr);
        let node = match s.files.read(&s.ranges, map_addr).expect("mapping page") {
            bough_tree::cache::CachedPage::Mapping(n) => (*n).clone(),
            other => panic!("{other:?}"),
        };
        (s.root, map_addr, file, offset, node)
    };
    assert_eq!(node.level, 0, "one level-0 mapping page");
    let fanout = node.slots.len();
    node.slots[root as usize % fanout] = 0;
    write_page(&mem, &file, offset, kind::MAPPING, &node.encode());
    let head = open(&mem);
    let s = head.snapshot();
    let e = btree::get(s.as_ref(), s.root, b"a").expect_err("unmapped root");
    match &e {
        TreeError::Slot {
            page,
            at: Some(Location { file: f, offset: o }),
            ..
        } => assert_eq!(
            (*page, f.as_str(), *o),
            (root, file.as_str(), offset),
            "{e}"
        ),
        other => panic!("{other:?} does not name the mapping page {map_addr}"),
    }
    assert_names(&e, &file, offset);
}

/// A manifest that does not decode says the offset once ("at offset 0: at offset 0:" was
/// a known wart of wrapping the decoder's message).
#[test]
fn regression_a_damaged_manifest_says_its_offset_once() {
    let mem = build();
    let path = "t.0/manifest_main_0";
    let f = mem.open(path, OpenOptions::write_create()).expect("open");
    f.write_at(20, &[0xff; 4]).expect("damage");
    f.sync().expect("sync");
    let e = Head::open(files(&mem), cfg(), BranchName::main(), 0).expect_err("damaged");
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert!(matches!(e, TreeError::Manifest { .. }), "{e:?}");
    let shown = e.to_string();
    assert!(
        shown.starts_with("corruption in t.0/manifest_main_0 at offset 0: "),
        "{shown}"
    );
    assert_eq!(shown.matches("at offset").count(), 1, "{shown}");
}
