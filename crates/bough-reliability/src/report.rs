//! Counting what a run did and found, and the one table `cargo xtask reliability` prints.

use std::fmt::Write as _;
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

use bough_io::CrashReport;

static PANICS: AtomicU64 = AtomicU64::new(0);
static HOOK: Once = Once::new();

/// Installs (once per process) a panic hook that counts every panic — on any thread,
/// the store's writer threads included — before the usual message is printed.
pub fn count_panics() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
    });
}

/// Panics counted so far in this process.
pub fn panics_so_far() -> u64 {
    PANICS.load(Ordering::SeqCst)
}

/// Runs `f` counting the panics it causes (on any thread) into its tally; a panic that
/// escapes `f` is caught and counted as a failure too.
pub fn guarded(what: &str, f: impl FnOnce() -> Tally) -> Tally {
    count_panics();
    let before = panics_so_far();
    let mut tally = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(t) => t,
        Err(_) => {
            let mut t = Tally::default();
            t.fail(format!("{what}: the harness panicked"));
            t
        }
    };
    tally.panics += panics_so_far() - before;
    tally
}

/// Everything a run counts. The last four rows must be zero.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Kill cycles on the positional-I/O backend.
    pub kill_cycles_pread: u64,
    /// Kill cycles on the io_uring backend.
    pub kill_cycles_uring: u64,
    /// Kill cycles where the child finished before the kill.
    pub kill_cycles_finished: u64,
    /// Operations acknowledged by killed children (all verified).
    pub kill_acked_ops: u64,
    /// Crash points swept (each a crash, a recovery and a verification).
    pub crash_points: u64,
    /// Sync points the swept workloads have.
    pub sync_points: u64,
    /// What the simulated power losses did to unsynced writes.
    pub crash: CrashReport,
    /// Injected fsync failures (EIO).
    pub eio_fsync: u64,
    /// Injected write failures (EIO).
    pub eio_write: u64,
    /// Injected ENOSPC failures.
    pub enospc: u64,
    /// Injected short (torn, then failed) writes.
    pub short_writes: u64,
    /// Single-bit flips in a built store.
    pub bit_flips: u64,
    /// Flips a read reported as `Corruption`.
    pub flips_detected: u64,
    /// Flips nothing read noticed (unreferenced bytes) — every read still correct.
    pub flips_unnoticed: u64,
    /// Flips in a manifest's last record, taken for a torn append: the branch lost its last
    /// commit but every read was of a real earlier commit.
    pub flips_tail_rollback: u64,
    /// Operations that failed (injected fault) yet took effect: reported as failed while
    /// their commit was durable and visible. Allowed, counted.
    pub ambiguous: u64,
    /// Fuzz executions (the fuzz targets run separately, through `cargo xtask fuzz`).
    pub fuzz_execs: u64,
    /// Integrity checks run on recovered or damaged stores.
    pub integrity_checks: u64,
    /// Acknowledged operations lost (or torn) after a crash.
    pub lost: u64,
    /// Reads that returned a value no allowed state holds.
    pub wrong: u64,
    /// Panics (library or harness).
    pub panics: u64,
    /// Checks that ran past their time bound.
    pub hangs: u64,
    /// Every failure, described (with what replays it).
    pub failures: Vec<String>,
    /// Reads refused with `Poisoned` after a failed fsync (opening a partition or branch
    /// that was not open needs a writable handle). Allowed, counted.
    pub poisoned_reads: u64,
    /// Don't print failures as they are recorded (a tally whose failures may be excused).
    pub quiet: bool,
}

