//! `cargo xtask ci`: every check CI runs, as timed stages with budgets.
//!
//! A stage fails when its command fails or when it runs past its budget (the command and
//! everything it started are stopped at the deadline). All stages run even after one
//! fails, so one CI run reports everything; the exit code is non-zero if any failed.
//! The whole run is also capped at [`TOTAL_BUDGET_SECS`].

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::{self, Outcome};
use crate::{fuzz, tidy, workspace};

/// One CI stage and the most wall-clock seconds it may take on a 2-core machine from a
/// cold build.
#[derive(Debug, Clone, Copy)]
pub struct Stage {
    pub name: &'static str,
    pub budget_secs: u64,
}

/// The stages in the order they run.
pub const STAGES: &[Stage] = &[
    Stage {
        name: "fmt",
        budget_secs: 120,
    },
    Stage {
        name: "clippy",
        budget_secs: 900,
    },
    Stage {
        name: "tidy",
        budget_secs: 120,
    },
    // Before `test` so nextest's summary is the last test-runner summary CI prints.
    Stage {
        name: "doctest",
        budget_secs: 900,
    },
    Stage {
        name: "test",
        budget_secs: 1500,
    },
    Stage {
        name: "fuzz-smoke",
        budget_secs: 900,
    },
];

/// The whole run stops at this many seconds, whatever the stages' budgets say (45 min;
/// CI allows 90 for everything including installs).
pub const TOTAL_BUDGET_SECS: u64 = 2700;

// CI gives a run 90 minutes including tool installs; keep half of it in reserve.
const _: () = assert!(TOTAL_BUDGET_SECS <= 45 * 60);

/// How a stage ended.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Ok,
    Failed(String),
    Skipped,
}

/// Seconds each fuzz target runs in `fuzz-smoke`.
fn fuzz_secs() -> Result<u64, String> {
    match std::env::var("BOUGH_FUZZ_SECS") {
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| format!("BOUGH_FUZZ_SECS={v:?} is not a whole number of seconds")),
        Err(_) => Ok(fuzz::DEFAULT_SMOKE_SECS),
    }
}

fn cargo(root: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(workspace::cargo());
    cmd.current_dir(root).args(args);
    cmd
}

fn run_cmd(mut cmd: Command, deadline: Instant) -> Result<(), String> {
    println!("$ {}", process::render(&cmd));
    match process::run_until(&mut cmd, Some(deadline)) {
        outcome if outcome.success() => Ok(()),
        Outcome::TimedOut => Err("over budget, stopped".into()),
        outcome => Err(outcome.describe()),
    }
}

fn nextest_available() -> bool {
    process::probe(&workspace::cargo(), &["nextest", "--version"])
}

/// Runs one stage to `deadline`.
fn run_stage(root: &Path, name: &str, deadline: Instant) -> Verdict {
    let result = match name {
        "fmt" => run_cmd(cargo(root, &["fmt", "--all", "--", "--check"]), deadline).and_then(
            // The fuzz workspace is separate; `--all` would also re-check its path deps.
            |()| {
                run_cmd(
                    cargo(
                        root,
                        &["fmt", "--manifest-path", "fuzz/Cargo.toml", "--", "--check"],
                    ),
                    deadline,
                )
            },
        ),
        "clippy" => run_cmd(
            cargo(
                root,
                &[
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--",
                    "-D",
                    "warnings",
                ],
            ),
            deadline,
        ),
        "tidy" => tidy::run(root),
        "doctest" => {
            if !nextest_available() {
                // `cargo test` in the `test` stage runs doctests itself.
                return Verdict::Skipped;
            }
            run_cmd(cargo(root, &["test", "--workspace", "--doc"]), deadline)
        }
        "test" => {
            if nextest_available() {
                run_cmd(
                    cargo(root, &["nextest", "run", "--workspace", "--profile", "ci"]),
                    deadline,
                )
            } else {
                println!(
                    "xtask: cargo-nextest not found; falling back to `cargo test --workspace` \
                     (the `slow_` filter of .config/nextest.toml does not apply)"
                );
                run_cmd(cargo(root, &["test", "--workspace"]), deadline)
            }
        }
        "fuzz-smoke" => fuzz_secs().and_then(|secs| fuzz::smoke(root, secs, Some(deadline))),
        other => Err(format!("unknown stage {other}")),
    };
    match result {
        Ok(()) => Verdict::Ok,
        Err(why) => Verdict::Failed(why),
    }
}

