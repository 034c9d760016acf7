//! `bough merge` between siblings, `bough rebase`, `bough cherry-pick`, `bough revert` and
//! `bough rehome --keep-merge-bases` end to end (issue 18 §1–2): text and `--json` output,
//! dry runs, the conflict exit code and policies, and the refusal after a re-home.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

fn run(store: &Path, args: &[&str]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bough"));
    c.arg("--store").arg(store);
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

fn ok(store: &Path, args: &[&str]) -> String {
    let (code, out, err) = run(store, args);
    assert_eq!(code, 0, "bough {args:?} failed:\n{out}\n{err}");
    out
}

fn fails(store: &Path, args: &[&str], want: i32) -> (String, String) {
    let (code, out, err) = run(store, args);
    assert_eq!(code, want, "bough {args:?}: expected {want}:\n{out}\n{err}");
    (out, err)
}

fn json(s: &str) -> Value {
    serde_json::from_str(s.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

fn store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    (dir, store)
}

fn get(s: &Path, target: &str, key: &str) -> String {
    ok(s, &["get", target, key]).trim_end().to_string()
}

/// `main` with k1..k3, and siblings `a` (forked first) and `b`.
fn siblings(s: &Path) {
    for k in ["k1", "k2", "k3"] {
        ok(s, &["put", "t.0", k, "base"]);
    }
    ok(s, &["branch", "create", "a", "t.0", "--from", "main"]);
    ok(s, &["put", "t.0", "k3", "main"]);
    ok(s, &["branch", "create", "b", "t.0", "--from", "main"]);
    ok(s, &["put", "t.0@a", "k1", "from-a"]);
    ok(s, &["put", "t.0@b", "k2", "from-b"]);
}

#[test]
fn siblings_merge_on_the_command_line() {
    let (_d, s) = store();
    siblings(&s);
    let out = json(&ok(&s, &["--json", "merge", "a", "b", "t.0"]));
    assert_eq!(out["committed"], true, "{out}");
    assert_eq!(out["applied"], 1, "{out}");
    assert_eq!(get(&s, "t.0@b", "k1"), "from-a");
    assert_eq!(get(&s, "t.0@b", "k3"), "main");
}

#[test]
fn rehome_names_the_merges_it_ends_and_keep_merge_bases_keeps_them() {
    let (_d, s) = store();
    siblings(&s);
    let kept = json(&ok(
        &s,
        &["--json", "rehome", "t.0@a", "--keep-merge-bases"],
    ));
    assert_eq!(kept["merge_bases_kept"], 1, "{kept}");
    assert_eq!(kept["merges_lost"], Value::Array(vec![]), "{kept}");
    let out = ok(&s, &["rehome", "t.0@a"]);
    assert!(out.contains("can no longer merge"), "{out}");
    assert!(
        out.contains("a and b") && out.contains("a and main"),
        "{out}"
    );
    let (_, err) = fails(&s, &["merge", "a", "b", "t.0"], 2);
    assert!(
        err.contains("released by the re-home (or a restore) of `a`"),
        "{err}"
    );
    // b and main still share b's fork state.
    ok(&s, &["merge", "b", "main", "t.0"]);
}

#[test]
fn rebase_reports_conflicts_and_settles_them_by_policy() {
    let (_d, s) = store();
    siblings(&s);
    ok(&s, &["put", "t.0@b", "k3", "from-b"]);
    ok(&s, &["put", "t.0", "k3", "main-again"]);
    let (out, err) = fails(&s, &["rebase", "b", "main", "t.0"], 7);
    assert!(out.contains("1 conflict"), "{out}");
    assert!(
        out.contains("ours: main-again") && out.contains("theirs: from-b"),
        "{out}"
    );
    assert!(err.contains("nothing was changed"), "{err}");
    let dry = json(&ok(
        &s,
        &[
            "--json",
            "rebase",
            "b",
            "main",
            "t.0",
            "--policy",
            "theirs",
            "--dry-run",
        ],
    ));
    assert_eq!(dry["committed"], false, "{dry}");
    assert_eq!(dry["resolved"], 1, "{dry}");
    assert_eq!(get(&s, "t.0@b", "k3"), "from-b");
    let done = json(&ok(
        &s,
        &["--json", "rebase", "t.0@b", "main", "--policy", "ours"],
    ));
    assert_eq!(done["committed"], true, "{done}");
    assert_eq!(done["merge_base"]["branch"], "main", "{done}");
    assert_eq!(get(&s, "t.0@b", "k3"), "main-again");
    assert_eq!(get(&s, "t.0@b", "k2"), "from-b");
    // main is b's new base: the merge back is a fast-forward.
    let m = json(&ok(&s, &["--json", "merge", "b", "main", "t.0"]));
    assert_eq!(m["fast_forward"], true, "{m}");
}

#[test]
fn cherry_pick_and_revert_a_range() {
    let (_d, s) = store();
    siblings(&s);
    ok(&s, &["archive", "create", "t.0@a"]);
    let list = json(&ok(&s, &["--json", "archive", "list", "t.0@a"]));
    let archive = list["archives"][0]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("no archive listed: {list}"))
        .to_string();
    ok(&s, &["put", "t.0@a", "k2", "a2"]);
    ok(&s, &["put", "t.0@a", "k4", "a4"]);
    let range = format!("archive:{archive}..a");
    let dry = json(&ok(
        &s,
        &["--json", "cherry-pick", &range, "t.0@main", "--dry-run"],
    ));
    assert_eq!(
        (dry["applied"].clone(), dry["committed"].clone()),
        (2.into(), false.into())
    );
    let out = ok(&s, &["cherry-pick", &range, "t.0"]);
    assert!(out.contains("2 keys applied"), "{out}");
    assert_eq!(get(&s, "t.0", "k2"), "a2");
    assert_eq!(get(&s, "t.0", "k4"), "a4");
    assert_eq!(
        get(&s, "t.0", "k1"),
        "base",
        "the first change of a is outside the range"
    );
    // b changed k2 otherwise: a conflict, settled by --policy.
    let (out, _) = fails(&s, &["cherry-pick", &range, "t.0@b"], 7);
    assert!(
        out.contains("ours: from-b") && out.contains("theirs: a2"),
        "{out}"
    );
    ok(&s, &["cherry-pick", &range, "t.0@b", "--policy", "theirs"]);
    assert_eq!(get(&s, "t.0@b", "k2"), "a2");
    // Revert the range on main: k2 and k4 go back.
    let r = json(&ok(&s, &["--json", "revert", &range, "t.0"]));
    assert_eq!(r["applied"], 2, "{r}");
    assert_eq!(get(&s, "t.0", "k2"), "base");
    fails(&s, &["get", "t.0", "k4"], 3);
    // Ranges that name nothing are usage errors or not found.
    fails(&s, &["cherry-pick", "a", "t.0"], 2);
    fails(&s, &["cherry-pick", "a:999..a", "t.0"], 3);
}
