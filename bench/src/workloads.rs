//! The workloads. Every engine gets the same keys, values, batch sizes, thread counts and
//! operation counts; each figure is measured within one run on one machine.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::Res;
use crate::cloud::{self, S3Env};
use crate::engines::{self, Engine, Pair};
use crate::measure::Requests;
use crate::measure::{self, ColdMethod, Latencies, ProcIo, Rng, random_key, sorted_key, value};

/// Which set of sizes a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Tiny sizes that prove every row runs (seconds per engine); no figure means anything.
    Smoke,
    /// The quick set: a data set larger than every engine's memtable or write buffer.
    Quick,
    Full,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Smoke => "smoke",
            Mode::Quick => "quick",
            Mode::Full => "full",
        }
    }
}

/// The largest in-memory write buffer among the engines: fjall's 64 MiB memtable
/// (`KeyspaceCreateOptions::max_memtable_size` default), RocksDB's default write buffer is
/// 64 MiB too, and Bough's planned `write_buffer_bytes` (issue 16) defaults to 64 MiB. The
/// quick and full data sets are larger than 1.5x this, so every load row contains flushes
/// and compactions of the LSMs (and, once it exists, checkpoints of Bough's buffer).
pub const LARGEST_WRITE_BUFFER: u64 = 64 << 20;

/// Sizes of one run.
#[derive(Debug, Clone)]
pub struct Sizes {
    pub mode: Mode,
    /// Keys in the main data set.
    pub keys: u64,
    pub value_len: usize,
    /// Cache budget (bytes) while the data set is meant to fit.
    pub warm_cache: u64,
    /// Cache budget (bytes) for the cold reads: a fraction of the data set.
    pub cold_cache: u64,
    pub overwrite_batches: u64,
    pub warm_gets: u64,
    pub scans: u64,
    pub mixed_secs: f64,
    pub commits: u64,
    pub cold_rounds: u64,
    pub cold_gets_per_round: u64,
    pub large_values: u64,
    pub large_len: usize,
    pub branch_sizes: Vec<u64>,
    pub gc_counts: Vec<usize>,
    /// Branch counts the agent-scale series times creation at (the last is the largest).
    pub agent_counts: Vec<usize>,
    /// Keys in the agent-scale partition's `main`.
    pub agent_base_keys: u64,
    pub diff_base: u64,
    pub divergences: Vec<u64>,
    /// The cloud set (`--cloud`): keys loaded in durable batches of 1,000.
    pub cloud_keys: u64,
    /// Memory budget of the cloud engines while warm (their local disk caches are
    /// `cloud::LOCAL_CACHE_BYTES`).
    pub cloud_warm_cache: u64,
    pub cloud_warm_gets: u64,
    pub cloud_scans: u64,
    pub cloud_commits: u64,
    pub cloud_cold_rounds: u64,
    pub cloud_cold_gets_per_round: u64,
}

impl Sizes {
    pub fn new(mode: Mode) -> Sizes {
        if mode == Mode::Smoke {
            Sizes {
                mode,
                keys: 20_000,
                value_len: 100,
                warm_cache: 64 << 20,
                cold_cache: 4 << 20,
                overwrite_batches: 5,
                warm_gets: 10_000,
                scans: 1_000,
                mixed_secs: 0.5,
                commits: 80,
                cold_rounds: 1,
                cold_gets_per_round: 320,
                large_values: 16,
                large_len: 256 << 10,
                branch_sizes: vec![2_000, 20_000],
                gc_counts: vec![10, 50],
                agent_counts: vec![10, 200],
                agent_base_keys: 2_000,
                diff_base: 20_000,
                divergences: vec![10, 1_000],
                cloud_keys: 5_000,
                cloud_warm_cache: 16 << 20,
                cloud_warm_gets: 2_000,
                cloud_scans: 200,
                cloud_commits: 20,
                cloud_cold_rounds: 1,
                cloud_cold_gets_per_round: 96,
            }
        } else if mode == Mode::Quick {
            Sizes {
                mode,
                // 1 M × 116 B = 116 MB of user data: 1.7x the largest memtable / write
                // buffer (LARGEST_WRITE_BUFFER), so the LSMs flush and compact inside the
                // load rows (the 2026-12-01 quick set of 200 k keys fitted in fjall's
                // memtable and its load rows held no flush at all).
                keys: 1_000_000,
                value_len: 100,
                warm_cache: 256 << 20,
                cold_cache: 4 << 20,
                overwrite_batches: 50,
                warm_gets: 200_000,
                scans: 20_000,
                mixed_secs: 3.0,
                commits: 1_000,
                cold_rounds: 4,
                cold_gets_per_round: 2_000,
                large_values: 128,
                large_len: 256 << 10,
                branch_sizes: vec![10_000, 100_000, 1_000_000],
                gc_counts: vec![100, 1_000],
                agent_counts: vec![10, 1_000, 10_000],
                agent_base_keys: 100_000,
                diff_base: 200_000,
                divergences: vec![10, 1_000, 100_000],
                cloud_keys: 50_000,
                cloud_warm_cache: 64 << 20,
                cloud_warm_gets: 20_000,
                cloud_scans: 2_000,
                cloud_commits: 200,
                cloud_cold_rounds: 2,
                cloud_cold_gets_per_round: 400,
            }
        } else {
            Sizes {
                mode,
                keys: 2_000_000,
                value_len: 100,
                warm_cache: 1 << 30,
                cold_cache: 32 << 20,
                overwrite_batches: 500,
                warm_gets: 1_000_000,
                scans: 100_000,
                mixed_secs: 15.0,
                commits: 5_000,
                cold_rounds: 10,
                cold_gets_per_round: 5_000,
                large_values: 1_024,
                large_len: 256 << 10,
                branch_sizes: vec![10_000, 1_000_000, 10_000_000],
                gc_counts: vec![100, 1_000, 10_000],
                agent_counts: vec![10, 1_000, 100_000],
                agent_base_keys: 100_000,
                diff_base: 1_000_000,
                divergences: vec![10, 1_000, 100_000],
                cloud_keys: 500_000,
                cloud_warm_cache: 256 << 20,
                cloud_warm_gets: 100_000,
                cloud_scans: 10_000,
                cloud_commits: 500,
                cloud_cold_rounds: 4,
                cloud_cold_gets_per_round: 1_000,
            }
        }
    }
}

