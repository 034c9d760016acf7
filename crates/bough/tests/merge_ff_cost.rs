//! A fast-forward merge costs the same however far the branches diverged (issue 14, §6):
//! it adopts the source's mapping root and file ranges by reference, and counts the keys it
//! brings — a diff of the source against the base, whose cost follows the divergence — only
//! when `MergeOptions::count_fast_forward` asks. Before, every fast-forward ran that diff:
//! 2,224 page reads for 20,000 changed keys against a handful for 10.
//!
//! Each run loads `main`, forks `feature`, rewrites `N` keys on `feature`, reopens the store
//! (so every page is cold; data pages are not cached), opens both heads and counts what the
//! merge alone reads: pages looked up in the page cache (hits and misses: every mapping,
//! index and leaf page a walk touches) and reads that reach the storage.

use bough::io::MemoryStorage;
use bough::{MergeOptions, MergeReport, Options, Store, StoreBuilder, WriteBatch};

const KEYS: u64 = 30_000;

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

/// What a merge read: page-cache lookups and storage reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reads {
    pages: u64,
    storage: u64,
}

/// What a fast-forward of `feature` (with `changes` rewritten keys) into `main` read, and
/// its report.
fn fast_forward_reads(changes: u64, count: bool) -> (Reads, MergeReport) {
    let mem = MemoryStorage::new();
    let store = Store::open(opts(&mem)).expect("open");
    let p = store.partition("t", 0).expect("partition");
    let main = p.branch("main").expect("main");
    let mut b = WriteBatch::new();
    for j in 0..KEYS {
        b.put(key(j), format!("val{j:08}"));
    }
    main.write_blocking(b).expect("load");
    let feature = p.create_branch("feature", "main").expect("branch");
    let step = KEYS / changes;
    let mut b = WriteBatch::new();
    for j in 0..changes {
        b.put(key(j * step), format!("new{j:08}"));
    }
    feature.write_blocking(b).expect("changes");
    drop((main, feature, p));
    store.close().expect("close");

    let store = Store::open(opts(&mem)).expect("reopen");
    let p = store.partition("t", 0).expect("partition");
    p.branch("main").expect("main");
    p.branch("feature").expect("feature");
    let before = store.io_stats();
    let (hits, misses) = store.cache().hit_stats();
    let r = p
        .merge(
            "feature",
            "main",
            MergeOptions {
                count_fast_forward: count,
                ..Default::default()
            },
        )
        .expect("merge");
    let (hits2, misses2) = store.cache().hit_stats();
    let reads = Reads {
        pages: (hits2 - hits) + (misses2 - misses),
        storage: store.io_stats().since(&before).reads,
    };
    eprintln!("[merge_ff_cost] {changes} changes, counted: {count}: {reads:?}, {r:?}");
    assert!(r.fast_forward && r.committed, "{r:?}");
    let main = p.branch("main").expect("main");
    let got = main.get_blocking(key(0)).expect("get").expect("key 0");
    assert_eq!(got.value, b"new00000000", "main holds feature's state");
    store.close().expect("close");
    (reads, r)
}

#[test]
fn fast_forward_cost_is_independent_of_divergence() {
    let (few, r10) = fast_forward_reads(10, false);
    let (many, r20k) = fast_forward_reads(20_000, false);
    assert_eq!(
        (r10.applied, r20k.applied),
        (0, 0),
        "not counted unless asked"
    );
    assert_eq!(
        many, few,
        "a fast-forward of 20,000 changed keys read {many:?}, of 10 keys {few:?}"
    );
}

/// Counting on request still works, and costs the divergence (so the test above measures
/// something a diff would show).
#[test]
fn fast_forward_counts_the_keys_when_asked() {
    let (few, r10) = fast_forward_reads(10, true);
    let (many, r20k) = fast_forward_reads(20_000, true);
    assert_eq!((r10.applied, r20k.applied), (10, 20_000));
    // Storage reads show the divergence; page-cache lookups need not (a snapshot keeps
    // the mapping chunks and top index pages it resolved, so a walk probes the cache once
    // per chunk and page kept, not once per leaf).
    assert!(
        many.pages >= few.pages && many.storage >= few.storage + 100,
        "counting 20,000 changed keys read {many:?}, 10 keys {few:?}"
    );
}
