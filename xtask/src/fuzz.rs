//! `cargo xtask fuzz`: cargo-fuzz targets on stable Rust (`--sanitizer none`).
//!
//! Layout of `fuzz/` (a separate workspace the root never builds):
//! - `fuzz_targets/<target>.rs`, declared as `[[bin]]` in `fuzz/Cargo.toml`;
//! - `seeds/<target>/`: small committed seed inputs, read but never written;
//! - `corpus/<target>/`: the local, ignored corpus that `cargo xtask fuzz` grows;
//! - `artifacts/<target>/`: crashing inputs cargo-fuzz writes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::process;
use crate::workspace;

/// The cargo-fuzz release the project uses (installed when missing).
pub const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// Seconds each target runs in the CI smoke stage unless `BOUGH_FUZZ_SECS` says otherwise.
pub const DEFAULT_SMOKE_SECS: u64 = 20;

/// Seconds `cargo xtask fuzz <target>` runs without `--secs`.
pub const DEFAULT_RUN_SECS: u64 = 60;

/// Per-input timeout handed to libFuzzer (a hang is a failure, not a stall).
const INPUT_TIMEOUT_SECS: u64 = 20;

/// Names of the `[[bin]]` targets in a fuzz Cargo.toml, in file order.
pub fn targets_in(cargo_toml: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut in_bin = false;
    for raw in cargo_toml.lines() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
            continue;
        }
        if !in_bin {
            continue;
        }
        if let Some((key, value)) = line.split_once('=')
            && key.trim() == "name"
        {
            targets.push(value.trim().trim_matches('"').to_string());
        }
    }
    targets
}

pub fn fuzz_dir(root: &Path) -> PathBuf {
    root.join("fuzz")
}

/// The targets declared in `fuzz/Cargo.toml`.
pub fn targets(root: &Path) -> Result<Vec<String>, String> {
    let manifest = fuzz_dir(root).join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    Ok(targets_in(&text))
}

/// Makes sure `cargo fuzz` runs, installing cargo-fuzz when it is missing.
pub fn ensure_cargo_fuzz() -> Result<(), String> {
    let cargo = workspace::cargo();
    if process::probe(&cargo, &["fuzz", "--version"]) {
        return Ok(());
    }
    println!("xtask: cargo-fuzz is missing; installing cargo-fuzz {CARGO_FUZZ_VERSION}");
    let mut cmd = Command::new(&cargo);
    cmd.args([
        "install",
        &format!("cargo-fuzz@{CARGO_FUZZ_VERSION}"),
        "--locked",
    ]);
    // Installs build in their own temporary target directory.
    cmd.env_remove("CARGO_TARGET_DIR");
    let outcome = process::run_until(&mut cmd, None);
    if !outcome.success() {
        return Err(format!(
            "installing cargo-fuzz failed: {}",
            outcome.describe()
        ));
    }
    Ok(())
}

/// A `cargo fuzz` command run from the workspace root, building into `fuzz/target`.
fn cargo_fuzz(root: &Path) -> Command {
    let mut cmd = Command::new(workspace::cargo());
    cmd.current_dir(root).arg("fuzz");
    // The fuzz workspace keeps its own target directory (different flags, no thrashing).
    cmd.env_remove("CARGO_TARGET_DIR");
    cmd
}

/// `cargo fuzz build --sanitizer none` for every target.
pub fn build_command(root: &Path) -> Command {
    let mut cmd = cargo_fuzz(root);
    cmd.args(["build", "--sanitizer", "none"]);
    cmd
}

/// `cargo fuzz run` for `target` for `secs` seconds. `corpus` is the directory libFuzzer
/// writes new inputs to; `extra` directories are only read (seeds, a local corpus).
pub fn run_command(
    root: &Path,
    target: &str,
    secs: u64,
    corpus: &Path,
    extra: &[PathBuf],
) -> Command {
    let mut cmd = cargo_fuzz(root);
    cmd.args(["run", "--sanitizer", "none", target]);
    cmd.arg(corpus);
    cmd.args(extra);
    cmd.arg("--");
    cmd.arg(format!("-max_total_time={secs}"));
    cmd.arg(format!("-timeout={INPUT_TIMEOUT_SECS}"));
    cmd.arg("-print_final_stats=1");
    cmd
}