/// One measured figure of one engine.
#[derive(Debug, Clone, Default)]
pub struct Row {
    pub workload: String,
    pub engine: String,
    /// What an operation is (`keys`, `gets`, `commits`, ...).
    pub unit: String,
    pub ops: u64,
    pub secs: f64,
    pub ops_per_sec: f64,
    /// What one latency sample is (`batch`, `get`, ...).
    pub lat_of: String,
    pub p50_us: f64,
    pub p99_us: f64,
    /// Bytes this process caused to be written to storage per byte of user data.
    pub write_amp: Option<f64>,
    /// The same from the engine's own counter (Bough).
    pub engine_write_amp: Option<f64>,
    /// Device reads per get the engine counted (Bough's io_stats).
    pub engine_reads_per_get: Option<f64>,
    /// 4 KiB units read from storage per get (/proc/self/io read_bytes, read-ahead included).
    pub read_4k_per_get: Option<f64>,
    /// File + directory syncs per operation the engine counted (Bough's io_stats).
    pub engine_syncs_per_op: Option<f64>,
    /// Bytes on disk after the workload.
    pub disk_bytes: Option<u64>,
    /// Seconds of the engine's deferred work (`Engine::settle`) timed at the end of a load
    /// and included in `secs` (LSM flush + compaction, Bough's maintenance pass).
    pub settle_secs: Option<f64>,
    /// Object-store requests of the measured phase (cloud engines).
    pub requests: Option<Requests>,
    pub note: String,
}

impl Row {
    /// Mean microseconds per op, from the throughput (each thread's share for the
    /// concurrent rows is not separated: this is the single-thread reading).
    pub fn wait_per_op(&self) -> f64 {
        if self.ops_per_sec > 0.0 {
            1e6 / self.ops_per_sec
        } else {
            0.0
        }
    }
}

impl Row {
    /// The row back from [`Row::to_json`] (a baseline's report); object requests are not
    /// carried over (the baselines run local engines only).
    pub fn from_json(v: &serde_json::Value) -> Option<Row> {
        let s = |k: &str| v[k].as_str().map(str::to_string);
        let f = |k: &str| v[k].as_f64();
        Some(Row {
            workload: s("workload")?,
            engine: s("engine")?,
            unit: s("unit")?,
            ops: v["ops"].as_u64()?,
            secs: f("secs")?,
            ops_per_sec: f("ops_per_sec")?,
            lat_of: s("latency_of")?,
            p50_us: f("p50_us")?,
            p99_us: f("p99_us")?,
            write_amp: f("bytes_written_per_user_byte"),
            engine_write_amp: f("engine_bytes_written_per_user_byte"),
            engine_reads_per_get: f("engine_reads_per_get"),
            read_4k_per_get: f("read_4k_per_get"),
            engine_syncs_per_op: f("engine_syncs_per_op"),
            disk_bytes: v["disk_bytes"].as_u64(),
            settle_secs: f("settle_secs"),
            requests: None,
            note: s("note").unwrap_or_default(),
        })
    }

    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "workload": self.workload,
            "engine": self.engine,
            "unit": self.unit,
            "ops": self.ops,
            "secs": self.secs,
            "ops_per_sec": self.ops_per_sec,
            "latency_of": self.lat_of,
            "p50_us": self.p50_us,
            "p99_us": self.p99_us,
            "bytes_written_per_user_byte": self.write_amp,
            "engine_bytes_written_per_user_byte": self.engine_write_amp,
            "engine_reads_per_get": self.engine_reads_per_get,
            "read_4k_per_get": self.read_4k_per_get,
            "engine_syncs_per_op": self.engine_syncs_per_op,
            "disk_bytes": self.disk_bytes,
            "settle_secs": self.settle_secs,
            "object_requests": self.requests.map(|q| {
                let per = |v: u64| v as f64 / self.ops.max(1) as f64;
                json!({
                    "gets": q.gets, "get_bytes": q.get_bytes,
                    "puts": q.puts, "put_bytes": q.put_bytes,
                    "heads": q.heads, "lists": q.lists, "deletes": q.deletes,
                    "gets_per_op": per(q.gets), "puts_per_op": per(q.puts),
                    "get_bytes_per_op": per(q.get_bytes), "put_bytes_per_op": per(q.put_bytes),
                    "other_requests_per_op": per(q.heads + q.lists + q.deletes),
                })
            }),
            "note": self.note,
        })
    }
}

/// One point of a Bough-only (or checkpoint) series.
#[derive(Debug, Clone)]
pub struct Point {
    pub series: String,
    pub x: f64,
    pub x_label: String,
    pub ms: f64,
    pub note: String,
}

/// What a workload run leaves behind for the report.
#[derive(Debug, Default)]
pub struct Results {
    pub rows: Vec<Row>,
    pub points: Vec<Point>,
    /// The agent-scale series, when it ran.
    pub agent_scale: Option<crate::agent_scale::AgentScale>,
    pub errors: Vec<String>,
}

impl Results {
    pub fn find(&self, workload: &str, engine: &str) -> Option<&Row> {
        self.rows
            .iter()
            .find(|r| r.workload == workload && r.engine == engine)
    }
}

fn fresh_dir(base: &Path, name: &str) -> Res<PathBuf> {
    let d = base.join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d)?;
    Ok(d)
}

struct Timed {
    lat: Latencies,
    secs: f64,
    io: ProcIo,
    engine_reads: Option<u64>,
    engine_writes: Option<u64>,
    engine_syncs: Option<u64>,
    req: Option<Requests>,
}

/// Runs `f` once per op index in `0..n`, timing each call.
fn timed(e: &dyn Engine, n: u64, mut f: impl FnMut(u64) -> Res<()>) -> Res<Timed> {
    let mut lat = Latencies::with_capacity(n as usize);
    let (r0, w0, s0) = (e.engine_reads(), e.engine_write_bytes(), e.engine_syncs());
    let q0 = e.object_requests();
    let io0 = ProcIo::now();
    let start = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        f(i)?;
        lat.push(t.elapsed());
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(Timed {
        lat,
        secs,
        io: ProcIo::now().since(io0),
        engine_reads: e.engine_reads().zip(r0).map(|(a, b)| a - b),
        engine_writes: e.engine_write_bytes().zip(w0).map(|(a, b)| a - b),
        engine_syncs: e.engine_syncs().zip(s0).map(|(a, b)| a - b),
        req: e.object_requests().zip(q0).map(|(a, b)| a.since(b)),
    })
}

