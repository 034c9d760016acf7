//! Injected faults: what the store does when the device says no.
//!
//! - **fsync EIO** (a single failure at a sampled sync point): the operation fails with
//!   `Io`; from then on the store refuses every write with `Poisoned`, performs no further
//!   successful sync (a failed fsync is never retried, nor papered over by a later one), and
//!   reads still return the acknowledged state. After a power loss and a reopen, every
//!   family holds its acknowledged operations (plus, maybe, the failed one) and the workload
//!   runs to its end. Memory backend at every sampled point, plus a few points on pread.
//! - **write EIO** and **short writes** (a write that lands partly, then fails): the operation
//!   fails with `Io`, nothing is poisoned, the next operations succeed, and everything ends
//!   exactly where the model says — also after a power loss.
//! - **ENOSPC** on writes and on file creation: the operation fails with `NoSpace`, and once
//!   the fault is cleared ("space freed") the very next operations succeed without a reopen.
//! - **short reads** (a read whose first transfer delivers only part of the buffer): when the
//!   rest arrives on a second try the operation must succeed exactly as without the fault;
//!   when the device fails the rest, the operation fails with `Io` (never returns the partly
//!   filled buffer as data), poisons nothing, and the next operations succeed. In the burst
//!   runs (memory) and in [`short_reads_local`] (pread and io_uring on real files, with every
//!   read of a cold reopen at risk): afterwards every family must match its model exactly.
//!
//! A failed operation may still have taken effect (its commit was durable before a later
//! step failed); the harness reads the store to learn which, and allows both. After a
//! cleared fault that left the operation undone, an unrelated write on the branch it touched
//! runs before the retry, so nothing the failure left staged can ride along unseen.
//!
//! `BOUGH_TRACE=1` prints every operation of the burst runs and the faults armed.

use std::sync::Arc;

use bough::io::{
    CrashPolicy, FaultInjector, FaultOp, MemoryStorage, PreadStorage, RandomCrash, Storage,
};
use bough::{Backend, ErrorKind, ManualClock, Options, Store, WriteBatch};

use crate::exec::{Verdict, execute, tune, verify_family, verify_family_with};
use crate::power::{check, count_sync_points, memory_options, schedule};
use crate::report::{Tally, guarded};
use crate::rng::{Rng, mix};
use crate::workload::{EXTRA_OPS, FamilyModel, Op, TABLE, WorkloadConfig, key, value};

/// How many faults to inject.
#[derive(Debug, Clone, Copy)]
pub struct FaultConfig {
    /// The workload the faults hit.
    pub workload: WorkloadConfig,
    /// Sync points failed with EIO (memory backend), spread over the workload.
    pub fsync_points: u64,
    /// Of those, on the pread backend.
    pub fsync_points_pread: u64,
    /// Runs with bursts of write EIO, short writes, ENOSPC and short reads.
    pub burst_runs: u64,
    /// Runs of the workload on local files (pread, then io_uring, alternately) with short
    /// reads, continued and failed, followed by cold reopens under short reads.
    pub short_read_runs: u64,
}

impl FaultConfig {
    /// CI size.
    pub fn short() -> Self {
        FaultConfig {
            workload: WorkloadConfig {
                families: 2,
                ops_per_family: 40,
                keys: 40,
                max_branches: 5,
            },
            fsync_points: 200,
            fsync_points_pread: 10,
            burst_runs: 80,
            short_read_runs: 4,
        }
    }

    /// Long size.
    pub fn long() -> Self {
        FaultConfig {
            workload: WorkloadConfig {
                families: 3,
                ops_per_family: 80,
                keys: 48,
                max_branches: 6,
            },
            fsync_points: 400,
            fsync_points_pread: 30,
            burst_runs: 150,
            short_read_runs: 12,
        }
    }
}

