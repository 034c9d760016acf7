//! Object-store crashes: the multi-branch workload in cloud mode while the process dies at
//! an arbitrary request. Each process reaches the [`MemoryObjectStore`] through its own
//! [`Cut`]; a crash arms it to let `k` more requests through (`k` below 3 half the time,
//! else up to [`MAX_K`]) and refuse every later one, so whatever the process sends after that —
//! the rest of the operation, the shutdown of the dropped `Store` — never reaches the store,
//! as for a process that died. Then:
//!
//! - a new process opens the store from an empty cache (taking every branch over at a new
//!   term) and reads every family back: an operation acknowledged before the crash is
//!   there, the one in flight is wholly there or not at all, no value is wrong. Its error
//!   is not judged (the process was dying), and one found not applied runs again, with no
//!   crash, on the new process;
//! - one operation in ten, the process also dies *between* operations, so the new process
//!   takes over quiet branches whose commits wait in the write buffer (replayed from the
//!   log, then fenced);
//! - one crash in [`ZOMBIE_ONE_IN`] leaves a *zombie*: the old process was only cut off.
//!   After the new process has taken its branches over (by reading them), the old one can
//!   talk to the store again and writes through a branch handle it still held: the write
//!   must fail (the fence, or the poison of its crash), and no process may see it;
//! - at the end, a cold reopen, the model check and the integrity checker.
//!
//! `BOUGH_TRACE=1` prints each operation and the crash planned for it.

use std::sync::Arc;

use bough::object::{CloudConfig, FaultyObjectStore, MemoryObjectStore};
use bough::{Branch, ErrorKind, ManualClock, WriteBatch};

use crate::cloud_faults::{Cloud, Opened, final_check};
use crate::exec::execute;
use crate::faults::{Reader, resolve, verify_all};
use crate::power::schedule;
use crate::report::{Tally, guarded};
use crate::rng::{Rng, mix};
use crate::workload::{FamilyModel, Op, TABLE, WorkloadConfig};

mod cut;

use cut::Cut;

/// How much the object-store crash stage does.
#[derive(Debug, Clone, Copy)]
pub struct ObjectCrashConfig {
    /// The workload each run executes.
    pub workload: WorkloadConfig,
    /// Runs (each its own object store, cache budget and crash points).
    pub runs: u64,
    /// Chance (percent) that an operation runs with a crash planned inside it.
    pub crash_percent: u64,
    /// Whether a zombie may write through the branch whose `new_term` its crash cut short
    /// (on at every size since the head is poisoned when `open_new_term` fails: before,
    /// that write was acknowledged and lost; seed 14, run seed 12866462378825318986).
    pub zombie_after_new_term: bool,
}

impl ObjectCrashConfig {
    /// CI size.
    pub fn short() -> Self {
        ObjectCrashConfig {
            workload: WorkloadConfig {
                families: 2,
                ops_per_family: 40,
                keys: 40,
                max_branches: 5,
            },
            runs: 100,
            crash_percent: 20,
            zombie_after_new_term: true,
        }
    }

    /// Long size.
    pub fn long() -> Self {
        ObjectCrashConfig {
            workload: WorkloadConfig {
                families: 3,
                ops_per_family: 60,
                keys: 48,
                max_branches: 5,
            },
            runs: 400,
            crash_percent: 20,
            zombie_after_new_term: true,
        }
    }
}

/// Most requests an operation makes before its crash: a write makes a few, a checkpoint,
/// a merge or a GC a dozen or more, so later points fall on the larger operations.
const MAX_K: u64 = 12;

/// Chance (percent) that the process dies between two operations.
const BETWEEN_PERCENT: u64 = 10;

/// One crash in this many leaves a zombie.
const ZOMBIE_ONE_IN: u64 = 8;

/// The key of the zombie's write: no workload key (those are `k000`, `k001`, …).
const ZOMBIE_KEY: &[u8] = b"zombie";

/// Runs the stage.
pub fn run(seed: u64, cfg: &ObjectCrashConfig) -> Tally {
    guarded("object-store crashes", || {
        let mut tally = Tally::default();
        for i in 0..cfg.runs {
            let t = guarded(&format!("object-store crashes run {i}"), || {
                run_one(mix(seed, &[i, 0x4f43]), seed, cfg)
            });
            tally.merge(&t);
        }
        tally
    })
}