/// Runs the engine's deferred work (`Engine::settle`) and adds its time, its process I/O
/// and its engine counters to `t`, so a write row pays for the flushes and compactions
/// (or maintenance) it caused. Returns the settle's seconds.
fn settle_counted(e: &dyn Engine, t: &mut Timed) -> Res<f64> {
    let (w0, s0) = (e.engine_write_bytes(), e.engine_syncs());
    let io0 = ProcIo::now();
    let start = Instant::now();
    e.settle()?;
    let secs = start.elapsed().as_secs_f64();
    let io = ProcIo::now().since(io0);
    t.secs += secs;
    t.io.read_bytes += io.read_bytes;
    t.io.write_bytes += io.write_bytes;
    if let (Some(total), Some(a), Some(b)) = (t.engine_writes.as_mut(), e.engine_write_bytes(), w0)
    {
        *total += a - b;
    }
    if let (Some(total), Some(a), Some(b)) = (t.engine_syncs.as_mut(), e.engine_syncs(), s0) {
        *total += a - b;
    }
    Ok(secs)
}

/// The note of a row whose time includes a settle.
fn settle_note(total: f64, settle: f64) -> String {
    format!(
        "time = writes {:.2} s + settle {:.2} s (the engine's deferred flush/compaction/maintenance, counted)",
        total - settle,
        settle
    )
}

#[allow(clippy::too_many_arguments)]
fn row(
    workload: &str,
    engine: &str,
    unit: &str,
    ops: u64,
    lat_of: &str,
    mut t: Timed,
    user_bytes: Option<u64>,
    gets: Option<u64>,
) -> Row {
    Row {
        workload: workload.into(),
        engine: engine.into(),
        unit: unit.into(),
        ops,
        secs: t.secs,
        ops_per_sec: ops as f64 / t.secs.max(1e-9),
        lat_of: lat_of.into(),
        p50_us: t.lat.percentile_us(50.0),
        p99_us: t.lat.percentile_us(99.0),
        write_amp: user_bytes.map(|u| t.io.write_bytes as f64 / u.max(1) as f64),
        engine_write_amp: user_bytes
            .zip(t.engine_writes)
            .map(|(u, w)| w as f64 / u.max(1) as f64),
        engine_reads_per_get: gets
            .zip(t.engine_reads)
            .map(|(g, r)| r as f64 / g.max(1) as f64),
        read_4k_per_get: gets.map(|g| t.io.read_bytes as f64 / 4096.0 / g.max(1) as f64),
        engine_syncs_per_op: t.engine_syncs.map(|n| n as f64 / ops.max(1) as f64),
        disk_bytes: None,
        settle_secs: None,
        requests: t.req,
        note: String::new(),
    }
}

fn batch_of(keys: impl Iterator<Item = u64>, key: fn(u64) -> Vec<u8>, vlen: usize) -> Vec<Pair> {
    keys.map(|i| (key(i), value(i, vlen))).collect()
}

/// A stride coprime to `n`: index i of a random-order load writes key `(i * stride) % n`,
/// so every key of `0..n` is written exactly once, in a scattered order.
fn stride_for(n: u64) -> u64 {
    let mut stride = (0x9E37_79B9_7F4A_7C15 % n.max(1)).max(1);
    while gcd(stride, n) != 1 {
        stride += 1;
    }
    stride
}

/// `count` distinct key indexes drawn uniformly from `0..n`, in draw order (a batch may
/// not name a key twice in Bough, so no engine gets one that does).
fn distinct(rng: &mut Rng, n: u64, count: usize) -> Vec<u64> {
    let mut seen = std::collections::HashSet::with_capacity(count);
    let mut out = Vec::with_capacity(count);
    while out.len() < count.min(n as usize) {
        let i = rng.below(n);
        if seen.insert(i) {
            out.push(i);
        }
    }
    out
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Loads `n` keys in durable batches of `batch`; returns the row.
fn load(
    e: &dyn Engine,
    engine: &str,
    workload: &str,
    n: u64,
    batch: u64,
    sorted: bool,
    vlen: usize,
) -> Res<Row> {
    let batches = n.div_ceil(batch);
    let key: fn(u64) -> Vec<u8> = if sorted { sorted_key } else { random_key };
    let stride = stride_for(n);
    let mut t = timed(e, batches, |b| {
        let lo = b * batch;
        let hi = (lo + batch).min(n);
        let pairs = if sorted {
            batch_of(lo..hi, key, vlen)
        } else {
            batch_of(
                (lo..hi).map(|i| (u128::from(i) * u128::from(stride) % u128::from(n)) as u64),
                key,
                vlen,
            )
        };
        e.write_batch(&pairs)
    })?;
    let settle = settle_counted(e, &mut t)?;
    let user = n * (measure::KEY_LEN + vlen) as u64;
    let mut r = row(workload, engine, "keys", n, "batch", t, Some(user), None);
    r.settle_secs = Some(settle);
    r.note = settle_note(r.secs, settle);
    Ok(r)
}

/// Where the gets of [`gets`] go.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// One open engine for every round.
    Open(&'a dyn Engine),
    /// A freshly opened engine for every round (closed after it), so no user-space cache
    /// and no mapping of an earlier round survives into the next.
    Reopen(&'a dyn Fn() -> Res<Box<dyn Engine>>),
}

/// Runs `per_round / threads` gets on each of `threads` threads over keys `0..n`, for
/// `rounds` rounds; with `cold`, the page cache is dropped before each round (after the
/// engine is opened, before anything is timed).
#[allow(clippy::too_many_arguments)]
fn gets(
    src: Source<'_>,
    engine: &str,
    workload: &str,
    n: u64,
    threads: u64,
    rounds: u64,
    per_round: u64,
    cold: Option<ColdMethod>,
) -> Res<Row> {
    let mut lat = Latencies::default();
    let mut secs = 0.0;
    let mut io = ProcIo::default();
    let mut engine_reads: Option<u64> = None;
    let mut req: Option<Requests> = None;
    let mut missing = 0u64;
    for round in 0..rounds {
        let holder;
        let e: &dyn Engine = match src {
            Source::Open(e) => e,
            Source::Reopen(open) => {
                holder = open()?;
                holder.as_ref()
            }
        };
        if cold == Some(ColdMethod::DropCaches) {
            measure::drop_caches()?;
        }
        let r0 = e.engine_reads();
        let q0 = e.object_requests();
        let io0 = ProcIo::now();
        let start = Instant::now();
        let per_thread = per_round / threads;
        let outcomes: Vec<Res<(Latencies, u64)>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    s.spawn(move || -> Res<(Latencies, u64)> {
                        let mut rng = Rng::new(round * 1_000 + t + 17);
                        let mut lat = Latencies::with_capacity(per_thread as usize);
                        let mut missing = 0;
                        for _ in 0..per_thread {
                            let k = random_key(rng.below(n));
                            let at = Instant::now();
                            let got = e.get(&k)?;
                            lat.push(at.elapsed());
                            if got.is_none() {
                                missing += 1;
                            }
                        }
                        Ok((lat, missing))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("reader panicked".into())))
                .collect()
        });
        secs += start.elapsed().as_secs_f64();
        let d = ProcIo::now().since(io0);
        io.read_bytes += d.read_bytes;
        if let (Some(a), Some(b)) = (e.engine_reads(), r0) {
            *engine_reads.get_or_insert(0) += a - b;
        }
        if let (Some(a), Some(b)) = (e.object_requests(), q0) {
            req.get_or_insert_with(Requests::default).add(a.since(b));
        }
        for o in outcomes {
            let (l, m) = o?;
            lat.extend(l);
            missing += m;
        }
    }
    let total = rounds * (per_round / threads) * threads;
    let t = Timed {
        lat,
        secs,
        io,
        engine_reads,
        engine_writes: None,
        engine_syncs: None,
        req,
    };
    let mut r = row(workload, engine, "gets", total, "get", t, None, Some(total));
    if missing > 0 {
        r.note = format!("{missing} gets found no value (expected 0)");
    }
    Ok(r)
}

