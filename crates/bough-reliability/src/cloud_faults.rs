//! Object-store faults: the multi-branch workload on a store in cloud mode
//! (`Store` → [`CloudStorage`] → [`FaultyObjectStore`] → [`MemoryObjectStore`]) while the
//! object store misbehaves the way real ones do:
//!
//! - **5xx storms** and **429 throttling** on any request kind (get, head, put,
//!   put-if-absent, put-if-match, list, delete);
//! - **timeouts after apply**: a write (or delete) the store carried out, answered with a
//!   timeout, so the client cannot tell it landed;
//! - **cut-off reads**: a body (whole object or range) that ends early, reported as success
//!   by the transport.
//!
//! Each fault is planned for one operation at a random point (after a few matching requests
//! pass) and lasts one to `retry_attempts + 2` requests, so some are absorbed by the retries
//! and some outlast them. Then:
//!
//! - an operation that succeeded is acknowledged, whatever fired inside it;
//! - an operation that failed must fail with `Io` (retries ran out), may or may not have
//!   taken effect (a timeout after apply), but never partly;
//! - after every fault the store is closed and reopened **from an empty cache** (so every
//!   byte comes from the object store) and each family is read back: the failed operation
//!   resolves to "before" or "after", everything acknowledged is there, no value is wrong.
//!   Half of these read-backs run under a read fault themselves: they must read exactly or,
//!   if the fault outlasts the retries, fail with `Io` — and read exactly once it is gone;
//! - the workload goes on on the reopened store (a new owner: it takes the branches over);
//! - at the end, a last cold reopen, the model check and the integrity checker over the
//!   objects.
//!
//! `BOUGH_TRACE=1` prints each operation and the fault planned for it.

use std::sync::Arc;

use bough::io::Storage;
use bough::object::{
    CloudConfig, CloudStorage, Fault, FaultyObjectStore, MemoryObjectStore, ObjOp, ObjectStore,
    RetryPolicy,
};
use bough::{ErrorKind, ManualClock, Options, Store};

use crate::exec::{Verdict, execute, tune, verify_family};
use crate::faults::{Reader, resolve, verify_all};
use crate::power::schedule;
use crate::report::{Tally, guarded};
use crate::rng::{Rng, mix};
use crate::workload::{FamilyModel, Op, WorkloadConfig};

/// How much the object-store stage does.
#[derive(Debug, Clone, Copy)]
pub struct ObjectFaultConfig {
    /// The workload each run executes.
    pub workload: WorkloadConfig,
    /// Runs (each its own object store, cache budget and fault plan).
    pub runs: u64,
    /// Chance (percent) that an operation runs with a fault planned.
    pub fault_percent: u64,
    /// Attempts the cloud tier makes per request (its retry policy).
    pub retry_attempts: u32,
}

impl ObjectFaultConfig {
    /// CI size.
    pub fn short() -> Self {
        ObjectFaultConfig {
            workload: WorkloadConfig {
                families: 2,
                ops_per_family: 40,
                keys: 40,
                max_branches: 5,
            },
            runs: 60,
            fault_percent: 40,
            retry_attempts: 4,
        }
    }

    /// Long size.
    pub fn long() -> Self {
        ObjectFaultConfig {
            workload: WorkloadConfig {
                families: 3,
                ops_per_family: 60,
                keys: 48,
                max_branches: 5,
            },
            runs: 200,
            fault_percent: 40,
            retry_attempts: 4,
        }
    }
}

/// The class of an injected fault (one table row each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    ServerError,
    Throttled,
    TimeoutAfterApply,
    CutOffRead,
}

/// Every request kind.
const ALL_OPS: [ObjOp; 7] = [
    ObjOp::Get,
    ObjOp::Head,
    ObjOp::Put,
    ObjOp::PutIfAbsent,
    ObjOp::PutIfMatch,
    ObjOp::List,
    ObjOp::Delete,
];