/// `cargo xtask ci [--skip STAGE]... [--only STAGE]...`
pub fn cli(root: &Path, args: &[String]) -> Result<(), String> {
    let usage = "usage: cargo xtask ci [--skip STAGE]... [--only STAGE]...";
    let mut skip: Vec<String> = Vec::new();
    let mut only: Vec<String> = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let list = match arg.as_str() {
            "--skip" => &mut skip,
            "--only" => &mut only,
            other => return Err(format!("unknown argument {other:?}\n{usage}")),
        };
        let Some(stage) = rest.next() else {
            return Err(format!("{arg} needs a stage name\n{usage}"));
        };
        if !STAGES.iter().any(|s| s.name == stage) {
            let names: Vec<_> = STAGES.iter().map(|s| s.name).collect();
            return Err(format!(
                "unknown stage {stage:?}; stages: {}",
                names.join(", ")
            ));
        }
        list.push(stage.clone());
    }
    // Fail early on a bad setting rather than after half an hour of building.
    fuzz_secs()?;

    let started = Instant::now();
    let total_deadline = started + Duration::from_secs(TOTAL_BUDGET_SECS);
    let mut rows: Vec<(Stage, u64, Verdict)> = Vec::new();
    for &stage in STAGES {
        let selected = !skip.iter().any(|s| s == stage.name)
            && (only.is_empty() || only.iter().any(|s| s == stage.name));
        if !selected {
            rows.push((stage, 0, Verdict::Skipped));
            continue;
        }
        println!("==> stage {} (budget {}s)", stage.name, stage.budget_secs);
        let stage_start = Instant::now();
        let deadline = (stage_start + Duration::from_secs(stage.budget_secs)).min(total_deadline);
        let mut verdict = if stage_start >= total_deadline {
            Verdict::Failed(format!(
                "no time left of the {TOTAL_BUDGET_SECS}s total budget"
            ))
        } else {
            run_stage(root, stage.name, deadline)
        };
        let secs = stage_start.elapsed().as_secs();
        if verdict == Verdict::Ok && secs > stage.budget_secs {
            verdict = Verdict::Failed("over budget".into());
        }
        let status = match &verdict {
            Verdict::Ok => "ok".to_string(),
            Verdict::Failed(why) => format!("FAILED: {why}"),
            Verdict::Skipped => "skipped".to_string(),
        };
        println!(
            "stage {}: {secs}s (budget {}s) {status}",
            stage.name, stage.budget_secs
        );
        rows.push((stage, secs, verdict));
    }
    let total = started.elapsed().as_secs();

    println!();
    println!("{:<12} {:>6} {:>8}  result", "stage", "secs", "budget");
    for (stage, secs, verdict) in &rows {
        let result = match verdict {
            Verdict::Ok => "ok",
            Verdict::Failed(_) => "FAILED",
            Verdict::Skipped => "skipped",
        };
        println!(
            "{:<12} {:>6} {:>8}  {result}",
            stage.name, secs, stage.budget_secs
        );
    }
    println!(
        "{:<12} {:>6} {:>8}  {}",
        "total",
        total,
        TOTAL_BUDGET_SECS,
        if total > TOTAL_BUDGET_SECS {
            "FAILED"
        } else {
            "ok"
        }
    );

    let failed: Vec<&str> = rows
        .iter()
        .filter(|(_, _, v)| matches!(v, Verdict::Failed(_)))
        .map(|(s, _, _)| s.name)
        .collect();
    if !failed.is_empty() {
        return Err(format!("ci: failed stages: {}", failed.join(", ")));
    }
    if total > TOTAL_BUDGET_SECS {
        return Err(format!(
            "ci: took {total}s, over the {TOTAL_BUDGET_SECS}s total budget"
        ));
    }
    println!("ci: all stages passed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_budgets_fit_the_ci_limit() {
        let names: Vec<_> = STAGES.iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            ["fmt", "clippy", "tidy", "doctest", "test", "fuzz-smoke"]
        );
        assert!(STAGES.iter().all(|s| s.budget_secs <= TOTAL_BUDGET_SECS));
    }
}
