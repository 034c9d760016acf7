//! Space a user sees: what each branch costs (`PartitionHandle::describe`: exclusive and
//! shared bytes from GC's measuring walk) and that deleting a branch then running GC frees
//! exactly its exclusive bytes; that a writer gives back the unused preallocation of
//! each file it stops appending to (close, file full, deletion), on every local backend;
//! and that short-lived writers share one file, which GC keeps for the next of them.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use bough::{Backend, BranchSpace, Options, PartitionHandle, ScanOptions, Store, WriteBatch};

/// 16 pages of 4 KiB: small files, so a few thousand keys fill several of them.
const SMALL_FILE: u64 = 16 * 4096;

fn local_backends() -> [Backend; 2] {
    [Backend::Pread, Backend::IoUring]
}

/// (sum of lengths, allocated bytes, count) of the data files of a partition directory.
fn data_files(part: &Path) -> (u64, u64, u64) {
    let all = each_data_file(part);
    let (len, alloc) = all.values().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    (len, alloc, all.len() as u64)
}

/// (length, allocated bytes) of each data file of a partition directory.
fn each_data_file(part: &Path) -> BTreeMap<String, (u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(part).expect("read_dir") {
        let e = e.expect("entry");
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("data_") {
            let m = e.metadata().expect("metadata");
            out.insert(name, (m.len(), m.blocks() * 512));
        }
    }
    out
}

fn put_keys(store: &Store, branch: &str, tag: &str, keys: std::ops::Range<u32>) {
    let b = store
        .partition("sp", 0)
        .and_then(|p| p.branch(branch))
        .expect("branch");
    let all: Vec<u32> = keys.collect();
    for chunk in all.chunks(250) {
        let mut batch = WriteBatch::new();
        for &i in chunk {
            batch.put(format!("k{i:06}"), format!("{tag}:{i}:{}", "v".repeat(80)));
        }
        b.write_blocking(batch).expect("write");
    }
}

fn space(p: &PartitionHandle, branch: &str) -> BranchSpace {
    p.describe(branch)
        .expect("describe")
        .space
        .expect("the partition could be measured")
}

fn shared_with(s: &BranchSpace, other: &str) -> u64 {
    s.shared_with
        .iter()
        .find(|(b, _)| b.as_str() == other)
        .map_or(0, |(_, n)| *n)
}

fn scan_count(p: &PartitionHandle, branch: &str) -> usize {
    p.branch(branch)
        .and_then(|b| b.scan_blocking(&ScanOptions::default()))
        .expect("scan")
        .entries
        .len()
}

