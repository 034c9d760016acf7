//! Read cost: with index and mapping pages cached (and data pages deliberately not), a
//! point read of a key not read before costs exactly one storage read — its leaf — on both
//! local backends. The tree is checked to have at least two index levels, and a cold first
//! read after reopening without a prewarm is shown to cost more than one read, so the test
//! cannot pass trivially. With the prewarm (the default), the first get after reopening
//! costs one read too, and so does every get while leaves stream through a small cache.

mod common;

use std::path::Path;
use std::sync::Arc;

use bough::io::BackendChoice;
use bough::{Backend, Options, Store, WriteBatch};
use bough_catalog::Partition;
use bough_names::{BranchName, PartitionDir, TableName};
use bough_tree::btree::{Node, TreeRead};
use bough_tree::cache::PageCache;
use bough_tree::head::HeadConfig;
use common::Rng;

const KEYS: usize = 60_000;
const WARM_EVERY: usize = 5;

fn key(i: usize) -> Vec<u8> {
    // 40-byte keys: index pages hold ~80 children, so 60k keys need two index levels.
    format!("key-{i:08}-{}", "k".repeat(27)).into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    format!("value-{i:08}-{}", "v".repeat(i % 60)).into_bytes()
}

fn options(dir: &Path, backend: Backend) -> Options {
    Options::new(dir)
        .backend(backend)
        .maintenance_interval_ms(0)
        .cache_data_pages(false)
}

/// Levels of the key tree (1 = a lone leaf), read through the lower layers.
fn tree_levels(dir: &Path) -> usize {
    let storage = bough::io::open_local(dir, BackendChoice::Pread).expect("storage");
    let cfg = HeadConfig {
        page_size: 4096,
        file_pages: (Options::default().data_file_size / 4096) as u32,
        ..HeadConfig::default()
    };
    let part = Partition::open(
        storage,
        PartitionDir::new(TableName::new("io").expect("table"), 0),
        cfg,
        Arc::new(PageCache::new(1 << 20)),
        false,
        false,
    )
    .expect("partition");
    let head = part.open_head(&BranchName::main()).expect("head");
    let snap = head.snapshot();
    let mut id = snap.root;
    let mut levels = 1;
    while let Node::Index(n) = snap.node(id).expect("node") {
        levels += 1;
        id = n.children[0];
    }
    levels
}

/// Writes keys `0..KEYS` into `main` of partition `io.0`.
fn load(test: &str, dir: &Path, backend: Backend) {
    let store = common::open(test, options(dir, backend));
    let main = store
        .partition("io", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(6000) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            b.put(key(i), value(i));
        }
        main.write_blocking(b).expect("load");
    }
    store.close().expect("close");
}

