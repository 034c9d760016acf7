//! Table-wide branch operations from the CLI: `branch create/delete --all-partitions` and
//! `merge --all-partitions` go through the store's branch registry (all or nothing), a
//! conflict on one partition changes none, and `bough inspect` decodes the records.

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

fn fails(store: &Path, args: &[&str], code: i32) -> String {
    let (c, out, err) = run(store, args);
    assert_eq!(
        c, code,
        "bough {args:?}: expected exit {code}:\n{out}\n{err}"
    );
    err
}

fn json(s: &str) -> Value {
    serde_json::from_str(s.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

fn store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    (dir, path)
}

#[test]
fn merge_all_partitions_is_all_or_nothing_and_the_registry_is_inspectable() {
    let (_d, s) = store();
    let s = s.as_path();
    for p in 0..3 {
        ok(s, &["put", &format!("orders.{p}"), "a", "1"]);
    }
    ok(
        s,
        &["branch", "create", "wide", "--all-partitions", "orders"],
    );
    for p in 0..3 {
        ok(
            s,
            &["put", &format!("orders.{p}@wide"), "b", &format!("w{p}")],
        );
    }
    // A conflict on partition 1 only: nothing is merged anywhere.
    ok(s, &["put", "orders.1@wide", "a", "theirs"]);
    ok(s, &["put", "orders.1", "a", "ours"]);
    let err = fails(
        s,
        &["merge", "wide", "main", "--all-partitions", "orders"],
        7,
    );
    assert!(err.contains("nothing was changed"), "{err}");
    for p in 0..3 {
        let (code, _, _) = run(s, &["get", &format!("orders.{p}"), "b"]);
        assert_ne!(code, 0, "partition {p} was merged");
    }
    let out = json(&ok(
        s,
        &[
            "--json",
            "merge",
            "wide",
            "main",
            "--all-partitions",
            "orders",
            "--policy",
            "theirs",
        ],
    ));
    assert_eq!(out["partitions"].as_array().unwrap().len(), 3);
    for p in 0..3 {
        assert_eq!(
            ok(s, &["get", &format!("orders.{p}"), "b"]),
            format!("w{p}\n")
        );
    }
    assert_eq!(ok(s, &["get", "orders.1", "a"]), "theirs\n");
    // create, merge: two operations, each with its outcome.
    let intent = ok(
        s,
        &[
            "inspect",
            "file",
            &s.join("tableop_1").display().to_string(),
        ],
    );
    assert!(
        intent.contains("Merge of branch main on table orders"),
        "{intent}"
    );
    let outcome = ok(
        s,
        &[
            "inspect",
            "file",
            &s.join("tableop_1_end").display().to_string(),
        ],
    );
    assert!(outcome.contains("Applied"), "{outcome}");
    let verify = ok(s, &["verify", "--strict"]);
    assert!(!verify.contains("tableop"), "{verify}");
}
