//! Crash consistency with real process kills.
//!
//! The test re-executes its own binary as a child (`BOUGH_CRASH_CHILD=<dir>`, filtered to
//! the `crash_child` test) that opens a store on a local backend and writes numbered batches
//! in a loop, a few in flight at a time (so some are group-committed), with background
//! maintenance (expiry, compaction, GC) running every few milliseconds. Batch `n` puts
//! several keys with self-describing values (`b<n>:k<key>:` + filler determined by `n` and the
//! key, some overflow-sized), at user timestamp `n`, and deletes a few others. After each
//! write completes, the child prints `ack <n>` on stdout.
//!
//! The parent SIGKILLs the child at a random moment (sometimes during recovery, before any
//! ack), reopens the store and checks:
//! - every value is exactly what its batch wrote (nothing torn, nothing misplaced);
//! - with `M` the newest batch present, the store equals the state after batches `1..=M`
//!   applied in order: no batch is partly present and none is missing before `M`;
//! - `M ≥` the last acknowledged batch (an acknowledged batch is never lost) and `M` is at
//!   most the number of batches the child had in flight beyond it.
//!
//! The next child continues from `M + 1` on the same directory. Every other recovery runs
//! on the other local backend (the files are the same).

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bough::{Backend, Options, PutOptions, ScanOptions, Store, WriteBatch};
use common::Rng;

const CHILD_DIR: &str = "BOUGH_CRASH_CHILD";
const CHILD_BACKEND: &str = "BOUGH_CRASH_BACKEND";
const CHILD_START: &str = "BOUGH_CRASH_START";
const CHILD_SEED: &str = "BOUGH_CRASH_SEED";
/// Keys in the keyspace.
const KEYS: u64 = 300;
/// Most batches the child has in flight.
const INFLIGHT: u64 = 3;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

/// What batch `n` of a run seeded with `seed` does: puts (key, value) and deletes.
fn batch(seed: u64, n: u64) -> (Vec<(u64, Vec<u8>)>, Vec<u64>) {
    let mut rng = Rng::new(common::mix(seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15)));
    let mut puts = BTreeMap::new();
    let mut dels = BTreeMap::new();
    for _ in 0..rng.urange(1, 12) {
        let k = rng.below(KEYS);
        let len = match rng.below(10) {
            0 => rng.urange(1100, 9000),
            1 | 2 => rng.urange(100, 900),
            _ => rng.urange(0, 40),
        };
        let mut v = format!("b{n}:k{k}:").into_bytes();
        let mut filler = vec![0u8; len];
        rng.fill(&mut filler);
        v.extend(filler);
        puts.insert(k, v);
    }
    for _ in 0..rng.urange(0, 3) {
        let k = rng.below(KEYS);
        if !puts.contains_key(&k) {
            dels.insert(k, ());
        }
    }
    (puts.into_iter().collect(), dels.into_keys().collect())
}

fn options(dir: &Path, backend: Backend) -> Options {
    Options::new(dir)
        .backend(backend)
        .data_file_size(16 * 4096 * 2)
        .checkpoint_chunks(2)
        .manifest_rewrite_bytes(64 * 1024)
        .maintenance_interval_ms(7)
        .compaction_garbage_ratio(0.3)
}

fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::Pread => "pread",
        Backend::IoUring => "io_uring",
        _ => unreachable!("local backends only"),
    }
}

