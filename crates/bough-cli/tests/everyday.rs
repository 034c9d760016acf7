//! The rough edges a first-time user hit (issue 19, "Everyday use"), each as a process-level
//! test of the `bough` binary: messages that misled, inconsistencies between commands,
//! timestamps beyond the clock, and the demo's hints.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use predicates::str::contains;

fn bough(store: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_bough"));
    c.arg("--store").arg(store);
    for v in ["BOUGH_STORE", "BOUGH_CONFIG", "BOUGH_LOG"] {
        c.env_remove(v);
    }
    c
}

fn store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    (dir, store)
}

fn stdout(c: &mut Command) -> String {
    let out = c.assert().success().get_output().stdout.clone();
    String::from_utf8(out).unwrap()
}

/// A TSV file given to `import` was "corruption" (exit 5) with the hint to export again: it
/// is the wrong format (exit 2), and the hint names `load`. Nothing is created.
#[test]
fn regression_import_of_a_non_export_file_is_a_wrong_format() {
    let (d, s) = store();
    for (name, bytes) in [
        ("orders.tsv", &b"order-1\tpending\norder-2\tshipped\n"[..]),
        ("short.tsv", &b"a\tb\n"[..]),
        ("empty", &b""[..]),
    ] {
        let f = d.path().join(name);
        std::fs::write(&f, bytes).unwrap();
        bough(&s)
            .args(["import", "t.0"])
            .arg(&f)
            .assert()
            .code(2)
            .stderr(contains("not a Bough export stream"))
            .stderr(contains("wrong input format"))
            .stderr(contains("bough load"))
            .stderr(contains("export the branch again").not());
    }
    assert!(!s.exists(), "a refused import creates no store");
}

/// A cut-short export imported into a new partition left that partition behind, empty.
#[test]
fn regression_a_truncated_import_leaves_no_partition_behind() {
    let (d, a) = store();
    let b = d.path().join("b");
    for i in 0..50 {
        bough(&a)
            .args(["put", "t.0", &format!("k{i}"), "v"])
            .assert()
            .success();
    }
    let f = d.path().join("t.bexp");
    bough(&a)
        .args(["export", "t.0", "-o"])
        .arg(&f)
        .assert()
        .success();
    bough(&b)
        .args(["put", "other.0", "k", "v"])
        .assert()
        .success();
    let bytes = std::fs::read(&f).unwrap();
    let cut = d.path().join("cut.bexp");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    bough(&b)
        .args(["import", "u.0"])
        .arg(&cut)
        .assert()
        .code(5)
        .stderr(contains("cut short"));
    assert!(
        !b.join("u.0").exists(),
        "the partition the import created is gone"
    );
    let ls = stdout(bough(&b).args(["--json", "ls"]));
    assert!(!ls.contains("u.0"), "{ls}");
    // An existing partition is kept, unchanged.
    bough(&b)
        .args(["import", "other.0"])
        .arg(&cut)
        .assert()
        .code(5);
    assert_eq!(stdout(bough(&b).args(["scan", "other.0"])), "k\tv\n");
}

