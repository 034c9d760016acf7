//! A local file's [`FileStamp`] from one `stat`: its length, device and inode, and its
//! change and modification times.
//!
//! Every change of a file's bytes sets its change time (`ctime`) to the current time; a
//! replacement by rename is another inode. But a file system's clock is coarse (a kernel
//! tick, a second on some file systems), so a file changed twice within one tick — and an
//! inode number reused by a later replacement — can show the same metadata for different
//! bytes. As git does with its index ("racily clean" entries), a file whose change time is
//! not well in the past when it is looked at gets no stamp: any later change of it is then
//! at a later tick, and shows another change time.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Local, map_os};
use crate::error::{IoError, IoResult};
use crate::path;
use crate::storage::FileStamp;

/// How far in the past a file's last change must be for its metadata to identify its
/// contents: above the coarsest timestamp granularity of a local file system (one or two
/// seconds) plus the lag of the kernel's coarse clock behind the one read here.
pub(super) const SETTLED: Duration = Duration::from_secs(3);

pub(super) fn cheap_stamp(local: &Local, path: &str) -> IoResult<Option<FileStamp>> {
    path::check_file(path)?;
    // Read before the `stat`: a change after it is stamped at or after this time.
    let now = SystemTime::now();
    let meta = std::fs::metadata(local.abs(path)).map_err(|e| map_os("stat", path, e))?;
    if meta.is_dir() {
        return Err(IoError::errno("stat", path, libc::EISDIR));
    }
    Ok(stamp_of(&meta, now))
}

/// The stamp of a file with `meta`, looked at `now`; `None` while its last change is
/// within [`SETTLED`] of `now` (or after it: a clock that went back).
pub(super) fn stamp_of(meta: &Metadata, now: SystemTime) -> Option<FileStamp> {
    let ctime = nanos(meta.ctime(), meta.ctime_nsec())?;
    let mtime = nanos(meta.mtime(), meta.mtime_nsec())?;
    let now = u64::try_from(now.duration_since(UNIX_EPOCH).ok()?.as_nanos()).ok()?;
    let settled = u64::try_from(SETTLED.as_nanos()).ok()?;
    if ctime.max(mtime).checked_add(settled)? >= now {
        return None;
    }
    Some(FileStamp::new(
        meta.len(),
        [meta.dev(), meta.ino(), ctime, mtime],
    ))
}

/// Nanoseconds since the epoch; `None` before it or past 2554.
fn nanos(secs: i64, nsec: i64) -> Option<u64> {
    let secs = u64::try_from(secs).ok()?;
    let nsec = u64::try_from(nsec).ok()?;
    secs.checked_mul(1_000_000_000)?.checked_add(nsec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_gets_a_stamp_only_once_its_last_change_has_settled() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, b"abc").unwrap();
        let meta = std::fs::metadata(&f).unwrap();
        let changed = meta.modified().unwrap();
        // Just changed, or a clock behind the file: no stamp.
        assert_eq!(stamp_of(&meta, changed), None);
        assert_eq!(stamp_of(&meta, changed - Duration::from_secs(60)), None);
        assert_eq!(stamp_of(&meta, changed + SETTLED), None);
        // Settled: the length and the same marks at every look.
        let later = changed + SETTLED + Duration::from_secs(1);
        let s = stamp_of(&meta, later).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(stamp_of(&meta, later + Duration::from_secs(100)), Some(s));
        // An append (same inode) and a replacement (a new inode) each show another stamp.
        {
            use std::io::Write;
            let mut h = std::fs::OpenOptions::new().append(true).open(&f).unwrap();
            h.write_all(b"d").unwrap();
        }
        let appended = std::fs::metadata(&f).unwrap();
        let far = SystemTime::now() + Duration::from_secs(3600);
        let a = stamp_of(&appended, far).unwrap();
        assert_eq!(a.len(), 4);
        assert_ne!(a, s);
        let tmp = dir.path().join("f.tmp");
        std::fs::write(&tmp, b"xyzw").unwrap();
        std::fs::rename(&tmp, &f).unwrap();
        let replaced = stamp_of(&std::fs::metadata(&f).unwrap(), far).unwrap();
        assert_eq!(replaced.len(), 4);
        assert_ne!(replaced, a);
    }
}
