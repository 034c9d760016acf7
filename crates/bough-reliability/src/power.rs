//! Power loss at every sync point.
//!
//! A deterministic workload (several families interleaved: writes, branch create/delete,
//! archives, restores, merges, new terms, compaction, GC, manifest rewrites) runs on a
//! [`MemoryStorage`]. A first run counts its sync points (file and directory syncs, those
//! inside `create_new`/`write_atomic`/`create_dir` included). Then, for each point `k`, a
//! fresh run has the injector fail sync `k + 1` and every later one — the world stops just
//! before that sync, with the writes since sync `k` unsynced — the storage loses power under
//! a sampled [`CrashPolicy`] (all unsynced writes dropped, all kept, or each one kept,
//! dropped, torn per sector or garbled, and each unsynced directory change kept or undone),
//! and the store is reopened. Every family must then hold exactly its acknowledged
//! operations, or those plus the one in flight (no half-applied batch, no lost
//! acknowledgement), the integrity checker must pass, and the recovered store must accept
//! more operations.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bough::io::{
    CrashPolicy, CrashReport, FaultInjector, FaultOp, MemoryStorage, RandomCrash, Storage,
};
use bough::{ErrorKind, ManualClock, Options, Store, StoreBuilder};
use parking_lot::Mutex;

use crate::exec::{Verdict, execute, tune, verify_family};
use crate::report::{Tally, guarded};
use crate::rng::{Rng, mix};
use crate::workload::{FamilyModel, Op, WorkloadConfig};

/// How big a sweep is.
#[derive(Debug, Clone, Copy)]
pub struct SweepConfig {
    /// The workload whose sync points are swept.
    pub workload: WorkloadConfig,
    /// Most crash points (all of them when the workload has fewer sync points; otherwise
    /// spread evenly).
    pub max_points: usize,
    /// Operations per family run on the recovered store before it is verified again.
    pub continue_ops: usize,
    /// Worker threads.
    pub threads: usize,
    /// Extra sweeps with other workload seeds (the long run).
    pub extra_workloads: u64,
}

impl SweepConfig {
    /// CI: every sync point of five workloads of three families × 60 operations (a few
    /// hundred sync points each).
    pub fn short() -> Self {
        SweepConfig {
            workload: WorkloadConfig {
                families: 3,
                ops_per_family: 60,
                keys: 40,
                max_branches: 5,
            },
            max_points: 2000,
            continue_ops: 3,
            threads: 2,
            extra_workloads: 4,
        }
    }

    /// Long: three bigger workloads (three families × 80 operations), every point.
    pub fn long() -> Self {
        SweepConfig {
            workload: WorkloadConfig {
                families: 3,
                ops_per_family: 80,
                keys: 48,
                max_branches: 6,
            },
            max_points: 5000,
            continue_ops: 6,
            threads: 2,
            extra_workloads: 2,
        }
    }
}

/// Store options over `mem` for the sweep.
pub fn memory_options(mem: MemoryStorage, clock: &ManualClock) -> StoreBuilder {
    Store::builder(tune(Options::in_memory()))
        .memory(mem)
        .clock(Arc::new(clock.clone()))
}

/// The order in which the families' operations run: each family `ops_per_family` times,
/// shuffled by the seed.
pub fn schedule(seed: u64, cfg: &WorkloadConfig) -> Vec<u32> {
    let mut s: Vec<u32> = (0..cfg.families)
        .flat_map(|f| std::iter::repeat_n(f, cfg.ops_per_family))
        .collect();
    let mut r = Rng::derive(seed, &[0x5343]);
    for i in (1..s.len()).rev() {
        let j = r.below(i as u64 + 1) as usize;
        s.swap(i, j);
    }
    s
}

/// The crash policy for point `k`: a fifth drop everything unsynced, a fifth keep
/// everything, the rest decide per write and per directory change.
pub fn policy_for(seed: u64, k: u64) -> CrashPolicy {
    let mut r = Rng::derive(seed, &[0x504F, k]);
    match r.below(5) {
        0 => CrashPolicy::DropAllUnsynced,
        1 => CrashPolicy::KeepAllUnsynced,
        _ => CrashPolicy::Random(RandomCrash::new(mix(seed, &[k, 0x5243]))),
    }
}

/// What running the workload until the first error did.
#[derive(Debug)]
pub struct Prefix {
    /// Each family's model after its acknowledged operations.
    pub models: Vec<FamilyModel>,
    /// The operation that failed (family, op), if one did.
    pub in_flight: Option<(u32, Op)>,
    /// The failure, if one happened.
    pub error: Option<bough::Error>,
}

