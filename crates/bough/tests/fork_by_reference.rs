//! Forks by reference (ARCHITECTURE.md, "Forks"): creating a branch of a parent with
//! buffered writes writes nothing of the parent's — no checkpoint, no data page — and the
//! branch names the parent's log up to the fork. The branch sees exactly the writes
//! acknowledged before the fork, through reopens, power losses, the parent's deletion and
//! GC; merges with the parent find no false conflict; a fork of a fork works the same; and
//! once the parent checkpoints at the fork version, the branch shares its pages.

use bough::io::{CrashPolicy, MemoryStorage, Storage};
use bough::{MergeOptions, Options, ScanOptions, Store, WriteBatch};

fn opts() -> Options {
    Options::in_memory()
        .maintenance_interval_ms(0)
        .write_buffer_bytes(64 << 20)
}

fn open(mem: &MemoryStorage) -> Store {
    Store::builder(opts())
        .memory(mem.clone())
        .open()
        .expect("open")
}

fn key(i: u32) -> String {
    format!("key{i:06}")
}

/// Puts `keys` on `branch` in batches of 500, each value naming `tag`.
fn load(store: &Store, branch: &str, keys: std::ops::Range<u32>, tag: &str) {
    let b = store.partition("t", 0).unwrap().branch(branch).unwrap();
    let all: Vec<u32> = keys.collect();
    for chunk in all.chunks(500) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            batch.put(key(i), format!("{tag}-{i}"));
        }
        b.write_blocking(batch).unwrap();
    }
}

fn value(store: &Store, branch: &str, k: u32) -> Option<String> {
    store
        .partition("t", 0)
        .unwrap()
        .branch(branch)
        .unwrap()
        .get_blocking(key(k))
        .unwrap()
        .map(|kv| String::from_utf8(kv.value).unwrap())
}

/// Names of the data files in the partition's directory.
fn data_files(mem: &MemoryStorage) -> Vec<String> {
    let mut out = Vec::new();
    for d in mem.list_dirs().unwrap_or_default() {
        for n in mem.list(&d).unwrap_or_default() {
            if matches!(bough_names::classify(&n), bough_names::FileKind::Data(_)) {
                out.push(format!("{d}/{n}"));
            }
        }
    }
    out.sort();
    out
}

/// Bytes written by `create_branch("feature", "main")` after `n` buffered keys on main, and
/// whether it created a data file.
fn fork_cost(n: u32) -> (u64, bool) {
    let mem = MemoryStorage::new();
    let store = open(&mem);
    load(&store, "main", 0..n, "main");
    let files = data_files(&mem);
    let before = store.io_stats();
    store
        .partition("t", 0)
        .unwrap()
        .create_branch("feature", "main")
        .unwrap();
    let d = store.io_stats().since(&before);
    assert_eq!(
        value(&store, "feature", n - 1),
        Some(format!("main-{}", n - 1))
    );
    (d.write_bytes, data_files(&mem) != files)
}

#[test]
fn a_fork_of_a_buffered_parent_writes_nothing_of_the_parent_s() {
    let (small, small_files) = fork_cost(1_000);
    let (large, large_files) = fork_cost(40_000);
    eprintln!("[fork] bytes written: {small} after 1k buffered keys, {large} after 40k");
    assert!(!small_files && !large_files, "a fork wrote a data file");
    // The child's manifest and catalog records only: flat in the parent's buffer (40k
    // keys are about 1.3 MB of buffered writes; a checkpoint would write all of it).
    assert!(
        large <= small + 8192,
        "fork wrote {small} bytes after 1k buffered keys, {large} after 40k"
    );
}

#[test]
fn a_fork_sees_the_writes_before_it_and_none_after_through_reopens_and_power_loss() {
    let mem = MemoryStorage::new();
    let store = open(&mem);
    load(&store, "main", 0..3_000, "v1");
    let part = store.partition("t", 0).unwrap();
    part.create_branch("feature", "main").unwrap();
    // The parent goes on: overwrites, deletes, and more keys.
    load(&store, "main", 0..100, "v2");
    let main = part.branch("main").unwrap();
    main.delete_blocking(key(200)).unwrap();
    load(&store, "main", 3_000..3_100, "v2");
    let feature = part.branch("feature").unwrap();
    feature.put_blocking(key(5), "mine").unwrap();
    let check = |s: &Store, what: &str| {
        assert_eq!(value(s, "feature", 5).as_deref(), Some("mine"), "{what}");
        assert_eq!(value(s, "feature", 6).as_deref(), Some("v1-6"), "{what}");
        assert_eq!(
            value(s, "feature", 200).as_deref(),
            Some("v1-200"),
            "{what}"
        );
        assert_eq!(value(s, "feature", 3_050), None, "{what}");
        assert_eq!(value(s, "main", 6).as_deref(), Some("v2-6"), "{what}");
        assert_eq!(value(s, "main", 200), None, "{what}");
        let n = s
            .partition("t", 0)
            .unwrap()
            .branch("feature")
            .unwrap()
            .scan_blocking(&ScanOptions {
                limit: 100_000,
                ..ScanOptions::default()
            })
            .unwrap()
            .entries
            .len();
        assert_eq!(n, 3_000, "{what}");
    };
    check(&store, "live");
    // A power loss with nothing checkpointed: every write was acknowledged durable.
    let (image, _) = mem.crash_image(CrashPolicy::DropAllUnsynced);
    drop((main, feature, part));
    let crashed = open(&image);
    check(&crashed, "after a power loss");
    crashed.close().unwrap();
    store.close().unwrap();
    let reopened = open(&mem);
    check(&reopened, "after a clean close");
    reopened.close().unwrap();
}

