//! [`MemoryStorage`]: a namespace of directories and files in process memory that remembers
//! what is durable, so tests can simulate a power loss.
//!
//! The model follows POSIX file systems:
//! - a file (inode) has *current* contents and *durable* contents, the latter copied from the
//!   former by `sync`;
//! - a directory has a *current* entry set and a *durable* one, the latter copied by
//!   `sync_dir` (and by `create_new`, `write_atomic` and `create_dir`, which sync the
//!   directory themselves);
//! - [`MemoryStorage::crash`] rebuilds the namespace from durable entries only, each file
//!   holding its durable contents. A file whose contents were synced but whose name was not
//!   vanishes; a name synced before its contents comes back holding the last synced bytes.
//!
//! Every write (and `set_len`) since a file's last sync is remembered in order, so a crash
//! can also decide per write what reached the media ([`CrashPolicy::Random`]): kept, dropped,
//! torn per 512-byte sector, or garbled — and per unsynced directory change whether it stuck.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::error::{IoError, IoResult};
use crate::faults::{self, FaultInjector, FaultOp};
use crate::path::{self, components};
use crate::stats::{IoStats, Poison};
use crate::storage::{BackendKind, FileStamp, OpenOptions, Storage, StorageFile};

/// Largest file the memory backend holds (larger writes fail with `EFBIG`), so a wild offset
/// never turns into a huge allocation.
pub const MAX_MEMORY_FILE_LEN: u64 = 1 << 32;

/// The unit a torn write is torn at: each 512-byte sector of an unsynced write is either
/// entirely new or entirely old.
pub const SECTOR_SIZE: u64 = 512;

mod crash;
mod file;

use crash::crash_image;
pub use crash::{CrashPolicy, CrashReport, RandomCrash};
use file::MemFile;

type DirRef = Arc<Mutex<MemDir>>;

#[derive(Debug, Default)]
struct MemDir {
    current: BTreeMap<String, Node>,
    durable: BTreeMap<String, Node>,
    /// Set by `remove_dir`; handles resolved before the removal see `NotFound`.
    removed: bool,
}

#[derive(Debug, Clone)]
enum Node {
    File(Arc<MemInode>),
    Dir(DirRef),
}

#[derive(Default)]
struct MemInode {
    data: RwLock<FileData>,
}

struct FileData {
    current: Vec<u8>,
    durable: Vec<u8>,
    /// Writes and length changes since the last sync, oldest first: applied to `durable`
    /// they give `current`.
    pending: Vec<PendingWrite>,
    /// Which version of the file `current` is: drawn from [`next_version`] when the inode is
    /// made and at every change of `current`, so no two versions of any file share it (the
    /// exact mark [`Storage::cheap_stamp`] reports).
    version: u64,
}

impl FileData {
    /// A file holding `bytes`, durably.
    fn holding(bytes: Vec<u8>) -> FileData {
        FileData {
            durable: bytes.clone(),
            current: bytes,
            pending: Vec::new(),
            version: next_version(),
        }
    }
}

impl Default for FileData {
    fn default() -> Self {
        FileData::holding(Vec::new())
    }
}

/// A version number no file of any memory storage of this process had before.
fn next_version() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// One change to a file's contents that is not durable yet.
#[derive(Debug, Clone)]
enum PendingWrite {
    Write { offset: usize, data: Vec<u8> },
    SetLen(usize),
}

impl fmt::Debug for MemInode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.data.read();
        f.debug_struct("MemInode")
            .field("len", &d.current.len())
            .field("durable_len", &d.durable.len())
            .field("pending_writes", &d.pending.len())
            .finish()
    }
}

struct MemShared {
    root: Mutex<DirRef>,
    /// A power loss is an instant: every change to the namespace or a file holds this
    /// shared, and a crash image takes it exclusively, so an image never holds one file as
    /// it was before a sync and another as it was after a later one (which a walk file by
    /// file would, with writers on other threads).
    instant: RwLock<()>,
    poison: Poison,
    faults: Option<FaultInjector>,
    stats: IoStats,
}

impl fmt::Debug for MemShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemShared")
            .field("poisoned", &self.poison.is_poisoned())
            .field("faults", &self.faults.is_some())
            .finish_non_exhaustive()
    }
}

/// In-memory storage with power-loss simulation. Clones share the namespace.
#[derive(Debug, Clone)]
pub struct MemoryStorage {
    shared: Arc<MemShared>,
}

