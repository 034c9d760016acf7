//! `cargo xtask reliability [--seed N] [--long] [--fuzz-secs N]`: runs every fuzz target for
//! a few seconds (when cargo-fuzz is installed; see [`fuzz::run_counted`]), then builds the
//! reliability harness (`crates/bough-reliability`) with the test profile and runs it,
//! handing it the fuzzing results. The harness prints one table (kill cycles, crash points,
//! injected faults, object-store faults, bit flips, fuzz executions, and the counts that
//! must be zero) and exits non-zero when anything was lost, wrong, panicked, hung or
//! crashed a fuzz target; so does this command.

use std::path::Path;
use std::process::Command;

use crate::fuzz;
use crate::process;
use crate::workspace;

/// Seconds each fuzz target runs unless `--fuzz-secs` says otherwise.
pub const DEFAULT_FUZZ_SECS: u64 = 10;

const USAGE: &str = "usage: cargo xtask reliability [--seed N] [--long] [--fuzz-secs N]";

/// What the command was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// Replay this seed (otherwise `BOUGH_SEED`, otherwise a fresh one).
    pub seed: Option<String>,
    /// The long run.
    pub long: bool,
    /// Seconds per fuzz target; 0 skips fuzzing.
    pub fuzz_secs: u64,
}

impl Default for Args {
    fn default() -> Self {
        Args {
            seed: None,
            long: false,
            fuzz_secs: DEFAULT_FUZZ_SECS,
        }
    }
}

/// Parses the arguments after `reliability`.
pub fn parse(args: &[String]) -> Result<Args, String> {
    let mut out = Args::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--long" => out.long = true,
            "--seed" => {
                let v = it.next().ok_or("--seed needs a value")?;
                let digits = v.strip_prefix("0x").unwrap_or(v);
                let radix = if v.starts_with("0x") { 16 } else { 10 };
                u64::from_str_radix(digits, radix)
                    .map_err(|_| format!("--seed {v}: not a u64 (decimal or 0x hex)"))?;
                out.seed = Some(v.clone());
            }
            "--fuzz-secs" => {
                let v = it.next().ok_or("--fuzz-secs needs a value")?;
                out.fuzz_secs = v
                    .parse()
                    .map_err(|_| format!("--fuzz-secs {v}: not a whole number of seconds"))?;
            }
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    Ok(out)
}

/// What fuzzing did, as the harness's command-line flags (it puts them in its table).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fuzzing {
    /// It ran: executions summed over the targets, targets, seconds each, crashes.
    Ran(fuzz::Counted, u64),
    /// It did not run, and why (skipped, cargo-fuzz missing).
    NotRun(String),
    /// It could not run (the build failed): a failure of the run.
    Failed(String),
}

impl Fuzzing {
    fn flags(&self) -> Vec<String> {
        let mut out = Vec::new();
        match self {
            Fuzzing::Ran(c, secs) => {
                out.extend([
                    "--fuzz-execs".to_string(),
                    c.execs.to_string(),
                    "--fuzz-targets".to_string(),
                    c.targets.len().to_string(),
                    "--fuzz-secs".to_string(),
                    secs.to_string(),
                ]);
                for crash in &c.crashed {
                    out.extend(["--fuzz-crashed".to_string(), crash.clone()]);
                }
            }
            Fuzzing::NotRun(why) => out.extend(["--fuzz-not-run".to_string(), why.clone()]),
            Fuzzing::Failed(why) => out.extend(["--fuzz-failed".to_string(), why.clone()]),
        }
        out
    }
}

/// Runs the fuzz targets as `args` asks, if cargo-fuzz is there.
pub fn fuzz(root: &Path, args: &Args) -> Fuzzing {
    if args.fuzz_secs == 0 {
        return Fuzzing::NotRun("skipped (--fuzz-secs 0)".into());
    }
    if !fuzz::cargo_fuzz_available() {
        return Fuzzing::NotRun(format!(
            "cargo-fuzz is not installed (cargo install cargo-fuzz@{} --locked)",
            fuzz::CARGO_FUZZ_VERSION
        ));
    }
    match fuzz::run_counted(root, args.fuzz_secs) {
        Ok(c) => Fuzzing::Ran(c, args.fuzz_secs),
        Err(e) => Fuzzing::Failed(e),
    }
}

/// The harness command line for `args`, with what fuzzing did.
pub fn command(root: &Path, args: &Args, fuzzing: &Fuzzing) -> Command {
    let mut cmd = Command::new(workspace::cargo());
    cmd.current_dir(root).args([
        "run",
        "--quiet",
        "--profile",
        "test",
        "-p",
        "bough-reliability",
        "--bin",
        "bough-reliability",
        "--",
        "run",
    ]);
    if let Some(seed) = &args.seed {
        cmd.args(["--seed", seed]);
    }
    if args.long {
        cmd.arg("--long");
    }
    cmd.args(fuzzing.flags());
    cmd
}

/// `cargo xtask reliability ...`.
pub fn cli(root: &Path, args: &[String]) -> Result<(), String> {
    let args = parse(args)?;
    let fuzzing = fuzz(root, &args);
    let mut cmd = command(root, &args, &fuzzing);
    eprintln!("$ {}", process::render(&cmd));
    let outcome = process::run_until(&mut cmd, None);
    if outcome.success() {
        Ok(())
    } else {
        Err(format!("reliability: {}", outcome.describe()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn parses_seed_long_and_fuzz_secs() {
        assert_eq!(parse(&[]), Ok(Args::default()));
        assert_eq!(
            parse(&s(&["--seed", "42", "--long", "--fuzz-secs", "0"])),
            Ok(Args {
                seed: Some("42".into()),
                long: true,
                fuzz_secs: 0,
            })
        );
        assert!(parse(&s(&["--seed", "0x1f"])).is_ok());
        assert!(parse(&s(&["--seed", "x"])).is_err());
        assert!(parse(&s(&["--seed"])).is_err());
        assert!(parse(&s(&["--fuzz-secs", "-1"])).is_err());
        assert!(parse(&s(&["--fast"])).is_err());
    }

    #[test]
    fn runs_the_harness_binary_with_the_test_profile() {
        let args = Args {
            seed: Some("7".into()),
            long: true,
            fuzz_secs: 10,
        };
        let ran = Fuzzing::Ran(
            fuzz::Counted {
                execs: 1234,
                targets: vec!["a".into(), "b".into()],
                crashed: vec!["b (exit code 77)".into()],
            },
            10,
        );
        let line = process::render(&command(Path::new("/w"), &args, &ran));
        assert!(line.ends_with(
            "run --quiet --profile test -p bough-reliability --bin bough-reliability -- run --seed 7 --long \
             --fuzz-execs 1234 --fuzz-targets 2 --fuzz-secs 10 --fuzz-crashed b (exit code 77)"
        ), "{line}");
        let skipped = Fuzzing::NotRun("skipped".into());
        let line = process::render(&command(Path::new("/w"), &args, &skipped));
        assert!(line.ends_with("--long --fuzz-not-run skipped"), "{line}");
    }
}
