//! `Store::open_read_only`: readers beside a live writer — in this process and in another
//! (the test binary runs itself as the child) — and writers waiting for the store lock.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bough::{ErrorKind, Options, ScanOptions, Store, WriteBatch};

const CHILD_ENV: &str = "BOUGH_READ_ONLY_CHILD";
const DIR_ENV: &str = "BOUGH_READ_ONLY_DIR";

fn writer_opts(dir: &Path) -> Options {
    // These tests pin what each commit writes to the tree's own files (data files,
    // manifest records): no write buffer. The buffered path: write_buffer.rs, log_files.rs
    // and the buffered variants of the model tests.
    Options::new(dir)
        .write_buffer_bytes(0)
        .maintenance_interval_ms(0)
        // Small files, so overwrites make whole files garbage that compaction and GC take.
        .data_file_size(64 << 10)
        .compaction_garbage_ratio(0.3)
}

fn reader_opts(dir: &Path) -> Options {
    Options::new(dir).maintenance_interval_ms(0)
}

/// Every commit of the writer: keys `k00`..`k{n}` all set to the same round number, so a
/// reader that sees two different values in one state saw a torn state.
fn round(n: usize, r: u64) -> WriteBatch {
    let mut b = WriteBatch::new();
    for i in 0..n {
        b.put(format!("k{i:02}"), format!("{r:08}"));
    }
    b
}

/// The round one consistent state holds; panics (in the child: reported) on a torn state.
fn round_of(store: &Store) -> Result<u64, String> {
    let main = store
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .map_err(|e| format!("open: {e}"))?;
    let page = main
        .scan_blocking(&ScanOptions::default())
        .map_err(|e| format!("scan: {e}"))?;
    let values: BTreeMap<Vec<u8>, Vec<u8>> = page
        .entries
        .into_iter()
        .map(|kv| (kv.key, kv.value.value))
        .collect();
    let distinct: std::collections::BTreeSet<&Vec<u8>> = values.values().collect();
    if distinct.len() != 1 || values.len() != KEYS {
        return Err(format!(
            "torn state: {} keys, values {distinct:?}",
            values.len()
        ));
    }
    let v = distinct.into_iter().next().cloned().unwrap_or_default();
    String::from_utf8_lossy(&v)
        .parse::<u64>()
        .map_err(|e| format!("value {v:?}: {e}"))
}

const KEYS: usize = 40;

/// Run by [`spawn_child`] only. `read <min>`: opens read-only, checks it sees at least round
/// `min`, then refreshes and rereads for a while, holding one handle from the start whose
/// state must stay readable (and unchanged) while the writer compacts and collects files.
/// `write <wait_ms>`: opens for writing, waiting up to `wait_ms` for the lock.
#[test]
fn child_helper() {
    let (Some(what), Some(dir)) = (std::env::var_os(CHILD_ENV), std::env::var_os(DIR_ENV)) else {
        return;
    };
    let what = what.to_string_lossy().into_owned();
    let dir = Path::new(&dir);
    let mut words = what.split(' ');
    match (
        words.next(),
        words.next().and_then(|w| w.parse::<u64>().ok()),
    ) {
        (Some("read"), Some(min)) => {
            let store = match Store::open_read_only(reader_opts(dir)) {
                Ok(s) => s,
                Err(e) => return println!("CHILD:ERROR open {e}"),
            };
            let first = match round_of(&store) {
                Ok(r) => r,
                Err(e) => return println!("CHILD:ERROR {e}"),
            };
            if first < min {
                return println!("CHILD:ERROR saw round {first}, {min} was acknowledged");
            }
            let held = match store.partition("t", 0).and_then(|p| p.branch("main")) {
                Ok(b) => b,
                Err(e) => return println!("CHILD:ERROR {e}"),
            };
            let held_value = held.get_blocking(b"k00").ok().flatten();
            let mut last = first;
            let mut reads = 0;
            let start = Instant::now();
            while start.elapsed() < Duration::from_millis(1500) {
                if let Err(e) = store.refresh() {
                    return println!("CHILD:ERROR refresh {e}");
                }
                match round_of(&store) {
                    Ok(r) if r >= last => last = r,
                    Ok(r) => return println!("CHILD:ERROR went back from round {last} to {r}"),
                    Err(e) => return println!("CHILD:ERROR {e}"),
                }
                reads += 1;
            }
            // The handle opened first still reads its own state in full.
            match held.scan_blocking(&ScanOptions::default()) {
                Ok(p) if p.entries.len() == KEYS => {}
                Ok(p) => return println!("CHILD:ERROR held state has {} keys", p.entries.len()),
                Err(e) => return println!("CHILD:ERROR held state unreadable: {e}"),
            }
            if held.get_blocking(b"k00").ok().flatten() != held_value {
                return println!("CHILD:ERROR the held state changed");
            }
            println!("CHILD:OK first={first} last={last} reads={reads}");
        }
        (Some("write"), Some(wait_ms)) => {
            let started = Instant::now();
            match Store::open(writer_opts(dir).lock_wait_ms(wait_ms)) {
                Ok(s) => {
                    println!("CHILD:ACQUIRED after {} ms", started.elapsed().as_millis());
                    let _ = s.close();
                }
                Err(e) if e.kind() == ErrorKind::Busy => println!("CHILD:BUSY {e}"),
                Err(e) => println!("CHILD:ERROR {e}"),
            }
        }
        _ => println!("CHILD:ERROR bad request {what}"),
    }
}

