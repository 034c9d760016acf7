//! GC of write-ahead log files: a log file goes once no `LOG` reference of any state names it
//! and its writer cannot be about to name it; the one holding acknowledged, un-checkpointed
//! commits always stays, so a power loss right after GC loses nothing.

use std::collections::BTreeMap;

use bough::io::{CrashPolicy, MemoryStorage, Storage};
use bough::{Options, Store};

const DIR: &str = "t.0";

fn open(mem: &MemoryStorage) -> Store {
    let opts = Options::in_memory()
        .maintenance_interval_ms(0)
        .write_buffer_bytes(64 << 20);
    Store::builder(opts)
        .memory(mem.clone())
        .open()
        .expect("open")
}

fn logs(mem: &MemoryStorage) -> Vec<String> {
    let mut v: Vec<String> = mem
        .list(DIR)
        .expect("list")
        .into_iter()
        .filter(|n| n.starts_with("wal_"))
        .collect();
    v.sort();
    v
}

fn contents(store: &Store, branch: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let b = store.partition("t", 0).unwrap().branch(branch).unwrap();
    b.iter()
        .map(|kv| {
            let kv = kv.unwrap();
            (kv.key, kv.value.value)
        })
        .collect()
}

/// Four rounds of more than 1 MiB of buffered commits, each ended by a checkpoint (after
/// which a log file that large is left for a new one), leave several log files; GC deletes
/// the ones no state names and keeps the one in force, which still holds acknowledged
/// commits no checkpoint has applied; after a power loss right after GC every write is
/// back.
#[test]
fn gc_deletes_logs_nothing_names_and_keeps_the_one_holding_unapplied_commits() {
    let mem = MemoryStorage::new();
    let mut model = BTreeMap::new();
    for round in 0..4u32 {
        let store = open(&mem);
        let main = store.partition("t", 0).unwrap().branch("main").unwrap();
        for i in 0..20u32 {
            let k = format!("r{round}k{i:02}");
            let v = vec![b'a' + (i % 26) as u8; 60_000];
            main.put_blocking(&k, &v).unwrap();
            model.insert(k.into_bytes(), v);
        }
        main.checkpoint_blocking().unwrap();
        store.close().unwrap();
    }
    let before = logs(&mem);
    assert!(
        before.len() >= 3,
        "a new log file after each large checkpoint: {before:?}"
    );

    let store = open(&mem);
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    for i in 0..30u32 {
        let (k, v) = (format!("last{i:02}"), format!("w{i}"));
        main.put_blocking(&k, &v).unwrap();
        model.insert(k.into_bytes(), v.into_bytes());
    }
    // 64 MiB of buffer and no maintenance timer: these stay in the log only.
    let part = store.partition("t", 0).unwrap();

    let dry = part.gc_dry_run().unwrap();
    assert_eq!(
        logs(&mem).len(),
        before.len() + 1,
        "a dry run deletes nothing"
    );
    let dry_logs: Vec<&String> = dry.deleted_logs.iter().map(|(n, _)| n).collect();
    assert_eq!(dry_logs.len(), before.len(), "{dry_logs:?}");

    let report = part.gc().unwrap();
    let left = logs(&mem);
    assert_eq!(left.len(), 1, "only the log in force stays: {left:?}");
    assert!(
        !before.contains(&left[0]),
        "the log in force is this open's"
    );
    assert_eq!(report.deleted_logs.len(), before.len());
    for (name, _) in &report.deleted_logs {
        assert!(before.contains(name), "{name} was not an old log");
    }
    assert_eq!(contents(&store, "main"), model);

    let (image, _) = mem.crash_image(CrashPolicy::DropAllUnsynced);
    drop(store);
    let store = open(&image);
    assert_eq!(
        contents(&store, "main"),
        model,
        "after a power loss right after GC"
    );
    store.close().unwrap();
}