/// Read-only input directories for `target` that exist: committed seeds, then the local
/// corpus (when it is not the one being written).
pub fn read_dirs(root: &Path, target: &str, writing: &Path) -> Vec<PathBuf> {
    let dir = fuzz_dir(root);
    [
        dir.join("seeds").join(target),
        dir.join("corpus").join(target),
    ]
    .into_iter()
    .filter(|d| d.is_dir() && d != writing)
    .collect()
}

/// Runs every target for `secs` seconds in a fresh corpus (plus seeds and any local
/// corpus), after one build. Used by the CI `fuzz-smoke` stage.
pub fn smoke(root: &Path, secs: u64, deadline: Option<Instant>) -> Result<(), String> {
    let targets = targets(root)?;
    if targets.is_empty() {
        return Err("fuzz/Cargo.toml declares no targets".into());
    }
    ensure_cargo_fuzz()?;
    let mut build = build_command(root);
    println!("$ {}", process::render(&build));
    let outcome = process::run_until(&mut build, deadline);
    if !outcome.success() {
        return Err(format!("cargo fuzz build: {}", outcome.describe()));
    }
    let scratch = fuzz_dir(root).join("target").join("smoke-corpus");
    let mut failed = Vec::new();
    for target in &targets {
        let corpus = scratch.join(target);
        let _ = std::fs::remove_dir_all(&corpus);
        std::fs::create_dir_all(&corpus)
            .map_err(|e| format!("cannot create {}: {e}", corpus.display()))?;
        let extra = read_dirs(root, target, &corpus);
        let mut cmd = run_command(root, target, secs, &corpus, &extra);
        println!("$ {}", process::render(&cmd));
        let started = Instant::now();
        let outcome = process::run_until(&mut cmd, deadline);
        println!(
            "fuzz {target}: {} after {}s",
            if outcome.success() { "ok" } else { "FAILED" },
            started.elapsed().as_secs()
        );
        if !outcome.success() {
            failed.push(format!("{target} ({})", outcome.describe()));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("fuzz targets failed: {}", failed.join(", ")))
    }
}

/// Executions libFuzzer reports at the end of a run: `stat::number_of_executed_units`
/// (printed with `-print_final_stats=1`), else its `Done N runs` line, else the count of
/// its last status line (`#N ...`).
pub fn executions(output: &str) -> Option<u64> {
    let number = |s: &str| s.trim().parse::<u64>().ok();
    let mut done = None;
    let mut last_status = None;
    for line in output.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("stat::number_of_executed_units:") {
            if let Some(n) = number(rest) {
                return Some(n);
            }
        } else if let Some(rest) = line.strip_prefix("Done ") {
            done = rest.split_whitespace().next().and_then(number).or(done);
        } else if let Some(rest) = line.strip_prefix('#') {
            last_status = rest
                .split_whitespace()
                .next()
                .and_then(number)
                .or(last_status);
        }
    }
    done.or(last_status)
}

/// Whether `cargo fuzz` runs here (nothing is installed).
pub fn cargo_fuzz_available() -> bool {
    process::probe(&workspace::cargo(), &["fuzz", "--version"])
}

/// What running every target for a while found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counted {
    /// Executions summed over the targets.
    pub execs: u64,
    /// Targets that ran.
    pub targets: Vec<String>,
    /// Targets that crashed (or ran past their deadline), with why.
    pub crashed: Vec<String>,
}