fn spawn_child(dir: &Path, what: &str) -> std::process::Child {
    let exe = std::env::current_exe().expect("current_exe");
    Command::new(exe)
        .args(["--exact", "child_helper", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, what)
        .env(DIR_ENV, dir)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn child")
}

fn child_output(child: std::process::Child) -> String {
    let out = child.wait_with_output().expect("child");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_reader_process_reads_consistent_durable_states_beside_a_writing_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = Store::open(writer_opts(dir.path())).expect("writer");
    let main = writer
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("main");
    let mut r = 1;
    main.write_blocking(round(KEYS, r)).expect("first round");
    let child = spawn_child(dir.path(), &format!("read {r}"));
    // Keep committing, compacting and collecting while the reader reads: files its states
    // reference are deleted under it.
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2500) {
        r += 1;
        main.write_blocking(round(KEYS, r)).expect("round");
        if r % 10 == 0 {
            main.compact_now().expect("compact");
            writer.gc().expect("gc");
        }
    }
    let out = child_output(child);
    assert!(out.contains("CHILD:OK"), "reader: {out}");
    assert_eq!(round_of(&writer), Ok(r), "the writer was not disturbed");
    writer.close().expect("close");
}

#[test]
fn a_second_writer_process_waits_for_the_lock_and_gets_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = Store::open(writer_opts(dir.path())).expect("writer");
    let child = spawn_child(dir.path(), "write 20000");
    std::thread::sleep(Duration::from_millis(400));
    writer.close().expect("close");
    let out = child_output(child);
    assert!(out.contains("CHILD:ACQUIRED"), "second writer: {out}");
}

#[test]
fn a_second_writer_process_times_out_with_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let writer = Store::open(writer_opts(dir.path())).expect("writer");
    let out = child_output(spawn_child(dir.path(), "write 200"));
    assert!(out.contains("CHILD:BUSY"), "second writer: {out}");
    assert!(
        out.contains("still locked after waiting") && out.contains("open for writing"),
        "{out}"
    );
    // Without a wait, the refusal is immediate.
    let out = child_output(spawn_child(dir.path(), "write 0"));
    assert!(
        out.contains("CHILD:BUSY") && out.contains("locked"),
        "{out}"
    );
    writer.close().expect("close");
}

/// Every file of the store with its bytes.
fn contents(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).expect("prefix").display().to_string();
                out.insert(rel, std::fs::read(&p).expect("read"));
            }
        }
    }
    out
}

