//! Buffered durability (`Durability::Buffered`, ARCHITECTURE.md "Durability choices"): no
//! sync per buffered commit and one per `sync()`; every write acknowledged before a
//! successful sync survives any power loss; unsynced writes may be lost, in any pattern the
//! crash model draws, but never come back wrong, panic or read as corruption (randomized
//! over seeds: `BOUGH_DURABILITY_SEED=<n>` replays one); damage to a synced log record
//! before an intact one is still corruption; a failed sync poisons and is never retried.

mod common;

use std::collections::BTreeMap;

use bough::io::{
    CrashPolicy, FaultInjector, FaultOp, MemoryStorage, OpenOptions, RandomCrash, Storage,
};
use bough::{Durability, ErrorKind, Options, Store, WriteBatch};
use common::Rng;

fn opts(durability: Durability, buffer: u64) -> Options {
    Options::in_memory()
        .maintenance_interval_ms(0)
        .write_buffer_bytes(buffer)
        .durability(durability)
}

fn open(mem: &MemoryStorage, durability: Durability) -> Store {
    Store::builder(opts(durability, 64 << 20))
        .memory(mem.clone())
        .open()
        .expect("open")
}

/// File and directory syncs of `f`.
fn syncs_of(store: &Store, f: impl FnOnce()) -> u64 {
    let before = store.io_stats();
    f();
    let d = store.io_stats().since(&before);
    d.syncs + d.dir_syncs
}

#[test]
fn a_buffered_commit_syncs_nothing_and_a_sync_call_once() {
    assert_eq!(Options::default().durability, Durability::Sync);
    let mem = MemoryStorage::new();
    let store = open(&mem, Durability::Buffered);
    let part = store.partition("t", 0).unwrap();
    let main = part.branch("main").unwrap();
    // The first commit creates the log and the manifest record naming it.
    main.put_blocking("warm", "v").unwrap();
    main.sync_blocking().unwrap();
    let per_commit: Vec<u64> = (0..50)
        .map(|i| {
            syncs_of(&store, || {
                main.put_blocking(format!("k{i:03}"), "v").unwrap()
            })
        })
        .collect();
    assert!(per_commit.iter().all(|&s| s == 0), "{per_commit:?}");
    assert_eq!(syncs_of(&store, || main.sync_blocking().unwrap()), 1);
    assert_eq!(
        syncs_of(&store, || main.sync_blocking().unwrap()),
        0,
        "nothing waits for a sync"
    );
    // A batch asking for `Sync` is one sync (covering the buffered ones before it).
    main.put_blocking("b1", "v").unwrap();
    let synced = syncs_of(&store, || {
        main.write_blocking(
            WriteBatch::new()
                .put("b2", "v")
                .durability(Durability::Sync),
        )
        .unwrap()
    });
    assert_eq!(synced, 1);
    assert_eq!(syncs_of(&store, || main.sync_blocking().unwrap()), 0);
    // `Store::sync`: one sync per branch with writes waiting.
    let dev = part.create_branch("dev", "main").unwrap();
    dev.put_blocking("warm", "v").unwrap();
    dev.sync_blocking().unwrap();
    main.put_blocking("m", "v").unwrap();
    dev.put_blocking("d", "v").unwrap();
    assert_eq!(syncs_of(&store, || store.sync_blocking().unwrap()), 2);
    assert_eq!(syncs_of(&store, || store.sync_blocking().unwrap()), 0);
    store.close().unwrap();

    // A durable store: a batch may ask for `Buffered`.
    let store = open(&MemoryStorage::new(), Durability::Sync);
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    main.put_blocking("warm", "v").unwrap();
    assert_eq!(syncs_of(&store, || main.put_blocking("a", "v").unwrap()), 1);
    let buffered = syncs_of(&store, || {
        main.write_blocking(
            WriteBatch::new()
                .put("b", "v")
                .durability(Durability::Buffered),
        )
        .unwrap()
    });
    assert_eq!(buffered, 0);
    assert_eq!(syncs_of(&store, || main.sync_blocking().unwrap()), 1);
    // Without a write buffer `Buffered` changes nothing: two syncs a commit (pages, then
    // the manifest), none left for `sync()`.
    let store = Store::open(opts(Durability::Buffered, 0)).unwrap();
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    for i in 0..3 {
        main.put_blocking(format!("warm{i}"), "v").unwrap();
    }
    assert_eq!(syncs_of(&store, || main.put_blocking("a", "v").unwrap()), 2);
    assert_eq!(syncs_of(&store, || main.sync_blocking().unwrap()), 0);
}

/// Reads the branch's content as strings.
fn content(branch: &bough::Branch) -> bough::Result<BTreeMap<String, String>> {
    branch
        .iter()
        .map(|kv| {
            let kv = kv?;
            Ok((
                String::from_utf8_lossy(&kv.key).into_owned(),
                String::from_utf8_lossy(&kv.value.value).into_owned(),
            ))
        })
        .collect()
}