/// The request kinds that change objects.
const WRITE_OPS: [ObjOp; 4] = [
    ObjOp::Put,
    ObjOp::PutIfAbsent,
    ObjOp::PutIfMatch,
    ObjOp::Delete,
];

/// The request kinds that only read.
const READ_OPS: [ObjOp; 3] = [ObjOp::Get, ObjOp::Head, ObjOp::List];

/// A fault planned for one operation: the same fault on each of `ops` (request kinds).
#[derive(Debug, Clone)]
struct Plan {
    class: Class,
    ops: Vec<ObjOp>,
    fault: Fault,
    skip: u64,
    count: u64,
}

impl Plan {
    /// A random fault of any class, for an operation of the workload.
    fn any(r: &mut Rng, attempts: u32) -> Plan {
        let class = match r.below(4) {
            0 => Class::ServerError,
            1 => Class::Throttled,
            2 => Class::TimeoutAfterApply,
            _ => Class::CutOffRead,
        };
        let ops = match class {
            Class::ServerError | Class::Throttled => some_of(r, &ALL_OPS),
            Class::TimeoutAfterApply => some_of(r, &WRITE_OPS),
            Class::CutOffRead => vec![ObjOp::Get],
        };
        Self::build(r, class, ops, attempts)
    }

    /// A random fault of read requests (for a read-back).
    fn read(r: &mut Rng, attempts: u32) -> Plan {
        let class = match r.below(3) {
            0 => Class::ServerError,
            1 => Class::Throttled,
            _ => Class::CutOffRead,
        };
        let ops = match class {
            Class::CutOffRead => vec![ObjOp::Get],
            _ => some_of(r, &READ_OPS),
        };
        Self::build(r, class, ops, attempts)
    }

    fn build(r: &mut Rng, class: Class, ops: Vec<ObjOp>, attempts: u32) -> Plan {
        let fault = match class {
            Class::ServerError => Fault::Status(*r.pick(&[500, 502, 503]).unwrap_or(&503)),
            Class::Throttled => Fault::Status(429),
            Class::TimeoutAfterApply => Fault::TimeoutAfter,
            Class::CutOffRead => Fault::ShortRead,
        };
        // Mostly absorbed by the retries; one in three outlasts them.
        let count = if r.chance(33) {
            r.range(u64::from(attempts), u64::from(attempts) + 3)
        } else {
            r.range(1, u64::from(attempts))
        };
        Plan {
            class,
            ops,
            fault,
            // An operation makes only a few requests of each kind: strike early.
            skip: r.below(3),
            count,
        }
    }

    fn arm(&self, faulty: &FaultyObjectStore) {
        for &op in &self.ops {
            faulty.plan(op, None, self.skip, self.fault, self.count);
        }
    }

    /// Whether the fault outlasts the retries of one request.
    fn outlasts(&self, attempts: u32) -> bool {
        self.count >= u64::from(attempts)
    }
}

/// One of `kinds` (most of the time) or all of them (a storm on every request).
fn some_of(r: &mut Rng, kinds: &[ObjOp]) -> Vec<ObjOp> {
    if r.chance(30) {
        kinds.to_vec()
    } else {
        r.pick(kinds).map(|k| vec![*k]).unwrap_or_default()
    }
}

fn count(tally: &mut Tally, class: Class, fired: u64) {
    match class {
        Class::ServerError => tally.obj_5xx += fired,
        Class::Throttled => tally.obj_429 += fired,
        Class::TimeoutAfterApply => tally.obj_timeouts_after += fired,
        Class::CutOffRead => tally.obj_cut_reads += fired,
    }
}

/// Runs the stage.
pub fn run(seed: u64, cfg: &ObjectFaultConfig) -> Tally {
    guarded("object-store faults", || {
        let mut tally = Tally::default();
        for i in 0..cfg.runs {
            let t = guarded(&format!("object-store faults run {i}"), || {
                run_one(mix(seed, &[i, 0x4f42]), seed, cfg)
            });
            tally.merge(&t);
        }
        tally
    })
}

