//! Issue 14 §1–2: operator mistakes must never lose or falsify data. A `CURRENT_TERM` that
//! names no manifest, a lost tombstone followed by a re-created name, a data file replaced
//! under its name — recovery, file creation, the page checksums and GC, driven through the
//! catalog on a memory store.

use std::sync::Arc;

use bough_catalog::Partition;
use bough_gc::{Pins, collect};
use bough_io::layout::{DataFileHeader, FileSalt, open_page, seal_page};
use bough_io::{ErrorKind, MemoryStorage, Storage};
use bough_manifest::CurrentTerm;
use bough_names::{BranchName, FileKind, PartitionDir, TableName, classify};
use bough_tree::btree::{self, Mutation, Op};
use bough_tree::cache::PageCache;
use bough_tree::head::{Head, HeadConfig};
use bough_tree::page::leaf::ValueLoc;

const NOW: u64 = 1_700_000_000_000;
const PAGE: usize = 4096;

fn open(storage: &MemoryStorage) -> Partition {
    let cfg = HeadConfig {
        page_size: PAGE as u32,
        file_pages: 16,
        preallocate: 16 * PAGE as u64,
        ..HeadConfig::default()
    };
    Partition::open(
        Arc::new(storage.clone()) as Arc<dyn Storage>,
        PartitionDir::new(TableName::new("t").unwrap(), 0),
        cfg,
        // A fresh cache per open: reads go to the files.
        Arc::new(PageCache::new(16 << 20)),
        true,
        true,
    )
    .unwrap()
}

fn bn(s: &str) -> BranchName {
    BranchName::new(s).unwrap()
}

fn put(head: &mut Head, prefix: &str, range: std::ops::Range<u32>, tag: &str) {
    let muts: Vec<Mutation> = range
        .map(|i| Mutation {
            key: format!("{prefix}{i:06}").into_bytes(),
            op: Op::Put {
                value: format!("{tag}:{i}:{}", "v".repeat(40)).into_bytes(),
                timestamp: NOW,
                expire_at: 0,
            },
        })
        .collect();
    head.commit(&muts, NOW).unwrap();
}

/// Every live entry of a head as `key=value`, or the first error.
fn read_all(head: &Head) -> bough_io::IoResult<Vec<String>> {
    let s = head.snapshot();
    let mut c = btree::Cursor::seek(s.as_ref(), s.root, None)?;
    let mut out = Vec::new();
    while let Some(e) = c.next_entry(s.as_ref())? {
        if e.is_tombstone() {
            continue;
        }
        let v = match e.value {
            ValueLoc::Inline(v) => String::from_utf8(v).unwrap(),
            other => panic!("unexpected overflow value {other:?}"),
        };
        out.push(format!(
            "{}={v}",
            String::from_utf8(e.key.to_vec()).unwrap()
        ));
    }
    Ok(out)
}

fn files(mem: &MemoryStorage) -> Vec<String> {
    mem.list("t.0").unwrap()
}

/// `main` with 40 keys and `feature` forked from it with 40 more; returns what `feature`
/// reads.
fn main_and_feature(mem: &MemoryStorage) -> Vec<String> {
    let p = open(mem);
    let mut main = p.open_head(&BranchName::main()).unwrap();
    put(&mut main, "m", 0..40, "main");
    let mut f = p.create_branch(&mut main, &bn("feature"), NOW).unwrap();
    put(&mut f, "f", 0..40, "feature");
    read_all(&f).unwrap()
}

fn write_current_term(mem: &MemoryStorage, branch: &str, ct: CurrentTerm) {
    mem.write_atomic(&format!("t.0/CURRENT_TERM.{branch}"), &ct.encode())
        .unwrap();
}

/// §1: a valid `CURRENT_TERM` naming a term no manifest has (restored from another backup,
/// copied from another store) made the next open delete every manifest of the branch below
/// it, the only one included; GC then freed the branch's data. Now recovery continues from
/// the newest manifest at a fresh term above both and deletes nothing before that manifest
/// exists. Fails on the old recovery: `manifest_feature_0` is deleted and `feature` cannot
/// be opened (`NotFound`).
#[test]
fn regression_current_term_ahead_of_every_manifest_deletes_nothing() {
    let mem = MemoryStorage::new();
    let want = main_and_feature(&mem);
    let foreign = CurrentTerm {
        term: 7,
        deleted: false,
        first_term: 0,
        incarnation: 0x5eed,
        expiry: bough_manifest::ExpiryHint::Unknown,
    };
    write_current_term(&mem, "feature", foreign);
    let p = open(&mem);
    let f = p.open_head(&bn("feature")).unwrap();
    assert!(
        f.term() > 7,
        "a fresh term above the record's: {}",
        f.term()
    );
    assert_eq!(read_all(&f).unwrap(), want);
    let ct = p.current_term(&bn("feature")).unwrap().unwrap();
    assert_eq!(ct.term, f.term());
    assert_eq!(
        ct.incarnation,
        f.incarnation(),
        "the manifests' incarnation"
    );
    drop(f);
    collect(p.files(), &Pins::default(), false).unwrap();
    drop(p);
    let p = open(&mem);
    assert_eq!(
        read_all(&p.open_head(&bn("feature")).unwrap()).unwrap(),
        want
    );
}

