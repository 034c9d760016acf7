//! The store lock across processes: the test binary re-runs itself as the child.

use std::path::Path;
use std::process::Command;

use bough_io::{ErrorKind, IoError, lock_dir};

const CHILD_ENV: &str = "BOUGH_IO_LOCK_CHILD_DIR";

/// Does nothing unless started by `run_child`; then tries the lock and reports.
#[test]
fn child_helper() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    match lock_dir(&dir) {
        Ok(_lock) => println!("CHILD:ACQUIRED"),
        Err(e) if e.kind() == ErrorKind::Busy => println!("CHILD:LOCKED"),
        Err(e) => println!("CHILD:ERROR {e}"),
    }
}

fn run_child(dir: &Path) -> String {
    let exe = std::env::current_exe().expect("current_exe");
    let out = Command::new(exe)
        .args(["--exact", "child_helper", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .output()
        .expect("run child");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn another_process_cannot_take_a_held_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lock = lock_dir(dir.path()).expect("lock");
    let out = run_child(dir.path());
    assert!(out.contains("CHILD:LOCKED"), "child output: {out}");
    drop(lock);
    let out = run_child(dir.path());
    assert!(out.contains("CHILD:ACQUIRED"), "child output: {out}");
}

#[test]
fn same_process_second_handle_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let _lock = lock_dir(dir.path()).expect("lock");
    let e = lock_dir(dir.path()).expect_err("second lock");
    assert!(matches!(e, IoError::Locked { .. }), "{e}");
    assert!(
        lock_dir(dir.path().join("missing")).is_err(),
        "a missing root is an error, not a panic"
    );
}