#[test]
fn deleting_the_parent_and_collecting_keeps_what_the_fork_names() {
    let mem = MemoryStorage::new();
    let store = open(&mem);
    load(&store, "main", 0..2_000, "base");
    let part = store.partition("t", 0).unwrap();
    part.create_branch("dev", "main").unwrap();
    load(&store, "dev", 0..1_500, "dev");
    // `feature` forks `dev` with dev's writes buffered; dev is then deleted.
    part.create_branch("feature", "dev").unwrap();
    part.delete_branch("dev").unwrap();
    store.gc().unwrap();
    assert_eq!(value(&store, "feature", 10).as_deref(), Some("dev-10"));
    assert_eq!(
        value(&store, "feature", 1_900).as_deref(),
        Some("base-1900")
    );
    drop(part);
    // A crash right after GC, then a clean reopen and GC again.
    let (image, _) = mem.crash_image(CrashPolicy::DropAllUnsynced);
    let crashed = open(&image);
    assert_eq!(value(&crashed, "feature", 10).as_deref(), Some("dev-10"));
    crashed.gc().unwrap();
    assert_eq!(
        value(&crashed, "feature", 1_499).as_deref(),
        Some("dev-1499")
    );
    crashed.close().unwrap();
    store.close().unwrap();
    let reopened = open(&mem);
    reopened.gc().unwrap();
    assert_eq!(
        value(&reopened, "feature", 1_499).as_deref(),
        Some("dev-1499")
    );
    let report = reopened.check(&Default::default()).expect("check");
    assert!(report.is_clean(true), "{report:?}");
    reopened.close().unwrap();
}

#[test]
fn merging_a_fork_that_overwrote_inherited_keys_finds_no_false_conflict() {
    let store = Store::open(opts()).unwrap();
    load(&store, "main", 0..1_000, "base");
    let part = store.partition("t", 0).unwrap();
    part.create_branch("feature", "main").unwrap();
    // Both sides change different keys, some of them inherited from the buffer.
    load(&store, "feature", 0..10, "feature");
    load(&store, "main", 500..510, "main");
    let report = part
        .merge("feature", "main", MergeOptions::default())
        .expect("merge");
    assert!(report.conflicts.is_empty(), "{report:?}");
    assert_eq!(value(&store, "main", 3).as_deref(), Some("feature-3"));
    assert_eq!(value(&store, "main", 505).as_deref(), Some("main-505"));
    assert_eq!(value(&store, "main", 700).as_deref(), Some("base-700"));
    // And the other way, after both checkpoint.
    for b in ["main", "feature"] {
        part.branch(b).unwrap().checkpoint_blocking().unwrap();
    }
    let back = part
        .merge("main", "feature", MergeOptions::default())
        .expect("merge back");
    assert!(back.conflicts.is_empty(), "{back:?}");
    assert_eq!(value(&store, "feature", 505).as_deref(), Some("main-505"));
    assert!(part.diff("main", "feature").unwrap().is_empty());
}

#[test]
fn a_fork_of_a_fork_inherits_both_logs() {
    let mem = MemoryStorage::new();
    let store = open(&mem);
    load(&store, "main", 0..1_000, "main");
    let part = store.partition("t", 0).unwrap();
    part.create_branch("a", "main").unwrap();
    // `b` forks `a` before `a` writes anything: it names main's log, bounded by the fork.
    part.create_branch("b", "a").unwrap();
    load(&store, "a", 0..10, "a");
    part.create_branch("c", "a").unwrap();
    load(&store, "main", 0..1_000, "later");
    for (branch, k, want) in [
        ("a", 5, "a-5"),
        ("a", 50, "main-50"),
        ("b", 5, "main-5"),
        ("c", 5, "a-5"),
        ("c", 50, "main-50"),
    ] {
        assert_eq!(value(&store, branch, k).as_deref(), Some(want), "{branch}");
    }
    drop(part);
    store.close().unwrap();
    let reopened = open(&mem);
    assert_eq!(value(&reopened, "b", 999).as_deref(), Some("main-999"));
    assert_eq!(value(&reopened, "c", 5).as_deref(), Some("a-5"));
    reopened.close().unwrap();
}

