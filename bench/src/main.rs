//! `bough-bench`: Bough side by side with redb, fjall, LMDB (heed) and RocksDB, and against
//! the device's own limits (fio), on the same machine in the same run.
//!
//! Usually started through `cargo xtask bench [--quick] [--engines a,b]`; see
//! bench/README.md for every setting and what each workload does.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

mod agent_scale;
mod baseline;
mod cloud;
mod device;
mod engines;
mod measure;
mod report;
mod shim;
mod targets;
mod workloads;

/// The error type of the harness: anything printable.
pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const USAGE: &str = "\
usage: bough-bench [--smoke | --quick] [--keys N]
                   [--engines bough,redb,fjall,lmdb,rocksdb,bough-s3,slatedb]
                   [--baseline bough@REV=BINARY]... [--cloud] [--data-dir DIR] [--out DIR]
                   [--no-fio] [--no-branches] [--only-branches] [--label bough@REV]
                   [--agent-branches N]

  --smoke        tiny sizes: proves every row runs (seconds per engine); figures mean nothing
  --quick        the quick set (1 M keys, larger than every engine's memtable)
  --keys N       the main data set's key count instead of the mode's
  --baseline     also run Bough built at another revision (a bough-bench binary xtask built
                 with --bough-rev), right after `bough`, as engine LABEL
  --label        (what --baseline passes to that binary) name the `bough` rows LABEL
  --engines      which engines to run (default: every local engine compiled in)
  --cloud        also run the cloud set (bough-s3 and slatedb on the S3 server named by
                 BOUGH_S3_ENDPOINT / BOUGH_S3_BUCKET); without a reachable server its rows
                 are reported as not measured, with the reason
  --data-dir     where the engines' files go (default: ../target/bench-data)
  --out          where the report goes (default: ../target/bench-report)
  --no-fio       skip the device measurements
  --no-branches  skip the Bough-only branch, GC and diff/merge workloads
  --only-branches  run only the Bough-only branch, GC and diff/merge workloads (what a
                 baseline runs in each branch round)
  --agent-branches N  with --only-branches: only the agent-scale series, its largest
                 branch count N (e.g. 100000 in a quick run)
";

struct Args {
    mode: workloads::Mode,
    keys: Option<u64>,
    baselines: Vec<baseline::Baseline>,
    label: Option<String>,
    engines: Vec<String>,
    data_dir: PathBuf,
    out: PathBuf,
    fio: bool,
    branches: bool,
    /// `--only-branches`: no engine rows, no cloud set.
    only_branches: bool,
    /// `--agent-branches N`: the agent-scale series alone, up to N branches.
    agent_branches: Option<usize>,
    /// Cloud engines selected (`--cloud`, or named in `--engines`).
    cloud: Vec<String>,
}

fn parse_args() -> Result<Args, String> {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = here.parent().unwrap_or(&here).join("target");
    let mut a = Args {
        mode: workloads::Mode::Full,
        keys: None,
        baselines: Vec::new(),
        label: None,
        engines: engines::ALL
            .iter()
            .filter(|e| engines::available(e))
            .map(|e| e.to_string())
            .collect(),
        data_dir: target.join("bench-data"),
        out: target.join("bench-report"),
        fio: true,
        branches: true,
        only_branches: false,
        agent_branches: None,
        cloud: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => a.mode = workloads::Mode::Quick,
            "--smoke" => a.mode = workloads::Mode::Smoke,
            "--keys" => {
                let n = it.next().ok_or("--keys needs a number")?;
                let n: u64 = n
                    .parse()
                    .map_err(|_| format!("--keys {n:?} is not a number"))?;
                if n < 10_000 {
                    return Err("--keys must be at least 10000 (one 10k batch)".into());
                }
                a.keys = Some(n);
            }
            "--baseline" => {
                let spec = it.next().ok_or("--baseline needs LABEL=BINARY")?;
                a.baselines.push(baseline::Baseline::parse(&spec)?);
            }
            "--label" => a.label = Some(it.next().ok_or("--label needs a name")?),
            "--no-fio" => a.fio = false,
            "--no-branches" => a.branches = false,
            "--only-branches" => a.only_branches = true,
            "--agent-branches" => {
                let n = it.next().ok_or("--agent-branches needs a count")?;
                a.agent_branches = Some(n.parse().map_err(|e| format!("--agent-branches: {e}"))?);
            }
            "--cloud" => {
                for e in cloud::CLOUD {
                    if !a.cloud.iter().any(|c| c == e) {
                        a.cloud.push(e.to_string());
                    }
                }
            }
            "--engines" => {
                let list = it.next().ok_or("--engines needs a list")?;
                let named: Vec<String> = list
                    .split(',')
                    .map(|s| s.trim().to_lowercase())
                    .filter(|s| !s.is_empty())
                    .collect();
                a.engines.clear();
                for e in named {
                    if engines::ALL.contains(&e.as_str()) {
                        a.engines.push(e);
                    } else if cloud::CLOUD.contains(&e.as_str()) {
                        if !a.cloud.contains(&e) {
                            a.cloud.push(e);
                        }
                    } else {
                        return Err(format!(
                            "unknown engine {e:?}; known: {}, {}",
                            engines::ALL.join(", "),
                            cloud::CLOUD.join(", ")
                        ));
                    }
                }
            }
            "--data-dir" => a.data_dir = it.next().ok_or("--data-dir needs a path")?.into(),
            "--out" => a.out = it.next().ok_or("--out needs a path")?.into(),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if a.agent_branches.is_some() && !a.only_branches {
        return Err("--agent-branches goes with --only-branches".into());
    }
    if a.only_branches && !a.branches {
        return Err("--only-branches and --no-branches exclude each other".into());
    }
    a.cloud
        .sort_by_key(|e| cloud::CLOUD.iter().position(|c| *c == e.as_str()));
    Ok(a)
}

fn now_utc() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("{e}");
            }
            eprint!("{USAGE}");
            return ExitCode::FAILURE;
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bough-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// How many times the branch series run when a baseline runs beside `bough`. Each series is
/// a handful of milliseconds measured once, so one slow disk phase decided a before/after
/// ratio (2026-12-03: gc at 0.58x in the harness, 1.3x in a standalone program; a branch
/// creation's p50 is 1.4 or 2.5-3 ms from one fresh process to the next, for both builds).
const BRANCH_ROUNDS: usize = 6;

/// How many times the engine rows of `bough` and of each baseline run when a baseline runs
/// beside it. One run of each, minutes apart, swung the same row between 0.62x and 1.47x
/// from one run to the next (bench/results/2026-12-03 and 2026-12-04: scan_100 1.47x, 1.12x,
/// 0.80x; commit_8w 0.95x, 1.15x, 0.71x; large_get_256k 0.85x, 0.99x, 0.62x), more than
/// any change measured. Odd, so a row's median is one round's row.
const ENGINE_ROUNDS: usize = 5;

/// The engine rows of `bough` and of each baseline, each a fresh child process, in rounds
/// whose order alternates (A B, B A, A B, ...) so a drift of the machine lands on both sides;
/// each row is the median round's (by ops/s), its note naming every round's figure.
fn engine_rounds(args: &Args, shared: &baseline::Shared<'_>, results: &mut workloads::Results) {
    let this_tree = match baseline::Baseline::this_tree() {
        Ok(b) => b,
        Err(e) => {
            results.errors.push(format!("engine rounds: {e}"));
            return;
        }
    };
    let mut rows = Vec::new();
    for round in 0..ENGINE_ROUNDS {
        let mut order: Vec<&baseline::Baseline> = std::iter::once(&this_tree)
            .chain(args.baselines.iter())
            .collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for b in order {
            let mut one = workloads::Results::default();
            baseline::run(b, baseline::Part::Engines, shared, &mut one);
            rows.append(&mut one.rows);
            results.points.append(&mut one.points);
            results.errors.append(&mut one.errors);
        }
    }
    results.rows.extend(baseline::median_rows(rows));
}

/// The branch series of `bough` and of each baseline, in rounds whose order alternates
/// (A B, B A, ...) so a drift of the machine lands on both sides; each point is the median
/// of its rounds. With baselines, each round of either side is a fresh child process.
fn branch_rounds(
    args: &Args,
    sizes: &workloads::Sizes,
    with_rocks: bool,
    shared: &baseline::Shared<'_>,
    results: &mut workloads::Results,
) {
    let rounds = if args.baselines.is_empty() {
        1
    } else {
        BRANCH_ROUNDS
    };
    let this_tree = if rounds > 1 {
        match baseline::Baseline::this_tree() {
            Ok(b) => Some(b),
            Err(e) => {
                results.errors.push(format!("branch rounds: {e}"));
                None
            }
        }
    } else {
        None
    };
    let mut points = Vec::new();
    let rounds = if args.agent_branches.is_some() {
        0
    } else {
        rounds
    };
    for round in 0..rounds {
        let mut order: Vec<Option<&baseline::Baseline>> = std::iter::once(None)
            .chain(args.baselines.iter().map(Some))
            .collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for who in order {
            let mut one = workloads::Results::default();
            match who.or(this_tree.as_ref()) {
                None => {
                    if let Err(e) =
                        workloads::run_branches(&args.data_dir, sizes, with_rocks, &mut one)
                    {
                        eprintln!("  branch workloads failed: {e}");
                        one.errors.push(format!("branch workloads: {e}"));
                    }
                }
                Some(b) => baseline::run(b, baseline::Part::Branches, shared, &mut one),
            }
            points.append(&mut one.points);
            results.rows.append(&mut one.rows);
            results.errors.append(&mut one.errors);
        }
    }
    results.points.extend(workloads::median_points(points));
    // Once per report, on this tree only (see agent_scale.rs): not in a labelled child round.
    if crate::shim::revision().is_none() && args.label.is_none() {
        let mut sizes = sizes.clone();
        if let Some(n) = args.agent_branches {
            sizes.agent_counts.retain(|&c| c < n);
            sizes.agent_counts.push(n);
        }
        match agent_scale::run(&args.data_dir, &sizes) {
            Ok(a) => results.agent_scale = Some(a),
            Err(e) => {
                eprintln!("  agent-scale series failed: {e}");
                results.errors.push(format!("agent-scale series: {e}"));
            }
        }
    }
}

fn run(args: &Args) -> Res<()> {
    let started = now_utc();
    let wall = Instant::now();
    let mut sizes = workloads::Sizes::new(args.mode);
    if let Some(k) = args.keys {
        sizes.keys = k;
    }
    std::fs::create_dir_all(&args.data_dir)?;
    std::fs::create_dir_all(&args.out)?;
    let (run, skipped): (Vec<String>, Vec<String>) = args
        .engines
        .iter()
        .cloned()
        .partition(|e| engines::available(e));
    let mut skipped: Vec<String> = skipped
        .into_iter()
        .map(|e| format!("{e} (not compiled in: build with --features {e})"))
        .collect();
    for e in engines::ALL {
        if !args.engines.iter().any(|x| x == e) && !skipped.iter().any(|s| s.starts_with(e)) {
            skipped.push(format!("{e} (not selected)"));
        }
    }
    let (cold, cold_text) = measure::ColdMethod::detect();
    eprintln!("cold reads: {cold_text}");

    let (device, device_error) = if args.fio {
        eprintln!("== device limits (fio)");
        let (secs, size) = match args.mode {
            workloads::Mode::Smoke => (1, "256M"),
            workloads::Mode::Quick => (5, "1G"),
            workloads::Mode::Full => (15, "4G"),
        };
        match device::measure(&args.data_dir.join("fio"), secs, size) {
            Ok(d) => {
                eprintln!(
                    "  randread QD1 {:.0} IOPS, QD32 {:.0} IOPS, seq write {:.0} MB/s, fdatasync {:.0}/s",
                    d.randread_qd1_iops,
                    d.randread_qd32_iops,
                    d.seqwrite_bytes_per_sec / 1e6,
                    d.fsync_per_sec
                );
                (Some(d), None)
            }
            Err(e) => {
                eprintln!("  fio failed: {e}");
                (None, Some(e.to_string()))
            }
        }
    } else {
        (None, Some("skipped (--no-fio)".to_string()))
    };

    let mut results = workloads::Results::default();
    let shared = baseline::Shared {
        mode_flag: match args.mode {
            workloads::Mode::Smoke => Some("--smoke"),
            workloads::Mode::Quick => Some("--quick"),
            workloads::Mode::Full => None,
        },
        keys: args.keys,
        data_dir: &args.data_dir,
        out: &args.out,
    };
    if !args.only_branches {
        let mut baselines_done = false;
        for e in &run {
            // With a baseline, `bough` and the baselines run in alternating rounds (the
            // before/after pair), each row the median of its rounds.
            if e == "bough" && !args.baselines.is_empty() {
                engine_rounds(args, &shared, &mut results);
                baselines_done = true;
                continue;
            }
            workloads::run_engine(e, &args.data_dir, &sizes, cold, &mut results);
        }
        if !baselines_done {
            for b in &args.baselines {
                baseline::run(b, baseline::Part::Engines, &shared, &mut results);
            }
        }
    }
    let mut run = run;
    run.extend(args.baselines.iter().map(|b| b.label.clone()));
    let cloud_status = if args.cloud.is_empty() || args.only_branches {
        report::CloudStatus::NotSelected
    } else {
        eprintln!("== cloud set: {}", args.cloud.join(", "));
        match cloud::S3Env::from_env() {
            Ok(s3) => {
                eprintln!("  S3 endpoint {}, bucket {}", s3.endpoint, s3.bucket);
                for e in &args.cloud {
                    workloads::run_cloud_engine(e, &s3, &args.data_dir, &sizes, &mut results);
                }
                report::CloudStatus::Ran {
                    engines: args.cloud.clone(),
                    endpoint: s3.endpoint,
                    bucket: s3.bucket,
                }
            }
            Err(why) => {
                eprintln!("  not measured: {why}");
                report::CloudStatus::NotMeasured {
                    engines: args.cloud.clone(),
                    why,
                }
            }
        }
    };
    if args.branches && run.iter().any(|e| e == "bough") {
        let with_rocks = run.iter().any(|e| e == "rocksdb");
        branch_rounds(args, &sizes, with_rocks, &shared, &mut results);
    }

    if let Some(label) = &args.label {
        baseline::relabel(label, &mut results);
    }
    let info = report::RunInfo {
        sizes: &sizes,
        engines: &run,
        skipped: &skipped,
        cold_method: &cold_text,
        device: device.as_ref(),
        device_error: device_error.as_deref(),
        data_dir: &args.data_dir,
        cloud: &cloud_status,
        started,
        wall_secs: wall.elapsed().as_secs_f64(),
    };
    let targets = targets::targets(&results, device.as_ref(), &sizes);
    let md = report::markdown(&info, &results, &targets);
    let js = report::json(&info, &results, &targets);
    std::fs::write(args.out.join("report.md"), &md)?;
    std::fs::write(
        args.out.join("report.json"),
        serde_json::to_string_pretty(&js)?,
    )?;
    let charts = report::charts(&args.out, &results)?;
    println!("{md}");
    println!(
        "report: {} (report.md, report.json, {} SVG charts)",
        args.out.display(),
        charts.len()
    );
    Ok(())
}