/// One run: the workload with crashes, a recovery and a check after each, and the final
/// check.
pub fn run_one(run_seed: u64, seed: u64, cfg: &ObjectCrashConfig) -> Tally {
    let mut s = Sweep::new(run_seed, seed, cfg);
    if let Some(p) = s.start("open").and_then(|p| s.workload(p)) {
        let _ = p.at.store.close();
    }
    if s.tally.failures.is_empty() {
        final_check(&mut s.cloud, seed, &s.models, &s.ctx, &mut s.tally);
    }
    s.tally
}

/// One process: the store it opened and its path to the objects.
struct Process {
    cut: Cut,
    at: Opened,
}

/// An old process kept alive after a crash, and a handle it holds on a branch.
struct Zombie {
    process: Process,
    branch: Branch,
    name: String,
}

/// What happened to an operation.
enum Outcome {
    /// Done; the workload moves on.
    Next,
    /// Not applied (the process died first): it runs again.
    Again,
}

/// A run in progress.
struct Sweep<'a> {
    cfg: &'a ObjectCrashConfig,
    seed: u64,
    ctx: String,
    r: Rng,
    cloud: Cloud,
    models: Vec<FamilyModel>,
    tally: Tally,
    trace: bool,
}

impl<'a> Sweep<'a> {
    fn new(run_seed: u64, seed: u64, cfg: &'a ObjectCrashConfig) -> Self {
        let mut r = Rng::new(run_seed);
        let cache_bytes = *r.pick(&[0, 64 << 10, 8 << 20]).unwrap_or(&0);
        let range_read_bytes = *r.pick(&[0, 4 << 10, 256 << 10]).unwrap_or(&0);
        let ctx = format!(
            "seed {seed}: object-store crashes (run seed {run_seed}, cache {} KiB, ranges {} KiB)",
            cache_bytes >> 10,
            range_read_bytes >> 10
        );
        let mem = MemoryObjectStore::new();
        let cloud = Cloud {
            // Nothing is planned on it: the final check reopens through it.
            faulty: FaultyObjectStore::new(Arc::new(mem.clone())),
            mem,
            clock: ManualClock::new(1_700_000_000_000),
            cache_bytes,
            range_read_bytes,
            // A crash is not transient: retries must not matter.
            attempts: 3,
            run_seed,
            opens: 0,
        };
        Sweep {
            cfg,
            seed,
            ctx,
            r,
            cloud,
            models: (0..cfg.workload.families).map(FamilyModel::new).collect(),
            tally: Tally::default(),
            trace: std::env::var_os("BOUGH_TRACE").is_some(),
        }
    }

    /// Starts a process: a store opened from an empty cache behind a new [`Cut`].
    fn start(&mut self, what: &str) -> Option<Process> {
        let cut = Cut::new(Arc::new(self.cloud.mem.clone()));
        match Opened::on(&mut self.cloud, Arc::new(cut.clone())) {
            Ok(at) => Some(Process { cut, at }),
            Err(e) => {
                self.tally.fail(format!("{}: {what}: {e}", self.ctx));
                None
            }
        }
    }

    /// Runs the schedule, crashing as planned; the process alive at the end, or `None`
    /// after a failure.
    fn workload(&mut self, mut p: Process) -> Option<Process> {
        let w = self.cfg.workload;
        let order = schedule(self.seed, &w);
        let (mut pos, mut again) = (0, false);
        while let Some(&f) = order.get(pos) {
            let f = f as usize;
            let op = self.models[f].next_op(self.seed, &w);
            // A retry runs undisturbed, so the workload always moves on.
            if !again && self.r.chance(BETWEEN_PERCENT) {
                p.cut.arm(0);
                self.tally.obj_crash_between += 1;
                let what = format!("crash before family {f} op {}", self.models[f].applied);
                p = self.recover(p, f, None, &what)?;
            }
            let k = (!again && self.r.chance(self.cfg.crash_percent)).then(|| self.crash_point());
            let (next, alive) = self.step(p, f, &op, k)?;
            p = alive;
            again = matches!(next, Outcome::Again);
            if !again {
                pos += 1;
            }
        }
        Some(p)
    }

    /// How many requests of the next operation pass before the process dies: half the
    /// time one of the first three (a write makes only a few), else up to [`MAX_K`].
    fn crash_point(&mut self) -> u64 {
        let bound = if self.r.chance(50) { 3 } else { MAX_K + 1 };
        self.r.below(bound)
    }