/// The child: writes batches `start..` until killed. A no-op unless `BOUGH_CRASH_CHILD`
/// is set (so the normal test run passes it trivially).
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let backend = match std::env::var(CHILD_BACKEND).as_deref() {
        Ok("io_uring") => Backend::IoUring,
        _ => Backend::Pread,
    };
    let env_u64 = |name: &str| -> u64 {
        std::env::var(name)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("child: {name} missing"))
    };
    let (start, seed) = (env_u64(CHILD_START), env_u64(CHILD_SEED));
    let store = Store::open(options(Path::new(&dir), backend)).expect("child: open");
    let main = store
        .partition("crash", 0)
        .and_then(|p| p.branch("main"))
        .expect("child: branch");
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready {}", store.backend()).expect("stdout");
    out.flush().expect("stdout");
    let mut rng = Rng::new(seed ^ start);
    let mut inflight = std::collections::VecDeque::new();
    let mut n = start;
    loop {
        while inflight.len() < rng.urange(1, INFLIGHT as usize + 1) {
            let (puts, dels) = batch(seed, n);
            let mut b = WriteBatch::new();
            for (k, v) in puts {
                b.put_with(
                    key(k),
                    v,
                    PutOptions {
                        timestamp: Some(n),
                        ..Default::default()
                    },
                );
            }
            for k in dels {
                b.delete_at(key(k), n);
            }
            inflight.push_back((n, main.write(b)));
            n += 1;
        }
        let (done, fut) = inflight.pop_front().expect("in flight");
        common::block_on(fut).unwrap_or_else(|e| panic!("child: batch {done}: {e}"));
        writeln!(out, "ack {done}").expect("stdout");
        out.flush().expect("stdout");
        if done % 50 == 0 {
            main.compact_now().expect("child: compact");
        }
    }
}

/// Reads the store in `dir` and checks it against the batches; returns the newest batch
/// present (0 = none).
fn verify(dir: &Path, backend: Backend, seed: u64, acked: u64, submitted_max: u64) -> u64 {
    let store = Store::open(options(dir, backend).maintenance_interval_ms(0))
        .unwrap_or_else(|e| panic!("reopen after the kill: {e}"));
    assert_eq!(store.backend().to_string(), backend_name(backend));
    let main = store
        .partition("crash", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    let all = main
        .scan_blocking(&ScanOptions::default())
        .unwrap_or_else(|e| panic!("scan after the kill: {e}"));
    let mut newest = 0;
    let mut got = BTreeMap::new();
    for kv in &all.entries {
        let text = String::from_utf8_lossy(&kv.value.value[..kv.value.value.len().min(32)]);
        let mut parts = text.splitn(3, ':');
        let n: u64 = parts
            .next()
            .and_then(|s| s.strip_prefix('b'))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("value of {:?} is not self-describing", kv.key));
        let k: u64 = parts
            .next()
            .and_then(|s| s.strip_prefix('k'))
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("value of {:?} names no key", kv.key));
        assert_eq!(kv.key, key(k), "a value of key {k} sits under another key");
        assert_eq!(kv.value.timestamp, n, "timestamp of {:?}", kv.key);
        let (puts, _) = batch(seed, n);
        let want = puts
            .iter()
            .find(|(pk, _)| *pk == k)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("batch {n} never wrote key {k}"));
        assert!(
            kv.value.value == *want,
            "value of key {k} from batch {n} is torn"
        );
        newest = newest.max(n);
        got.insert(k, n);
    }
    assert!(
        newest >= acked,
        "acknowledged batch {acked} was lost: the newest batch present is {newest}"
    );
    assert!(
        newest <= submitted_max,
        "batch {newest} is present but at most {submitted_max} could have been submitted"
    );
    // The state after batches 1..=newest, in order.
    let mut want = BTreeMap::new();
    for n in 1..=newest {
        let (puts, dels) = batch(seed, n);
        for (k, _) in puts {
            want.insert(k, n);
        }
        for k in dels {
            want.remove(&k);
        }
    }
    if got != want {
        let diff: Vec<_> = (0..KEYS)
            .filter(|k| got.get(k) != want.get(k))
            .take(10)
            .map(|k| (k, got.get(&k), want.get(&k)))
            .collect();
        panic!(
            "the store is not the state after batches 1..={newest} (acked {acked}): \
             (key, batch present, batch expected) {diff:?}"
        );
    }
    store.close().expect("close");
    newest
}

/// Spawns the child and reads its acks.
struct Child {
    proc: std::process::Child,
    lines: mpsc::Receiver<String>,
}

