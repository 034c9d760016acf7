//! Cherry-pick and revert cost what the range changed (issue 18 §2): the diff of the range's
//! two states reads only the pages they do not share, and each changed key costs one point
//! read on the target — not a scan of the target, however large it is.
//!
//! Each run loads `main` with `keys` keys, forks `feature`, archives it (the range's start),
//! rewrites `changes` keys on `feature`, reopens the store (so every page is cold; data
//! pages are not cached) and counts what the cherry-pick (or revert) alone reads: page-cache
//! lookups (every mapping, index and leaf page a walk touches) and reads that reach storage.
//!
//! Measured (optimized test build): 10 changes read 68 pages / 42 storage reads in 20,000
//! keys and 97 / 46 in 80,000 keys, where a scan of `main` reads 114 / 113 and 457 / 452;
//! 2,000 changes read 686 / 454 (the target's changed keys are looked up through one cursor
//! in key order, so a leaf holding several is read once: with a point read per key it was
//! 8,234 / 2,341). A rebase with 10 changes a side reads 53 / 54 in 20,000 keys, 61 / 58 in
//! 80,000, and 505 / 589 with 2,000 changes a side.

use bough::io::MemoryStorage;
use bough::{Options, PickOptions, ScanOptions, StateRef, Store, StoreBuilder, WriteBatch};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reads {
    pages: u64,
    storage: u64,
}

/// What a cherry-pick (`revert`: a revert on `feature` itself) of a range of `changes`
/// rewritten keys read in a store of `keys` keys, and what a full scan of `main` reads.
fn pick_reads(keys: u64, changes: u64, revert: bool) -> (Reads, Reads) {
    let mem = MemoryStorage::new();
    let store = Store::open(opts(&mem)).expect("open");
    let p = store.partition("t", 0).expect("partition");
    let main = p.branch("main").expect("main");
    let mut b = WriteBatch::new();
    for j in 0..keys {
        b.put(key(j), format!("val{j:08}"));
    }
    main.write_blocking(b).expect("load");
    let feature = p.create_branch("feature", "main").expect("branch");
    let start = feature.archive().expect("archive");
    let step = keys / changes;
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
    let count = |f: &mut dyn FnMut()| {
        let before = store.io_stats();
        let (hits, misses) = store.cache().hit_stats();
        f();
        let (hits2, misses2) = store.cache().hit_stats();
        Reads {
            pages: (hits2 - hits) + (misses2 - misses),
            storage: store.io_stats().since(&before).reads,
        }
    };
    let range = (StateRef::Archive(start), StateRef::branch("feature"));
    let (target, want) = if revert {
        ("feature", "val")
    } else {
        ("main", "new")
    };
    let reads = count(&mut || {
        let r = if revert {
            p.revert(&range.0, &range.1, target, PickOptions::default())
        } else {
            p.cherry_pick(&range.0, &range.1, target, PickOptions::default())
        }
        .expect("pick");
        assert!(r.committed && r.applied == changes as usize, "{r:?}");
    });
    let got = p.branch(target).unwrap().get_blocking(key(0)).unwrap();
    assert!(got.unwrap().value.starts_with(want.as_bytes()));
    let scan = count(&mut || {
        let page = p
            .branch("main")
            .unwrap()
            .scan_blocking(&ScanOptions {
                limit: usize::MAX,
                ..Default::default()
            })
            .expect("scan");
        assert_eq!(page.entries.len() as u64, keys);
    });
    eprintln!(
        "[pick_cost] {keys} keys, {changes} changes, revert {revert}: {reads:?}; a scan of \
         main: {scan:?}"
    );
    store.close().expect("close");
    (reads, scan)
}

