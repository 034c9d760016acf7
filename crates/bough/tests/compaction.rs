//! Space stays bounded under sustained overwrites: compaction moves the live pages out of
//! mostly-garbage files and file GC deletes the files no branch references any more.
//!
//! 20,000 keys (≈ 2 MiB of keys + values) are overwritten at random, a quarter of them per
//! round, with `compaction_garbage_ratio(0.5)`; `compact_now()` and `Store::gc()` run after
//! each round. From the third round on, the partition directory must take at most
//! [`FACTOR`] × the live bytes (allocated blocks, so preallocated space counts), plus
//! [`SLACK_FILES`] data files' worth for the files that are still filling or have not yet
//! crossed the garbage threshold. Every round also checks every value.
//!
//! Why 2.5×: a sealed file is compacted once half of it is garbage, so in the steady state
//! sealed files are at least about half live (2×, measured ≈ 1.6–1.7× since leaves are cut
//! by exact size); index and mapping pages and the manifest come on top.

mod common;

use std::path::Path;

use bough::{Backend, Branch, Options, ScanOptions, WriteBatch};
use common::Rng;

const KEYS: usize = 20_000;
const FACTOR: f64 = 2.5;
const SLACK_FILES: u64 = 2;
const FILE: u64 = 16 * 4096 * 8;
const MANIFEST_MAX: u64 = 256 << 10;

/// (allocated bytes of the data files, of everything else) in a partition directory.
fn usage(part: &Path) -> (u64, u64, usize) {
    use std::os::unix::fs::MetadataExt;
    let (mut data, mut other, mut files) = (0, 0, 0);
    for e in std::fs::read_dir(part).expect("read_dir") {
        let e = e.expect("entry");
        let m = e.metadata().expect("metadata");
        files += 1;
        if e.file_name().to_string_lossy().starts_with("data_") {
            data += m.blocks() * 512;
        } else {
            other += m.blocks() * 512;
        }
    }
    (data, other, files)
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// A value of key `i` in `round`: self-describing, 40–160 bytes.
fn value(rng: &mut Rng, i: usize, round: usize) -> Vec<u8> {
    let mut v = format!("{i}:{round}:").into_bytes();
    v.resize(rng.urange(40, 160), b'a' + (round % 26) as u8);
    v
}

/// Writes round 0 of every key, in batches of 2,000.
fn load(main: &Branch, rng: &mut Rng, model: &mut [Vec<u8>]) {
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(2000) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            model[i] = value(rng, i, 0);
            b.put(key(i), model[i].clone());
        }
        main.write_blocking(b).expect("load");
    }
}

fn options(dir: &Path) -> Options {
    // These tests pin what each commit writes to the tree's own files (data files,
    // manifest records): no write buffer. The buffered path: write_buffer.rs, log_files.rs
    // and the buffered variants of the model tests.
    Options::new(dir)
        .write_buffer_bytes(0)
        .backend(Backend::Pread)
        .maintenance_interval_ms(0)
        .data_file_size(FILE)
        .manifest_rewrite_bytes(MANIFEST_MAX)
        .compaction_garbage_ratio(0.5)
}