fn spawn(dir: &Path, backend: Backend, start: u64, seed: u64) -> Child {
    let exe = std::env::current_exe().expect("current_exe");
    let mut proc = Command::new(exe)
        .args([
            "--exact",
            "crash_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_DIR, dir)
        .env(CHILD_BACKEND, backend_name(backend))
        .env(CHILD_START, start.to_string())
        .env(CHILD_SEED, seed.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the child");
    let stdout = proc.stdout.take().expect("child stdout");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Child { proc, lines }
}

fn kill_cycles(test: &str, backend: Backend, cycles: usize) {
    let seed = common::seeds(test, 1)[0];
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut next = 1u64;
    let started = Instant::now();
    let mut total_acked = 0;
    let mut early_kills = 0;
    for cycle in 0..cycles {
        let mut child = spawn(dir.path(), backend, next, seed);
        let mut acked = next - 1;
        // Sometimes kill during open and recovery, before any ack.
        let early = rng.chance(0.15);
        let target = if early {
            0
        } else {
            next - 1 + rng.range(1, 60)
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        let early_at = Instant::now() + Duration::from_millis(rng.range(0, 40));
        loop {
            if early && Instant::now() >= early_at {
                break;
            }
            if !early && acked >= target {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "cycle {cycle}: the child made no progress (acked {acked})"
            );
            match child.lines.recv_timeout(Duration::from_millis(5)) {
                Ok(line) => {
                    if let Some(n) = line.strip_prefix("ack ") {
                        let n: u64 = n.trim().parse().expect("ack number");
                        assert!(n > acked, "acks out of order: {n} after {acked}");
                        acked = n;
                    } else if let Some(b) = line.strip_prefix("ready ") {
                        assert_eq!(b.trim(), backend_name(backend), "child backend");
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.proc.wait().expect("wait");
                    panic!("cycle {cycle}: the child exited by itself: {status}");
                }
            }
        }
        if !early {
            std::thread::sleep(Duration::from_micros(rng.range(0, 15_000)));
        }
        // SIGKILL.
        child.proc.kill().expect("kill");
        let status = child.proc.wait().expect("wait");
        assert!(!status.success(), "the child was not killed: {status}");
        // Acks printed before the kill are acknowledged too.
        while let Ok(line) = child.lines.recv_timeout(Duration::from_secs(5)) {
            if let Some(n) = line.strip_prefix("ack ") {
                acked = acked.max(n.trim().parse().expect("ack number"));
            }
        }
        let submitted_max = acked + INFLIGHT;
        // Recovery reads the same files whichever local backend does it: every other cycle
        // recovers with the other one.
        let reader = match (cycle % 2, backend) {
            (0, b) => b,
            (_, Backend::Pread) => Backend::IoUring,
            _ => Backend::Pread,
        };
        let newest = verify(dir.path(), reader, seed, acked, submitted_max);
        eprintln!(
            "[{test}] cycle {cycle}: batches {next}..: acked up to {acked}, newest present \
             {newest} (recovered on {}){}",
            backend_name(reader),
            if early {
                " (killed during startup)"
            } else {
                ""
            }
        );
        total_acked += acked + 1 - next;
        early_kills += usize::from(early);
        next = newest + 1;
    }
    let files = std::fs::read_dir(dir.path().join("crash.0")).map_or(0, |d| d.count());
    eprintln!(
        "[{test}] seed {seed} on {}: {cycles} kills ({early_kills} during startup), {total_acked} \
         acknowledged batches, {} batches durable, {files} files left, {:.1?}",
        backend_name(backend),
        next - 1,
        started.elapsed()
    );
}

#[test]
fn crash_kill_pread() {
    kill_cycles("crash_kill_pread", Backend::Pread, 20);
}

#[test]
fn crash_kill_io_uring() {
    kill_cycles("crash_kill_io_uring", Backend::IoUring, 20);
}

#[test]
fn slow_crash_kill_pread() {
    kill_cycles("slow_crash_kill_pread", Backend::Pread, 80);
}

#[test]
fn slow_crash_kill_io_uring() {
    kill_cycles("slow_crash_kill_io_uring", Backend::IoUring, 80);
}
