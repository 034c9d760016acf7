//! The store lock: one writing process (one open handle) per store directory.
//!
//! The lock is `std::fs::File::try_lock` on `<root>/LOCK` (an exclusive `flock` on Linux):
//! the kernel releases it when the handle is closed or the process dies, so a crash never
//! leaves a stale lock behind. Read-only opens do not take it at all (a reader must never
//! make a writer wait), see `Store::open_read_only`.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{IoError, IoResult};

/// Name of the lock file inside the store root.
pub const LOCK_FILE: &str = "LOCK";

/// How often a waiting writer tries the lock again.
const RETRY_EVERY: Duration = Duration::from_millis(20);

/// An exclusive lock on `<root>/LOCK`, released when dropped (or when the process dies).
#[derive(Debug)]
pub struct DirLock {
    path: PathBuf,
    // Held for its descriptor: closing it releases the lock.
    _file: File,
}

impl DirLock {
    /// Path of the lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Takes the store lock of `root` without waiting. Fails with [`IoError::Locked`] if any
/// other open handle holds it, in this process or another (the lock belongs to the open
/// file, so a second `lock_dir` in the same process conflicts too).
pub fn lock_dir(root: impl AsRef<Path>) -> IoResult<DirLock> {
    lock_dir_wait(root, Duration::ZERO)
}

/// Takes the store lock of `root`, waiting up to `wait` for another holder to let go.
/// After that, fails with [`IoError::LockTimeout`] (or [`IoError::Locked`] when `wait` is
/// zero). The wait is measured on the monotonic clock, not the store's injected clock: it
/// is about another process, which no test clock drives.
pub fn lock_dir_wait(root: impl AsRef<Path>, wait: Duration) -> IoResult<DirLock> {
    let path = root.as_ref().join(LOCK_FILE);
    let shown = path.display().to_string();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| IoError::os("open", &shown, e))?;
    let start = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(DirLock { path, _file: file }),
            Err(TryLockError::WouldBlock) => {
                let waited = start.elapsed();
                if waited >= wait {
                    return Err(if wait.is_zero() {
                        IoError::Locked { path: shown }
                    } else {
                        IoError::LockTimeout {
                            path: shown,
                            waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                        }
                    });
                }
                std::thread::sleep(RETRY_EVERY.min(wait - waited));
            }
            Err(TryLockError::Error(e)) => return Err(IoError::os("lock", shown, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn second_lock_fails_until_the_first_drops() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = lock_dir(dir.path()).expect("first lock");
        let err = lock_dir(dir.path()).expect_err("second lock must fail");
        assert!(matches!(err, IoError::Locked { .. }), "{err}");
        assert_eq!(err.kind(), ErrorKind::Busy);
        drop(first);
        let again = lock_dir(dir.path()).expect("lock after release");
        assert!(again.path().ends_with(LOCK_FILE));
    }

    #[test]
    fn a_waiting_lock_times_out_with_how_long_it_waited() {
        let dir = tempfile::tempdir().expect("tempdir");
        let _first = lock_dir(dir.path()).expect("first lock");
        let err = lock_dir_wait(dir.path(), Duration::from_millis(60)).expect_err("held");
        match &err {
            IoError::LockTimeout { waited_ms, .. } => assert!(*waited_ms >= 60, "{err}"),
            other => panic!("expected LockTimeout, got {other}"),
        }
        assert_eq!(err.kind(), ErrorKind::Busy);
        assert!(err.to_string().contains("still locked after"), "{err}");
    }

    #[test]
    fn a_waiting_lock_gets_it_once_the_holder_lets_go() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = lock_dir(dir.path()).expect("first lock");
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(first);
        });
        let second = lock_dir_wait(dir.path(), Duration::from_secs(10)).expect("waited");
        assert!(second.path().ends_with(LOCK_FILE));
        releaser.join().expect("releaser");
    }
}