    /// Runs `op` of family `f`, the process dying after `k` requests when `k` is given;
    /// recovers when it died.
    fn step(
        &mut self,
        p: Process,
        f: usize,
        op: &Op,
        k: Option<u64>,
    ) -> Option<(Outcome, Process)> {
        if let Some(k) = k {
            p.cut.arm(k);
        }
        self.cloud.clock.advance(1);
        let index = self.models[f].applied;
        let result = execute(&p.at.store, self.seed, f as u32, index, op);
        let died = p.cut.fired();
        if self.trace {
            eprintln!(
                "trace: family {f} op {index} {op:?} crash after {k:?} (died: {died}): {:?}",
                result.as_ref().err().map(ToString::to_string)
            );
        }
        let what = format!(
            "crash after {} requests of family {f} op {index} ({})",
            k.unwrap_or_default(),
            op.kind()
        );
        match result {
            // Acknowledged, though the process may have died right after.
            Ok(()) => {
                self.models[f].apply(self.seed, op);
                self.after(p, f, None, &what)
            }
            // The error of a dying process is not judged: the read-back decides.
            Err(_) if died => self.after(p, f, Some(op), &what),
            // A GC that died mid-run leaves its lease to expire (see `cloud_faults`).
            Err(e) if matches!(op, Op::Gc) && e.kind() == ErrorKind::Busy => {
                self.tally.obj_gc_busy += 1;
                p.cut.disarm();
                Some((Outcome::Next, p))
            }
            Err(e) => {
                self.tally.fail(format!(
                    "{}: {} (family {f} op {index}) failed with {:?} ({e}) though the process \
                     was alive",
                    self.ctx,
                    op.kind(),
                    e.kind()
                ));
                None
            }
        }
    }

    /// After an operation: recovers if the process died (resolving `in_flight`), else
    /// disarms its cut (the crash point lay past the operation's last request).
    fn after(
        &mut self,
        p: Process,
        f: usize,
        in_flight: Option<&Op>,
        what: &str,
    ) -> Option<(Outcome, Process)> {
        if !p.cut.fired() {
            p.cut.disarm();
            return Some((Outcome::Next, p));
        }
        let before = self.models[f].applied;
        let p = self.recover(p, f, in_flight, what)?;
        let applied = self.models[f].applied > before;
        if in_flight.is_some() && applied {
            self.tally.obj_crash_applied += 1;
        }
        let next = if in_flight.is_some() && !applied {
            Outcome::Again
        } else {
            Outcome::Next
        };
        Some((next, p))
    }

    /// The process died (its cut fired or is armed at 0): a new one takes over from an
    /// empty cache; family `f` must be before or after `in_flight`, every family exact.
    /// One crash in [`ZOMBIE_ONE_IN`], the old process lives on as a zombie.
    fn recover(
        &mut self,
        old: Process,
        f: usize,
        in_flight: Option<&Op>,
        what: &str,
    ) -> Option<Process> {
        self.tally.obj_crashes += 1;
        let ctx = format!("{}: {what}", self.ctx);
        let zombie = if self.r.below(ZOMBIE_ONE_IN) == 0 {
            self.zombie(old, f, in_flight)
        } else {
            // Dropped, not closed: its shutdown's requests go nowhere.
            drop(old);
            None
        };
        // Half the restarts take longer than a GC lease: a GC the crash cut short then
        // runs again instead of being refused until its lease expires.
        let lease = CloudConfig::default().gc_lease_ms;
        self.cloud
            .clock
            .advance(*self.r.pick(&[1000, lease + 1]).unwrap_or(&1000));
        let new = self.start(&format!("{what}: reopen (from an empty cache)"))?;
        self.tally.obj_cold_reopens += 1;
        self.read_back(&new, f, in_flight, &ctx)?;
        match zombie {
            Some(z) => self.haunt(z, f, new, &ctx),
            None => Some(new),
        }
    }

    /// Reads every family back on the process that took over: family `f` before or after
    /// `in_flight` (the model follows), every other family exact.
    fn read_back(
        &mut self,
        p: &Process,
        f: usize,
        in_flight: Option<&Op>,
        ctx: &str,
    ) -> Option<()> {
        let (store, storage) = (&p.at.store, &p.at.reader);
        if let Some(op) = in_flight {
            let reader = Reader {
                store,
                storage,
                seed: self.seed,
            };
            self.models[f] = resolve(&reader, &self.models[f], op, ctx, &mut self.tally, true)?;
        }
        verify_all(
            store,
            storage,
            self.seed,
            &self.models,
            ctx,
            &mut self.tally,
        )
        .then_some(())
    }

