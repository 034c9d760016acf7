//! Micro-benchmarks of the leaf paths a get and a commit take: the search of one leaf (the
//! byte-level cursor), a get through a three-level tree, and a batch merged into leaves
//! (cursor, byte-range copies, one encode buffer per leaf), on an in-memory page store.
//!
//! `CARGO_TARGET_DIR=/work/target-bench cargo bench -p bough-tree --bench leaves`
//! (add `-- --quick` for a short run). Wall-clock figures on a shared VM are noisy:
//! compare within one run.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;

use bough_manifest::{NO_PAGE, PageId};
use bough_tree::btree::{self, Applied, Mutation, Node, Op, TreeRead, TreeWrite};
use bough_tree::error::{TreeError, TreeResult};
use bough_tree::page::index::IndexNode;
use bough_tree::page::leaf::{self, Entry, LeafView, ValueLoc};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// A well-mixed 64-bit function (SplitMix64) for deterministic keys.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Key `i` of the data set: 16 bytes sharing an 8-byte prefix, in a random order of `i`.
fn key(i: u64) -> Vec<u8> {
    let mut k = b"tenant07".to_vec();
    k.extend_from_slice(&mix(i).to_be_bytes());
    k
}

fn put(i: u64, ts: u64) -> Mutation {
    Mutation {
        key: key(i),
        op: Op::Put {
            value: vec![i as u8; 100],
            timestamp: ts,
            expire_at: 0,
        },
    }
}

/// Pages in a map, written in place: the tree's logic without I/O.
#[derive(Default, Clone)]
struct MemPages {
    pages: HashMap<PageId, Node>,
    next: PageId,
}

impl TreeRead for MemPages {
    fn node(&self, id: PageId) -> TreeResult<Node> {
        self.pages
            .get(&id)
            .cloned()
            .ok_or_else(|| TreeError::corruption("<bench>", u64::from(id), "no such page"))
    }
    fn overflow(&self, first: PageId, _pages: u32, _len: u64) -> TreeResult<Vec<u8>> {
        Err(TreeError::corruption(
            "<bench>",
            u64::from(first),
            "no overflow pages",
        ))
    }
    fn locate_page(&self, id: PageId) -> (String, u64) {
        ("<bench>".to_string(), u64::from(id))
    }
}

impl MemPages {
    fn id(&mut self, id: Option<PageId>) -> PageId {
        id.unwrap_or_else(|| {
            self.next += 1;
            self.next
        })
    }
}

impl TreeWrite for MemPages {
    fn payload_capacity(&self) -> usize {
        4096 - 32
    }
    fn put_leaf(&mut self, id: Option<PageId>, payload: Vec<u8>) -> TreeResult<PageId> {
        let id = self.id(id);
        self.pages.insert(id, Node::Leaf(payload.into()));
        Ok(id)
    }
    fn put_index(&mut self, id: Option<PageId>, node: IndexNode) -> TreeResult<PageId> {
        let id = self.id(id);
        self.pages.insert(id, Node::Index(Arc::new(node)));
        Ok(id)
    }
    fn free(&mut self, id: PageId) -> TreeResult<()> {
        self.pages.remove(&id);
        Ok(())
    }
    fn put_overflow(&mut self, _value: &[u8]) -> TreeResult<(PageId, u32)> {
        Err(TreeError::InvalidArgument {
            what: "no overflow pages in this bench".into(),
        })
    }
    fn free_overflow(&mut self, _first: PageId, _pages: u32) -> TreeResult<()> {
        Ok(())
    }
}

/// A tree of `n` keys loaded in random order (leaves about 70% full, as after random
/// writes), in batches of 1,000.
fn tree(n: u64) -> (MemPages, PageId) {
    let mut t = MemPages::default();
    let mut root = NO_PAGE;
    let mut order: Vec<u64> = (0..n).collect();
    order.sort_by_key(|&i| mix(i ^ 0x5eed));
    for chunk in order.chunks(1000) {
        let mut muts: Vec<Mutation> = chunk.iter().map(|&i| put(i, 1)).collect();
        muts.sort_by(|a, b| a.key.cmp(&b.key));
        root = btree::apply(&mut t, root, &muts, &mut Applied::default()).expect("load");
    }
    (t, root)
}

