//! `bough history` end to end (issue 18 §5): with `history_window_ms` in the config, a
//! branch of a child branch at an instant between two writes, a restore to an instant with
//! its backup, the history point list, `--json`, and the refusals (no window, an instant
//! outside it) with their hint. The CLI reads the system clock: instants are taken between
//! writes a few milliseconds apart.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

fn run(store: &Path, config: Option<&Path>, args: &[&str]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bough"));
    c.arg("--store").arg(store);
    if let Some(cfg) = config {
        c.arg("--config").arg(cfg);
    }
    for v in ["BOUGH_STORE", "BOUGH_CONFIG", "BOUGH_LOG"] {
        c.env_remove(v);
    }
    let o = c.args(args).stdin(Stdio::null()).output().expect("runs");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

struct Cli {
    _dir: tempfile::TempDir,
    store: PathBuf,
    config: PathBuf,
}

impl Cli {
    fn new() -> Cli {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let config = dir.path().join("bough.toml");
        std::fs::write(&config, "history_window_ms = 3600000\n").unwrap();
        Cli {
            _dir: dir,
            store,
            config,
        }
    }

    fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = run(&self.store, Some(&self.config), args);
        assert_eq!(code, 0, "bough {args:?} failed:\n{out}\n{err}");
        out
    }
}

/// Now by the system clock, with a pause on each side so the instant falls strictly
/// between the writes before and after it.
fn instant() -> u64 {
    std::thread::sleep(Duration::from_millis(5));
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    std::thread::sleep(Duration::from_millis(5));
    t
}

fn json(s: &str) -> Value {
    serde_json::from_str(s.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

#[test]
fn history_branch_of_a_child_and_restore_with_json() {
    let cli = Cli::new();
    cli.ok(&["put", "t.0", "k", "main"]);
    cli.ok(&["branch", "create", "child", "t.0"]);
    cli.ok(&["put", "t.0@child", "k", "one"]);
    let between = instant();
    cli.ok(&["put", "t.0@child", "k", "two"]);
    cli.ok(&["put", "t.0@child", "k2", "x"]);
    // A branch of the child as it was between its writes.
    let at = between.to_string();
    let made = json(&cli.ok(&[
        "--json",
        "history",
        "branch",
        "t.0@child",
        "then",
        "--at",
        &at,
    ]));
    assert_eq!(made["created"], "t.0@then");
    assert_eq!(made["at_ms"], between);
    assert_eq!(cli.ok(&["get", "t.0@then", "k"]).trim(), "one");
    let (code, _, _) = run(&cli.store, Some(&cli.config), &["get", "t.0@then", "k2"]);
    assert_ne!(code, 0, "k2 was written after the instant");
    // The child's points list, in text and JSON.
    let list = json(&cli.ok(&["--json", "history", "list", "t.0@child"]));
    let points = list["history_points"].as_array().unwrap();
    assert!(points.len() >= 3, "{list}");
    assert!(
        cli.ok(&["history", "list", "t.0@child"])
            .contains("history_")
    );
    // Restore the child to the instant; the replaced state is kept.
    let r = json(&cli.ok(&[
        "--json",
        "history",
        "restore",
        "t.0@child",
        "--at",
        &at,
        "--backup",
        "child-before",
    ]));
    assert_eq!(r["backup"], "child-before");
    assert_eq!(cli.ok(&["get", "t.0@child", "k"]).trim(), "one");
    assert_eq!(cli.ok(&["get", "t.0@child-before", "k"]).trim(), "two");
    // `--ago` reaches back from now: a second ago the child held "two".
    cli.ok(&[
        "history",
        "branch",
        "t.0@child-before",
        "recent",
        "--ago",
        "1",
    ]);
    assert_eq!(cli.ok(&["get", "t.0@recent", "k2"]).trim(), "x");
}

#[test]
fn history_refusals_say_why_and_what_would_help() {
    let cli = Cli::new();
    cli.ok(&["put", "t.0", "k", "v"]);
    // Two hours ago is outside a one-hour window.
    let (code, _, err) = run(
        &cli.store,
        Some(&cli.config),
        &["history", "branch", "t.0", "old", "--ago", "2h"],
    );
    assert_ne!(code, 0);
    assert!(err.contains("history window"), "{err}");
    // A store written without a window has no history points: the hint says so.
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("store");
    assert_eq!(run(&plain, None, &["put", "t.0", "k", "v"]).0, 0);
    let (code, _, err) = run(
        &plain,
        None,
        &["history", "branch", "t.0", "x", "--ago", "0"],
    );
    assert_ne!(code, 0);
    assert!(err.contains("history_window_ms"), "{err}");
    // Exactly one of --at and --ago.
    let (code, _, _) = run(
        &cli.store,
        Some(&cli.config),
        &["history", "branch", "t.0", "y"],
    );
    assert_eq!(code, 2);
}
