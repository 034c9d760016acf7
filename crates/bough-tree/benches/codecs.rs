//! Micro-benchmarks of the hot codecs: leaf page build and search, index page decode,
//! manifest replay, file-name parsing and checksums.
//!
//! `CARGO_TARGET_DIR=/work/target-bench cargo bench -p bough-tree --bench codecs`
//! (add `-- --quick` for a short run). Wall-clock figures on a shared VM are noisy:
//! compare within one run.

use std::hint::black_box;

use bough_manifest::checksum::{Domain, checksum};
use bough_manifest::{
    BranchFileMapping, BranchName, LogRecord, PageAddr, Snapshot, encode_log, encode_snapshot,
    replay,
};
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

/// 16-byte keys sharing an 8-byte prefix (so prefix compression has work to do), sorted.
fn sorted_keys(n: usize) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = (0..n as u64)
        .map(|i| {
            let mut k = b"tenant07".to_vec();
            k.extend_from_slice(&mix(i).to_be_bytes());
            k
        })
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// The entries of one full 4 KiB leaf: 16 B keys with 100 B inline values.
fn leaf_entries() -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut size = leaf::LEAF_OVERHEAD;
    for (i, key) in sorted_keys(64).into_iter().enumerate() {
        let e = Entry {
            key,
            timestamp: 1_700_000_000_000 + i as u64,
            expire_at: 0,
            value: ValueLoc::Inline(vec![i as u8; 100]),
        };
        size += e.max_encoded_len();
        if size > 4096 - 64 {
            break;
        }
        entries.push(e);
    }
    entries
}

fn bench_leaf(c: &mut Criterion) {
    let entries = leaf_entries();
    let payload = leaf::encode(&entries);
    let mut g = c.benchmark_group("leaf");
    g.throughput(Throughput::Bytes(payload.len() as u64));
    g.bench_function(BenchmarkId::new("encode", entries.len()), |b| {
        b.iter(|| leaf::encode(black_box(&entries)))
    });
    g.bench_function(BenchmarkId::new("decode_all", entries.len()), |b| {
        b.iter(|| {
            LeafView::new(black_box(&payload))
                .and_then(|v| v.entries())
                .expect("valid leaf")
        })
    });
    g.throughput(Throughput::Elements(1));
    let probes: Vec<Vec<u8>> = (0..64u64)
        .map(|i| {
            entries[(mix(i) % entries.len() as u64) as usize]
                .key
                .clone()
        })
        .collect();
    let mut i = 0;
    g.bench_function("seek_floor_hit", |b| {
        b.iter(|| {
            i = (i + 1) % probes.len();
            LeafView::new(black_box(&payload))
                .and_then(|v| v.seek_floor(black_box(&probes[i])))
                .expect("valid leaf")
        })
    });
    let miss = b"tenant07\xff\xff\xff\xff\xff\xff\xff\xff\xff".to_vec();
    g.bench_function("seek_floor_past_end", |b| {
        b.iter(|| {
            LeafView::new(black_box(&payload))
                .and_then(|v| v.seek_floor(black_box(&miss)))
                .expect("valid leaf")
        })
    });
    g.finish();
}

fn bench_index(c: &mut Criterion) {
    // A full 4 KiB index page: 16 B separators, 4 B child ids.
    let keys = sorted_keys(180);
    let node = IndexNode::new(&keys, (0..=keys.len() as u32).collect());
    let payload = node.encode();
    assert!(payload.len() <= 4096 - 64, "{} bytes", payload.len());
    let mut g = c.benchmark_group("index");
    g.throughput(Throughput::Bytes(payload.len() as u64));
    g.bench_function(BenchmarkId::new("decode", node.children.len()), |b| {
        b.iter(|| IndexNode::decode(black_box(&payload)).expect("valid index"))
    });
    g.bench_function(BenchmarkId::new("encode", node.children.len()), |b| {
        b.iter(|| black_box(&node).encode())
    });
    let probe = node.key(97).expect("a separator").to_vec();
    g.throughput(Throughput::Elements(1));
    g.bench_function("child_for", |b| {
        b.iter(|| black_box(&node).child_for(black_box(&probe)))
    });
    g.finish();
}

/// A manifest file: a snapshot with `overlay` mapping entries, then `logs` log records of
/// `changes` mapping changes each.
fn manifest_file(overlay: u32, logs: u64, changes: u32) -> Vec<u8> {
    let addr = |i: u32| {
        PageAddr::new(u64::from(i / 2047) + 1, i % 2047 + 1)
            .expect("address in range")
            .to_u64()
    };
    let mut s = Snapshot::empty(BranchName::main(), 1, 4096);
    s.next_page_id = overlay;
    s.overlay = (0..overlay).map(|id| (id, addr(id))).collect();
    let mut file = encode_snapshot(&s).expect("snapshot encodes");
    let mut next = overlay;
    for seq in 1..=logs {
        let first = next;
        next += changes;
        let l = LogRecord {
            seq,
            root: first,
            ttl_root: bough_manifest::NO_PAGE,
            max_file_id: 0,
            branch_file_ranges: BranchFileMapping::new(),
            checkpoint: None,
            next_page_id: next,
            free_head: None,
            changes: (first..next).map(|id| (id, addr(id))).collect(),
            extensions: Vec::new(),
        };
        file.extend(encode_log(&l).expect("log encodes"));
    }
    file
}

fn bench_manifest(c: &mut Criterion) {
    let mut g = c.benchmark_group("manifest_replay");
    for (overlay, logs, changes) in [(1_000u32, 10u64, 16u32), (10_000, 200, 32)] {
        let file = manifest_file(overlay, logs, changes);
        let replayed = replay(&file).expect("replays");
        assert_eq!(replayed.records as u64, logs + 1);
        g.throughput(Throughput::Bytes(file.len() as u64));
        g.bench_function(
            BenchmarkId::new("replay", format!("{overlay}_overlay_{logs}_logs")),
            |b| b.iter(|| replay(black_box(&file)).expect("replays")),
        );
    }
    g.finish();
}

fn bench_names(c: &mut Criterion) {
    let names = [
        "manifest_main_5",
        "manifest_feature-x_12_1700000000000",
        "data_1048576_main_5",
        "CURRENT_TERM.main",
        "data_10_x_5.2.tmp",
        "not-a-store-file.txt",
    ];
    let mut g = c.benchmark_group("names");
    g.throughput(Throughput::Elements(names.len() as u64));
    g.bench_function("classify_mixed", |b| {
        b.iter(|| {
            for n in names {
                black_box(bough_names::classify(black_box(n)));
            }
        })
    });
    g.finish();
}

fn bench_checksum(c: &mut Criterion) {
    let mut g = c.benchmark_group("checksum");
    for len in [64usize, 4096, 65536] {
        let bytes: Vec<u8> = (0..len).map(|i| mix(i as u64) as u8).collect();
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_function(BenchmarkId::new("page", len), |b| {
            b.iter(|| checksum(Domain::Page, black_box(&bytes)))
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    bench_leaf,
    bench_index,
    bench_manifest,
    bench_names,
    bench_checksum
);
criterion_main!(benches);