/// Everything one engine runs, in order. Errors of one workload are recorded and the
/// engine's remaining workloads still run when they can.
pub fn run_engine(name: &str, base: &Path, s: &Sizes, cold: ColdMethod, out: &mut Results) {
    // `space`: the engine's directory, whose size goes next to every row that does not
    // carry one yet (files on disk after the row).
    let mut step = |what: &str, space: Option<&Path>, r: Res<Vec<Row>>| match r {
        Ok(rows) => {
            let disk = space.map(measure::disk_bytes);
            for mut row in rows {
                if row.disk_bytes.is_none() {
                    row.disk_bytes = disk;
                }
                eprintln!(
                    "  {:<14} {:<8} {:>12.0} {}/s  p50 {:>9.1} us  p99 {:>9.1} us  wr/B {}  disk {}",
                    row.workload,
                    row.engine,
                    row.ops_per_sec,
                    row.unit,
                    row.p50_us,
                    row.p99_us,
                    row.write_amp.map_or("-".into(), |w| format!("{w:.2}")),
                    row.disk_bytes
                        .map_or("-".into(), |d| format!("{:.1} MiB", d as f64 / 1048576.0)),
                );
                out.rows.push(row);
            }
        }
        Err(e) => {
            eprintln!("  {what} on {name} failed: {e}");
            out.errors.push(format!("{what} on {name}: {e}"));
        }
    };
    eprintln!("== {name}: {}", engines::describe(name));
    let v = s.value_len;
    for (wl, batch, sorted) in [("fill_seq_1k", 1_000, true), ("fill_rand_1k", 1_000, false)] {
        step(
            wl,
            None,
            (|| {
                let dir = fresh_dir(base, name)?;
                let e = engines::open(name, &dir, s.warm_cache)?;
                let mut r = load(e.as_ref(), name, wl, s.keys, batch, sorted, v)?;
                drop(e);
                r.disk_bytes = Some(measure::disk_bytes(&dir));
                Ok(vec![r])
            })(),
        );
    }
    // The main data set: random keys in batches of 10 k; the next workloads run on it.
    let dir = match fresh_dir(base, name) {
        Ok(d) => d,
        Err(e) => {
            out.errors.push(format!("{name}: {e}"));
            return;
        }
    };
    let owned = match engines::open(name, &dir, s.warm_cache) {
        Ok(e) => e,
        Err(err) => {
            out.errors.push(format!("open {name}: {err}"));
            return;
        }
    };
    let e = owned.as_ref();
    step(
        "fill_rand_10k",
        Some(&dir),
        load(e, name, "fill_rand_10k", s.keys, 10_000, false, v).map(|r| vec![r]),
    );
    step(
        "overwrite",
        Some(&dir),
        (|| {
            let mut rng = Rng::new(7);
            let mut t = timed(e, s.overwrite_batches, |b| {
                let pairs: Vec<Pair> = distinct(&mut rng, s.keys, 1_000)
                    .into_iter()
                    .map(|i| (random_key(i), value(i ^ (b + 1) << 40, v)))
                    .collect();
                e.write_batch(&pairs)
            })?;
            let settle = settle_counted(e, &mut t)?;
            let n = s.overwrite_batches * 1_000;
            let user = n * (measure::KEY_LEN + v) as u64;
            let mut r = row(
                "overwrite_1k",
                name,
                "keys",
                n,
                "batch",
                t,
                Some(user),
                None,
            );
            r.settle_secs = Some(settle);
            r.note = settle_note(r.secs, settle);
            Ok(vec![r])
        })(),
    );
    step(
        "warm gets",
        Some(&dir),
        (|| {
            // Warm-up: the same number of gets, not measured.
            let src = Source::Open(e);
            gets(src, name, "warmup", s.keys, 1, 1, s.warm_gets, None)?;
            let t1 = gets(src, name, "get_warm_t1", s.keys, 1, 1, s.warm_gets, None)?;
            let t2 = gets(src, name, "get_warm_t2", s.keys, 2, 1, s.warm_gets, None)?;
            Ok(vec![t1, t2])
        })(),
    );
    step(
        "scans",
        Some(&dir),
        (|| {
            let mut rows = Vec::new();
            for (wl, len, count) in [("scan_10", 10, s.scans), ("scan_100", 100, s.scans / 10)] {
                let mut rng = Rng::new(11);
                let t = timed(e, count, |_| {
                    let start = random_key(rng.below(s.keys));
                    let got = e.scan(&start, len)?;
                    std::hint::black_box(got);
                    Ok(())
                })?;
                rows.push(row(wl, name, "scans", count, "scan", t, None, None));
            }
            Ok(rows)
        })(),
    );
    step("mixed", Some(&dir), mixed(e, name, s));
    step(
        "single commits",
        Some(&dir),
        (|| {
            let t = timed(e, s.commits, |i| {
                e.write_batch(&[(sorted_key(1 << 40 | i), value(i, v))])
            })?;
            let user = s.commits * (measure::KEY_LEN + v) as u64;
            let r1 = row(
                "commit_1w",
                name,
                "commits",
                s.commits,
                "commit",
                t,
                Some(user),
                None,
            );
            let r8 = concurrent_commits(e, name, s, 8)?;
            Ok(vec![r1, r8])
        })(),
    );
    step("settle", None, e.settle().map(|()| Vec::new()));
    drop(owned);
    // Cold reads: the same data set, reopened with a small cache before every round (an
    // mmap engine's pages stay cached while they are mapped, whatever drop_caches says),
    // page cache dropped after the open.
    step(
        "cold gets",
        None,
        (|| {
            let open = || engines::open(name, &dir, s.cold_cache);
            let disk = measure::disk_bytes(&dir);
            let mut rows = Vec::new();
            for threads in [1, 32] {
                let mut r = gets(
                    Source::Reopen(&open),
                    name,
                    &format!("get_cold_t{threads}"),
                    s.keys,
                    threads,
                    s.cold_rounds,
                    s.cold_gets_per_round,
                    Some(cold),
                )?;
                r.disk_bytes = Some(disk);
                let extra = format!(
                    "data on disk {:.0} MiB = {:.1}x the {} MiB cache",
                    disk as f64 / 1048576.0,
                    disk as f64 / s.cold_cache as f64,
                    s.cold_cache >> 20
                );
                r.note = if r.note.is_empty() {
                    extra
                } else {
                    format!("{}; {extra}", r.note)
                };
                rows.push(r);
            }
            Ok(rows)
        })(),
    );
    let _ = std::fs::remove_dir_all(&dir);
    step(
        "large values",
        None,
        (|| {
            let dir = fresh_dir(base, name)?;
            let owned = engines::open(name, &dir, s.warm_cache)?;
            let e = owned.as_ref();
            let per_batch = 8u64;
            let batches = s.large_values / per_batch;
            let mut t = timed(e, batches, |b| {
                let pairs: Vec<Pair> = (b * per_batch..(b + 1) * per_batch)
                    .map(|i| (sorted_key(i), value(i, s.large_len)))
                    .collect();
                e.write_batch(&pairs)
            })?;
            let settle = settle_counted(e, &mut t)?;
            let n = batches * per_batch;
            let user = n * (measure::KEY_LEN + s.large_len) as u64;
            let mut put = row(
                "large_put_256k",
                name,
                "values",
                n,
                "batch of 8",
                t,
                Some(user),
                None,
            );
            put.settle_secs = Some(settle);
            put.note = settle_note(put.secs, settle);
            put.disk_bytes = Some(measure::disk_bytes(&dir));
            let mut rng = Rng::new(5);
            let t = timed(e, n, |_| {
                let got = e.get(&sorted_key(rng.below(n)))?;
                if got != Some(s.large_len) {
                    return Err("large value missing or wrong length".into());
                }
                Ok(())
            })?;
            let mut get = row("large_get_256k", name, "values", n, "get", t, None, None);
            get.disk_bytes = put.disk_bytes;
            drop(owned);
            let _ = std::fs::remove_dir_all(&dir);
            Ok(vec![put, get])
        })(),
    );
}