/// Runs every fault class.
pub fn run(seed: u64, cfg: &FaultConfig) -> Tally {
    guarded("injected faults", || {
        let mut tally = Tally::default();
        let n = match count_sync_points(seed, &cfg.workload) {
            Ok(n) => n,
            Err(e) => {
                tally.fail(format!("faults (seed {seed}): {e}"));
                return tally;
            }
        };
        let mut r = Rng::derive(seed, &[0x4641]);
        for i in 0..cfg.fsync_points {
            let k = r.below(n);
            let backend = if i < cfg.fsync_points_pread {
                Backend::Pread
            } else {
                Backend::Memory
            };
            let t = guarded(&format!("fsync EIO at sync {k}"), || {
                fsync_eio(seed, &cfg.workload, k, backend)
            });
            tally.merge(&t);
        }
        for i in 0..cfg.burst_runs {
            let t = guarded(&format!("fault bursts run {i}"), || {
                bursts(mix(seed, &[i, 0x4255]), seed, &cfg.workload)
            });
            tally.merge(&t);
        }
        for i in 0..cfg.short_read_runs {
            let backend = if i % 2 == 0 {
                Backend::Pread
            } else {
                Backend::IoUring
            };
            let t = guarded(&format!("short reads run {i} ({backend:?})"), || {
                short_reads_local(mix(seed, &[i, 0x5352]), seed, &cfg.workload, backend)
            });
            tally.merge(&t);
        }
        tally
    })
}

/// Where a run's store lives.
enum Place {
    Memory(MemoryStorage),
    /// Local files, with the backend (pread or io_uring) the store uses.
    Local(tempfile::TempDir, Backend),
}

impl Place {
    fn options(&self, faults: Option<&FaultInjector>, clock: &ManualClock) -> Options {
        match self {
            Place::Memory(m) => memory_options(m.clone(), clock),
            Place::Local(d, backend) => {
                let o = tune(Options::new(d.path()))
                    .backend(*backend)
                    .clock(Arc::new(clock.clone()));
                match faults {
                    Some(f) => o.faults(f.clone()),
                    None => o,
                }
            }
        }
    }

    /// Opens a store here, and the raw storage the checks read with; the error says which
    /// failed (`what` names the open in it: "open", "reopen").
    fn open(
        &self,
        what: &str,
        faults: Option<&FaultInjector>,
        clock: &ManualClock,
    ) -> Result<(Store, Arc<dyn Storage>), String> {
        let store =
            Store::open(self.options(faults, clock)).map_err(|e| format!("{what} failed: {e}"))?;
        Ok((store, self.storage()?))
    }

    fn storage(&self) -> Result<Arc<dyn Storage>, String> {
        match self {
            Place::Memory(m) => Ok(Arc::new(m.clone())),
            Place::Local(d, _) => PreadStorage::new(d.path())
                .map(|s| Arc::new(s) as Arc<dyn Storage>)
                .map_err(|e| e.to_string()),
        }
    }

    fn syncs(&self) -> Option<u64> {
        match self {
            Place::Memory(m) => {
                let s = m.stats().snapshot();
                Some(s.syncs + s.dir_syncs)
            }
            Place::Local(..) => None,
        }
    }
}

/// What reads a family: the store and the storage under it, and the workload seed.
pub(crate) struct Reader<'a> {
    pub(crate) store: &'a Store,
    pub(crate) storage: &'a Arc<dyn Storage>,
    pub(crate) seed: u64,
}

/// Resolves what a failed operation did: the family is either as before or as after it.
/// `bases`: compare merge bases too (only on a reopened store, see
/// [`verify_family_with`]).
pub(crate) fn resolve(
    r: &Reader<'_>,
    m: &FamilyModel,
    op: &Op,
    ctx: &str,
    tally: &mut Tally,
    bases: bool,
) -> Option<FamilyModel> {
    let mut candidates = vec![m.clone()];
    candidates.extend(m.outcomes(r.seed, op));
    match verify_family_with(r.store, r.storage, r.seed, m.family, &candidates, bases) {
        Verdict::Match(n) => Some(candidates[n].clone()),
        Verdict::Mismatch {
            detail,
            lost,
            wrong,
        } => {
            tally.mismatch(
                lost,
                wrong,
                format!(
                    "{ctx}: family {} is neither before nor after the failed {}: {detail}",
                    m.family,
                    op.kind()
                ),
            );
            None
        }
        Verdict::Error(e) => {
            tally.fail(format!("{ctx}: reading family {} failed: {e}", m.family));
            None
        }
    }
}

