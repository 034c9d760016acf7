//! The two local-directory backends, [`PreadStorage`] and [`UringStorage`]. They share
//! everything except how file contents move: metadata (open, rename, list, unlink,
//! `fallocate`, directory and file syncs) always goes through std/libc; reads and writes go
//! through positional system calls or through io_uring rings.

use std::ffi::CString;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{IoError, IoResult};
use crate::faults::{self, FaultInjector, FaultOp};
use crate::path;
use crate::stats::{IoStats, Poison};
use crate::storage::{BackendKind, FileStamp, OpenOptions, Staged, Storage, StorageFile};
use crate::uring::{self, RingPool};

mod file;
mod namespace;
mod stamp;

use namespace::{create_dir, delete, file_len, list_where, open, read_file, remove_dir};

/// How file contents move.
#[derive(Debug)]
enum Engine {
    Pread,
    Uring(RingPool),
}

/// State shared by a local backend instance, its clones and its open files.
#[derive(Debug)]
struct Local {
    root: PathBuf,
    engine: Engine,
    poison: Poison,
    faults: Option<FaultInjector>,
    stats: IoStats,
    temp_seq: AtomicU64,
}

/// Maps an OS error, turning "not found" and "exists" into the dedicated variants.
fn map_os(op: &'static str, path: &str, e: std::io::Error) -> IoError {
    match e.kind() {
        std::io::ErrorKind::NotFound => IoError::NotFound { path: path.into() },
        std::io::ErrorKind::AlreadyExists => IoError::AlreadyExists { path: path.into() },
        _ => IoError::os(op, path, e),
    }
}

fn cstring(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
}

/// `rename` that fails with `EEXIST` instead of replacing; falls back to `link` + `unlink`
/// where the file system lacks `RENAME_NOREPLACE`.
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    let (from_c, to_c) = (cstring(from)?, cstring(to)?);
    // SAFETY: both arguments are valid NUL-terminated strings that outlive the call; renameat2
    // reads them and keeps no reference.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from_c.as_ptr(),
            libc::AT_FDCWD,
            to_c.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => {
            tracing::debug!(error = %err, "renameat2(RENAME_NOREPLACE) unsupported; using link");
            std::fs::hard_link(from, to)?;
            // The new name exists and holds the synced contents; the temporary name is
            // garbage from here on, so a failed unlink is not the caller's failure.
            if let Err(e) = std::fs::remove_file(from) {
                tracing::warn!(error = %e, path = %from.display(), "could not remove temp file");
            }
            Ok(())
        }
        _ => Err(err),
    }
}

/// `fallocate(FALLOC_FL_KEEP_SIZE)`; file systems without it are treated as success.
fn fallocate_keep_size(file: &File, offset: u64, len: u64) -> std::io::Result<()> {
    let einval = || std::io::Error::from_raw_os_error(libc::EINVAL);
    let off = libc::off_t::try_from(offset).map_err(|_| einval())?;
    let len = libc::off_t::try_from(len).map_err(|_| einval())?;
    loop {
        // SAFETY: the descriptor is owned by `file`, which outlives the call; fallocate takes
        // no pointers.
        let r = unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, off, len) };
        if r == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => {
                tracing::debug!("fallocate unsupported here; not preallocating");
                return Ok(());
            }
            _ => return Err(err),
        }
    }
}