/// One writer (durable batches of 100 random existing keys) and two readers (random
/// gets), for a fixed time.
fn mixed(e: &dyn Engine, name: &str, s: &Sizes) -> Res<Vec<Row>> {
    let stop = AtomicBool::new(false);
    let written = AtomicU64::new(0);
    let readers = 2u64;
    let io0 = ProcIo::now();
    let (wlat, rlats, secs) = std::thread::scope(|sc| -> Res<_> {
        let writer = sc.spawn(|| -> Res<Latencies> {
            let mut rng = Rng::new(99);
            let mut lat = Latencies::default();
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let pairs: Vec<Pair> = distinct(&mut rng, s.keys, 100)
                    .into_iter()
                    .map(|i| (random_key(i), value(i ^ round << 32, s.value_len)))
                    .collect();
                let t = Instant::now();
                e.write_batch(&pairs)?;
                lat.push(t.elapsed());
                written.fetch_add(100, Ordering::Relaxed);
                round += 1;
            }
            Ok(lat)
        });
        let start = Instant::now();
        let handles: Vec<_> = (0..readers)
            .map(|t| {
                let stop = &stop;
                sc.spawn(move || -> Res<(Latencies, u64)> {
                    let mut rng = Rng::new(500 + t);
                    let mut lat = Latencies::default();
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let k = random_key(rng.below(s.keys));
                        let at = Instant::now();
                        std::hint::black_box(e.get(&k)?);
                        lat.push(at.elapsed());
                        n += 1;
                    }
                    Ok((lat, n))
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(s.mixed_secs));
        stop.store(true, Ordering::Relaxed);
        let rl: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("reader panicked".into())))
            .collect();
        let wl = writer
            .join()
            .unwrap_or_else(|_| Err("writer panicked".into()));
        Ok((wl, rl, start.elapsed().as_secs_f64()))
    })?;
    let mut rlat = Latencies::default();
    let mut reads = 0;
    for r in rlats {
        let (l, n) = r?;
        rlat.extend(l);
        reads += n;
    }
    let mut wlat = wlat?;
    let io = ProcIo::now().since(io0);
    let writes = written.load(Ordering::Relaxed);
    let mk = |wl: &str, unit: &str, ops: u64, lat_of: &str, lat: &mut Latencies| Row {
        workload: wl.into(),
        engine: name.into(),
        unit: unit.into(),
        ops,
        secs,
        ops_per_sec: ops as f64 / secs,
        lat_of: lat_of.into(),
        p50_us: lat.percentile_us(50.0),
        p99_us: lat.percentile_us(99.0),
        note: format!("{readers} reader threads + 1 writer (durable batches of 100)"),
        ..Row::default()
    };
    let mut w = mk("mixed_writes", "keys", writes, "batch of 100", &mut wlat);
    w.write_amp = Some(
        io.write_bytes as f64 / (writes.max(1) * (measure::KEY_LEN + s.value_len) as u64) as f64,
    );
    Ok(vec![mk("mixed_reads", "gets", reads, "get", &mut rlat), w])
}

/// `writers` threads each committing single keys durably on the same partition/table.
fn concurrent_commits(e: &dyn Engine, name: &str, s: &Sizes, writers: u64) -> Res<Row> {
    let per = s.commits / writers;
    let (w0, s0) = (e.engine_write_bytes(), e.engine_syncs());
    let io0 = ProcIo::now();
    let start = Instant::now();
    let lats: Vec<Res<Latencies>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..writers)
            .map(|w| {
                sc.spawn(move || -> Res<Latencies> {
                    let mut lat = Latencies::with_capacity(per as usize);
                    for i in 0..per {
                        let k = sorted_key(2 << 40 | w << 32 | i);
                        let t = Instant::now();
                        e.write_batch(&[(k, value(i, s.value_len))])?;
                        lat.push(t.elapsed());
                    }
                    Ok(lat)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("writer panicked".into())))
            .collect()
    });
    let secs = start.elapsed().as_secs_f64();
    let mut lat = Latencies::default();
    for l in lats {
        lat.extend(l?);
    }
    let n = per * writers;
    let t = Timed {
        lat,
        secs,
        io: ProcIo::now().since(io0),
        engine_reads: None,
        engine_writes: e.engine_write_bytes().zip(w0).map(|(a, b)| a - b),
        engine_syncs: e.engine_syncs().zip(s0).map(|(a, b)| a - b),
        req: None,
    };
    let user = n * (measure::KEY_LEN + s.value_len) as u64;
    let mut r = row(
        &format!("commit_{writers}w"),
        name,
        "commits",
        n,
        "commit",
        t,
        Some(user),
        None,
    );
    r.note = format!("{writers} threads, one key per durable commit, same table/partition");
    Ok(r)
}

