//! The kill test: real processes, real `SIGKILL`.
//!
//! The parent starts the harness binary as a child (`bough-reliability child ...`) on a store
//! directory. The child runs one thread per family — each family's operations one after
//! another: writes on several branches, branch create/delete, archives, restores, merges, new
//! terms, compaction, GC — plus a thread running GC over the whole store, and prints
//! `ack <family> <op>` after each acknowledged operation. The parent kills it with `SIGKILL`
//! at a random moment, reopens the store itself and checks that every family holds exactly
//! its acknowledged operations or those plus the one that was in flight, then runs the
//! integrity checker. The next child resumes each family where the store says it is, on the
//! same directory, so crashes pile up on a store with history (orphan files, older terms,
//! leftovers of earlier crashes); every `generation` cycles a fresh directory starts, and the
//! backend alternates between io_uring and pread per generation.
//!
//! The values are self-describing and the workload is a pure function of the seed, so the
//! parent needs nothing from the child but its stream of acknowledgements.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bough::io::{PreadStorage, Storage, UringStorage};
use bough::{Backend, ManualClock, Options, Store, StoreBuilder};

use crate::exec::{Verdict, execute, tune, verify_family};
use crate::report::{Tally, guarded};
use crate::rng::{Rng, mix};
use crate::workload::{FamilyModel, WorkloadConfig};

/// How big a kill test is.
#[derive(Debug, Clone, Copy)]
pub struct KillConfig {
    /// Kill cycles.
    pub cycles: u64,
    /// Cycles on one directory before a fresh one.
    pub generation: u64,
    /// The kill comes this many ms after the child is ready, at least...
    pub min_ms: u64,
    /// ... and at most.
    pub max_ms: u64,
    /// The child's workload (per family).
    pub workload: WorkloadConfig,
    /// How often the child's GC thread collects the whole store.
    pub gc_every_ms: u64,
}

impl KillConfig {
    /// CI: 120 cycles.
    pub fn short() -> Self {
        KillConfig {
            cycles: 120,
            generation: 10,
            min_ms: 5,
            max_ms: 250,
            workload: WorkloadConfig {
                families: 3,
                ops_per_family: 100_000,
                keys: 40,
                max_branches: 5,
            },
            gc_every_ms: 20,
        }
    }

    /// Long: 600 cycles.
    pub fn long() -> Self {
        KillConfig {
            cycles: 600,
            generation: 20,
            max_ms: 600,
            ..Self::short()
        }
    }
}

fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::IoUring => "io_uring",
        Backend::Pread => "pread",
        Backend::Memory => "memory",
        _ => "auto",
    }
}

fn parse_backend(s: &str) -> Result<Backend, String> {
    match s {
        "io_uring" => Ok(Backend::IoUring),
        "pread" => Ok(Backend::Pread),
        other => Err(format!("unknown backend {other:?} (io_uring or pread)")),
    }
}

/// Store options for a local directory.
pub fn local_options(dir: &Path, backend: Backend, clock: &ManualClock) -> StoreBuilder {
    Store::builder(tune(Options::new(dir)).backend(backend)).clock(Arc::new(clock.clone()))
}

/// A clock far above every earlier run's timestamps: now in ms × 1000, advanced by one per
/// operation (fewer than 1000 operations per ms, so a later process always starts above).
fn process_clock() -> ManualClock {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    ManualClock::new(ms.saturating_mul(1000))
}

// ---------------------------------------------------------------------------------------
// The child
// ---------------------------------------------------------------------------------------

/// What the child is told to do.
#[derive(Debug, Clone)]
pub struct ChildArgs {
    /// The store directory.
    pub dir: PathBuf,
    /// The backend.
    pub backend: Backend,
    /// The workload seed.
    pub seed: u64,
    /// The workload.
    pub workload: WorkloadConfig,
    /// Operations each family already applied (where to resume).
    pub start: Vec<usize>,
    /// Operations a crash cut short: (family, op, outcome), see
    /// [`FamilyModel::after_with`].
    pub partial: Vec<(u32, usize, usize)>,
    /// GC thread period.
    pub gc_every_ms: u64,
}

impl ChildArgs {
    /// Command-line arguments for the `child` subcommand.
    pub fn to_args(&self) -> Vec<String> {
        let w = &self.workload;
        vec![
            "child".into(),
            "--dir".into(),
            self.dir.display().to_string(),
            "--backend".into(),
            backend_name(self.backend).into(),
            "--seed".into(),
            self.seed.to_string(),
            "--families".into(),
            w.families.to_string(),
            "--ops".into(),
            w.ops_per_family.to_string(),
            "--keys".into(),
            w.keys.to_string(),
            "--max-branches".into(),
            w.max_branches.to_string(),
            "--start".into(),
            self.start
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(","),
            "--gc-every-ms".into(),
            self.gc_every_ms.to_string(),
            "--partial".into(),
            self.partial
                .iter()
                .map(|(f, i, k)| format!("{f}:{i}:{k}"))
                .collect::<Vec<_>>()
                .join(","),
        ]
    }