/// The parent checkpoints at the fork version before its first write after it: the forks
/// then take that tree, so a diff of the two reads their divergence, not the inherited
/// writes (which would otherwise be in leaves of the fork's own).
#[test]
fn the_fork_shares_the_parent_s_checkpoint_of_the_inherited_writes() {
    let mem = MemoryStorage::new();
    let store = Store::builder(opts().cache_data_pages(false))
        .memory(mem.clone())
        .open()
        .unwrap();
    load(&store, "main", 0..20_000, "base");
    let part = store.partition("t", 0).unwrap();
    // Two forks at one version (they share one slot in the parent).
    for f in ["feature", "other"] {
        part.create_branch(f, "main").unwrap();
    }
    // The parent's first write after the forks checkpoints its tree at the fork first.
    part.branch("main")
        .unwrap()
        .put_blocking(key(1), "m")
        .unwrap();
    for f in ["feature", "other"] {
        let b = part.branch(f).unwrap();
        b.put_blocking(key(2), "f").unwrap();
        b.checkpoint_blocking().unwrap();
    }
    part.branch("main").unwrap().checkpoint_blocking().unwrap();
    drop(part);
    store.close().unwrap();
    let store = Store::builder(opts().cache_data_pages(false))
        .memory(mem.clone())
        .open()
        .unwrap();
    let part = store.partition("t", 0).unwrap();
    for b in ["main", "feature", "other"] {
        part.branch(b).unwrap();
    }
    for f in ["feature", "other"] {
        let before = store.io_stats();
        let d = part.diff("main", f).unwrap();
        let reads = store.io_stats().since(&before).reads;
        assert_eq!(d.len(), 2, "{f}: {d:?}");
        // Two changed leaves a side, the mapping pages on their paths and a file header:
        // 20k inherited keys are ~130 leaves, all shared.
        assert!(reads <= 16, "{f}: the diff read {reads} pages");
    }
    store.close().unwrap();
}

/// Bytes written by `FORKS` forks of an idle parent holding 20,000 buffered keys, each
/// fork writing one key, until `settle` and the store's close, against the parent's own
/// checkpoint of those keys; every fork is checked after a reopen.
fn idle_parent_forks_cost(open_limit: usize, settle: fn(&Store)) -> (u64, u64) {
    const FORKS: u32 = 20;
    let parent_alone = {
        let mem = MemoryStorage::new();
        let store = open(&mem);
        load(&store, "main", 0..20_000, "main");
        let before = store.io_stats();
        let main = store.partition("t", 0).unwrap().branch("main").unwrap();
        main.checkpoint_blocking().unwrap();
        store.io_stats().since(&before).write_bytes
    };
    let mem = MemoryStorage::new();
    let store = Store::builder(opts().max_open_branches(open_limit))
        .memory(mem.clone())
        .open()
        .expect("open");
    load(&store, "main", 0..20_000, "main");
    let p = store.partition("t", 0).unwrap();
    let before = store.io_stats();
    for i in 0..FORKS {
        let name = format!("f{i}");
        let fork = p.create_branch(&name, "main").unwrap();
        fork.put_blocking(key(i), name).unwrap();
    }
    settle(&store);
    store.close().unwrap();
    let written = store.io_stats().since(&before).write_bytes;
    eprintln!(
        "{FORKS} forks wrote {written} bytes with their parent's checkpoint; the parent's alone: {parent_alone}"
    );
    let store = open(&mem);
    for i in 0..FORKS {
        let name = format!("f{i}");
        assert_eq!(value(&store, &name, i), Some(name.clone()));
        assert_eq!(value(&store, &name, 19_999), Some("main-19999".into()));
    }
    // The parent's one checkpoint, and per fork its own leaf, the index pages above it,
    // its mapping, its laid-out log file and its manifest records (~60 KB): far below a
    // copy of the parent's writes each (~20x the parent's checkpoint in all).
    let bound = parent_alone + u64::from(FORKS) * parent_alone / 4;
    (written, bound)
}

/// Forks of an idle parent with buffered writes whose heads close past
/// `max_open_branches` (and at store close): the parent checkpoints once at the fork
/// version and every fork shares that tree. Before, each closing fork rewrote every leaf the
/// inherited writes touch — the benchmark's GC series (10,000 such forks of a parent
/// holding 100,000 buffered keys) filled the disk.
#[test]
fn forks_of_an_idle_parent_closing_past_the_open_limit_share_its_checkpoint() {
    let (written, bound) = idle_parent_forks_cost(4, |_| {});
    assert!(written < bound, "{written} bytes written (bound {bound})");
}

/// The same forks checkpointed by a maintenance pass, which visits branches in name order
/// (the forks before `main`): the parent checkpoints first.
#[test]
fn forks_of_an_idle_parent_checkpointed_by_maintenance_share_its_checkpoint() {
    let (written, bound) = idle_parent_forks_cost(1024, |s| s.run_maintenance().unwrap());
    assert!(written < bound, "{written} bytes written (bound {bound})");
}
