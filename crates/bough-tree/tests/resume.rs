//! A writing open continues the last data file of its (branch, term) and folds a long
//! manifest log (`Head::prepare_for_writing`), on the in-memory backend: what is continued,
//! what never is, and that no byte already in a file is overwritten or taken for data.

use std::collections::BTreeMap;
use std::sync::Arc;

use bough_io::layout::{FileSalt, page_offset, seal_page};
use bough_io::memory::{CrashPolicy, MemoryStorage};
use bough_io::{OpenOptions, Storage};
use bough_names::BranchName;
use bough_tree::btree::{self, Mutation, Op};
use bough_tree::cache::PageCache;
use bough_tree::files::FileTable;
use bough_tree::head::{FOLD_LOG_BYTES, Head, HeadConfig, TreeSnapshot};
use bough_tree::page::leaf::ValueLoc;

const PAGE: u64 = 4096;

fn cfg() -> HeadConfig {
    HeadConfig {
        page_size: 4096,
        file_pages: 64,
        preallocate: 64 * 4096,
        checkpoint_chunks: 4,
        manifest_rewrite_bytes: 16 << 20,
        file_per_commit: false,
        ..HeadConfig::default()
    }
}

fn files(storage: &MemoryStorage) -> Arc<FileTable> {
    let s: Arc<dyn Storage> = Arc::new(storage.clone());
    if s.list_dirs().unwrap().iter().all(|d| d != "t.0") {
        s.create_dir("t.0").unwrap();
    }
    Arc::new(FileTable::new(
        s,
        "t.0".into(),
        4096,
        Arc::new(PageCache::new(1 << 20)),
        true,
    ))
}

fn put(k: &str, v: &[u8], ts: u64) -> Mutation {
    Mutation {
        key: k.as_bytes().to_vec(),
        op: Op::Put {
            value: v.to_vec(),
            timestamp: ts,
            expire_at: 0,
        },
    }
}

fn read_all(s: &TreeSnapshot) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut c = btree::Cursor::seek(s, s.root, None).unwrap();
    let mut out = BTreeMap::new();
    while let Some(e) = c.next_entry(s).unwrap() {
        let v = match e.value {
            ValueLoc::Inline(v) => v,
            ValueLoc::Overflow { first, pages, len } => s.read_overflow(first, pages, len).unwrap(),
            ValueLoc::Tombstone => continue,
        };
        out.insert(e.key, v);
    }
    out
}

/// The data files of `t.0`, sorted.
fn data_files(mem: &MemoryStorage) -> Vec<String> {
    let mut v: Vec<String> = mem
        .list("t.0")
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("data_"))
        .collect();
    v.sort();
    v
}

fn bytes(mem: &MemoryStorage, name: &str) -> Vec<u8> {
    mem.read_file(&format!("t.0/{name}"), 1 << 30).unwrap()
}

/// Opens `main` as the catalog's writing open does.
fn open_for_writing(mem: &MemoryStorage, c: HeadConfig) -> Head {
    let mut h = Head::open(files(mem), c, BranchName::main(), 0).unwrap();
    h.prepare_for_writing().unwrap();
    h
}

/// One process's worth: open, one put (an overflow value), close.
fn one_put(mem: &MemoryStorage, c: &HeadConfig, i: u64, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    let mut h = open_for_writing(mem, c.clone());
    let key = format!("key-{i:04}");
    let value = vec![b'a' + (i % 26) as u8; 9000];
    h.commit(&[put(&key, &value, i + 1)], i).unwrap();
    model.insert(key.into_bytes(), value);
    assert_eq!(read_all(&h.snapshot()), *model);
}

fn new_main(mem: &MemoryStorage, c: HeadConfig) -> Head {
    Head::create(files(mem), c, BranchName::main(), 0, None, Vec::new()).unwrap()
}

#[test]
fn writers_that_each_commit_once_share_one_file_and_a_short_manifest() {
    let mem = MemoryStorage::new();
    let c = cfg();
    drop(new_main(&mem, c.clone()));
    let mut model = BTreeMap::new();
    for i in 0..12 {
        one_put(&mem, &c, i, &mut model);
        // One file while it has room (12 commits × 4 pages + the header < 64 pages).
        assert_eq!(data_files(&mem), ["data_1_main_0"], "after put {i}");
    }
    let before = bytes(&mem, "data_1_main_0");
    one_put(&mem, &c, 12, &mut model);
    let after = bytes(&mem, "data_1_main_0");
    assert_eq!(
        after[..before.len()],
        before[..],
        "appended, nothing rewritten"
    );
    assert_eq!(after.len() as u64, before.len() as u64 + 4 * PAGE);
    // The file fills up: the next writer starts the next one, and so on.
    for i in 13..40 {
        one_put(&mem, &c, i, &mut model);
    }
    let names = data_files(&mem);
    assert!(names.len() >= 2 && names.len() <= 3, "{names:?}");
    // Forty commits' records never piled up: the manifest was folded at the opens.
    let manifest = mem.file_len("t.0/manifest_main_0").unwrap();
    assert!(manifest <= FOLD_LOG_BYTES + PAGE, "{manifest} B");
    let h = Head::open(files(&mem), c, BranchName::main(), 0).unwrap();
    assert_eq!(read_all(&h.snapshot()), model);
    // One version per commit (checkpoints count too), never reset by a fold.
    assert!(h.version() >= 40, "version {}", h.version());
}

