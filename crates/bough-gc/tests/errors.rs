//! GC's errors say what and where: a mapping page holding a slot that is no slot stops the
//! collection (nothing is deleted) with a [`GcError`] naming the data file and the mapping
//! page's offset in it. It named the manifest that reached the page, at an "offset" that
//! was the slot's raw value.

use std::sync::Arc;

use bough_catalog::Partition;
use bough_gc::error::GcError;
use bough_gc::{Pins, collect};
use bough_io::layout::{DataFileHeader, FRAME_HEADER_LEN, seal_page};
use bough_io::{ErrorKind, MemoryStorage, OpenOptions, Storage};
use bough_names::{BranchName, PartitionDir, TableName};
use bough_tree::btree::{Mutation, Op};
use bough_tree::cache::{CachedPage, PageCache};
use bough_tree::head::HeadConfig;
use bough_tree::page::kind;

const NOW: u64 = 1_700_000_000_000;
const PAGE: u32 = 4096;

fn open(storage: &MemoryStorage) -> Partition {
    Partition::open(
        Arc::new(storage.clone()) as Arc<dyn Storage>,
        PartitionDir::new(TableName::new("t").unwrap(), 0),
        HeadConfig {
            page_size: PAGE,
            file_pages: 64,
            preallocate: 64 * u64::from(PAGE),
            ..HeadConfig::default()
        },
        Arc::new(PageCache::new(1 << 20)),
        true,
        true,
    )
    .unwrap()
}

#[test]
fn an_invalid_slot_in_a_mapping_page_names_the_page() {
    let mem = MemoryStorage::new();
    let p = open(&mem);
    let mut main = p.open_head(&BranchName::main()).unwrap();
    let muts: Vec<Mutation> = (0..50u32)
        .map(|i| Mutation {
            key: format!("k{i:04}").into_bytes(),
            op: Op::Put {
                value: vec![7; 100],
                timestamp: NOW,
                expire_at: 0,
            },
        })
        .collect();
    main.commit(&muts, NOW).unwrap();
    main.checkpoint(NOW).unwrap();
    let s = main.snapshot();
    let root = s.mapping.root();
    let (file, offset) = s.files.locate(&s.ranges, root);
    let mut node = match s.files.read(&s.ranges, root).unwrap() {
        CachedPage::Mapping(n) => (*n).clone(),
        other => panic!("{other:?}"),
    };
    drop((s, main, p));
    assert_eq!(node.level, 0);
    let used = node
        .slots
        .iter()
        .position(|&r| r != 0)
        .expect("a mapped slot");
    // The free bit with a "next" beyond the id space: no slot decodes to that.
    node.slots[used] = (1 << 63) | (1 << 40);
    let payload = node.encode();
    let f = mem.open(&file, OpenOptions::write_create()).unwrap();
    let mut header = vec![0u8; PAGE as usize];
    f.read_at(0, &mut header).unwrap();
    let salt = DataFileHeader::decode(&header, &file).unwrap().salt();
    let mut page = vec![0u8; PAGE as usize];
    page[FRAME_HEADER_LEN..FRAME_HEADER_LEN + payload.len()].copy_from_slice(&payload);
    let index = u32::try_from(offset / u64::from(PAGE)).unwrap();
    seal_page(&mut page, salt, index, kind::MAPPING, payload.len()).unwrap();
    f.write_at(offset, &page).unwrap();
    f.sync().unwrap();

    let p = open(&mem);
    let before = mem.list("t.0").unwrap();
    let e = collect(p.files(), &Pins::default(), false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert!(
        matches!(&e, GcError::Page { file: f, offset: o, .. } if *f == file && *o == offset),
        "{e:?} does not name {file} at {offset}"
    );
    assert!(file.starts_with("t.0/data_"), "{file}");
    assert_eq!(e.location(), Some((file.as_str(), offset)));
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!(
            "corruption in {file} at offset {offset}: invalid mapping slot"
        )),
        "{shown}"
    );
    assert_eq!(mem.list("t.0").unwrap(), before, "nothing deleted");
}