/// The crash of `seed`: each policy and tear mode the memory storage offers.
fn policy(seed: u64) -> CrashPolicy {
    let r = RandomCrash::new(seed).dir_keep_percent((seed % 101) as u8);
    match seed % 7 {
        0 => CrashPolicy::DropAllUnsynced,
        1 => CrashPolicy::KeepAllUnsynced,
        2 => CrashPolicy::Random(r.weights(1, 1, 0, 0)),
        3 => CrashPolicy::Random(r.weights(0, 0, 1, 0)),
        4 => CrashPolicy::Random(r.weights(0, 0, 0, 1)),
        5 => CrashPolicy::Random(r.weights(3, 1, 1, 0)),
        _ => CrashPolicy::Random(r),
    }
}

/// The store's state at each version, and the last version known durable.
struct Model {
    at: BTreeMap<u64, BTreeMap<String, String>>,
    now: BTreeMap<String, String>,
    durable: u64,
}

impl Model {
    /// After a commit: records the state at the branch's new version; `syncs` is how many
    /// syncs the commit did (a durable commit, a checkpoint, a new log file: everything
    /// before it is durable then, and maybe the commit itself).
    fn committed(&mut self, version: u64, syncs: u64, sync: bool) {
        self.at.insert(version, self.now.clone());
        if sync {
            self.durable = version;
        } else if syncs > 0 {
            self.durable = self.durable.max(version.saturating_sub(1));
        }
    }

    /// Checks a recovered branch: a version at or after the last durable one, holding
    /// exactly what the model held then. Returns the version.
    fn check(&self, seed: u64, branch: &bough::Branch) -> u64 {
        let v = branch.read_view().expect("view").version();
        assert!(
            v >= self.durable,
            "seed {seed}: recovered version {v} is below the durable version {}",
            self.durable
        );
        let want = self
            .at
            .get(&v)
            .unwrap_or_else(|| panic!("seed {seed}: version {v} was never written"));
        let got = content(branch).unwrap_or_else(|e| panic!("seed {seed}: read failed: {e}"));
        assert_eq!(&got, want, "seed {seed}: content at version {v}");
        v
    }
}

/// One randomized run: buffered writes (some batches `Sync`, some values spanning several
/// log blocks), syncs and checkpoints now and then, a power loss, recovery checked against
/// the model; then writes again on the recovered store (over whatever the loss left in the
/// log), a sync, another power loss, checked again.
fn run(seed: u64) {
    let mut rng = Rng::new(seed);
    let mem = MemoryStorage::new();
    // A small buffer in some runs: checkpoints happen on their own.
    let buffer = if seed.is_multiple_of(3) {
        24 << 10
    } else {
        64 << 20
    };
    let open_with = |mem: &MemoryStorage| {
        Store::builder(opts(Durability::Buffered, buffer))
            .memory(mem.clone())
            .open()
            .unwrap_or_else(|e| panic!("seed {seed}: open failed: {e}"))
    };
    let store = open_with(&mem);
    let branch = |s: &Store| {
        s.partition("t", 0)
            .and_then(|p| p.branch("main"))
            .unwrap_or_else(|e| panic!("seed {seed}: branch failed: {e}"))
    };
    let main = branch(&store);
    let v0 = main.read_view().unwrap().version();
    let mut model = Model {
        at: BTreeMap::from([(v0, BTreeMap::new())]),
        now: BTreeMap::new(),
        durable: v0,
    };
    let steps = |store: &Store, main: &bough::Branch, model: &mut Model, rng: &mut Rng, n| {
        for i in 0..n {
            match rng.below(20) {
                0 => {
                    main.sync_blocking().unwrap();
                    model.durable = main.read_view().unwrap().version();
                }
                1 => {
                    main.checkpoint_blocking().unwrap();
                    // A mapping checkpoint is a version of its own (same content).
                    let v = main.read_view().unwrap().version();
                    model.at.insert(v, model.now.clone());
                    model.durable = v;
                }
                _ => {
                    let mut batch = WriteBatch::new();
                    let mut keys = std::collections::BTreeSet::new();
                    for _ in 0..rng.urange(1, 4) {
                        let k = format!("k{:02}", rng.below(40));
                        // One change per key and batch (a batch refuses two).
                        if !keys.insert(k.clone()) {
                            continue;
                        }
                        if rng.chance(0.15) && model.now.contains_key(&k) {
                            batch.delete(&k);
                            model.now.remove(&k);
                        } else {
                            let big = if rng.chance(0.1) { 9000 } else { 8 };
                            let v = format!("{seed}-{i}-{}", "x".repeat(rng.urange(0, big)));
                            batch.put(&k, &v);
                            model.now.insert(k, v);
                        }
                    }
                    let sync = rng.chance(0.1);
                    if sync {
                        batch.durability(Durability::Sync);
                    }
                    let before = store.io_stats();
                    if main.write_blocking(&mut batch).is_err() {
                        panic!("seed {seed}: write failed");
                    }
                    let d = store.io_stats().since(&before);
                    let v = main.read_view().unwrap().version();
                    model.committed(v, d.syncs + d.dir_syncs, sync);
                }
            }
        }
    };
    steps(&store, &main, &mut model, &mut rng, 60);
    let (image, _) = mem.crash_image(policy(seed));
    drop(main);
    drop(store);

    let store = open_with(&image);
    let main = branch(&store);
    let v = model.check(seed, &main);
    // Go on from the recovered state: the model forgets the versions after it.
    model.at.retain(|&k, _| k <= v);
    model.now = model.at.get(&v).cloned().unwrap_or_default();
    model.durable = v;
    steps(&store, &main, &mut model, &mut rng, 30);
    main.sync_blocking().unwrap();
    model.durable = main.read_view().unwrap().version();
    steps(&store, &main, &mut model, &mut rng, 10);
    let (image, _) = image.crash_image(policy(seed.wrapping_mul(31).wrapping_add(7)));
    drop(main);
    drop(store);
    let store = open_with(&image);
    model.check(seed, &branch(&store));
}