/// `feature` (forked from `main`, archived, then changed further) has a child `sub` that
/// shares its older files; `empty` is a fork that wrote nothing. Deleting `feature` and
/// running GC frees exactly the bytes `describe` called exclusive to it — the files only its
/// head, its archive and the merge bases naming it hold — and nothing `sub` or `main` reads.
#[test]
fn deleting_a_branch_frees_exactly_its_exclusive_bytes() {
    for backend in local_backends() {
        let test = format!("exclusive_bytes_{backend:?}");
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = Options::new(dir.path())
            .backend(backend)
            .maintenance_interval_ms(0)
            // Space is measured in data files: no write buffer in front of them.
            .write_buffer_bytes(0)
            .data_file_size(SMALL_FILE);
        let store = common::open(&test, opts);
        let p = store.partition("sp", 0).expect("partition");
        put_keys(&store, "main", "m", 0..2000);
        p.create_branch("feature", "main").expect("feature");
        p.create_branch("empty", "main").expect("empty");
        put_keys(&store, "feature", "f1", 1000..3000);
        p.create_branch("sub", "feature").expect("sub");
        put_keys(&store, "sub", "s", 5000..5200);
        p.branch("feature")
            .and_then(|b| b.archive())
            .expect("archive");
        put_keys(&store, "feature", "f2", 2000..6000);
        // Every branch's mapping checkpointed first (and GC run): otherwise the commit that
        // drops the merge bases naming `feature` from `sub` also writes `sub`'s dirty mapping
        // chunks, and the mapping pages it shared with `feature` (which describe rightly
        // counts as shared) go too. That is a commit of `sub`, not of the deletion.
        store.run_maintenance().expect("maintenance");

        let feature = space(&p, "feature");
        let empty = space(&p, "empty");
        let main = space(&p, "main");
        let sub = space(&p, "sub");
        eprintln!(
            "[{test}] feature {feature:?}\n  empty {empty:?}\n  main {main:?}\n  sub {sub:?}"
        );
        assert!(feature.exclusive_files >= 2, "{feature:?}");
        assert!(feature.exclusive_bytes >= 2 * 4096, "{feature:?}");
        assert!(shared_with(&feature, "sub") > 0, "{feature:?}");
        assert!(shared_with(&feature, "main") > 0, "{feature:?}");
        assert!(shared_with(&sub, "feature") > 0, "{sub:?}");
        assert_eq!(
            empty.exclusive_bytes, 0,
            "a fork that wrote nothing owns nothing"
        );
        assert_eq!(empty.exclusive_files, 0);
        assert_eq!(shared_with(&empty, "main"), empty.shared_bytes, "{empty:?}");
        assert!(empty.shared_bytes > 0);
        assert!(shared_with(&main, "feature") > 0, "{main:?}");
        // Every file main wrote is still read by the forks taken after it stopped writing.
        assert_eq!(main.exclusive_bytes, 0, "{main:?}");
        assert!(shared_with(&main, "empty") > 0, "{main:?}");

        let part = dir.path().join("sp.0");
        let before = each_data_file(&part);
        p.delete_branch("feature").expect("delete");
        let freed: u64 = store
            .gc()
            .expect("gc")
            .iter()
            .map(|(_, r)| r.bytes_freed)
            .sum();
        // The files that went (the other branches' files may grow meanwhile: dropping the
        // merge bases naming `feature` is a commit on each of them).
        let after = each_data_file(&part);
        let gone: Vec<(u64, u64)> = before
            .iter()
            .filter(|(n, _)| !after.contains_key(*n))
            .map(|(_, v)| *v)
            .collect();
        let (len_freed, alloc_freed) = gone.iter().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        eprintln!(
            "[{test}] GC freed {freed} B; {} data files went, {len_freed} B long, \
             {alloc_freed} B allocated",
            gone.len()
        );
        assert_eq!(
            freed, feature.exclusive_bytes,
            "GC freed what describe promised"
        );
        assert_eq!(len_freed, feature.exclusive_bytes);
        assert_eq!(gone.len() as u64, feature.exclusive_files);
        // On disk (allocated blocks): at least the exclusive bytes, and beyond them a page
        // per file of granularity plus the unused preallocation of the one file the branch
        // was still appending to (at most a data file's size).
        assert!(
            alloc_freed >= feature.exclusive_bytes
                && alloc_freed - feature.exclusive_bytes
                    <= feature.exclusive_files * 4096 + SMALL_FILE,
            "allocated bytes freed {alloc_freed} vs exclusive {}: {gone:?}",
            feature.exclusive_bytes
        );
        // What the others read is intact.
        assert_eq!(scan_count(&p, "sub"), 3200);
        assert_eq!(scan_count(&p, "main"), 2000);
        assert_eq!(scan_count(&p, "empty"), 2000);
        // Deleting a fork that wrote nothing frees nothing.
        p.delete_branch("empty").expect("delete empty");
        let freed: u64 = store
            .gc()
            .expect("gc")
            .iter()
            .map(|(_, r)| r.bytes_freed)
            .sum();
        assert_eq!(freed, 0);
        store.close().expect("close");
    }
}

/// (sum of lengths, count) of the write-ahead log files of `branch` in a partition directory.
fn log_files_of(part: &Path, branch: &str) -> (u64, u64) {
    let mut out = (0, 0);
    for e in std::fs::read_dir(part).expect("read_dir") {
        let e = e.expect("entry");
        let name = e.file_name().to_string_lossy().into_owned();
        if let bough_names::FileKind::Log(l) = bough_names::classify(&name)
            && l.branch.as_str() == branch
        {
            out.0 += e.metadata().expect("metadata").len();
            out.1 += 1;
        }
    }
    out
}

