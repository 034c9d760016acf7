//! The cost of the async read path against the blocking one (issue 15, "Async that is
//! async"): `Branch::get` awaited on a current-thread tokio runtime against `get_blocking`,
//! warm (every page cached: the async get is answered on the caller's thread from the
//! cache) and cold (leaf pages never cached, `cache_data_pages(false)`: every get reads its
//! leaf from storage — the OS page cache — and the async one first tries the cache, then
//! hands the read to a reader thread and awaits it).
//!
//! `CARGO_TARGET_DIR=... cargo bench -p bough --bench reads -- --quick` (a filter such as
//! `warm` or `cold` runs one group). Each iteration is 100 gets of well-spread keys, the
//! async ones inside one `block_on`, so the runtime's own entry cost is amortized as in a
//! task that awaits many reads. Wall-clock figures on a shared VM are noisy: compare the
//! ratios within one run. `scan_warm` times scans of 100 entries on the warm store, as
//! one page (`scan_blocking`) and through the iterator (`range`).

use std::hint::black_box;

use bough::{Backend, Branch, Options, Store, WriteBatch};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const KEYS: u64 = 100_000;
const GETS: u64 = 100;

fn key(i: u64) -> Vec<u8> {
    format!("key{:012}", (i.wrapping_mul(7919)) % KEYS).into_bytes()
}

fn open(dir: &std::path::Path, cache_leaves: bool) -> (Store, Branch) {
    let store = Store::open(
        Options::new(dir)
            .backend(Backend::Pread)
            .cache_bytes(256 << 20)
            .cache_data_pages(cache_leaves)
            .maintenance_interval_ms(0),
    )
    .expect("open");
    let main = store
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    (store, main)
}

fn load(dir: &std::path::Path) {
    let (store, main) = open(dir, true);
    let value = vec![b'v'; 84];
    for start in (0..KEYS).step_by(10_000) {
        let mut batch = WriteBatch::new();
        for k in start..(start + 10_000).min(KEYS) {
            batch.put(format!("key{k:012}"), value.clone());
        }
        main.write_blocking(batch).expect("load");
    }
    store.close().expect("close");
}

fn bench_reads(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    load(dir.path());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    for (name, cache_leaves) in [("warm", true), ("cold", false)] {
        let (store, main) = open(dir.path(), cache_leaves);
        // Warm: every leaf read once, so all of them are cached.
        for i in 0..KEYS {
            black_box(main.get_blocking(key(i)).expect("get"));
        }
        let mut g = c.benchmark_group(format!("get_{name}"));
        g.throughput(Throughput::Elements(GETS));
        let mut n = 0u64;
        g.bench_function("get_blocking", |b| {
            b.iter(|| {
                for _ in 0..GETS {
                    n += 1;
                    black_box(main.get_blocking(key(n)).expect("get"));
                }
            })
        });
        g.bench_function("get_async_current_thread", |b| {
            b.iter(|| {
                rt.block_on(async {
                    for _ in 0..GETS {
                        n += 1;
                        black_box(main.get(&key(n)).await.expect("get"));
                    }
                })
            })
        });
        g.finish();
        if name == "warm" {
            bench_scans(c, &main, &mut n);
        }
        store.close().expect("close");
    }
}

/// Scans of 100 entries from well-spread keys on the warm store (issue 17's `scan_100`
/// row): what a range costs beyond its leaves' cache lookups.
fn bench_scans(c: &mut Criterion, main: &Branch, n: &mut u64) {
    let mut g = c.benchmark_group("scan_warm");
    g.throughput(Throughput::Elements(100));
    g.bench_function("scan_100_blocking", |b| {
        b.iter(|| {
            *n += 1;
            let page = main
                .scan_blocking(&bough::ScanOptions {
                    begin: std::ops::Bound::Included(key(*n)),
                    limit: 100,
                    ..bough::ScanOptions::default()
                })
                .expect("scan");
            black_box(page.entries.len())
        })
    });
    g.bench_function("range_100_iter", |b| {
        b.iter(|| {
            *n += 1;
            for kv in main.range(key(*n)..).take(100) {
                black_box(kv.expect("range"));
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench_reads);
criterion_main!(benches);
