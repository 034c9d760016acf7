//! `cargo xtask bench`: builds and runs the side-by-side benchmark harness in `bench/`
//! (a separate workspace with its own lock file and target directory, so no root-workspace
//! command ever compiles the peers), installing fio and libclang-dev first when missing.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::process;
use crate::workspace;

/// Engines the harness knows, in the order it reports them.
pub const ENGINES: &[&str] = &["bough", "redb", "fjall", "lmdb", "rocksdb"];

const USAGE: &str = "\
usage: cargo xtask bench [--quick] [--engines bough,redb,fjall,lmdb,rocksdb]
                         [--no-fio] [--no-branches] [--data-dir DIR]

Builds bench/ in release mode (RocksDB only when it is among the engines: its first build
compiles RocksDB from source, ~16 min on 2 cores, longer with BOUGH_BENCH_JOBS=1) and runs
it. BOUGH_BENCH_JOBS sets cargo's -j for that build (default 1: the machines are shared).
The report goes to target/bench-report/.";

/// What one `cargo xtask bench` invocation does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub quick: bool,
    pub engines: Vec<String>,
    /// Arguments handed to the harness unchanged.
    pub passthrough: Vec<String>,
}

impl Plan {
    /// Whether the harness must be built with RocksDB.
    pub fn needs_rocksdb(&self) -> bool {
        self.engines.iter().any(|e| e == "rocksdb")
    }

    /// The harness's command-line arguments.
    pub fn harness_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.quick {
            args.push("--quick".to_string());
        }
        args.push("--engines".to_string());
        args.push(self.engines.join(","));
        args.extend(self.passthrough.iter().cloned());
        args
    }
}

/// Parses `cargo xtask bench` arguments.
pub fn plan(args: &[String]) -> Result<Plan, String> {
    let mut p = Plan {
        quick: false,
        engines: ENGINES.iter().map(|e| e.to_string()).collect(),
        passthrough: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => p.quick = true,
            "--engines" => {
                let list = it
                    .next()
                    .ok_or_else(|| format!("--engines needs a list\n{USAGE}"))?;
                let engines: Vec<String> = list
                    .split(',')
                    .map(|e| e.trim().to_lowercase())
                    .filter(|e| !e.is_empty())
                    .collect();
                if let Some(bad) = engines.iter().find(|e| !ENGINES.contains(&e.as_str())) {
                    return Err(format!(
                        "unknown engine {bad:?}; engines: {}",
                        ENGINES.join(", ")
                    ));
                }
                if engines.is_empty() {
                    return Err(format!("--engines needs at least one engine\n{USAGE}"));
                }
                p.engines = engines;
            }
            "--no-fio" | "--no-branches" => p.passthrough.push(arg.clone()),
            "--data-dir" => {
                let dir = it
                    .next()
                    .ok_or_else(|| format!("--data-dir needs a path\n{USAGE}"))?;
                p.passthrough.push(arg.clone());
                p.passthrough.push(dir.clone());
            }
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(p)
}

fn bench_dir(root: &Path) -> PathBuf {
    root.join("bench")
}

/// Whether a libclang shared library is installed (bindgen loads it at build time).
fn has_libclang() -> bool {
    let Ok(entries) = std::fs::read_dir("/usr/lib") else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        let name = name.to_string_lossy();
        name.starts_with("llvm-")
            && std::fs::read_dir(e.path().join("lib")).is_ok_and(|libs| {
                libs.flatten()
                    .any(|l| l.file_name().to_string_lossy().starts_with("libclang.so"))
            })
    })
}

