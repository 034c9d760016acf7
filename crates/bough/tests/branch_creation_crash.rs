//! A branch creation is acknowledged once its manifest is durable: its `CURRENT_TERM`
//! record's directory entry is left to the next directory sync (one sync fewer per
//! creation). A power loss right after the creation can lose that entry, or bring back the
//! tombstone of a deleted branch of the same name; recovery must then settle the branch
//! from its manifest, never lose it or show it deleted.

use std::sync::Arc;

use bough::io::{CrashPolicy, FaultInjector, FaultOp, MemoryStorage, RandomCrash, Storage};
use bough::{Branch, ManualClock, Options, Store, WriteBatch};

const T0: u64 = 1_700_000_000_000;
const DIR: &str = "t.0";

fn open(mem: &MemoryStorage, clock: &ManualClock) -> Store {
    Store::builder(Options::in_memory().maintenance_interval_ms(0))
        .memory(mem.clone())
        .clock(Arc::new(clock.clone()))
        .open()
        .expect("open")
}

fn put(b: &Branch, range: std::ops::Range<usize>, tag: &str) {
    let mut wb = WriteBatch::new();
    for i in range {
        wb.put(format!("k{i:03}"), format!("{tag}{i}"));
    }
    b.write_blocking(wb).expect("write");
}

/// Every key of `b`, with its value.
fn contents(b: &Branch) -> Vec<(String, String)> {
    b.scan_blocking(&bough::ScanOptions::default())
        .expect("scan")
        .entries
        .into_iter()
        .map(|e| {
            (
                String::from_utf8_lossy(&e.key).into_owned(),
                String::from_utf8_lossy(&e.value.value).into_owned(),
            )
        })
        .collect()
}

fn has_record(mem: &MemoryStorage, branch: &str) -> bool {
    let name = format!("CURRENT_TERM.{branch}");
    mem.list(DIR).expect("list").contains(&name)
}

#[test]
fn a_created_branch_whose_record_entry_is_lost_is_settled_from_its_manifest() {
    let mem = MemoryStorage::new();
    let clock = ManualClock::new(T0);
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).expect("partition");
    let main = p.branch("main").expect("main");
    put(&main, 0..40, "a");
    let expected = contents(&main);
    p.create_branch("dev", "main").expect("create");
    assert!(has_record(&mem, "dev"), "the record is written and visible");
    for (i, policy) in [
        CrashPolicy::DropAllUnsynced,
        CrashPolicy::KeepAllUnsynced,
        CrashPolicy::Random(RandomCrash::new(1)),
        CrashPolicy::Random(RandomCrash::new(2)),
    ]
    .into_iter()
    .enumerate()
    {
        let (image, _) = mem.crash_image(policy);
        if i == 0 {
            assert!(
                !has_record(&image, "dev"),
                "the power loss this test is about: the record's entry was not synced"
            );
        }
        let store = open(&image, &clock);
        let p = store.partition("t", 0).expect("partition");
        let dev = p
            .branch("dev")
            .unwrap_or_else(|e| panic!("{policy:?}: the acknowledged branch is gone: {e}"));
        assert_eq!(contents(&dev), expected, "{policy:?}");
        assert!(has_record(&image, "dev"), "{policy:?}: recovery wrote it");
        put(&dev, 40..41, "b");
        assert!(
            p.create_branch("dev", "main").is_err(),
            "{policy:?}: the name is taken"
        );
        drop((dev, p));
        store.close().expect("close");
    }
}

