//! Diff cost follows the divergence, not the partition's size: the same `N` changes on a
//! branch of a small and of a large partition cost the diff the same storage reads, up to a
//! small constant for the deeper page-mapping table of the large one.
//!
//! Each partition is bulk-loaded on `main` (keys `key00000000..`, equal-length values),
//! branched, and the branch rewrites `N` keys spread over the first 10,000 (one per leaf,
//! same value length, so no page splits: exactly `N` leaves change). The store is reopened
//! so every page is cold (leaf pages are never cached; the cache starts empty), both heads
//! are opened, and the storage read counter is taken around `diff(main, branch)` alone.
//!
//! What the diff reads: for each side, its mapping root and the mapping pages along the
//! paths that differ (shared pages are cached once read); then each changed logical page on
//! both sides (`2N` leaves — index pages are not rewritten when only their children's
//! contents change, so they stay shared); and the header of a data file it opens first. The
//! large partition's mapping table has one more radix level (a root above the chunk pages;
//! the small one's fits in a single chunk), so it costs one more read per side at most —
//! and the branch, not checkpointed since the fork, shares that root with `main`, so one
//! read in practice. That is [`SIZE_SLACK`]: a constant, which grows by one per factor of
//! the mapping fan-out (about 500 at 4 KiB pages) in size, never with `N`.

use bough::io::MemoryStorage;
use bough::{Options, Store, StoreBuilder, WriteBatch};

/// Extra reads the large partition may cost (see the module comment): one radix level per
/// side.
const SIZE_SLACK: u64 = 2;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn opts(mem: &MemoryStorage) -> StoreBuilder {
    Store::builder(
        Options::in_memory()
            .maintenance_interval_ms(0)
            .cache_data_pages(false),
    )
    .memory(mem.clone())
}

/// Storage reads of `diff(main, branch)` after `changes` rewrites on a branch of a
/// `keys`-key partition, and the diff's length.
fn diff_reads(keys: u64, changes: u64) -> (u64, usize) {
    let started = std::time::Instant::now();
    let mem = MemoryStorage::new();
    let store = Store::open(opts(&mem)).expect("open");
    let p = store.partition("t", 0).expect("partition");
    let main = p.branch("main").expect("main");
    let batch = 100_000;
    let mut i = 0;
    while i < keys {
        let mut b = WriteBatch::new();
        for j in i..(i + batch).min(keys) {
            b.put(key(j), format!("val{j:08}"));
        }
        main.write_blocking(b).expect("load");
        i += batch;
    }
    let loaded = started.elapsed();
    let feature = p.create_branch("feature", "main").expect("branch");
    // One key per leaf (leaves hold ~150 of these entries), the same value length.
    let step = 10_000 / changes;
    let mut b = WriteBatch::new();
    for j in 0..changes {
        let k = j * step + step / 2;
        b.put(key(k), format!("new{k:08}"));
    }
    feature.write_blocking(b).expect("changes");
    drop((main, feature, p));
    store.close().expect("close");

    let store = Store::open(opts(&mem)).expect("reopen");
    let p = store.partition("t", 0).expect("partition");
    p.branch("main").expect("main");
    p.branch("feature").expect("feature");
    let before = store.io_stats();
    let d = p.diff("main", "feature").expect("diff");
    let reads = store.io_stats().since(&before).reads;
    eprintln!(
        "[diff_cost] {keys} keys (loaded in {loaded:.1?}), {changes} changes: the diff read \
         {reads} pages, found {} keys",
        d.len()
    );
    store.close().expect("close");
    (reads, d.len())
}

fn check(small: u64, large: u64, changes: u64) {
    let (s, ds) = diff_reads(small, changes);
    let (l, dl) = diff_reads(large, changes);
    eprintln!("[diff_cost] {changes} changes: {s} reads at {small} keys, {l} at {large} keys");
    assert_eq!((ds, dl), (changes as usize, changes as usize));
    // Not trivially equal: both sides of every changed leaf are read.
    assert!(s >= 2 * changes, "{s} reads for {changes} changed leaves");
    assert!(
        l >= s && l - s <= SIZE_SLACK,
        "{changes} changes: the diff read {s} pages at {small} keys and {l} at {large} keys"
    );
}

/// The cost grows with the divergence: twice the changes, about twice the reads.
#[test]
fn diff_cost_grows_with_the_changes() {
    let (a, _) = diff_reads(10_000, 10);
    let (b, _) = diff_reads(10_000, 40);
    assert!(
        b - a >= 2 * 30 && b - a <= 2 * 30 + SIZE_SLACK,
        "10 changes: {a} reads, 40 changes: {b} reads"
    );
}

/// 10k against 1M keys (the load takes about a second in the test profile).
#[test]
fn diff_cost_tracks_divergence_not_size() {
    check(10_000, 1_000_000, 20);
}
