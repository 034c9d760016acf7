//! Durable write cost with and without the write-ahead log (issue 16, "Write path"):
//! single-key durable commits (one writer, each waits for its sync) and random 10k-key
//! batches, with `write_buffer_bytes` = 0 (pages + manifest, two syncs per commit) against
//! 64 MiB (one log append, one sync; the tree rewritten in checkpoints).
//!
//! `CARGO_TARGET_DIR=... cargo bench -p bough --bench writes -- --quick`. Pread backend on
//! the local file system, so every sync is a real `fdatasync`. Wall-clock figures on a
//! shared VM are noisy: compare the ratios within one run.

use std::hint::black_box;

use bough::{Backend, Branch, Options, Store, WriteBatch};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};

fn open(dir: &std::path::Path, buffer: u64) -> (Store, Branch) {
    let store = Store::open(
        Options::new(dir)
            .backend(Backend::Pread)
            .maintenance_interval_ms(0)
            .write_buffer_bytes(buffer),
    )
    .expect("open");
    let main = store
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    (store, main)
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn single_key(c: &mut Criterion) {
    let mut g = c.benchmark_group("single_key_durable_commit");
    g.throughput(Throughput::Elements(1));
    for buffer in [0u64, 64 << 20] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, main) = open(dir.path(), buffer);
        let mut rng = Rng(7);
        g.bench_function(format!("write_buffer_bytes={buffer}"), |b| {
            b.iter(|| {
                let k = format!("key{:012}", rng.next() % 1_000_000);
                main.put_blocking(black_box(k), "value-of-some-length-0123456789")
                    .expect("put");
            });
        });
        store.close().expect("close");
    }
    g.finish();
}

fn random_batch(c: &mut Criterion) {
    let mut g = c.benchmark_group("random_10k_batch");
    g.throughput(Throughput::Elements(10_000));
    g.sample_size(10);
    for buffer in [0u64, 64 << 20] {
        let dir = tempfile::tempdir().expect("tempdir");
        let (store, main) = open(dir.path(), buffer);
        let mut rng = Rng(11);
        g.bench_function(format!("write_buffer_bytes={buffer}"), |b| {
            b.iter_batched(
                || {
                    let mut batch = WriteBatch::new();
                    let mut keys: Vec<u64> = (0..10_000).map(|_| rng.next() % 1_000_000).collect();
                    keys.sort_unstable();
                    keys.dedup();
                    for k in keys {
                        batch.put(format!("key{k:012}"), [b'v'; 100]);
                    }
                    batch
                },
                |batch| main.write_blocking(batch).expect("write"),
                BatchSize::LargeInput,
            );
        });
        store.close().expect("close");
    }
    g.finish();
}

criterion_group!(benches, single_key, random_batch);
criterion_main!(benches);