fn one_read_per_cold_leaf(backend: Backend) {
    let test = "one_read_per_cold_leaf";
    let seed = common::seeds(test, 1)[0];
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    load(test, dir.path(), backend);
    let levels = tree_levels(dir.path());
    assert!(
        levels >= 3,
        "the tree has {levels} levels; the test needs at least two index levels"
    );

    let store: Store = common::open(test, options(dir.path(), backend).prewarm_on_open(false));
    let main = store
        .partition("io", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    // Cold: the first read walks the mapping and the index from the disk.
    let before = store.io_stats();
    let first = rng.urange(0, KEYS);
    assert_eq!(
        main.get_blocking(key(first))
            .expect("get")
            .expect("v")
            .value,
        value(first)
    );
    let cold = store.io_stats().since(&before).reads;
    assert!(
        cold > 1,
        "a cold read cost {cold} storage reads: the index was not really cold"
    );

    // Warm the index and the mapping: one key out of every WARM_EVERY (every leaf holds
    // dozens of keys, so this touches every leaf's path and every data file).
    for i in (0..KEYS).step_by(WARM_EVERY) {
        main.get_blocking(key(i)).expect("warm");
    }
    let mut costs = std::collections::BTreeMap::new();
    for _ in 0..400 {
        let mut i = rng.urange(0, KEYS);
        if i.is_multiple_of(WARM_EVERY) {
            i += 1 + rng.urange(0, WARM_EVERY - 1);
        }
        let i = i.min(KEYS - 1);
        let before = store.io_stats();
        let got = main.get_blocking(key(i)).expect("get").expect("present");
        let reads = store.io_stats().since(&before).reads;
        assert_eq!(got.value, value(i));
        *costs.entry(reads).or_insert(0) += 1;
        assert_eq!(
            reads,
            1,
            "get of key {i} (not read before) cost {reads} storage reads on {}",
            store.backend()
        );
    }
    // Writes rewrite leaves, index pages and (at checkpoints) mapping pages; the writer
    // caches the index and mapping pages it wrote, so reads stay at one storage read.
    for round in 0..3 {
        let mut b = WriteBatch::new();
        for i in (round * 7..KEYS).step_by(97) {
            b.put(key(i), value(i + 1));
        }
        main.write_blocking(b).expect("update");
        for _ in 0..100 {
            let i = rng.urange(0, KEYS);
            let want = if i >= round * 7 && (i - round * 7).is_multiple_of(97) {
                value(i + 1)
            } else {
                main.get_blocking(key(i))
                    .expect("get")
                    .expect("present")
                    .value
            };
            let before = store.io_stats();
            let got = main.get_blocking(key(i)).expect("get").expect("present");
            let reads = store.io_stats().since(&before).reads;
            assert_eq!(got.value, want);
            *costs.entry(reads).or_insert(0) += 1;
            assert_eq!(
                reads, 1,
                "after write round {round}: get of key {i} cost {reads} storage reads"
            );
        }
    }
    // A key that is absent costs its leaf too, and nothing more.
    let before = store.io_stats();
    let mut absent = key(123);
    absent.push(b'!');
    assert!(main.get_blocking(&absent).expect("get").is_none());
    assert_eq!(store.io_stats().since(&before).reads, 1, "absent key");
    eprintln!(
        "[{test}] seed {seed} on {}: {levels} tree levels; cold first read {cold} storage \
         reads; warm reads by cost {costs:?}",
        store.backend()
    );
    store.close().expect("close");
}

#[test]
fn one_read_per_cold_leaf_pread() {
    one_read_per_cold_leaf(Backend::Pread);
}

#[test]
fn one_read_per_cold_leaf_io_uring() {
    one_read_per_cold_leaf(Backend::IoUring);
}

/// The prewarm at open: with a cache far smaller than the data and leaves cached too, every
/// get of a key not read before costs one storage read from the first one on, however many
/// leaves have streamed through the cache since.
fn one_read_per_get_after_a_prewarmed_open(backend: Backend) {
    let test = "one_read_per_get_after_a_prewarmed_open";
    let seed = common::seeds(test, 1)[0];
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    load(test, dir.path(), backend);
    let levels = tree_levels(dir.path());
    assert!(levels >= 3, "the tree has {levels} levels");
    let opts = options(dir.path(), backend)
        .cache_data_pages(true)
        .cache_bytes(1 << 20);
    assert!(opts.prewarm_on_open, "the prewarm is the default");
    let store: Store = common::open(test, opts);
    let main = store
        .partition("io", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    let mut leaves_read = 0u64;
    for n in 0..1_500 {
        if n == 500 {
            // A scan of every key streams every leaf through the cache once, touching each
            // index page only now and then: under one CLOCK for all pages, it would evict
            // index pages the next gets need.
            scan_all(&main);
        }
        let i = rng.urange(0, KEYS);
        let before = store.io_stats();
        let got = main.get_blocking(key(i)).expect("get").expect("present");
        let reads = store.io_stats().since(&before).reads;
        assert_eq!(got.value, value(i));
        // A key of a leaf already read may be served from the cache (0 reads).
        assert!(
            reads <= 1,
            "get {n} (key {i}) after a prewarmed open cost {reads} storage reads on {}",
            store.backend()
        );
        if n == 0 {
            assert_eq!(reads, 1, "the first get after the open reads its leaf");
        }
        leaves_read += reads;
    }
    // More leaves went through the cache than it holds (1 MiB: 256 pages of 4 KiB), so
    // leaves were evicted, and no index or mapping page was read again.
    assert!(
        leaves_read > 2 * 256,
        "only {leaves_read} leaves read: the cache was not small against the data"
    );
    eprintln!(
        "[{test}] seed {seed} on {}: {levels} tree levels, {leaves_read} leaves read in 1,500 gets, \
         none of them more than one read",
        store.backend()
    );
    store.close().expect("close");
}

fn scan_all(branch: &bough::Branch) {
    let mut opts = bough::ScanOptions {
        limit: 4096,
        ..bough::ScanOptions::default()
    };
    let mut seen = 0;
    loop {
        let page = branch.scan_blocking(&opts).expect("scan");
        seen += page.entries.len();
        match page.next {
            Some(next) => opts.begin = std::ops::Bound::Included(next),
            None => break,
        }
    }
    assert_eq!(seen, KEYS, "the scan saw every key");
}

#[test]
fn one_read_per_get_after_a_prewarmed_open_pread() {
    one_read_per_get_after_a_prewarmed_open(Backend::Pread);
}

#[test]
fn one_read_per_get_after_a_prewarmed_open_io_uring() {
    one_read_per_get_after_a_prewarmed_open(Backend::IoUring);
}