impl Local {
    fn new(root: &Path, engine: Engine, faults: Option<FaultInjector>) -> IoResult<Local> {
        let shown = root.display().to_string();
        if !root.exists() {
            std::fs::create_dir_all(root).map_err(|e| IoError::os("create_dir", &shown, e))?;
            if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
                File::open(parent)
                    .and_then(|d| d.sync_all())
                    .map_err(|e| IoError::os("sync_dir", parent.display().to_string(), e))?;
            }
        }
        if !root.is_dir() {
            return Err(IoError::errno("open", shown, libc::ENOTDIR));
        }
        Ok(Local {
            root: root.to_path_buf(),
            engine,
            poison: Poison::default(),
            faults,
            stats: IoStats::default(),
            temp_seq: AtomicU64::new(0),
        })
    }

    fn abs(&self, path: &str) -> PathBuf {
        if path.is_empty() {
            self.root.clone()
        } else {
            self.root.join(path)
        }
    }

    fn fault(&self, op: FaultOp, name: &'static str, path: &str) -> IoResult<()> {
        faults::check(&self.faults, op).map_err(|e| IoError::os(name, path, e))
    }

    /// Reads the requests at their offsets, exactly.
    fn read_into(&self, file: &File, path: &str, reqs: &mut [(u64, &mut [u8])]) -> IoResult<()> {
        for _ in reqs.iter() {
            self.fault(FaultOp::Read, "read", path)?;
        }
        let read_err = |e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                IoError::unexpected_eof(path)
            } else {
                IoError::os("read", path, e)
            }
        };
        match &self.engine {
            Engine::Pread => {
                for (offset, buf) in reqs.iter_mut() {
                    let cut = faults::short_read(&self.faults, buf.len());
                    pread_exact(file, buf, *offset, cut).map_err(read_err)?;
                }
            }
            Engine::Uring(pool) => {
                let cuts: Vec<_> = reqs
                    .iter()
                    .map(|(_, b)| faults::short_read(&self.faults, b.len()))
                    .collect();
                pool.read(file, reqs, &cuts).map_err(read_err)?
            }
        }
        for (_, buf) in reqs.iter() {
            self.stats.add_read(buf.len());
        }
        Ok(())
    }

    /// Reads a whole small file into `buf` with plain `pread`, on either engine: for one
    /// synchronous read of a few KiB (a manifest, a `CURRENT_TERM` record), handing the
    /// request to a ring's thread costs two context switches, more than the read (opening a
    /// partition with 100,000 branches reads 200,000 such files).
    fn read_whole(&self, file: &File, path: &str, buf: &mut [u8]) -> IoResult<()> {
        self.fault(FaultOp::Read, "read", path)?;
        let cut = faults::short_read(&self.faults, buf.len());
        pread_exact(file, buf, 0, cut).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                IoError::unexpected_eof(path)
            } else {
                IoError::os("read", path, e)
            }
        })?;
        self.stats.add_read(buf.len());
        Ok(())
    }

    /// Writes all of every request at its offset.
    fn write_from(&self, file: &File, path: &str, reqs: &[(u64, &[u8])]) -> IoResult<()> {
        self.poison.check()?;
        for _ in reqs {
            self.fault(FaultOp::Write, "write", path)?;
        }
        match &self.engine {
            Engine::Uring(pool) if reqs.len() > 1 => pool
                .write(file, reqs)
                .map_err(|e| IoError::os("write", path, e))?,
            // One buffer (a log record, a manifest record) is written in place: io_uring
            // hands a buffered write the file system cannot finish without blocking to a
            // kernel worker thread (io-wq), two context switches for a single write.
            Engine::Pread | Engine::Uring(_) => {
                for (offset, buf) in reqs {
                    file.write_all_at(buf, *offset)
                        .map_err(|e| IoError::os("write", path, e))?;
                }
            }
        }
        for (_, buf) in reqs {
            self.stats.add_write(buf.len());
        }
        Ok(())
    }

    /// `fdatasync`; a failure poisons the instance.
    fn sync_file(&self, file: &File, path: &str) -> IoResult<()> {
        self.poison.check()?;
        self.fault(FaultOp::Sync, "sync", path)
            .map_err(|e| self.poison.poison(e))?;
        // The system call on both engines: io_uring runs an fsync on a worker thread, which
        // only adds two context switches to a call that waits for it anyway (`uring.rs`).
        file.sync_data()
            .map_err(|e| self.poison.poison(IoError::os("sync", path, e)))?;
        self.stats.add_sync();
        Ok(())
    }

    /// Syncs a directory's entries; a failure poisons the instance.
    fn sync_dir_entries(&self, dir: &str) -> IoResult<()> {
        self.poison.check()?;
        let d = File::open(self.abs(dir)).map_err(|e| map_os("sync_dir", dir, e))?;
        self.fault(FaultOp::Sync, "sync_dir", dir)
            .map_err(|e| self.poison.poison(e))?;
        d.sync_all()
            .map_err(|e| self.poison.poison(IoError::os("sync_dir", dir, e)))?;
        self.stats.add_dir_sync();
        Ok(())
    }

    /// Writes `bytes` to a fresh temporary file next to `path` and syncs it. Returns the
    /// temporary path (relative and absolute).
    fn write_temp(&self, path: &str, bytes: &[u8]) -> IoResult<(String, PathBuf)> {
        let (parent, name) = path::split(path);
        let seq = self.temp_seq.fetch_add(1, Ordering::Relaxed);
        let temp_name = path::temp_name(name, seq);
        let temp = if parent.is_empty() {
            temp_name
        } else {
            format!("{parent}/{temp_name}")
        };
        let abs = self.abs(&temp);
        self.fault(FaultOp::Create, "create", &temp)?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&abs)
            .map_err(|e| map_os("create", &temp, e))?;
        let written = self
            .write_from(&file, &temp, &[(0, bytes)])
            .and_then(|()| self.sync_file(&file, &temp));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&abs);
            return Err(e);
        }
        Ok((temp, abs))
    }

    /// [`Storage::stage_atomic`]: the temporary file written and synced.
    fn stage(&self, path: &str, bytes: &[u8]) -> IoResult<Staged> {
        path::check_file(path)?;
        self.poison.check()?;
        let (temp, _) = self.write_temp(path, bytes)?;
        Ok(Staged::written(path, bytes, temp))
    }

    /// [`Storage::install_staged`]: renamed over its path, the directory not synced.
    fn install_staged(&self, staged: Staged) -> IoResult<()> {
        let Some(temp) = staged.temp() else {
            return self.install(staged.path(), staged.bytes(), true, false);
        };
        let (path, temp_abs) = (staged.path(), self.abs(temp));
        let renamed = self.poison.check().and_then(|()| {
            self.fault(FaultOp::Rename, "rename", path)?;
            std::fs::rename(&temp_abs, self.abs(path)).map_err(|e| map_os("rename", path, e))
        });
        if renamed.is_err() {
            self.discard(&staged);
        }
        renamed
    }

    /// Removes a staged temporary file that will not be installed.
    fn discard(&self, staged: &Staged) {
        if let Some(temp) = staged.temp()
            && let Err(e) = std::fs::remove_file(self.abs(temp))
        {
            tracing::warn!(error = %e, path = %temp, "could not remove temp file");
        }
    }

    /// `write_atomic` (`replace`) and `create_new` (not `replace`).
    /// `sync_entry` false: the directory is not synced after the rename (see
    /// [`Storage::write_atomic_entry_unsynced`]).
    fn install(&self, path: &str, bytes: &[u8], replace: bool, sync_entry: bool) -> IoResult<()> {
        path::check_file(path)?;
        self.poison.check()?;
        let (parent, _) = path::split(path);
        let (temp, temp_abs) = self.write_temp(path, bytes)?;
        let target = self.abs(path);
        let renamed = self.fault(FaultOp::Rename, "rename", path).and_then(|()| {
            let r = if replace {
                std::fs::rename(&temp_abs, &target)
            } else {
                rename_noreplace(&temp_abs, &target)
            };
            r.map_err(|e| map_os("rename", path, e))
        });
        if let Err(e) = renamed {
            if let Err(e2) = std::fs::remove_file(&temp_abs) {
                tracing::warn!(error = %e2, path = %temp, "could not remove temp file");
            }
            return Err(e);
        }
        if !sync_entry {
            return Ok(());
        }
        self.sync_dir_entries(parent)
    }
}

