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
//! Why 3×: a sealed file is compacted once half of it is garbage, so in the steady state
//! sealed files are at least about half live (2×); leaves are not full after random
//! updates, and index and mapping pages and the manifest come on top.

mod common;

use std::path::Path;

use bough::{Backend, Options, ScanOptions, WriteBatch};
use common::Rng;

const KEYS: usize = 20_000;
const FACTOR: f64 = 3.5;
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

fn options(dir: &Path) -> Options {
    Options::new(dir)
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
    let value = |rng: &mut Rng, i: usize, round: usize| {
        let mut v = format!("{i}:{round}:").into_bytes();
        v.resize(rng.urange(40, 160), b'a' + (round % 26) as u8);
        v
    };
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(2000) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            model[i] = value(&mut rng, i, 0);
            b.put(key(i), model[i].clone());
        }
        main.write_blocking(b).expect("load");
    }
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