/// One object store and the stores (one per open) that use it.
pub(crate) struct Cloud {
    pub(crate) mem: MemoryObjectStore,
    pub(crate) faulty: FaultyObjectStore,
    pub(crate) clock: ManualClock,
    pub(crate) cache_bytes: u64,
    /// Page-granular reads' range size (0: whole objects).
    pub(crate) range_read_bytes: u64,
    pub(crate) attempts: u32,
    pub(crate) run_seed: u64,
    pub(crate) opens: u64,
}

impl Cloud {
    fn config(&self) -> CloudConfig {
        CloudConfig {
            cache_bytes: self.cache_bytes,
            range_read_bytes: self.range_read_bytes,
            min_delete_age_ms: 0,
            // No backoff sleeps: the harness injects the failures, waiting proves nothing.
            retry: RetryPolicy {
                attempts: self.attempts,
                base_delay_ms: 0,
                max_delay_ms: 0,
            },
            // Writer tokens from the run seed, so a run replays.
            writer_id: mix(self.run_seed, &[self.opens, 0x5754]) | 1,
            ..CloudConfig::default()
        }
    }

    /// Opens a store on `objects` (a wrapper of [`Cloud::mem`]) with a new, empty cache
    /// directory.
    fn open(
        &mut self,
        objects: Arc<dyn ObjectStore>,
    ) -> Result<(Store, tempfile::TempDir), String> {
        let dir = cache_dir("bough-cloud-")?;
        let o = Store::builder(tune(Options::new(dir.path())).object(self.config()))
            .object_store(objects)
            .clock(Arc::new(self.clock.clone()));
        self.opens += 1;
        let store = Store::open(o).map_err(|e| format!("open (from an empty cache): {e}"))?;
        Ok((store, dir))
    }

    /// A fault-free view of the objects for the checker's readers (archives, merge bases,
    /// integrity), with its own empty cache.
    fn reader(&self) -> Result<(Arc<dyn Storage>, tempfile::TempDir), String> {
        let dir = cache_dir("bough-cloud-check-")?;
        let clock = self.clock.clone();
        // A roomy cache: the checker is not under test, and re-downloading every object
        // per page read would only make the run slow.
        let cfg = CloudConfig {
            cache_bytes: 256 << 20,
            ..self.config()
        };
        let s = CloudStorage::open(
            Arc::new(self.mem.clone()),
            dir.path(),
            &cfg,
            Some(Arc::new(move || bough::Clock::now_ms(&clock))),
        )
        .map_err(|e| format!("checker storage: {e}"))?;
        Ok((Arc::new(s), dir))
    }
}

/// A new, empty cache directory: on tmpfs (`/dev/shm`) where there is one. The local cache
/// is not under test here, and it syncs every object it keeps: on a disk other jobs share,
/// those syncs made a run twenty to fifty times slower than the work it checks.
fn cache_dir(prefix: &str) -> Result<tempfile::TempDir, String> {
    let mut b = tempfile::Builder::new();
    b.prefix(prefix);
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(d) = b.tempdir_in(shm)
    {
        return Ok(d);
    }
    b.tempdir()
        .map_err(|e| format!("no temporary directory: {e}"))
}

/// A store open on the object store, its cache directory and a reader for the checker.
pub(crate) struct Opened {
    pub(crate) store: Store,
    pub(crate) reader: Arc<dyn Storage>,
    _cache: tempfile::TempDir,
    _reader_cache: tempfile::TempDir,
}

impl Opened {
    /// Opens a store on the faulty object store.
    fn new(cloud: &mut Cloud) -> Result<Opened, String> {
        let faulty = Arc::new(cloud.faulty.clone());
        Self::on(cloud, faulty)
    }

    /// Opens a store on `objects` (a wrapper of [`Cloud::mem`]).
    pub(crate) fn on(cloud: &mut Cloud, objects: Arc<dyn ObjectStore>) -> Result<Opened, String> {
        let (store, cache) = cloud.open(objects)?;
        let (reader, reader_cache) = cloud.reader()?;
        Ok(Opened {
            store,
            reader,
            _cache: cache,
            _reader_cache: reader_cache,
        })
    }
}

