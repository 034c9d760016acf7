//! Issue 14 §3: a damaged acknowledged commit never disappears silently.
//!
//! - after a clean close, a flipped bit in the manifest's last record, and a manifest cut to
//!   half its length, are `Corruption` naming the manifest and the offset — never a dropped
//!   tail;
//! - after a crash, a damaged last record is genuinely ambiguous (a torn append looks the
//!   same): it is dropped from the state, but opening the store and reading it modifies no
//!   byte of any file, and before the first write over it the tail is kept aside in
//!   `<manifest>.torn.<offset>.<n>` with exactly its bytes.
//!
//! Each store is on the positional-I/O backend in a temporary directory. A "crash" is a
//! copy of the directory taken while the store is open, after the commits were
//! acknowledged (so durable), before any clean close.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bough::{Backend, ErrorKind, Options, ScanOptions, Store, WriteBatch};

fn options(dir: &Path) -> Options {
    // These tests pin what each commit writes to the tree's own files (manifest
    // records, sealed at close): no write buffer. The buffered path: write_buffer.rs, log_files.rs
    // and the buffered variants of the model tests.
    Options::new(dir)
        .write_buffer_bytes(0)
        .backend(Backend::Pread)
        .maintenance_interval_ms(0)
}

fn open(dir: &Path) -> Store {
    common::open("tail_safety", options(dir))
}

/// Opens the store at `dir`, commits `k0..kn` one commit each (one manifest log record
/// each), and leaves it open.
fn commits(dir: &Path, n: usize) -> Store {
    let store = open(dir);
    let main = store
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("main");
    for i in 0..n {
        let mut b = WriteBatch::new();
        b.put(format!("k{i}"), format!("v{i}"));
        main.write_blocking(b).expect("commit");
    }
    store
}

fn manifest(dir: &Path) -> PathBuf {
    dir.join("t.0").join("manifest_main_0")
}

/// Start offsets of the manifest's records, by their headers' payload lengths.
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + 24 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[off + 20..off + 24].try_into().expect("4 bytes"));
        out.push(off);
        off += (24 + len as usize).div_ceil(4096) * 4096;
    }
    out
}

/// Every file of the store: name → bytes.
fn image(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in walk(dir) {
        let name = e.strip_prefix(dir).expect("inside").display().to_string();
        if name == "LOCK" {
            continue;
        }
        out.insert(name, std::fs::read(&e).expect("read"));
    }
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The crash image: every file of the open store copied to `to`.
fn crash_copy(from: &Path, to: &Path) {
    for (name, bytes) in image(from) {
        let dst = to.join(&name);
        std::fs::create_dir_all(dst.parent().expect("parent")).expect("mkdir");
        std::fs::write(dst, bytes).expect("write");
    }
}

fn flip(path: &Path, at: usize) {
    let mut b = std::fs::read(path).expect("read");
    b[at] ^= 0x04;
    std::fs::write(path, b).expect("write");
}

fn assert_corruption_at<T: std::fmt::Debug>(r: bough::Result<T>, offset: usize, what: &str) {
    let e = r.expect_err(&format!("{what}: must be Corruption, not silently dropped"));
    assert_eq!(e.kind(), ErrorKind::Corruption, "{what}: {e}");
    let text = e.to_string();
    assert!(
        text.contains("manifest_main_0") && text.contains(&format!("offset {offset}")),
        "{what}: the error names the manifest and offset {offset}: {text}"
    );
}

/// Before the fix the last record of a cleanly closed manifest was a log record like any
/// other: a flipped bit in it made the commit vanish at the next open.
#[test]
fn bit_flip_in_last_record_after_clean_close_is_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    commits(dir.path(), 5).close().expect("close");
    let m = manifest(dir.path());
    let bytes = std::fs::read(&m).expect("manifest");
    let offsets = record_offsets(&bytes);
    let last = *offsets.last().expect("a record");
    for at in [last + 3, last + 8, last + 30, last + 100] {
        flip(&m, at);
        let store = open(dir.path());
        let b = store.partition("t", 0).and_then(|p| p.branch("main"));
        assert_corruption_at(b, last, &format!("bit flip at byte {at}"));
        store.close().expect("close");
        // Nothing was cut off or rewritten: healing the bit brings every commit back.
        flip(&m, at);
        assert_eq!(std::fs::read(&m).expect("manifest"), bytes, "flip at {at}");
        let store = open(dir.path());
        let main = store
            .partition("t", 0)
            .and_then(|p| p.branch("main"))
            .expect("healed");
        let all = main.scan_blocking(&ScanOptions::default()).expect("scan");
        assert_eq!(all.entries.len(), 5, "healed, flip at {at}");
        store.close().expect("close");
    }
}

