//! `bough-reliability`: the reliability harness binary.
//!
//! - `bough-reliability run [--seed N] [--long] [fuzz flags]` runs every stage and prints
//!   one table; the exit code is non-zero when anything was lost, wrong, panicked or hung,
//!   or a fuzz target crashed. `cargo xtask reliability` runs the fuzz targets first and
//!   passes what they did as the fuzz flags.
//! - `bough-reliability child ...` is the kill test's child (started by `run`).

use std::process::ExitCode;
use std::time::Instant;

use bough_reliability::{RunConfig, kill, rng};

const USAGE: &str = "\
usage: bough-reliability run [--seed N] [--long]
                           [--fuzz-execs N --fuzz-targets T --fuzz-secs S [--fuzz-crashed WHAT]...
                            | --fuzz-not-run WHY | --fuzz-failed WHY]
       bough-reliability ops --seed N [--families F] [--ops N] [--keys K] [--max-branches B]
                             (print a workload's operations; BOUGH_OPS_STATES=1 adds states)
       bough-reliability child --dir D --backend io_uring|pread --seed N ... (the kill test's child)

BOUGH_SEED=N replays a seed as --seed N does.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("child") => match kill::ChildArgs::parse(&args[1..]) {
            Ok(a) => ExitCode::from(kill::child_main(&a) as u8),
            Err(e) => {
                eprintln!("child: {e}");
                ExitCode::from(2)
            }
        },
        Some("run") => run(&args[1..]),
        Some("ops") => ops(&args[1..]),
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// What `run` was asked for.
#[derive(Default)]
struct RunArgs {
    seed: Option<u64>,
    long: bool,
    fuzz: bough_reliability::report::FuzzSummary,
    fuzz_failed: Option<String>,
}

fn parse_run(args: &[String]) -> Result<RunArgs, String> {
    let mut out = RunArgs::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--long" {
            out.long = true;
            continue;
        }
        let value = it.next().ok_or(format!("{a} needs a value\n{USAGE}"))?;
        let number = || -> Result<u64, String> {
            value
                .parse()
                .map_err(|_| format!("{a} {value}: not a whole number"))
        };
        match a.as_str() {
            "--seed" => out.seed = Some(rng::parse_seed(value)?),
            "--fuzz-execs" => out.fuzz.execs = number()?,
            "--fuzz-targets" => out.fuzz.targets = number()?,
            "--fuzz-secs" => out.fuzz.secs = number()?,
            "--fuzz-crashed" => out.fuzz.crashed.push(value.clone()),
            "--fuzz-not-run" => out.fuzz.not_run = Some(value.clone()),
            "--fuzz-failed" => out.fuzz_failed = Some(value.clone()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    Ok(out)
}

fn run(args: &[String]) -> ExitCode {
    let RunArgs {
        seed,
        long,
        mut fuzz,
        fuzz_failed,
    } = match parse_run(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let (seed, source) = match seed {
        Some(s) => (s, "--seed"),
        None => match rng::seed_from_env() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        },
    };
    println!(
        "seed: {seed} ({source}); replay with `cargo xtask reliability --seed {seed}` or BOUGH_SEED={seed}"
    );
    let cfg = if long {
        RunConfig::long(seed)
    } else {
        RunConfig::short(seed)
    };
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("cannot find this executable for the kill test's child: {e}");
            return ExitCode::FAILURE;
        }
    };
    let start = Instant::now();
    let mut tally = bough_reliability::run(&cfg, &exe);
    // Fuzzing ran before the harness (in `cargo xtask reliability`); its crashes are
    // failures of this run like any other.
    for c in &fuzz.crashed {
        tally.fail(format!(
            "fuzz target {c} crashed (its input is under fuzz/artifacts/)"
        ));
    }
    if let Some(why) = fuzz_failed {
        tally.fail(format!("fuzzing could not run: {why}"));
        fuzz.not_run = Some(format!("FAILED: {why}"));
    }
    tally.fuzz = fuzz;
    for f in tally.failures.iter().take(20) {
        println!("failure: {f}");
    }
    print!("{}", tally.table(seed, start.elapsed().as_secs_f64()));
    if tally.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Prints the operations of a workload (to read a failure's history).
fn ops(args: &[String]) -> ExitCode {
    let mut cfg = bough_reliability::power::SweepConfig::short().workload;
    let mut seed = 0;
    let mut it = args.iter();
    while let (Some(flag), Some(v)) = (it.next(), it.next()) {
        let n = match rng::parse_seed(v) {
            Ok(n) => n,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        };
        match flag.as_str() {
            "--seed" => seed = n,
            "--families" => cfg.families = n as u32,
            "--ops" => cfg.ops_per_family = n as usize,
            "--keys" => cfg.keys = n as u32,
            "--max-branches" => cfg.max_branches = n as usize,
            other => {
                eprintln!("unknown flag {other}");
                return ExitCode::from(2);
            }
        }
    }
    let mut models: Vec<_> = (0..cfg.families)
        .map(bough_reliability::workload::FamilyModel::new)
        .collect();
    let short = |s: &bough_reliability::workload::State| {
        s.iter()
            .map(|(k, v)| {
                let v = String::from_utf8_lossy(v);
                format!(
                    "{}={}",
                    String::from_utf8_lossy(k),
                    v.split('|').next().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    for (i, f) in bough_reliability::power::schedule(seed, &cfg)
        .into_iter()
        .enumerate()
    {
        let m = &mut models[f as usize];
        let op = m.next_op(seed, &cfg);
        println!("{i:4}: family {f} op {:3}: {op:?}", m.applied);
        m.apply(seed, &op);
        if std::env::var_os("BOUGH_OPS_STATES").is_some() {
            for (b, bm) in &m.branches {
                println!("        {b}: {}", short(&bm.state));
                for (o, (t, s)) in &bm.bases {
                    println!("          base with {o} @{t}: {}", short(s));
                }
            }
        }
    }
    ExitCode::SUCCESS
}