/// Checks every family against its model exactly.
pub(crate) fn verify_all(
    store: &Store,
    storage: &Arc<dyn Storage>,
    seed: u64,
    models: &[FamilyModel],
    ctx: &str,
    tally: &mut Tally,
) -> bool {
    let mut ok = true;
    for m in models {
        match verify_family(store, storage, seed, m.family, std::slice::from_ref(m)) {
            Verdict::Match(_) => {}
            Verdict::Mismatch {
                detail,
                lost,
                wrong,
            } => {
                tally.mismatch(lost, wrong, format!("{ctx}: family {}: {detail}", m.family));
                ok = false;
            }
            Verdict::Error(e) => {
                tally.fail(format!("{ctx}: reading family {} failed: {e}", m.family));
                ok = false;
            }
        }
    }
    ok
}

/// One failed fsync at sync point `k + 1`.
pub fn fsync_eio(seed: u64, cfg: &WorkloadConfig, k: u64, backend: Backend) -> Tally {
    let mut tally = Tally::default();
    let ctx = format!("seed {seed}: fsync EIO at sync {} ({backend:?})", k + 1);
    let faults = FaultInjector::new();
    faults.fail_after(FaultOp::Sync, k, libc::EIO, 1);
    let place = match backend {
        Backend::Memory => Place::Memory(MemoryStorage::with_faults(faults.clone())),
        _ => match tempfile::Builder::new().prefix("bough-faults-").tempdir() {
            Ok(d) => Place::Local(d, backend),
            Err(e) => {
                tally.fail(format!("{ctx}: no temporary directory: {e}"));
                return tally;
            }
        },
    };
    let clock = ManualClock::new(1_000_000);
    let (store, storage) = match place.open("open", Some(&faults), &clock) {
        Ok(opened) => opened,
        Err(e) => {
            tally.fail(format!("{ctx}: {e}"));
            return tally;
        }
    };
    let order = schedule(seed, cfg);
    let mut models: Vec<FamilyModel> = (0..cfg.families).map(FamilyModel::new).collect();
    let mut pos = 0;
    let mut failure = None;
    while pos < order.len() {
        let f = order[pos] as usize;
        let op = models[f].next_op(seed, cfg);
        clock.advance(1);
        match execute(&store, seed, f as u32, models[f].applied, &op) {
            Ok(()) => models[f].apply(seed, &op),
            Err(e) => {
                failure = Some((f, op, e));
                break;
            }
        }
        pos += 1;
    }
    let Some((f, op, e)) = failure else {
        let _ = store.close();
        if faults.fired() > 0 {
            // The failed fsync was one of the clean close's (it seals the manifests written
            // to): every acknowledged operation must still be there after a power loss.
            tally.eio_fsync += faults.fired();
            after_failed_close(&place, &faults, seed, k, &models, &ctx, &clock, &mut tally);
        }
        return tally; // otherwise the run needed fewer syncs
    };
    tally.eio_fsync += faults.fired();
    if e.kind() != ErrorKind::Io && e.kind() != ErrorKind::Poisoned {
        tally.fail(format!(
            "{ctx}: the failed fsync surfaced as {:?} ({e}) from {}",
            e.kind(),
            op.kind()
        ));
    }
    // Reads of what was open still work and show the published state: before or after the
    // failed op. (Opening a partition or branch not opened before the failure needs a
    // writable handle and is refused with `Poisoned`; that is allowed.)
    let mut reads = Tally {
        quiet: true,
        ..Tally::default()
    };
    match resolve(
        &Reader {
            store: &store,
            storage: &storage,
            seed,
        },
        &models[f],
        &op,
        &ctx,
        &mut reads,
        false,
    ) {
        Some(m) if m.applied > models[f].applied => {
            // Reported as failed, yet visible: a later step (a manifest rewrite) failed
            // after the commit was durable. Allowed; counted.
            tally.ambiguous += 1;
            eprintln!(
                "{ctx}: note: {} failed with {e} yet its result is visible",
                op.kind()
            );
        }
        _ => {}
    }
    let refused = !reads.failures.is_empty()
        && reads.lost + reads.wrong == 0
        && reads.failures.iter().all(|f| f.contains("poisoned"));
    if refused {
        tally.poisoned_reads += 1;
    } else {
        for f in &reads.failures {
            eprintln!("FAILURE: {f}");
        }
        reads.quiet = false;
        tally.merge(&reads);
    }
    // Every later write is refused, and nothing is synced any more (no retry).
    let syncs_before = place.syncs();
    let mut probe_models = models.clone();
    for i in 0..4 {
        let Some(&pf) = order.get(pos + 1 + i) else {
            break;
        };
        let pf = pf as usize;
        let pop = probe_models[pf].next_op(seed, cfg);
        match execute(&store, seed, pf as u32, probe_models[pf].applied, &pop) {
            Err(e) if e.kind() == ErrorKind::Poisoned => {}
            // Refused before writing anything (the failed op's partial effect makes a name
            // taken, or a branch it removed is gone): fine, nothing was written.
            Err(e) if matches!(e.kind(), ErrorKind::AlreadyExists | ErrorKind::NotFound) => {}
            Ok(()) if !pop.always_writes() => probe_models[pf].apply(seed, &pop),
            Ok(()) => tally.fail(format!(
                "{ctx}: {} succeeded after the failed fsync (the store must refuse writes until reopened)",
                pop.kind()
            )),
            Err(e) => tally.fail(format!(
                "{ctx}: {} after the failed fsync failed with {:?} ({e}), not Poisoned",
                pop.kind(),
                e.kind()
            )),
        }
    }
    if let (Some(a), Some(b)) = (syncs_before, place.syncs())
        && b != a
    {
        tally.fail(format!(
            "{ctx}: {} syncs succeeded after the failed fsync (never retry a failed fsync)",
            b - a
        ));
    }
    let _ = store.close();
    // Reopen after a power loss: acknowledged operations all there, the workload goes on.
    if let Place::Memory(m) = &place {
        faults.clear();
        let report = m.crash(CrashPolicy::Random(RandomCrash::new(mix(
            seed,
            &[k, 0x4653],
        ))));
        tally.crash.add(&report);
    }
    faults.clear();
    clock.advance(1000);
    let (store, storage) = match place.open("reopen", None, &clock) {
        Ok(opened) => opened,
        Err(e) => {
            tally.fail(format!("{ctx}: {e}"));
            return tally;
        }
    };
    let Some(m) = resolve(
        &Reader {
            store: &store,
            storage: &storage,
            seed,
        },
        &models[f],
        &op,
        &ctx,
        &mut tally,
        true,
    ) else {
        return tally;
    };
    models[f] = m;
    for m in &models {
        if !verify_all(
            &store,
            &storage,
            seed,
            std::slice::from_ref(m),
            &ctx,
            &mut tally,
        ) {
            return tally;
        }
    }
    // Finish the workload on the reopened store.
    for &ff in &order[pos + 1..] {
        let ff = ff as usize;
        let op = models[ff].next_op(seed, cfg);
        clock.advance(1);
        if let Err(e) = execute(&store, seed, ff as u32, models[ff].applied, &op) {
            tally.fail(format!("{ctx}: after reopening, {} failed: {e}", op.kind()));
            return tally;
        }
        models[ff].apply(seed, &op);
    }
    verify_all(&store, &storage, seed, &models, &ctx, &mut tally);
    let _ = store.close();
    if let Place::Memory(m) = &place {
        check(m, &ctx, &mut tally);
    } else if let Ok(s) = place.storage() {
        tally.integrity_checks += 1;
        match crate::check::check_storage(s, crate::exec::PAGE_SIZE) {
            Ok(r) if r.is_ok() => {}
            Ok(r) => tally.fail(format!("{ctx}: integrity check: {r}")),
            Err(e) => tally.fail(format!("{ctx}: integrity check could not run: {e}")),
        }
    }
    tally
}

