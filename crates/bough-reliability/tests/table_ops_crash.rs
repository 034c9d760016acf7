//! A table-wide create, delete, archive and merge killed at every sync point.
//!
//! Each operation runs over three partitions of a table on a [`MemoryStorage`]; a first,
//! fault-free run counts the sync points the operation passes (file and directory syncs,
//! those inside `create_new` included). Then, for each point `k`, a fresh run has the
//! injector fail sync `k + 1` and every later one — the world stops just before it, the
//! storage poisoned — the storage loses power under a policy drawn from the seed (drop
//! everything unsynced, keep it, or decide per write and per directory change), and the
//! store is reopened on what is left. The reopened store must show the operation on every
//! partition or on none (resolved at open: the registry holds no interrupted operation),
//! every write acknowledged before it, a clean integrity check, and accept the operation's
//! next step.
//!
//! The seed is printed; `BOUGH_SEED=<seed>` replays it.

use std::sync::Arc;

use bough::io::{CrashPolicy, FaultInjector, FaultOp, MemoryStorage, RandomCrash, Storage};
use bough::{ConflictPolicy, ManualClock, Options, Store, StoreBuilder};
use bough_reliability::check::check_storage;
use bough_reliability::exec::tune;
use bough_reliability::rng::{Rng, mix, seed_from_env};

const TABLE: &str = "orders";
const PARTS: u32 = 3;
const KEYS: u32 = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Create,
    Delete,
    Archive,
    Merge,
}

fn builder(mem: MemoryStorage, clock: &ManualClock) -> StoreBuilder {
    Store::builder(tune(Options::in_memory()))
        .memory(mem)
        .clock(Arc::new(clock.clone()))
}

/// What every run holds before the operation: `main` with keys on every partition, and
/// (for all but a create) `feature` forked from it with a key of its own.
fn setup(store: &Store, kind: Kind) -> bough::Result<()> {
    let t = store.table(TABLE)?;
    for p in 0..PARTS {
        let main = t.partition(p)?.branch("main")?;
        for k in 0..KEYS {
            main.put_blocking(format!("k{k}"), format!("v{p}.{k}"))?;
        }
    }
    if kind != Kind::Create {
        t.create_branch("feature", "main")?;
        for p in 0..PARTS {
            t.partition(p)?
                .branch("feature")?
                .put_blocking("f", format!("feature{p}"))?;
        }
    }
    Ok(())
}

fn run_op(store: &Store, kind: Kind) -> bough::Result<()> {
    let t = store.table(TABLE)?;
    match kind {
        Kind::Create => t.create_branch("feature", "main"),
        Kind::Delete => t.delete_branch("feature"),
        Kind::Archive => t.archive("feature").map(|_| ()),
        Kind::Merge => t.merge("feature", "main", ConflictPolicy::Fail).map(|_| ()),
    }
}

/// Whether partition `p` shows the operation done; errors are failures of the test.
fn done_on(store: &Store, kind: Kind, p: u32) -> Result<bool, String> {
    let part = store.partition(TABLE, p).map_err(|e| e.to_string())?;
    let branches = part.branches().map_err(|e| e.to_string())?;
    let has_feature = branches.iter().any(|b| b == "feature");
    Ok(match kind {
        Kind::Create => has_feature,
        Kind::Delete => !has_feature,
        Kind::Archive => {
            if !has_feature {
                return Err(format!("partition {p} lost branch feature"));
            }
            let n = part
                .branch("feature")
                .and_then(|b| b.archives())
                .map_err(|e| e.to_string())?
                .len();
            n == 1
        }
        Kind::Merge => part
            .branch("main")
            .and_then(|b| b.get_blocking("f"))
            .map_err(|e| e.to_string())?
            .is_some(),
    })
}

/// Every write acknowledged before the operation is there.
fn acknowledged_hold(store: &Store, kind: Kind) -> Result<(), String> {
    for p in 0..PARTS {
        let main = store
            .partition(TABLE, p)
            .and_then(|x| x.branch("main"))
            .map_err(|e| e.to_string())?;
        for k in 0..KEYS {
            let v = main
                .get_blocking(format!("k{k}"))
                .map_err(|e| e.to_string())?;
            if v.as_ref().map(|x| x.value.as_slice()) != Some(format!("v{p}.{k}").as_bytes()) {
                return Err(format!("partition {p} main lost k{k}: {v:?}"));
            }
        }
        if kind != Kind::Create && kind != Kind::Delete {
            let f = store
                .partition(TABLE, p)
                .and_then(|x| x.branch("feature"))
                .and_then(|b| b.get_blocking("f"))
                .map_err(|e| e.to_string())?;
            if f.as_ref().map(|x| x.value.as_slice()) != Some(format!("feature{p}").as_bytes()) {
                return Err(format!("partition {p} feature lost f: {f:?}"));
            }
        }
    }
    Ok(())
}

