//! The store lock: one process (one open handle) per store directory.

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::{IoError, IoResult};

/// Name of the lock file inside the store root.
pub const LOCK_FILE: &str = "LOCK";

/// An exclusive `flock` on `<root>/LOCK`, released when dropped (or when the process dies).
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
/// other open handle holds it, in this process or another (`flock` locks belong to the open
/// file, so a second `lock_dir` in the same process conflicts too).
pub fn lock_dir(root: impl AsRef<Path>) -> IoResult<DirLock> {
    let path = root.as_ref().join(LOCK_FILE);
    let shown = path.display().to_string();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| IoError::os("open", &shown, e))?;
    loop {
        // SAFETY: the descriptor belongs to `file`, alive for the call; flock takes no pointers.
        let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if r == 0 {
            return Ok(DirLock { path, _file: file });
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => return Err(IoError::Locked { path: shown }),
            _ => return Err(IoError::os("flock", shown, err)),
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
}