#[test]
fn a_read_only_store_refuses_every_change_and_changes_no_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let w = Store::open(writer_opts(dir.path())).expect("writer");
        let p = w.partition("t", 0).expect("partition");
        p.branch("main")
            .and_then(|m| m.write_blocking(round(KEYS, 7)))
            .expect("write");
        p.create_branch("feature", "main").expect("branch");
        p.branch("main").and_then(|m| m.archive()).expect("archive");
        w.close().expect("close");
    }
    let before = contents(dir.path());
    let ro = Store::open_read_only(reader_opts(dir.path())).expect("read-only");
    assert!(ro.is_read_only());
    assert_eq!(round_of(&ro), Ok(7));
    let p = ro.partition("t", 0).expect("partition");
    let main = p.branch("main").expect("main");
    let refused = [
        main.write_blocking(round(1, 8)).err(),
        p.create_branch("other", "main").err(),
        p.delete_branch("feature").err(),
        main.archive().err(),
        main.truncate_blocking(b"").err(),
        main.compact_now().err(),
        ro.gc().err(),
        ro.run_maintenance().err(),
        p.gc().err(),
        ro.partition("t", 1).and_then(|p| p.branch("main")).err(),
    ];
    for (i, e) in refused.into_iter().enumerate() {
        let e = e.unwrap_or_else(|| panic!("change {i} was not refused"));
        assert!(
            matches!(e.kind(), ErrorKind::InvalidArgument | ErrorKind::NotFound),
            "change {i}: {e}"
        );
    }
    assert_eq!(p.branches().expect("branches"), vec!["feature", "main"]);
    assert_eq!(main.archives().expect("archives").len(), 1);
    assert!(p.diff("main", "feature").expect("diff").is_empty());
    assert!(p.gc_dry_run().is_ok(), "a GC dry run only reads");
    ro.close().expect("close");
    assert_eq!(
        contents(dir.path()),
        before,
        "the read-only open changed the store"
    );
    assert!(
        Store::open_read_only(reader_opts(&dir.path().join("missing")))
            .is_err_and(|e| e.kind() == ErrorKind::NotFound),
        "a missing store is not created"
    );
}

#[test]
fn a_torn_manifest_tail_is_read_around_not_cut_off() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let w = Store::open(writer_opts(dir.path())).expect("writer");
        let main = w
            .partition("t", 0)
            .and_then(|p| p.branch("main"))
            .expect("main");
        main.write_blocking(round(KEYS, 3)).expect("write");
        w.close().expect("close");
    }
    // A writer in the middle of appending its next record: a few bytes of it.
    let manifest = std::fs::read_dir(dir.path().join("t.0"))
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("manifest_main_"))
        })
        .expect("manifest");
    let mut bytes = std::fs::read(&manifest).expect("read");
    bytes.extend_from_slice(&[0xAB; 100]);
    std::fs::write(&manifest, &bytes).expect("write");
    let ro = Store::open_read_only(reader_opts(dir.path())).expect("read-only");
    assert_eq!(round_of(&ro), Ok(3));
    ro.close().expect("close");
    assert_eq!(
        std::fs::read(&manifest).expect("read"),
        bytes,
        "the tail was cut"
    );
}

#[test]
fn a_reader_keeps_its_state_while_the_writer_collects_the_files_under_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let w = Store::open(writer_opts(dir.path())).expect("writer");
    let main = w
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("main");
    main.write_blocking(round(KEYS, 1)).expect("write");
    let ro = Store::open_read_only(reader_opts(dir.path())).expect("read-only");
    let held = ro
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("main");
    assert_eq!(
        held.get_blocking(b"k05").expect("get").expect("k05").value,
        b"00000001"
    );
    let files_before: Vec<String> = contents(&dir.path().join("t.0")).into_keys().collect();
    for r in 2..200 {
        main.write_blocking(round(KEYS, r)).expect("write");
        if r % 20 == 0 {
            main.compact_now().expect("compact");
            w.gc().expect("gc");
        }
    }
    let files_after: Vec<String> = contents(&dir.path().join("t.0")).into_keys().collect();
    let gone: Vec<&String> = files_before
        .iter()
        .filter(|f| f.starts_with("data_") && !files_after.contains(f))
        .collect();
    assert!(
        !gone.is_empty(),
        "the writer collected none of the reader's files"
    );
    assert_eq!(round_of(&ro), Ok(1), "the reader's state moved");
    assert_eq!(
        held.get_blocking(b"k39").expect("get").expect("k39").value,
        b"00000001"
    );
    ro.refresh().expect("refresh");
    assert_eq!(round_of(&ro), Ok(199));
    w.close().expect("close");
}