/// §1 with a tombstone: a foreign `CURRENT_TERM` saying the branch was deleted at the term
/// of its manifest made recovery finish a "deletion" nobody started. A tombstone only
/// deletes the manifests of the incarnation it names. Fails on the old recovery (the
/// manifest is deleted, the branch is gone).
#[test]
fn regression_foreign_tombstone_does_not_delete_a_live_branch() {
    let mem = MemoryStorage::new();
    let want = main_and_feature(&mem);
    write_current_term(
        &mem,
        "feature",
        CurrentTerm {
            term: 0,
            deleted: true,
            first_term: 0,
            incarnation: 0xf0e1,
            expiry: bough_manifest::ExpiryHint::Unknown,
        },
    );
    let p = open(&mem);
    let f = p.open_head(&bn("feature")).unwrap();
    assert_eq!(read_all(&f).unwrap(), want);
    assert!(p.branches().unwrap().contains(&bn("feature")));
}

/// A genuine deletion cut short after its tombstone still finishes: the manifests are of
/// the incarnation the tombstone names.
#[test]
fn interrupted_deletion_still_finishes() {
    let mem = MemoryStorage::new();
    main_and_feature(&mem);
    {
        let p = open(&mem);
        p.write_current_term(&bn("feature"), 0, true).unwrap();
    }
    let p = open(&mem);
    assert!(
        !files(&mem)
            .iter()
            .any(|n| n.starts_with("manifest_feature"))
    );
    assert_eq!(
        p.open_head(&bn("feature")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

/// §1, GC: a live `CURRENT_TERM` whose manifest is missing means the branch's state is
/// unknown; GC refuses (`Corruption`) and deletes nothing, so putting the manifest back
/// restores the branch whole. Fails on the old GC, which freed the branch's data files.
#[test]
fn regression_gc_never_frees_a_branch_whose_state_is_unknown() {
    let mem = MemoryStorage::new();
    let want = main_and_feature(&mem);
    let p = open(&mem);
    let path = "t.0/manifest_feature_0";
    let manifest = mem.read_file(path, 1 << 30).unwrap();
    mem.delete(path).unwrap();
    let before = files(&mem);
    let e = collect(p.files(), &Pins::default(), false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert!(e.to_string().contains("CURRENT_TERM.feature"), "{e}");
    assert_eq!(files(&mem), before, "GC deleted nothing");
    // Opening the branch reports the damage, not "no such branch".
    assert_eq!(
        p.open_head(&bn("feature")).unwrap_err().kind(),
        ErrorKind::Corruption
    );
    mem.create_new(path, &manifest).unwrap();
    drop(p);
    let p = open(&mem);
    assert_eq!(
        read_all(&p.open_head(&bn("feature")).unwrap()).unwrap(),
        want
    );
}

/// The issue's §2 sequence: `y` is created from `x`; `x` is deleted; its tombstone is lost
/// before GC runs; `x` is created again and written. The new `x` used to start at term 0
/// again, and creating its first data file deleted and rewrote `data_<id>_x_0`, which `y`
/// still reads — and since the page checksum bound only file id, branch and term, `y` read
/// the new bytes as its own: keys vanished without an error. Now the name continues above
/// every term it appears with and no data file is ever replaced. Fails before the fix (`y`
/// reads other data, or its keys are gone).
#[test]
fn regression_recreated_name_never_overwrites_pages_another_branch_reads() {
    let mem = MemoryStorage::new();
    let want_y;
    {
        let p = open(&mem);
        let mut main = p.open_head(&BranchName::main()).unwrap();
        put(&mut main, "m", 0..40, "main");
        let mut x = p.create_branch(&mut main, &bn("x"), NOW).unwrap();
        put(&mut x, "x", 0..60, "old-x");
        let y = p.create_branch(&mut x, &bn("y"), NOW).unwrap();
        want_y = read_all(&y).unwrap();
        drop((x, y));
        p.delete_branch(&bn("x")).unwrap();
    }
    // The tombstone is lost (an operator, or a directory restored from an older copy).
    mem.delete("t.0/CURRENT_TERM.x").unwrap();
    let old_x_files: Vec<(String, Vec<u8>)> = files(&mem)
        .into_iter()
        .filter(|n| matches!(classify(n), FileKind::Data(d) if d.branch.as_str() == "x"))
        .map(|n| {
            let bytes = mem.read_file(&format!("t.0/{n}"), 1 << 30).unwrap();
            (n, bytes)
        })
        .collect();
    assert!(!old_x_files.is_empty());
    let p = open(&mem);
    let mut main = p.open_head(&BranchName::main()).unwrap();
    let mut x = p.create_branch(&mut main, &bn("x"), NOW).unwrap();
    assert!(
        x.term() > 0,
        "the name continues above the old data files' term"
    );
    put(&mut x, "x", 0..60, "new-x");
    put(&mut x, "z", 0..60, "new-x");
    for (n, bytes) in &old_x_files {
        assert_eq!(
            &mem.read_file(&format!("t.0/{n}"), 1 << 30).unwrap(),
            bytes,
            "{n} was rewritten"
        );
    }
    let y = p.open_head(&bn("y")).unwrap();
    assert_eq!(read_all(&y).unwrap(), want_y);
    drop(y);
    collect(p.files(), &Pins::default(), false).unwrap();
    drop((x, main, p));
    let p = open(&mem);
    assert_eq!(read_all(&p.open_head(&bn("y")).unwrap()).unwrap(), want_y);
}

/// Rewrites every data file of `branch` as a file of another incarnation `other` would be:
/// the same payloads at the same indexes, sealed with that incarnation's salt; the header
/// is `other`'s too when `new_header`, else left as it was.
fn reincarnate(mem: &MemoryStorage, branch: &str, other: u64, new_header: bool) -> usize {
    let mut n_files = 0;
    for n in files(mem) {
        let FileKind::Data(d) = classify(&n) else {
            continue;
        };
        if d.branch.as_str() != branch {
            continue;
        }
        let path = format!("t.0/{n}");
        let mut bytes = mem.read_file(&path, 1 << 30).unwrap();
        let header = DataFileHeader::decode(&bytes, &path).unwrap();
        let (old, new) = (
            header.salt(),
            FileSalt::new(d.file_id, &d.branch, d.term, other),
        );
        assert_ne!(old, new);
        for (i, page) in bytes.chunks_exact_mut(PAGE).enumerate().skip(1) {
            let i = i as u32;
            let Ok((kind, payload)) = open_page(page, old, i, &path, 0) else {
                continue;
            };
            let payload = payload.to_vec();
            page[16..16 + payload.len()].copy_from_slice(&payload);
            seal_page(page, new, i, kind, payload.len()).unwrap();
        }
        if new_header {
            let mut h = header.clone();
            h.incarnation = other;
            bytes[..PAGE].copy_from_slice(&h.encode());
        }
        mem.delete(&path).unwrap();
        mem.create_new(&path, &bytes).unwrap();
        n_files += 1;
    }
    n_files
}

/// §2, the second guarantee: a page written by one incarnation of a name never validates as
/// a page of another, whatever happened to the file names. `y` reads pages of `x`'s files;
/// those files are replaced by files of another incarnation of `x` with the same names,
/// indexes and payloads (a re-created name writing them, or an older copy put back). Every
/// read of `y` must then fail with `Corruption` — with the header rewritten too (caught by
/// the header's incarnation) and without it (caught by every page checksum). Without the
/// incarnation in the salt, the re-sealed pages validated and `y` returned their data.
#[test]
fn regression_a_page_of_another_incarnation_never_validates() {
    for new_header in [false, true] {
        let mem = MemoryStorage::new();
        {
            let p = open(&mem);
            let mut main = p.open_head(&BranchName::main()).unwrap();
            put(&mut main, "m", 0..10, "main");
            let mut x = p.create_branch(&mut main, &bn("x"), NOW).unwrap();
            put(&mut x, "x", 0..60, "x");
            drop(p.create_branch(&mut x, &bn("y"), NOW).unwrap());
        }
        assert!(reincarnate(&mem, "x", 0xdead_beef, new_header) > 0);
        let p = open(&mem);
        let y = p.open_head(&bn("y")).unwrap();
        match read_all(&y) {
            Err(e) => assert_eq!(e.kind(), ErrorKind::Corruption, "{e}"),
            Ok(got) => panic!(
                "read {} entries through pages of another incarnation (new header: {new_header})",
                got.len()
            ),
        }
    }
}

/// A crash can leave a data file of the writer's own term above its durable high-water
/// mark (the commit that created it never reached the manifest). Creating a data file used
/// to delete and replace such a file; now nothing that exists is ever replaced: the writer
/// skips to an id above it. Fails before the fix (the file's bytes change).
#[test]
fn regression_new_data_file_never_replaces_an_existing_one() {
    let mem = MemoryStorage::new();
    {
        let p = open(&mem);
        let mut main = p.open_head(&BranchName::main()).unwrap();
        put(&mut main, "m", 0..10, "main");
    }
    let existing: Vec<u64> = files(&mem)
        .iter()
        .filter_map(|n| match classify(n) {
            FileKind::Data(d) => Some(d.file_id),
            _ => None,
        })
        .collect();
    let next = existing.iter().max().unwrap() + 1;
    let orphan = format!("t.0/data_{next}_main_0");
    let bytes = vec![0x5a; 2 * PAGE];
    mem.create_new(&orphan, &bytes).unwrap();
    let p = open(&mem);
    let mut main = p.open_head(&BranchName::main()).unwrap();
    put(&mut main, "n", 0..10, "after");
    assert_eq!(mem.read_file(&orphan, 1 << 20).unwrap(), bytes);
    assert!(main.max_file_id() > next);
    assert_eq!(read_all(&main).unwrap().len(), 20);
    drop(main);
    drop(p);
    let p = open(&mem);
    assert_eq!(
        read_all(&p.open_head(&BranchName::main()).unwrap())
            .unwrap()
            .len(),
        20
    );
}