/// One run: the workload under faults, a cold reopen and check after each.
pub fn run_one(run_seed: u64, seed: u64, cfg: &ObjectFaultConfig) -> Tally {
    let mut tally = Tally::default();
    let mut r = Rng::new(run_seed);
    let cache_bytes = *r.pick(&[0, 64 << 10, 8 << 20]).unwrap_or(&0);
    // Drawn apart from `r`, so the runs recorded before ranges replay as they did.
    let range_read_bytes = [0, 4 << 10, 256 << 10][(mix(run_seed, &[0x5241_4e47]) % 3) as usize];
    let ctx = format!(
        "seed {seed}: object-store faults (run seed {run_seed}, cache {} KiB, ranges {} KiB)",
        cache_bytes >> 10,
        range_read_bytes >> 10
    );
    let trace = std::env::var_os("BOUGH_TRACE").is_some();
    let mem = MemoryObjectStore::new();
    let mut cloud = Cloud {
        faulty: FaultyObjectStore::new(Arc::new(mem.clone())),
        mem,
        clock: ManualClock::new(1_700_000_000_000),
        cache_bytes,
        range_read_bytes,
        attempts: cfg.retry_attempts,
        run_seed,
        opens: 0,
    };
    let mut at = match Opened::new(&mut cloud) {
        Ok(o) => o,
        Err(e) => {
            tally.fail(format!("{ctx}: {e}"));
            return tally;
        }
    };
    let w = &cfg.workload;
    let order = schedule(seed, w);
    let mut models: Vec<FamilyModel> = (0..w.families).map(FamilyModel::new).collect();
    let mut pos = 0;
    let mut retries = 0;
    while pos < order.len() {
        let f = order[pos] as usize;
        let op = models[f].next_op(seed, w);
        // The retry of an operation that failed and did not take effect runs without a
        // fault: it must succeed.
        let plan = (retries == 0 && r.chance(cfg.fault_percent))
            .then(|| Plan::any(&mut r, cfg.retry_attempts));
        if let Some(p) = &plan {
            p.arm(&cloud.faulty);
        }
        let fired_before = cloud.faulty.fired();
        cloud.clock.advance(1);
        let result = execute(&at.store, seed, f as u32, models[f].applied, &op);
        cloud.faulty.clear();
        let fired = cloud.faulty.fired() - fired_before;
        if trace {
            eprintln!(
                "trace: family {f} op {} {op:?} under {plan:?} ({fired} fired): {:?}",
                models[f].applied,
                result.as_ref().err().map(ToString::to_string)
            );
        }
        if let Some(p) = &plan {
            count(&mut tally, p.class, fired);
        }
        let failed = match result {
            Ok(()) => {
                models[f].apply(seed, &op);
                pos += 1;
                retries = 0;
                if fired == 0 {
                    continue;
                }
                false
            }
            // A GC that failed mid-run (or a store closed after a fault) leaves the
            // partition's GC lease to expire: until then GC is refused with `Busy`, the
            // documented answer to "another process collects here". GC changes nothing the
            // model sees, so the workload goes on.
            Err(e) if matches!(op, Op::Gc) && e.kind() == ErrorKind::Busy => {
                tally.obj_gc_busy += 1;
                pos += 1;
                retries = 0;
                if fired == 0 {
                    continue;
                }
                false
            }
            Err(e) => {
                if plan.is_none() || fired == 0 || e.kind() != ErrorKind::Io {
                    tally.fail(format!(
                        "{ctx}: {} (family {f} op {}) failed with {:?} ({e}) under {plan:?} \
                         ({fired} fired); expected Io once retries run out",
                        op.kind(),
                        models[f].applied,
                        e.kind()
                    ));
                    break;
                }
                tally.obj_failed_ops += 1;
                true
            }
        };
        // A fault fired: reopen from an empty cache and read everything back.
        let _ = at.store.close();
        cloud.clock.advance(1000);
        at = match Opened::new(&mut cloud) {
            Ok(o) => o,
            Err(e) => {
                tally.fail(format!("{ctx}: after {} (family {f}): {e}", op.kind()));
                return tally;
            }
        };
        tally.obj_cold_reopens += 1;
        if failed {
            let reader = Reader {
                store: &at.store,
                storage: &at.reader,
                seed,
            };
            let Some(m) = resolve(&reader, &models[f], &op, &ctx, &mut tally, true) else {
                break;
            };
            if m.applied > models[f].applied {
                tally.obj_ambiguous += 1;
                pos += 1;
                retries = 0;
            } else {
                // Not applied: the same operation runs again, fault-free, on the reopened
                // store (a failure there is reported above).
                retries += 1;
            }
            models[f] = m;
        }
        if !read_back(&at, &cloud, &mut r, cfg, seed, &models, &ctx, &mut tally) {
            break;
        }
    }
    let _ = at.store.close();
    if tally.failures.is_empty() {
        final_check(&mut cloud, seed, &models, &ctx, &mut tally);
    }
    tally
}

