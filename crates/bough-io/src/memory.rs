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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::error::{IoError, IoResult};
use crate::faults::{self, FaultInjector, FaultOp};
use crate::path::{self, components};
use crate::stats::{IoStats, Poison};
use crate::storage::{BackendKind, OpenOptions, Storage, StorageFile};

/// Largest file the memory backend holds (larger writes fail with `EFBIG`), so a wild offset
/// never turns into a huge allocation.
pub const MAX_MEMORY_FILE_LEN: u64 = 1 << 32;

/// The unit a torn write is torn at: each 512-byte sector of an unsynced write is either
/// entirely new or entirely old.
pub const SECTOR_SIZE: u64 = 512;

/// What a simulated power loss keeps of the writes that were not synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CrashPolicy {
    /// Every unsynced write, and every unsynced directory change, is lost.
    #[default]
    DropAllUnsynced,
    /// Every unsynced write and directory change reached the media: what a process crash
    /// (the OS page cache survives) or a lucky power loss leaves.
    KeepAllUnsynced,
    /// Each unsynced write is independently kept, dropped, torn or garbled, and each
    /// unsynced directory change kept or undone, as a seeded generator draws them.
    Random(RandomCrash),
}

/// The odds of [`CrashPolicy::Random`]. Weights are relative: `keep = 1, drop = 1, tear = 0,
/// garble = 0` keeps half of the unsynced writes and drops the other half.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RandomCrash {
    /// Seed of the generator: one seed, one crash image (for the same namespace).
    pub seed: u64,
    /// Weight of "the write reached the media in full".
    pub keep: u32,
    /// Weight of "the write never reached the media".
    pub drop: u32,
    /// Weight of "each [`SECTOR_SIZE`] sector of the write is new or old at random".
    pub tear: u32,
    /// Weight of "the write's range holds random bytes".
    pub garble: u32,
    /// Percent (0..=100) of unsynced directory changes (creates, deletes, removals) that
    /// survive.
    pub dir_keep_percent: u8,
}

impl RandomCrash {
    /// Equal odds for keep, drop, tear and garble; half the directory changes survive.
    pub fn new(seed: u64) -> Self {
        RandomCrash {
            seed,
            keep: 1,
            drop: 1,
            tear: 1,
            garble: 1,
            dir_keep_percent: 50,
        }
    }

    /// Sets the relative weights of keep, drop, tear and garble (all zero means keep).
    pub fn weights(mut self, keep: u32, drop: u32, tear: u32, garble: u32) -> Self {
        self.keep = keep;
        self.drop = drop;
        self.tear = tear;
        self.garble = garble;
        self
    }

    /// Sets the percentage of unsynced directory changes that survive (capped at 100).
    pub fn dir_keep_percent(mut self, percent: u8) -> Self {
        self.dir_keep_percent = percent.min(100);
        self
    }
}

/// What a simulated power loss did to the unsynced state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// Unsynced writes (and length changes) that reached the media in full.
    pub writes_kept: u64,
    /// Unsynced writes that were lost.
    pub writes_dropped: u64,
    /// Unsynced writes torn at sector boundaries.
    pub writes_torn: u64,
    /// Unsynced writes replaced by random bytes.
    pub writes_garbled: u64,
    /// Unsynced directory changes that survived.
    pub dir_changes_kept: u64,
    /// Unsynced directory changes that were undone.
    pub dir_changes_dropped: u64,
}

impl CrashReport {
    /// Unsynced writes the crash decided about.
    pub fn unsynced_writes(&self) -> u64 {
        self.writes_kept + self.writes_dropped + self.writes_torn + self.writes_garbled
    }

    /// Adds another report's counts to this one.
    pub fn add(&mut self, other: &CrashReport) {
        self.writes_kept += other.writes_kept;
        self.writes_dropped += other.writes_dropped;
        self.writes_torn += other.writes_torn;
        self.writes_garbled += other.writes_garbled;
        self.dir_changes_kept += other.dir_changes_kept;
        self.dir_changes_dropped += other.dir_changes_dropped;
    }
}

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

#[derive(Default)]
struct FileData {
    current: Vec<u8>,
    durable: Vec<u8>,
    /// Writes and length changes since the last sync, oldest first: applied to `durable`
    /// they give `current`.
    pending: Vec<PendingWrite>,
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
        let root = self.shared.root.lock().clone();
        let (image, report) = crash_image(&root, policy);
        (Self::build(image, None), report)
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
    /// synced (faults consulted in the same order as the local backends), then installed.
    fn install(&self, path: &str, bytes: &[u8], replace: bool) -> IoResult<()> {
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
            data: RwLock::new(FileData {
                current: bytes.to_vec(),
                durable: bytes.to_vec(),
                pending: Vec::new(),
            }),
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
        self.sync_fault("sync_dir", parent)?;
        let mut g = d.lock();
        g.durable = g.current.clone();
        self.shared.stats.add_dir_sync();
        Ok(())
    }
}

