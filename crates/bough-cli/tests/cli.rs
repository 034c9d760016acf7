//! The `bough` binary end to end, against stores in temporary directories: every command
//! group, `--json` output, and bad input (missing store, unknown branch, invalid names,
//! conflicting branch names, corrupt files, cut-short imports).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    raw: Vec<u8>,
}

fn cmd(store: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bough"));
    c.arg("--store").arg(store);
    for v in ["BOUGH_STORE", "BOUGH_CONFIG", "BOUGH_LOG"] {
        c.env_remove(v);
    }
    c.stdin(Stdio::null());
    c
}

fn finish(o: Output) -> Run {
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        raw: o.stdout,
    }
}

fn run(store: &Path, args: &[&str]) -> Run {
    finish(cmd(store).args(args).output().expect("runs"))
}

fn run_stdin(store: &Path, args: &[&str], input: &[u8]) -> Run {
    let mut child = cmd(store)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawns");
    child.stdin.take().unwrap().write_all(input).unwrap();
    finish(child.wait_with_output().unwrap())
}

/// Runs and expects success.
fn ok(store: &Path, args: &[&str]) -> String {
    let r = run(store, args);
    assert_eq!(
        r.code, 0,
        "bough {args:?} failed:\n{}\n{}",
        r.stdout, r.stderr
    );
    r.stdout
}

/// Runs and expects exit code `code`.
fn fails(store: &Path, args: &[&str], code: i32) -> Run {
    let r = run(store, args);
    assert_eq!(
        r.code, code,
        "bough {args:?}: expected exit {code}:\n{}\n{}",
        r.stdout, r.stderr
    );
    r
}

fn json(s: &str) -> Value {
    serde_json::from_str(s.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

fn store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    (dir, store)
}

#[test]
fn put_get_scan_del_round_trip() {
    let (_d, s) = store();
    let s = s.as_path();
    ok(s, &["put", "orders.0", "k1", "v1"]);
    ok(s, &["put", "orders.0", "k2", "two\twords"]);
    ok(
        s,
        &[
            "put", "orders.0", "k3", "v3", "--ttl", "3600000", "--ts", "42",
        ],
    );
    ok(s, &["put", "--hex", "orders.0", "00ff", "6869"]);
    assert_eq!(ok(s, &["get", "orders.0", "k1"]), "v1\n");
    assert_eq!(ok(s, &["get", "orders.0", "k2"]), "two\\twords\n");
    assert_eq!(ok(s, &["get", "--hex", "orders.0", "00ff"]), "6869\n");
    let raw = run(s, &["get", "--raw", "orders.0", "k2"]);
    assert_eq!(raw.raw, b"two\twords");
    let g = json(&ok(s, &["--json", "get", "orders.0", "k3"]));
    assert_eq!(g["value"], "v3");
    assert_eq!(g["timestamp"], 42);
    assert!(g["expire_at"].as_u64().unwrap() > 0);

    // Escaped output: the binary key sorts first and prints as \x escapes.
    let all = ok(s, &["scan", "orders.0"]);
    assert_eq!(all, "\\x00\\xff\thi\nk1\tv1\nk2\ttwo\\twords\nk3\tv3\n");
    assert_eq!(
        ok(s, &["scan", "orders.0", "--keys-only", "--hex"]),
        "00ff\n6b31\n6b32\n6b33\n"
    );
    assert_eq!(
        ok(
            s,
            &[
                "scan",
                "orders.0",
                "--from",
                "k1",
                "--from-exclusive",
                "--to",
                "k3"
            ]
        ),
        "k2\ttwo\\twords\n"
    );
    assert_eq!(
        ok(
            s,
            &[
                "scan",
                "orders.0",
                "--from",
                "k1",
                "--limit",
                "2",
                "--keys-only"
            ]
        ),
        "k1\nk2\n"
    );
    let lines: Vec<Value> = ok(s, &["--json", "scan", "orders.0"])
        .lines()
        .map(json)
        .collect();
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0]["key_hex"], "00ff");
    assert_eq!(lines[2]["value"], "two\twords");

    ok(s, &["del", "orders.0", "k1"]);
    fails(s, &["get", "orders.0", "k1"], 3);
    assert_eq!(
        ok(s, &["scan", "orders.0", "--keys-only"]),
        "\\x00\\xff\nk2\nk3\n"
    );

    // `scan --json` output loads back as is (JSON lines), and TSV with escapes loads too.
    let dump = ok(s, &["--json", "scan", "orders.0"]);
    let r = run_stdin(s, &["load", "copy.0", "-"], dump.as_bytes());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("loaded 3 entries"), "{}", r.stdout);
    assert_eq!(
        ok(s, &["scan", "copy.0", "-l"]),
        ok(s, &["scan", "orders.0", "-l"])
    );
    let r = run_stdin(s, &["load", "tsv.0", "-"], b"a\\tb\t1\nc\t\\x00\n");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(ok(s, &["scan", "tsv.0"]), "a\\tb\t1\nc\t\\x00\n");
    let r = run_stdin(s, &["load", "tsv.0", "-"], b"good\t1\nno tab here\n");
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains(":2: expected KEY<TAB>VALUE"),
        "{}",
        r.stderr
    );
}