fn sync_points(store_mem: &MemoryStorage) -> u64 {
    let s = store_mem.stats().snapshot();
    s.syncs + s.dir_syncs
}

/// (sync points before the operation, after it).
fn count(kind: Kind) -> (u64, u64) {
    let mem = MemoryStorage::new();
    let clock = ManualClock::new(1_000_000);
    let store = Store::open(builder(mem.clone(), &clock)).unwrap_or_else(|e| panic!("{e}"));
    setup(&store, kind).unwrap_or_else(|e| panic!("setup: {e}"));
    let before = sync_points(&mem);
    run_op(&store, kind).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
    let after = sync_points(&mem);
    store.close().unwrap_or_else(|e| panic!("{e}"));
    (before, after)
}

fn policy_for(seed: u64, k: u64) -> CrashPolicy {
    let mut r = Rng::derive(seed, &[0x5441, k]);
    match r.below(4) {
        0 => CrashPolicy::DropAllUnsynced,
        1 => CrashPolicy::KeepAllUnsynced,
        _ => CrashPolicy::Random(RandomCrash::new(mix(seed, &[k, 0x5442]))),
    }
}

/// One crash point; `Err` says what went wrong.
fn crash_at(seed: u64, kind: Kind, k: u64) -> Result<&'static str, String> {
    let faults = FaultInjector::new();
    faults.fail_after(FaultOp::Sync, k, libc::EIO, u64::MAX);
    let mem = MemoryStorage::with_faults(faults);
    let clock = ManualClock::new(1_000_000);
    let store = Store::open(builder(mem.clone(), &clock)).map_err(|e| e.to_string())?;
    setup(&store, kind).map_err(|e| format!("setup failed: {e}"))?;
    let result = run_op(&store, kind);
    let _ = store.close();
    let (image, _) = mem.crash_image(policy_for(seed, k));
    let store = Store::open(builder(image.clone(), &clock)).map_err(|e| format!("reopen: {e}"))?;
    let status = store.table_ops().map_err(|e| e.to_string())?;
    if !status.unresolved.is_empty() {
        return Err(format!(
            "still unresolved after open: {:?}",
            status.unresolved
        ));
    }
    let done: Vec<bool> = (0..PARTS)
        .map(|p| done_on(&store, kind, p))
        .collect::<Result<_, _>>()?;
    let all = done.iter().all(|d| *d);
    if !all && done.iter().any(|d| *d) {
        return Err(format!(
            "done on some partitions only: {done:?} (op said {result:?})"
        ));
    }
    if result.is_ok() && !all {
        return Err("acknowledged but not done".into());
    }
    acknowledged_hold(&store, kind)?;
    let storage: Arc<dyn Storage> = Arc::new(image);
    let integrity = check_storage(storage).map_err(|e| e.to_string())?;
    if !integrity.is_ok() {
        return Err(format!("integrity: {:?}", integrity.problems));
    }
    // The store goes on: doing (or redoing) the operation works.
    let again = run_op(&store, kind);
    match (kind, &again) {
        (_, Ok(())) => {}
        (Kind::Create, Err(e)) if all && e.kind() == bough::ErrorKind::AlreadyExists => {}
        (_, Err(e)) => return Err(format!("the operation after recovery failed: {e}")),
    }
    store.close().map_err(|e| e.to_string())?;
    Ok(if all { "done" } else { "not done" })
}

fn sweep(kind: Kind) {
    let (seed, from) = seed_from_env().unwrap_or_else(|e| panic!("{e}"));
    let (before, after) = count(kind);
    assert!(after > before, "{kind:?} passed no sync point");
    eprintln!(
        "table-wide {kind:?}: seed {seed} ({from}), sync points {before}..{after} (BOUGH_SEED={seed} replays)"
    );
    let (mut done, mut not_done) = (0, 0);
    let mut failures = Vec::new();
    // One point past the last covers the outcome's own sync failing on the close.
    for k in before..=after {
        match crash_at(seed, kind, k) {
            Ok("done") => done += 1,
            Ok(_) => not_done += 1,
            Err(e) => failures.push(format!("crash point {k}: {e}")),
        }
    }
    eprintln!("table-wide {kind:?}: {done} points recovered as done, {not_done} as not done");
    assert!(
        failures.is_empty(),
        "seed {seed}, {kind:?}:\n{}",
        failures.join("\n")
    );
    assert!(done > 0, "no crash point recovered the operation as done");
}

#[test]
fn a_table_wide_create_killed_halfway_is_on_every_partition_or_none() {
    sweep(Kind::Create);
}

#[test]
fn a_table_wide_delete_killed_at_every_sync_point_is_all_or_nothing() {
    sweep(Kind::Delete);
}

#[test]
fn a_table_wide_archive_killed_at_every_sync_point_is_all_or_nothing() {
    sweep(Kind::Archive);
}

#[test]
fn a_table_wide_merge_killed_at_every_sync_point_is_all_or_nothing() {
    sweep(Kind::Merge);
}
