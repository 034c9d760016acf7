//! A 1 GiB load (slow; not in the default or CI profiles): 1,048,576 keys × 1 KiB values
//! in batches of 10,000 on the positional-I/O backend, then a full verifying scan, random
//! point reads, and the same after a reopen.
//!
//! A 1 KiB value is stored inline (the inline limit is about half a 4 KiB page), so
//! three fit in a leaf. The test prints the bytes on disk.

mod common;

use std::time::Instant;

use bough::{Backend, Options, ScanOptions, WriteBatch};
use common::Rng;

const KEYS: u64 = 1 << 20;
const VALUE: usize = 1024;
const BATCH: u64 = 10_000;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let mut v = vec![0u8; VALUE];
    let mut x = common::mix(i);
    for chunk in v.chunks_mut(8) {
        x = common::mix(x);
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

fn verify_scan(main: &bough::Branch) -> std::time::Duration {
    let started = Instant::now();
    let mut opts = ScanOptions {
        limit: 10_000,
        ..Default::default()
    };
    let mut next = 0u64;
    loop {
        let page = main.scan_blocking(&opts).expect("scan");
        for kv in &page.entries {
            assert_eq!(kv.key, key(next), "scan skipped or repeated a key");
            assert!(kv.value.value == value(next), "wrong value for key {next}");
            next += 1;
        }
        match page.next {
            Some(k) => opts.begin = std::ops::Bound::Included(k),
            None => break,
        }
    }
    assert_eq!(next, KEYS, "the scan saw {next} keys");
    started.elapsed()
}

#[test]
fn slow_load_1gib_then_verify() {
    let test = "slow_load_1gib_then_verify";
    let seed = common::seeds(test, 1)[0];
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = || {
        Options::new(dir.path())
            .backend(Backend::Pread)
            .maintenance_interval_ms(0)
    };
    let store = common::open(test, opts());
    let main = store
        .partition("load", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    let started = Instant::now();
    let mut i = 0;
    while i < KEYS {
        let mut b = WriteBatch::new();
        for j in i..(i + BATCH).min(KEYS) {
            b.put(key(j), value(j));
        }
        main.write_blocking(b).expect("load");
        i += BATCH;
    }
    let load = started.elapsed();
    let bytes = KEYS * (VALUE as u64 + 11);
    let (len, alloc) = common::dir_bytes(&dir.path().join("load.0"));
    eprintln!(
        "[{test}] loaded {KEYS} keys ({:.2} GiB of keys and values) in {load:.1?}: {:.0} MiB/s; \
         {len} B on disk ({alloc} B allocated)",
        bytes as f64 / f64::from(1 << 30),
        bytes as f64 / f64::from(1 << 20) / load.as_secs_f64()
    );
    let scan = verify_scan(&main);
    eprintln!("[{test}] verified by a full scan in {scan:.1?}");
    for _ in 0..10_000 {
        let i = rng.below(KEYS);
        assert_eq!(
            main.get_blocking(key(i))
                .expect("get")
                .expect("present")
                .value,
            value(i)
        );
    }
    store.close().expect("close");
    drop(main);
    drop(store);
    let store = common::open(test, opts());
    let main = store
        .partition("load", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    let scan = verify_scan(&main);
    eprintln!("[{test}] verified again after a reopen in {scan:.1?}");
    store.close().expect("close");
}