/// Before the fix a manifest cut to half its length lost every commit of the lost half
/// without an error.
#[test]
fn manifest_truncated_to_half_after_clean_close_is_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    commits(dir.path(), 12).close().expect("close");
    let m = manifest(dir.path());
    let bytes = std::fs::read(&m).expect("manifest");
    for keep in [
        bytes.len() / 2,
        bytes.len() - 1,
        4096.min(bytes.len() / 2),
        0,
    ] {
        std::fs::write(&m, &bytes[..keep]).expect("truncate");
        let store = open(dir.path());
        let b = store.partition("t", 0).and_then(|p| p.branch("main"));
        assert_corruption_at(b, 0, &format!("cut to {keep} of {} bytes", bytes.len()));
        store.close().expect("close");
        assert_eq!(
            std::fs::read(&m).expect("manifest").len(),
            keep,
            "the damaged manifest is left as it was"
        );
    }
}

/// After a crash the damaged last record is ambiguous and dropped — but opening and
/// reading leave every byte of every file as it was (before the fix, opening the branch
/// truncated the manifest), and the first write keeps the tail aside before cutting it.
#[test]
fn read_only_open_leaves_bytes_unchanged_and_the_tail_is_kept_aside() {
    let live = tempfile::tempdir().expect("tempdir");
    let crashed = tempfile::tempdir().expect("tempdir");
    let store = commits(live.path(), 3);
    crash_copy(live.path(), crashed.path());
    store.close().expect("close");

    let m = manifest(crashed.path());
    let bytes = std::fs::read(&m).expect("manifest");
    let offsets = record_offsets(&bytes);
    assert_eq!(offsets.len(), 4, "a snapshot and three log records");
    let last = offsets[3];
    flip(&m, last + 40);
    let before = image(crashed.path());

    let store = open(crashed.path());
    let main = store
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("the ambiguous tail is dropped, not an error");
    let all = main.scan_blocking(&ScanOptions::default()).expect("scan");
    assert_eq!(all.entries.len(), 2, "the last commit (k2) is not applied");
    assert!(main.get_blocking(b"k2").expect("get").is_none());
    assert!(main.get_blocking(b"k1").expect("get").is_some());
    assert_eq!(
        image(crashed.path()),
        before,
        "opening the store and reading modified a file"
    );

    // The first write keeps the dropped tail aside, byte for byte, then appends.
    let mut b = WriteBatch::new();
    b.put("after", "crash");
    main.write_blocking(b).expect("commit");
    let aside = crashed
        .path()
        .join("t.0")
        .join(format!("manifest_main_0.torn.{last}.0"));
    let kept = std::fs::read(&aside).expect("the tail is kept aside");
    assert_eq!(kept, before["t.0/manifest_main_0"][last..]);
    store.close().expect("close");
    assert!(aside.exists(), "a clean close keeps the evidence");

    // GC leaves the evidence alone; everything committed since reads back.
    let store = open(crashed.path());
    let part = store.partition("t", 0).expect("partition");
    part.gc().expect("gc");
    assert!(aside.exists(), "GC never deletes a kept-aside tail");
    let main = part.branch("main").expect("main");
    let all = main.scan_blocking(&ScanOptions::default()).expect("scan");
    assert_eq!(all.entries.len(), 3);
    store.close().expect("close");
}