#[test]
fn a_reused_name_whose_tombstone_comes_back_is_settled_from_the_new_manifest() {
    let mem = MemoryStorage::new();
    let clock = ManualClock::new(T0);
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).expect("partition");
    let main = p.branch("main").expect("main");
    put(&main, 0..10, "a");
    let dev = p.create_branch("dev", "main").expect("create");
    put(&dev, 10..20, "old");
    drop(dev);
    p.delete_branch("dev").expect("delete");
    let tombstone = mem
        .read_file(&format!("{DIR}/CURRENT_TERM.dev"), 4096)
        .expect("the tombstone");
    put(&main, 20..30, "a");
    let expected = contents(&main);
    p.create_branch("dev", "main").expect("create again");
    for policy in [
        CrashPolicy::DropAllUnsynced,
        CrashPolicy::KeepAllUnsynced,
        CrashPolicy::Random(RandomCrash::new(3)),
    ] {
        let (image, _) = mem.crash_image(policy);
        if policy == CrashPolicy::DropAllUnsynced {
            let back = image.read_file(&format!("{DIR}/CURRENT_TERM.dev"), 4096);
            assert_eq!(
                back.ok(),
                Some(tombstone.clone()),
                "the power loss this test is about: the tombstone is back"
            );
        }
        let store = open(&image, &clock);
        let p = store.partition("t", 0).expect("partition");
        let dev = p
            .branch("dev")
            .unwrap_or_else(|e| panic!("{policy:?}: the new branch is gone: {e}"));
        assert_eq!(
            contents(&dev),
            expected,
            "{policy:?}: the new incarnation's state, nothing of the deleted one"
        );
        drop((dev, p));
        store.close().expect("close");
    }
}

fn open_local(dir: &std::path::Path, backend: bough::Backend, faults: FaultInjector) -> Store {
    Store::builder(
        Options::new(dir)
            .backend(backend)
            .maintenance_interval_ms(0),
    )
    .faults(faults)
    .open()
    .expect("open")
}

fn temp_files(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir.join(DIR))
        .expect("partition directory")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

/// On a local disk the record is written and synced on a thread of its own while the
/// manifest is, and renamed into place after the manifest's directory sync: two file
/// syncs and one directory sync per creation, nothing left behind.
#[test]
fn a_creation_on_a_local_disk_pays_two_file_syncs_and_one_directory_sync() {
    for backend in [bough::Backend::Pread, bough::Backend::IoUring] {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open_local(dir.path(), backend, FaultInjector::new());
        eprintln!("backend: {}", store.backend());
        let p = store.partition("t", 0).expect("partition");
        let main = p.branch("main").expect("main");
        put(&main, 0..40, "a");
        let expected = contents(&main);
        for i in 0..5 {
            let before = store.io_stats();
            p.create_branch(&format!("dev{i}"), "main").expect("create");
            let after = store.io_stats();
            assert_eq!(
                (
                    after.syncs - before.syncs,
                    after.dir_syncs - before.dir_syncs
                ),
                (2, 1),
                "{backend:?}: syncs of creation {i}"
            );
        }
        assert_eq!(temp_files(dir.path()), Vec::<String>::new());
        drop((main, p));
        store.close().expect("close");
        let store = open_local(dir.path(), backend, FaultInjector::new());
        let p = store.partition("t", 0).expect("partition");
        for i in 0..5 {
            let dev = p.branch(&format!("dev{i}")).expect("dev");
            assert_eq!(contents(&dev), expected, "{backend:?}: dev{i}");
        }
    }
}

/// A failed sync anywhere in a creation (the manifest's, the staged record's, the
/// directory's): an acknowledged branch is there after a reopen, an unacknowledged one is
/// there whole or not at all, no temporary file stays, and the name can be used.
#[test]
fn a_failed_sync_during_a_creation_on_a_local_disk_leaves_a_consistent_partition() {
    for skip in 0..4 {
        let dir = tempfile::tempdir().expect("tempdir");
        let faults = FaultInjector::new();
        let store = open_local(dir.path(), bough::Backend::Pread, faults.clone());
        let p = store.partition("t", 0).expect("partition");
        let main = p.branch("main").expect("main");
        put(&main, 0..40, "a");
        let expected = contents(&main);
        faults.fail_after(FaultOp::Sync, skip, 5 /* EIO */, u64::MAX);
        let created = p.create_branch("dev", "main").map(|_| ());
        faults.clear();
        drop((main, p));
        let _ = store.close();
        drop(store);
        let store = open_local(dir.path(), bough::Backend::Pread, FaultInjector::new());
        let p = store.partition("t", 0).expect("partition");
        let ctx = format!("sync {skip} failed, creation: {created:?}");
        match p.branch("dev") {
            Ok(dev) => assert_eq!(contents(&dev), expected, "{ctx}"),
            Err(e) => {
                assert!(
                    created.is_err(),
                    "{ctx}: the acknowledged branch is gone: {e}"
                );
                p.create_branch("dev", "main").expect("the name is free");
            }
        }
        assert_eq!(temp_files(dir.path()), Vec::<String>::new(), "{ctx}");
    }
}
