//! The buffered head: commits through the write-ahead log and write buffer, checkpoints,
//! recovery at open, one sync per commit, poisoning and power loss at the log tail.

use std::collections::BTreeMap;
use std::sync::Arc;

use bough_io::memory::{CrashPolicy, MemoryStorage};
use bough_io::{FaultInjector, FaultOp, RandomCrash, Storage};
use bough_names::BranchName;
use bough_tree::btree::{Mutation, Op};
use bough_tree::cache::PageCache;
use bough_tree::files::FileTable;
use bough_tree::head::{Head, HeadConfig, TreeSnapshot};
use bough_tree::page::leaf::ValueLoc;
use bough_tree::wal::LogConfig;

fn cfg(buffer: usize) -> HeadConfig {
    HeadConfig {
        file_pages: 64,
        preallocate: 64 * 4096,
        checkpoint_chunks: 4,
        manifest_rewrite_bytes: 256 * 1024,
        write_buffer_bytes: buffer,
        log: LogConfig {
            file_bytes: 128 * 1024,
            layout_bytes: 16 * 1024,
        },
        ..HeadConfig::default()
    }
}

fn files(storage: &MemoryStorage) -> Arc<FileTable> {
    let s: Arc<dyn Storage> = Arc::new(storage.clone());
    let _ = s.create_dir("t.0");
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

fn del(k: &[u8], ts: u64) -> Mutation {
    Mutation {
        key: k.to_vec(),
        op: Op::Delete {
            timestamp: ts,
            expire_at: 0,
        },
    }
}

/// Every live entry of a snapshot, buffer included, read by a forward scan; checked
/// against point gets of every key.
fn read_all(s: &TreeSnapshot) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let r = s.buffered();
    let mut c = r.seek(None).unwrap();
    let mut out = BTreeMap::new();
    while let Some(e) = c.next_entry().unwrap() {
        let v = match e.value {
            ValueLoc::Inline(v) => v,
            ValueLoc::Overflow { first, pages, len } => s.read_overflow(first, pages, len).unwrap(),
            ValueLoc::Tombstone => continue,
        };
        out.insert(e.key, v);
    }
    for (k, v) in &out {
        let got = r.get(k).unwrap().expect("a scanned key gets");
        match got.value {
            ValueLoc::Inline(g) => assert_eq!(&g, v),
            ValueLoc::Overflow { first, pages, len } => {
                assert_eq!(&s.read_overflow(first, pages, len).unwrap(), v)
            }
            ValueLoc::Tombstone => panic!("a scanned key reads as a tombstone"),
        }
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

/// A random sorted batch, applied to `model` too.
fn random_batch(rng: &mut Rng, ts: u64, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<Mutation> {
    let mut batch = BTreeMap::new();
    for _ in 0..(1 + rng.next() % 12) {
        let k = format!("k{:04}", rng.next() % 300).into_bytes();
        let m = if rng.next().is_multiple_of(5) {
            del(&k, ts)
        } else {
            let len = if rng.next().is_multiple_of(17) {
                6000
            } else {
                1 + (rng.next() % 40) as usize
            };
            put(&k, &vec![(ts % 251) as u8; len], ts)
        };
        batch.insert(k, m);
    }
    for (k, m) in &batch {
        match &m.op {
            Op::Put { value, .. } => {
                model.insert(k.clone(), value.clone());
            }
            _ => {
                model.remove(k);
            }
        }
    }
    batch.into_values().collect()
}

fn seed() -> u64 {
    let s = std::env::var("BOUGH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    eprintln!("seed {s} (replay with BOUGH_SEED={s})");
    s
}

/// The model test with a buffer so small that every commit crosses a checkpoint, and with
/// one large enough that reopening replays many commits: both read like the model, before
/// and after every reopen.
#[test]
fn the_buffered_head_matches_the_model_across_checkpoints_and_reopens() {
    let seed = seed();
    for (buffer, background) in [1usize, 700, 1 << 30]
        .into_iter()
        .flat_map(|b| [(b, false), (b, true)])
    {
        let cfg = |buffer| HeadConfig {
            background_checkpoints: background,
            ..cfg(buffer)
        };
        let mem = MemoryStorage::new();
        let main = BranchName::main();
        let mut head =
            Head::create(files(&mem), cfg(buffer), main.clone(), 0, None, Vec::new()).unwrap();
        let mut model = BTreeMap::new();
        let mut rng = Rng(seed ^ buffer as u64);
        for ts in 1..=150u64 {
            let batch = random_batch(&mut rng, ts, &mut model);
            let before = head.version();
            head.commit(&batch, ts).unwrap();
            assert_eq!(
                head.version(),
                before + 1,
                "buffer {buffer} ts {ts} background {background}"
            );
            if ts % 37 == 0 {
                let version = head.version();
                drop(head);
                head = Head::open(files(&mem), cfg(buffer), main.clone(), 0).unwrap();
                assert_eq!(head.version(), version, "buffer {buffer} ts {ts}: version");
            }
            assert_eq!(
                read_all(&head.snapshot()),
                model,
                "buffer {buffer} ts {ts} background {background}"
            );
        }
        head.checkpoint_buffer(1000).unwrap();
        assert_eq!(head.buffered_bytes(), 0);
        assert!(!head.snapshot().has_buffered());
        assert_eq!(
            read_all(&head.snapshot()),
            model,
            "buffer {buffer} after checkpoint"
        );
        let version = head.version();
        drop(head);
        let head = Head::open(files(&mem), cfg(buffer), main.clone(), 0).unwrap();
        assert_eq!(head.version(), version);
        assert_eq!(read_all(&head.snapshot()), model);
    }
}

/// Acknowledged commits that no checkpoint reached are all back after a reopen (and a
/// reader-only open sees them too).
#[test]
fn reopening_after_buffered_commits_returns_every_acknowledged_write() {
    let mem = MemoryStorage::new();
    let main = BranchName::main();
    let mut head =
        Head::create(files(&mem), cfg(1 << 30), main.clone(), 0, None, Vec::new()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..200u64 {
        let k = format!("key{:03}", i % 120).into_bytes();
        let v = format!("v{i}").into_bytes();
        head.commit(&[put(&k, &v, i + 1)], i + 1).unwrap();
        model.insert(k, v);
    }
    // The log rotated (small files) but nothing else was checkpointed.
    assert!(head.buffered_bytes() > 0);
    let version = head.version();
    let (image, _) = mem.crash_image(CrashPolicy::DropAllUnsynced);
    drop(head);
    let head = Head::open(files(&image), cfg(1 << 30), main.clone(), 0).unwrap();
    assert_eq!(head.version(), version);
    assert_eq!(read_all(&head.snapshot()), model);
    let ro = Head::open_read_only(files(&image), cfg(1 << 30), main.clone(), 0).unwrap();
    assert_eq!(read_all(&ro.snapshot()), model);
    // Unbuffered again: the log is still read, and the next commit checkpoints it.
    let mut plain = Head::open(files(&image), cfg(0), main.clone(), 0).unwrap();
    assert_eq!(read_all(&plain.snapshot()), model);
    plain.commit(&[put(b"zz", b"1", 999)], 999).unwrap();
    model.insert(b"zz".to_vec(), b"1".to_vec());
    assert!(!plain.snapshot().has_buffered());
    drop(plain);
    let head = Head::open(files(&image), cfg(0), main, 0).unwrap();
    assert_eq!(read_all(&head.snapshot()), model);
    assert_eq!(head.version(), version + 1);
}

/// A durable buffered commit is exactly one `fdatasync` (and no directory sync) once its
/// log file exists; a batch of the same size through the tree is two.
#[test]
fn a_buffered_commit_is_exactly_one_sync() {
    let mem = MemoryStorage::new();
    let main = BranchName::main();
    let mut head =
        Head::create(files(&mem), cfg(1 << 30), main.clone(), 0, None, Vec::new()).unwrap();
    head.commit(&[put(b"first", b"x", 1)], 1).unwrap();
    let mut rotations = 0;
    for i in 2..300u64 {
        let before = mem.stats().snapshot();
        head.commit(&[put(format!("k{i}").as_bytes(), b"value", i)], i)
            .unwrap();
        let d = mem.stats().snapshot().since(&before);
        if d.dir_syncs > 0 {
            // A rotation: a new file (synced with its directory) and the record naming it.
            rotations += 1;
            continue;
        }
        assert_eq!(d.syncs, 1, "commit {i}: {d:?}");
    }
    assert!(rotations > 0, "the test must cross a log rotation");
    let mut plain = Head::open(files(&mem), cfg(0), main, 0).unwrap();
    plain.checkpoint_buffer(1).unwrap();
    plain.commit(&[put(b"a", b"1", 1000)], 1000).unwrap();
    let before = mem.stats().snapshot();
    plain.commit(&[put(b"a", b"2", 1001)], 1001).unwrap();
    assert_eq!(mem.stats().snapshot().since(&before).syncs, 2);
}

/// A failed log sync poisons the head: the commit is refused, and so is every later one,
/// with no sync retried. Power loss then (every tear mode): every acknowledged commit is
/// back, the refused one is whole or absent, nothing else.
#[test]
fn a_failed_log_sync_poisons_and_a_torn_tail_loses_only_the_unacknowledged_commit() {
    for seed in 0..16u64 {
        let faults = FaultInjector::new();
        let mem = MemoryStorage::with_faults(faults.clone());
        let main = BranchName::main();
        let mut head =
            Head::create(files(&mem), cfg(1 << 30), main.clone(), 0, None, Vec::new()).unwrap();
        let mut model = BTreeMap::new();
        let acked = 3 + seed % 5;
        for i in 1..=acked {
            let k = format!("k{i}").into_bytes();
            head.commit(&[put(&k, b"v", i)], i).unwrap();
            model.insert(k, b"v".to_vec());
        }
        faults.fail_next(FaultOp::Sync, 5, 1);
        assert!(head.commit(&[put(b"lost", b"?", 99)], 99).is_err());
        assert!(head.poisoned().is_some());
        let syncs = mem.stats().syncs();
        assert!(head.commit(&[put(b"after", b"no", 100)], 100).is_err());
        assert_eq!(mem.stats().syncs(), syncs, "nothing retried");
        let weights = match seed % 4 {
            0 => RandomCrash::new(seed).weights(0, 0, 1, 0),
            1 => RandomCrash::new(seed).weights(0, 0, 0, 1),
            2 => RandomCrash::new(seed).weights(0, 1, 0, 0),
            _ => RandomCrash::new(seed),
        };
        let (image, _) = mem.crash_image(CrashPolicy::Random(weights));
        drop(head);
        let mut head = Head::open(files(&image), cfg(1 << 30), main.clone(), 0).unwrap();
        let got = read_all(&head.snapshot());
        let mut with_lost = model.clone();
        with_lost.insert(b"lost".to_vec(), b"?".to_vec());
        assert!(got == model || got == with_lost, "seed {seed}: {got:?}");
        // The writer resumes after the tail (zeroing a torn record) and goes on.
        head.commit(&[put(b"next", b"1", 200)], 200).unwrap();
        let version = head.version();
        drop(head);
        let head = Head::open(files(&image), cfg(1 << 30), main.clone(), 0).unwrap();
        assert_eq!(head.version(), version, "seed {seed}");
        let got = read_all(&head.snapshot());
        assert_eq!(got.get(&b"next"[..]), Some(&b"1".to_vec()), "seed {seed}");
        for (k, v) in &model {
            assert_eq!(got.get(k), Some(v), "seed {seed}");
        }
    }
}

/// A fork point holds every buffered write (the parent checkpoints first) and names no
/// log, so the child needs nothing of the parent's log.
#[test]
fn a_fork_point_absorbs_the_buffer() {
    let mem = MemoryStorage::new();
    let main = BranchName::main();
    let mut head =
        Head::create(files(&mem), cfg(1 << 30), main.clone(), 0, None, Vec::new()).unwrap();
    for i in 0..20u64 {
        head.commit(&[put(format!("k{i}").as_bytes(), b"v", i + 1)], i + 1)
            .unwrap();
    }
    let before = read_all(&head.snapshot());
    let fork = head.fork_point(100).unwrap();
    assert!(bough_manifest::ext::get(&fork.snapshot.extensions, bough_manifest::LOG).is_none());
    let dev = BranchName::new("dev").unwrap();
    let child = Head::create(files(&mem), cfg(1 << 30), dev, 0, Some(&fork), Vec::new()).unwrap();
    assert_eq!(read_all(&child.snapshot()), before);
}

/// Lookups keep a tree version's top index nodes (`TopNodes`) with its snapshots: a
/// buffered commit leaves the tree as it was and shares them; a checkpoint that splits
/// pages under the same root id starts afresh, and every key, old and new, reads right
/// through the new version (a kept node of the old one would route the new keys to the
/// leaves they are not in).
#[test]
fn top_nodes_are_shared_while_the_tree_is_unchanged_and_renewed_when_it_changes() {
    use bough_tree::btree::TreeRead;
    let kept = |s: &TreeSnapshot| s.top_nodes().map_or(0, |t| t.kept_count());
    let mem = MemoryStorage::new();
    let main = BranchName::main();
    let mut head =
        Head::create(files(&mem), cfg(1 << 30), main.clone(), 0, None, Vec::new()).unwrap();
    let mut model = BTreeMap::new();
    let key = |i: u64, tail: &str| format!("key{i:08}{tail}").into_bytes();
    // Values of 100 bytes: about 40 entries a leaf, 1,500 leaves, more than one index
    // page holds, so the tree has three levels.
    let first = [b'1'; 100];
    for chunk in 0..6u64 {
        let batch: Vec<Mutation> = (chunk * 10_000..(chunk + 1) * 10_000)
            .map(|i| {
                model.insert(key(i, ""), first.to_vec());
                put(&key(i, ""), &first, 1)
            })
            .collect();
        head.commit(&batch, 1 + chunk).unwrap();
    }
    head.checkpoint_buffer(100).unwrap();
    let s = head.snapshot();
    assert_eq!(kept(&s), 0, "a new tree version keeps nothing yet");
    let r = s.buffered();
    for (k, v) in &model {
        assert_eq!(
            r.get(k).unwrap().map(|e| e.value),
            Some(ValueLoc::Inline(v.clone()))
        );
    }
    let filled = kept(&s);
    assert!(
        filled >= 2,
        "the root and a child are kept (tree of 60,000 keys): {filled}"
    );
    let chunks = s.top_nodes().map_or(0, |t| t.kept_chunks().kept_count());
    assert!(
        chunks >= 1,
        "the mapping chunks the leaves went through are kept"
    );

    head.commit(&[put(b"a-buffered-key", b"1", 10)], 200)
        .unwrap();
    model.insert(b"a-buffered-key".to_vec(), b"1".to_vec());
    assert_eq!(
        kept(&head.snapshot()),
        filled,
        "a buffered commit shares them"
    );

    // Dense new keys between old ones: leaves split and index pages change, under the
    // same root id.
    let root = s.root;
    let batch: Vec<Mutation> = (20_000..30_000u64)
        .map(|i| {
            model.insert(key(i, "-new"), b"second".to_vec());
            put(&key(i, "-new"), b"second", 11)
        })
        .collect();
    head.commit(&batch, 300).unwrap();
    head.checkpoint_buffer(400).unwrap();
    let s2 = head.snapshot();
    assert_eq!(s2.root, root, "the root keeps its id");
    assert_eq!(kept(&s2), 0, "a checkpoint starts a new version");
    let read = read_all(&s2);
    let wrong = model
        .iter()
        .filter(|(k, v)| read.get(*k) != Some(*v))
        .count();
    assert!(
        wrong == 0 && read.len() == model.len(),
        "{wrong} keys read wrong"
    );
    assert!(kept(&s2) >= 2);
    // The old snapshot still reads its own version.
    assert_eq!(r.get(&key(25_000, "-new")).unwrap(), None);
}

/// A commit that finds its log file full checkpoints the buffer with the record naming
/// the next file, and the store's budget counts that wait as it counts the checkpoint of
/// a commit that fills the buffer; commits that only append count nothing.
#[test]
fn a_full_log_file_is_left_for_the_next_without_a_checkpoint_until_eight_are_named() {
    let mem = MemoryStorage::new();
    let budget = Arc::new(bough_tree::buffer::BufferBudget::new(usize::MAX));
    let config = HeadConfig {
        buffer_budget: Some(Arc::clone(&budget)),
        ..cfg(1 << 30)
    };
    let mut head =
        Head::create(files(&mem), config, BranchName::main(), 0, None, Vec::new()).unwrap();
    let mut model = BTreeMap::new();
    // 128 KiB log files of 4 KiB records: 30 commits fill one, so 8 files hold 240.
    for i in 0..240u64 {
        let k = format!("k{i:03}").into_bytes();
        head.commit(&[put(&k, b"v", i + 1)], i + 1).unwrap();
        model.insert(k, b"v".to_vec());
    }
    assert_eq!(
        budget.commit_checkpoints().0,
        0,
        "seven full files were left with their commits buffered"
    );
    let logs = |m: &MemoryStorage| {
        m.list("t.0")
            .unwrap()
            .iter()
            .filter(|n| n.starts_with("wal_"))
            .count()
    };
    assert_eq!(logs(&mem), 8);
    for i in 240..300u64 {
        let k = format!("k{i:03}").into_bytes();
        head.commit(&[put(&k, b"v", i + 1)], i + 1).unwrap();
        model.insert(k, b"v".to_vec());
    }
    let (n, took) = budget.commit_checkpoints();
    assert_eq!(n, 1, "the ninth file is started by a checkpoint");
    assert!(took > std::time::Duration::ZERO);
    // Every acknowledged commit comes back from the files the manifest names.
    let version = head.version();
    let (image, _) = mem.crash_image(CrashPolicy::DropAllUnsynced);
    drop(head);
    let head = Head::open(files(&image), cfg(1 << 30), BranchName::main(), 0).unwrap();
    assert_eq!(head.version(), version);
    assert_eq!(read_all(&head.snapshot()), model);
}

/// Power loss at each sync of a commit that leaves a full log file with its commits
/// buffered (the full file's sync, the new file's and its directory's, the manifest
/// record's, the commit's record), every way the unsynced writes can land: every
/// acknowledged commit is back, the failed one whole or absent, and the head goes on.
#[test]
fn a_power_loss_at_each_sync_of_a_rotation_keeps_every_acknowledged_commit() {
    let seed = seed();
    for rotating in [31u64, 61] {
        for fail_at in 0..6u64 {
            let faults = FaultInjector::new();
            let mem = MemoryStorage::with_faults(faults.clone());
            let main = BranchName::main();
            let mut head =
                Head::create(files(&mem), cfg(1 << 30), main.clone(), 0, None, Vec::new()).unwrap();
            let mut model = BTreeMap::new();
            let key = |i: u64| format!("k{:03}", i % 40).into_bytes();
            for i in 1..rotating {
                head.commit(&[put(&key(i), &i.to_le_bytes(), i)], i)
                    .unwrap();
                model.insert(key(i), i.to_le_bytes().to_vec());
            }
            faults.fail_after(FaultOp::Sync, fail_at, 5, 1);
            let mut failed = None;
            for i in rotating..rotating + 4 {
                if head
                    .commit(&[put(&key(i), &i.to_le_bytes(), i)], i)
                    .is_err()
                {
                    failed = Some(i);
                    break;
                }
                model.insert(key(i), i.to_le_bytes().to_vec());
            }
            let failed = failed.expect("a sync within four commits failed");
            let mut with_failed = model.clone();
            with_failed.insert(key(failed), failed.to_le_bytes().to_vec());
            for (p, policy) in [
                CrashPolicy::DropAllUnsynced,
                CrashPolicy::KeepAllUnsynced,
                CrashPolicy::Random(RandomCrash::new(seed ^ fail_at)),
                CrashPolicy::Random(RandomCrash::new(seed ^ rotating).weights(0, 0, 1, 0)),
            ]
            .into_iter()
            .enumerate()
            {
                let what = format!("rotating {rotating}, sync {fail_at} failed, crash {p}");
                let (image, _) = mem.crash_image(policy);
                let mut reopened = Head::open(files(&image), cfg(1 << 30), main.clone(), 0)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let got = read_all(&reopened.snapshot());
                assert!(got == model || got == with_failed, "{what}: {got:?}");
                let found = got;
                reopened.commit(&[put(b"next", b"1", 500)], 500).unwrap();
                let version = reopened.version();
                drop(reopened);
                let again = Head::open(files(&image), cfg(1 << 30), main.clone(), 0).unwrap();
                assert_eq!(again.version(), version, "{what}");
                let got = read_all(&again.snapshot());
                assert_eq!(got.get(&b"next"[..]), Some(&b"1".to_vec()), "{what}");
                for (k, v) in &found {
                    assert_eq!(got.get(k), Some(v), "{what}");
                }
            }
        }
    }
}

fn background_cfg(buffer: usize) -> HeadConfig {
    HeadConfig {
        background_checkpoints: true,
        ..cfg(buffer)
    }
}

/// A new `main` head with checkpoints in the background and an 8 KiB buffer.
fn background_head(mem: &MemoryStorage) -> Head {
    Head::create(
        files(mem),
        background_cfg(8 << 10),
        BranchName::main(),
        0,
        None,
        Vec::new(),
    )
    .unwrap()
}

/// The commit that fills the buffer returns with its writes still buffered and a
/// checkpoint running on its own thread; reads stay exact meanwhile, and the next
/// operation that needs the tree installs it.
#[test]
fn a_full_buffer_is_checkpointed_in_the_background_while_commits_go_on() {
    let mem = MemoryStorage::new();
    let main = BranchName::main();
    let mut head = background_head(&mem);
    let mut model = BTreeMap::new();
    let mut started = 0;
    for i in 0..400u64 {
        let k = format!("k{:03}", (i * 37) % 150).into_bytes();
        let v = format!("{i:064}").into_bytes();
        let was = head.checkpoint_running();
        head.commit(&[put(&k, &v, i + 1)], i + 1).unwrap();
        model.insert(k, v);
        if !was && head.checkpoint_running() {
            started += 1;
            assert!(
                head.buffered_bytes() > 8 << 10,
                "commit {i} checkpointed in line"
            );
        }
        assert_eq!(read_all(&head.snapshot()), model, "commit {i}");
    }
    assert!(started >= 5, "{started} background checkpoints");
    let version = head.version();
    head.checkpoint_buffer(1000).unwrap();
    assert!(!head.checkpoint_running());
    assert_eq!(head.buffered_bytes(), 0);
    assert_eq!(head.version(), version);
    drop(head);
    let head = Head::open(files(&mem), background_cfg(8 << 10), main, 0).unwrap();
    assert_eq!(head.version(), version);
    assert_eq!(read_all(&head.snapshot()), model);
}

/// Installing a background checkpoint caches none of its pages while the head is held:
/// they wait in deferred work the store runs once it has let go of the head (a commit
/// waiting for the head would otherwise pay for tens of thousands of cache inserts), and
/// reads are exact before it runs as after.
#[test]
fn a_background_checkpoint_is_cached_only_once_the_head_lets_its_deferred_work_go() {
    let mem = MemoryStorage::new();
    let mut head = background_head(&mem);
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let ready_tx = std::sync::Mutex::new(ready_tx);
    head.set_background_done(bough_tree::head::BackgroundDone::new(move || {
        let _ = ready_tx.lock().map(|t| t.send(()));
    }));
    let mut model = BTreeMap::new();
    let mut i = 0u64;
    while !head.checkpoint_running() {
        assert!(i < 10_000, "no background checkpoint started");
        let k = format!("k{:04}", (i * 37) % 600).into_bytes();
        let v = format!("{i:064}").into_bytes();
        head.commit(&[put(&k, &v, i + 1)], i + 1).unwrap();
        model.insert(k, v);
        i += 1;
    }
    ready
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the background checkpoint never finished");
    let cache = head.files().cache().clone();
    let before = cache.bytes();
    assert!(
        head.take_deferred_work().is_none(),
        "deferred work before any install"
    );
    let replaced = Arc::downgrade(&head.snapshot());
    head.install_finished_background();
    assert!(
        !head.checkpoint_running(),
        "the finished checkpoint was not installed"
    );
    assert_eq!(
        cache.bytes(),
        before,
        "the install cached pages while holding the head"
    );
    assert_eq!(
        read_all(&head.snapshot()),
        model,
        "reads before the deferred work"
    );
    assert!(
        replaced.upgrade().is_some(),
        "the replaced snapshot (and the buffer runs it holds) was freed under the head"
    );
    let work = head.take_deferred_work().expect("the install left no work");
    assert!(work.pages() > 0);
    assert!(
        head.take_deferred_work().is_none(),
        "deferred work is taken once"
    );
    work.run();
    assert!(
        cache.bytes() > before,
        "running the deferred work cached nothing"
    );
    assert!(
        replaced.upgrade().is_none(),
        "the replaced snapshot outlived the deferred work"
    );
    assert_eq!(
        read_all(&head.snapshot()),
        model,
        "reads after the deferred work"
    );
}

/// Power loss at any moment of background checkpoints (running, done, installed), with
/// unsynced writes dropped or landing in any way: every acknowledged commit is back, and
/// the reopened head goes on.
#[test]
fn a_power_loss_around_background_checkpoints_keeps_every_acknowledged_commit() {
    let seed = seed();
    let mem = MemoryStorage::new();
    let main = BranchName::main();
    let mut head = background_head(&mem);
    let mut model = BTreeMap::new();
    for i in 0..300u64 {
        let k = format!("k{:03}", (i * 53) % 170).into_bytes();
        let v = format!("{i:080}").into_bytes();
        head.commit(&[put(&k, &v, i + 1)], i + 1).unwrap();
        model.insert(k, v);
        if i % 7 != 3 {
            continue;
        }
        for policy in [
            CrashPolicy::DropAllUnsynced,
            CrashPolicy::Random(RandomCrash::new(seed ^ i)),
        ] {
            let (image, _) = mem.crash_image(policy);
            let mut reopened = Head::open(files(&image), background_cfg(8 << 10), main.clone(), 0)
                .unwrap_or_else(|e| panic!("commit {i}: {e}"));
            assert_eq!(read_all(&reopened.snapshot()), model, "commit {i}");
            reopened.commit(&[put(b"next", b"1", 999)], 999).unwrap();
        }
    }
}

/// A sync that fails while a checkpoint runs in the background — the checkpoint's own or
/// a commit's — poisons the head: the commit that meets it fails, nothing is retried, and
/// after power loss every acknowledged commit is back.
#[test]
fn a_failed_sync_beside_a_background_checkpoint_poisons_and_loses_nothing_acknowledged() {
    let seed = seed();
    for round in 0..8u64 {
        let faults = FaultInjector::new();
        let mem = MemoryStorage::with_faults(faults.clone());
        let main = BranchName::main();
        let mut head = background_head(&mem);
        let mut model = BTreeMap::new();
        let mut failed = None;
        let mut armed = false;
        for i in 0..400u64 {
            let k = format!("k{:03}", (i * 53 + round) % 170).into_bytes();
            let v = format!("{i:080}").into_bytes();
            if head.commit(&[put(&k, &v, i + 1)], i + 1).is_err() {
                failed = Some((k, v));
                break;
            }
            model.insert(k, v);
            if !armed && head.checkpoint_running() {
                faults.fail_next(FaultOp::Sync, 5, 1);
                armed = true;
            }
        }
        let (k, v) = failed.expect("a commit met the failed sync");
        assert!(head.poisoned().is_some(), "round {round}");
        let mut with_failed = model.clone();
        with_failed.insert(k, v);
        let (image, _) = mem.crash_image(CrashPolicy::Random(RandomCrash::new(seed ^ round)));
        drop(head);
        let head = Head::open(files(&image), background_cfg(8 << 10), main, 0).unwrap();
        let got = read_all(&head.snapshot());
        assert!(got == model || got == with_failed, "round {round}");
    }
}

/// Regression (ci_injected_faults, seed 2262118309045340624, under CPU load): the operation
/// that finds a background checkpoint whose own sync failed did not fail a sync itself; it
/// is refused as `Poisoned` (reopen), as every later one is. It returned the thread's `Io`
/// error before, which reads as "retry".
#[test]
fn the_operation_that_finds_a_failed_background_sync_is_refused_as_poisoned() {
    let faults = FaultInjector::new();
    let mem = MemoryStorage::with_faults(faults.clone());
    // A log file that never fills here: no commit syncs anything (no rotation).
    let mut c = background_cfg(8 << 10);
    c.log.file_bytes = 8 << 20;
    let mut head = Head::create(files(&mem), c, BranchName::main(), 0, None, Vec::new()).unwrap();
    let mut started = false;
    for i in 0..400u64 {
        let k = format!("k{:03}", (i * 53) % 170).into_bytes();
        let v = format!("{i:080}").into_bytes();
        head.commit_unsynced(&[put(&k, &v, i + 1)], i + 1).unwrap();
        if head.checkpoint_running() {
            started = true;
            break;
        }
        // After the commit that created the log file: the next sync is the thread's.
        if i == 0 {
            faults.fail_next(FaultOp::Sync, 5, 1);
        }
    }
    assert!(started, "no background checkpoint started");
    // No store hook here: the next operation joins the thread and meets its failure.
    let err = head
        .checkpoint_buffer(10_000)
        .expect_err("the thread's sync failed");
    assert_eq!(err.kind(), bough_io::ErrorKind::Poisoned, "{err}");
    assert!(head.poisoned().is_some());
    let again = head
        .commit_unsynced(&[put(b"later", b"1", 20_000)], 20_000)
        .expect_err("poisoned");
    assert_eq!(again.kind(), bough_io::ErrorKind::Poisoned, "{again}");
}

/// A full log file is left for the next one while a background checkpoint runs (its thread
/// held at the read gate here, reading a leaf): no commit waits for the checkpoint, the
/// checkpoint installs after the rotation with a `LOG` from the file its log resumes in,
/// and a power loss before or after the install loses no acknowledged commit.
/// (`stall_probe`: a commit that met a full log file used to wait 0.35-0.4 s.)
#[test]
fn a_full_log_file_is_left_for_the_next_while_a_background_checkpoint_runs() {
    let faults = FaultInjector::new();
    let mem = MemoryStorage::with_faults(faults.clone());
    let main = BranchName::main();
    let budget = Arc::new(bough_tree::buffer::BufferBudget::new(usize::MAX));
    let config = HeadConfig {
        buffer_budget: Some(Arc::clone(&budget)),
        ..background_cfg(8 << 10)
    };
    // Leaves are not cached: the checkpoint's thread reads them from the files.
    let uncached = |m: &MemoryStorage| {
        let s: Arc<dyn Storage> = Arc::new(m.clone());
        let _ = s.create_dir("t.0");
        Arc::new(FileTable::new(
            s,
            "t.0".into(),
            4096,
            Arc::new(PageCache::new(1 << 20)),
            false,
        ))
    };
    let mut head = Head::create(
        uncached(&mem),
        config.clone(),
        main.clone(),
        0,
        None,
        Vec::new(),
    )
    .unwrap();
    let mut model = BTreeMap::new();
    let key = |i: u64| format!("k{:03}", i % 200).into_bytes();
    let commit = |head: &mut Head, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, i: u64| {
        let v = format!("{i:060}").into_bytes();
        head.commit(&[put(&key(i), &v, i + 1)], i + 1).unwrap();
        model.insert(key(i), v);
    };
    for i in 0..200u64 {
        commit(&mut head, &mut model, i);
    }
    head.checkpoint_buffer(300).unwrap();
    // (The load above may have waited for its own background checkpoints.)
    let waited = budget.commit_checkpoints().0;
    faults.stall_reads();
    // A commit that waits for the held checkpoint would wait forever: the gate opens by
    // itself after a while, and the assertions below then fail instead of hanging.
    let watchdog = {
        let faults = faults.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(20));
            faults.release_reads();
        })
    };
    let mut i = 1_000u64;
    while !head.checkpoint_running() {
        commit(&mut head, &mut model, i);
        i += 1;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while faults.stalled_reads() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the checkpoint's thread reads a leaf"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let logs = |m: &MemoryStorage| {
        m.list("t.0")
            .unwrap()
            .iter()
            .filter(|n| n.starts_with("wal_"))
            .count()
    };
    let before = logs(&mem);
    // 128 KiB log files of 4 KiB records: a new file within 32 commits, long before the
    // buffer reaches twice its bound (the back-pressure that does wait).
    for _ in 0..32 {
        if logs(&mem) > before {
            break;
        }
        commit(&mut head, &mut model, i);
        i += 1;
    }
    assert!(logs(&mem) > before, "the log rotated");
    assert!(head.checkpoint_running(), "the checkpoint is still held");
    assert_eq!(
        budget.commit_checkpoints().0,
        waited,
        "no commit waited for it"
    );
    let check = |image: &MemoryStorage, model: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str| {
        let reopened = Head::open(files(image), config.clone(), main.clone(), 0)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(&read_all(&reopened.snapshot()), model, "{what}");
    };
    let (image, _) = mem.crash_image(CrashPolicy::DropAllUnsynced);
    check(&image, &model, "power loss with the checkpoint held");
    faults.release_reads();
    commit(&mut head, &mut model, i);
    head.checkpoint_buffer(5_000).unwrap();
    assert!(!head.checkpoint_running());
    assert_eq!(read_all(&head.snapshot()), model);
    let (image, _) = mem.crash_image(CrashPolicy::DropAllUnsynced);
    check(&image, &model, "power loss after the install");
    drop(head);
    check(&mem, &model, "reopen");
    drop(watchdog);
}
