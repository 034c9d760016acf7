//! The narrow storage trait every backend implements, and the handle to one open file.
//!
//! Paths are relative to the store root and use `/` (`orders.3/data_7_main_0`); `""` is the
//! root directory. Empty, `.` and `..` components and absolute paths are `InvalidArgument`.
//! Backends never interpret names; the naming crate does.
//!
//! Every backend instance carries a poison flag: the first failed sync (file or directory)
//! sets it, and from then on every write, sync, create, rename and delete of that instance
//! (and its clones and open files) fails with `IoError::Poisoned`; reads keep working.

use std::fmt::Debug;
use std::sync::Arc;

use crate::error::IoResult;
use crate::stats::IoStats;

/// Which backend served a call (tests and benchmarks report it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// Local files through io_uring.
    IoUring,
    /// Local files through positional read/write system calls.
    Pread,
    /// Process memory (tests, ephemeral stores, power-loss simulation).
    Memory,
    /// An object store with a local cache (the `bough-object` crate).
    Object,
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BackendKind::IoUring => "io_uring",
            BackendKind::Pread => "pread",
            BackendKind::Memory => "memory",
            BackendKind::Object => "object",
        })
    }
}

/// How to open a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpenOptions {
    /// Create the file if missing (never truncates an existing one). Implies `write`.
    pub create: bool,
    /// Fail with `AlreadyExists` if it exists (implies `create`).
    pub create_new: bool,
    /// Bytes to preallocate from offset 0 (`fallocate` keeping the size) when the file is
    /// opened for writing; the length reported by `len` does not change.
    pub preallocate: u64,
    /// Open for writing.
    pub write: bool,
}

impl OpenOptions {
    /// Read-only.
    pub fn read() -> Self {
        OpenOptions::default()
    }
    /// Read-write, created if missing.
    pub fn write_create() -> Self {
        OpenOptions {
            create: true,
            write: true,
            ..Default::default()
        }
    }
    /// Read-write, must not exist yet.
    pub fn write_new(preallocate: u64) -> Self {
        OpenOptions {
            create: true,
            create_new: true,
            write: true,
            preallocate,
        }
    }
}

/// One version of a file, as its backend's metadata tells it ([`Storage::cheap_stamp`]):
/// two stamps of one path are equal only if no byte of the file changed between them — an
/// append changes the length, a write in place or a truncation the backend's change mark,
/// a replacement (`write_atomic`) the file's identity. So whatever was derived from the
/// bytes read under a stamp holds as long as the path's stamp is that stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileStamp {
    len: u64,
    version: [u64; 4],
}

impl FileStamp {
    /// A stamp of a file `len` bytes long; `version` is the backend's own marks (file
    /// identity and change times, or a change counter), opaque to callers.
    pub fn new(len: u64, version: [u64; 4]) -> Self {
        FileStamp { len, version }
    }

    /// Length of the file in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file was empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One open file. Offsets are absolute; reads are exact (a short read is an error).
pub trait StorageFile: Send + Sync + Debug {
    /// Path of the file, for error messages.
    fn path(&self) -> &str;
    /// Reads exactly `buf.len()` bytes at `offset`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> IoResult<()>;
    /// Reads several ranges; backends that can (io_uring) submit them as one batch.
    fn read_batch(&self, reqs: &mut [(u64, &mut [u8])]) -> IoResult<()> {
        for (offset, buf) in reqs.iter_mut() {
            self.read_at(*offset, buf)?;
        }
        Ok(())
    }
    /// Writes all of `buf` at `offset`.
    fn write_at(&self, offset: u64, buf: &[u8]) -> IoResult<()>;
    /// Writes several ranges; backends that can submit them as one batch.
    fn write_batch(&self, reqs: &[(u64, &[u8])]) -> IoResult<()> {
        for (offset, buf) in reqs {
            self.write_at(*offset, buf)?;
        }
        Ok(())
    }
    /// Makes every completed write durable (fdatasync). A failure poisons the storage.
    fn sync(&self) -> IoResult<()>;
    /// Current length in bytes (preallocated space past the length is not counted).
    fn len(&self) -> IoResult<u64>;
    /// Whether the file is empty.
    fn is_empty(&self) -> IoResult<bool> {
        Ok(self.len()? == 0)
    }
    /// Sets the length (used when sealing a preallocated file).
    fn set_len(&self, len: u64) -> IoResult<()>;
    /// Reserves disk space for `offset..offset + len` without changing the length (a no-op
    /// where the file system or backend cannot). Writes into reserved space avoid the slow
    /// size-extending path of the file system.
    fn preallocate(&self, offset: u64, len: u64) -> IoResult<()>;
}

/// A replacement of a file staged by [`Storage::stage_atomic`]: its bytes, and the synced
/// temporary file holding them where the backend wrote one.
#[derive(Debug)]
pub struct Staged {
    path: String,
    bytes: Vec<u8>,
    temp: Option<String>,
}

impl Staged {
    /// Bytes held for a backend that writes them only when installing.
    pub fn held(path: &str, bytes: &[u8]) -> Self {
        Staged {
            path: path.to_string(),
            bytes: bytes.to_vec(),
            temp: None,
        }
    }

