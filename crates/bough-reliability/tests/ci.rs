//! The reliability harness at CI size — run by `cargo nextest run --workspace` — and its
//! long variants (`slow_`, run with `cargo nextest run --profile slow`).
//!
//! Each test prints its seed; `BOUGH_SEED=<seed>` replays it. A failure prints every
//! problem found and the table.

use std::time::Instant;

use bough_reliability::report::Tally;
use bough_reliability::{
    cloud_crash, cloud_faults, corrupt, crafted, faults, kill, operator, power, rng,
};

fn seed() -> u64 {
    let (seed, source) = rng::seed_from_env().expect("BOUGH_SEED must be a u64");
    eprintln!("seed: {seed} ({source}); replay with BOUGH_SEED={seed}");
    seed
}

fn assert_clean(what: &str, seed: u64, start: Instant, t: &Tally) {
    eprintln!("{}", t.table(seed, start.elapsed().as_secs_f64()));
    assert!(
        t.ok(),
        "{what} (seed {seed}, replay with BOUGH_SEED={seed}) found problems:\n{}",
        t.failures.join("\n")
    );
}

/// Determinism canary: one seed, one workload — the same operations and the same number of
/// syncs, so a crash point of a failing seed replays.
#[test]
fn ci_the_same_seed_replays_the_same_run() {
    let seed = seed();
    let cfg = power::SweepConfig::short().workload;
    let a = power::count_sync_points(seed, &cfg).expect("run");
    let b = power::count_sync_points(seed, &cfg).expect("run");
    assert_eq!(a, b, "seed {seed}: sync points differ between two runs");
    assert_eq!(
        power::sweep(
            seed,
            &power::SweepConfig {
                max_points: 5,
                extra_workloads: 0,
                ..power::SweepConfig::short()
            }
        )
        .crash_points,
        5
    );
}

#[test]
fn ci_power_loss_sweep_every_sync_point() {
    let (seed, start) = (seed(), Instant::now());
    let t = power::sweep(seed, &power::SweepConfig::short());
    assert!(
        t.crash_points >= 100,
        "only {} crash points",
        t.crash_points
    );
    assert_eq!(
        t.crash_points, t.sync_points,
        "the CI sweep covers every sync point"
    );
    assert_clean("power-loss sweep", seed, start, &t);
}

#[test]
fn ci_injected_faults() {
    let (seed, start) = (seed(), Instant::now());
    let t = faults::run(seed, &faults::FaultConfig::short());
    assert!(t.eio_fsync > 0 && t.eio_write + t.enospc + t.short_writes > 0);
    assert!(t.short_reads > 0 && t.short_reads_failed > 0);
    assert_clean("injected faults", seed, start, &t);
}

#[test]
fn ci_object_store_faults() {
    let (seed, start) = (seed(), Instant::now());
    let t = cloud_faults::run(seed, &cloud_faults::ObjectFaultConfig::short());
    assert!(
        t.obj_5xx > 0 && t.obj_429 > 0 && t.obj_timeouts_after > 0 && t.obj_cut_reads > 0,
        "every object-store fault class fired"
    );
    assert!(t.obj_cold_reopens > 0);
    assert_clean("object-store faults", seed, start, &t);
}

#[test]
fn ci_object_store_crashes() {
    let (seed, start) = (seed(), Instant::now());
    let t = cloud_crash::run(seed, &cloud_crash::ObjectCrashConfig::short());
    assert!(
        t.obj_crashes > t.obj_crash_between && t.obj_crash_between > 0,
        "processes died inside operations and between them"
    );
    assert!(
        t.obj_crash_applied > 0,
        "some in-flight operation had taken effect"
    );
    assert!(t.obj_zombie_refused > 0, "a zombie tried to write");
    assert_clean("object-store crashes", seed, start, &t);
}

#[test]
fn ci_bit_flips() {
    let (seed, start) = (seed(), Instant::now());
    let t = corrupt::run(seed, &corrupt::CorruptConfig::short());
    assert!(t.bit_flips >= 1000, "only {} bit flips", t.bit_flips);
    assert_clean("bit flips", seed, start, &t);
}

#[test]
fn ci_crafted_pages() {
    let (seed, start) = (seed(), Instant::now());
    let t = crafted::run(seed, &crafted::CraftConfig::short());
    assert!(
        t.crafted_pages >= 250,
        "only {} crafted pages",
        t.crafted_pages
    );
    assert!(
        t.crafted_mapping > 0 && t.crafted_index > 0 && t.crafted_leaf > 0,
        "every page kind crafted"
    );
    assert!(t.crafted_detected > 0, "no crafted page was noticed");
    assert_clean("crafted pages", seed, start, &t);
}

#[test]
fn ci_operator_mistakes() {
    let (seed, start) = (seed(), Instant::now());
    let t = operator::run(seed, &operator::OperatorConfig::short());
    assert_eq!(t.operator_mistakes, 100);
    assert!(
        t.op_lost_current_term > 0
            && t.op_stale_current_term > 0
            && t.op_foreign_current_term > 0
            && t.op_restored_dirs > 0
            && t.op_recreated_names > 0,
        "every mistake class was made"
    );
    assert_clean("operator mistakes", seed, start, &t);
}

#[test]
fn ci_kill_cycles() {
    let (seed, start) = (seed(), Instant::now());
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_bough-reliability"));
    let t = kill::run(seed, &kill::KillConfig::short(), exe);
    assert!(t.kill_cycles_pread + t.kill_cycles_uring >= 100);
    assert_clean("kill cycles", seed, start, &t);
}

#[test]
fn slow_power_loss_sweep_long() {
    let (seed, start) = (seed(), Instant::now());
    let t = power::sweep(seed, &power::SweepConfig::long());
    assert_clean("power-loss sweep (long)", seed, start, &t);
}

#[test]
fn slow_injected_faults_long() {
    let (seed, start) = (seed(), Instant::now());
    let t = faults::run(seed, &faults::FaultConfig::long());
    assert_clean("injected faults (long)", seed, start, &t);
}

#[test]
fn slow_object_store_faults_long() {
    let (seed, start) = (seed(), Instant::now());
    let t = cloud_faults::run(seed, &cloud_faults::ObjectFaultConfig::long());
    assert_clean("object-store faults (long)", seed, start, &t);
}

#[test]
fn slow_object_store_crashes_long() {
    let (seed, start) = (seed(), Instant::now());
    let t = cloud_crash::run(seed, &cloud_crash::ObjectCrashConfig::long());
    assert_clean("object-store crashes (long)", seed, start, &t);
}

#[test]
fn slow_bit_flips_long() {
    let (seed, start) = (seed(), Instant::now());
    let t = corrupt::run(seed, &corrupt::CorruptConfig::long());
    assert_clean("bit flips (long)", seed, start, &t);
}

#[test]
fn slow_crafted_pages_long() {
    let (seed, start) = (seed(), Instant::now());
    let t = crafted::run(seed, &crafted::CraftConfig::long());
    assert_clean("crafted pages (long)", seed, start, &t);
}

#[test]
fn slow_operator_mistakes_long() {
    let (seed, start) = (seed(), Instant::now());
    let t = operator::run(seed, &operator::OperatorConfig::long());
    assert_clean("operator mistakes (long)", seed, start, &t);
}

#[test]
fn slow_kill_cycles_long() {
    let (seed, start) = (seed(), Instant::now());
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_bough-reliability"));
    let t = kill::run(seed, &kill::KillConfig::long(), exe);
    assert_clean("kill cycles (long)", seed, start, &t);
}
