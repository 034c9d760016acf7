//! The integrity check (`Store::check`, `bough::check`): each kind of damage is found, named
//! by its file and offset, with the snapshots it hurts; a healthy store is clean.

use std::sync::Arc;

use bough::check::{CheckOptions, Finding, Problem, Referent, Severity, check_storage};
use bough::io::{MemoryStorage, OpenOptions, Storage};
use bough::{Options, Store, WriteBatch};

const DIR: &str = "t.0";

/// A closed store in memory: `main` with two keys (one of them an overflow value), a branch
/// `b` forked from it.
fn store() -> MemoryStorage {
    let mem = MemoryStorage::new();
    let store = Store::builder(Options::in_memory())
        .memory(mem.clone())
        .open()
        .expect("open");
    let p = store.partition("t", 0).expect("partition");
    let main = p.branch("main").expect("main");
    let mut batch = WriteBatch::new();
    batch.put("k", "v");
    batch.put("big", vec![b'y'; 10_000]);
    main.write_blocking(batch).expect("write");
    // Into pages (the check walks pages; a fork would share the buffered writes by
    // reference to main's log).
    main.checkpoint_blocking().expect("checkpoint");
    p.create_branch("b", "main").expect("fork");
    let report = store.check(&CheckOptions::default()).expect("check");
    assert!(report.is_clean(true), "{report:?}");
    assert_eq!(
        report.partitions[0].keys, 4,
        "two keys on each of two heads"
    );
    store.close().expect("close");
    mem
}

fn check(mem: &MemoryStorage) -> Vec<Finding> {
    let storage: Arc<dyn Storage> = Arc::new(mem.clone());
    let r = check_storage(&storage, &CheckOptions::default()).expect("check");
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    r.partitions.into_iter().flat_map(|p| p.findings).collect()
}

fn data_files(mem: &MemoryStorage) -> Vec<String> {
    mem.list(DIR)
        .expect("list")
        .into_iter()
        .filter(|n| n.starts_with("data_"))
        .collect()
}

fn flip(mem: &MemoryStorage, path: &str, byte: u64) {
    let f = mem.open(path, OpenOptions::write_create()).expect("open");
    let mut b = [0u8; 1];
    f.read_at(byte, &mut b).expect("read");
    b[0] ^= 0xff;
    f.write_at(byte, &b).expect("write");
    f.sync().expect("sync");
}

#[test]
fn a_flipped_page_is_found_with_its_file_offset_and_every_referent() {
    let mem = store();
    let files = data_files(&mem);
    assert_eq!(files.len(), 1, "{files:?}");
    // Page 1 is the first page the commit wrote; both heads reference it.
    flip(&mem, &format!("{DIR}/{}", files[0]), 4096 + 100);
    let found = check(&mem);
    let bad: Vec<&Finding> = found
        .iter()
        .filter(|f| f.severity() == Severity::Error)
        .collect();
    assert_eq!(bad.len(), 1, "one finding per bad page: {found:#?}");
    assert_eq!(bad[0].file, files[0]);
    let Problem::BadPage {
        page,
        offset,
        referents,
        why,
    } = &bad[0].problem
    else {
        panic!("not a bad page: {:?}", bad[0]);
    };
    assert_eq!((*page, *offset), (1, 4096));
    assert!(why.contains("checksum"), "{why}");
    for branch in ["main", "b"] {
        assert!(
            referents
                .iter()
                .any(|r| matches!(r, Referent::Branch { branch: b, .. } if b == branch)),
            "{branch} missing from {referents:?}"
        );
    }
}

#[test]
fn a_missing_data_file_is_an_error_naming_it() {
    let mem = store();
    let files = data_files(&mem);
    mem.delete(&format!("{DIR}/{}", files[0])).expect("delete");
    let found = check(&mem);
    let missing: Vec<&Finding> = found
        .iter()
        .filter(|f| matches!(f.problem, Problem::MissingDataFile { .. }))
        .collect();
    assert_eq!(missing.len(), 1, "{found:#?}");
    assert_eq!(missing[0].file, files[0]);
    assert_eq!(missing[0].severity(), Severity::Error);
    let Problem::MissingDataFile { pages, first_by } = &missing[0].problem else {
        unreachable!()
    };
    assert!(
        *pages > 0 && first_by.starts_with("manifest_"),
        "{missing:?}"
    );
}

#[test]
fn a_torn_manifest_tail_is_a_warning_at_its_offset() {
    let mem = store();
    let path = format!("{DIR}/manifest_main_0");
    let len = mem.file_len(&path).expect("len");
    assert_eq!(len % 4096, 0);
    // A torn append: one block of non-zero bytes that is no intact record.
    let f = mem.open(&path, OpenOptions::write_create()).expect("open");
    let block: Vec<u8> = (0..4096).map(|i| (i % 251 + 1) as u8).collect();
    f.write_at(len, &block).expect("write");
    f.sync().expect("sync");
    let found = check(&mem);
    assert_eq!(
        found,
        vec![Finding {
            file: "manifest_main_0".into(),
            problem: Problem::DroppedTail { offset: len },
        }],
        "a warning and nothing else"
    );
    assert_eq!(found[0].severity(), Severity::Warning);
}

#[test]
fn a_torn_tail_kept_aside_and_a_stray_file_are_warnings() {
    let mem = store();
    mem.create_new(&format!("{DIR}/manifest_main_0.torn.8192.0"), &[7u8; 100])
        .expect("torn");
    mem.create_new(&format!("{DIR}/notes.txt"), b"hello")
        .expect("stray");
    let found = check(&mem);
    assert!(
        found.contains(&Finding {
            file: "manifest_main_0.torn.8192.0".into(),
            problem: Problem::TornTailKept {
                manifest: "manifest_main_0".into(),
                offset: 8192
            },
        }),
        "{found:#?}"
    );
    assert!(found.iter().any(|f| f.file == "notes.txt"
        && f.problem == Problem::UnknownFile
        && f.severity() == Severity::Warning));
    assert!(found.iter().all(|f| f.severity() == Severity::Warning));
}

#[test]
fn a_damaged_manifest_is_an_error_at_its_offset_and_other_branches_still_check() {
    let mem = store();
    flip(&mem, &format!("{DIR}/manifest_b_0"), 40);
    let found = check(&mem);
    let m: Vec<&Finding> = found.iter().filter(|f| f.file == "manifest_b_0").collect();
    assert!(
        matches!(
            m.as_slice(),
            [Finding {
                problem: Problem::ManifestUnreadable {
                    offset: Some(0),
                    ..
                },
                ..
            }]
        ),
        "{found:#?}"
    );
}

#[test]
fn the_check_runs_on_a_read_only_open_and_counts_the_gc_classes() {
    let mem = store();
    let store = Store::builder(Options::in_memory())
        .memory(mem.clone())
        .open_read_only()
        .expect("open");
    let opts = CheckOptions {
        gc: true,
        ..CheckOptions::default()
    };
    let r = store
        .partition("t", 0)
        .expect("partition")
        .check(&opts)
        .expect("check");
    assert!(r.findings.is_empty(), "{:?}", r.findings);
    let classes = r.files.expect("gc classes");
    assert_eq!(classes.referenced, r.data_files);
    assert_eq!((r.branches, r.snapshots, r.keys), (2, 3, 4), "{r:?}");
}