impl Default for MemoryStorage {
    fn default() -> Self {
        Self::new()
    }
}

fn os(op: &'static str, path: &str, e: std::io::Error) -> IoError {
    IoError::os(op, path, e)
}

impl MemoryStorage {
    /// An empty namespace.
    pub fn new() -> Self {
        Self::build(Arc::default(), None)
    }

    /// An empty namespace whose operations consult `faults`.
    pub fn with_faults(faults: FaultInjector) -> Self {
        Self::build(Arc::default(), Some(faults))
    }

    fn build(root: DirRef, faults: Option<FaultInjector>) -> Self {
        MemoryStorage {
            shared: Arc::new(MemShared {
                root: Mutex::new(root),
                instant: RwLock::new(()),
                poison: Poison::default(),
                faults,
                stats: IoStats::default(),
            }),
        }
    }

    /// Simulates a power loss followed by a reboot: the namespace keeps only what was durable
    /// (see the module comment), the poison flag clears. Files opened before the crash keep
    /// working on detached contents that no path reaches any more.
    ///
    /// `policy` decides what happens to each write and directory change that was not synced;
    /// the report counts the decisions.
    pub fn crash(&self, policy: CrashPolicy) -> CrashReport {
        let _instant = self.shared.instant.write();
        let root = self.shared.root.lock().clone();
        let (image, report) = crash_image(&root, policy);
        *self.shared.root.lock() = image;
        self.shared.poison.clear();
        report
    }

    /// A new, independent storage holding what would survive a power loss now (no faults,
    /// fresh counters). `self` is unchanged.
    pub fn clone_durable(&self) -> MemoryStorage {
        self.crash_image(CrashPolicy::DropAllUnsynced).0
    }

    /// A new, independent storage holding what a power loss now would leave under `policy`
    /// (no faults, fresh counters), and what the crash did. `self` is unchanged, so one
    /// moment can be crashed many ways.
    pub fn crash_image(&self, policy: CrashPolicy) -> (MemoryStorage, CrashReport) {
        let _instant = self.shared.instant.write();
        let root = self.shared.root.lock().clone();
        let (image, report) = crash_image(&root, policy);
        (Self::build(image, None), report)
    }

    /// Held by every change (see `MemShared::instant`).
    pub(super) fn change(&self) -> parking_lot::RwLockReadGuard<'_, ()> {
        self.shared.instant.read_recursive()
    }

    fn fault(&self, op: FaultOp, name: &'static str, path: &str) -> IoResult<()> {
        faults::check(&self.shared.faults, op).map_err(|e| os(name, path, e))
    }

    /// Consults the injector for a sync; a failure poisons the instance.
    fn sync_fault(&self, name: &'static str, path: &str) -> IoResult<()> {
        self.fault(FaultOp::Sync, name, path)
            .map_err(|e| self.shared.poison.poison(e))
    }

    /// Resolves a directory (`""` is the root).
    fn dir(&self, dir: &str) -> IoResult<DirRef> {
        let mut d = self.shared.root.lock().clone();
        let mut walked = String::new();
        for c in components(dir) {
            if !walked.is_empty() {
                walked.push('/');
            }
            walked.push_str(c);
            let next = {
                let g = d.lock();
                if g.removed {
                    return Err(IoError::NotFound { path: walked });
                }
                match g.current.get(c) {
                    Some(Node::Dir(x)) => x.clone(),
                    Some(Node::File(_)) => {
                        return Err(IoError::errno("resolve", walked, libc::ENOTDIR));
                    }
                    None => return Err(IoError::NotFound { path: walked }),
                }
            };
            d = next;
        }
        if d.lock().removed {
            return Err(IoError::NotFound { path: dir.into() });
        }
        Ok(d)
    }

    fn inode(&self, path: &str) -> IoResult<Arc<MemInode>> {
        path::check_file(path)?;
        let (parent, name) = path::split(path);
        let d = self.dir(parent)?;
        let g = d.lock();
        match g.current.get(name) {
            Some(Node::File(i)) => Ok(i.clone()),
            Some(Node::Dir(_)) => Err(IoError::errno("open", path, libc::EISDIR)),
            None => Err(IoError::NotFound { path: path.into() }),
        }
    }

    /// Shared tail of `write_atomic` and `create_new`: the temporary file is written and
    /// synced (faults consulted in the same order as the local backends), then installed;
    /// the directory is synced after unless `sync_entry` is false (see
    /// [`Storage::write_atomic_entry_unsynced`]).
    fn install(&self, path: &str, bytes: &[u8], replace: bool, sync_entry: bool) -> IoResult<()> {
        let _change = self.change();
        path::check_file(path)?;
        self.shared.poison.check()?;
        let (parent, name) = path::split(path);
        let d = self.dir(parent)?;
        self.fault(FaultOp::Create, "create", path)?;
        self.fault(FaultOp::Write, "write", path)?;
        if bytes.len() as u64 > MAX_MEMORY_FILE_LEN {
            return Err(IoError::errno("write", path, libc::EFBIG));
        }
        self.shared.stats.add_write(bytes.len());
        self.sync_fault("sync", path)?;
        self.shared.stats.add_sync();
        let inode = Arc::new(MemInode {
            data: RwLock::new(FileData::holding(bytes.to_vec())),
        });
        {
            let mut g = d.lock();
            if g.removed {
                return Err(IoError::NotFound {
                    path: parent.into(),
                });
            }
            match g.current.get(name) {
                Some(Node::Dir(_)) => return Err(IoError::errno("rename", path, libc::EISDIR)),
                Some(Node::File(_)) if !replace => {
                    return Err(IoError::AlreadyExists { path: path.into() });
                }
                _ => {}
            }
            self.fault(FaultOp::Rename, "rename", path)?;
            g.current.insert(name.to_string(), Node::File(inode));
        }
        if !sync_entry {
            return Ok(());
        }
        self.sync_fault("sync_dir", parent)?;
        let mut g = d.lock();
        g.durable = g.current.clone();
        self.shared.stats.add_dir_sync();
        Ok(())
    }
}

