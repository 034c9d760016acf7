//! Branch-head tests on the in-memory backend: commits, reopen, checkpoints, overflow
//! values, relocation (compaction's mechanism) and crash recovery of unsynced data.

use std::collections::BTreeMap;
use std::sync::Arc;

use bough_io::Storage;
use bough_io::memory::{CrashPolicy, MemoryStorage};
use bough_names::BranchName;
use bough_tree::btree::{self, Mutation, Op};
use bough_tree::cache::PageCache;
use bough_tree::files::FileTable;
use bough_tree::head::{Head, HeadConfig, TreeSnapshot};
use bough_tree::page::leaf::ValueLoc;

fn cfg() -> HeadConfig {
    HeadConfig {
        page_size: 4096,
        file_pages: 64,
        preallocate: 64 * 4096,
        checkpoint_chunks: 4,
        manifest_rewrite_bytes: 256 * 1024,
        file_per_commit: false,
        ..HeadConfig::default()
    }
}

fn files(storage: &MemoryStorage) -> Arc<FileTable> {
    let s: Arc<dyn Storage> = Arc::new(storage.clone());
    s.create_dir("t.0").unwrap();
    Arc::new(FileTable::new(
        s,
        "t.0".into(),
        4096,
        Arc::new(PageCache::new(1 << 20)),
        true,
    ))
}

fn put(k: &[u8], v: &[u8], ts: u64) -> Mutation {
    Mutation {
        key: k.to_vec(),
        op: Op::Put {
            value: v.to_vec(),
            timestamp: ts,
            expire_at: 0,
        },
    }
}

fn read_all(s: &TreeSnapshot) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut c = btree::Cursor::seek(s, s.root, None).unwrap();
    let mut out = BTreeMap::new();
    while let Some(e) = c.next_entry(s).unwrap() {
        let v = match e.value {
            ValueLoc::Inline(v) => v,
            ValueLoc::Overflow { first, pages, len } => s.read_overflow(first, pages, len).unwrap(),
            ValueLoc::Tombstone => continue,
        };
        out.insert(e.key, v);
    }
    out
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

#[test]
fn commits_survive_reopen_and_checkpoints() {
    let mem = MemoryStorage::new();
    let main = BranchName::main();
    let mut head = Head::create(files(&mem), cfg(), main.clone(), 0, None, Vec::new()).unwrap();
    let mut model = BTreeMap::new();
    let mut rng = Rng(42);
    for round in 0..120u64 {
        let mut batch = BTreeMap::new();
        for _ in 0..(1 + rng.next() % 40) {
            let k = format!("k{:05}", rng.next() % 2000).into_bytes();
            let op = if rng.next().is_multiple_of(5) {
                Op::Delete {
                    timestamp: round,
                    expire_at: 0,
                }
            } else {
                let len = if rng.next().is_multiple_of(30) {
                    9000
                } else {
                    (rng.next() % 64) as usize
                };
                Op::Put {
                    value: vec![round as u8; len],
                    timestamp: round,
                    expire_at: 0,
                }
            };
            batch.insert(k, op);
        }
        let muts: Vec<_> = batch
            .into_iter()
            .map(|(key, op)| {
                match &op {
                    Op::Put { value, .. } => {
                        model.insert(key.clone(), value.clone());
                    }
                    _ => {
                        model.remove(&key);
                    }
                }
                Mutation { key, op }
            })
            .collect();
        head.commit(&muts, round).unwrap();
        if round % 40 == 39 {
            drop(head);
            head = Head::open(files(&mem), cfg(), main.clone(), 0).unwrap();
        }
        assert_eq!(read_all(&head.snapshot()), model, "round {round}");
    }
    // A crash that drops everything unsynced changes nothing: every commit was synced.
    drop(head);
    mem.crash(CrashPolicy::DropAllUnsynced);
    let head = Head::open(files(&mem), cfg(), main, 0).unwrap();
    assert_eq!(read_all(&head.snapshot()), model);
}

#[test]
fn old_snapshots_stay_readable_and_relocation_frees_files() {
    let mem = MemoryStorage::new();
    let main = BranchName::main();
    let mut head = Head::create(files(&mem), cfg(), main.clone(), 0, None, Vec::new()).unwrap();
    // Values big enough that the tree spans several 64-page files.
    let first: Vec<_> = (0..4000u32)
        .map(|i| put(format!("k{i:05}").as_bytes(), &[b'f'; 120], 1))
        .collect();
    head.commit(&first, 1).unwrap();
    let old = head.snapshot();
    let before = read_all(&old);
    for round in 2..30u64 {
        let muts: Vec<_> = (0..4000u32)
            .filter(|i| (*i as u64 + round).is_multiple_of(7) && i.is_multiple_of(2))
            .map(|i| {
                put(
                    format!("k{i:05}").as_bytes(),
                    format!("v{round}").as_bytes(),
                    round,
                )
            })
            .collect();
        head.commit(&muts, round).unwrap();
    }
    assert_eq!(
        read_all(&old),
        before,
        "an old snapshot changed under a writer"
    );
    let now = read_all(&head.snapshot());
    let live = head.live_pages_per_file().unwrap();
    let active = head.active_file();
    let victims: Vec<u64> = live
        .keys()
        .copied()
        .filter(|f| Some(*f) != active)
        .collect();
    assert!(!victims.is_empty());
    head.relocate_files(&victims, 100).unwrap();
    let after = head.live_pages_per_file().unwrap();
    for v in &victims {
        assert!(
            !after.contains_key(v),
            "file {v} still referenced after relocation"
        );
    }
    assert_eq!(read_all(&head.snapshot()), now);
    drop(head);
    let head = Head::open(files(&mem), cfg(), main, 0).unwrap();
    assert_eq!(read_all(&head.snapshot()), now);
}

