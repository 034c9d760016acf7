//! `bough tag` and `bough branch protect / unprotect / expire` end to end, with `--json`:
//! a tag as a merge and branch source, a tag and a branch sharing no name, protected `main`
//! refusing a non-fast-forward merge and a reset, an expiry refused without `--force`.

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
fn tag_create_list_get_as_merge_and_branch_source_and_delete() {
    let (_d, s) = store();
    let s = s.as_path();
    ok(s, &["put", "t.0", "a", "1"]);
    ok(s, &["branch", "create", "feat", "t.0"]);
    ok(s, &["put", "t.0@feat", "b", "2"]);
    let made = json(&ok(s, &["--json", "tag", "create", "v1", "t.0@feat"]));
    assert_eq!(made["tag"], "v1");
    assert_eq!(made["branch"], "feat");
    ok(s, &["put", "t.0@feat", "b", "3"]);
    ok(s, &["put", "t.0", "a", "9"]);
    let listed = json(&ok(s, &["--json", "tag", "list", "t.0"]));
    assert_eq!(listed["tags"][0]["tag"], "v1");
    assert_eq!(listed["tags"][0]["version"], made["version"]);
    assert!(ok(s, &["tag", "list", "t.0"]).contains("feat (term 0)"));
    assert_eq!(ok(s, &["tag", "get", "v1", "t.0", "b"]).trim(), "2");
    // As a diff side, a merge source and a branch source.
    let diff = json(&ok(s, &["--json", "diff", "v1", "feat", "t.0"]));
    assert!(diff.to_string().contains('b'), "{diff}");
    let merged = json(&ok(s, &["--json", "merge", "v1", "main", "t.0"]));
    assert_eq!(merged["committed"], true, "{merged}");
    assert_eq!(ok(s, &["get", "t.0", "b"]).trim(), "2");
    ok(s, &["branch", "create", "hotfix", "t.0@v1"]);
    assert_eq!(ok(s, &["get", "t.0@hotfix", "b"]).trim(), "2");
    // A tag and a branch may not share a name, in either order, nor fold to one.
    fails(s, &["tag", "create", "feat", "t.0"], 4);
    fails(s, &["branch", "create", "v1", "t.0"], 4);
    fails(s, &["tag", "create", "V1", "t.0"], 2);
    // Deleted only explicitly.
    ok(s, &["branch", "delete", "feat", "t.0"]);
    assert_eq!(ok(s, &["tag", "get", "v1", "t.0", "b"]).trim(), "2");
    ok(s, &["gc"]);
    assert_eq!(ok(s, &["tag", "get", "v1", "t.0", "b"]).trim(), "2");
    ok(s, &["verify"]);
    ok(s, &["tag", "delete", "v1", "t.0"]);
    fails(s, &["tag", "get", "v1", "t.0", "b"], 3);
    fails(s, &["tag", "delete", "v1", "t.0"], 3);
}

#[test]
fn protected_main_and_branch_expiry_through_the_cli() {
    let (_d, s) = store();
    let s = s.as_path();
    ok(s, &["put", "t.0", "a", "1"]);
    ok(s, &["branch", "create", "feat", "t.0"]);
    let p = json(&ok(s, &["--json", "branch", "protect", "main", "t.0"]));
    assert_eq!(p["protected"], true);
    ok(s, &["put", "t.0@feat", "b", "2"]);
    ok(s, &["put", "t.0", "c", "3"]);
    let err = fails(s, &["merge", "feat", "main", "t.0"], 2);
    assert!(err.contains("is protected"), "{err}");
    let err = fails(s, &["reset", "t.0@main", "--to", "feat"], 2);
    assert!(err.contains("is protected"), "{err}");
    let listed = json(&ok(s, &["--json", "branch", "list", "t.0"]));
    let main = listed["branches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["branch"] == "main")
        .unwrap()
        .clone();
    assert_eq!(main["protected"], true, "{main}");
    assert!(ok(s, &["branch", "list", "t.0"]).contains("protected"));
    ok(s, &["branch", "unprotect", "main", "t.0"]);
    ok(s, &["merge", "feat", "main", "t.0"]);

    // Expiry: refused on a protected branch without --force; set, listed, removed.
    ok(s, &["branch", "protect", "feat", "t.0"]);
    let err = fails(s, &["branch", "expire", "feat", "t.0", "--in", "1h"], 2);
    assert!(err.contains("--force"), "{err}");
    let e = json(&ok(
        s,
        &[
            "--json", "branch", "expire", "feat", "t.0", "--in", "1h", "--force",
        ],
    ));
    assert!(e["expires_at_ms"].as_u64().is_some(), "{e}");
    let info = json(&ok(s, &["--json", "branch", "info", "t.0@feat"]));
    assert_eq!(info["expires_at_ms"], e["expires_at_ms"]);
    assert!(ok(s, &["branch", "info", "t.0@feat"]).contains("expires"));
    let e = json(&ok(
        s,
        &["--json", "branch", "expire", "feat", "t.0", "--never"],
    ));
    assert_eq!(e["expires_at_ms"], Value::Null);
    // An expiry that has already passed: the next writing open deletes the branch, as a
    // user would (a read-only listing changes nothing and still shows it).
    ok(s, &["branch", "create", "gone", "t.0", "--ttl", "1h"]);
    ok(s, &["branch", "expire", "gone", "t.0", "--at", "1"]);
    assert!(ok(s, &["branch", "list", "t.0"]).contains("gone"));
    ok(s, &["put", "t.0", "x", "1"]);
    let names = ok(s, &["branch", "list", "t.0"]);
    assert!(!names.contains("gone"), "{names}");
    fails(s, &["branch", "expire", "feat", "t.0", "--in", "soon"], 2);
}

#[test]
fn verify_counts_tags_and_reads_their_pages() {
    let (_d, s) = store();
    let s = s.as_path();
    ok(s, &["put", "t.0", "a", "1"]);
    ok(s, &["tag", "create", "v1", "t.0"]);
    let v = json(&ok(s, &["--json", "verify"]));
    assert_eq!(v["clean"], true, "{v}");
    assert_eq!(v["partitions"][0]["tags"], 1, "{v}");
    // The tag's state is one more snapshot walked.
    assert!(
        v["partitions"][0]["snapshots"].as_u64().unwrap() >= 2,
        "{v}"
    );
    assert!(ok(s, &["verify"]).contains("1 tag"));
}