#[test]
fn a_fold_keeps_the_state_the_version_and_uncheckpointed_changes() {
    let mem = MemoryStorage::new();
    // No checkpoint in this test: every change lives in the log, then in the overlay.
    let c = HeadConfig {
        checkpoint_chunks: 1 << 20,
        ..cfg()
    };
    let mut h = new_main(&mem, c.clone());
    let mut model = BTreeMap::new();
    for i in 0..20u64 {
        let key = format!("k{i:03}");
        h.commit(&[put(&key, format!("v{i}").as_bytes(), i + 1)], i)
            .unwrap();
        model.insert(key.into_bytes(), format!("v{i}").into_bytes());
    }
    let version = h.version();
    let long = mem.file_len("t.0/manifest_main_0").unwrap();
    assert!(long >= FOLD_LOG_BYTES, "{long} B");
    drop(h);
    let pages_before: Vec<(String, u64)> = data_files(&mem)
        .into_iter()
        .map(|n| {
            let l = mem.file_len(&format!("t.0/{n}")).unwrap();
            (n, l)
        })
        .collect();
    let mut h = open_for_writing(&mem, c.clone());
    assert_eq!(mem.file_len("t.0/manifest_main_0").unwrap(), PAGE);
    assert_eq!(h.version(), version);
    assert_eq!(read_all(&h.snapshot()), model);
    // No mapping page was written for it.
    for (n, l) in &pages_before {
        assert_eq!(mem.file_len(&format!("t.0/{n}")).unwrap(), *l, "{n}");
    }
    // It goes on from there, and what it folded reads the same after a power loss.
    h.commit(&[put("k999", b"after", 99)], 99).unwrap();
    model.insert(b"k999".to_vec(), b"after".to_vec());
    assert_eq!(h.version(), version + 1);
    drop(h);
    let (image, _) = mem.crash_image(CrashPolicy::DropAllUnsynced);
    let h = Head::open(files(&image), c, BranchName::main(), 0).unwrap();
    assert_eq!(read_all(&h.snapshot()), model);
    assert_eq!(h.version(), version + 1);
}

#[test]
fn a_crashed_commits_tail_is_skipped_never_overwritten_or_read() {
    let mem = MemoryStorage::new();
    let c = cfg();
    let mut h = new_main(&mem, c.clone());
    h.commit(&[put("a", b"1", 1)], 1).unwrap();
    drop(h);
    // What a commit that crashed before its manifest record leaves: a valid page of this
    // file at the next index (its checksum names the file and index), then a torn page.
    let name = "data_1_main_0";
    let len = mem.file_len(&format!("t.0/{name}")).unwrap();
    let next = u32::try_from(len / PAGE).unwrap();
    let salt = FileSalt::new(1, &BranchName::main(), 0, 0);
    let mut page = vec![0u8; PAGE as usize];
    page[16..20].copy_from_slice(b"junk");
    seal_page(&mut page, salt, next, 1, 4).unwrap();
    let mut tail = page.clone();
    tail.extend_from_slice(&[0xA5; 1000]);
    let f = mem
        .open(
            &format!("t.0/{name}"),
            OpenOptions {
                write: true,
                ..OpenOptions::default()
            },
        )
        .unwrap();
    f.write_at(page_offset(next, 4096), &tail).unwrap();
    f.sync().unwrap();
    drop(f);
    let before = bytes(&mem, name);

    let mut h = open_for_writing(&mem, c.clone());
    h.commit(&[put("b", b"2", 2)], 2).unwrap();
    drop(h);
    assert_eq!(data_files(&mem), [name], "the file was continued");
    let after = bytes(&mem, name);
    assert_eq!(after[..before.len()], before[..], "the tail is untouched");
    // The new pages start at the first whole page past the tail.
    let resumed_at = (before.len() as u64).div_ceil(PAGE) * PAGE;
    assert!(after.len() as u64 > resumed_at);
    assert!(
        after[before.len()..resumed_at as usize]
            .iter()
            .all(|&b| b == 0)
    );
    let h = Head::open(files(&mem), c, BranchName::main(), 0).unwrap();
    let snap = h.snapshot();
    let mut pages = Vec::new();
    snap.for_each_page(&mut |a| pages.push(a.page_index()))
        .unwrap();
    assert!(
        !pages.contains(&next) && !pages.contains(&(next + 1)),
        "{pages:?}"
    );
    assert_eq!(
        read_all(&snap),
        BTreeMap::from([
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"2".to_vec())
        ])
    );
}