    /// Keeps the dead process as a zombie if it still holds a branch of family `f` it can
    /// hand out without a request (an open one); drops it otherwise.
    fn zombie(&mut self, old: Process, f: usize, in_flight: Option<&Op>) -> Option<Zombie> {
        let names = zombie_branches(&self.models[f], in_flight, self.cfg);
        let first = self.r.below(names.len() as u64) as usize;
        let part = old.at.store.partition(TABLE, f as u32).ok()?;
        // Any branch may be the one the crash poisoned; starting at a random one, some
        // zombies write through a branch that only sat idle.
        let found = (0..names.len())
            .map(|i| names[(first + i) % names.len()])
            .find_map(|n| part.branch(n).ok().map(|b| (n.clone(), b)));
        drop(part);
        let (name, branch) = found?;
        Some(Zombie {
            process: old,
            branch,
            name,
        })
    }

    /// The zombie comes back after `new` took its branches over (by reading them): its
    /// write must fail, and after it is gone `new` and a cold reopen must not see it.
    fn haunt(&mut self, z: Zombie, f: usize, new: Process, ctx: &str) -> Option<Process> {
        if !self.models[f].branches.contains_key(&z.name) {
            // The crashed operation deleted the branch: no takeover to test.
            return Some(new);
        }
        z.process.cut.disarm();
        let mut batch = WriteBatch::new();
        batch.put(ZOMBIE_KEY, b"written by a process taken over");
        let result = z.branch.write_blocking(batch);
        if self.trace {
            eprintln!("trace: zombie write to {}: {result:?}", z.name);
        }
        // Its shutdown now reaches the store: fenced, like the write.
        drop(z.branch);
        drop(z.process);
        if result.is_ok() {
            // Acknowledged, yet no owner will ever read it: a lost write.
            self.tally.mismatch(
                1,
                0,
                format!(
                    "{ctx}: the old process wrote to family {f} branch {} after the new one took \
                 it over, and was acknowledged",
                    z.name
                ),
            );
            return None;
        }
        self.tally.obj_zombie_refused += 1;
        self.unseen(&new, f, &z.name, ctx)?;
        // A cold reader must not see it either, nor anything the zombie's shutdown wrote.
        let _ = new.at.store.close();
        drop(new);
        self.cloud.clock.advance(1000);
        let newer = self.start(&format!("{ctx}: reopen after the zombie"))?;
        self.tally.obj_cold_reopens += 1;
        self.read_back(&newer, f, None, ctx)?;
        Some(newer)
    }

    /// Checks that `p` does not see the zombie's key on branch `name` of family `f`.
    fn unseen(&mut self, p: &Process, f: usize, name: &str, ctx: &str) -> Option<()> {
        let got =
            p.at.store
                .partition(TABLE, f as u32)
                .and_then(|part| part.branch(name))
                .and_then(|b| b.get_blocking(ZOMBIE_KEY));
        match got {
            Ok(None) => Some(()),
            Ok(Some(_)) => {
                self.tally.mismatch(
                    0,
                    1,
                    format!("{ctx}: family {f} branch {name} shows the zombie's refused write"),
                );
                None
            }
            Err(e) => {
                self.tally.fail(format!(
                    "{ctx}: reading family {f} branch {name} after the zombie: {e}"
                ));
                None
            }
        }
    }
}

/// The branches of family `m` a zombie may write through: all of them, except (unless
/// [`ObjectCrashConfig::zombie_after_new_term`]) the one whose `new_term` was cut short.
///
/// The bug this stage found (seed 14, run seed 12866462378825318986 of the long size; fixed
/// by poisoning the head in the facade's `open_new_term`): when `open_new_term` failed
/// after the new term's manifest was created but before `CURRENT_TERM` named it, the old
/// head stayed usable. The next owner adopts that manifest,
/// which names no log (the old term was checkpointed at its seal), so no takeover fences
/// the old term's log: the old head's next commit lands in a new segment of it, is
/// acknowledged, and no later open ever reads it.
fn zombie_branches<'m>(
    m: &'m FamilyModel,
    in_flight: Option<&Op>,
    cfg: &ObjectCrashConfig,
) -> Vec<&'m String> {
    let renewed = match in_flight {
        Some(Op::NewTerm { branch }) if !cfg.zombie_after_new_term => Some(branch),
        _ => None,
    };
    m.branches.keys().filter(|n| Some(*n) != renewed).collect()
}