/// The entries of one full 4 KiB leaf: 16 B keys with 100 B inline values.
fn full_leaf() -> Vec<Entry> {
    let mut keys: Vec<Vec<u8>> = (0..64).map(key).collect();
    keys.sort();
    let mut entries = Vec::new();
    for (i, key) in keys.into_iter().enumerate() {
        entries.push(Entry {
            key,
            timestamp: 1_700_000_000_000 + i as u64,
            expire_at: 0,
            value: ValueLoc::Inline(vec![i as u8; 100]),
        });
        if leaf::encoded_len(&entries) > 4096 - 32 {
            entries.pop();
            break;
        }
    }
    entries
}

fn bench_leaf_search(c: &mut Criterion) {
    let entries = full_leaf();
    let payload = leaf::encode(&entries);
    let probes: Vec<Vec<u8>> = (0..64u64)
        .map(|i| {
            entries[(mix(i) % entries.len() as u64) as usize]
                .key
                .clone()
        })
        .collect();
    let mut g = c.benchmark_group("leaf_search");
    g.throughput(Throughput::Elements(1));
    let mut i = 0;
    g.bench_function(BenchmarkId::new("get_borrowed", entries.len()), |b| {
        b.iter(|| {
            i = (i + 1) % probes.len();
            let view = LeafView::new(black_box(&payload)).expect("valid leaf");
            view.get(black_box(&probes[i]))
                .expect("valid leaf")
                .map(|e| e.value)
                .is_some()
        })
    });
    g.bench_function(BenchmarkId::new("seek_floor_owned", entries.len()), |b| {
        b.iter(|| {
            i = (i + 1) % probes.len();
            LeafView::new(black_box(&payload))
                .and_then(|v| v.seek_floor(black_box(&probes[i])))
                .expect("valid leaf")
        })
    });
    g.bench_function(BenchmarkId::new("cursor_walk", entries.len()), |b| {
        b.iter(|| {
            let view = LeafView::new(black_box(&payload)).expect("valid leaf");
            let mut c = view.cursor();
            let mut n = 0usize;
            while c.advance().expect("valid leaf") {
                n += c.key().len();
            }
            n
        })
    });
    g.finish();
}

fn bench_tree_get(c: &mut Criterion) {
    let n = 100_000u64;
    let (t, root) = tree(n);
    let mut g = c.benchmark_group("tree_get");
    g.throughput(Throughput::Elements(1));
    let mut i = 0u64;
    g.bench_function(BenchmarkId::new("hit", n), |b| {
        b.iter(|| {
            i = (i + 7919) % n;
            btree::get(&t, root, black_box(&key(i))).expect("get")
        })
    });
    g.finish();
}

fn bench_merge(c: &mut Criterion) {
    let n = 100_000u64;
    let (base, root) = tree(n);
    let mut g = c.benchmark_group("leaf_merge");
    // One key per leaf touched (the cost is the leaf rewritten), and a batch that lands
    // many keys in each leaf.
    for (batch, stride) in [(100u64, 997u64), (10_000, 7)] {
        let mut muts: Vec<Mutation> = (0..batch).map(|j| put((j * stride) % n, 2)).collect();
        muts.sort_by(|a, b| a.key.cmp(&b.key));
        muts.dedup_by(|a, b| a.key == b.key);
        g.throughput(Throughput::Elements(muts.len() as u64));
        g.bench_function(BenchmarkId::new("overwrite_batch", muts.len()), |b| {
            b.iter_batched(
                || base.clone(),
                |mut t| {
                    btree::apply(&mut t, root, black_box(&muts), &mut Applied::default())
                        .expect("apply")
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench_leaf_search, bench_tree_get, bench_merge);
criterion_main!(benches);