    /// Parses what [`to_args`](Self::to_args) wrote (after `child`).
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let mut a = ChildArgs {
            dir: PathBuf::new(),
            backend: Backend::Pread,
            seed: 0,
            workload: WorkloadConfig::default(),
            start: Vec::new(),
            partial: Vec::new(),
            gc_every_ms: 20,
        };
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let v = it
                .next()
                .ok_or_else(|| format!("{flag} needs a value"))?
                .as_str();
            let num = |v: &str| v.parse::<u64>().map_err(|_| format!("{flag} {v:?}"));
            match flag.as_str() {
                "--dir" => a.dir = PathBuf::from(v),
                "--backend" => a.backend = parse_backend(v)?,
                "--seed" => a.seed = crate::rng::parse_seed(v)?,
                "--families" => a.workload.families = num(v)? as u32,
                "--ops" => a.workload.ops_per_family = num(v)? as usize,
                "--keys" => a.workload.keys = num(v)? as u32,
                "--max-branches" => a.workload.max_branches = num(v)? as usize,
                "--start" => {
                    a.start = v
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(|s| num(s).map(|n| n as usize))
                        .collect::<Result<_, _>>()?
                }
                "--gc-every-ms" => a.gc_every_ms = num(v)?,
                "--partial" => {
                    for item in v.split(',').filter(|s| !s.is_empty()) {
                        let p: Vec<u64> = item.split(':').map(num).collect::<Result<_, _>>()?;
                        let [f, i, k] = p.as_slice() else {
                            return Err(format!("--partial {item:?}: want family:op:outcome"));
                        };
                        a.partial.push((*f as u32, *i as usize, *k as usize));
                    }
                }
                other => return Err(format!("unknown flag {other}")),
            }
        }
        if a.dir.as_os_str().is_empty() {
            return Err("--dir is required".into());
        }
        a.start.resize(a.workload.families as usize, 0);
        Ok(a)
    }
}

fn say(line: &str) {
    let out = std::io::stdout();
    let mut out = out.lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The child process: runs the workload until killed (or done). Exit code 0 when every
/// family finished, 3 when an operation failed.
pub fn child_main(args: &ChildArgs) -> i32 {
    let clock = process_clock();
    let store = match Store::open(local_options(&args.dir, args.backend, &clock)) {
        Ok(s) => s,
        Err(e) => {
            say(&format!("err open: {e}"));
            return 3;
        }
    };
    say(&format!("ready {}", store.backend()));
    let failed = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let gc = s.spawn(|| {
            while !done.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(args.gc_every_ms.max(1)));
                if let Err(e) = store.gc() {
                    say(&format!("err gc: {e}"));
                    failed.store(true, Ordering::Release);
                    return;
                }
            }
        });
        let workers: Vec<_> = (0..args.workload.families)
            .map(|f| {
                let (store, clock, failed) = (&store, &clock, &failed);
                s.spawn(move || {
                    let start = args.start.get(f as usize).copied().unwrap_or(0);
                    let partial: Vec<(usize, usize)> = args
                        .partial
                        .iter()
                        .filter(|(pf, _, _)| *pf == f)
                        .map(|&(_, i, k)| (i, k))
                        .collect();
                    let mut m =
                        FamilyModel::after_with(args.seed, &args.workload, f, start, &partial);
                    while m.applied < args.workload.ops_per_family {
                        if failed.load(Ordering::Acquire) {
                            return;
                        }
                        let op = m.next_op(args.seed, &args.workload);
                        clock.advance(1);
                        if let Err(e) = execute(store, args.seed, f, m.applied, &op) {
                            say(&format!(
                                "err family {f} op {} {}: {:?} {e}",
                                m.applied,
                                op.kind(),
                                e.kind()
                            ));
                            failed.store(true, Ordering::Release);
                            return;
                        }
                        say(&format!("ack {f} {}", m.applied));
                        m.apply(args.seed, &op);
                    }
                    say(&format!("done {f}"));
                })
            })
            .collect();
        for w in workers {
            let _ = w.join();
        }
        done.store(true, Ordering::Release);
        let _ = gc.join();
    });
    let _ = store.close();
    if failed.load(Ordering::Acquire) { 3 } else { 0 }
}

// ---------------------------------------------------------------------------------------
// The parent
// ---------------------------------------------------------------------------------------