/// With the write buffer on, a branch's acknowledged writes that no checkpoint has applied
/// yet live in its log files: `describe` counts them (exclusive to the branch, and in
/// `log_bytes`; the parent's log a fork names up to its fork version counts there too, as
/// shared), and deleting the branch and running GC frees exactly the exclusive bytes,
/// log files included.
#[test]
fn a_branch_s_log_files_count_in_its_space_and_go_with_it() {
    for backend in local_backends() {
        let test = format!("log_space_{backend:?}");
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = Options::new(dir.path())
            .backend(backend)
            .maintenance_interval_ms(0)
            .write_buffer_bytes(64 << 20)
            .data_file_size(SMALL_FILE);
        let store = common::open(&test, opts);
        let p = store.partition("sp", 0).expect("partition");
        put_keys(&store, "main", "m", 0..1000);
        p.create_branch("feature", "main").expect("feature");
        // Buffered: in feature's log only, no data file of its own yet.
        put_keys(&store, "feature", "f", 0..500);
        let part = dir.path().join("sp.0");
        let (log_len, logs) = log_files_of(&part, "feature");
        assert!(logs >= 1 && log_len > 0, "feature has a log file");

        let feature = space(&p, "feature");
        let main = space(&p, "main");
        eprintln!("[{test}] feature {feature:?}\n  main {main:?}");
        // The fork took main's buffered writes by reference: it names main's log up to
        // the fork, which counts in its log bytes as shared with main.
        let (main_log, _) = log_files_of(&part, "main");
        assert!(
            main_log > 0,
            "main's writes were still buffered at the fork"
        );
        assert_eq!(feature.log_bytes, log_len + main_log, "{feature:?}");
        assert!(feature.exclusive_bytes >= log_len, "{feature:?}");
        assert!(feature.exclusive_files >= logs, "{feature:?}");
        assert!(feature.shared_bytes >= main_log, "{feature:?}");
        assert_eq!(main.log_bytes, main_log, "{main:?}");
        assert_eq!(shared_with(&feature, "main"), feature.shared_bytes);

        let before = each_data_file(&part);
        p.delete_branch("feature").expect("delete");
        let freed: u64 = store
            .gc()
            .expect("gc")
            .iter()
            .map(|(_, r)| r.bytes_freed)
            .sum();
        let after = each_data_file(&part);
        let data_gone: u64 = before
            .iter()
            .filter(|(n, _)| !after.contains_key(*n))
            .map(|(_, v)| v.0)
            .sum();
        assert_eq!(
            log_files_of(&part, "feature"),
            (0, 0),
            "feature's logs went"
        );
        assert_eq!(
            freed, feature.exclusive_bytes,
            "GC freed what describe promised (data {data_gone} B, log {log_len} B)"
        );
        assert_eq!(data_gone + log_len, feature.exclusive_bytes);
        assert_eq!(scan_count(&p, "main"), 1000);
        store.close().expect("close");
    }
}

/// `describe_branches` measures once and agrees with `describe` branch by branch.
#[test]
fn describe_branches_agrees_with_describe() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options::new(dir.path())
        .backend(Backend::Pread)
        .maintenance_interval_ms(0)
        // Space is measured in data files: no write buffer in front of them.
        .write_buffer_bytes(0)
        .data_file_size(SMALL_FILE);
    let store = common::open("describe_branches", opts);
    let p = store.partition("sp", 0).expect("partition");
    put_keys(&store, "main", "m", 0..1500);
    p.create_branch("a", "main").expect("a");
    put_keys(&store, "a", "a", 0..700);
    p.create_branch("b", "a").expect("b");
    store.gc().expect("gc");
    let all = p.describe_branches().expect("describe all");
    assert_eq!(all.len(), 3);
    for info in all {
        let one = p.describe(info.name.as_str()).expect("describe");
        assert_eq!(info.space, one.space, "{}", info.name);
        assert!(info.space.is_some());
    }
    store.close().expect("close");
}

