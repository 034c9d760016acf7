//! SIGKILL during merges and re-homes.
//!
//! The test re-executes its own binary as a child (`BOUGH_MERGE_CRASH_DIR=<dir>`, filtered
//! to `merge_crash_child`) that opens a store on a local backend and runs one family of the
//! harness workload whose operations are mostly merges — fast-forwards and three-way merges
//! (with the `Theirs` policy) between branches that share a base — and re-homes, with the
//! writes, branch creations and deletions that make them non-trivial, while a thread
//! collects garbage every few milliseconds. Operation `i` is a pure function of the seed and
//! the model after `i - 1` operations, so the parent rebuilds every state without asking the
//! child; the child prints `ack <i>` when operation `i` is acknowledged.
//!
//! Each cycle aims its kill at one kind of operation — a fast-forward, a three-way merge
//! or a re-home, in turn: it waits for the acknowledgement of the operation before the next
//! one of that kind, then sleeps a random few hundred microseconds to a few milliseconds
//! and sends `SIGKILL` (one cycle in ten kills at a random moment instead, sometimes while
//! the store is still recovering). The parent then reopens the store and checks, with the
//! harness's verifier, that every branch — contents and recorded merge bases — is exactly
//! the state before or exactly the state after the operation that was in flight (so a
//! merge target is all or nothing, and a re-homed branch reads exactly as before), and
//! runs the integrity checker over the directory. The next child continues from the state
//! found, on the same directory, so crashes pile up.
//!
//! The seed is printed; `BOUGH_SEED=<seed>` replays it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bough::io::{PreadStorage, Storage};
use bough::{Backend, ManualClock, Store};
use bough_reliability::check::check_storage;
use bough_reliability::exec::{Verdict, execute, verify_family};
use bough_reliability::kill::{local_options, uring_available};
use bough_reliability::rng::{Rng, mix, seed_from_env};
use bough_reliability::workload::{BRANCH_POOL, FamilyModel, Op, key};

const CHILD_DIR: &str = "BOUGH_MERGE_CRASH_DIR";
const CHILD_SEED: &str = "BOUGH_MERGE_CRASH_SEED";
const CHILD_START: &str = "BOUGH_MERGE_CRASH_START";
const CHILD_BACKEND: &str = "BOUGH_MERGE_CRASH_BACKEND";
/// The one family (partition) the test uses.
const FAMILY: u32 = 0;
const KEYS: u64 = 48;
const MAX_BRANCHES: usize = 5;

/// The kinds of operation a kill aims at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Aim {
    FastForward,
    ThreeWay,
    Rehome,
}

/// Whether `op`, applied to `m`, is a fast-forward, a three-way merge or a re-home.
fn aim_of(m: &FamilyModel, op: &Op) -> Option<Aim> {
    match op {
        Op::Merge { source, target } => {
            let base = m.merge_base(source, target)?;
            let t = &m.branches.get(target)?.state;
            Some(if t == base {
                Aim::FastForward
            } else {
                Aim::ThreeWay
            })
        }
        Op::Rehome { .. } => Some(Aim::Rehome),
        _ => None,
    }
}

