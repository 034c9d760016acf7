//! Bough's reliability harness: what the store survives, shown systematically.
//!
//! - [`kill`]: real processes running a multi-branch workload are `SIGKILL`ed at random
//!   moments; the parent reopens and checks every branch holds a prefix of its operations
//!   that contains every acknowledged one (pread and io_uring).
//! - [`power`]: simulated power loss at every sync point of a workload on
//!   [`MemoryStorage`](bough_io::MemoryStorage), each unsynced write kept, dropped, torn or
//!   garbled and each unsynced directory change kept or undone.
//! - [`faults`]: injected `EIO` on write and on fsync (the store must refuse writes with
//!   `Poisoned` until reopened), `ENOSPC` (a clean `NoSpace`, writes resume once space
//!   returns), short writes, and short reads (continued, or with the rest failed) on
//!   memory, pread and io_uring.
//! - [`cloud_faults`]: the workload in cloud mode over an object store answering 5xx and
//!   429, timing out after it applied a write and cutting bodies off; after every fault a
//!   reopen from an empty cache must show every acknowledged operation, the failed one
//!   wholly or not at all, and no wrong value.
//! - [`cloud_crash`]: the same workload with the process dying at an arbitrary object-store
//!   request (nothing it sends after reaches the store): a new process taking over from an
//!   empty cache finds every acknowledged write, the one in flight wholly or not at all,
//!   and a zombie of the old process cannot write past the takeover.
//! - [`corrupt`]: single-bit flips in data pages, headers, manifests, archives and
//!   `CURRENT_TERM` files: every read returns the right data or `Corruption`, never wrong
//!   data, never a panic, never a hang; other branches keep working.
//! - [`crafted`]: checksum-valid mapping, index and leaf pages with hostile contents
//!   (pointers to themselves or an ancestor, bad levels, out-of-range slots): every read,
//!   diff, walk and GC answers right or `Corruption`, never loops, never panics, and with
//!   the page put back nothing was lost.
//! - [`operator`]: operator mistakes — lost, stale and foreign `CURRENT_TERM` files,
//!   partition directories restored from an older copy, branch names deleted and created
//!   again after their tombstone was lost: every branch must still read exactly right.
//! - [`check`]: the integrity checker every run ends with.
//! - [`workload`]: the deterministic workload and its model; [`exec`] runs it on a store.
//!
//! Every randomized run prints its seed and replays from `--seed N` / `BOUGH_SEED=N`.
//! `cargo xtask reliability` runs the fuzz targets, then [`run`], and prints one table
//! ([`report::Tally::table`]) with the fuzz executions in it.

pub mod check;
pub mod cloud_crash;
pub mod cloud_faults;
pub mod corrupt;
pub mod crafted;
pub mod exec;
pub mod faults;
pub mod kill;
pub mod operator;
pub mod power;
pub mod report;
pub mod rng;
pub mod workload;

use std::time::Instant;

use report::Tally;

/// How much a run does.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Root seed.
    pub seed: u64,
    /// Kill test.
    pub kill: kill::KillConfig,
    /// Power-loss sweep.
    pub power: power::SweepConfig,
    /// Injected faults.
    pub faults: faults::FaultConfig,
    /// Object-store faults (cloud mode).
    pub object: cloud_faults::ObjectFaultConfig,
    /// Object-store crashes (cloud mode).
    pub object_crash: cloud_crash::ObjectCrashConfig,
    /// Bit flips.
    pub corrupt: corrupt::CorruptConfig,
    /// Crafted pages.
    pub crafted: crafted::CraftConfig,
    /// Operator mistakes.
    pub operator: operator::OperatorConfig,
}

impl RunConfig {
    /// The CI size: ≥ 100 kill cycles, a full sync-point sweep of one workload, ≥ 1,000 bit
    /// flips, a few minutes on two cores.
    pub fn short(seed: u64) -> Self {
        RunConfig {
            seed,
            kill: kill::KillConfig::short(),
            power: power::SweepConfig::short(),
            faults: faults::FaultConfig::short(),
            object: cloud_faults::ObjectFaultConfig::short(),
            object_crash: cloud_crash::ObjectCrashConfig::short(),
            corrupt: corrupt::CorruptConfig::short(),
            crafted: crafted::CraftConfig::short(),
            operator: operator::OperatorConfig::short(),
        }
    }

    /// The long run (`--long`): several times more of everything.
    pub fn long(seed: u64) -> Self {
        RunConfig {
            seed,
            kill: kill::KillConfig::long(),
            power: power::SweepConfig::long(),
            faults: faults::FaultConfig::long(),
            object: cloud_faults::ObjectFaultConfig::long(),
            object_crash: cloud_crash::ObjectCrashConfig::long(),
            corrupt: corrupt::CorruptConfig::long(),
            crafted: crafted::CraftConfig::long(),
            operator: operator::OperatorConfig::long(),
        }
    }
}

/// Runs everything (the kill test runs the `child` binary at `child_exe`) and returns the
/// tally.
pub fn run(cfg: &RunConfig, child_exe: &std::path::Path) -> Tally {
    let mut tally = Tally::default();
    let stage = |name: &str, t: &mut Tally, f: &dyn Fn() -> Tally| {
        let start = Instant::now();
        eprintln!("== {name} (seed {})", cfg.seed);
        let got = f();
        eprintln!(
            "== {name}: {:.1} s, {} failures",
            start.elapsed().as_secs_f64(),
            got.failures.len() as u64 + got.lost + got.wrong + got.hangs
        );
        t.merge(&got);
    };
    stage("power-loss sweep", &mut tally, &|| {
        power::sweep(cfg.seed, &cfg.power)
    });
    stage("injected faults", &mut tally, &|| {
        faults::run(cfg.seed, &cfg.faults)
    });
    stage("object-store faults", &mut tally, &|| {
        cloud_faults::run(cfg.seed, &cfg.object)
    });
    stage("object-store crashes", &mut tally, &|| {
        cloud_crash::run(cfg.seed, &cfg.object_crash)
    });
    stage("bit flips", &mut tally, &|| {
        corrupt::run(cfg.seed, &cfg.corrupt)
    });
    stage("crafted pages", &mut tally, &|| {
        crafted::run(cfg.seed, &cfg.crafted)
    });
    stage("operator mistakes", &mut tally, &|| {
        operator::run(cfg.seed, &cfg.operator)
    });
    stage("kill cycles", &mut tally, &|| {
        kill::run(cfg.seed, &cfg.kill, child_exe)
    });
    tally
}