/// Whether io_uring works here (else the kill test runs pread only, and says so).
pub fn uring_available() -> bool {
    UringStorage::probe().is_ok()
}

struct Generation {
    dir: tempfile::TempDir,
    backend: Backend,
    models: Vec<FamilyModel>,
    /// Operations a kill cut short, as the store showed them: (family, op, outcome).
    partial: Vec<(u32, usize, usize)>,
    cycles: u64,
}

/// Runs the kill test with the harness binary `exe` as the child.
pub fn run(seed: u64, cfg: &KillConfig, exe: &Path) -> Tally {
    guarded("kill test", || run_inner(seed, cfg, exe))
}

fn run_inner(seed: u64, cfg: &KillConfig, exe: &Path) -> Tally {
    let mut tally = Tally::default();
    let backends: Vec<Backend> = if uring_available() {
        vec![Backend::IoUring, Backend::Pread]
    } else {
        eprintln!("kill test: io_uring is unavailable here; pread only");
        vec![Backend::Pread]
    };
    let mut rng = Rng::derive(seed, &[0x4B49]);
    let mut generation: Option<Generation> = None;
    let mut gen_no = 0u64;
    let started = Instant::now();
    for cycle in 0..cfg.cycles {
        let g = match generation.take() {
            Some(g) if g.cycles < cfg.generation => g,
            _ => {
                let dir = match tempfile::Builder::new().prefix("bough-kill-").tempdir() {
                    Ok(d) => d,
                    Err(e) => {
                        tally.fail(format!("kill test: no temporary directory: {e}"));
                        return tally;
                    }
                };
                let backend = backends[(gen_no as usize) % backends.len()];
                gen_no += 1;
                Generation {
                    dir,
                    backend,
                    models: (0..cfg.workload.families).map(FamilyModel::new).collect(),
                    partial: Vec::new(),
                    cycles: 0,
                }
            }
        };
        let delay = rng.range(cfg.min_ms, cfg.max_ms + 1);
        let wseed = mix(seed, &[gen_no, 0x4745]);
        match kill_cycle(wseed, cfg, exe, g, delay, &mut tally) {
            Some(mut g) => {
                g.cycles += 1;
                let all_done = g
                    .models
                    .iter()
                    .all(|m| m.applied >= cfg.workload.ops_per_family);
                if !all_done {
                    generation = Some(g);
                }
            }
            None => {
                eprintln!("kill test: cycle {cycle} failed; starting a fresh directory");
            }
        }
    }
    eprintln!(
        "kill test: {} cycles in {:.1} s",
        cfg.cycles,
        started.elapsed().as_secs_f64()
    );
    tally
}

