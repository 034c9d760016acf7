//! The catalog's errors say what and where: a damaged archive or `CURRENT_TERM` is a
//! [`CatalogError`] naming the file and the record's offset, said once (wrapping the
//! decoder's message printed "at offset 0: at offset 0:"), and a damaged page below a head
//! is the tree's error, kept whole inside.

use std::sync::Arc;

use bough_catalog::Partition;
use bough_catalog::error::CatalogError;
use bough_io::{ErrorKind, MemoryStorage, OpenOptions, Storage};
use bough_names::{BranchName, PartitionDir, TableName};
use bough_tree::btree::{Mutation, Op};
use bough_tree::cache::PageCache;
use bough_tree::head::HeadConfig;

const NOW: u64 = 1_700_000_000_000;

fn open(storage: &MemoryStorage) -> Partition {
    Partition::open(
        Arc::new(storage.clone()) as Arc<dyn Storage>,
        PartitionDir::new(TableName::new("t").unwrap(), 0),
        HeadConfig {
            page_size: 4096,
            file_pages: 64,
            preallocate: 64 * 4096,
            ..HeadConfig::default()
        },
        Arc::new(PageCache::new(1 << 20)),
        true,
        true,
    )
    .unwrap()
}

fn damage(mem: &MemoryStorage, path: &str, at: u64) {
    let f = mem.open(path, OpenOptions::write_create()).unwrap();
    f.write_at(at, &[0xa5; 4]).unwrap();
    f.sync().unwrap();
}

fn assert_says_once(e: &CatalogError, file: &str) {
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    let shown = e.to_string();
    assert!(
        shown.starts_with(&format!("corruption in {file} at offset 0: ")),
        "{shown}"
    );
    assert_eq!(shown.matches("at offset").count(), 1, "{shown}");
}

#[test]
fn a_damaged_archive_names_the_archive_and_the_record_offset() {
    let mem = MemoryStorage::new();
    let p = open(&mem);
    let mut main = p.open_head(&BranchName::main()).unwrap();
    main.commit(
        &[Mutation {
            key: b"k".to_vec(),
            op: Op::Put {
                value: b"v".to_vec(),
                timestamp: NOW,
                expire_at: 0,
            },
        }],
        NOW,
    )
    .unwrap();
    let archive = p.archive(&mut main, NOW, NOW).unwrap();
    let path = format!("t.0/{archive}");
    damage(&mem, &path, 20);
    let e = p.read_archive(&archive).unwrap_err();
    assert!(
        matches!(&e, CatalogError::Record { file, .. } if *file == path),
        "{e:?}"
    );
    assert_says_once(&e, &path);
}

#[test]
fn a_damaged_current_term_names_its_file() {
    let mem = MemoryStorage::new();
    let p = open(&mem);
    drop(p.open_head(&BranchName::main()).unwrap());
    let path = "t.0/CURRENT_TERM.main";
    damage(&mem, path, 8);
    let e = open(&mem).open_head(&BranchName::main()).unwrap_err();
    assert!(
        matches!(&e, CatalogError::Record { file, .. } if file == path),
        "{e:?}"
    );
    assert_says_once(&e, path);
}
