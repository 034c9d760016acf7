//! Space under a steady load of random overwrites through the write buffer: each large
//! checkpoint rewrites most leaves, and the maintenance thread compacts the branch (keeping
//! its buffer) and collects the partition right after it, not at its next tick. The tick
//! here is an hour away, so only the pass that follows checkpoints can free anything.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use bough::{Options, ScanOptions, WriteBatch};
use common::Rng;

const KEYS: usize = 20_000;
const FILE: u64 = 16 * 4096 * 8;
/// Data files may hold the tree twice over while a checkpoint writes the next version, plus
/// index and mapping pages and the files still filling.
const FACTOR: f64 = 3.0;
/// How long the test waits for the pass after the last checkpoint (it normally takes
/// milliseconds; the bound only keeps a broken build from hanging).
const PATIENCE: Duration = Duration::from_secs(60);

/// Allocated bytes of the data files in a partition directory (the log is bounded by its
/// own file size, whatever the live data: see `log_files.rs`).
fn allocated(part: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(part)
        .expect("read_dir")
        .map(|e| e.expect("entry"))
        .filter(|e| e.file_name().to_string_lossy().starts_with("data_"))
        .map(|e| e.metadata().expect("metadata").blocks() * 512)
        .sum()
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(rng: &mut Rng, i: usize, round: usize) -> Vec<u8> {
    let mut v = format!("{i}:{round}:").into_bytes();
    v.resize(rng.urange(60, 140), b'a' + (round % 26) as u8);
    v
}

fn options(dir: &Path) -> Options {
    Options::new(dir)
        .write_buffer_bytes(256 << 10)
        .maintenance_interval_ms(3_600_000)
        .data_file_size(FILE)
        .compaction_garbage_ratio(0.5)
}

#[test]
fn large_checkpoints_are_followed_by_compaction_and_gc_without_waiting_for_the_tick() {
    let test = "large_checkpoints_are_followed_by_compaction_and_gc_without_waiting_for_the_tick";
    let seed = common::seeds(test, 1)[0];
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = common::open(test, options(dir.path()));
    let main = store
        .partition("load", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    let part = dir.path().join("load.0");
    let mut model: Vec<Vec<u8>> = vec![Vec::new(); KEYS];
    let mut written = 0u64;
    for round in 0..200 {
        let mut b = WriteBatch::new();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..if round == 0 { KEYS } else { 1_000 } {
            let i = if round == 0 {
                seen.len()
            } else {
                rng.urange(0, KEYS)
            };
            if seen.insert(i) {
                model[i] = value(&mut rng, i, round);
                b.put(key(i), model[i].clone());
                written += (key(i).len() + model[i].len()) as u64;
            }
        }
        main.write_blocking(b).expect("write");
    }
    let live: u64 = model
        .iter()
        .enumerate()
        .map(|(i, v)| (key(i).len() + v.len()) as u64)
        .sum();
    assert!(
        written > 10 * live,
        "the load rewrote the data {written} / {live} times"
    );
    let checkpoints = store.write_buffer_usage();
    assert!(
        checkpoints.background_checkpoints + checkpoints.commit_checkpoints >= 10,
        "{checkpoints:?}"
    );
    let bound = (FACTOR * live as f64) as u64;
    let started = Instant::now();
    let mut files = allocated(&part);
    while files > bound && started.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(50));
        files = allocated(&part);
    }
    eprintln!(
        "[{test}] seed {seed}: {written} B written, {live} B live, data files {files} B ({:.2}x) after {:?}",
        files as f64 / live as f64,
        started.elapsed()
    );
    assert!(
        files <= bound,
        "data files take {files} B for {live} B live (bound {FACTOR}x): nothing collected the checkpoints' garbage"
    );
    let all = main.scan_blocking(&ScanOptions::default()).expect("scan");
    assert_eq!(all.entries.len(), KEYS);
    for (i, kv) in all.entries.iter().enumerate() {
        assert!(kv.value.value == model[i], "key {i}");
    }
    store.close().expect("close");
    // Nothing collected was still needed.
    let store = common::open(test, options(dir.path()));
    let main = store
        .partition("load", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    let all = main.scan_blocking(&ScanOptions::default()).expect("scan");
    assert_eq!(all.entries.len(), KEYS);
    for (i, kv) in all.entries.iter().enumerate() {
        assert!(kv.value.value == model[i], "key {i} after the reopen");
    }
    store.close().expect("close");
}
