//! The `bough` binary beside other `bough` processes and after interrupted or damaging
//! events: read commands beside a writer, writers waiting for the lock, a killed import's
//! staging branch, `load --atomic`, a damaged `main` brought back from its archive, and
//! `verify` naming every referent of a bad page once.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
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
    }
}

fn run(store: &Path, args: &[&str]) -> Run {
    finish(cmd(store).args(args).output().expect("runs"))
}

fn ok(store: &Path, args: &[&str]) -> String {
    let r = run(store, args);
    assert_eq!(
        r.code, 0,
        "bough {args:?} failed:\n{}\n{}",
        r.stdout, r.stderr
    );
    r.stdout
}

/// A `bough` process reading its stdin from a pipe the test writes (and keeps open).
fn spawn_piped(store: &Path, args: &[&str]) -> Child {
    cmd(store)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawns")
}

/// Polls until `f` holds, for at most 20 s.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn read_commands_run_beside_a_writing_process_and_writers_wait_for_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = dir.path().join("s");
    ok(&s, &["put", "t.0", "a", "1"]);
    ok(
        &s,
        &["branch", "create", "feature", "t.0", "--from", "main"],
    );
    ok(&s, &["archive", "create", "t.0"]);
    // A long-lived writer: a load from a pipe that stays open, one entry per batch.
    let mut loader = spawn_piped(&s, &["load", "t.0", "-", "--batch", "1"]);
    let mut stdin = loader.stdin.take().expect("stdin");
    stdin.write_all(b"k1\tv1\nk2\tv2\n").expect("write");
    stdin.flush().expect("flush");
    // k1's batch commits once k2 arrives; a reader sees it while the writer holds the store.
    eventually("k1 to be readable beside the loader", || {
        let r = run(&s, &["get", "t.0", "k1"]);
        r.code == 0 && r.stdout.contains("v1")
    });
    for args in [
        &["ls"][..],
        &["scan", "t.0"],
        &["branch", "list"],
        &["branch", "info", "t.0"],
        &["branch", "tree", "t.0"],
        &["archive", "list", "t.0"],
        &["diff", "main", "feature", "t.0"],
        &["verify"],
        &["export", "t.0@feature"],
    ] {
        ok(&s, args);
    }
    let busy = run(&s, &["--wait", "0.3", "put", "t.0", "x", "y"]);
    assert_eq!(busy.code, 6, "{}", busy.stderr);
    assert!(
        busy.stderr.contains("still locked after waiting") && busy.stderr.contains("--wait"),
        "{}",
        busy.stderr
    );
    // A writer that may wait gets the store once the loader is done.
    let waiting = cmd(&s)
        .args(["--wait", "60", "put", "t.0", "x", "y"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawns");
    std::thread::sleep(Duration::from_millis(300));
    drop(stdin);
    let loaded = finish(loader.wait_with_output().expect("loader"));
    assert_eq!(loaded.code, 0, "{}", loaded.stderr);
    let put = finish(waiting.wait_with_output().expect("put"));
    assert_eq!(put.code, 0, "{}", put.stderr);
    assert!(ok(&s, &["get", "t.0", "x"]).contains('y'));
    assert!(ok(&s, &["get", "t.0", "k2"]).contains("v2"));
}

/// The staging branch names `branch list --json` reports for `t.0`.
fn staging_branches(s: &Path) -> Vec<String> {
    let out = ok(s, &["branch", "list", "t.0", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("json");
    v["branches"]
        .as_array()
        .expect("branches")
        .iter()
        .filter(|b| b["staging"].is_string())
        .map(|b| b["branch"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_killed_import_leaves_a_staging_branch_that_is_reported_then_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = dir.path().join("s");
    let input: String = (0..2000)
        .map(|i| format!("key{i:05}\tvalue{i}\n"))
        .collect();
    let tsv = dir.path().join("in.tsv");
    std::fs::write(&tsv, input).expect("write");
    ok(&s, &["load", "t.1", tsv.to_str().expect("utf-8")]);
    let stream = dir.path().join("t1.bough");
    ok(
        &s,
        &["export", "t.1", "-o", stream.to_str().expect("utf-8")],
    );
    ok(&s, &["put", "t.0", "a", "1"]);
    let bytes = std::fs::read(&stream).expect("read");
    // Half the stream, and the pipe left open: the import waits for the rest.
    let mut import = spawn_piped(&s, &["import", "t.0", "-", "--batch", "100"]);
    let mut stdin = import.stdin.take().expect("stdin");
    stdin.write_all(&bytes[..bytes.len() / 2]).expect("write");
    stdin.flush().expect("flush");
    eventually("the import's staging branch", || {
        !staging_branches(&s).is_empty()
    });
    import.kill().expect("kill");
    let _ = import.wait();
    drop(stdin);
    let staged = staging_branches(&s);
    assert_eq!(staged.len(), 1, "{staged:?}");
    assert!(staged[0].starts_with("import-"), "{staged:?}");
    let list = ok(&s, &["branch", "list", "t.0"]);
    assert!(
        list.contains("staging branch of an interrupted `import into t.0@main`"),
        "{list}"
    );
    let verify = run(&s, &["verify", "--strict"]);
    assert_ne!(verify.code, 0, "a staging branch is a warning");
    assert!(
        verify.stdout.contains("staging branch"),
        "{}",
        verify.stdout
    );
    let gc = ok(&s, &["gc", "t.0"]);
    assert!(
        gc.contains(&format!("removed branch {}", staged[0])),
        "{gc}"
    );
    assert!(staging_branches(&s).is_empty());
    ok(&s, &["verify", "--strict"]);
    // The target never saw the stream.
    assert_eq!(ok(&s, &["scan", "t.0", "--keys-only"]).lines().count(), 1);
}

#[test]
fn a_staging_branch_is_removed_by_the_next_writing_command_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = dir.path().join("s");
    ok(&s, &["put", "t.0", "a", "1"]);
    let mut load = spawn_piped(&s, &["load", "t.0", "-", "--atomic", "--batch", "1"]);
    let mut stdin = load.stdin.take().expect("stdin");
    stdin.write_all(b"k1\tv1\nk2\tv2\nk3\tv3\n").expect("write");
    stdin.flush().expect("flush");
    eventually("the load's staging branch", || {
        !staging_branches(&s).is_empty()
    });
    // Batches landed in the staging branch, none in the target.
    eventually("a batch in the staging branch", || {
        let b = staging_branches(&s);
        b.first()
            .is_some_and(|b| run(&s, &["get", &format!("t.0@{b}"), "k1"]).code == 0)
    });
    assert_ne!(
        run(&s, &["get", "t.0", "k1"]).code,
        0,
        "an atomic load showed a batch"
    );
    load.kill().expect("kill");
    let _ = load.wait();
    drop(stdin);
    assert_eq!(staging_branches(&s).len(), 1);
    ok(&s, &["put", "t.0", "b", "2"]);
    assert!(
        staging_branches(&s).is_empty(),
        "the next writer removes it"
    );
    assert_ne!(run(&s, &["get", "t.0", "k1"]).code, 0);
}

#[test]
fn load_atomic_is_all_or_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = dir.path().join("s");
    let bad = dir.path().join("bad.tsv");
    std::fs::write(&bad, "k1\tv1\nk2\tv2\nno tab here\nk3\tv3\n").expect("write");
    let p = bad.to_str().expect("utf-8");
    let r = run(&s, &["load", "t.0", p, "--atomic", "--batch", "1"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("nothing was loaded"), "{}", r.stderr);
    assert_ne!(run(&s, &["get", "t.0", "k1"]).code, 0, "a batch landed");
    assert!(
        staging_branches(&s).is_empty(),
        "the failed load cleaned up"
    );
    // Without --atomic the batches before the bad line land (k1; k2 was still in the open
    // batch), and the error says so.
    let r = run(&s, &["load", "t.0", p, "--batch", "1"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("1 entries before this line were loaded"),
        "{}",
        r.stderr
    );
    let good = dir.path().join("good.tsv");
    std::fs::write(&good, "k1\tw1\nk2\tw2\nk3\tw3\n").expect("write");
    let out = ok(
        &s,
        &["load", "t.0", good.to_str().expect("utf-8"), "--atomic"],
    );
    assert!(out.contains("loaded 3 entries"), "{out}");
    assert!(ok(&s, &["get", "t.0", "k3"]).contains("w3"));
    assert!(staging_branches(&s).is_empty());
}

fn partition_dir(s: &Path) -> PathBuf {
    s.join("t.0")
}

/// The current manifest of `branch` in `t.0`.
fn manifest_of(s: &Path, branch: &str) -> PathBuf {
    let prefix = format!("manifest_{branch}_");
    std::fs::read_dir(partition_dir(s))
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let n = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            // Not an archive: `manifest_<branch>_<term>` has one field after the prefix.
            n.strip_prefix(&prefix)
                .is_some_and(|rest| !rest.contains('_'))
        })
        .max()
        .expect("manifest")
}

#[test]
fn a_damaged_main_comes_back_from_its_newest_archive_saying_what_is_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = dir.path().join("s");
    ok(&s, &["put", "t.0", "k1", "v1"]);
    ok(
        &s,
        &["branch", "create", "feature", "t.0", "--from", "main"],
    );
    ok(&s, &["archive", "create", "t.0"]);
    // Four commits, one log record each, by a writer that is then killed: a clean close
    // would seal the manifest into one snapshot record (where any damage is plain
    // `Corruption`), so only a manifest left by a crash has records to salvage.
    let mut loader = spawn_piped(&s, &["load", "t.0", "-", "--batch", "1"]);
    let mut stdin = loader.stdin.take().expect("stdin");
    stdin
        .write_all(b"k2\tv2\nk3\tv3\nk1\tv1b\nk4\tv4\nlast\tnever-committed\n")
        .expect("write");
    stdin.flush().expect("flush");
    // k4's batch commits once the next line arrives; a reader sees it beside the loader.
    eventually("k4 to be committed by the loader", || {
        let r = run(&s, &["get", "t.0", "k4"]);
        r.code == 0 && r.stdout.contains("v4")
    });
    loader.kill().expect("kill the loader");
    loader.wait().expect("reaped");
    drop(stdin);
    // Damage the second-to-last record of main's manifest (the `k1 = v1b` commit).
    let m = manifest_of(&s, "main");
    let mut bytes = std::fs::read(&m).expect("read");
    let blocks = bytes.len() / 4096;
    assert!(blocks >= 3, "{blocks} blocks");
    bytes[(blocks - 2) * 4096 + 40] ^= 0xff;
    std::fs::write(&m, &bytes).expect("write");
    let info = run(&s, &["branch", "info", "t.0"]);
    assert_eq!(info.code, 5, "{}", info.stderr);
    assert!(info.stdout.contains("archives   1"), "{}", info.stdout);
    assert!(
        info.stderr.contains("bough repair t.0@main"),
        "{}",
        info.stderr
    );
    assert!(ok(&s, &["archive", "list", "t.0"]).contains("manifest_main_"));
    let list = run(&s, &["branch", "list", "t.0"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(list.stdout.contains("feature") && list.stderr.contains("damaged"));
    assert!(ok(&s, &["get", "t.0@feature", "k1"]).contains("v1"));
    let repaired = ok(&s, &["repair", "t.0"]);
    assert!(repaired.contains("repaired t.0@main"), "{repaired}");
    // The readable prefix had k2 and k3 after the archive; the damaged k1 commit and the
    // k4 commit after it are lost unread (one intact record follows the damage).
    assert!(repaired.contains("lost: 2 key changes"), "{repaired}");
    assert!(
        repaired.contains("written  k2") && repaired.contains("written  k3"),
        "{repaired}"
    );
    assert!(repaired.contains("1 commit after the damage"), "{repaired}");
    assert!(ok(&s, &["get", "t.0", "k1"]).contains("v1"));
    assert_ne!(run(&s, &["get", "t.0", "k2"]).code, 0);
    ok(&s, &["put", "t.0", "k5", "v5"]);
    ok(&s, &["gc"]);
    ok(&s, &["verify", "--strict"]);
    assert!(ok(&s, &["get", "t.0@feature", "k1"]).contains("v1"));
}

#[test]
fn archive_restore_brings_back_a_damaged_branch_and_archive_branch_works_beside_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = dir.path().join("s");
    ok(&s, &["put", "t.0", "k1", "v1"]);
    ok(&s, &["archive", "create", "t.0"]);
    let listed = ok(&s, &["archive", "list", "t.0", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&listed).expect("json");
    let ts = v["archives"][0]["timestamp_ms"]
        .as_u64()
        .expect("ts")
        .to_string();
    ok(&s, &["put", "t.0", "k2", "v2"]);
    ok(&s, &["put", "t.0", "k3", "v3"]);
    // The snapshot at offset 0 itself: nothing of the manifest reads.
    let m = manifest_of(&s, "main");
    let mut bytes = std::fs::read(&m).expect("read");
    bytes[20] ^= 0xff;
    std::fs::write(&m, &bytes).expect("write");
    ok(&s, &["archive", "branch", "t.0", &ts, "yesterday"]);
    assert!(ok(&s, &["get", "t.0@yesterday", "k1"]).contains("v1"));
    let restored = ok(&s, &["archive", "restore", "t.0", &ts]);
    assert!(
        restored.contains("every change made after the archive"),
        "{restored}"
    );
    assert!(ok(&s, &["get", "t.0", "k1"]).contains("v1"));
    ok(&s, &["verify", "--strict"]);
}

#[test]
fn verify_names_every_referent_of_a_bad_page_once_with_the_remedy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = dir.path().join("s");
    ok(&s, &["put", "t.0", "k1", "v1"]);
    ok(&s, &["archive", "create", "t.0"]);
    // Every process continues the one data file: the second put's page is the one it
    // appends.
    let files = data_files(&s);
    assert_eq!(files.len(), 1, "{files:?}");
    let before = std::fs::metadata(&files[0]).expect("stat").len();
    ok(&s, &["put", "t.0", "k1", "v2"]);
    let after = std::fs::metadata(&files[0]).expect("stat").len();
    assert_eq!(after - before, 4096, "one leaf page");
    for b in ["b1", "b2", "b3"] {
        ok(&s, &["branch", "create", b, "t.0", "--from", "main"]);
    }
    // The page the second put wrote: main and its three branches reach it, the archive
    // (taken before) does not.
    let mut bytes = std::fs::read(&files[0]).expect("read");
    bytes[before as usize + 100] ^= 0xff;
    std::fs::write(&files[0], &bytes).expect("write");
    let r = run(&s, &["verify"]);
    assert_eq!(r.code, 5, "{}", r.stdout);
    let errors: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("error"))
        .collect();
    assert_eq!(errors.len(), 1, "one line per bad page:\n{}", r.stdout);
    let line = errors[0];
    for who in ["branch main", "branch b1", "branch b2", "branch b3"] {
        assert!(line.contains(who), "{who} missing: {line}");
    }
    assert!(!line.contains("manifest_"), "named by files: {line}");
    assert!(line.contains("bough archive restore t.0@main"), "{line}");
}

fn data_files(s: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(partition_dir(s))
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("data_"))
        })
        .collect();
    v.sort();
    v
}