/// Operation number `m.applied`: merges and re-homes, with what makes them non-trivial.
fn next_op(m: &FamilyModel, seed: u64) -> Op {
    let mut r = Rng::derive(seed, &[m.applied as u64, 0x4D43]);
    let live: Vec<String> = m.branches.keys().cloned().collect();
    let pick = |r: &mut Rng, v: &[String]| r.pick(v).cloned().unwrap_or_else(|| "main".into());
    let pairs: Vec<(String, String)> = live
        .iter()
        .flat_map(|s| live.iter().map(move |t| (s.clone(), t.clone())))
        .filter(|(s, t)| s != t && m.merge_base(s, t).is_some())
        .collect();
    let free: Vec<String> = BRANCH_POOL
        .iter()
        .filter(|n| !m.branches.contains_key(**n))
        .map(|n| n.to_string())
        .collect();
    match r.below(100) {
        35..=64 if !pairs.is_empty() => {
            let (source, target) = r.pick(&pairs).cloned().unwrap_or_default();
            return Op::Merge { source, target };
        }
        65..=76 => {
            return Op::Rehome {
                branch: pick(&mut r, &live),
            };
        }
        77..=88 if live.len() < MAX_BRANCHES && !free.is_empty() => {
            return Op::CreateBranch {
                name: pick(&mut r, &free),
                from: pick(&mut r, &live),
            };
        }
        89..=93 if live.len() > 2 => {
            let others: Vec<String> = live.iter().filter(|b| *b != "main").cloned().collect();
            return Op::DeleteBranch {
                name: pick(&mut r, &others),
            };
        }
        94..=99 => return Op::Gc,
        _ => {}
    }
    let branch = pick(&mut r, &live);
    let state = m.branches.get(&branch).map(|b| b.state.clone());
    let (mut puts, mut deletes) = (Vec::new(), Vec::new());
    let mut keys: Vec<u32> = (0..r.range(1, 10)).map(|_| r.below(KEYS) as u32).collect();
    keys.sort_unstable();
    keys.dedup();
    for k in keys {
        let present = state.as_ref().is_some_and(|s| s.contains_key(&key(k)));
        if present && r.chance(25) {
            deletes.push(k);
        } else {
            puts.push(k);
        }
    }
    Op::Write {
        branch,
        puts,
        deletes,
    }
}

/// The model after the first `n` operations.
fn model_after(seed: u64, n: usize) -> FamilyModel {
    let mut m = FamilyModel::new(FAMILY);
    while m.applied < n {
        let op = next_op(&m, seed);
        m.apply(seed, &op);
    }
    m
}

/// A clock above every earlier process's: now in ms × 1000, advanced by one per operation,
/// so merge bases recorded later are always newer.
fn process_clock() -> ManualClock {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    ManualClock::new(ms.saturating_mul(1000))
}

fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::IoUring => "io_uring",
        _ => "pread",
    }
}

fn say(out: &mut impl Write, line: &str) {
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The child: runs operations from `BOUGH_MERGE_CRASH_START` until killed. A no-op unless
/// `BOUGH_MERGE_CRASH_DIR` is set.
#[test]
fn merge_crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let num = |name: &str| -> u64 {
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("child: {name} missing"))
    };
    let (seed, start) = (num(CHILD_SEED), num(CHILD_START) as usize);
    let backend = match std::env::var(CHILD_BACKEND).as_deref() {
        Ok("io_uring") => Backend::IoUring,
        _ => Backend::Pread,
    };
    let clock = process_clock();
    let store = Store::open(local_options(Path::new(&dir), backend, &clock)).expect("child: open");
    let mut out = std::io::stdout().lock();
    say(&mut out, &format!("ready {}", store.backend()));
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(7));
                if let Err(e) = store.gc() {
                    panic!("child: gc: {e}");
                }
            }
        });
        let mut m = model_after(seed, start);
        loop {
            let op = next_op(&m, seed);
            clock.advance(1);
            if let Err(e) = execute(&store, seed, FAMILY, m.applied, &op) {
                say(&mut out, &format!("err {} {op:?}: {e}", m.applied));
                stop.store(true, Ordering::Release);
                return;
            }
            say(&mut out, &format!("ack {}", m.applied));
            m.apply(seed, &op);
        }
    });
}

struct Child {
    proc: std::process::Child,
    lines: mpsc::Receiver<String>,
}