#[test]
fn manifest_rewrite_keeps_data() {
    let mem = MemoryStorage::new();
    let main = BranchName::main();
    let mut c = cfg();
    c.manifest_rewrite_bytes = 8 * 4096;
    let mut head = Head::create(files(&mem), c.clone(), main.clone(), 0, None, Vec::new()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..100u64 {
        let k = format!("key{:04}", i * 7 % 100).into_bytes();
        head.commit(&[put(&k, &i.to_le_bytes(), i)], i).unwrap();
        model.insert(k, i.to_le_bytes().to_vec());
    }
    drop(head);
    let head = Head::open(files(&mem), c, main, 0).unwrap();
    assert_eq!(read_all(&head.snapshot()), model);
}

#[test]
fn expiry_index_tracks_entries() {
    let mem = MemoryStorage::new();
    let mut head =
        Head::create(files(&mem), cfg(), BranchName::main(), 0, None, Vec::new()).unwrap();
    let with_ttl = |k: &str, exp: u64, ts: u64| Mutation {
        key: k.as_bytes().to_vec(),
        op: Op::Put {
            value: b"v".to_vec(),
            timestamp: ts,
            expire_at: exp,
        },
    };
    head.commit(
        &[
            with_ttl("a", 100, 1),
            with_ttl("b", 50, 1),
            with_ttl("c", 500, 1),
        ],
        1,
    )
    .unwrap();
    assert_eq!(head.expired_keys(99, 10).unwrap(), vec![b"b".to_vec()]);
    // Rewriting "b" without expiry removes it from the index.
    head.commit(&[with_ttl("b", 0, 2)], 2).unwrap();
    assert_eq!(head.expired_keys(200, 10).unwrap(), vec![b"a".to_vec()]);
}

/// Deletes leave tombstones (small, but pages all the same) that the TTL index knows; once
/// the retention has passed, purging them (what the expiry sweep does) frees the leaves and
/// the TTL index down to nothing.
#[test]
fn purged_tombstones_give_their_pages_back() {
    let mem = MemoryStorage::new();
    let mut head =
        Head::create(files(&mem), cfg(), BranchName::main(), 0, None, Vec::new()).unwrap();
    let pages = |h: &Head| -> u64 { h.live_pages_per_file().unwrap().values().sum() };
    let keys: Vec<Vec<u8>> = (0..3000)
        .map(|i| format!("key{i:06}").into_bytes())
        .collect();
    let muts: Vec<Mutation> = keys.iter().map(|k| put(k, &[7u8; 100], 1)).collect();
    head.commit(&muts, 10).unwrap();
    let full = pages(&head);
    let dels: Vec<Mutation> = keys
        .iter()
        .map(|k| Mutation {
            key: k.clone(),
            op: Op::Delete {
                timestamp: 2,
                expire_at: 1_000,
            },
        })
        .collect();
    head.commit(&dels, 20).unwrap();
    let with_tombstones = pages(&head);
    assert!(read_all(&head.snapshot()).is_empty());
    assert!(head.expired_keys(999, usize::MAX).unwrap().is_empty());
    let expired = head.expired_keys(1_000, usize::MAX).unwrap();
    assert_eq!(expired, keys);
    let purge: Vec<Mutation> = expired
        .into_iter()
        .map(|key| Mutation {
            key,
            op: Op::ForceDelete,
        })
        .collect();
    let applied = head.commit(&purge, 1_000).unwrap();
    assert_eq!(
        applied.removed, 0,
        "purging tombstones deletes nothing visible"
    );
    let s = head.snapshot();
    assert_eq!(
        (s.root, s.ttl_root),
        (bough_manifest::NO_PAGE, bough_manifest::NO_PAGE)
    );
    let empty = pages(&head);
    eprintln!("pages: {full} with values, {with_tombstones} with tombstones, {empty} purged");
    assert!(empty < with_tombstones && with_tombstones < full);
    assert!(head.expired_keys(u64::MAX, usize::MAX).unwrap().is_empty());
}

/// A rewrite drops branch file ranges nothing references any more — looked for at the
/// first rewrite of a head and when the ranges grow, not at every rewrite (the walk costs
/// O(pages), and in cloud mode the manifest is rewritten every few commits).
#[test]
fn rewrites_drop_unreferenced_ranges_without_walking_every_time() {
    let mem = MemoryStorage::new();
    let main = BranchName::main();
    let mut c = cfg();
    c.manifest_rewrite_bytes = 4 * 4096;
    let mut head0 =
        Head::create(files(&mem), c.clone(), main.clone(), 0, None, Vec::new()).unwrap();
    let keys: Vec<_> = (0..2000u32)
        .map(|i| put(format!("k{i:05}").as_bytes(), &[b'a'; 100], 1))
        .collect();
    head0.commit(&keys, 1).unwrap();
    let fork = head0.fork_point(2).unwrap();
    drop(head0);
    let mut head = Head::create(
        files(&mem),
        c.clone(),
        main.clone(),
        1,
        Some(&fork),
        Vec::new(),
    )
    .unwrap();
    // The new term moves every page out of term 0's files.
    head.commit(&[put(b"k00000", b"b", 3)], 3).unwrap();
    let old: Vec<u64> = head
        .live_pages_per_file()
        .unwrap()
        .keys()
        .copied()
        .filter(|f| Some(*f) != head.active_file())
        .collect();
    head.relocate_files(&old, 4).unwrap();
    assert!(
        head.snapshot().ranges.len() > 1,
        "term 0's range is still listed"
    );
    let model = read_all(&head.snapshot());
    for i in 0..8u64 {
        head.commit(&[put(b"k00001", &i.to_le_bytes(), 10 + i)], 10 + i)
            .unwrap();
    }
    assert_eq!(
        head.snapshot().ranges.len(),
        1,
        "the first rewrite dropped the range no page references"
    );
    drop(head);
    let head = Head::open(files(&mem), c, main, 1).unwrap();
    assert_eq!(head.snapshot().ranges.len(), 1);
    let mut expect = model;
    expect.insert(b"k00001".to_vec(), 7u64.to_le_bytes().to_vec());
    assert_eq!(read_all(&head.snapshot()), expect);
}

/// A partition keeps a bounded number of data files open: idle handles close (past the
/// cap) and reopen on their next use, keeping their cached pages; the file being written
/// stays open and writable.
#[test]
fn idle_data_files_are_closed_past_the_cap() {
    let mem = MemoryStorage::new();
    let main = BranchName::main();
    let s: Arc<dyn Storage> = Arc::new(mem.clone());
    s.create_dir("t.0").unwrap();
    let cache = Arc::new(PageCache::new(64 << 20));
    let files =
        Arc::new(FileTable::new(s, "t.0".into(), 4096, cache.clone(), true).with_max_open_files(4));
    let mut c = cfg();
    c.file_pages = 4;
    let mut head = Head::create(files.clone(), c, main, 0, None, Vec::new()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..300u32 {
        let k = format!("k{i:05}").into_bytes();
        let v = vec![b'v'; 200];
        head.commit(&[put(&k, &v, u64::from(i))], u64::from(i))
            .unwrap();
        model.insert(k, v);
        assert!(files.open_files() <= 5, "{} files open", files.open_files());
    }
    let live = head.live_pages_per_file().unwrap();
    assert!(live.len() > 10, "the tree spans many files: {}", live.len());
    assert_eq!(
        read_all(&head.snapshot()),
        model,
        "reads reopen closed files"
    );
    let misses = cache.hit_stats().1;
    assert_eq!(read_all(&head.snapshot()), model);
    assert_eq!(
        cache.hit_stats().1,
        misses,
        "a reopened file finds its cached pages"
    );
    assert!(files.open_files() <= 5);
}

/// Commits 2,000 keys, then the same keys again with new values; returns the page-cache
/// misses of the second commit.
fn misses_of_a_second_commit(cache_data_pages: bool) -> u64 {
    let mem = MemoryStorage::new();
    let s: Arc<dyn Storage> = Arc::new(mem.clone());
    s.create_dir("t.0").unwrap();
    let cache = Arc::new(PageCache::new(16 << 20));
    let files = Arc::new(FileTable::new(
        s,
        "t.0".into(),
        4096,
        cache.clone(),
        cache_data_pages,
    ));
    let mut head = Head::create(files, cfg(), BranchName::main(), 0, None, Vec::new()).unwrap();
    let batch = |v: &[u8], ts| -> Vec<Mutation> {
        (0..2000)
            .map(|i| put(format!("key{i:05}").as_bytes(), v, ts))
            .collect()
    };
    head.commit(&batch(b"first", 1), 0).unwrap();
    let (_, before) = cache.hit_stats();
    head.commit(&batch(b"second", 2), 0).unwrap();
    let snap = head.snapshot();
    let got = read_all(&snap);
    assert_eq!(got.len(), 2000);
    assert!(got.values().all(|v| v == b"second"));
    cache.hit_stats().1 - before
}

/// A commit caches the leaves it has just written (as it does index and mapping pages),
/// so the next commit to the same keys reads none of them back from the files. Before,
/// only index and mapping pages were cached and every leaf was read again.
#[test]
fn regression_a_commit_caches_the_leaves_it_wrote() {
    assert_eq!(misses_of_a_second_commit(true), 0);
    // Unless data pages are not to be cached at all.
    assert!(misses_of_a_second_commit(false) > 0);
}