/// The namespace a power loss now would leave under `policy`.
fn crash_image(root: &DirRef, policy: CrashPolicy) -> (DirRef, CrashReport) {
    let mut crash = Crash {
        policy,
        rng: SplitMix(match policy {
            CrashPolicy::Random(r) => r.seed,
            _ => 0,
        }),
        report: CrashReport::default(),
        done: HashMap::new(),
    };
    let image = crash.dir(root);
    (image, crash.report)
}

/// One simulated power loss being decided, directory by directory (in name order, so a seed
/// always gives the same image of the same namespace).
struct Crash {
    policy: CrashPolicy,
    rng: SplitMix,
    report: CrashReport,
    /// Files already decided (by inode), so a file reached twice gets one fate.
    done: HashMap<usize, Arc<MemInode>>,
}

/// What happens to one unsynced write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Keep,
    Drop,
    Tear,
    Garble,
}

impl Crash {
    fn keeps_dir_change(&mut self) -> bool {
        let keep = match self.policy {
            CrashPolicy::DropAllUnsynced => false,
            CrashPolicy::KeepAllUnsynced => true,
            CrashPolicy::Random(r) => self.rng.below(100) < u64::from(r.dir_keep_percent),
        };
        if keep {
            self.report.dir_changes_kept += 1;
        } else {
            self.report.dir_changes_dropped += 1;
        }
        keep
    }

    fn fate(&mut self) -> Fate {
        let fate = match self.policy {
            CrashPolicy::DropAllUnsynced => Fate::Drop,
            CrashPolicy::KeepAllUnsynced => Fate::Keep,
            CrashPolicy::Random(r) => {
                let weights = [
                    (Fate::Keep, r.keep),
                    (Fate::Drop, r.drop),
                    (Fate::Tear, r.tear),
                    (Fate::Garble, r.garble),
                ];
                let total: u64 = weights.iter().map(|(_, w)| u64::from(*w)).sum();
                if total == 0 {
                    Fate::Keep
                } else {
                    let mut pick = self.rng.below(total);
                    let mut chosen = Fate::Keep;
                    for (f, w) in weights {
                        if pick < u64::from(w) {
                            chosen = f;
                            break;
                        }
                        pick -= u64::from(w);
                    }
                    chosen
                }
            }
        };
        match fate {
            Fate::Keep => self.report.writes_kept += 1,
            Fate::Drop => self.report.writes_dropped += 1,
            Fate::Tear => self.report.writes_torn += 1,
            Fate::Garble => self.report.writes_garbled += 1,
        }
        fate
    }

    fn dir(&mut self, dir: &DirRef) -> DirRef {
        let g = dir.lock();
        let names: BTreeSet<&String> = g.current.keys().chain(g.durable.keys()).collect();
        let mut entries = BTreeMap::new();
        for name in names {
            let (current, durable) = (g.current.get(name), g.durable.get(name));
            let chosen = match (current, durable) {
                (Some(c), Some(d)) if same_node(c, d) => Some(c),
                _ if self.keeps_dir_change() => current,
                _ => durable,
            };
            let node = match chosen {
                Some(Node::File(inode)) => Node::File(self.file(inode)),
                Some(Node::Dir(d)) => Node::Dir(self.dir(d)),
                None => continue,
            };
            entries.insert(name.clone(), node);
        }
        Arc::new(Mutex::new(MemDir {
            current: entries.clone(),
            durable: entries,
            removed: false,
        }))
    }

    fn file(&mut self, inode: &Arc<MemInode>) -> Arc<MemInode> {
        let key = Arc::as_ptr(inode) as usize;
        if let Some(done) = self.done.get(&key) {
            return done.clone();
        }
        let data = inode.data.read();
        let mut bytes = data.durable.clone();
        for w in &data.pending {
            let fate = self.fate();
            match (w, fate) {
                (_, Fate::Drop) => {}
                (PendingWrite::SetLen(len), _) => bytes.resize(*len, 0),
                (PendingWrite::Write { offset, data }, Fate::Keep) => {
                    put(&mut bytes, *offset, data);
                }
                (PendingWrite::Write { offset, data }, Fate::Tear) => {
                    let end = offset + data.len();
                    let mut start = *offset;
                    while start < end {
                        let sector_end = ((start as u64 / SECTOR_SIZE + 1) * SECTOR_SIZE) as usize;
                        let stop = sector_end.min(end);
                        if bytes.len() < stop {
                            bytes.resize(stop, 0);
                        }
                        if self.rng.below(2) == 0 {
                            bytes[start..stop]
                                .copy_from_slice(&data[start - offset..stop - offset]);
                        }
                        start = stop;
                    }
                }
                (PendingWrite::Write { offset, data }, Fate::Garble) => {
                    let garbage: Vec<u8> = (0..data.len()).map(|_| self.rng.next() as u8).collect();
                    put(&mut bytes, *offset, &garbage);
                }
            }
        }
        drop(data);
        let out = Arc::new(MemInode {
            data: RwLock::new(FileData {
                current: bytes.clone(),
                durable: bytes,
                pending: Vec::new(),
            }),
        });
        self.done.insert(key, out.clone());
        out
    }
}

