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
use bough::{Backend, ErrorKind, ManualClock, Options, Store, StoreBuilder, WriteBatch};

use crate::exec::{Verdict, execute, tune, verify_family, verify_family_with};
use crate::power::{check, count_sync_points, memory_options, schedule};
use crate::report::{Tally, guarded};
use crate::rng::{Rng, mix};
use crate::workload::{EXTRA_OPS, FamilyModel, Op, TABLE, WorkloadConfig, key, value};

mod bursts;
mod fsync;
mod short_reads;

pub use bursts::bursts;
pub use fsync::fsync_eio;
pub use short_reads::short_reads_local;

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
    fn options(&self, faults: Option<&FaultInjector>, clock: &ManualClock) -> StoreBuilder {
        match self {
            Place::Memory(m) => memory_options(m.clone(), clock),
            Place::Local(d, backend) => {
                let o = Store::builder(tune(Options::new(d.path())).backend(*backend))
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