/// Reads all of `buf` at `offset`. One `pread` may transfer less than asked (a signal, a
/// network or FUSE file system, a device splitting the request): `read_exact_at` reads the
/// rest again until the buffer is full or the file ends. An injected short read (`cut`)
/// stops the first transfer at its prefix, so the continuation really runs; when the plan
/// says the device gave up, the rest fails with its errno and the caller gets an error,
/// never the partly filled buffer.
fn pread_exact(
    file: &File,
    buf: &mut [u8],
    offset: u64,
    cut: Option<crate::faults::ShortRead>,
) -> std::io::Result<()> {
    let mut done = 0;
    if let Some(c) = cut {
        let prefix = c.prefix.min(buf.len());
        let (head, _) = buf.split_at_mut(prefix);
        file.read_exact_at(head, offset)?;
        if let Some(errno) = c.then_errno {
            return Err(std::io::Error::from_raw_os_error(errno));
        }
        done = prefix;
    }
    let (_, rest) = buf.split_at_mut(done);
    file.read_exact_at(rest, offset + done as u64)
}

macro_rules! local_storage {
    ($ty:ident, $kind:expr) => {
        impl Storage for $ty {
            fn kind(&self) -> BackendKind {
                $kind
            }
            fn open(&self, path: &str, opts: OpenOptions) -> IoResult<Arc<dyn StorageFile>> {
                open(&self.local, path, opts)
            }
            fn read_file(&self, path: &str, max_len: u64) -> IoResult<Vec<u8>> {
                read_file(&self.local, path, max_len)
            }
            fn write_atomic(&self, path: &str, bytes: &[u8]) -> IoResult<()> {
                self.local.install(path, bytes, true, true)
            }
            fn write_atomic_entry_unsynced(&self, path: &str, bytes: &[u8]) -> IoResult<()> {
                self.local.install(path, bytes, true, false)
            }
            fn stage_atomic(&self, path: &str, bytes: &[u8]) -> IoResult<Staged> {
                self.local.stage(path, bytes)
            }
            fn install_staged(&self, staged: Staged) -> IoResult<()> {
                self.local.install_staged(staged)
            }
            fn discard_staged(&self, staged: Staged) {
                self.local.discard(&staged)
            }
            fn create_new(&self, path: &str, bytes: &[u8]) -> IoResult<()> {
                self.local.install(path, bytes, false, true)
            }
            fn delete(&self, path: &str) -> IoResult<()> {
                delete(&self.local, path)
            }
            fn list(&self, dir: &str) -> IoResult<Vec<String>> {
                list_where(&self.local, dir, |t| !t.is_dir())
            }
            fn list_dirs(&self) -> IoResult<Vec<String>> {
                list_where(&self.local, "", |t| t.is_dir())
            }
            fn create_dir(&self, dir: &str) -> IoResult<()> {
                create_dir(&self.local, dir)
            }
            fn remove_dir(&self, dir: &str) -> IoResult<()> {
                remove_dir(&self.local, dir)
            }
            fn sync_dir(&self, dir: &str) -> IoResult<()> {
                path::check_dir(dir)?;
                self.local.sync_dir_entries(dir)
            }
            fn file_len(&self, path: &str) -> IoResult<u64> {
                file_len(&self.local, path)
            }
            fn cheap_stamp(&self, path: &str) -> IoResult<Option<FileStamp>> {
                stamp::cheap_stamp(&self.local, path)
            }
            fn stats(&self) -> &IoStats {
                &self.local.stats
            }
        }

        impl $ty {
            /// The root directory.
            pub fn root(&self) -> &Path {
                &self.local.root
            }
        }
    };
}