// ---------------------------------------------------------------------------------------
// Bough-only: branches, GC, diff and merge (and a RocksDB checkpoint for comparison)
// ---------------------------------------------------------------------------------------

pub fn bough_load(b: &bough::Branch, keys: u64) -> Res<()> {
    let mut i = 0;
    while i < keys {
        let mut batch = bough::WriteBatch::new();
        for k in i..(i + 10_000).min(keys) {
            batch.put(sorted_key(k), value(k, 84));
        }
        b.write_blocking(batch)?;
        i += 10_000;
    }
    Ok(())
}

/// Branches created per partition size; the point is their median.
const CREATE_SAMPLES: usize = 11;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// One point per (series, x label) of `points`, in first-seen order: the median of its
/// rounds' milliseconds (the mean of the middle two for an even count), the rounds named in
/// the note. Grouped by the label, not `x`: a partition's bytes on disk (the x of the
/// creation series) differ by a few KiB from round to round.
pub fn median_points(points: Vec<Point>) -> Vec<Point> {
    let mut groups: Vec<(Point, Vec<f64>)> = Vec::new();
    for p in points {
        match groups
            .iter_mut()
            .find(|(g, _)| g.series == p.series && g.x_label == p.x_label)
        {
            Some((_, ms)) => ms.push(p.ms),
            None => {
                let ms = vec![p.ms];
                groups.push((p, ms));
            }
        }
    }
    groups
        .into_iter()
        .map(|(mut p, mut ms)| {
            if ms.len() > 1 {
                let rounds: Vec<String> = ms.iter().map(|m| format!("{m:.2}")).collect();
                ms.sort_by(f64::total_cmp);
                let mid = ms.len() / 2;
                p.ms = if ms.len() % 2 == 0 {
                    (ms[mid - 1] + ms[mid]) / 2.0
                } else {
                    ms[mid]
                };
                p.note = format!(
                    "{}; median of {} rounds ({} ms)",
                    p.note,
                    ms.len(),
                    rounds.join(", ")
                );
            }
            p
        })
        .collect()
}

/// [`CREATE_SAMPLES`] branches `<prefix><i>` created from `main` (issue 16 states the
/// target as a median): their p50 and max in ms, and the bytes each wrote.
fn time_creations(e: &engines::BoughEngine, prefix: &str) -> Res<(f64, f64, u64)> {
    let before = e.store.io_stats();
    let mut took = Vec::with_capacity(CREATE_SAMPLES);
    for i in 0..CREATE_SAMPLES {
        let t = Instant::now();
        e.part.create_branch(&format!("{prefix}{i}"), "main")?;
        took.push(ms(t.elapsed()));
    }
    let written = e.store.io_stats().since(&before).write_bytes / CREATE_SAMPLES as u64;
    took.sort_by(f64::total_cmp);
    Ok((took[took.len() / 2], took[took.len() - 1], written))
}

/// Branch creation from a parent whose write buffer is three quarters full (new keys after
/// its own, in 10k batches; overwrites would compose in the buffer and never fill it):
/// issue 16 states the target with a full buffer, which a fork must neither checkpoint nor
/// copy.
fn create_with_full_buffer(
    e: &engines::BoughEngine,
    keys: u64,
    disk: u64,
    out: &mut Results,
) -> Res<()> {
    let want = bough::DEFAULT_WRITE_BUFFER_BYTES / 4 * 3;
    // At most twice the keys the bound holds at ~100 B an entry (a cap, should the buffer
    // be checkpointed meanwhile).
    let most = want / 50;
    let mut next = 0u64;
    while e.store.write_buffer_usage().bytes < want && next < most {
        let mut batch = bough::WriteBatch::new();
        for _ in 0..10_000 {
            batch.put(sorted_key(keys + next), value(next, 84));
            next += 1;
        }
        e.main.write_blocking(batch)?;
    }
    let buffered = e.store.write_buffer_usage().bytes;
    let (p50, max, written) = time_creations(e, "full")?;
    eprintln!(
        "  create_branch {keys:>9} keys, {:.0} MiB buffered: p50 {p50:.2} ms, max {max:.2} ms",
        buffered as f64 / 1048576.0,
    );
    out.points.push(Point {
        series: "bough create_branch, full write buffer".into(),
        x: disk as f64,
        x_label: format!("{keys} keys"),
        ms: p50,
        note: format!(
            "p50 of {CREATE_SAMPLES} creations from `main` with {:.0} MiB in its write buffer (max {max:.2} ms); {written} bytes written per creation",
            buffered as f64 / 1048576.0
        ),
    });
    Ok(())
}