impl Tally {
    /// Adds another tally's counts to this one.
    pub fn merge(&mut self, o: &Tally) {
        self.kill_cycles_pread += o.kill_cycles_pread;
        self.kill_cycles_uring += o.kill_cycles_uring;
        self.kill_cycles_finished += o.kill_cycles_finished;
        self.kill_acked_ops += o.kill_acked_ops;
        self.crash_points += o.crash_points;
        self.sync_points += o.sync_points;
        self.crash.add(&o.crash);
        self.eio_fsync += o.eio_fsync;
        self.eio_write += o.eio_write;
        self.enospc += o.enospc;
        self.short_writes += o.short_writes;
        self.bit_flips += o.bit_flips;
        self.flips_detected += o.flips_detected;
        self.flips_unnoticed += o.flips_unnoticed;
        self.flips_tail_rollback += o.flips_tail_rollback;
        self.ambiguous += o.ambiguous;
        self.fuzz_execs += o.fuzz_execs;
        self.integrity_checks += o.integrity_checks;
        self.lost += o.lost;
        self.wrong += o.wrong;
        self.panics += o.panics;
        self.hangs += o.hangs;
        self.failures.extend(o.failures.iter().cloned());
        self.poisoned_reads += o.poisoned_reads;
    }

    /// Records a failure that is neither a lost write nor a wrong value (an unexpected
    /// error, a failed integrity check).
    pub fn fail(&mut self, what: impl Into<String>) {
        let what = what.into();
        if !self.quiet {
            eprintln!("FAILURE: {what}");
        }
        self.failures.push(what);
    }

    /// Whether the run found nothing wrong.
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
            && self.lost == 0
            && self.wrong == 0
            && self.panics == 0
            && self.hangs == 0
    }

    /// The table.
    pub fn table(&self, seed: u64, secs: f64) -> String {
        let c = &self.crash;
        let rows: Vec<(&str, String)> = vec![
            (
                "kill cycles (SIGKILL)",
                format!(
                    "{} (pread {}, io_uring {}; {} finished first)",
                    self.kill_cycles_pread + self.kill_cycles_uring,
                    self.kill_cycles_pread,
                    self.kill_cycles_uring,
                    self.kill_cycles_finished
                ),
            ),
            (
                "  acknowledged ops verified",
                self.kill_acked_ops.to_string(),
            ),
            (
                "crash points swept",
                format!(
                    "{} (of {} sync points)",
                    self.crash_points, self.sync_points
                ),
            ),
            (
                "  unsynced writes",
                format!(
                    "{} kept, {} dropped, {} torn, {} garbled",
                    c.writes_kept, c.writes_dropped, c.writes_torn, c.writes_garbled
                ),
            ),
            (
                "  unsynced dir changes",
                format!(
                    "{} kept, {} dropped",
                    c.dir_changes_kept, c.dir_changes_dropped
                ),
            ),
            ("faults: fsync EIO", self.eio_fsync.to_string()),
            ("faults: write EIO", self.eio_write.to_string()),
            ("faults: ENOSPC", self.enospc.to_string()),
            ("faults: short writes", self.short_writes.to_string()),
            ("  failed ops that took effect", self.ambiguous.to_string()),
            (
                "  reads refused after a failed fsync",
                self.poisoned_reads.to_string(),
            ),
            (
                "bit flips",
                format!(
                    "{} ({} detected, {} unnoticed, {} tail rollbacks)",
                    self.bit_flips,
                    self.flips_detected,
                    self.flips_unnoticed,
                    self.flips_tail_rollback
                ),
            ),
            (
                "fuzz executions",
                if self.fuzz_execs == 0 {
                    "0 (run `cargo xtask fuzz`)".to_string()
                } else {
                    self.fuzz_execs.to_string()
                },
            ),
            ("integrity checks", self.integrity_checks.to_string()),
            ("acknowledged writes lost", self.lost.to_string()),
            ("wrong values returned", self.wrong.to_string()),
            ("panics", self.panics.to_string()),
            ("hangs", self.hangs.to_string()),
            ("other failures", self.failures.len().to_string()),
        ];
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let mut out = String::new();
        let _ = writeln!(out, "bough reliability — seed {seed} ({secs:.1} s)");
        let _ = writeln!(out, "{}", "-".repeat(width + 40));
        for (k, v) in rows {
            let _ = writeln!(out, "{k:<width$}  {v}");
        }
        let _ = writeln!(out, "{}", "-".repeat(width + 40));
        let _ = writeln!(
            out,
            "{}  (replay: cargo xtask reliability --seed {seed})",
            if self.ok() { "PASS" } else { "FAIL" }
        );
        out
    }
}
