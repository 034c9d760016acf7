//! The write buffer's costs: pushing commits of random keys (each a run, merged
//! binary-counter style), freezing the result for a checkpoint, and a get through a full
//! buffer for a key it does not hold (most gets: each run's filter answers).
//!
//! `cargo bench -p bough-tree --bench buffer` (add `-- --quick` for a short run).
//! Wall-clock figures on a shared VM are noisy: compare within one run.

use std::hint::black_box;

use bough_manifest::{NO_PAGE, PageId};
use bough_tree::btree::{Mutation, Node, Op, TreeRead};
use bough_tree::buffer::WriteBuffer;
use bough_tree::error::{TreeError, TreeResult};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// A well-mixed 64-bit function (SplitMix64) for deterministic keys.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// `commits` sorted batches of `keys` random 16-byte keys with 100-byte values.
fn batches(commits: u64, keys: u64) -> Vec<Vec<Mutation>> {
    (0..commits)
        .map(|c| {
            let mut b: Vec<Mutation> = (0..keys)
                .map(|k| Mutation {
                    key: format!("{:016x}", mix(c * keys + k)).into_bytes(),
                    op: Op::Put {
                        value: vec![b'v'; 100],
                        timestamp: 1,
                        expire_at: 0,
                    },
                })
                .collect();
            b.sort_by(|x, y| x.key.cmp(&y.key));
            b.dedup_by(|x, y| x.key == y.key);
            b
        })
        .collect()
}

/// A buffer holding `input`, one commit per batch.
fn filled(input: Vec<Vec<Mutation>>) -> WriteBuffer {
    let mut buf = WriteBuffer::new();
    for (v, muts) in input.into_iter().enumerate() {
        buf.push(v as u64 + 1, muts);
    }
    buf
}

fn push(c: &mut Criterion) {
    let (commits, keys) = (256u64, 1000u64);
    let input = batches(commits, keys);
    let mut g = c.benchmark_group("buffer");
    g.throughput(Throughput::Elements(commits * keys));
    g.sample_size(10);
    g.bench_function("push_256_commits_of_1k_random_keys", |b| {
        b.iter_batched(
            || input.clone(),
            |input| black_box(filled(input)),
            criterion::BatchSize::LargeInput,
        );
    });
    g.bench_function("push_then_freeze_256_commits_of_1k_random_keys", |b| {
        b.iter_batched(
            || input.clone(),
            |input| black_box(filled(input).frozen_batch()),
            criterion::BatchSize::LargeInput,
        );
    });
    g.finish();
}

/// A tree with no pages: a get below the buffer ends at its empty root.
struct EmptyTree;

impl TreeRead for EmptyTree {
    fn node(&self, id: PageId) -> TreeResult<Node> {
        Err(TreeError::corruption("<empty>", u64::from(id), "no page"))
    }
    fn overflow(&self, first: PageId, _pages: u32, _len: u64) -> TreeResult<Vec<u8>> {
        Err(TreeError::corruption(
            "<empty>",
            u64::from(first),
            "no page",
        ))
    }
    fn locate_page(&self, id: PageId) -> (String, u64) {
        ("<empty>".to_string(), u64::from(id))
    }
}

fn get_through_full_buffer(c: &mut Criterion) {
    let buf = filled(batches(256, 1000));
    let absent: Vec<Vec<u8>> = (0..10_000u64)
        .map(|i| format!("{:016x}", mix(u64::MAX - i)).into_bytes())
        .collect();
    let mut g = c.benchmark_group("buffer");
    g.throughput(Throughput::Elements(absent.len() as u64));
    g.bench_function("get_absent_through_256_runs_merged", |b| {
        b.iter(|| {
            let read = buf.over(&EmptyTree, NO_PAGE);
            for k in &absent {
                black_box(read.get(k).ok());
            }
        });
    });
    g.finish();
}

criterion_group!(benches, push, get_through_full_buffer);
criterion_main!(benches);
