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

/// What fuzzing did in a run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FuzzSummary {
    /// Executions, summed over the targets that ran.
    pub execs: u64,
    /// Targets that ran.
    pub targets: u64,
    /// Seconds each target ran.
    pub secs: u64,
    /// Targets that crashed (each also a failure of the run).
    pub crashed: Vec<String>,
    /// Why fuzzing did not run, when it did not.
    pub not_run: Option<String>,
}

impl FuzzSummary {
    fn add(&mut self, o: &FuzzSummary) {
        self.execs += o.execs;
        self.targets += o.targets;
        self.secs = self.secs.max(o.secs);
        self.crashed.extend(o.crashed.iter().cloned());
        if self.not_run.is_none() {
            self.not_run.clone_from(&o.not_run);
        }
    }

    /// The table's cell: never a bare 0 that could pass for "fuzzed, found nothing".
    fn row(&self) -> String {
        if self.targets > 0 {
            let mut s = format!(
                "{} ({} targets x {} s)",
                self.execs, self.targets, self.secs
            );
            if !self.crashed.is_empty() {
                s.push_str(&format!("; CRASHED: {}", self.crashed.join(", ")));
            }
            s
        } else {
            format!(
                "not run: {}",
                self.not_run
                    .as_deref()
                    .unwrap_or("run through `cargo xtask reliability` to fuzz")
            )
        }
    }
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
    /// Injected short reads whose rest was read again (every operation had to succeed).
    pub short_reads: u64,
    /// Injected short reads whose rest failed (the operation had to fail with `Io` or do
    /// without the read, never return the partial buffer).
    pub short_reads_failed: u64,
    /// Object store: injected 5xx answers.
    pub obj_5xx: u64,
    /// Object store: injected 429 (throttling) answers.
    pub obj_429: u64,
    /// Object store: requests carried out, then answered with a timeout.
    pub obj_timeouts_after: u64,
    /// Object store: bodies cut off mid-transfer.
    pub obj_cut_reads: u64,
    /// Object store: operations that failed with `Io` once the retries ran out. Allowed,
    /// counted; each resolved to "before" or "after" on a cold reopen.
    pub obj_failed_ops: u64,
    /// Of those, the ones that had taken effect (a write that landed before its timeout).
    pub obj_ambiguous: u64,
    /// Object store: reopens from an empty cache, each followed by a full read-back.
    pub obj_cold_reopens: u64,
    /// Object store: read-backs refused with `Io` under a read fault that outlasted the
    /// retries. Allowed, counted.
    pub obj_reads_refused: u64,
    /// Object store: GC runs answered `Busy` because the lease of a closed store (one that
    /// failed mid-GC before it could release it) still runs. Allowed, counted.
    pub obj_gc_busy: u64,
    /// Object store: processes that died at a request (each followed by a takeover from an
    /// empty cache and a full read-back).
    pub obj_crashes: u64,
    /// Of those, the ones that died between two operations.
    pub obj_crash_between: u64,
    /// Operations in flight at a crash that had taken effect (the rest had not). Allowed,
    /// counted.
    pub obj_crash_applied: u64,
    /// Writes of a taken-over process (a zombie) refused after the takeover.
    pub obj_zombie_refused: u64,
    /// Single-bit flips in a built store.
    pub bit_flips: u64,
    /// Flips a read reported as `Corruption`.
    pub flips_detected: u64,
    /// Flips nothing read noticed (unreferenced bytes) — every read still correct.
    pub flips_unnoticed: u64,
    /// Flips in a manifest's last record, taken for a torn append: the branch lost its last
    /// commit but every read was of a real earlier commit.
    pub flips_tail_rollback: u64,
    /// Crafted pages: checksum-valid pages with hostile contents (self or ancestor
    /// pointers, bad levels, out-of-range slots) written into a built store.
    pub crafted_pages: u64,
    /// Of those, mapping pages.
    pub crafted_mapping: u64,
    /// Of those, index pages.
    pub crafted_index: u64,
    /// Of those, leaves.
    pub crafted_leaf: u64,
    /// Crafted pages a read, diff, compaction, the checker or GC reported as `Corruption`.
    pub crafted_detected: u64,
    /// Crafted pages nothing read (every answer still right).
    pub crafted_unread: u64,
    /// Crafted pages whose file GC collected after compaction moved its live pages out
    /// (the branches then read right without it). Allowed, counted.
    pub crafted_file_collected: u64,
    /// Of [`Tally::lost`], those the crafted-page class found (data a hostile page made the
    /// store delete), shown in the class's own row.
    pub crafted_lost: u64,
    /// Of [`Tally::wrong`], those the crafted-page class found.
    pub crafted_wrong: u64,
    /// Operator mistakes made (each followed by reopens, a re-created name, GC and full
    /// reads).
    pub operator_mistakes: u64,
    /// Of those: `CURRENT_TERM` files deleted.
    pub op_lost_current_term: u64,
    /// Of those: `CURRENT_TERM` files replaced by an older copy.
    pub op_stale_current_term: u64,
    /// Of those: `CURRENT_TERM` files replaced by another store's record.
    pub op_foreign_current_term: u64,
    /// Of those: partition directories replaced by an older copy.
    pub op_restored_dirs: u64,
    /// Of those: branches deleted, their tombstone lost, their name created again.
    pub op_recreated_names: u64,
    /// GC runs that refused (`Corruption`) because a branch's state was unknown. Allowed,
    /// counted: nothing was deleted.
    pub op_gc_refused: u64,
    /// Operations that failed (injected fault) yet took effect: reported as failed while
    /// their commit was durable and visible. Allowed, counted.
    pub ambiguous: u64,
    /// What fuzzing did (the targets run in `fuzz/`, started by `cargo xtask reliability`,
    /// which hands the results to the harness).
    pub fuzz: FuzzSummary,
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
        self.short_reads += o.short_reads;
        self.short_reads_failed += o.short_reads_failed;
        self.obj_5xx += o.obj_5xx;
        self.obj_429 += o.obj_429;
        self.obj_timeouts_after += o.obj_timeouts_after;
        self.obj_cut_reads += o.obj_cut_reads;
        self.obj_failed_ops += o.obj_failed_ops;
        self.obj_ambiguous += o.obj_ambiguous;
        self.obj_cold_reopens += o.obj_cold_reopens;
        self.obj_reads_refused += o.obj_reads_refused;
        self.obj_gc_busy += o.obj_gc_busy;
        self.obj_crashes += o.obj_crashes;
        self.obj_crash_between += o.obj_crash_between;
        self.obj_crash_applied += o.obj_crash_applied;
        self.obj_zombie_refused += o.obj_zombie_refused;
        self.bit_flips += o.bit_flips;
        self.flips_detected += o.flips_detected;
        self.flips_unnoticed += o.flips_unnoticed;
        self.flips_tail_rollback += o.flips_tail_rollback;
        self.crafted_pages += o.crafted_pages;
        self.crafted_mapping += o.crafted_mapping;
        self.crafted_index += o.crafted_index;
        self.crafted_leaf += o.crafted_leaf;
        self.crafted_detected += o.crafted_detected;
        self.crafted_unread += o.crafted_unread;
        self.crafted_file_collected += o.crafted_file_collected;
        self.crafted_lost += o.crafted_lost;
        self.crafted_wrong += o.crafted_wrong;
        self.operator_mistakes += o.operator_mistakes;
        self.op_lost_current_term += o.op_lost_current_term;
        self.op_stale_current_term += o.op_stale_current_term;
        self.op_foreign_current_term += o.op_foreign_current_term;
        self.op_restored_dirs += o.op_restored_dirs;
        self.op_recreated_names += o.op_recreated_names;
        self.op_gc_refused += o.op_gc_refused;
        self.ambiguous += o.ambiguous;
        self.fuzz.add(&o.fuzz);
        self.integrity_checks += o.integrity_checks;
        self.lost += o.lost;
        self.wrong += o.wrong;
        self.panics += o.panics;
        self.hangs += o.hangs;
        self.failures.extend(o.failures.iter().cloned());
        self.poisoned_reads += o.poisoned_reads;
    }

    /// Records a store that read back neither of the states it could be in: its lost and
    /// wrong values, and the failure.
    pub fn mismatch(&mut self, lost: u64, wrong: u64, what: impl Into<String>) {
        self.lost += lost;
        self.wrong += wrong;
        self.fail(what);
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
            (
                "faults: short reads",
                format!(
                    "{} ({} continued, {} with the rest failed)",
                    self.short_reads + self.short_reads_failed,
                    self.short_reads,
                    self.short_reads_failed
                ),
            ),
            ("  failed ops that took effect", self.ambiguous.to_string()),
            (
                "  reads refused after a failed fsync",
                self.poisoned_reads.to_string(),
            ),
            ("object store: 5xx", self.obj_5xx.to_string()),
            ("object store: 429", self.obj_429.to_string()),
            (
                "object store: timeouts after apply",
                self.obj_timeouts_after.to_string(),
            ),
            (
                "object store: cut-off reads",
                self.obj_cut_reads.to_string(),
            ),
            (
                "  ops failed after retries",
                format!(
                    "{} ({} had taken effect)",
                    self.obj_failed_ops, self.obj_ambiguous
                ),
            ),
            ("  cold reopens verified", self.obj_cold_reopens.to_string()),
            (
                "  read-backs refused (retries out)",
                self.obj_reads_refused.to_string(),
            ),
            (
                "  GC refused (a lease still held)",
                self.obj_gc_busy.to_string(),
            ),
            (
                "object store: process crashes",
                format!(
                    "{} ({} between ops; {} in-flight ops had taken effect)",
                    self.obj_crashes, self.obj_crash_between, self.obj_crash_applied
                ),
            ),
            (
                "  zombie writes refused",
                self.obj_zombie_refused.to_string(),
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
                "crafted pages",
                format!(
                    "{} (mapping {}, index {}, leaf {}; {} detected, {} unread, {} files collected; {} lost, {} wrong)",
                    self.crafted_pages,
                    self.crafted_mapping,
                    self.crafted_index,
                    self.crafted_leaf,
                    self.crafted_detected,
                    self.crafted_unread,
                    self.crafted_file_collected,
                    self.crafted_lost,
                    self.crafted_wrong
                ),
            ),
            (
                "operator mistakes",
                format!(
                    "{} ({} lost, {} stale, {} foreign CURRENT_TERM; {} restored dirs; {} re-created names)",
                    self.operator_mistakes,
                    self.op_lost_current_term,
                    self.op_stale_current_term,
                    self.op_foreign_current_term,
                    self.op_restored_dirs,
                    self.op_recreated_names
                ),
            ),
            (
                "  GC refused (branch state unknown)",
                self.op_gc_refused.to_string(),
            ),
            ("fuzz executions", self.fuzz.row()),
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

/// Merges the tallies `expected` trials send on `rx` into `tally`, waiting at most
/// `timeout_secs` for each. A trial that does not report in time is a hang: counted, failed
/// with `hang(timeout_secs)`, and left behind (a stuck worker cannot be stopped). Otherwise
/// the workers are joined.
pub(crate) fn gather_trials(
    mut tally: Tally,
    rx: &std::sync::mpsc::Receiver<Tally>,
    workers: Vec<std::thread::JoinHandle<()>>,
    expected: u64,
    timeout_secs: u64,
    hang: impl FnOnce(u64) -> String,
) -> Tally {
    let mut received = 0;
    while received < expected {
        match rx.recv_timeout(std::time::Duration::from_secs(timeout_secs)) {
            Ok(t) => {
                tally.merge(&t);
                received += 1;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                tally.hangs += 1;
                tally.fail(hang(timeout_secs));
                return tally;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    for w in workers {
        let _ = w.join();
    }
    tally
}
