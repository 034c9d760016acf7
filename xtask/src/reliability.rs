//! `cargo xtask reliability [--seed N] [--long]`: builds the reliability harness
//! (`crates/bough-reliability`) with the test profile and runs it. The harness prints one
//! table (kill cycles, crash points, injected faults, bit flips, and the counts that must be
//! zero) and exits non-zero when anything was lost, wrong, panicked or hung; so does this
//! command.

use std::path::Path;
use std::process::Command;

use crate::process;
use crate::workspace;

/// What the command was asked for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Args {
    /// Replay this seed (otherwise `BOUGH_SEED`, otherwise a fresh one).
    pub seed: Option<String>,
    /// The long run.
    pub long: bool,
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
            other => {
                return Err(format!(
                    "unknown argument {other}\nusage: cargo xtask reliability [--seed N] [--long]"
                ));
            }
        }
    }
    Ok(out)
}

/// The harness command line for `args`.
pub fn command(root: &Path, args: &Args) -> Command {
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
    cmd
}

/// `cargo xtask reliability ...`.
pub fn cli(root: &Path, args: &[String]) -> Result<(), String> {
    let args = parse(args)?;
    let mut cmd = command(root, &args);
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
    fn parses_seed_and_long() {
        assert_eq!(parse(&[]), Ok(Args::default()));
        assert_eq!(
            parse(&s(&["--seed", "42", "--long"])),
            Ok(Args {
                seed: Some("42".into()),
                long: true
            })
        );
        assert!(parse(&s(&["--seed", "0x1f"])).is_ok());
        assert!(parse(&s(&["--seed", "x"])).is_err());
        assert!(parse(&s(&["--seed"])).is_err());
        assert!(parse(&s(&["--fast"])).is_err());
    }

    #[test]
    fn runs_the_harness_binary_with_the_test_profile() {
        let cmd = command(
            Path::new("/w"),
            &Args {
                seed: Some("7".into()),
                long: true,
            },
        );
        let line = process::render(&cmd);
        assert!(line.ends_with(
            "run --quiet --profile test -p bough-reliability --bin bough-reliability -- run --seed 7 --long"
        ), "{line}");
    }
}
