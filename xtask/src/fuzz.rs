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