fn bounded_space(test: &str, rounds: usize) {
    let seed = common::seeds(test, 1)[0];
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = common::open(test, options(dir.path()));
    let main = store
        .partition("cmp", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    let part = dir.path().join("cmp.0");
    let mut model: Vec<Vec<u8>> = vec![Vec::new(); KEYS];
    load(&main, &mut rng, &mut model);
    let mut worst: f64 = 0.0;
    let mut freed = 0u64;
    for round in 1..=rounds {
        for _ in 0..5 {
            let mut b = WriteBatch::new();
            let mut seen = std::collections::HashSet::new();
            for _ in 0..KEYS / 20 {
                let i = rng.urange(0, KEYS);
                if seen.insert(i) {
                    model[i] = value(&mut rng, i, round);
                    b.put(key(i), model[i].clone());
                }
            }
            main.write_blocking(b).expect("overwrite");
        }
        main.compact_now().expect("compact");
        let reports = store.gc().expect("gc");
        freed += reports.iter().map(|(_, r)| r.bytes_freed).sum::<u64>();

        let live: u64 = model
            .iter()
            .enumerate()
            .map(|(i, v)| (key(i).len() + v.len()) as u64)
            .sum();
        let (data, other, files) = usage(&part);
        let ratio = data.saturating_sub(SLACK_FILES * FILE) as f64 / live as f64;
        eprintln!(
            "[{test}] round {round}: live {live} B; data files {data} B allocated \
             ({:.2}× live, {ratio:.2}× after the slack), other files {other} B, {files} files",
            data as f64 / live as f64
        );
        assert!(
            other <= MANIFEST_MAX + 3 * 4096 + 4096,
            "round {round}: manifest and CURRENT_TERM take {other} B"
        );
        if round >= 3 {
            worst = worst.max(ratio);
            assert!(
                ratio <= FACTOR,
                "round {round}: data files take {data} B for {live} B live ({ratio:.2}× after \
                 {SLACK_FILES} files of slack; the bound is {FACTOR}×)"
            );
        }
        let all = main.scan_blocking(&ScanOptions::default()).expect("scan");
        assert_eq!(all.entries.len(), KEYS);
        for (i, kv) in all.entries.iter().enumerate() {
            assert!(kv.value.value == model[i], "round {round}: key {i}");
        }
    }
    assert!(freed > 0, "GC never freed anything");
    eprintln!("[{test}] seed {seed}: worst {worst:.2}×, GC freed {freed} B in total");
    store.close().expect("close");
    // Nothing GC deleted was still needed.
    let store = common::open(test, options(dir.path()));
    let main = store
        .partition("cmp", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    let all = main.scan_blocking(&ScanOptions::default()).expect("scan");
    assert!(
        all.entries
            .iter()
            .enumerate()
            .all(|(i, kv)| kv.value.value == model[i])
    );
    store.close().expect("close");
}

#[test]
fn space_stays_bounded_under_overwrites() {
    bounded_space("space_stays_bounded_under_overwrites", 12);
}

#[test]
fn slow_space_stays_bounded_under_overwrites() {
    bounded_space("slow_space_stays_bounded_under_overwrites", 150);
}

/// The data files in a partition directory.
fn data_files(part: &Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(part)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("data_"))
        .collect()
}

/// Space stays bounded while a branch forked right after the load holds the old version of
/// every key, and compaction never copies out of the files that branch still references.
///
/// 20,000 keys are loaded into `main`, branch `old` is forked, then `main` is overwritten at
/// random, 5% of the keys per round (small rounds, so main's share of each shared file falls
/// past the garbage threshold gradually, the way it does under real traffic). Each round runs
/// `compact_now()` on `main` and then `run_maintenance()` (expiry, compaction of every open
/// branch, checkpoints, GC — what the background thread does).
///
/// From the third round on, the data files may take at most [`SHARED_FACTOR`] × (live bytes
/// of `main` + the bytes of `old`'s values that `main` no longer has), plus
/// [`SLACK_FILES`] files. Why 3×, half a unit above one branch: `main`'s own files stay at least about
/// half live (2×, plus partly filled leaves and index/mapping pages); the files shared with
/// `old` are kept whole, but everything in them is live for `old` or for `main`, and the
/// loaded leaves are denser than leaves rewritten at random. The ratio is highest in the
/// early rounds (measured ≈ 2.2–2.3×, later lower): sharing is per page, so once a
/// round has rewritten most leaves `old` holds nearly all its pages alone while only a few
/// of its values differ from `main`'s, and those few are all the bound counts for `old`.
///
/// The fork-time files are referenced in full by `old` (and by its merge base with `main`):
/// moving `main`'s pages out of them would free nothing, so the test fails if a compaction
/// report names one of them, and if GC deletes one while `old` exists. `old` must read every
/// value of its version, before and after a reopen.
fn bounded_space_with_old_branch(test: &str, rounds: usize) {
    let seed = common::seeds(test, 1)[0];
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = common::open(test, options(dir.path()));
    let p = store.partition("cmp", 0).expect("partition");
    let main = p.branch("main").expect("branch");
    let part = dir.path().join("cmp.0");
    let mut model: Vec<Vec<u8>> = vec![Vec::new(); KEYS];
    load(&main, &mut rng, &mut model);
    let old = p.create_branch("old", "main").expect("fork");
    let old_model = model.clone();
    let shared = data_files(&part);
    eprintln!("[{test}] {} data files at the fork", shared.len());
    let check_old = |old: &bough::Branch, when: &str| {
        let all = old
            .scan_blocking(&ScanOptions::default())
            .expect("scan old");
        assert_eq!(
            all.entries.len(),
            KEYS,
            "{when}: old has the wrong key count"
        );
        for (i, kv) in all.entries.iter().enumerate() {
            assert!(kv.value.value == old_model[i], "{when}: old key {i}");
        }
    };

    let mut worst: f64 = 0.0;
    let mut skipped = 0usize;
    for round in 1..=rounds {
        for _ in 0..2 {
            let mut b = WriteBatch::new();
            let mut seen = std::collections::HashSet::new();
            for _ in 0..KEYS / 40 {
                let i = rng.urange(0, KEYS);
                if seen.insert(i) {
                    model[i] = value(&mut rng, i, round);
                    b.put(key(i), model[i].clone());
                }
            }
            main.write_blocking(b).expect("overwrite");
        }
        let report = main.compact_now().expect("compact");
        let copied: Vec<&String> = report
            .compacted
            .iter()
            .filter(|n| shared.contains(*n))
            .collect();
        assert!(
            copied.is_empty(),
            "round {round} (seed {seed}): compaction copied main's pages out of {copied:?}, \
             which branch `old` references in full (report {report:?})"
        );
        skipped = skipped.max(report.shared_skipped.len());
        store.run_maintenance().expect("maintenance");
        let present = data_files(&part);
        let gone: Vec<&String> = shared.difference(&present).collect();
        assert!(
            gone.is_empty(),
            "round {round} (seed {seed}): GC deleted {gone:?}, which `old` references"
        );

        let live_main: u64 = model
            .iter()
            .enumerate()
            .map(|(i, v)| (key(i).len() + v.len()) as u64)
            .sum();
        let unique_old: u64 = old_model
            .iter()
            .zip(&model)
            .enumerate()
            .filter(|(_, (o, m))| o != m)
            .map(|(i, (o, _))| (key(i).len() + o.len()) as u64)
            .sum();
        let live = live_main + unique_old;
        let (data, other, files) = usage(&part);
        let ratio = data.saturating_sub(SLACK_FILES * FILE) as f64 / live as f64;
        eprintln!(
            "[{test}] round {round}: live {live_main} B in main + {unique_old} B only in old; \
             data files {data} B allocated ({:.2}× live, {ratio:.2}× after the slack), \
             other files {other} B, {files} files",
            data as f64 / live as f64
        );
        if round >= 3 {
            worst = worst.max(ratio);
            assert!(
                ratio <= SHARED_FACTOR,
                "round {round} (seed {seed}): data files take {data} B for {live} B live \
                 ({ratio:.2}× after {SLACK_FILES} files of slack; the bound is \
                 {SHARED_FACTOR}×)"
            );
        }
        if round % 5 == 0 || round == rounds {
            let all = main.scan_blocking(&ScanOptions::default()).expect("scan");
            assert_eq!(all.entries.len(), KEYS);
            for (i, kv) in all.entries.iter().enumerate() {
                assert!(kv.value.value == model[i], "round {round}: main key {i}");
            }
            check_old(&old, &format!("round {round}"));
        }
    }
    assert!(
        skipped > 0,
        "no compaction ever found a shared file worth skipping: the test did not exercise \
         the rule"
    );
    eprintln!("[{test}] seed {seed}: worst {worst:.2}× (bound {SHARED_FACTOR}×)");
    drop((main, old, p));
    store.close().expect("close");
    let store = common::open(test, options(dir.path()));
    let p = store.partition("cmp", 0).expect("partition");
    let main = p.branch("main").expect("branch");
    let all = main.scan_blocking(&ScanOptions::default()).expect("scan");
    assert!(
        all.entries
            .iter()
            .enumerate()
            .all(|(i, kv)| kv.value.value == model[i])
    );
    check_old(&p.branch("old").expect("old"), "after reopen");
    store.close().expect("close");
}

/// See [`bounded_space_with_old_branch`] for why 3×.
const SHARED_FACTOR: f64 = 3.0;

#[test]
fn space_stays_bounded_with_a_second_branch_holding_an_old_version() {
    bounded_space_with_old_branch(
        "space_stays_bounded_with_a_second_branch_holding_an_old_version",
        30,
    );
}

#[test]
fn slow_space_stays_bounded_with_a_second_branch_holding_an_old_version() {
    bounded_space_with_old_branch(
        "slow_space_stays_bounded_with_a_second_branch_holding_an_old_version",
        200,
    );
}

/// Compaction does not rewrite a file another branch references in full.
///
/// 12,000 keys are loaded into `main` (several data files), `feature` is forked, then `main`
/// overwrites two of every three runs of 200 keys: every loaded file is now about two
/// thirds garbage to `main` alone, but `feature` (and its merge base) still references every
/// page of it. Compacting `main` must copy nothing (no page moved, no byte written) and
/// report the files as shared; GC must free nothing; both branches read their own values.
/// Once `feature` is deleted, the same files are `main`'s alone: compaction moves main's
/// pages out and GC frees them.
#[test]
fn compaction_does_not_rewrite_a_file_another_branch_references_in_full() {
    let test = "compaction_does_not_rewrite_a_file_another_branch_references_in_full";
    const N: usize = 12_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = common::open(test, options(dir.path()));
    let p = store.partition("cmp", 0).expect("partition");
    let main = p.branch("main").expect("branch");
    let part = dir.path().join("cmp.0");
    let val = |i: usize, v: &str| {
        let mut s = format!("{v}:{i}:").into_bytes();
        s.resize(120, b'x');
        s
    };
    let mut m: Vec<Vec<u8>> = (0..N).map(|i| val(i, "v0")).collect();
    for chunk in (0..N).collect::<Vec<_>>().chunks(1000) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            b.put(key(i), m[i].clone());
        }
        main.write_blocking(b).expect("load");
    }
    let feature = p.create_branch("feature", "main").expect("fork");
    let f = m.clone();
    let shared = data_files(&part);
    assert!(
        shared.len() >= 3,
        "the load fills several files: {shared:?}"
    );

    let overwritten: Vec<usize> = (0..N).filter(|i| (i / 200) % 3 != 0).collect();
    for chunk in overwritten.chunks(1000) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            m[i] = val(i, "v1");
            b.put(key(i), m[i].clone());
        }
        main.write_blocking(b).expect("overwrite");
    }
    let check = |b: &bough::Branch, want: &[Vec<u8>], what: &str| {
        let all = b.scan_blocking(&ScanOptions::default()).expect("scan");
        assert_eq!(all.entries.len(), N, "{what}");
        for (i, kv) in all.entries.iter().enumerate() {
            assert!(kv.value.value == want[i], "{what}: key {i}");
        }
    };

    let before = store.io_stats();
    let report = main.compact_now().expect("compact");
    let io = store.io_stats().since(&before);
    eprintln!("[{test}] with feature: {report:?}; {io:?}");
    assert_eq!(
        report.pages_moved, 0,
        "compaction copied pages out of files feature references in full: {report:?}"
    );
    assert!(report.compacted.is_empty(), "{report:?}");
    assert_eq!(io.write_bytes, 0, "compaction wrote {} B", io.write_bytes);
    assert!(
        report.shared_skipped.iter().any(|n| shared.contains(n)),
        "the loaded files did not look like garbage to main alone, so the test proves \
         nothing: {report:?}"
    );
    let r = p.gc().expect("gc");
    assert!(r.deleted.is_empty(), "GC freed {:?}", r.deleted);
    check(&main, &m, "main");
    check(&feature, &f, "feature");

    // The sharing ends: the same files are now main's alone and worth compacting.
    drop(feature);
    p.delete_branch("feature").expect("delete");
    let report = main.compact_now().expect("compact");
    eprintln!("[{test}] without feature: {report:?}");
    assert!(report.pages_moved > 0, "{report:?}");
    let moved_out: Vec<&String> = report
        .compacted
        .iter()
        .filter(|n| shared.contains(*n))
        .collect();
    assert!(!moved_out.is_empty(), "{report:?}");
    assert!(report.shared_skipped.is_empty(), "{report:?}");
    let r = p.gc().expect("gc");
    let freed: std::collections::BTreeSet<&String> = r.deleted.iter().map(|(n, _)| n).collect();
    for n in &moved_out {
        assert!(freed.contains(n), "{n} was compacted but not freed: {r:?}");
    }
    check(&main, &m, "main after the delete");
    drop((main, p));
    store.close().expect("close");
    let store = common::open(test, options(dir.path()));
    let main = store
        .partition("cmp", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    check(&main, &m, "main after reopen");
    store.close().expect("close");
}