/// Runs the scheduled workload on `store` until it ends or an operation fails.
pub fn run_until_error(
    store: &Store,
    clock: &ManualClock,
    seed: u64,
    cfg: &WorkloadConfig,
) -> Prefix {
    let mut models: Vec<FamilyModel> = (0..cfg.families).map(FamilyModel::new).collect();
    for f in schedule(seed, cfg) {
        let m = &mut models[f as usize];
        let op = m.next_op(seed, cfg);
        clock.advance(1);
        match execute(store, seed, f, m.applied, &op) {
            Ok(()) => m.apply(seed, &op),
            Err(e) => {
                return Prefix {
                    models,
                    in_flight: Some((f, op)),
                    error: Some(e),
                };
            }
        }
    }
    Prefix {
        models,
        in_flight: None,
        error: None,
    }
}

/// Sync points of the workload (a fault-free run).
pub fn count_sync_points(seed: u64, cfg: &WorkloadConfig) -> Result<u64, String> {
    let mem = MemoryStorage::new();
    let clock = ManualClock::new(1_000_000);
    let store = Store::open(memory_options(mem.clone(), &clock)).map_err(|e| e.to_string())?;
    let p = run_until_error(&store, &clock, seed, cfg);
    let _ = store.close();
    if let Some(e) = p.error {
        return Err(format!("the fault-free workload failed: {e}"));
    }
    let s = mem.stats().snapshot();
    Ok(s.syncs + s.dir_syncs)
}

/// The sweep. Failures name the seed and the crash point.
pub fn sweep(seed: u64, cfg: &SweepConfig) -> Tally {
    guarded("power-loss sweep", || {
        let mut tally = Tally::default();
        for w in 0..=cfg.extra_workloads {
            let wseed = if w == 0 {
                seed
            } else {
                mix(seed, &[w, 0x5757])
            };
            tally.merge(&sweep_one(wseed, cfg));
        }
        tally
    })
}

fn sweep_one(seed: u64, cfg: &SweepConfig) -> Tally {
    let mut tally = Tally::default();
    let n = match count_sync_points(seed, &cfg.workload) {
        Ok(n) => n,
        Err(e) => {
            tally.fail(format!("power sweep (seed {seed}): {e}"));
            return tally;
        }
    };
    tally.sync_points += n;
    let points: Vec<u64> = if n as usize <= cfg.max_points {
        (0..n).collect()
    } else {
        (0..cfg.max_points as u64)
            .map(|i| i * n / cfg.max_points as u64)
            .collect()
    };
    eprintln!(
        "power sweep: seed {seed}, {} families x {} ops, {n} sync points, {} crash points",
        cfg.workload.families,
        cfg.workload.ops_per_family,
        points.len()
    );
    let next = AtomicUsize::new(0);
    let out = Mutex::new(Tally::default());
    std::thread::scope(|s| {
        for _ in 0..cfg.threads.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&k) = points.get(i) else { break };
                    let t = guarded(&format!("crash point {k} (seed {seed})"), || {
                        crash_point(seed, cfg, k)
                    });
                    out.lock().merge(&t);
                }
            });
        }
    });
    tally.merge(&out.into_inner());
    tally
}

/// One crash point: stop before sync `k + 1`, lose power, recover, verify, go on.
pub fn crash_point(seed: u64, cfg: &SweepConfig, k: u64) -> Tally {
    let mut tally = Tally::default();
    let here = format!("seed {seed} crash point {k}");
    let faults = FaultInjector::new();
    faults.fail_after(FaultOp::Sync, k, libc::EIO, u64::MAX);
    let mem = MemoryStorage::with_faults(faults.clone());
    let clock = ManualClock::new(1_000_000);
    let store = match Store::open(memory_options(mem.clone(), &clock)) {
        Ok(s) => s,
        Err(e) => {
            tally.fail(format!("{here}: open failed: {e}"));
            return tally;
        }
    };
    let prefix = run_until_error(&store, &clock, seed, &cfg.workload);
    // A clean close seals the manifests written to (one snapshot record each): its syncs
    // are sync points like any other, and power lost during it must lose nothing.
    let _ = store.close();
    let in_flight = match prefix.in_flight.clone() {
        Some((fam, op)) => {
            if let Some(e) = &prefix.error
                && !matches!(e.kind(), ErrorKind::Io | ErrorKind::Poisoned)
            {
                tally.fail(format!(
                    "{here}: {} failed with {:?} ({e}) where only the injected fsync failure was expected",
                    op.kind(),
                    e.kind()
                ));
            }
            format!("family {fam} {op:?}")
        }
        // Every operation succeeded and the failed sync was one of the close's: every
        // family must hold exactly its acknowledged operations.
        None if faults.fired() > 0 => "the clean close".to_string(),
        // The run needed fewer syncs this time: nothing to crash.
        None => return tally,
    };
    let policy = policy_for(seed, k);
    faults.clear();
    let report: CrashReport = mem.crash(policy);
    tally.crash.add(&report);
    tally.crash_points += 1;
    let ctx = format!("{here} (in flight: {in_flight}; {policy:?})");
    let models = verify_recovered(&mem, &clock, seed, &prefix, &ctx, &mut tally);
    let Some(models) = models else {
        return tally;
    };
    // The recovered store keeps working: more operations, verified again.
    continue_after(&mem, &clock, seed, cfg, models, &ctx, &mut tally);
    tally
}