/// Branch creation against partition size, GC against branch count, diff and merge
/// against divergence.
pub fn run_branches(base: &Path, s: &Sizes, with_rocksdb: bool, out: &mut Results) -> Res<()> {
    eprintln!("== bough branches, GC, diff/merge");
    for &keys in &s.branch_sizes {
        let dir = fresh_dir(base, "bough-branch")?;
        let e = engines::BoughEngine::open_with(&dir, 512 << 20, false)?;
        bough_load(&e.main, keys)?;
        // Steady state: the mapping table checkpointed, then one small write.
        e.store.run_maintenance()?;
        let mut w = bough::WriteBatch::new();
        w.put("last", "write");
        e.main.write_blocking(w)?;
        let disk = measure::disk_bytes(&dir);
        let (p50, max, written) = time_creations(&e, "feature")?;
        eprintln!(
            "  create_branch {keys:>9} keys ({:>6.0} MiB): p50 {p50:.2} ms, max {max:.2} ms",
            disk as f64 / 1048576.0,
        );
        out.points.push(Point {
            series: "bough create_branch".into(),
            x: disk as f64,
            x_label: format!("{keys} keys"),
            ms: p50,
            note: format!(
                "p50 of {CREATE_SAMPLES} creations from `main` (max {max:.2} ms); {written} bytes written per creation"
            ),
        });
        create_with_full_buffer(&e, keys, disk, out)?;
        drop(e);
        let _ = std::fs::remove_dir_all(&dir);
        if with_rocksdb {
            rocks_checkpoint(base, keys, out)?;
        }
    }
    for &n in &s.gc_counts {
        let dir = fresh_dir(base, "bough-gc")?;
        let e = engines::BoughEngine::open_with(&dir, 512 << 20, false)?;
        bough_load(&e.main, 100_000)?;
        let t = Instant::now();
        for i in 0..n {
            let b = e.part.create_branch(&format!("b{i}"), "main")?;
            let mut w = bough::WriteBatch::new();
            w.put(sorted_key((i as u64 * 7) % 100_000), format!("branch {i}"));
            b.write_blocking(w)?;
        }
        let created = t.elapsed();
        let t = Instant::now();
        let r = crate::shim::gc(&e.part)?;
        let took = t.elapsed();
        eprintln!(
            "  gc with {n:>6} branches: {:.1} ms (creating them took {:.1} s)",
            ms(took),
            created.as_secs_f64()
        );
        out.points.push(Point {
            series: "bough gc".into(),
            x: n as f64,
            x_label: format!("{n} branches"),
            ms: ms(took),
            note: format!(
                "{} manifests read, {} mapping pages visited, {} files deleted",
                r.manifests_read,
                r.mapping_pages_visited,
                r.deleted.len()
            ),
        });
        drop(e);
        let _ = std::fs::remove_dir_all(&dir);
    }
    let dir = fresh_dir(base, "bough-diff")?;
    let e = engines::BoughEngine::open_with(&dir, 512 << 20, false)?;
    bough_load(&e.main, s.diff_base)?;
    for (round, &changed) in s.divergences.iter().enumerate() {
        let a = format!("a{round}");
        let b = format!("b{round}");
        let ba = e.part.create_branch(&a, "main")?;
        let bb = e.part.create_branch(&b, &a)?;
        let mut w = bough::WriteBatch::new();
        for k in 0..changed {
            w.put(sorted_key(k * 7 % s.diff_base), format!("changed {round}"));
        }
        bb.write_blocking(w)?;
        let mut w = bough::WriteBatch::new();
        w.put(format!("other{round}"), "x");
        ba.write_blocking(w)?;
        let t = Instant::now();
        let d = e.part.diff(&a, &b)?;
        let diff_ms = ms(t.elapsed());
        let t = Instant::now();
        e.part.merge(&b, &a, bough::MergeOptions::default())?;
        let merge_ms = ms(t.elapsed());
        // A fast-forward: the target did not change since the fork, so the merge adopts
        // the source's state by reference; its time must not follow the divergence (it
        // counts the keys it brings only when asked). Timed twice: with the source just
        // written — the merge then first waits for the source's write job to finish and
        // checkpoints the mapping chunks that write left dirty (at most
        // `checkpoint_chunks`): the source's own deferred work — and once maintenance has
        // checkpointed the idle source (the steady state, as for branch creation).
        let mut ff_ms = [0.0; 2];
        for (i, settled) in [false, true].into_iter().enumerate() {
            let target = format!("ff{round}{settled}");
            let source = format!("fs{round}{settled}");
            e.part.create_branch(&target, "main")?;
            let bs = e.part.create_branch(&source, &target)?;
            let mut w = bough::WriteBatch::new();
            for k in 0..changed {
                w.put(sorted_key(k * 7 % s.diff_base), format!("ff {round}"));
            }
            bs.write_blocking(w)?;
            if settled {
                e.store.run_maintenance()?;
            }
            let t = Instant::now();
            let ff = e
                .part
                .merge(&source, &target, bough::MergeOptions::default())?;
            ff_ms[i] = ms(t.elapsed());
            if !ff.fast_forward {
                return Err(
                    format!("the merge of {source} into {target} was not a fast-forward").into(),
                );
            }
        }
        eprintln!(
            "  divergence {changed:>7}: diff {diff_ms:.1} ms ({} entries), merge {merge_ms:.1} ms, fast-forward {:.1} ms ({:.1} ms with the source just written)",
            d.len(),
            ff_ms[1],
            ff_ms[0]
        );
        for (series, v) in [
            ("bough diff", diff_ms),
            ("bough merge", merge_ms),
            ("bough fast-forward", ff_ms[1]),
            ("bough fast-forward, source just written", ff_ms[0]),
        ] {
            out.points.push(Point {
                series: series.into(),
                x: changed as f64,
                x_label: format!("{changed} changed keys"),
                ms: v,
                note: format!("{} diff entries, base {} keys", d.len(), s.diff_base),
            });
        }
    }
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[cfg(feature = "rocksdb")]
fn rocks_checkpoint(base: &Path, keys: u64, out: &mut Results) -> Res<()> {
    let dir = fresh_dir(base, "rocksdb-checkpoint")?;
    let e = crate::engines::rocks::RocksEngine::open(&dir, 512 << 20)?;
    let mut i = 0;
    while i < keys {
        let pairs: Vec<Pair> = (i..(i + 10_000).min(keys))
            .map(|k| (sorted_key(k), value(k, 84)))
            .collect();
        e.write_batch(&pairs)?;
        i += 10_000;
    }
    let disk = measure::disk_bytes(&dir);
    let t = Instant::now();
    e.checkpoint(&dir.join("checkpoint"))?;
    let took = t.elapsed();
    eprintln!(
        "  rocksdb checkpoint {keys:>9} keys ({:>6.0} MiB): {:.2} ms",
        disk as f64 / 1048576.0,
        ms(took)
    );
    out.points.push(Point {
        series: "rocksdb checkpoint".into(),
        x: disk as f64,
        x_label: format!("{keys} keys"),
        ms: ms(took),
        note: "Checkpoint::create_checkpoint (memtable flush + hard links)".into(),
    });
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[cfg(not(feature = "rocksdb"))]
fn rocks_checkpoint(_base: &Path, _keys: u64, _out: &mut Results) -> Res<()> {
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The cloud set: Bough in S3 mode against SlateDB, on the same S3 endpoint
// ---------------------------------------------------------------------------------------

/// Workloads of the cloud set, in the order they run (the report lists them in this
/// order; rows that could not run are reported as not measured).
pub const CLOUD_WORKLOADS: &[&str] = &[
    "s3_fill_rand_1k",
    "s3_get_warm_t1",
    "s3_scan_10",
    "s3_scan_100",
    "s3_commit_1w",
    "s3_get_cold_t1",
    "s3_get_cold_t8",
];

/// The cloud workloads of one engine (`bough-s3` or `slatedb`) under a fresh prefix of the
/// bucket, its local caches below `base`.
pub fn run_cloud_engine(name: &str, s3: &S3Env, base: &Path, s: &Sizes, out: &mut Results) {
    let mut step = |what: &str, r: Res<Vec<Row>>| match r {
        Ok(rows) => {
            for row in rows {
                let q = row.requests.unwrap_or_default();
                let per = |v: u64| v as f64 / row.ops.max(1) as f64;
                eprintln!(
                    "  {:<16} {:<8} {:>10.0} {}/s  p50 {:>9.1} us  p99 {:>9.1} us  GET/op {:.3} PUT/op {:.3}",
                    row.workload,
                    row.engine,
                    row.ops_per_sec,
                    row.unit,
                    row.p50_us,
                    row.p99_us,
                    per(q.gets),
                    per(q.puts)
                );
                out.rows.push(row);
            }
        }
        Err(e) => {
            eprintln!("  {what} on {name} failed: {e}");
            out.errors.push(format!("{what} on {name}: {e}"));
        }
    };
    eprintln!("== {name}: {}", cloud::describe(name));
    let unique = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let prefix = format!("bench-{name}-{unique}");
    let root = match fresh_dir(base, name) {
        Ok(d) => d,
        Err(e) => {
            out.errors.push(format!("{name}: {e}"));
            return;
        }
    };
    let v = s.value_len;
    let warm_dir = root.join("cache-warm");
    let owned = match cloud::open(name, s3, &prefix, &warm_dir, s.cloud_warm_cache) {
        Ok(e) => e,
        Err(err) => {
            out.errors.push(format!("open {name}: {err}"));
            return;
        }
    };
    let e = owned.as_ref();
    step(
        "s3_fill_rand_1k",
        load(e, name, "s3_fill_rand_1k", s.cloud_keys, 1_000, false, v).map(|mut r| {
            r.note = format!(
                "durable batches of 1,000 random keys; the data set of the next rows; {}",
                r.note
            );
            vec![r]
        }),
    );
    step(
        "warm gets",
        (|| {
            let src = Source::Open(e);
            gets(
                src,
                name,
                "warmup",
                s.cloud_keys,
                1,
                1,
                s.cloud_warm_gets,
                None,
            )?;
            let mut r = gets(
                src,
                name,
                "s3_get_warm_t1",
                s.cloud_keys,
                1,
                1,
                s.cloud_warm_gets,
                None,
            )?;
            let extra = format!(
                "after an unmeasured pass of {} gets; memory cache {} MiB, local disk cache {} MiB",
                s.cloud_warm_gets,
                s.cloud_warm_cache >> 20,
                cloud::LOCAL_CACHE_BYTES >> 20
            );
            r.note = if r.note.is_empty() {
                extra
            } else {
                format!("{}; {extra}", r.note)
            };
            Ok(vec![r])
        })(),
    );
    step(
        "scans",
        (|| {
            let mut rows = Vec::new();
            for (wl, len, count) in [
                ("s3_scan_10", 10, s.cloud_scans),
                ("s3_scan_100", 100, s.cloud_scans / 10),
            ] {
                let mut rng = Rng::new(11);
                let t = timed(e, count, |_| {
                    let start = random_key(rng.below(s.cloud_keys));
                    std::hint::black_box(e.scan(&start, len)?);
                    Ok(())
                })?;
                rows.push(row(wl, name, "scans", count, "scan", t, None, None));
            }
            Ok(rows)
        })(),
    );
    step(
        "single commits",
        (|| {
            let t = timed(e, s.cloud_commits, |i| {
                e.write_batch(&[(sorted_key(1 << 40 | i), value(i, v))])
            })?;
            let user = s.cloud_commits * (measure::KEY_LEN + v) as u64;
            let mut r = row(
                "s3_commit_1w",
                name,
                "commits",
                s.cloud_commits,
                "commit",
                t,
                Some(user),
                None,
            );
            r.note = "one key per durable commit, 1 writer".into();
            Ok(vec![r])
        })(),
    );
    step("settle", e.settle().map(|()| Vec::new()));
    drop(owned);
    let _ = std::fs::remove_dir_all(&warm_dir);
    // Cold: every round opens the engine anew on an empty local cache directory with the
    // small memory budget; only the gets are timed.
    step(
        "cold gets",
        (|| {
            let opened = AtomicU64::new(0);
            let open = || -> Res<Box<dyn Engine>> {
                let n = opened.fetch_add(1, Ordering::Relaxed);
                let dir = root.join(format!("cache-cold-{n}"));
                let _ = std::fs::remove_dir_all(&dir);
                cloud::open(name, s3, &prefix, &dir, s.cold_cache)
            };
            let mut rows = Vec::new();
            for threads in [1, 8] {
                let mut r = gets(
                    Source::Reopen(&open),
                    name,
                    &format!("s3_get_cold_t{threads}"),
                    s.cloud_keys,
                    threads,
                    s.cloud_cold_rounds,
                    s.cloud_cold_gets_per_round,
                    None,
                )?;
                let extra = format!(
                    "{} rounds, each on a fresh empty local cache and {} MiB of memory cache",
                    s.cloud_cold_rounds,
                    s.cold_cache >> 20
                );
                r.note = if r.note.is_empty() {
                    extra
                } else {
                    format!("{}; {extra}", r.note)
                };
                rows.push(r);
            }
            Ok(rows)
        })(),
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(series: &str, x: f64, ms: f64) -> Point {
        Point {
            series: series.into(),
            // The label a round gives; its x (bytes on disk) may differ a little.
            x: x + ms / 1000.0,
            x_label: format!("{x}"),
            ms,
            note: "n".into(),
        }
    }

    #[test]
    fn median_points_takes_each_series_median_in_first_seen_order() {
        let got = median_points(vec![
            point("bough gc", 100.0, 30.0),
            point("bough@r gc", 100.0, 10.0),
            point("bough gc", 100.0, 10.0),
            point("bough gc", 100.0, 20.0),
            point("bough@r gc", 100.0, 14.0),
            point("bough gc", 1000.0, 5.0),
        ]);
        let summary: Vec<(&str, f64, f64)> = got
            .iter()
            .map(|p| (p.series.as_str(), p.x.floor(), p.ms))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("bough gc", 100.0, 20.0),
                ("bough@r gc", 100.0, 12.0),
                ("bough gc", 1000.0, 5.0)
            ]
        );
        assert_eq!(
            got[0].note,
            "n; median of 3 rounds (30.00, 10.00, 20.00 ms)"
        );
        assert_eq!(got[2].note, "n");
    }
}