/// Copies a store directory (a second damaged store from the same bytes).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let dest = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).expect("copy");
        }
    }
}

/// Every command issue 19 names, against a store whose `main` manifest is damaged (its
/// snapshot, or a log record with an intact one after it) while an archive of `main` is
/// intact: `archive list` and `archive branch` work; `branch info` shows what is known and
/// names `bough repair`; `reset` cannot use the damaged state either way (as target or as
/// source) and says so, naming `bough repair` and leaving every branch as it was; `archive
/// restore` and `bough repair` bring `main` back, after which `reset` works again.
#[test]
fn every_command_beside_a_damaged_main_works_or_names_the_repair() {
    for (what, damage) in [("snapshot", 0usize), ("log record", 1)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = dir.path().join("s");
        ok(&s, &["put", "t.0", "k1", "v1"]);
        ok(
            &s,
            &["branch", "create", "feature", "t.0", "--from", "main"],
        );
        ok(&s, &["put", "t.0@feature", "f1", "on-feature"]);
        ok(&s, &["archive", "create", "t.0"]);
        let listed = ok(&s, &["--json", "archive", "list", "t.0"]);
        let v: serde_json::Value = serde_json::from_str(&listed).expect("json");
        let ts = v["archives"][0]["timestamp_ms"]
            .as_u64()
            .expect("ts")
            .to_string();
        for (k, v) in [("k2", "v2"), ("k3", "v3")] {
            ok(&s, &["put", "t.0", k, v]);
        }
        let m = manifest_of(&s, "main");
        let mut bytes = std::fs::read(&m).expect("read");
        if damage == 0 {
            bytes[20] ^= 0xff;
        } else {
            // The k2 commit's record; the k3 record after it is intact, so this is no
            // torn last append replay could drop.
            let blocks = bytes.len() / 4096;
            bytes[(blocks - 2) * 4096 + 40] ^= 0xff;
        }
        std::fs::write(&m, &bytes).expect("write");

        let listed = ok(&s, &["archive", "list", "t.0"]);
        assert!(listed.contains(&ts), "{what}: {listed}");
        let info = run(&s, &["branch", "info", "t.0"]);
        assert_eq!(info.code, 5, "{what}: {}", info.stderr);
        assert!(
            info.stdout.contains("archives   1"),
            "{what}: {}",
            info.stdout
        );
        assert!(
            info.stderr.contains("bough repair t.0@main"),
            "{what}: {}",
            info.stderr
        );
        ok(&s, &["branch", "info", "t.0@feature"]);
        ok(&s, &["archive", "branch", "t.0", &ts, "yesterday"]);
        assert_eq!(ok(&s, &["get", "t.0@yesterday", "k1"]).trim(), "v1");

        // reset, with the damaged branch as its target and as its source.
        for args in [
            ["reset", "t.0", "--to", "feature"],
            ["reset", "t.0@feature", "--to", "main"],
        ] {
            let r = run(&s, &args);
            assert_eq!(r.code, 5, "{what}: {args:?}: {}", r.stderr);
            assert!(
                r.stderr.contains("t.0@main") && r.stderr.contains("`bough repair t.0@main`"),
                "{what}: {args:?}: {}",
                r.stderr
            );
            let j = run(&s, &[&["--json"][..], &args[..]].concat());
            assert_eq!(j.code, 5, "{what}: {args:?}");
            assert!(
                format!("{}{}", j.stdout, j.stderr).contains("bough repair t.0@main"),
                "{what}: {args:?}: {}{}",
                j.stdout,
                j.stderr
            );
        }
        assert_eq!(ok(&s, &["get", "t.0@feature", "k1"]).trim(), "v1");
        assert_eq!(ok(&s, &["get", "t.0@feature", "f1"]).trim(), "on-feature");

        // Back through `bough repair` (on a copy) and through `archive restore`.
        let copy = dir.path().join("copy");
        copy_dir(&s, &copy);
        let repaired = ok(&copy, &["repair", "t.0"]);
        assert!(repaired.contains("repaired t.0@main"), "{what}: {repaired}");
        assert!(repaired.contains("lost:"), "{what}: {repaired}");
        let restored = ok(&s, &["archive", "restore", "t.0", &ts]);
        assert!(restored.contains("repaired t.0@main"), "{what}: {restored}");
        for store in [&s, &copy] {
            assert_eq!(ok(store, &["get", "t.0", "k1"]).trim(), "v1");
            ok(store, &["reset", "t.0", "--to", "feature"]);
            assert_eq!(ok(store, &["get", "t.0", "f1"]).trim(), "on-feature");
            ok(store, &["verify", "--strict"]);
        }
    }
}