/// Installs Debian `packages` with apt-get (updating the lists first).
fn apt_install(packages: &[&str]) -> Result<(), String> {
    println!("xtask: installing {} with apt-get", packages.join(" "));
    let update = process::run_until(Command::new("apt-get").args(["update", "-qq"]), None);
    if !update.success() {
        return Err(format!("apt-get update: {}", update.describe()));
    }
    let mut cmd = Command::new("apt-get");
    cmd.args(["install", "-y", "-qq"]).args(packages);
    cmd.env("DEBIAN_FRONTEND", "noninteractive");
    let outcome = process::run_until(&mut cmd, None);
    if outcome.success() {
        Ok(())
    } else {
        Err(format!(
            "apt-get install {}: {}",
            packages.join(" "),
            outcome.describe()
        ))
    }
}

/// `cargo xtask bench ...`.
pub fn cli(root: &Path, args: &[String]) -> Result<(), String> {
    let plan = plan(args)?;
    let mut missing = Vec::new();
    if !plan.passthrough.iter().any(|a| a == "--no-fio") && !process::probe("fio", &["--version"]) {
        missing.push("fio");
    }
    if plan.needs_rocksdb() && !has_libclang() {
        missing.push("libclang-dev");
    }
    if !missing.is_empty() {
        apt_install(&missing)?;
    }

    let dir = bench_dir(root);
    let jobs = std::env::var("BOUGH_BENCH_JOBS").unwrap_or_else(|_| "1".to_string());
    let mut build = Command::new(workspace::cargo());
    build
        .current_dir(&dir)
        .args(["build", "--release", "-j", &jobs]);
    if plan.needs_rocksdb() {
        build.args(["--features", "rocksdb"]);
        println!(
            "xtask: building the harness with RocksDB (its first build compiles RocksDB from source)"
        );
    }
    // bench/ keeps its own target directory: different dependencies, no thrashing.
    build.env_remove("CARGO_TARGET_DIR");
    println!("$ {}", process::render(&build));
    let outcome = process::run_until(&mut build, None);
    if !outcome.success() {
        return Err(format!("building bench/: {}", outcome.describe()));
    }

    let binary = dir.join("target").join("release").join("bough-bench");
    let mut run = Command::new(&binary);
    run.current_dir(&dir).args(plan.harness_args());
    println!("$ {}", process::render(&run));
    let outcome = process::run_until(&mut run, None);
    if !outcome.success() {
        return Err(format!("bough-bench: {}", outcome.describe()));
    }
    let report = root.join("target").join("bench-report");
    println!(
        "xtask: report in {} (report.md, report.json, *.svg)",
        report.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn defaults_to_every_engine_in_full_mode() {
        let p = plan(&[]).unwrap();
        assert!(!p.quick);
        assert_eq!(p.engines, ENGINES);
        assert!(p.needs_rocksdb());
        assert_eq!(
            p.harness_args(),
            args(&["--engines", "bough,redb,fjall,lmdb,rocksdb"])
        );
    }

    #[test]
    fn engines_narrow_the_build_and_the_run() {
        let p = plan(&args(&["--quick", "--engines", "Bough, redb", "--no-fio"])).unwrap();
        assert!(p.quick);
        assert_eq!(p.engines, ["bough", "redb"]);
        assert!(!p.needs_rocksdb());
        assert_eq!(
            p.harness_args(),
            args(&["--quick", "--engines", "bough,redb", "--no-fio"])
        );
    }

    #[test]
    fn rejects_unknown_engines_and_arguments() {
        let e = plan(&args(&["--engines", "bough,sled"])).unwrap_err();
        assert!(e.contains("sled"), "{e}");
        assert!(plan(&args(&["--engines"])).is_err());
        assert!(plan(&args(&["--fast"])).unwrap_err().contains("--fast"));
    }

    #[test]
    fn the_bench_workspace_is_separate_and_declares_the_rocksdb_feature() {
        let root = workspace::root();
        let manifest = std::fs::read_to_string(bench_dir(&root).join("Cargo.toml")).unwrap();
        assert!(manifest.contains("[workspace]"));
        assert!(manifest.contains("rocksdb = [\"dep:rocksdb\"]"));
        let root_manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
        assert!(root_manifest.contains("exclude = [\"fuzz\", \"bench\"]"));
    }
}