/// A damaged record that a valid record follows is never dropped as a torn tail, even
/// after a crash (issue 14 §3, first point, at the engine level).
#[test]
fn damaged_record_before_an_intact_one_is_corruption_after_a_crash() {
    let live = tempfile::tempdir().expect("tempdir");
    let crashed = tempfile::tempdir().expect("tempdir");
    let store = commits(live.path(), 3);
    crash_copy(live.path(), crashed.path());
    store.close().expect("close");
    let m = manifest(crashed.path());
    let offsets = record_offsets(&std::fs::read(&m).expect("manifest"));
    let inner = &offsets[..offsets.len() - 1];
    for (victim, &at) in inner.iter().enumerate().skip(1) {
        flip(&m, at + 30);
        let store = open(crashed.path());
        let b = store.partition("t", 0).and_then(|p| p.branch("main"));
        assert_corruption_at(b, at, &format!("record {victim}"));
        store.close().expect("close");
        flip(&m, at + 30);
    }
}

/// The number of records of the manifest at `path`.
fn records(path: &Path) -> usize {
    record_offsets(&std::fs::read(path).expect("manifest")).len()
}

fn version(store: &Store, branch: &str) -> u64 {
    store
        .partition("t", 0)
        .and_then(|p| p.branch(branch))
        .and_then(|b| b.read_view())
        .expect("view")
        .version()
}

/// The seal a clean close writes is no commit: the version a user sees is the same before
/// the close and after the reopen, and closing again without writing rewrites nothing.
#[test]
fn a_clean_close_seals_without_changing_the_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = commits(dir.path(), 5);
    let before = version(&store, "main");
    assert_eq!(
        records(&manifest(dir.path())),
        6,
        "a snapshot and five log records"
    );
    store.close().expect("close");
    assert_eq!(
        records(&manifest(dir.path())),
        1,
        "sealed: one snapshot record"
    );

    let store = open(dir.path());
    assert_eq!(
        version(&store, "main"),
        before,
        "the seal changed the version"
    );
    let sealed = image(dir.path());
    store.close().expect("close");
    assert_eq!(image(dir.path()), sealed, "a close without writes wrote");

    let store = open(dir.path());
    let main = store
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("main");
    put(&main, "k9", "v9").expect("commit");
    assert_eq!(version(&store, "main"), before + 1);
    store.close().expect("close");
    let store = open(dir.path());
    assert_eq!(version(&store, "main"), before + 1);
    store.close().expect("close");
}

/// A clean close rewrites only the manifests of branches written since the store opened
/// (or holding a dropped tail): one that was only read keeps its bytes, log records and
/// all, so closing a store with many untouched branches costs nothing per branch.
#[test]
fn a_clean_close_seals_only_the_branches_written_to() {
    let live = tempfile::tempdir().expect("tempdir");
    let crashed = tempfile::tempdir().expect("tempdir");
    let store = commits(live.path(), 3);
    let part = store.partition("t", 0).expect("partition");
    let dev = part.create_branch("dev", "main").expect("dev");
    for i in 0..3 {
        put(&dev, format!("d{i}"), "x").expect("commit");
    }
    crash_copy(live.path(), crashed.path());
    drop((dev, part));
    store.close().expect("close");

    let main_m = manifest(crashed.path());
    let dev_m = crashed.path().join("t.0").join("manifest_dev_0");
    // Log records in both (creating `dev` records it on `main` too).
    assert!(records(&main_m) >= 4, "{}", records(&main_m));
    assert_eq!(records(&dev_m), 4, "a snapshot and three log records");
    let dev_before = std::fs::read(&dev_m).expect("dev manifest");
    let store = open(crashed.path());
    let part = store.partition("t", 0).expect("partition");
    let dev = part.branch("dev").expect("dev");
    assert_eq!(
        dev.scan_blocking(&ScanOptions::default())
            .expect("scan")
            .entries
            .len(),
        6
    );
    put(&part.branch("main").expect("main"), "k3", "v3").expect("commit");
    drop((dev, part));
    store.close().expect("close");
    assert_eq!(records(&main_m), 1, "the branch written to is sealed");
    assert_eq!(
        std::fs::read(&dev_m).expect("dev manifest"),
        dev_before,
        "a branch only read was rewritten at close"
    );
}