/// Local files through `pread`/`pwrite`/`fdatasync`: the portable backend. Clones share the
/// instance (and its poison flag and counters).
#[derive(Debug, Clone)]
pub struct PreadStorage {
    local: Arc<Local>,
}

impl PreadStorage {
    /// Opens the directory `root` (created if missing).
    pub fn new(root: impl AsRef<Path>) -> IoResult<Self> {
        Self::build(root.as_ref(), None)
    }

    /// Like [`new`](Self::new), consulting `faults` before every operation.
    pub fn with_faults(root: impl AsRef<Path>, faults: FaultInjector) -> IoResult<Self> {
        Self::build(root.as_ref(), Some(faults))
    }

    fn build(root: &Path, faults: Option<FaultInjector>) -> IoResult<Self> {
        Ok(PreadStorage {
            local: Arc::new(Local::new(root, Engine::Pread, faults)?),
        })
    }
}

local_storage!(PreadStorage, BackendKind::Pread);

/// Options of a [`UringStorage`].
#[derive(Debug, Clone)]
pub struct UringOptions {
    /// Submission queue entries of each thread's ring (rounded up to a power of two by the
    /// kernel).
    pub entries: u32,
    /// Fault injector consulted before every operation.
    pub faults: Option<FaultInjector>,
}