/// After a clean close whose fsync failed: power loss (memory), reopen, and every family
/// holds exactly its acknowledged operations.
#[allow(clippy::too_many_arguments)]
fn after_failed_close(
    place: &Place,
    faults: &FaultInjector,
    seed: u64,
    k: u64,
    models: &[FamilyModel],
    ctx: &str,
    clock: &ManualClock,
    tally: &mut Tally,
) {
    let ctx = format!("{ctx} (during the clean close)");
    faults.clear();
    if let Place::Memory(m) = place {
        let report = m.crash(CrashPolicy::Random(RandomCrash::new(mix(
            seed,
            &[k, 0x4643],
        ))));
        tally.crash.add(&report);
    }
    clock.advance(1000);
    let (store, storage) = match place.open("reopen", None, clock) {
        Ok(opened) => opened,
        Err(e) => {
            tally.fail(format!("{ctx}: {e}"));
            return;
        }
    };
    verify_all(&store, &storage, seed, models, &ctx, tally);
    let _ = store.close();
    if let Place::Memory(m) = place {
        check(m, &ctx, tally);
    }
}

/// A fault burst: what it injects and the error kind it must surface as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Burst {
    WriteEio,
    ShortWrite,
    NoSpaceWrite,
    NoSpaceCreate,
    /// Reads cut short whose rest arrives when read again: nothing may fail.
    ShortRead,
    /// Reads cut short whose rest fails with EIO.
    ShortReadFail,
}