fn spawn(dir: &Path, backend: Backend, seed: u64, start: usize) -> Child {
    let exe = std::env::current_exe().expect("current_exe");
    let mut proc = Command::new(exe)
        .args([
            "--exact",
            "merge_crash_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_DIR, dir)
        .env(CHILD_SEED, seed.to_string())
        .env(CHILD_START, start.to_string())
        .env(CHILD_BACKEND, backend_name(backend))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the child");
    let stdout = proc.stdout.take().expect("child stdout");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Child { proc, lines }
}

/// What the cycles covered.
#[derive(Debug, Default)]
struct Tally {
    /// (kind of the operation in flight at the kill, whether it took effect) → cycles.
    in_flight: BTreeMap<(String, bool), u64>,
    acked: u64,
    early_kills: u64,
}

fn kill_cycles(test: &str, cycles: usize) {
    let root = match seed_from_env() {
        Ok((s, source)) => {
            eprintln!("[{test}] seed {s} ({source}); replay with BOUGH_SEED={s}");
            s
        }
        Err(e) => panic!("[{test}] {e}"),
    };
    // The workload's seed (what the child is given), derived from the one printed.
    let seed = mix(root, &[0x4D43]);
    let mut rng = Rng::derive(seed, &[0x4B]);
    let backends: Vec<Backend> = if uring_available() {
        vec![Backend::Pread, Backend::IoUring]
    } else {
        eprintln!("[{test}] io_uring is unavailable here; pread only");
        vec![Backend::Pread]
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let started = Instant::now();
    let mut model = FamilyModel::new(FAMILY);
    let mut tally = Tally::default();
    let aims = [Aim::FastForward, Aim::ThreeWay, Aim::Rehome];
    // How many kills landed during a merge or re-home so far.
    let aimed = |tally: &Tally| -> u64 {
        tally
            .in_flight
            .iter()
            .filter(|((kind, _), _)| ["FastForward", "ThreeWay", "Rehome"].contains(&kind.as_str()))
            .map(|(_, n)| n)
            .sum()
    };
    // A kill aimed at an operation can land after it on a loaded machine (the child runs
    // on): keep killing, up to four times the planned cycles, until half the planned
    // number hit a merge or re-home.
    let wanted = (cycles as u64).div_ceil(2);
    let mut cycle = 0;
    loop {
        if cycle >= cycles && (aimed(&tally) >= wanted || cycle >= 4 * cycles) {
            break;
        }
        let backend = backends[cycle % backends.len()];
        let ctx = format!(
            "[{test}] seed {root} cycle {cycle} ({}, from op {}, dir {})",
            backend_name(backend),
            model.applied,
            dir.path().display()
        );
        // The operation to kill during: the next one of this cycle's kind, a few ops on.
        let aim = aims[cycle % aims.len()];
        let random_kill = rng.chance(10);
        let mut target = None;
        let mut probe = model.clone();
        let skip = rng.below(4) as usize;
        while probe.applied < model.applied + 80 {
            let op = next_op(&probe, seed);
            if probe.applied >= model.applied + skip && aim_of(&probe, &op) == Some(aim) {
                target = Some(probe.applied);
                break;
            }
            probe.apply(seed, &op);
        }
        let target = if random_kill { None } else { target };
        let mut child = spawn(dir.path(), backend, seed, model.applied);
        let deadline = Instant::now() + Duration::from_secs(60);
        let random_at = Instant::now() + Duration::from_millis(rng.range(0, 60));
        let mut acked: Option<usize> = None;
        let mut ready = false;
        loop {
            let due = match target {
                // Right after the operation before the target was acknowledged.
                Some(t) => ready && (t == model.applied || acked.is_some_and(|a| a + 1 >= t)),
                None => Instant::now() >= random_at,
            };
            if due {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{ctx}: no progress (acked {acked:?})"
            );
            match child.lines.recv_timeout(Duration::from_millis(2)) {
                Ok(line) => {
                    if let Some(n) = line.strip_prefix("ack ") {
                        acked = Some(n.trim().parse().expect("ack number"));
                    } else if line.contains("ready ") {
                        // libtest may have printed `test merge_crash_child ... ` first.
                        ready = true;
                    } else if line.starts_with("err") {
                        panic!("{ctx}: the child failed: {line}");
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.proc.wait().expect("wait");
                    panic!("{ctx}: the child exited by itself: {status}");
                }
            }
        }
        if target.is_some() {
            std::thread::sleep(Duration::from_micros(rng.range(0, 4000)));
        }
        child.proc.kill().expect("kill"); // SIGKILL
        let status = child.proc.wait().expect("wait");
        assert!(
            !status.success(),
            "{ctx}: the child was not killed: {status}"
        );
        while let Ok(line) = child.lines.recv_timeout(Duration::from_secs(5)) {
            if let Some(n) = line.strip_prefix("ack ") {
                acked = Some(n.trim().parse().expect("ack number"));
            } else if line.starts_with("err") {
                panic!("{ctx}: the child failed: {line}");
            }
        }
        tally.early_kills += u64::from(!ready);
        // Every acknowledged operation is in the model...
        if let Some(a) = acked {
            assert!(a >= model.applied, "{ctx}: ack {a} below the start");
            tally.acked += (a + 1 - model.applied) as u64;
            while model.applied <= a {
                let op = next_op(&model, seed);
                model.apply(seed, &op);
            }
        }
        // ... and the one in flight took effect entirely or not at all.
        let op = next_op(&model, seed);
        let kind = match aim_of(&model, &op) {
            Some(a) => format!("{a:?}"),
            None => op.kind().to_string(),
        };
        let mut candidates = vec![model.clone()];
        candidates.extend(model.outcomes(seed, &op));
        let clock = process_clock();
        let store = Store::open(local_options(dir.path(), backend, &clock))
            .unwrap_or_else(|e| panic!("{ctx}: reopen after the kill: {e}"));
        let storage: Arc<dyn Storage> = Arc::new(PreadStorage::new(dir.path()).expect("storage"));
        match verify_family(&store, &storage, seed, FAMILY, &candidates) {
            Verdict::Match(n) => {
                *tally.in_flight.entry((kind.clone(), n > 0)).or_default() += 1;
                model = candidates[n].clone();
            }
            Verdict::Mismatch {
                detail,
                lost,
                wrong,
            } => panic!(
                "{ctx}: after a kill during {kind} op {} ({op:?}) the store is neither the \
                 state before nor after it ({lost} lost, {wrong} wrong): {detail}",
                model.applied
            ),
            Verdict::Error(e) => panic!("{ctx}: reading the store back failed: {e}"),
        }
        store.close().expect("close");
        let report = check_storage(storage)
            .unwrap_or_else(|e| panic!("{ctx}: the integrity checker could not run: {e}"));
        assert!(report.is_ok(), "{ctx}: integrity check: {report}");
        eprintln!(
            "{ctx}: acked up to {acked:?}; {kind} (op {}) in flight{}; {report}",
            model.applied,
            if ready { "" } else { " (killed while opening)" }
        );
        cycle += 1;
    }
    eprintln!(
        "[{test}] seed {root}: {cycle} kills in {:.1?}, {} acknowledged operations, {} during \
         startup; in flight at the kill (kind, took effect): {:?}",
        started.elapsed(),
        tally.acked,
        tally.early_kills,
        tally.in_flight
    );
    // The kills land where they are aimed often enough to mean something.
    let aimed = aimed(&tally);
    assert!(
        aimed >= wanted,
        "only {aimed} of {cycle} kills hit a merge or re-home (wanted {wanted}): {:?}",
        tally.in_flight
    );
}

#[test]
fn merge_and_rehome_survive_sigkill() {
    kill_cycles("merge_and_rehome_survive_sigkill", 30);
}

#[test]
fn slow_merge_and_rehome_survive_sigkill() {
    kill_cycles("slow_merge_and_rehome_survive_sigkill", 150);
}