#[test]
fn cherry_pick_cost_follows_the_range_not_the_target() {
    let (small, scan_small) = pick_reads(20_000, 10, false);
    let (large, scan_large) = pick_reads(80_000, 10, false);
    let (many, _) = pick_reads(20_000, 2_000, false);
    // Less than a scan reads from storage, and about the same in a store four times the
    // size (one more tree level at most), where a scan reads four times as much.
    assert!(
        small.storage * 2 < scan_small.storage,
        "{small:?} vs scan {scan_small:?}"
    );
    assert!(
        large.pages <= small.pages * 2 && large.storage <= small.storage * 2,
        "10 changes in 80,000 keys read {large:?}, in 20,000 keys {small:?}"
    );
    assert!(scan_large.pages >= scan_small.pages * 3, "{scan_large:?}");
    // And it grows with the range.
    assert!(
        many.pages >= small.pages + 100 && many.storage >= small.storage + 100,
        "2,000 changes read {many:?}, 10 read {small:?}"
    );
}

#[test]
fn revert_cost_follows_the_range_not_the_target() {
    let (small, scan_small) = pick_reads(20_000, 10, true);
    let (large, scan_large) = pick_reads(80_000, 10, true);
    assert!(
        small.storage * 2 < scan_small.storage,
        "{small:?} vs scan {scan_small:?}"
    );
    assert!(scan_large.pages >= scan_small.pages * 3, "{scan_large:?}");
    assert!(
        large.pages <= small.pages * 2 && large.storage <= small.storage * 2,
        "10 changes in 80,000 keys read {large:?}, in 20,000 keys {small:?}"
    );
}

/// What a rebase of `feature` (`changes` rewritten keys) onto `main` (as many other keys
/// rewritten) read in a store of `keys` keys: the two diffs against their merge base.
fn rebase_reads(keys: u64, changes: u64) -> Reads {
    let mem = MemoryStorage::new();
    let store = Store::open(opts(&mem)).expect("open");
    let p = store.partition("t", 0).expect("partition");
    let main = p.branch("main").expect("main");
    let mut b = WriteBatch::new();
    for j in 0..keys {
        b.put(key(j), format!("val{j:08}"));
    }
    main.write_blocking(b).expect("load");
    let feature = p.create_branch("feature", "main").expect("branch");
    let step = keys / changes;
    let (mut f, mut m) = (WriteBatch::new(), WriteBatch::new());
    for j in 0..changes {
        f.put(key(j * step), format!("new{j:08}"));
        m.put(key(j * step + 1), format!("main{j:08}"));
    }
    feature.write_blocking(f).expect("feature");
    main.write_blocking(m).expect("main");
    drop((main, feature, p));
    store.close().expect("close");

    let store = Store::open(opts(&mem)).expect("reopen");
    let p = store.partition("t", 0).expect("partition");
    p.branch("main").expect("main");
    p.branch("feature").expect("feature");
    let before = store.io_stats();
    let (hits, misses) = store.cache().hit_stats();
    let r = p
        .rebase("feature", "main", bough::MergeOptions::default())
        .expect("rebase");
    let (hits2, misses2) = store.cache().hit_stats();
    let reads = Reads {
        pages: (hits2 - hits) + (misses2 - misses),
        storage: store.io_stats().since(&before).reads,
    };
    assert!(r.committed && r.applied == changes as usize, "{r:?}");
    let f = p.branch("feature").unwrap();
    assert!(
        f.get_blocking(key(1))
            .unwrap()
            .unwrap()
            .value
            .starts_with(b"main")
    );
    assert!(
        f.get_blocking(key(0))
            .unwrap()
            .unwrap()
            .value
            .starts_with(b"new")
    );
    eprintln!("[pick_cost] rebase, {keys} keys, {changes} changes a side: {reads:?}");
    store.close().expect("close");
    reads
}

#[test]
fn rebase_cost_follows_the_changes_not_the_branches() {
    let small = rebase_reads(20_000, 10);
    let large = rebase_reads(80_000, 10);
    let many = rebase_reads(20_000, 2_000);
    assert!(
        large.pages <= small.pages * 2 && large.storage <= small.storage * 2,
        "10 changes a side in 80,000 keys read {large:?}, in 20,000 keys {small:?}"
    );
    assert!(
        many.storage >= small.storage + 50,
        "2,000 changes a side read {many:?}, 10 read {small:?}"
    );
}
