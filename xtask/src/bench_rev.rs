//! `cargo xtask bench --bough-rev REV`: a second harness binary built against Bough at git
//! revision REV, for the before/after rows (issue 15). REV's tree is exported with `git
//! archive` (no worktree is registered) into `<bench target>/bough-rev/<rev>/tree`; a
//! manifest beside it names bench/'s own sources and REV's `crates/bough`, with the features
//! `baseline` and, when bench/Cargo.toml declares one for REV, `baseline-<rev>` (the API
//! shim in bench/src/shim/). It builds into the same target directory, so the peers' crates
//! are shared.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::process;
use crate::workspace;

/// REV resolved to its 7-character short hash.
fn short(root: &Path, rev: &str) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["rev-parse", "--short=7", &format!("{rev}^{{commit}}")])
        .output()
        .map_err(|e| format!("git rev-parse: {e}"))?;
    if !out.status.success() {
        return Err(format!("{rev:?} is not a commit of {}", root.display()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// bench/Cargo.toml rewritten for the revision's build.
pub fn manifest(
    bench_manifest: &str,
    rev: &str,
    bench_src: &Path,
    tree: &Path,
) -> Result<String, String> {
    let mut text = String::new();
    let mut seen = (false, false, false);
    for line in bench_manifest.lines() {
        // The package and its binary both: the binary lands beside bench/'s own.
        let l = if line == "name = \"bough-bench\"" {
            seen.0 = true;
            format!("name = \"bough-bench-{rev}\"")
        } else if line == "path = \"src/main.rs\"" {
            seen.1 = true;
            format!(
                "path = {:?}",
                bench_src.join("main.rs").display().to_string()
            )
        } else if line.starts_with("bough = { path = \"../crates/bough\"") {
            seen.2 = true;
            format!(
                "bough = {{ path = {:?} }}",
                tree.join("crates").join("bough").display().to_string()
            )
        } else {
            line.to_string()
        };
        text.push_str(&l);
        text.push('\n');
    }
    if seen != (true, true, true) {
        return Err("bench/Cargo.toml no longer has the lines --bough-rev rewrites (package name, bin path, bough path dependency)".into());
    }
    Ok(text)
}

/// Builds the harness against `rev`; returns (`bough@<rev>`, the binary).
pub fn build(
    root: &Path,
    rev: &str,
    target: &Path,
    jobs: &str,
) -> Result<(String, PathBuf), String> {
    let rev = short(root, rev)?;
    let dir = target.join("bough-rev").join(&rev);
    let tree = dir.join("tree");
    if !tree
        .join("crates")
        .join("bough")
        .join("Cargo.toml")
        .is_file()
    {
        let _ = std::fs::remove_dir_all(&tree);
        std::fs::create_dir_all(&tree).map_err(|e| format!("{}: {e}", tree.display()))?;
        println!("xtask: exporting {rev} into {}", tree.display());
        let mut archive = Command::new("git")
            .arg("-C")
            .arg(root)
            .args(["archive", "--format=tar", &rev])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("git archive: {e}"))?;
        let stdout = archive.stdout.take().ok_or("git archive: no stdout")?;
        let tar = Command::new("tar")
            .arg("-x")
            .arg("-C")
            .arg(&tree)
            .stdin(stdout)
            .status()
            .map_err(|e| format!("tar: {e}"))?;
        let git = archive.wait().map_err(|e| format!("git archive: {e}"))?;
        if !tar.success() || !git.success() {
            return Err(format!("exporting {rev}: git archive {git}, tar {tar}"));
        }
    }
    let bench = root.join("bench");
    let bench_manifest = std::fs::read_to_string(bench.join("Cargo.toml"))
        .map_err(|e| format!("bench/Cargo.toml: {e}"))?;
    let harness = dir.join("harness");
    std::fs::create_dir_all(&harness).map_err(|e| format!("{}: {e}", harness.display()))?;
    let text = manifest(&bench_manifest, &rev, &bench.join("src"), &tree)?;
    std::fs::write(harness.join("Cargo.toml"), text).map_err(|e| e.to_string())?;
    if !harness.join("Cargo.lock").is_file() {
        // The peers resolve to the versions bench/ uses, so their builds are shared.
        std::fs::copy(bench.join("Cargo.lock"), harness.join("Cargo.lock"))
            .map_err(|e| format!("Cargo.lock: {e}"))?;
    }
    let shim = format!("baseline-{rev}");
    let features = if bench_manifest.contains(&format!("\n{shim} = ")) {
        format!("baseline,{shim}")
    } else {
        "baseline".to_string()
    };
    let mut cmd = Command::new(workspace::cargo());
    cmd.current_dir(&harness)
        .args(["build", "--release", "-j", jobs, "--features", &features])
        .arg("--target-dir")
        .arg(target)
        .env_remove("CARGO_TARGET_DIR")
        .env("BOUGH_BENCH_REV", &rev);
    println!("$ {}", process::render(&cmd));
    let outcome = process::run_until(&mut cmd, None);
    if !outcome.success() {
        return Err(format!(
            "building the harness at {rev}: {}",
            outcome.describe()
        ));
    }
    Ok((
        format!("bough@{rev}"),
        target.join("release").join(format!("bough-bench-{rev}")),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_points_at_the_revision_and_keeps_the_rest() {
        let root = workspace::root();
        let text = std::fs::read_to_string(root.join("bench").join("Cargo.toml")).unwrap();
        let m = manifest(&text, "8e26e9c", Path::new("/b/src"), Path::new("/t")).unwrap();
        assert!(m.contains("name = \"bough-bench-8e26e9c\""));
        assert!(m.contains("path = \"/b/src/main.rs\""));
        assert!(m.contains("bough = { path = \"/t/crates/bough\" }"));
        assert!(m.contains("[workspace]"));
        assert!(m.contains("baseline-8e26e9c = [\"baseline\"]"));
        assert!(manifest("[package]\n", "x", Path::new("/b"), Path::new("/t")).is_err());
    }
}