/// Seeds 0..48 (or the one `BOUGH_DURABILITY_SEED` names), each printed before it runs.
#[test]
fn unsynced_writes_may_be_lost_but_never_come_back_wrong_or_as_corruption() {
    let seeds: Vec<u64> = match std::env::var("BOUGH_DURABILITY_SEED") {
        Ok(s) => vec![s.parse().expect("BOUGH_DURABILITY_SEED is a number")],
        Err(_) => (0..48).collect(),
    };
    for seed in seeds {
        println!("durability seed {seed} (replay: BOUGH_DURABILITY_SEED={seed})");
        run(seed);
    }
}

/// Everything acknowledged before a successful `sync()` is back after a power loss under
/// every crash policy, with any unsynced writes after it lost or not (never half).
#[test]
fn every_write_acknowledged_before_a_sync_survives_a_power_loss() {
    for seed in 0..28u64 {
        let mem = MemoryStorage::new();
        let store = open(&mem, Durability::Buffered);
        let main = store.partition("t", 0).unwrap().branch("main").unwrap();
        let mut want = BTreeMap::new();
        for i in 0..40u32 {
            let k = format!("k{:02}", i % 25);
            let v = format!("v{i}-{}", "y".repeat((i as usize * 397) % 6000));
            main.put_blocking(&k, &v).unwrap();
            want.insert(k, v);
        }
        main.sync_blocking().unwrap();
        let synced = main.read_view().unwrap().version();
        for i in 0..10u32 {
            main.put_blocking(format!("after{i}"), "later").unwrap();
        }
        let (image, report) = mem.crash_image(policy(seed));
        assert!(
            report.unsynced_writes() > 0,
            "seed {seed}: the writes after the sync were unsynced"
        );
        drop(main);
        drop(store);
        let store = open(&image, Durability::Buffered);
        let main = store.partition("t", 0).unwrap().branch("main").unwrap();
        let v = main.read_view().unwrap().version();
        assert!(
            (synced..=synced + 10).contains(&v),
            "seed {seed}: version {v}"
        );
        let got = content(&main).unwrap();
        let after = (v - synced) as usize;
        for (k, val) in &want {
            assert_eq!(got.get(k), Some(val), "seed {seed}: {k}");
        }
        assert_eq!(
            got.len(),
            want.len() + after,
            "seed {seed}: a prefix of the later writes"
        );
        for i in 0..after {
            assert!(
                got.contains_key(&format!("after{i}")),
                "seed {seed}: after{i}"
            );
        }
    }
}

/// The log file of partition `t.0` in `mem`: (path, bytes).
fn log_file(mem: &MemoryStorage) -> (String, Vec<u8>) {
    for dir in mem.list_dirs().unwrap() {
        for name in mem.list(&dir).unwrap() {
            if name.starts_with("wal_") {
                let path = format!("{dir}/{name}");
                let bytes = mem.read_file(&path, 1 << 30).unwrap();
                return (path, bytes);
            }
        }
    }
    panic!("no log file");
}

/// Flips a byte inside the first log record (offset 0) of `mem`'s log, durably.
fn damage_first_record(mem: &MemoryStorage) {
    let (path, bytes) = log_file(mem);
    let f = mem
        .open(
            &path,
            OpenOptions {
                write: true,
                ..OpenOptions::default()
            },
        )
        .unwrap();
    f.write_at(40, &[bytes[40] ^ 0xff]).unwrap();
    f.sync().unwrap();
}