/// Deleting a branch whose writes were only in its log lets GC free that log; the parent's
/// log and data stay whole.
#[test]
fn gc_frees_the_logs_of_a_deleted_branch_and_keeps_the_parents() {
    let mem = MemoryStorage::new();
    let store = open(&mem);
    let part = store.partition("t", 0).unwrap();
    let main = part.branch("main").unwrap();
    main.put_blocking("a", "1").unwrap();
    let dev = part.create_branch("dev", "main").unwrap();
    for i in 0..10u32 {
        dev.put_blocking(format!("d{i}"), "x").unwrap();
    }
    main.put_blocking("b", "2").unwrap();
    assert!(
        logs(&mem).iter().any(|n| n.contains("_dev_")),
        "{:?}",
        logs(&mem)
    );
    drop(dev);
    part.delete_branch("dev").unwrap();
    part.gc().unwrap();
    let left = logs(&mem);
    assert!(!left.iter().any(|n| n.contains("_dev_")), "{left:?}");
    assert!(left.iter().any(|n| n.contains("_main_")), "{left:?}");
    let want: BTreeMap<Vec<u8>, Vec<u8>> = [
        (b"a".to_vec(), b"1".to_vec()),
        (b"b".to_vec(), b"2".to_vec()),
    ]
    .into();
    assert_eq!(contents(&store, "main"), want);
    let (image, _) = mem.crash_image(CrashPolicy::DropAllUnsynced);
    drop(store);
    let store = open(&image);
    assert_eq!(contents(&store, "main"), want);
}

/// A log file created by a live writer but not yet named by its manifest (a crash or a GC
/// between the two steps) is in flight: GC keeps it.
#[test]
fn gc_keeps_a_log_file_of_a_live_head_above_the_one_its_manifest_names() {
    let mem = MemoryStorage::new();
    let store = open(&mem);
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    main.put_blocking("a", "1").unwrap();
    let named = logs(&mem);
    assert_eq!(named.len(), 1, "{named:?}");
    // A file of the same (branch, term) with a higher id, as a writer leaves it between
    // creating a log file and syncing the record that names it.
    let next = bump_log_id(&named[0]);
    let f = mem
        .open(
            &format!("{DIR}/{next}"),
            bough::io::OpenOptions::write_new(4096),
        )
        .unwrap();
    f.write_at(0, &[0u8; 4096]).unwrap();
    f.sync().unwrap();
    let report = store.partition("t", 0).unwrap().gc().unwrap();
    assert!(
        report.kept_logs.iter().any(|(n, _)| *n == next),
        "{:?}",
        report.kept_logs
    );
    assert!(logs(&mem).contains(&next));
}

/// `wal_<id>_<branch>_<term>` with the id one higher.
fn bump_log_id(name: &str) -> String {
    let rest = name.strip_prefix("wal_").expect("a log name");
    let (id, tail) = rest.split_once('_').expect("an id");
    let id: u64 = id.parse().expect("a numeric id");
    format!("wal_{}_{tail}", id + 1)
}

/// The integrity check replays every log a manifest names: clean with buffered commits in
/// it, and an error naming the log file once a record before an intact one is damaged
/// (those commits were acknowledged: an open would refuse the branch too).
#[test]
fn check_replays_the_logs_manifests_name_and_reports_a_damaged_record() {
    let mem = MemoryStorage::new();
    let store = open(&mem);
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    for i in 0..5u32 {
        main.put_blocking(format!("k{i}"), "v").unwrap();
    }
    let report = store.check(&Default::default()).unwrap();
    assert!(report.is_clean(true), "{report:?}");
    let log = logs(&mem).pop().expect("a log file");
    // Records sit at 4 KiB boundaries: damage the first, so intact ones follow it.
    let path = format!("{DIR}/{log}");
    let mut bytes = mem.read_file(&path, 1 << 30).unwrap();
    bytes[40] ^= 0xff;
    let f = mem
        .open(
            &path,
            bough::io::OpenOptions {
                write: true,
                ..Default::default()
            },
        )
        .unwrap();
    f.write_at(0, &bytes[..4096]).unwrap();
    f.sync().unwrap();
    let report = store.check(&Default::default()).unwrap();
    let bad: Vec<_> = report
        .all()
        .filter(|(_, f)| matches!(f.problem, bough::check::Problem::LogUnreadable { .. }))
        .collect();
    assert_eq!(bad.len(), 1, "{report:?}");
    assert_eq!(bad[0].1.file, log);
    assert!(!report.is_clean(false));
}