/// Reopens `mem`, checks every family against its allowed states, runs the integrity
/// checker. Returns the models the store turned out to hold.
fn verify_recovered(
    mem: &MemoryStorage,
    clock: &ManualClock,
    seed: u64,
    prefix: &Prefix,
    ctx: &str,
    tally: &mut Tally,
) -> Option<Vec<FamilyModel>> {
    clock.advance(1000);
    let store = match Store::open(memory_options(mem.clone(), clock)) {
        Ok(s) => s,
        Err(e) => {
            tally.fail(format!("{ctx}: reopen failed: {e}"));
            return None;
        }
    };
    let storage: Arc<dyn Storage> = Arc::new(mem.clone());
    let mut recovered = Vec::new();
    let mut ok = true;
    for m in &prefix.models {
        let mut candidates = vec![m.clone()];
        if let Some((f, op)) = &prefix.in_flight
            && *f == m.family
        {
            candidates.extend(m.outcomes(seed, op));
        }
        match verify_family(&store, &storage, seed, m.family, &candidates) {
            Verdict::Match(n) => recovered.push(candidates[n].clone()),
            Verdict::Mismatch {
                detail,
                lost,
                wrong,
            } => {
                tally.mismatch(
                    lost,
                    wrong,
                    format!(
                        "{ctx}: family {} after recovery is not its acknowledged state: {detail}",
                        m.family
                    ),
                );
                ok = false;
            }
            Verdict::Error(e) => {
                tally.fail(format!(
                    "{ctx}: reading family {} after recovery failed: {e}",
                    m.family
                ));
                ok = false;
            }
        }
    }
    let _ = store.close();
    check(mem, ctx, tally);
    ok.then_some(recovered)
}

/// Runs the integrity checker over `mem`.
pub fn check(mem: &MemoryStorage, ctx: &str, tally: &mut Tally) {
    tally.integrity_checks += 1;
    match crate::check::check_storage(Arc::new(mem.clone())) {
        Ok(r) if r.is_ok() => {}
        Ok(r) => tally.fail(format!("{ctx}: integrity check: {r}")),
        Err(e) => tally.fail(format!("{ctx}: integrity check could not run: {e}")),
    }
}

fn continue_after(
    mem: &MemoryStorage,
    clock: &ManualClock,
    seed: u64,
    cfg: &SweepConfig,
    mut models: Vec<FamilyModel>,
    ctx: &str,
    tally: &mut Tally,
) {
    if cfg.continue_ops == 0 {
        return;
    }
    let store = match Store::open(memory_options(mem.clone(), clock)) {
        Ok(s) => s,
        Err(e) => {
            tally.fail(format!("{ctx}: second reopen failed: {e}"));
            return;
        }
    };
    for m in &mut models {
        for _ in 0..cfg.continue_ops {
            let op = m.next_op(seed, &cfg.workload);
            clock.advance(1);
            if let Err(e) = execute(&store, seed, m.family, m.applied, &op) {
                tally.fail(format!(
                    "{ctx}: after recovery, family {} op {} ({op:?}) failed: {e}",
                    m.family, m.applied
                ));
                let _ = store.close();
                return;
            }
            m.apply(seed, &op);
        }
    }
    let storage: Arc<dyn Storage> = Arc::new(mem.clone());
    for m in &models {
        match verify_family(&store, &storage, seed, m.family, std::slice::from_ref(m)) {
            Verdict::Match(_) => {}
            Verdict::Mismatch {
                detail,
                lost,
                wrong,
            } => {
                tally.mismatch(lost, wrong, format!(
                    "{ctx}: family {} diverged after more operations on the recovered store: {detail}",
                    m.family
                ));
            }
            Verdict::Error(e) => tally.fail(format!(
                "{ctx}: reading family {} on the recovered store failed: {e}",
                m.family
            )),
        }
    }
    let _ = store.close();
    // And once more through a power loss that keeps nothing unsynced.
    mem.crash(CrashPolicy::DropAllUnsynced);
    check(mem, ctx, tally);
}