/// "imported 2 entries" when last-writer-wins kept the newer stored ones: the counts say
/// what applied and what was superseded, for import, load and put.
#[test]
fn regression_older_entries_are_counted_as_superseded() {
    let (d, a) = store();
    let b = d.path().join("b");
    for k in ["x", "y"] {
        bough(&a)
            .args(["put", "t.0", k, "old", "--ts", "10"])
            .assert()
            .success();
        bough(&b)
            .args(["put", "t.0", k, "new", "--ts", "20"])
            .assert()
            .success();
    }
    bough(&a)
        .args(["put", "t.0", "z", "fresh", "--ts", "10"])
        .assert()
        .success();
    let f = d.path().join("t.bexp");
    bough(&a)
        .args(["export", "t.0", "-o"])
        .arg(&f)
        .assert()
        .success();
    let out = stdout(bough(&b).args(["import", "t.0"]).arg(&f));
    assert!(
        out.contains("imported 3 entries") && out.contains("1 applied, 2 superseded"),
        "{out}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&stdout(bough(&b).args(["--json", "import", "t.0"]).arg(&f))).unwrap();
    // z is there now with the same timestamp: a tie goes to the later write (applied).
    assert_eq!(
        (j["applied"].as_u64(), j["superseded"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(
        stdout(bough(&b).args(["scan", "t.0"])),
        "x\tnew\ny\tnew\nz\tfresh\n"
    );

    let lines = d.path().join("old.jsonl");
    std::fs::write(
        &lines,
        "{\"key\":\"x\",\"value\":\"older\",\"timestamp\":5}\n{\"key\":\"w\",\"value\":\"1\"}\n",
    )
    .unwrap();
    bough(&b)
        .args(["load", "t.0"])
        .arg(&lines)
        .assert()
        .success()
        .stdout(contains("loaded 2 entries").and(contains("1 applied, 1 superseded")));

    bough(&b)
        .args(["put", "t.0", "x", "older", "--ts", "3"])
        .assert()
        .success()
        .stderr(contains("was not changed").and(contains("newer timestamp")));
    bough(&b)
        .args(["put", "t.0", "x", "newest", "--ts", "30"])
        .assert()
        .success()
        .stderr(contains("was not changed").not());
    assert_eq!(stdout(bough(&b).args(["get", "t.0", "x"])), "newest\n");
}

/// `inspect manifest <data file>` said "damaged at offset 0: checksum mismatch";
/// `inspect file /abs/path` dropped the leading `/`.
#[test]
fn regression_inspect_recognises_the_file_kind_and_keeps_the_path() {
    let (d, s) = store();
    bough(&s).args(["put", "t.0", "k", "v"]).assert().success();
    let data = std::fs::read_dir(s.join("t.0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.starts_with("data_"))
        .unwrap();
    bough(&s)
        .args(["inspect", "manifest", &format!("t.0/{data}")])
        .assert()
        .code(2)
        .stderr(contains("is not a manifest: data file"))
        .stderr(contains("bough inspect file"))
        .stderr(contains("checksum").not());
    // A renamed data file is known by its header.
    let copy = d.path().join("renamed");
    std::fs::copy(s.join("t.0").join(&data), &copy).unwrap();
    bough(&s)
        .args(["inspect", "manifest"])
        .arg(&copy)
        .assert()
        .code(2)
        .stderr(contains("a data file (by its header)"));

    let other = d.path().join("passwd");
    std::fs::write(&other, "root:x:0:0:root:/root:/bin/sh\n").unwrap();
    let abs = other.canonicalize().unwrap();
    let out = stdout(bough(&s).args(["inspect", "file"]).arg(&abs));
    assert!(
        out.starts_with(&format!("{} (", abs.display())),
        "the whole path, leading `/` included: {out}"
    );
    bough(&s)
        .args(["inspect", "manifest"])
        .arg(&abs)
        .assert()
        .code(2)
        .stderr(contains("is not a manifest"));
}

/// `--store afile` said "cannot create afile: File exists"; a directory of unrelated files
/// became a store without a word; a new store was created silently.
#[test]
fn regression_store_paths_that_are_not_stores() {
    let (d, _) = store();
    let file = d.path().join("afile");
    std::fs::write(&file, "x").unwrap();
    for args in [
        vec!["put", "t.0", "k", "v"],
        vec!["get", "t.0", "k"],
        vec!["ls"],
    ] {
        bough(&file)
            .args(&args)
            .assert()
            .code(2)
            .stderr(contains("is not a directory"));
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"x");

    let docs = d.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    std::fs::write(docs.join("notes.txt"), "mine").unwrap();
    bough(&docs)
        .args(["put", "t.0", "k", "v"])
        .assert()
        .success()
        .stderr(contains("warning:").and(contains("1 entry not part of a Bough store")))
        .stderr(contains("created a new store in"));
    // Once it is a store, no more notices.
    bough(&docs)
        .args(["put", "t.0", "k2", "v"])
        .assert()
        .success()
        .stderr(contains("created").not().and(contains("warning").not()));

    let fresh = d.path().join("fresh");
    bough(&fresh)
        .args(["put", "t.0", "k", "v"])
        .assert()
        .success()
        .stderr(contains(format!(
            "created a new store in {}",
            fresh.display()
        )))
        .stderr(contains("warning").not());
}

/// Without `--store` a write created `./bough-data` silently and `--help` did not say so.
#[test]
fn regression_the_default_store_is_documented_and_announced() {
    let cwd = tempfile::tempdir().unwrap();
    let mut help = Command::new(env!("CARGO_BIN_EXE_bough"));
    help.env_remove("BOUGH_STORE").arg("--help");
    assert!(stdout(&mut help).contains("./bough-data"));
    let mut put = Command::new(env!("CARGO_BIN_EXE_bough"));
    put.env_remove("BOUGH_STORE")
        .env_remove("BOUGH_CONFIG")
        .current_dir(cwd.path())
        .args(["put", "t.0", "k", "v"]);
    let at = cwd.path().canonicalize().unwrap().join("bough-data");
    put.assert()
        .success()
        .stderr(contains(format!("created a new store in {}", at.display())));
    assert!(at.is_dir());
}

/// `branch create feature` twice said "orders.0@feature: orders.0@feature: already exists".
#[test]
fn regression_an_existing_branch_is_named_once() {
    let (_d, s) = store();
    bough(&s)
        .args(["put", "orders.0", "k", "v"])
        .assert()
        .success();
    bough(&s)
        .args(["branch", "create", "feature", "orders.0"])
        .assert()
        .success();
    let out = bough(&s)
        .args(["branch", "create", "feature", "orders.0"])
        .assert()
        .code(4)
        .get_output()
        .stderr
        .clone();
    let err = String::from_utf8(out).unwrap();
    assert!(
        err.contains("error: orders.0@feature: already exists\n"),
        "{err}"
    );
    assert_eq!(err.matches("orders.0@feature:").count(), 1, "{err}");
    assert!(err.contains("hint: choose another name"), "{err}");
}

/// Hostile names (control characters, 300 bytes) were echoed raw before the escaped form;
/// a leading `-` was accepted, and such a branch could not be deleted without `--`.
#[test]
fn regression_hostile_and_dash_names_are_escaped_and_refused() {
    let (_d, s) = store();
    bough(&s).args(["put", "t.0", "k", "v"]).assert().success();
    let hostile = format!("\x1b[2J\r\nfake: ok{}", "x".repeat(300));
    let cases: [Vec<String>; 5] = [
        vec![
            "branch".into(),
            "create".into(),
            hostile.clone(),
            "t.0".into(),
        ],
        vec![
            "put".into(),
            format!("t.0@{hostile}"),
            "k".into(),
            "v".into(),
        ],
        vec!["put".into(), format!("{hostile}.0"), "k".into(), "v".into()],
        vec![
            "get".into(),
            "t.0".into(),
            "k".into(),
            "-b".into(),
            hostile.clone(),
        ],
        vec![
            "archive".into(),
            "restore".into(),
            "t.0".into(),
            hostile.clone(),
        ],
    ];
    for args in cases {
        let out = bough(&s).args(&args).assert().code(2).get_output().clone();
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            !err.contains('\x1b') && !err.contains('\r'),
            "{args:?}: {err:?}"
        );
        assert!(
            err.contains("\\x1b") || err.contains("\\u{1b}"),
            "{args:?}: {err:?}"
        );
        assert!(
            !err.contains(&"x".repeat(200)),
            "{args:?}: too long: {err:?}"
        );
        // The only line breaks are the ones between `error:` and `hint:`.
        assert!(
            err.lines()
                .all(|l| l.starts_with("error: ") || l.starts_with("hint: ")),
            "{err:?}"
        );
    }

    for name in ["-x", "--force", "-"] {
        bough(&s)
            .args(["branch", "create", "--", name, "t.0"])
            .assert()
            .code(2)
            .stderr(contains("starts with '-'"));
        bough(&s)
            .args(["put", &format!("t.0@{name}"), "k", "v"])
            .assert()
            .code(2)
            .stderr(contains("starts with '-'"));
        bough(&s)
            .args(["put", "--", &format!("{name}.0"), "k", "v"])
            .assert()
            .code(2)
            .stderr(contains("starts with '-'"));
    }
    let list: serde_json::Value =
        serde_json::from_str(&stdout(bough(&s).args(["--json", "branch", "list", "t.0"]))).unwrap();
    assert_eq!(list["branches"].as_array().unwrap().len(), 1, "{list}");
}

/// Deleting a branch with children said nothing, and the tree then showed them as roots.
#[test]
fn regression_branch_delete_says_what_happens_to_children() {
    let (_d, s) = store();
    bough(&s).args(["put", "t.0", "k", "v"]).assert().success();
    bough(&s)
        .args(["branch", "create", "feat", "t.0"])
        .assert()
        .success();
    for child in ["sub-a", "sub-b"] {
        bough(&s)
            .args(["branch", "create", child, "t.0@feat"])
            .assert()
            .success();
    }
    bough(&s)
        .args(["branch", "delete", "feat", "t.0"])
        .assert()
        .success()
        .stdout(contains("deleted t.0@feat"))
        .stdout(contains(
            "sub-a, sub-b were forked from it and are unaffected",
        ))
        .stdout(contains("as roots"));
    let j: serde_json::Value = serde_json::from_str(&stdout(
        bough(&s).args(["--json", "branch", "delete", "sub-a", "t.0"]),
    ))
    .unwrap();
    assert_eq!(j["children"], serde_json::json!([]));
    assert_eq!(stdout(bough(&s).args(["get", "t.0@sub-b", "k"])), "v\n");
    bough(&s)
        .args(["branch", "delete", "sub-b", "t.0"])
        .assert()
        .success()
        .stdout(contains("forked from it").not());
}

/// `load TABLE.PART FILE` but `import FILE TABLE.PART`: one order for both (target first),
/// and the old order gets a hint.
#[test]
fn regression_load_and_import_take_the_target_first() {
    let (d, s) = store();
    bough(&s).args(["put", "t.0", "k", "v"]).assert().success();
    let f = d.path().join("t.bexp");
    bough(&s)
        .args(["export", "t.0", "-o"])
        .arg(&f)
        .assert()
        .success();
    bough(&s).args(["import", "u.0"]).arg(&f).assert().success();
    assert_eq!(stdout(bough(&s).args(["get", "u.0", "k"])), "v\n");
    bough(&s)
        .arg("import")
        .arg(&f)
        .arg("w.0")
        .assert()
        .code(2)
        .stderr(contains("the target comes first"));
    let tsv = d.path().join("x.tsv");
    std::fs::write(&tsv, "a\t1\n").unwrap();
    bough(&s).args(["load", "v.0"]).arg(&tsv).assert().success();
}

/// `diff` and `merge` refused `TABLE.PART@BRANCH`, which every other command takes;
/// `diff --exit-code` works as in git.
#[test]
fn regression_diff_and_merge_take_targets_and_diff_has_exit_code() {
    let (_d, s) = store();
    bough(&s).args(["put", "t.0", "a", "1"]).assert().success();
    bough(&s)
        .args(["branch", "create", "f", "t.0"])
        .assert()
        .success();
    bough(&s)
        .args(["put", "t.0@f", "a", "2"])
        .assert()
        .success();
    let plain = stdout(bough(&s).args(["diff", "main", "f", "t.0"]));
    assert_eq!(plain, "~ a\t1 -> 2\n");
    for args in [
        vec!["diff", "t.0@main", "t.0@f"],
        vec!["diff", "t.0@main", "f"],
        vec!["diff", "main", "t.0@f", "t.0"],
    ] {
        assert_eq!(stdout(bough(&s).args(&args)), plain, "{args:?}");
    }
    bough(&s)
        .args(["diff", "t.0@main", "u.0@f"])
        .assert()
        .code(2)
        .stderr(contains("names partition t.0 but B names u.0"));
    bough(&s)
        .args(["diff", "main", "f"])
        .assert()
        .code(2)
        .stderr(contains("which partition"));
    bough(&s)
        .args(["diff", "t.0", "t.0@f"])
        .assert()
        .code(2)
        .stderr(contains("names a partition but no branch"));

    bough(&s)
        .args(["diff", "t.0@main", "t.0@f", "--exit-code"])
        .assert()
        .code(1)
        .stdout(contains("~ a"));
    bough(&s)
        .args(["diff", "t.0@main", "t.0@main", "--exit-code"])
        .assert()
        .code(0);

    bough(&s)
        .args(["merge", "t.0@f", "t.0@main", "--dry-run"])
        .assert()
        .success()
        .stdout(contains("would merge t.0@f into main"));
    bough(&s)
        .args(["merge", "t.0@f", "main"])
        .assert()
        .success()
        .stdout(contains("merged t.0@f into main"));
    bough(&s)
        .args(["diff", "main", "f", "t.0", "--exit-code"])
        .assert()
        .code(0)
        .stdout("");
}

/// Every subcommand's `--help` repeated the 25-line block of global options.
#[test]
fn regression_subcommand_help_does_not_repeat_the_global_options() {
    let (_d, s) = store();
    let top = stdout(bough(&s).arg("--help"));
    assert!(
        top.contains("--no-progress") && top.contains("--config"),
        "{top}"
    );
    for sub in [
        vec!["put", "--help"],
        vec!["scan", "--help"],
        vec!["branch", "create", "--help"],
        vec!["diff", "--help"],
        vec!["import", "--help"],
    ] {
        let h = stdout(bough(&s).args(&sub));
        assert!(h.contains("Usage"), "{sub:?}: {h}");
        assert!(!h.contains("No progress line"), "{sub:?}: {h}");
        assert!(!h.contains("BOUGH_CONFIG"), "{sub:?}: {h}");
        assert!(h.contains("`bough --help` describes them"), "{sub:?}: {h}");
    }
    // The options still work after the subcommand.
    bough(&s).args(["put", "t.0", "k", "v"]).assert().success();
    Command::new(env!("CARGO_BIN_EXE_bough"))
        .env_remove("BOUGH_STORE")
        .args(["get", "t.0", "k", "--store"])
        .arg(&s)
        .assert()
        .success()
        .stdout("v\n");
}

/// `ls` printed every branch of a partition on one line.
#[test]
fn regression_ls_with_many_branches_stays_narrow() {
    let (_d, s) = store();
    bough(&s).args(["put", "t.0", "k", "v"]).assert().success();
    for i in 0..12 {
        bough(&s)
            .args(["branch", "create", &format!("feature-{i:02}"), "t.0"])
            .assert()
            .success();
    }
    let out = stdout(bough(&s).arg("ls"));
    assert!(out.lines().all(|l| l.chars().count() <= 100), "{out}");
    assert!(out.contains("… 8 more"), "{out}");
    assert!(out.contains("bough branch list"), "{out}");
    let j: serde_json::Value =
        serde_json::from_str(&stdout(bough(&s).args(["--json", "ls"]))).unwrap();
    assert_eq!(j["partitions"][0]["branches"].as_array().unwrap().len(), 13);
}

/// `put --ts 18446744073709551615` made a key that could never be overwritten. A user
/// timestamp beyond the store clock plus `max_timestamp_skew_ms` is refused on every
/// surface: put, del, load and import.
#[test]
fn regression_timestamps_beyond_the_clock_are_refused_everywhere() {
    let (d, s) = store();
    bough(&s).args(["put", "t.0", "k", "v"]).assert().success();
    let far = u64::MAX.to_string();
    bough(&s)
        .args(["put", "t.0", "k", "forever", "--ts", &far])
        .assert()
        .code(2)
        .stderr(contains("ahead of the store clock").and(contains("max_timestamp_skew_ms")));
    bough(&s)
        .args(["del", "t.0", "k", "--ts", &far])
        .assert()
        .code(2)
        .stderr(contains("max_timestamp_skew_ms"));
    let lines = d.path().join("future.jsonl");
    std::fs::write(
        &lines,
        format!("{{\"key\":\"k\",\"value\":\"forever\",\"timestamp\":{far}}}\n"),
    )
    .unwrap();
    bough(&s)
        .args(["load", "t.0"])
        .arg(&lines)
        .assert()
        .code(2)
        .stderr(contains("max_timestamp_skew_ms"));
    assert_eq!(stdout(bough(&s).args(["get", "t.0", "k"])), "v\n");
    // An ordinary overwrite still works: nothing was frozen.
    bough(&s).args(["put", "t.0", "k", "v2"]).assert().success();

    // A store configured to allow any skew writes such an entry; importing its export into a
    // store with the default is refused, and changes nothing.
    let lax = d.path().join("lax");
    let config = d.path().join("lax.toml");
    std::fs::write(&config, format!("max_timestamp_skew_ms = {}\n", i64::MAX)).unwrap();
    bough(&lax)
        .arg("--config")
        .arg(&config)
        .args(["put", "t.0", "k", "forever", "--ts", "9000000000000000000"])
        .assert()
        .success();
    let f = d.path().join("lax.bexp");
    bough(&lax)
        .arg("--config")
        .arg(&config)
        .args(["export", "t.0", "-o"])
        .arg(&f)
        .assert()
        .success();
    bough(&s)
        .args(["import", "t.0"])
        .arg(&f)
        .assert()
        .code(2)
        .stderr(contains("max_timestamp_skew_ms"));
    assert_eq!(stdout(bough(&s).args(["get", "t.0", "k"])), "v2\n");
}

/// The demo's last hint named `bough`, which is not on PATH after `cargo run`; its diff
/// showed 3 of 102 changes without saying so; "borrowed pages" went unexplained.
#[test]
fn regression_demo_hints_are_runnable_and_complete() {
    let (d, s) = store();
    let dir = d.path().join("demo");
    let out = stdout(bough(&s).env("PATH", "/nonexistent").arg("demo").arg(&dir));
    let me = Path::new(env!("CARGO_BIN_EXE_bough"))
        .canonicalize()
        .unwrap();
    let done = out.lines().find(|l| l.starts_with("done")).unwrap();
    assert!(
        done.contains(&format!("try: {} --store", me.display())),
        "{done}"
    );
    assert!(out.contains("… and 99 more"), "{out}");
    assert!(out.contains("borrowed pages:"), "{out}");
}