/// One run of the workload on memory with bursts of write EIO, short writes, ENOSPC and
/// short reads. Each failing operation must fail with the right kind, never poison the
/// store, and the operations after the burst must succeed; a short read that is continued
/// must fail nothing.
pub fn bursts(run_seed: u64, seed: u64, cfg: &WorkloadConfig) -> Tally {
    let mut tally = Tally::default();
    let ctx = format!("seed {seed}: fault bursts (run seed {run_seed})");
    let faults = FaultInjector::new();
    let mem = MemoryStorage::with_faults(faults.clone());
    let storage: Arc<dyn Storage> = Arc::new(mem.clone());
    let clock = ManualClock::new(1_000_000);
    let store = match Store::open(memory_options(mem.clone(), &clock)) {
        Ok(s) => s,
        Err(e) => {
            tally.fail(format!("{ctx}: open failed: {e}"));
            return tally;
        }
    };
    let mut r = Rng::new(run_seed);
    let order = schedule(seed, cfg);
    let mut models: Vec<FamilyModel> = (0..cfg.families).map(FamilyModel::new).collect();
    let mut armed: Option<Burst> = None;
    let mut pos = 0;
    let mut retries = 0;
    let mut extra = 0usize;
    let trace = std::env::var_os("BOUGH_TRACE").is_some();
    while pos < order.len() {
        // A retry after a cleared fault runs with no fault armed: it must succeed.
        if armed.is_none() && retries == 0 && r.chance(15) {
            let burst = match r.below(6) {
                0 => Burst::WriteEio,
                1 => Burst::ShortWrite,
                2 => Burst::NoSpaceWrite,
                3 => Burst::NoSpaceCreate,
                4 => Burst::ShortRead,
                _ => Burst::ShortReadFail,
            };
            let skip = r.below(6);
            let count = r.range(1, 4);
            match burst {
                Burst::WriteEio => faults.fail_after(FaultOp::Write, skip, libc::EIO, count),
                Burst::ShortWrite => faults.short_writes_next(count),
                Burst::NoSpaceWrite => faults.fail_after(FaultOp::Write, skip, libc::ENOSPC, count),
                Burst::NoSpaceCreate => {
                    faults.fail_after(FaultOp::Create, skip, libc::ENOSPC, count)
                }
                Burst::ShortRead => faults.short_reads_after(skip, count, None),
                Burst::ShortReadFail => faults.short_reads_after(skip, count, Some(libc::EIO)),
            }
            armed = Some(burst);
            if trace {
                eprintln!("trace: arm {burst:?} skip {skip} count {count}");
            }
        }
        let f = order[pos] as usize;
        let op = models[f].next_op(seed, cfg);
        clock.advance(1);
        let fired_before = faults.fired();
        let result = execute(&store, seed, f as u32, models[f].applied, &op);
        if trace {
            eprintln!(
                "trace: family {f} op {} {op:?}: {:?}",
                models[f].applied,
                result.as_ref().err().map(|e| e.to_string())
            );
        }
        match result {
            Ok(()) => {
                models[f].apply(seed, &op);
                pos += 1;
                retries = 0;
                // Short reads may fire inside an operation that still succeeds (continued,
                // or a failed read the operation could do without): counted here, and the
                // burst ends once its plan is used up.
                let fired = faults.fired() - fired_before;
                match armed {
                    Some(Burst::ShortRead) => tally.short_reads += fired,
                    Some(Burst::ShortReadFail) => tally.short_reads_failed += fired,
                    _ => {}
                }
                if matches!(armed, Some(Burst::ShortRead | Burst::ShortReadFail))
                    && faults.short_reads_pending() == 0
                {
                    armed = None;
                }
            }
            Err(e) => {
                let fired = faults.fired() - fired_before;
                let burst = armed.take();
                let want = match burst {
                    Some(Burst::NoSpaceWrite | Burst::NoSpaceCreate) => ErrorKind::NoSpace,
                    _ => ErrorKind::Io,
                };
                match burst {
                    Some(Burst::WriteEio) => tally.eio_write += fired,
                    Some(Burst::ShortWrite) => tally.short_writes += fired,
                    Some(Burst::ShortRead) => tally.short_reads += fired,
                    Some(Burst::ShortReadFail) => tally.short_reads_failed += fired,
                    Some(_) => tally.enospc += fired,
                    None => {}
                }
                if burst.is_none()
                    || burst == Some(Burst::ShortRead)
                    || fired == 0
                    || e.kind() != want
                {
                    tally.fail(format!(
                        "{ctx}: {} (family {f} op {}) failed with {:?} ({e}); expected {:?} from {:?}",
                        op.kind(),
                        models[f].applied,
                        e.kind(),
                        want,
                        burst
                    ));
                    break;
                }
                // Space freed / device healthy again: no reopen, the next operations work.
                faults.clear();
                let Some(m) = resolve(
                    &Reader {
                        store: &store,
                        storage: &storage,
                        seed,
                    },
                    &models[f],
                    &op,
                    &ctx,
                    &mut tally,
                    true,
                ) else {
                    break;
                };
                if m.applied > models[f].applied {
                    tally.ambiguous += 1;
                    pos += 1;
                    models[f] = m;
                } else {
                    // Before the retry, an unrelated write on the branch the failed
                    // operation touched: whatever the failure left staged in its head must
                    // not ride along.
                    models[f] = m;
                    extra += 1;
                    let branch = match &op {
                        Op::Write { branch, .. }
                        | Op::Archive { branch }
                        | Op::NewTerm { branch }
                        | Op::Compact { branch }
                        | Op::Rehome { branch }
                        | Op::Restore { branch, .. }
                        | Op::PruneArchives { branch, .. }
                        | Op::BranchFromArchive { branch, .. } => branch.clone(),
                        Op::Merge { target, .. } => target.clone(),
                        Op::CreateBranch { from, .. } => from.clone(),
                        Op::DeleteBranch { .. } | Op::Gc => "main".to_string(),
                    };
                    if models[f].branches.contains_key(&branch) {
                        let keys = [r.below(u64::from(cfg.keys)) as u32];
                        let tag = EXTRA_OPS + extra;
                        let mut b = WriteBatch::new();
                        b.put(key(keys[0]), value(seed, f as u32, tag, &branch, keys[0]));
                        clock.advance(1);
                        if trace {
                            eprintln!("trace: extra write on {branch}");
                        }
                        let written = store
                            .partition(TABLE, f as u32)
                            .and_then(|p| p.branch(&branch))
                            .and_then(|b2| b2.write_blocking(b));
                        if let Err(e) = written {
                            tally.fail(format!(
                                "{ctx}: a write on {branch} after the cleared fault failed: {e}"
                            ));
                            break;
                        }
                        models[f].extra_write(seed, &branch, &keys, tag);
                    }
                }
                retries += 1;
                if retries > 1 {
                    tally.fail(format!(
                        "{ctx}: {} (family {f} op {}) failed again after the fault was cleared: {e}",
                        op.kind(),
                        models[f].applied
                    ));
                    break;
                }
            }
        }
    }
    faults.clear();
    // Every read of the final check may be cut short (and continued): still exact.
    let fired_before = faults.fired();
    faults.short_reads_after(r.below(3), u64::MAX, None);
    let ok = verify_all(&store, &storage, seed, &models, &ctx, &mut tally);
    faults.clear();
    tally.short_reads += faults.fired() - fired_before;
    let _ = store.close();
    if !ok {
        return tally;
    }
    // Everything acknowledged is durable.
    if trace {
        let (keep, _) = mem.crash_image(CrashPolicy::KeepAllUnsynced);
        let (drop, _) = mem.crash_image(CrashPolicy::DropAllUnsynced);
        for d in keep.list_dirs().unwrap_or_default() {
            for n in keep.list(&d).unwrap_or_default() {
                let p = format!("{d}/{n}");
                let a = keep.read_file(&p, 1 << 32).ok();
                let b = drop.read_file(&p, 1 << 32).ok();
                if a != b {
                    eprintln!(
                        "trace: unsynced: {p}: {:?} vs durable {:?} bytes",
                        a.map(|x| x.len()),
                        b.map(|x| x.len())
                    );
                }
            }
        }
    }
    if trace {
        for d in mem.list_dirs().unwrap_or_default() {
            for n in mem.list(&d).unwrap_or_default() {
                if n.starts_with("manifest_") {
                    let p = format!("{d}/{n}");
                    let bytes = mem.read_file(&p, 1 << 32).unwrap_or_default();
                    let r = bough_manifest::replay(&bytes);
                    eprintln!(
                        "trace: {p}: {} bytes, {:?}",
                        bytes.len(),
                        r.as_ref()
                            .map(|r| (r.records, r.state.last_seq, r.end_offset, r.dropped_tail))
                            .map_err(|e| e.to_string())
                    );
                }
            }
        }
    }
    mem.crash(CrashPolicy::DropAllUnsynced);
    clock.advance(1000);
    match Store::open(memory_options(mem.clone(), &clock)) {
        Ok(store) => {
            verify_all(
                &store,
                &storage,
                seed,
                &models,
                &format!("{ctx} after power loss"),
                &mut tally,
            );
            let _ = store.close();
        }
        Err(e) => tally.fail(format!("{ctx}: reopen failed: {e}")),
    }
    check(&mem, &ctx, &mut tally);
    tally
}