impl Storage for MemoryStorage {
    fn kind(&self) -> BackendKind {
        BackendKind::Memory
    }

    fn open(&self, path: &str, opts: OpenOptions) -> IoResult<Arc<dyn StorageFile>> {
        let _change = self.change();
        path::check_file(path)?;
        let creating = opts.create || opts.create_new;
        let writable = opts.write || creating;
        if writable {
            self.shared.poison.check()?;
        }
        let (parent, name) = path::split(path);
        let d = self.dir(parent)?;
        if creating {
            self.fault(FaultOp::Create, "open", path)?;
        }
        let inode = {
            let mut g = d.lock();
            match g.current.get(name) {
                Some(Node::Dir(_)) => return Err(IoError::errno("open", path, libc::EISDIR)),
                Some(Node::File(_)) if opts.create_new => {
                    return Err(IoError::AlreadyExists { path: path.into() });
                }
                Some(Node::File(i)) => i.clone(),
                None if creating => {
                    let i = Arc::new(MemInode::default());
                    g.current.insert(name.to_string(), Node::File(i.clone()));
                    i
                }
                None => return Err(IoError::NotFound { path: path.into() }),
            }
        };
        let file = MemFile {
            storage: self.clone(),
            inode,
            path: path.to_string(),
            writable,
        };
        if writable && opts.preallocate > 0 {
            file.preallocate(0, opts.preallocate)?;
        }
        Ok(Arc::new(file))
    }

    fn read_file(&self, path: &str, max_len: u64) -> IoResult<Vec<u8>> {
        let inode = self.inode(path)?;
        self.fault(FaultOp::Read, "read", path)?;
        let data = inode.data.read();
        let len = data.current.len() as u64;
        if len > max_len {
            return Err(IoError::corruption(
                path,
                max_len,
                format!("file is {len} bytes, longer than the limit of {max_len}"),
            ));
        }
        // An injected short read whose rest fails: an error, never the prefix alone.
        if let Some(errno) =
            faults::short_read(&self.shared.faults, data.current.len()).and_then(|c| c.then_errno)
        {
            return Err(IoError::errno("read", path, errno));
        }
        self.shared.stats.add_read(data.current.len());
        Ok(data.current.clone())
    }

    fn write_atomic(&self, path: &str, bytes: &[u8]) -> IoResult<()> {
        self.install(path, bytes, true, true)
    }

    fn write_atomic_entry_unsynced(&self, path: &str, bytes: &[u8]) -> IoResult<()> {
        self.install(path, bytes, true, false)
    }

    fn create_new(&self, path: &str, bytes: &[u8]) -> IoResult<()> {
        self.install(path, bytes, false, true)
    }