impl Default for UringOptions {
    fn default() -> Self {
        UringOptions {
            entries: 128,
            faults: None,
        }
    }
}

/// Local files whose reads and batched writes go through io_uring: each calling thread
/// submits its request (a whole batch at once) to its own ring and waits for it there. A
/// write of one buffer, file syncs and metadata go through std/libc (io_uring would run
/// them on a kernel worker thread). Buffered I/O (no `O_DIRECT`).
#[derive(Debug, Clone)]
pub struct UringStorage {
    local: Arc<Local>,
}

impl UringStorage {
    /// Opens `root` (created if missing). Fails with `Unsupported` if
    /// io_uring is not usable here (see [`UringStorage::probe`]).
    pub fn new(root: impl AsRef<Path>) -> IoResult<Self> {
        Self::with_options(root, UringOptions::default())
    }

    /// Like [`new`](Self::new), consulting `faults` before every operation.
    pub fn with_faults(root: impl AsRef<Path>, faults: FaultInjector) -> IoResult<Self> {
        Self::with_options(
            root,
            UringOptions {
                faults: Some(faults),
                ..UringOptions::default()
            },
        )
    }

    /// Opens `root` with explicit options.
    pub fn with_options(root: impl AsRef<Path>, opts: UringOptions) -> IoResult<Self> {
        Self::probe().map_err(|what| IoError::Unsupported { what })?;
        let pool = RingPool::new(opts.entries.max(8)).map_err(|e| IoError::Unsupported {
            what: format!("io_uring ring setup failed: {e}"),
        })?;
        Ok(UringStorage {
            local: Arc::new(Local::new(root.as_ref(), Engine::Uring(pool), opts.faults)?),
        })
    }

    /// Checks once per process that io_uring works here: a ring can be created, it supports
    /// the opcodes this backend uses, and a NOP completes. Containers often block it.
    pub fn probe() -> Result<(), String> {
        uring::probe()
    }
}

local_storage!(UringStorage, BackendKind::IoUring);

/// Which local backend [`open_local`] should use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// io_uring when the probe succeeds, positional I/O otherwise.
    #[default]
    Auto,
    /// io_uring or an `Unsupported` error.
    IoUring,
    /// Positional I/O.
    Pread,
}

/// Options of [`open_local_with`].
#[derive(Debug, Clone, Default)]
pub struct LocalOptions {
    /// Backend selection.
    pub backend: BackendChoice,
    /// Fault injector consulted before every operation.
    pub faults: Option<FaultInjector>,
}

/// Opens a local store directory with the chosen backend (see [`BackendChoice`]).
pub fn open_local(root: impl AsRef<Path>, choice: BackendChoice) -> IoResult<Arc<dyn Storage>> {
    open_local_with(
        root,
        LocalOptions {
            backend: choice,
            ..LocalOptions::default()
        },
    )
}

/// Opens a local store directory with explicit options.
pub fn open_local_with(root: impl AsRef<Path>, opts: LocalOptions) -> IoResult<Arc<dyn Storage>> {
    let root = root.as_ref();
    let uring = |faults| {
        UringStorage::with_options(
            root,
            UringOptions {
                faults,
                ..UringOptions::default()
            },
        )
    };
    match opts.backend {
        BackendChoice::Pread => {
            tracing::info!(root = %root.display(), "storage backend: pread (requested)");
            Ok(Arc::new(PreadStorage::build(root, opts.faults)?))
        }
        BackendChoice::IoUring => {
            let s = uring(opts.faults)?;
            tracing::info!(root = %root.display(), "storage backend: io_uring (requested)");
            Ok(Arc::new(s))
        }
        BackendChoice::Auto => match UringStorage::probe() {
            Ok(()) => {
                let s = uring(opts.faults)?;
                tracing::info!(root = %root.display(), "storage backend: io_uring");
                Ok(Arc::new(s))
            }
            Err(why) => {
                tracing::warn!(
                    root = %root.display(),
                    reason = %why,
                    "io_uring unavailable; storage backend: pread"
                );
                Ok(Arc::new(PreadStorage::build(root, opts.faults)?))
            }
        },
    }
}