#[test]
fn missing_store_partition_branch_and_bad_names() {
    let (_d, s) = store();
    let s = s.as_path();
    let r = fails(s, &["get", "orders.0", "k"], 3);
    assert!(
        r.stderr.contains("no store at") && r.stderr.contains("hint:"),
        "{}",
        r.stderr
    );
    assert!(!s.exists(), "a read must not create the store");
    ok(s, &["put", "orders.0", "k", "v"]);
    let r = fails(s, &["get", "orders.7", "k"], 3);
    assert!(
        r.stderr.contains("partition orders.7 does not exist"),
        "{}",
        r.stderr
    );
    assert!(
        !s.join("orders.7").exists(),
        "a read must not create the partition"
    );
    let r = fails(s, &["get", "orders.0@nope", "k"], 3);
    assert!(
        r.stderr.contains("branch `nope` does not exist") && r.stderr.contains("branch create"),
        "{}",
        r.stderr
    );
    let r = fails(s, &["put", "orders.0@a__b", "k", "v"], 2);
    assert!(r.stderr.contains("invalid branch"), "{}", r.stderr);
    fails(s, &["put", "orders", "k", "v"], 2);
    fails(s, &["branch", "create", "Main", "orders.0"], 2);
    fails(s, &["frobnicate"], 2);
    let r = fails(s, &["--json", "get", "orders.0", "missing"], 3);
    assert_eq!(json(&r.stderr)["error"]["kind"], "NotFound");
}

#[test]
fn conflicting_branch_names_are_refused() {
    let (_d, s) = store();
    let s = s.as_path();
    ok(s, &["put", "t.0", "k", "v"]);
    ok(s, &["branch", "create", "feat", "t.0"]);
    // Same branch named twice: fine.
    assert_eq!(ok(s, &["get", "t.0@feat", "k", "--branch", "feat"]), "v\n");
    assert_eq!(ok(s, &["get", "t.0", "k", "-b", "feat"]), "v\n");
    for args in [
        vec!["get", "t.0@feat", "k", "--branch", "main"],
        vec!["put", "t.0@main", "k", "x", "-b", "feat"],
        vec!["branch", "create", "x", "t.0@feat", "--from", "main"],
        vec!["branch", "delete", "feat", "t.0@main"],
    ] {
        let r = fails(s, &args, 2);
        assert!(
            r.stderr.contains("conflicting branch names"),
            "{args:?}: {}",
            r.stderr
        );
    }
    // Nothing was written by the refused put.
    assert_eq!(ok(s, &["get", "t.0", "k"]), "v\n");
}