/// Two commits, each image damaged in the first record, the second intact: when the second
/// was written after a sync covering the first, that is corruption; when both were
/// unsynced, both are lost and the branch opens at the version before them.
#[test]
fn a_damaged_synced_record_before_an_intact_one_is_corruption_an_unsynced_one_a_loss() {
    for sync_between in [true, false] {
        let mem = MemoryStorage::new();
        let store = open(&mem, Durability::Buffered);
        let main = store.partition("t", 0).unwrap().branch("main").unwrap();
        let before = main.read_view().unwrap().version();
        main.put_blocking("a", "1").unwrap();
        if sync_between {
            main.sync_blocking().unwrap();
        }
        main.put_blocking("b", "2").unwrap();
        let (image, _) = mem.crash_image(CrashPolicy::KeepAllUnsynced);
        drop(main);
        drop(store);
        damage_first_record(&image);
        let store = open(&image, Durability::Buffered);
        let opened = store.partition("t", 0).and_then(|p| p.branch("main"));
        if sync_between {
            let e = opened.map(|_| ()).expect_err("a damaged synced record");
            assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
            assert!(e.to_string().contains("wal_"), "{e}");
        } else {
            let main = opened.expect("lost unsynced records are no corruption");
            assert_eq!(main.read_view().unwrap().version(), before);
            assert!(content(&main).unwrap().is_empty());
            // The intact record left after the loss is zeroed before the next append: it
            // never comes back.
            main.put_blocking("c", "3").unwrap();
            main.sync_blocking().unwrap();
            drop(main);
            drop(store);
            let (image, _) = image.crash_image(CrashPolicy::DropAllUnsynced);
            let store = open(&image, Durability::Buffered);
            let main = store.partition("t", 0).unwrap().branch("main").unwrap();
            let got = content(&main).unwrap();
            assert_eq!(got.keys().collect::<Vec<_>>(), ["c"], "{got:?}");
        }
    }
}

#[test]
fn a_failed_sync_poisons_the_branch_and_is_never_retried() {
    let faults = FaultInjector::new();
    let mem = MemoryStorage::with_faults(faults.clone());
    let store = open(&mem, Durability::Buffered);
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    main.put_blocking("a", "1").unwrap();
    main.sync_blocking().unwrap();
    main.put_blocking("b", "2").unwrap();
    faults.fail_next(FaultOp::Sync, 5, 1);
    let e = main.sync_blocking().expect_err("the sync failed");
    assert_ne!(e.kind(), ErrorKind::Closed, "{e}");
    let syncs = store.io_stats().syncs;
    let again = main.sync_blocking().expect_err("poisoned");
    assert_eq!(again.kind(), ErrorKind::Poisoned, "{again}");
    assert!(main.put_blocking("c", "3").is_err(), "writes refused too");
    assert!(store.sync_blocking().is_err());
    assert_eq!(store.io_stats().syncs, syncs, "no sync was retried");
    // What the failed sync did not cover may be lost; what the first sync covered is not.
    let (image, _) = mem.crash_image(CrashPolicy::DropAllUnsynced);
    drop(main);
    drop(store);
    let store = open(&image, Durability::Buffered);
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    assert_eq!(main.get_blocking("a").unwrap().unwrap().value, b"1");
}

/// The other sync points: a fork (any branch operation that reads the branch), the
/// maintenance tick, and a clean close each leave every buffered write acknowledged before
/// them durable, with no `sync()` call.
#[test]
fn forks_maintenance_and_close_sync_the_log() {
    type Point = fn(&Store, &bough::Branch);
    let points: [(&str, Point); 4] = [
        ("fork", |store, _| {
            store
                .partition("t", 0)
                .unwrap()
                .create_branch("dev", "main")
                .unwrap();
        }),
        ("archive", |_, main| {
            main.archive().unwrap();
        }),
        ("maintenance", |store, _| store.run_maintenance().unwrap()),
        ("close", |store, _| store.close().unwrap()),
    ];
    for (what, point) in points {
        let mem = MemoryStorage::new();
        let store = open(&mem, Durability::Buffered);
        let main = store.partition("t", 0).unwrap().branch("main").unwrap();
        for i in 0..20 {
            main.put_blocking(format!("k{i:02}"), "v").unwrap();
        }
        point(&store, &main);
        let (image, _) = mem.crash_image(CrashPolicy::DropAllUnsynced);
        drop(main);
        drop(store);
        let store = open(&image, Durability::Buffered);
        let main = store.partition("t", 0).unwrap().branch("main").unwrap();
        assert_eq!(content(&main).unwrap().len(), 20, "{what}");
    }
}