/// One cycle: start the child, kill it, verify. Returns the generation to continue with,
/// or `None` after a failure (the directory is kept for inspection).
fn kill_cycle(
    seed: u64,
    cfg: &KillConfig,
    exe: &Path,
    mut g: Generation,
    delay_ms: u64,
    tally: &mut Tally,
) -> Option<Generation> {
    let args = ChildArgs {
        dir: g.dir.path().to_path_buf(),
        backend: g.backend,
        seed,
        workload: cfg.workload,
        start: g.models.iter().map(|m| m.applied).collect(),
        partial: g.partial.clone(),
        gc_every_ms: cfg.gc_every_ms,
    };
    let ctx = format!(
        "kill cycle (workload seed {seed}, {} backend, dir {}, start {:?}, partial {:?}, kill after {delay_ms} ms)",
        backend_name(g.backend),
        g.dir.path().display(),
        args.start,
        args.partial
    );
    // The child rebuilds each family's model from (seed, start, partial): it must be the
    // model this process holds.
    for m in &g.models {
        let partial: Vec<(usize, usize)> = args
            .partial
            .iter()
            .filter(|(f, _, _)| *f == m.family)
            .map(|&(_, i, k)| (i, k))
            .collect();
        let rebuilt = FamilyModel::after_with(seed, &cfg.workload, m.family, m.applied, &partial);
        if rebuilt != *m {
            tally.fail(format!(
                "{ctx}: family {}: the model rebuilt from the seed differs from the one verified",
                m.family
            ));
            return None;
        }
    }
    let mut child = match Command::new(exe)
        .args(args.to_args())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            tally.fail(format!("{ctx}: cannot start {}: {e}", exe.display()));
            return None;
        }
    };
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        if let Some(out) = stdout {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        }
    });
    let stderr = child.stderr.take();
    let err_reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut e) = stderr {
            let _ = std::io::Read::read_to_string(&mut e, &mut text);
        }
        text
    });
    let mut lines = Vec::new();
    // Wait for the child to open the store (that is its recovery).
    let ready_by = Instant::now() + Duration::from_secs(60);
    let mut ready = false;
    while Instant::now() < ready_by {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(l) => {
                let is_ready = l.starts_with("ready");
                lines.push(l);
                if is_ready {
                    ready = true;
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    if ready {
        std::thread::sleep(Duration::from_millis(delay_ms));
    }
    let finished_first = matches!(child.try_wait(), Ok(Some(_)));
    let _ = child.kill(); // SIGKILL
    let status = child.wait();
    let _ = reader.join();
    lines.extend(rx.try_iter());
    let stderr_text = err_reader.join().unwrap_or_default();
    if !ready {
        tally.fail(format!(
            "{ctx}: the child never opened the store: {:?}; stdout {lines:?}; stderr {stderr_text}",
            status
        ));
        let _ = g.dir.keep();
        return None;
    }
    match g.backend {
        Backend::IoUring => tally.kill_cycles_uring += 1,
        _ => tally.kill_cycles_pread += 1,
    }
    if finished_first {
        tally.kill_cycles_finished += 1;
    }
    let mut acked: Vec<Option<usize>> = vec![None; g.models.len()];
    let mut failed = false;
    for l in &lines {
        let parts: Vec<&str> = l.split_whitespace().collect();
        match parts.as_slice() {
            ["ack", f, i] => {
                if let (Ok(f), Ok(i)) = (f.parse::<usize>(), i.parse::<usize>())
                    && f < acked.len()
                {
                    acked[f] = Some(acked[f].map_or(i, |a: usize| a.max(i)));
                }
            }
            ["err", ..] => {
                tally.fail(format!(
                    "{ctx}: the child failed: {l}; stderr {stderr_text}"
                ));
                failed = true;
            }
            _ => {}
        }
    }
    if !stderr_text.trim().is_empty() && stderr_text.contains("panicked") {
        tally.panics += 1;
        tally.fail(format!("{ctx}: the child panicked: {stderr_text}"));
        failed = true;
    }
    // Bring each model to its acknowledged prefix.
    for (m, a) in g.models.iter_mut().zip(&acked) {
        if let Some(a) = a {
            if *a < m.applied {
                tally.fail(format!(
                    "{ctx}: family {} acknowledged op {a}, below its start {}",
                    m.family, m.applied
                ));
                failed = true;
                continue;
            }
            tally.kill_acked_ops += (*a + 1 - m.applied) as u64;
            while m.applied <= *a {
                let op = m.next_op(seed, &cfg.workload);
                m.apply(seed, &op);
            }
        }
    }
    // Reopen in this process and verify.
    let clock = process_clock();
    let store = match Store::open(local_options(g.dir.path(), g.backend, &clock)) {
        Ok(s) => s,
        Err(e) => {
            tally.fail(format!("{ctx}: reopen after the kill failed: {e}"));
            let _ = g.dir.keep();
            return None;
        }
    };
    let storage: Arc<dyn Storage> = match PreadStorage::new(g.dir.path()) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            tally.fail(format!(
                "{ctx}: cannot open the directory for checking: {e}"
            ));
            return None;
        }
    };
    let mut next_models = Vec::new();
    for m in &g.models {
        let mut candidates = vec![m.clone()];
        if m.applied < cfg.workload.ops_per_family {
            let op = m.next_op(seed, &cfg.workload);
            candidates.extend(m.outcomes(seed, &op));
        }
        match verify_family(&store, &storage, seed, m.family, &candidates) {
            Verdict::Match(n) => {
                // The in-flight operation stopped half-way: the next child must know.
                if n >= 1 && n + 1 < candidates.len() {
                    g.partial.push((m.family, m.applied, n - 1));
                }
                next_models.push(candidates[n].clone());
            }
            Verdict::Mismatch {
                detail,
                lost,
                wrong,
            } => {
                tally.mismatch(lost, wrong, format!(
                    "{ctx}: family {} is not a prefix holding its {} acknowledged ops: {detail}",
                    m.family, m.applied
                ));
                failed = true;
            }
            Verdict::Error(e) => {
                tally.fail(format!(
                    "{ctx}: reading family {} after the kill failed: {e}",
                    m.family
                ));
                failed = true;
            }
        }
    }
    let _ = store.close();
    tally.integrity_checks += 1;
    match crate::check::check_storage(storage) {
        Ok(r) if r.is_ok() => {}
        Ok(r) => {
            tally.fail(format!("{ctx}: integrity check: {r}"));
            failed = true;
        }
        Err(e) => {
            tally.fail(format!("{ctx}: integrity check could not run: {e}"));
            failed = true;
        }
    }
    if failed {
        let _ = g.dir.keep();
        return None;
    }
    g.models = next_models;
    Some(g)
}