#[test]
fn files_that_are_not_the_writers_own_last_one_are_never_continued() {
    // A damaged header: the file is left exactly as it was, the next commit starts a file.
    let mem = MemoryStorage::new();
    let mut h = new_main(&mem, cfg());
    h.commit(&[put("a", b"1", 1)], 1).unwrap();
    drop(h);
    let path = "t.0/data_1_main_0";
    let mut damaged = bytes(&mem, "data_1_main_0");
    damaged[40] ^= 0xff;
    mem.write_atomic(path, &damaged).unwrap();
    let mut h = Head::open(files(&mem), cfg(), BranchName::main(), 0).unwrap();
    assert!(!h.resume_last_file());
    assert_eq!(bytes(&mem, "data_1_main_0"), damaged);
    drop(h);

    // An orphan of a crashed commit above the manifest's high-water mark: never continued
    // (nothing references it), and new files go above it.
    let mem = MemoryStorage::new();
    let mut h = new_main(&mem, cfg());
    h.commit(&[put("a", b"1", 1)], 1).unwrap();
    drop(h);
    let orphan = vec![7u8; 8192];
    mem.create_new("t.0/data_2_main_0", &orphan).unwrap();
    let mut h = open_for_writing(&mem, cfg());
    h.commit(&[put("b", b"2", 2)], 2).unwrap();
    assert_eq!(h.active_file(), Some(3));
    assert_eq!(bytes(&mem, "data_2_main_0"), orphan);
    drop(h);

    // A full file is sealed for good: the next commit starts the next file.
    let mem = MemoryStorage::new();
    let small = HeadConfig {
        file_pages: 3,
        ..cfg()
    };
    let mut h = new_main(&mem, small.clone());
    h.commit(&[put("a", b"1", 1)], 1).unwrap();
    h.commit(&[put("b", b"2", 1)], 1).unwrap();
    drop(h);
    let full = bytes(&mem, "data_1_main_0");
    assert_eq!(full.len() as u64, 3 * PAGE);
    let mut h = open_for_writing(&mem, small);
    h.commit(&[put("c", b"3", 2)], 2).unwrap();
    assert_eq!(h.active_file(), Some(2));
    assert_eq!(bytes(&mem, "data_1_main_0"), full);
    assert_eq!(data_files(&mem).len(), 2);
    drop(h);

    // One file per commit (the object tier): never continued.
    let mem = MemoryStorage::new();
    let per_commit = HeadConfig {
        file_per_commit: true,
        ..cfg()
    };
    let mut h = new_main(&mem, per_commit.clone());
    h.commit(&[put("a", b"1", 1)], 1).unwrap();
    drop(h);
    let mut h = open_for_writing(&mem, per_commit);
    h.commit(&[put("b", b"2", 2)], 2).unwrap();
    assert_eq!(data_files(&mem).len(), 2);
}

#[test]
fn a_plain_open_continues_nothing() {
    // Only the writing open continues a file; `Head::open` alone (what tests and tools use)
    // leaves the last file as it is.
    let mem = MemoryStorage::new();
    let mut h = new_main(&mem, cfg());
    h.commit(&[put("a", b"1", 1)], 1).unwrap();
    drop(h);
    let mut h = Head::open(files(&mem), cfg(), BranchName::main(), 0).unwrap();
    assert_eq!(h.active_file(), None);
    h.commit(&[put("b", b"2", 2)], 2).unwrap();
    assert_eq!(data_files(&mem), ["data_1_main_0", "data_2_main_0"]);
}

#[test]
fn compacting_the_file_to_be_continued_moves_its_pages_to_another_file() {
    // The file a writing open would continue is not active until a commit writes to it:
    // compaction may still choose it, and then its pages go elsewhere and it is given up.
    let mem = MemoryStorage::new();
    let mut h = new_main(&mem, cfg());
    h.commit(&[put("a", b"1", 1), put("b", b"2", 1)], 1)
        .unwrap();
    h.commit(&[put("a", b"3", 2)], 2).unwrap();
    drop(h);
    let mut h = open_for_writing(&mem, cfg());
    assert_eq!(h.active_file(), None);
    let moved = h.relocate_files(&[1], 3).unwrap();
    assert!(moved > 0);
    assert_eq!(h.active_file(), Some(2));
    let live = h.live_pages_per_file().unwrap();
    assert!(!live.contains_key(&1), "{live:?}");
    h.commit(&[put("c", b"4", 4)], 4).unwrap();
    assert_eq!(h.active_file(), Some(2));
    assert!(!h.live_pages_per_file().unwrap().contains_key(&1));
    assert_eq!(
        read_all(&h.snapshot()),
        BTreeMap::from([
            (b"a".to_vec(), b"3".to_vec()),
            (b"b".to_vec(), b"2".to_vec()),
            (b"c".to_vec(), b"4".to_vec())
        ])
    );
}