fn same_node(a: &Node, b: &Node) -> bool {
    match (a, b) {
        (Node::File(x), Node::File(y)) => Arc::ptr_eq(x, y),
        (Node::Dir(x), Node::Dir(y)) => Arc::ptr_eq(x, y),
        _ => false,
    }
}

/// Writes `data` at `offset`, growing `bytes` with zeros as needed.
fn put(bytes: &mut Vec<u8>, offset: usize, data: &[u8]) {
    let end = offset + data.len();
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    bytes[offset..end].copy_from_slice(data);
}

/// SplitMix64: small, seedable, good enough to draw crash outcomes.
#[derive(Debug, Clone)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

impl Storage for MemoryStorage {
    fn kind(&self) -> BackendKind {
        BackendKind::Memory
    }

    fn open(&self, path: &str, opts: OpenOptions) -> IoResult<Arc<dyn StorageFile>> {
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
        self.install(path, bytes, true)
    }

    fn create_new(&self, path: &str, bytes: &[u8]) -> IoResult<()> {
        self.install(path, bytes, false)
    }

    fn delete(&self, path: &str) -> IoResult<()> {
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

    fn stats(&self) -> &IoStats {
        &self.shared.stats
    }
}

/// An open file of a [`MemoryStorage`].
#[derive(Debug)]
struct MemFile {
    storage: MemoryStorage,
    inode: Arc<MemInode>,
    path: String,
    writable: bool,
}

impl MemFile {
    fn writable(&self, op: &'static str) -> IoResult<()> {
        if !self.writable {
            return Err(IoError::errno(op, &self.path, libc::EBADF));
        }
        self.storage.shared.poison.check()
    }

    fn end(&self, op: &'static str, offset: u64, len: usize) -> IoResult<usize> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= MAX_MEMORY_FILE_LEN => Ok(end as usize),
            _ => Err(IoError::errno(op, &self.path, libc::EFBIG)),
        }
    }
}

impl StorageFile for MemFile {
    fn path(&self) -> &str {
        &self.path
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> IoResult<()> {
        self.storage.fault(FaultOp::Read, "read", &self.path)?;
        let cut = faults::short_read(&self.storage.shared.faults, buf.len());
        let data = self.inode.data.read();
        let src = usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(buf.len())?))
            .and_then(|range| data.current.get(range))
            .ok_or_else(|| IoError::unexpected_eof(&self.path))?;
        // An injected short read: the first transfer delivers a prefix, then the rest is
        // read again (or fails, as the plan says) — like the local backends do.
        let prefix = cut.map_or(0, |c| c.prefix.min(buf.len()));
        buf[..prefix].copy_from_slice(&src[..prefix]);
        if let Some(errno) = cut.and_then(|c| c.then_errno) {
            return Err(IoError::errno("read", &self.path, errno));
        }
        buf[prefix..].copy_from_slice(&src[prefix..]);
        self.storage.shared.stats.add_read(buf.len());
        Ok(())
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> IoResult<()> {
        self.writable("write")?;
        self.storage.fault(FaultOp::Write, "write", &self.path)?;
        let start = self.end("write", offset, buf.len())? - buf.len();
        let short = self
            .storage
            .shared
            .faults
            .as_ref()
            .and_then(|f| f.take_short_write(buf.len()));
        let buf = match short {
            Some(n) => &buf[..n],
            None => buf,
        };
        let end = start + buf.len();
        let mut data = self.inode.data.write();
        if data.current.len() < end {
            data.current.resize(end, 0);
        }
        data.current[start..end].copy_from_slice(buf);
        data.pending.push(PendingWrite::Write {
            offset: start,
            data: buf.to_vec(),
        });
        if short.is_some() {
            return Err(IoError::errno("write", &self.path, libc::EIO));
        }
        self.storage.shared.stats.add_write(buf.len());
        Ok(())
    }

    fn sync(&self) -> IoResult<()> {
        self.storage.shared.poison.check()?;
        self.storage.sync_fault("sync", &self.path)?;
        let mut data = self.inode.data.write();
        let FileData {
            current,
            durable,
            pending,
        } = &mut *data;
        durable.clone_from(current);
        pending.clear();
        self.storage.shared.stats.add_sync();
        Ok(())
    }

    fn len(&self) -> IoResult<u64> {
        Ok(self.inode.data.read().current.len() as u64)
    }

    fn set_len(&self, len: u64) -> IoResult<()> {
        self.writable("set_len")?;
        self.storage.fault(FaultOp::Write, "set_len", &self.path)?;
        let len = self.end("set_len", len, 0)?;
        let mut data = self.inode.data.write();
        data.current.resize(len, 0);
        data.pending.push(PendingWrite::SetLen(len));
        Ok(())
    }

    fn preallocate(&self, offset: u64, len: u64) -> IoResult<()> {
        self.writable("preallocate")?;
        self.storage
            .fault(FaultOp::Write, "preallocate", &self.path)?;
        // Nothing to reserve in memory; only the range is checked.
        match offset.checked_add(len) {
            Some(end) if end <= MAX_MEMORY_FILE_LEN => Ok(()),
            _ => Err(IoError::errno("preallocate", &self.path, libc::EFBIG)),
        }
    }
}