/// One run on local files (`backend`: pread or io_uring) under short reads.
///
/// 1. The workload runs with reads cut short at random (the rest arrives when read again):
///    every operation must succeed.
/// 2. Reopened cold, every read at risk of being cut short and continued: every family
///    matches its model exactly.
/// 3. Reopened cold a few times with one read (at a random point) cut short and its rest
///    failed: reading a family either matches its model or fails with `Io`, and once the
///    fault is gone the same store reads it exactly (nothing half-read was kept).
/// 4. The integrity checker passes.
pub fn short_reads_local(
    run_seed: u64,
    seed: u64,
    cfg: &WorkloadConfig,
    backend: Backend,
) -> Tally {
    let mut tally = Tally::default();
    let ctx = format!("seed {seed}: short reads on {backend:?} (run seed {run_seed})");
    if backend == Backend::IoUring && !crate::kill::uring_available() {
        eprintln!("!!! {ctx}: io_uring is unavailable here; this run is SKIPPED");
        return tally;
    }
    let dir = match tempfile::Builder::new()
        .prefix("bough-shortread-")
        .tempdir()
    {
        Ok(d) => d,
        Err(e) => {
            tally.fail(format!("{ctx}: no temporary directory: {e}"));
            return tally;
        }
    };
    let place = Place::Local(dir, backend);
    let faults = FaultInjector::new();
    let clock = ManualClock::new(1_000_000);
    let mut r = Rng::new(run_seed);
    let (store, storage) = match place.open("open", Some(&faults), &clock) {
        Ok(opened) => opened,
        Err(e) => {
            tally.fail(format!("{ctx}: {e}"));
            return tally;
        }
    };
    let order = schedule(seed, cfg);
    let mut models: Vec<FamilyModel> = (0..cfg.families).map(FamilyModel::new).collect();
    let fired_before = faults.fired();
    for &f in &order {
        if faults.short_reads_pending() == 0 {
            faults.short_reads_after(r.below(8), r.range(1, 6), None);
        }
        let f = f as usize;
        let op = models[f].next_op(seed, cfg);
        clock.advance(1);
        if let Err(e) = execute(&store, seed, f as u32, models[f].applied, &op) {
            tally.fail(format!(
                "{ctx}: {} (family {f} op {}) failed under continued short reads: {e}",
                op.kind(),
                models[f].applied
            ));
            let _ = store.close();
            return tally;
        }
        models[f].apply(seed, &op);
    }
    faults.clear();
    let _ = store.close();
    tally.short_reads += faults.fired() - fired_before;
    // Cold, every read cut short and continued.
    let reopen = |tally: &mut Tally| match Store::open(place.options(Some(&faults), &clock)) {
        Ok(s) => Some(s),
        Err(e) => {
            tally.fail(format!("{ctx}: reopen failed: {e}"));
            None
        }
    };
    let fired_before = faults.fired();
    faults.short_reads_after(0, u64::MAX, None);
    let Some(store) = reopen(&mut tally) else {
        return tally;
    };
    let ok = verify_all(&store, &storage, seed, &models, &ctx, &mut tally);
    faults.clear();
    tally.short_reads += faults.fired() - fired_before;
    let _ = store.close();
    if !ok {
        return tally;
    }
    // Cold, one read's rest failing at a random point.
    for round in 0..3 {
        let Some(store) = reopen(&mut tally) else {
            return tally;
        };
        let fired_before = faults.fired();
        faults.short_reads_after(r.below(40), 1, Some(libc::EIO));
        for m in &models {
            match verify_family(&store, &storage, seed, m.family, std::slice::from_ref(m)) {
                Verdict::Match(_) => {}
                Verdict::Error(e) if e.kind() == ErrorKind::Io => {}
                Verdict::Error(e) => tally.fail(format!(
                    "{ctx}: round {round}: a failed short read of family {} surfaced as {:?}: {e}",
                    m.family,
                    e.kind()
                )),
                Verdict::Mismatch {
                    detail,
                    lost,
                    wrong,
                } => {
                    tally.mismatch(lost, wrong, format!(
                        "{ctx}: round {round}: with a failed short read, family {} read: {detail}",
                        m.family
                    ));
                }
            }
        }
        faults.clear();
        tally.short_reads_failed += faults.fired() - fired_before;
        // The same store, the fault gone: exact (a half-read page was never cached).
        let ok = verify_all(&store, &storage, seed, &models, &ctx, &mut tally);
        let _ = store.close();
        if !ok {
            return tally;
        }
    }
    tally.integrity_checks += 1;
    match crate::check::check_storage(storage, crate::exec::PAGE_SIZE) {
        Ok(rep) if rep.is_ok() => {}
        Ok(rep) => tally.fail(format!("{ctx}: integrity check: {rep}")),
        Err(e) => tally.fail(format!("{ctx}: integrity check could not run: {e}")),
    }
    tally
}