/// The end of a run: a cold reopen (on the faulty store, nothing planned), the model check
/// and the integrity checker over the objects — cold, exact, and well-formed.
pub(crate) fn final_check(
    cloud: &mut Cloud,
    seed: u64,
    models: &[FamilyModel],
    ctx: &str,
    tally: &mut Tally,
) {
    cloud.clock.advance(1000);
    let at = match Opened::new(cloud) {
        Ok(o) => o,
        Err(e) => {
            tally.fail(format!("{ctx}: final reopen: {e}"));
            return;
        }
    };
    tally.obj_cold_reopens += 1;
    verify_all(&at.store, &at.reader, seed, models, ctx, tally);
    let _ = at.store.close();
    tally.integrity_checks += 1;
    match crate::check::check_storage(at.reader.clone()) {
        Ok(rep) if rep.is_ok() => {}
        Ok(rep) => tally.fail(format!("{ctx}: integrity check: {rep}")),
        Err(e) => tally.fail(format!("{ctx}: integrity check could not run: {e}")),
    }
}

/// Reads every family of a freshly reopened store back, half the time under a read fault
/// (exact, or `Io` when the fault outlasts the retries), then without one (exact).
#[allow(clippy::too_many_arguments)]
fn read_back(
    at: &Opened,
    cloud: &Cloud,
    r: &mut Rng,
    cfg: &ObjectFaultConfig,
    seed: u64,
    models: &[FamilyModel],
    ctx: &str,
    tally: &mut Tally,
) -> bool {
    if r.chance(50) {
        let plan = Plan::read(r, cfg.retry_attempts);
        plan.arm(&cloud.faulty);
        let fired_before = cloud.faulty.fired();
        for m in models {
            let verdict = verify_family(
                &at.store,
                &at.reader,
                seed,
                m.family,
                std::slice::from_ref(m),
            );
            if std::env::var_os("BOUGH_TRACE").is_some() {
                eprintln!(
                    "trace: read-back of family {} under {plan:?}: {verdict:?}",
                    m.family
                );
            }
            match verdict {
                Verdict::Match(_) => {}
                Verdict::Error(e)
                    if e.kind() == ErrorKind::Io && plan.outlasts(cfg.retry_attempts) =>
                {
                    tally.obj_reads_refused += 1;
                }
                Verdict::Error(e) => tally.fail(format!(
                    "{ctx}: reading family {} under {plan:?} failed with {:?}: {e}",
                    m.family,
                    e.kind()
                )),
                Verdict::Mismatch {
                    detail,
                    lost,
                    wrong,
                } => {
                    tally.mismatch(
                        lost,
                        wrong,
                        format!("{ctx}: family {} read under {plan:?}: {detail}", m.family),
                    );
                }
            }
        }
        cloud.faulty.clear();
        count(tally, plan.class, cloud.faulty.fired() - fired_before);
    }
    verify_all(&at.store, &at.reader, seed, models, ctx, tally)
}