#[test]
fn branches_create_list_info_tree_archive_delete() {
    let (_d, s) = store();
    let s = s.as_path();
    ok(s, &["put", "orders.0", "a", "1"]);
    ok(s, &["put", "orders.1", "a", "1"]);
    assert!(
        ok(
            s,
            &["branch", "create", "feat", "orders.0", "--from", "main"]
        )
        .contains("created orders.0@feat")
    );
    ok(s, &["put", "orders.0@feat", "b", "2"]);
    ok(s, &["branch", "create", "sub", "orders.0@feat"]);
    ok(
        s,
        &["branch", "create", "wide", "--all-partitions", "orders"],
    );
    fails(s, &["branch", "create", "feat", "orders.0"], 4);

    let list = ok(s, &["branch", "list", "orders.0"]);
    for b in ["main", "feat", "sub", "wide"] {
        assert!(list.contains(b), "{list}");
    }
    let all = json(&ok(s, &["--json", "branch", "list", "orders"]));
    assert_eq!(all["branches"].as_array().unwrap().len(), 6);

    let info = ok(s, &["branch", "info", "orders.0@sub"]);
    assert!(info.contains("parent     feat (term 0)"), "{info}");
    let info = json(&ok(
        s,
        &["--json", "branch", "info", "orders.0", "-b", "feat"],
    ));
    assert_eq!(info["parent"], "main");
    assert_eq!(info["term"], 0);

    let archive = ok(s, &["archive", "create", "orders.0@feat"]);
    assert!(archive.starts_with("manifest_feat_0_"), "{archive}");
    let listed = json(&ok(s, &["--json", "archive", "list", "orders.0@feat"]));
    assert_eq!(listed["archives"][0]["name"], archive.trim());

    let tree = ok(s, &["branch", "tree", "orders.0"]);
    let lines: Vec<&str> = tree.lines().collect();
    assert_eq!(lines[0], "orders.0");
    assert!(lines[1].starts_with("● main"), "{tree}");
    let feat = lines.iter().position(|l| l.contains("● feat")).unwrap();
    let sub = lines.iter().position(|l| l.contains("● sub")).unwrap();
    assert!(lines[feat].contains("⑂ main@v"), "{tree}");
    assert!(lines[sub].contains("⑂ feat@v") && sub > feat, "{tree}");
    assert!(
        lines[sub].starts_with("│ ") || lines[sub].starts_with("  "),
        "{tree}"
    );
    assert!(tree.contains("◇ archive manifest_feat_0_"), "{tree}");
    let t = json(&ok(s, &["--json", "branch", "tree", "orders.0"]));
    let main = &t["roots"][0];
    assert_eq!(main["branch"], "main");
    let feat = main["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["branch"] == "feat")
        .unwrap();
    assert_eq!(feat["children"][0]["branch"], "sub");

    ok(s, &["put", "orders.0@feat", "b", "3"]);
    ok(
        s,
        &[
            "archive",
            "restore",
            "orders.0@feat",
            archive.trim(),
            "--backup",
            "feat-before",
        ],
    );
    assert_eq!(ok(s, &["get", "orders.0@feat", "b"]), "2\n");
    assert_eq!(ok(s, &["get", "orders.0@feat-before", "b"]), "3\n");

    ok(s, &["branch", "delete", "sub", "orders.0"]);
    ok(
        s,
        &["branch", "delete", "wide", "--all-partitions", "orders"],
    );
    fails(s, &["branch", "delete", "sub", "orders.0"], 3);
    fails(s, &["branch", "delete", "main", "orders.0"], 2);
    let list = ok(s, &["branch", "list"]);
    assert!(!list.contains("sub") && !list.contains("wide"), "{list}");
}

#[test]
fn diff_merge_reset_and_gc() {
    let (_d, s) = store();
    let s = s.as_path();
    ok(s, &["put", "t.0", "a", "1"]);
    ok(s, &["put", "t.0", "b", "1"]);
    ok(s, &["branch", "create", "f", "t.0"]);
    ok(s, &["put", "t.0@f", "a", "2"]);
    ok(s, &["put", "t.0@f", "c", "new"]);
    ok(s, &["del", "t.0@f", "b"]);
    assert_eq!(
        ok(s, &["diff", "main", "f", "t.0"]),
        "~ a\t1 -> 2\n- b\t1\n+ c\tnew\n"
    );
    assert_eq!(
        ok(s, &["diff", "main", "f", "t.0", "--stat"]),
        "t.0: main..f: 1 added, 1 removed, 1 changed\n"
    );
    let d: Vec<Value> = ok(s, &["--json", "diff", "main", "f", "t.0"])
        .lines()
        .map(json)
        .collect();
    assert_eq!(d[0]["change"], "changed");
    assert_eq!(d[0]["new"], "2");
    fails(s, &["diff", "main", "f", "t.0@f"], 2);

    // A dry run changes nothing; main did not change, so the merge is a fast-forward.
    let dry = json(&ok(
        s,
        &["--json", "merge", "f", "main", "t.0", "--dry-run"],
    ));
    assert_eq!(
        (dry["fast_forward"].as_bool(), dry["committed"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(ok(s, &["get", "t.0", "a"]), "1\n");

    // Both sides change `a`: conflict, exit 7, nothing changed; then settled by a policy.
    ok(s, &["put", "t.0", "a", "main-side"]);
    let r = fails(s, &["merge", "f", "main", "t.0"], 7);
    assert!(
        r.stdout.contains("1 conflict") && r.stderr.contains("--policy"),
        "{}{}",
        r.stdout,
        r.stderr
    );
    assert_eq!(ok(s, &["get", "t.0", "a"]), "main-side\n");
    let m = json(&ok(
        s,
        &["--json", "merge", "f", "main", "t.0", "--policy", "theirs"],
    ));
    assert_eq!(m["committed"], true);
    assert_eq!(ok(s, &["scan", "t.0"]), "a\t2\nc\tnew\n");
    assert_eq!(ok(s, &["diff", "main", "f", "t.0"]), "");

    // Reset and re-home.
    ok(s, &["put", "t.0@f", "z", "1"]);
    ok(s, &["reset", "t.0@f", "--to", "main"]);
    assert_eq!(ok(s, &["scan", "t.0@f"]), ok(s, &["scan", "t.0"]));
    assert!(ok(s, &["rehome", "t.0@f"]).contains("re-homed t.0@f"));

    // GC after deleting the branch: a report of deleted and kept files, each kept file
    // with its reason.
    ok(s, &["branch", "delete", "f", "t.0"]);
    let dry = ok(s, &["gc", "--dry-run"]);
    assert!(dry.starts_with("t.0: would delete "), "{dry}");
    let before: Vec<String> = std::fs::read_dir(s.join("t.0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let g = json(&ok(s, &["--json", "gc", "t.0"]));
    let p = &g["partitions"][0];
    assert!(
        p["deleted"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["bytes"].as_u64().is_some())
    );
    for k in p["kept"].as_array().unwrap() {
        assert_eq!(k["reason"], "referenced", "{k}");
        assert!(
            k["by"].as_str().unwrap().starts_with("manifest_main_"),
            "{k}"
        );
    }
    let after: Vec<String> = std::fs::read_dir(s.join("t.0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    for d in p["deleted"].as_array().unwrap() {
        let f = d["file"].as_str().unwrap();
        assert!(
            before.iter().any(|b| b == f) && !after.iter().any(|a| a == f),
            "{f}"
        );
    }
    assert_eq!(ok(s, &["scan", "t.0"]), "a\t2\nc\tnew\n");
    let again = ok(s, &["gc"]);
    assert!(again.starts_with("t.0: deleted 0 files"), "{again}");
    assert!(again.contains("  kept"), "{again}");
    assert_eq!(
        json(&ok(s, &["--json", "ls"]))["partitions"][0]["branches"],
        serde_json::json!(["main"])
    );
}

#[test]
fn export_import_round_trip_and_cut_short_stream() {
    let (d, a) = store();
    let b = d.path().join("other");
    let (a, b) = (a.as_path(), b.as_path());
    let big = "x".repeat(20_000); // overflow pages
    ok(a, &["put", "t.3", "plain", "v"]);
    ok(a, &["put", "t.3", "big", &big, "--ts", "7"]);
    ok(
        a,
        &[
            "put",
            "t.3",
            "expiring",
            "e",
            "--expire-at",
            "4102444800000",
        ],
    );
    ok(a, &["put", "--hex", "t.3", "00ff00", "ff"]);
    ok(a, &["branch", "create", "f", "t.3"]);
    ok(a, &["put", "t.3@f", "only-f", "1"]);

    let file = d.path().join("f.bexp");
    let f = file.to_str().unwrap();
    assert!(ok(a, &["export", "t.3@f", "-o", f]).contains("exported 5 entries"));
    fails(a, &["export", "t.3@f", "-o", f], 4);
    let r = run(b, &["import", "t.3", f]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        ok(b, &["scan", "t.3", "-l", "--hex"]),
        ok(a, &["scan", "t.3@f", "-l", "--hex"])
    );
    assert_eq!(ok(b, &["get", "t.3", "big"]), format!("{big}\n"));

    // Export again from the copy: the entry records are the same bytes.
    let again = d.path().join("again.bexp");
    ok(b, &["export", "t.3", "-o", again.to_str().unwrap()]);
    let (x, y) = (
        std::fs::read(&file).unwrap(),
        std::fs::read(&again).unwrap(),
    );
    // Header: 32 fixed bytes, partition and branch (u8 length + bytes), checksum; the
    // trailer is the last 25 bytes. Everything between is the entry records.
    let entries = |v: &[u8]| {
        let p = v[32] as usize;
        let b = v[33 + p] as usize;
        v[34 + p + b + 8..v.len() - 25].to_vec()
    };
    assert_eq!(entries(&x), entries(&y));
    assert_eq!(x[x.len() - 24..x.len() - 16], y[y.len() - 24..y.len() - 16]);

    // Through a pipe, into a branch of a third partition.
    let out = run(a, &["export", "t.3"]);
    assert_eq!(out.code, 0);
    let r = run_stdin(b, &["--json", "import", "u.0", "-"], &out.raw);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(json(&r.stdout)["entries"], 4);

    // A cut-short or damaged stream changes nothing.
    let before = ok(b, &["scan", "t.3"]);
    let r = run_stdin(b, &["import", "t.3", "-"], &x[..x.len() / 2]);
    assert_eq!(r.code, 5, "{}", r.stderr);
    assert!(r.stderr.contains("cut short"), "{}", r.stderr);
    let mut flipped = x.clone();
    let n = flipped.len();
    flipped[n - 40] ^= 1;
    assert_eq!(run_stdin(b, &["import", "t.3", "-"], &flipped).code, 5);
    assert_eq!(ok(b, &["scan", "t.3"]), before);
    assert_eq!(
        ok(b, &["branch", "list", "t.3", "--json"])
            .matches("\"branch\"")
            .count(),
        1
    );
}

#[test]
fn verify_and_inspect_find_a_flipped_byte() {
    let (_d, s) = store();
    let s = s.as_path();
    ok(s, &["put", "t.0", "k", "v"]);
    ok(s, &["put", "t.0", "big", &"y".repeat(10_000)]);
    ok(s, &["branch", "create", "f", "t.0"]);
    ok(s, &["archive", "create", "t.0@f"]);
    let v = ok(s, &["verify"]);
    assert!(v.contains("verified 1 partition: clean"), "{v}");
    let j = json(&ok(s, &["--json", "verify", "t.0"]));
    assert_eq!(j["clean"], true);
    assert!(j["partitions"][0]["keys"].as_u64().unwrap() >= 4);

    // inspect manifest on the real manifest: every record decoded, checksums ok.
    let m = ok(s, &["inspect", "manifest", "t.0/manifest_main_0"]);
    assert!(
        m.contains("snapshot") && m.contains("state after replay") && m.contains("ranges"),
        "{m}"
    );
    let path = s.join("t.0").join("manifest_f_0");
    let j = json(&ok(
        s,
        &["--json", "inspect", "manifest", path.to_str().unwrap()],
    ));
    assert!(
        j["records"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["checksum_ok"] == true)
    );
    assert_eq!(j["replay"]["state"]["branch"], "f");
    assert!(
        j["replay"]["state"]["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "ORIGIN")
    );
    assert!(ok(s, &["inspect", "manifest", "CURRENT_TERM.f"]).contains("term 0"));

    // inspect file: a data file's header and who references it.
    let data: Vec<String> = std::fs::read_dir(s.join("t.0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("data_"))
        .collect();
    let newest = data
        .iter()
        .max_by_key(|n| n.split('_').nth(1).unwrap().parse::<u64>().unwrap())
        .unwrap();
    let i = ok(s, &["inspect", "file", newest]);
    assert!(
        i.contains("header     version 2") && i.contains("manifest_main_0"),
        "{i}"
    );
    let i = json(&ok(s, &["--json", "inspect", "file", newest]));
    assert_eq!(i["kind"], "data");
    assert!(!i["referenced_by"].as_array().unwrap().is_empty());
    assert!(ok(s, &["inspect", "file", "t.0"]).contains("partition directory"));
    fails(s, &["inspect", "file", "no_such_file"], 3);

    // Flip one byte inside a referenced page: verify and inspect exit 5. The file's last
    // page is referenced: every process continued this file, and the last one (`branch
    // create`) checkpointed the mapping table into it.
    let target = s.join("t.0").join(newest);
    let mut bytes = std::fs::read(&target).unwrap();
    let last = bytes.len() - 4096;
    bytes[last + 100] ^= 0x01;
    std::fs::write(&target, &bytes).unwrap();
    let r = fails(s, &["verify"], 5);
    assert!(
        r.stdout.contains("checksum mismatch") && r.stdout.contains(newest.as_str()),
        "{}",
        r.stdout
    );
    let j = json(&fails(s, &["--json", "verify"], 5).stdout);
    assert_eq!(j["clean"], false);
    fails(s, &["inspect", "file", newest], 5);

    // A damaged manifest record: inspect shows where replay stops.
    let m = s.join("t.0").join("manifest_f_0");
    let mut mb = std::fs::read(&m).unwrap();
    mb[40] ^= 0xff;
    std::fs::write(&m, &mb).unwrap();
    let r = fails(s, &["inspect", "manifest", m.to_str().unwrap()], 5);
    assert!(
        r.stdout.contains("BAD") || r.stdout.contains("replay fails"),
        "{}",
        r.stdout
    );
}

/// Issue 14 §3: a manifest tail replay drops (a torn write or damage: ambiguous) is a
/// finding — `verify` reports it, `--strict` fails, `inspect manifest` does not call it fine
/// — and none of them changes a byte. Before the fix all three said clean and exited 0.
#[test]
fn verify_strict_fails_on_an_ambiguous_manifest_tail() {
    let (_d, s) = store();
    let s = s.as_path();
    ok(s, &["put", "t.0", "k", "v"]);
    let m = s.join("t.0").join("manifest_main_0");
    let mut bytes = std::fs::read(&m).unwrap();
    assert_eq!(bytes.len() % 4096, 0);
    let tail = bytes.len();
    // A torn append: one block of non-zero bytes that is no intact record.
    bytes.extend((0..4096).map(|i| (i % 251 + 1) as u8));
    std::fs::write(&m, &bytes).unwrap();
    let finding = format!(
        "tail record at offset {tail} fails its checksum: a torn write or damage; the commit it held, if any, was discarded"
    );

    let r = run(s, &["verify"]);
    assert_eq!(r.code, 0, "a warning, not an error:\n{}", r.stdout);
    assert!(r.stdout.contains(&finding), "{}", r.stdout);
    assert!(
        !r.stdout.contains("verified 1 partition: clean\n"),
        "{}",
        r.stdout
    );
    let r = fails(s, &["verify", "--strict"], 5);
    assert!(r.stdout.contains(&finding), "{}", r.stdout);
    let j = json(&fails(s, &["--json", "verify", "--strict"], 5).stdout);
    assert_eq!(j["clean"], false);
    assert_eq!(j["warnings"], 1);
    let r = fails(s, &["inspect", "manifest", "t.0/manifest_main_0"], 5);
    assert!(r.stderr.contains(&finding), "{}", r.stderr);
    assert_eq!(
        std::fs::read(&m).unwrap(),
        bytes,
        "read-only commands wrote"
    );
}

#[test]
fn help_completions_and_demo() {
    let (d, s) = store();
    let help = ok(&s, &["--help"]);
    assert!(
        help.contains("Exit codes") && help.contains("Examples"),
        "{help}"
    );
    for sub in ["put", "scan", "branch", "merge", "verify", "export"] {
        let h = ok(&s, &[sub, "--help"]);
        assert!(h.contains("Usage"), "{sub}: {h}");
    }
    assert!(ok(&s, &["completions", "bash"]).contains("bough"));
    let dir = d.path().join("demo");
    let out = ok(&s, &["demo", dir.to_str().unwrap()]);
    for step in ["load", "branch", "diff", "merge", "gc", "done"] {
        assert!(out.lines().any(|l| l.starts_with(step)), "{step}: {out}");
    }
    // The demo store is a normal store afterwards, and clean.
    assert!(ok(&dir, &["verify"]).contains("clean"));
    fails(&s, &["demo", dir.to_str().unwrap()], 2);
}