    /// Bytes already written and synced to the temporary file `temp`.
    pub fn written(path: &str, bytes: &[u8], temp: String) -> Self {
        Staged {
            temp: Some(temp),
            ..Staged::held(path, bytes)
        }
    }

    /// The file it replaces.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The replacement's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The synced temporary file, where one was written.
    pub fn temp(&self) -> Option<&str> {
        self.temp.as_deref()
    }
}

/// A storage backend rooted at one directory (or namespace).
pub trait Storage: Send + Sync + Debug {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;
    /// Opens (or creates) a file. The parent directory must exist. A created file's name is
    /// durable only after `sync_dir` of its directory.
    fn open(&self, path: &str, opts: OpenOptions) -> IoResult<Arc<dyn StorageFile>>;
    /// Reads a whole small file, refusing files longer than `max_len` (a guard against
    /// allocating from a corrupt or hostile length): a longer file is `Corruption`.
    fn read_file(&self, path: &str, max_len: u64) -> IoResult<Vec<u8>>;
    /// Replaces `path` atomically and durably: write a temporary file, sync it, rename it
    /// over `path`, sync the directory.
    fn write_atomic(&self, path: &str, bytes: &[u8]) -> IoResult<()>;
    /// [`write_atomic`](Self::write_atomic) without the directory sync: the bytes are
    /// synced before the rename, so after a power loss `path` holds either them or what it
    /// held before (never a torn mix), and the new entry is durable at the directory's
    /// next `sync_dir`. For records that recovery rebuilds from files already durable when
    /// they are lost. Backends without directory syncs write as `write_atomic` does.
    fn write_atomic_entry_unsynced(&self, path: &str, bytes: &[u8]) -> IoResult<()> {
        self.write_atomic(path, bytes)
    }
    /// The first half of [`write_atomic_entry_unsynced`](Self::write_atomic_entry_unsynced):
    /// the temporary file written and synced, so that this can run (on another thread)
    /// while the caller makes durable what must precede the rename. Backends whose
    /// replacement is one request keep the bytes and write them at
    /// [`install_staged`](Self::install_staged).
    fn stage_atomic(&self, path: &str, bytes: &[u8]) -> IoResult<Staged> {
        Ok(Staged::held(path, bytes))
    }
    /// The second half: `staged` renamed into place, its directory entry left to the next
    /// `sync_dir` (as [`write_atomic_entry_unsynced`](Self::write_atomic_entry_unsynced)).
    fn install_staged(&self, staged: Staged) -> IoResult<()> {
        self.write_atomic_entry_unsynced(&staged.path, &staged.bytes)
    }
    /// Drops a staged replacement that will not be installed (its temporary file, if any,
    /// is removed; one left behind by a crash goes at the next recovery).
    fn discard_staged(&self, staged: Staged) {
        drop(staged);
    }
    /// Creates `path` with `bytes` only if it does not exist, durably (file and directory
    /// synced). Returns `AlreadyExists` if it does. Never leaves a partial file under `path`.
    fn create_new(&self, path: &str, bytes: &[u8]) -> IoResult<()>;
    /// Deletes a file; deleting a missing file is not an error, deleting a directory is. Not
    /// durable until `sync_dir`.
    fn delete(&self, path: &str) -> IoResult<()>;
    /// Lists the file names (not paths, not subdirectories) in a directory, sorted; a missing
    /// directory lists empty. Leftover temporary files (`<name>.<nonce>.tmp`) are listed.
    fn list(&self, dir: &str) -> IoResult<Vec<String>>;
    /// Lists the subdirectory names of the root, sorted.
    fn list_dirs(&self) -> IoResult<Vec<String>>;
    /// Creates a directory (and parents) and syncs the parent of every component, so the
    /// whole path is durable. Creating an existing directory is not an error.
    fn create_dir(&self, dir: &str) -> IoResult<()>;
    /// Removes an empty directory; a missing one is not an error. Not durable until
    /// `sync_dir` of its parent.
    fn remove_dir(&self, dir: &str) -> IoResult<()>;
    /// Makes the directory's entries (creates, renames, deletes) durable.
    fn sync_dir(&self, dir: &str) -> IoResult<()>;
    /// Size of a file in bytes.
    fn file_len(&self, path: &str) -> IoResult<u64>;
    /// The file's [`FileStamp`] — its length and what tells this version of it from every
    /// other version the path has had or will have — if the backend can tell it without
    /// reading the file or a network round trip. `None`: the backend cannot vouch for it
    /// (no cheap metadata, or the file changed too recently for its timestamps to tell it
    /// from a later change): a caller that caches what it derives from the file then reads
    /// it and caches nothing. `NotFound` for a missing file, as `file_len`, where the
    /// backend looks at all (the default, and the object tier, answer `None` unseen).
    fn cheap_stamp(&self, path: &str) -> IoResult<Option<FileStamp>> {
        let _ = path;
        Ok(None)
    }
    /// The I/O counters of this instance (shared by its clones and open files).
    fn stats(&self) -> &IoStats;
}