/// A writer that stops appending to a file gives its unused preallocation back: after a
/// short-lived writer closes, and when a file fills up and the next one starts (the data
/// file size here is not a multiple of the reservation steps, so the last step overshoots
/// the file). Allocated blocks of every data file stay within a page of its length, and
/// every key reads back after reopening.
#[test]
fn a_writer_releases_the_preallocation_of_files_it_stops_writing() {
    for backend in local_backends() {
        let test = format!("release_preallocation_{backend:?}");
        let dir = tempfile::tempdir().expect("tempdir");
        // 96 pages: reservations of 256 KiB then 512 KiB overshoot the 384 KiB file.
        let opts = || {
            Options::new(dir.path())
                .backend(backend)
                .maintenance_interval_ms(0)
                // Space is measured in data files: no write buffer in front of them.
                .write_buffer_bytes(0)
                .data_file_size(96 * 4096)
        };
        for round in 0..5u32 {
            let store = common::open(&test, opts());
            put_keys(&store, "main", "r", round * 10..round * 10 + 10);
            store.close().expect("close");
        }
        let part = dir.path().join("sp.0");
        let (len, alloc, n) = data_files(&part);
        assert_eq!(n, 1, "each writer continued the file the last one wrote");
        eprintln!(
            "[{test}] after 5 short-lived writers: {n} files, {len} B long, {alloc} B allocated"
        );
        assert!(
            alloc <= len + n * 4096,
            "{alloc} B allocated for {len} B in {n} files"
        );

        let store = common::open(&test, opts());
        put_keys(&store, "main", "big", 1000..9000);
        let (len, alloc, n) = data_files(&part);
        eprintln!("[{test}] while writing: {n} files, {len} B long, {alloc} B allocated");
        // The short-lived writers shared one file (each continued it); these writes fill
        // it and more.
        assert!(n >= 3, "the writes filled several files");
        // Only the file still being written keeps a reservation (at most one file).
        assert!(alloc <= len + n * 4096 + 96 * 4096, "{alloc} B for {len} B");
        store.close().expect("close");
        let (len, alloc, n) = data_files(&part);
        assert!(
            alloc <= len + n * 4096,
            "after close: {alloc} B for {len} B"
        );

        let store = common::open(&test, opts());
        let p = store.partition("sp", 0).expect("partition");
        assert_eq!(scan_count(&p, "main"), 50 + 8000);
        store.close().expect("close");
    }
}

/// The newest file of a live (branch, term) is the one the next writing open continues, so
/// GC keeps it even when nothing references it (here: every key was truncated away) — a
/// writer may be about to continue it before GC sees it registered — and the next writer
/// does continue it.
#[test]
fn gc_keeps_the_file_the_next_writer_continues() {
    let dir = tempfile::tempdir().expect("tempdir");
    let test = "gc_keeps_the_file_the_next_writer_continues";
    let opts = || {
        Options::new(dir.path())
            .maintenance_interval_ms(0)
            // Space is measured in data files: no write buffer in front of them.
            .write_buffer_bytes(0)
    };
    let store = common::open(test, opts());
    put_keys(&store, "main", "a", 0..10);
    store
        .partition("sp", 0)
        .and_then(|p| p.branch("main"))
        .and_then(|b| b.truncate_blocking(b""))
        .expect("truncate");
    store.close().expect("close");
    let part = dir.path().join("sp.0");
    let files = each_data_file(&part);
    assert_eq!(files.len(), 1, "{files:?}");

    let store = common::open(test, opts());
    let p = store.partition("sp", 0).expect("partition");
    let r = p.gc().expect("gc");
    assert!(r.deleted.is_empty(), "{r:?}");
    assert_eq!(
        each_data_file(&part).keys().collect::<Vec<_>>(),
        files.keys().collect::<Vec<_>>()
    );
    put_keys(&store, "main", "b", 0..10);
    assert_eq!(scan_count(&p, "main"), 10);
    store.close().expect("close");
    let after = each_data_file(&part);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        files.keys().collect::<Vec<_>>(),
        "continued"
    );
}