/// `Store::open_read_only` over a crashed store whose manifest ends in a damaged record:
/// opening, reading and closing create no file and change no byte — no seal, no tail kept
/// aside, nothing cut (issue 14 §3: opening for reading never modifies a file).
#[test]
fn a_read_only_store_writes_nothing_over_a_dropped_tail() {
    let live = tempfile::tempdir().expect("tempdir");
    let crashed = tempfile::tempdir().expect("tempdir");
    let store = commits(live.path(), 3);
    crash_copy(live.path(), crashed.path());
    store.close().expect("close");
    let m = manifest(crashed.path());
    let last = *record_offsets(&std::fs::read(&m).expect("manifest"))
        .last()
        .expect("records");
    flip(&m, last + 40);
    let before = image(crashed.path());

    let store = Store::open_read_only(options(crashed.path())).expect("read-only open");
    let main = store
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("the ambiguous tail is read around");
    let all = main.scan_blocking(&ScanOptions::default()).expect("scan");
    assert_eq!(
        all.entries.len(),
        2,
        "the damaged last commit is not applied"
    );
    assert!(put(&main, "x", "y").is_err(), "a read-only store wrote");
    drop(main);
    store.close().expect("close");
    let after = image(crashed.path());
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "a read-only store created or deleted a file"
    );
    assert_eq!(after, before, "a read-only store changed a byte");
}

/// Power lost at any sync of the clean close (the seal's temporary file, its rename, the
/// directory) loses no acknowledged commit: until the rename is durable the manifest with
/// its log records is what a reopen reads, after it the seal, and both hold every commit.
#[test]
fn power_lost_during_the_clean_close_loses_nothing() {
    use bough::io::{CrashPolicy, FaultInjector, FaultOp, MemoryStorage, RandomCrash, Storage};

    fn build(mem: &MemoryStorage) -> Store {
        let store = Store::open(
            Store::builder(Options::in_memory().maintenance_interval_ms(0)).memory(mem.clone()),
        )
        .expect("open");
        let p = store.partition("t", 0).expect("partition");
        let main = p.branch("main").expect("main");
        let dev = p.create_branch("dev", "main").expect("dev");
        for i in 0..4 {
            put(&main, format!("m{i}"), "x").expect("commit");
            put(&dev, format!("d{i}"), "y").expect("commit");
        }
        store
    }
    // How many syncs the close makes (two manifests sealed).
    let mem = MemoryStorage::new();
    let store = build(&mem);
    let before = mem.stats().snapshot();
    store.close().expect("close");
    let after = mem.stats().snapshot();
    let close_syncs = after.syncs + after.dir_syncs - before.syncs - before.dir_syncs;
    assert!(close_syncs >= 2, "the close synced {close_syncs} times");

    for k in 0..close_syncs {
        for (p, policy) in [
            CrashPolicy::DropAllUnsynced,
            CrashPolicy::KeepAllUnsynced,
            CrashPolicy::Random(RandomCrash::new(k)),
        ]
        .into_iter()
        .enumerate()
        {
            let faults = FaultInjector::new();
            let mem = MemoryStorage::with_faults(faults.clone());
            let store = build(&mem);
            // From now on: the close's first `k` syncs succeed, then every one fails.
            faults.fail_after(FaultOp::Sync, k, EIO, u64::MAX);
            store.close().expect("close");
            assert!(faults.fired() > 0, "sync {k} of the close did not fail");
            faults.clear();
            mem.crash(policy);
            let store = Store::open(
                Store::builder(Options::in_memory().maintenance_interval_ms(0)).memory(mem.clone()),
            )
            .unwrap_or_else(|e| panic!("close sync {k}, policy {p}: reopen: {e}"));
            let part = store.partition("t", 0).expect("partition");
            for (branch, n) in [("main", 4), ("dev", 4)] {
                let b = part
                    .branch(branch)
                    .unwrap_or_else(|e| panic!("close sync {k}, policy {p}: {branch}: {e}"));
                let all = b.scan_blocking(&ScanOptions::default()).expect("scan");
                assert_eq!(all.entries.len(), n, "close sync {k}, policy {p}: {branch}");
            }
            drop(part);
            store.close().expect("close");
        }
    }
}

/// Linux's EIO (this test binary does not depend on libc).
const EIO: i32 = 5;

fn put(b: &bough::Branch, k: impl AsRef<[u8]>, v: impl AsRef<[u8]>) -> bough::Result<()> {
    let mut wb = WriteBatch::new();
    wb.put(k, v);
    b.write_blocking(wb).map(|_| ())
}
