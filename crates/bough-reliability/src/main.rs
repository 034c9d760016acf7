//! `bough-reliability`: the reliability harness binary.
//!
//! - `bough-reliability run [--seed N] [--long]` runs every stage and prints one table; the
//!   exit code is non-zero when anything was lost, wrong, panicked or hung.
//! - `bough-reliability child ...` is the kill test's child (started by `run`).

use std::process::ExitCode;
use std::time::Instant;

use bough_reliability::{RunConfig, kill, rng};

const USAGE: &str = "\
usage: bough-reliability run [--seed N] [--long]
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

fn run(args: &[String]) -> ExitCode {
    let mut seed = None;
    let mut long = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--long" => long = true,
            "--seed" => match it.next().map(|s| rng::parse_seed(s)) {
                Some(Ok(s)) => seed = Some(s),
                Some(Err(e)) => {
                    eprintln!("{e}");
                    return ExitCode::from(2);
                }
                None => {
                    eprintln!("--seed needs a value");
                    return ExitCode::from(2);
                }
            },
            other => {
                eprintln!("unknown argument {other}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
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
    let tally = bough_reliability::run(&cfg, &exe);
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