/// Runs every target for `secs` seconds in a fresh corpus (plus seeds and any local corpus)
/// after one build, capturing libFuzzer's output to count executions. Used by
/// `cargo xtask reliability`; a crash is reported with the tail of the target's output.
pub fn run_counted(root: &Path, secs: u64) -> Result<Counted, String> {
    let targets = targets(root)?;
    if targets.is_empty() {
        return Err("fuzz/Cargo.toml declares no targets".into());
    }
    let mut build = build_command(root);
    eprintln!("$ {}", process::render(&build));
    let outcome = process::run_until(&mut build, None);
    if !outcome.success() {
        return Err(format!("cargo fuzz build: {}", outcome.describe()));
    }
    let scratch = fuzz_dir(root).join("target").join("reliability-corpus");
    let mut counted = Counted::default();
    for target in &targets {
        let corpus = scratch.join(target);
        let _ = std::fs::remove_dir_all(&corpus);
        std::fs::create_dir_all(&corpus)
            .map_err(|e| format!("cannot create {}: {e}", corpus.display()))?;
        let extra = read_dirs(root, target, &corpus);
        let mut cmd = run_command(root, target, secs, &corpus, &extra);
        eprintln!("$ {}", process::render(&cmd));
        // libFuzzer stops itself at -max_total_time; the deadline only catches a wedged run.
        let deadline = Instant::now() + std::time::Duration::from_secs(secs + 300);
        let (outcome, output) = process::run_captured(&mut cmd, Some(deadline));
        let execs = executions(&output);
        counted.targets.push(target.clone());
        counted.execs += execs.unwrap_or(0);
        if outcome.success() {
            eprintln!(
                "fuzz {target}: {} executions in {secs} s",
                execs.map_or("an unknown number of".to_string(), |n| n.to_string())
            );
        } else {
            let tail: Vec<&str> = output.lines().rev().take(40).collect();
            eprintln!("fuzz {target}: FAILED ({})", outcome.describe());
            for line in tail.iter().rev() {
                eprintln!("  | {line}");
            }
            counted
                .crashed
                .push(format!("{target} ({})", outcome.describe()));
        }
    }
    Ok(counted)
}

/// `cargo xtask fuzz list` / `cargo xtask fuzz <target> [--secs N]`.
pub fn cli(root: &Path, args: &[String]) -> Result<(), String> {
    let usage = "usage: cargo xtask fuzz list | cargo xtask fuzz <target> [--secs N]";
    let Some(first) = args.first() else {
        return Err(usage.into());
    };
    let targets = targets(root)?;
    if first == "list" {
        for t in &targets {
            println!("{t}");
        }
        return Ok(());
    }
    if !targets.contains(first) {
        return Err(format!(
            "unknown fuzz target {first:?}; targets: {}",
            targets.join(", ")
        ));
    }
    let mut secs = DEFAULT_RUN_SECS;
    let mut rest = args[1..].iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--secs" => {
                secs = rest
                    .next()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| format!("--secs needs a number\n{usage}"))?;
            }
            other => return Err(format!("unknown argument {other:?}\n{usage}")),
        }
    }
    ensure_cargo_fuzz()?;
    let corpus = fuzz_dir(root).join("corpus").join(first);
    std::fs::create_dir_all(&corpus)
        .map_err(|e| format!("cannot create {}: {e}", corpus.display()))?;
    let extra = read_dirs(root, first, &corpus);
    let mut cmd = run_command(root, first, secs, &corpus, &extra);
    println!("$ {}", process::render(&cmd));
    let outcome = process::run_until(&mut cmd, None);
    if outcome.success() {
        Ok(())
    } else {
        Err(format!("fuzz {first}: {}", outcome.describe()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executions_come_from_the_final_stats() {
        let out = "INFO: Seed: 1\n#2\tINITED cov: 10\n#1024\tpulse  cov: 12\n\
                   Done 5000 runs in 10 second(s)\nstat::number_of_executed_units: 5003\n\
                   stat::average_exec_per_sec:     500\n";
        assert_eq!(executions(out), Some(5003));
        assert_eq!(
            executions("#2\tINITED\nDone 77 runs in 1 second(s)\n"),
            Some(77)
        );
        assert_eq!(
            executions("#2\tINITED\n#4096\tpulse\n==1== ERROR: deadly signal\n"),
            Some(4096)
        );
        assert_eq!(executions("error: no such command: `fuzz`\n"), None);
    }

    #[test]
    fn targets_are_the_bin_entries() {
        let toml = r#"
[package]
name = "bough-fuzz"

[[bin]]
name = "names"   # the naming crate
path = "fuzz_targets/names.rs"

[dependencies]
name = "not-a-target"

[[bin]]
name = "page_frame"
path = "fuzz_targets/page_frame.rs"
"#;
        assert_eq!(targets_in(toml), ["names", "page_frame"]);
    }

    #[test]
    fn the_fuzz_workspace_declares_targets_with_sources() {
        let root = workspace::root();
        let targets = targets(&root).unwrap();
        assert!(!targets.is_empty());
        for t in targets {
            let src = fuzz_dir(&root).join("fuzz_targets").join(format!("{t}.rs"));
            assert!(src.is_file(), "{} missing", src.display());
        }
    }
}