    fn delete(&self, path: &str) -> IoResult<()> {
        let _change = self.change();
        path::check_file(path)?;
        self.shared.poison.check()?;
        self.fault(FaultOp::Delete, "delete", path)?;
        let (parent, name) = path::split(path);
        let d = match self.dir(parent) {
            Ok(d) => d,
            Err(e) if e.kind() == crate::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut g = d.lock();
        match g.current.get(name) {
            Some(Node::Dir(_)) => Err(IoError::errno("delete", path, libc::EISDIR)),
            Some(Node::File(_)) => {
                g.current.remove(name);
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn list(&self, dir: &str) -> IoResult<Vec<String>> {
        path::check_dir(dir)?;
        let d = match self.dir(dir) {
            Ok(d) => d,
            Err(e) if e.kind() == crate::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let g = d.lock();
        Ok(g.current
            .iter()
            .filter(|(_, n)| matches!(n, Node::File(_)))
            .map(|(name, _)| name.clone())
            .collect())
    }

    fn list_dirs(&self) -> IoResult<Vec<String>> {
        let d = self.dir("")?;
        let g = d.lock();
        Ok(g.current
            .iter()
            .filter(|(_, n)| matches!(n, Node::Dir(_)))
            .map(|(name, _)| name.clone())
            .collect())
    }

    fn create_dir(&self, dir: &str) -> IoResult<()> {
        let _change = self.change();
        path::check_dir(dir)?;
        if dir.is_empty() {
            return Ok(());
        }
        self.shared.poison.check()?;
        self.fault(FaultOp::Create, "create_dir", dir)?;
        let mut d = self.dir("")?;
        let mut walked = String::new();
        for c in components(dir) {
            let next = {
                let mut g = d.lock();
                let next = match g.current.get(c) {
                    Some(Node::Dir(x)) => x.clone(),
                    Some(Node::File(_)) => {
                        return Err(IoError::errno("create_dir", dir, libc::ENOTDIR));
                    }
                    None => {
                        let x = DirRef::default();
                        g.current.insert(c.to_string(), Node::Dir(x.clone()));
                        x
                    }
                };
                drop(g);
                // The parent is synced so the new entry survives a crash.
                self.sync_fault("sync_dir", &walked)?;
                let mut g = d.lock();
                g.durable = g.current.clone();
                self.shared.stats.add_dir_sync();
                next
            };
            if !walked.is_empty() {
                walked.push('/');
            }
            walked.push_str(c);
            d = next;
        }
        Ok(())
    }

    fn remove_dir(&self, dir: &str) -> IoResult<()> {
        let _change = self.change();
        path::check_dir(dir)?;
        if dir.is_empty() {
            return Err(IoError::InvalidArgument {
                what: "cannot remove the root directory".into(),
            });
        }
        self.shared.poison.check()?;
        self.fault(FaultOp::Delete, "remove_dir", dir)?;
        let (parent, name) = path::split(dir);
        let p = match self.dir(parent) {
            Ok(d) => d,
            Err(e) if e.kind() == crate::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut g = p.lock();
        match g.current.get(name) {
            Some(Node::Dir(x)) => {
                let mut child = x.lock();
                if !child.current.is_empty() {
                    return Err(IoError::errno("remove_dir", dir, libc::ENOTEMPTY));
                }
                child.removed = true;
                drop(child);
                g.current.remove(name);
                Ok(())
            }
            Some(Node::File(_)) => Err(IoError::errno("remove_dir", dir, libc::ENOTDIR)),
            None => Ok(()),
        }
    }

    fn sync_dir(&self, dir: &str) -> IoResult<()> {
        let _change = self.change();
        path::check_dir(dir)?;
        self.shared.poison.check()?;
        let d = self.dir(dir)?;
        self.sync_fault("sync_dir", dir)?;
        let mut g = d.lock();
        g.durable = g.current.clone();
        self.shared.stats.add_dir_sync();
        Ok(())
    }

    fn file_len(&self, path: &str) -> IoResult<u64> {
        Ok(self.inode(path)?.data.read().current.len() as u64)
    }

    /// Exact: every change of a file's contents draws a new version number.
    fn cheap_stamp(&self, path: &str) -> IoResult<Option<FileStamp>> {
        let inode = self.inode(path)?;
        let data = inode.data.read();
        Ok(Some(FileStamp::new(
            data.current.len() as u64,
            [data.version, 0, 0, 0],
        )))
    }

    fn stats(&self) -> &IoStats {
        &self.shared.stats
    }
}
