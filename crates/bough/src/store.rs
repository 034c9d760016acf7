//! The store: partitions spread over writer shards, one write queue per (partition,
//! branch), readers on immutable snapshots.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use bough_catalog::{
    BranchInfo, MergeOptions, MergeReport, Partition, RehomeOptions, RehomeReport,
};
use bough_gc::{GcReport, Pins, Usage};
use bough_io::{
    BackendChoice, DirLock, IoStatsSnapshot, LocalOptions, Storage, lock_dir_wait, open_local_with,
};
use bough_names::ArchiveName;
use bough_names::{BranchName, PartitionDir, PartitionId, TableName, classify_dir};
use bough_tree::btree::{self, Mutation, Op};
use bough_tree::cache::PageCache;
use bough_tree::diff::Change;
use bough_tree::head::{CheckpointNotice, Head, HeadConfig, Published, TreeSnapshot};
use bough_tree::page::leaf::{Entry, ValueLoc};
use parking_lot::Mutex;

use crate::batch::{WriteBatch, check_key};
use crate::builder::{Components, StoreBuilder};
use crate::clock::Clock;
use crate::error::{Error, ErrorKind, Result};
use crate::oneshot;
use crate::options::{Backend, Durability, Options};
pub(crate) use branch_entry::BranchEntry;
use branch_entry::new_branch_entry;
pub use repair::RepairReport;
pub use stats::WriteBufferUsage;

mod activity;
mod branch;
mod branch_entry;
mod check;
mod durability;
mod fork_shares;
mod gc;
mod history;
mod idle_branches;
mod lifetime;
mod maintenance;
mod partition;
mod pick;
mod policy;
mod range;
mod read_ahead;
mod read_only;
mod read_view;
mod readers;
mod registry;
mod repair;
mod request;
mod results;
mod shard;
mod staging;
mod stats;
mod table;
mod tags;
mod visit;
mod wake;
mod writer_ops;

pub use branch::Branch;
use gc::*;
pub use maintenance::CompactionReport;
use maintenance::*;
pub use partition::PartitionHandle;
pub use pick::StateRef;
pub use policy::BranchPolicy;
use policy::PolicyChange;
pub use range::RangeIter;
use read_view::ReadAt;
pub use read_view::ReadView;
pub use registry::RegistryStatus;
pub(crate) use registry::check_records as check_table_ops;
use request::*;
pub use results::{DiffChange, DiffEntry, KeyValue, ScanOptions, ScanPage, Value, WriteReport};
use shard::*;
pub use table::Table;
use tags::Named;
pub use tags::TagInfo;
use wake::Woken;
use writer_ops::*;

/// A batch waiting in a group commit: its mutations, whether it waits for its log
/// record's sync (`Durability::Sync`), and its waiter.
type Pending = (Vec<Mutation>, bool, Reply<()>);

#[derive(Debug)]
struct PartitionEntry {
    part: Partition,
    branches: Mutex<HashMap<BranchName, Arc<BranchEntry>>>,
    /// Serializes catalog changes (create, delete, new term, restore) and GC of the partition.
    catalog: Mutex<()>,
    /// Snapshot slots of deleted branches: readers may still hold their snapshots, which no
    /// manifest protects any more, so GC pins them until the last reader lets go.
    retired: Mutex<Vec<Arc<Published>>>,
    /// Bumped by every change that can add a durable referent of existing data files
    /// (branch created, deleted, restored or moved to a new term, archive written, merge,
    /// reset): a [`Usage`] measured before it may miss a holder.
    epoch: AtomicU64,
    /// The last measured usage and the epoch it was measured at (see [`usage_of`]).
    usage: Mutex<Option<(u64, Arc<Usage>)>>,
    /// The decoded states GC's walks read, kept for the next walk: a cycle reads only the
    /// state files that changed since the last (see `bough_gc::StateCache`).
    gc_states: bough_gc::StateCache,
    /// States read from tags ([`PartitionHandle::tag`]): no manifest protects them once the
    /// tag is deleted, so GC pins them until the last reader lets go.
    tag_views: Mutex<Vec<Weak<TreeSnapshot>>>,
    /// Staging branches of interrupted commands removed when the partition was opened:
    /// (branch, what it staged).
    staging_removed: Vec<(String, String)>,
}

impl PartitionEntry {
    /// Takes the catalog lock for a change of the partition's branches, archives or merge
    /// bases, marking any cached usage stale.
    fn catalog_change(&self) -> parking_lot::MutexGuard<'_, ()> {
        let guard = self.catalog.lock();
        self.epoch.fetch_add(1, Ordering::AcqRel);
        guard
    }
}

#[derive(Debug)]
struct Inner {
    opts: Options,
    storage: Arc<dyn Storage>,
    /// The cloud tier behind `storage` (`backend = "object"`), for its GC leases.
    cloud: Option<bough_object::CloudStorage>,
    cache: Arc<PageCache>,
    clock: Arc<dyn Clock>,
    /// The branch registry: table-wide operations in flight.
    registry: registry::Registry,
    head_cfg: HeadConfig,
    partitions: Mutex<HashMap<String, Arc<PartitionEntry>>>,
    shards: Vec<shard::ShardQueue>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    closed: AtomicBool,
    lock: Mutex<Option<DirLock>>,
    /// Wakes the maintenance thread: closing, or a large checkpoint's garbage to collect.
    wake: Arc<wake::Wake>,
    /// Opened with [`Store::open_read_only`]: nothing is written, every change is refused.
    read_only: bool,
    /// Threads for async reads that need storage.
    readers: readers::Readers,
    /// Held while a maintenance pass runs; shutting down waits for it (`lifetime.rs`).
    maintaining: Mutex<()>,
}

/// An open store. Cheap to clone; every clone is the same store.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let main = store.partition("orders", 0)?.branch("main")?;
/// main.put_blocking("order-1", "pending")?;
/// // A clone is the same store.
/// let same = store.clone();
/// let again = same.partition("orders", 0)?.branch("main")?;
/// assert_eq!(again.get_blocking("order-1")?.unwrap().value, b"pending");
/// store.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
    /// Shared by every handle a caller holds, never by the store's own threads: the last
    /// one to go shuts the store down on the caller's thread (`lifetime.rs`).
    _caller: Option<Arc<lifetime::CallerHold>>,
}

impl Store {
    /// Opens (creating if needed) the store `opts` describes: its settings ([`Options`]),
    /// or a [`StoreBuilder`] that also brings components (a clock, a memory or object store).
    ///
    /// ```
    /// use bough::{Options, Store};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let store = Store::open(Options::new(dir.path()))?;
    /// store.partition("orders", 0)?.branch("main")?.put_blocking("k", "v")?;
    /// store.close()?;
    /// let store = Store::open(Options::new(dir.path()))?;
    /// assert!(store.partition("orders", 0)?.branch("main")?.get_blocking("k")?.is_some());
    /// # Ok::<(), bough::Error>(())
    /// ```
    pub fn open(opts: impl Into<StoreBuilder>) -> Result<Store> {
        opts.into().open()
    }

    /// [`open`](Self::open) of validated settings with their components.
    pub(crate) fn open_with(opts: Options, parts: Components) -> Result<Store> {
        let mut cloud = None;
        let (storage, lock): (Arc<dyn Storage>, Option<DirLock>) = match opts.backend {
            Backend::Memory => {
                let mem = parts.memory.clone().unwrap_or_default();
                (Arc::new(mem) as Arc<dyn Storage>, None)
            }
            b => {
                let path = opts
                    .path
                    .clone()
                    .ok_or_else(|| Error::invalid("option `path`: required"))?;
                std::fs::create_dir_all(&path).map_err(|e| {
                    Error::new(
                        ErrorKind::Io,
                        format!("cannot create {}: {e}", path.display()),
                    )
                })?;
                // A second writing process on the same directory would corrupt it: wait for
                // the first to close it (as long as the options allow), then refuse clearly.
                let wait = Duration::from_millis(opts.lock_wait_ms);
                let lock =
                    lock_dir_wait(&path, wait).map_err(|e| Error::from(e).at(path.display()))?;
                if b == Backend::Object {
                    let (storage, c) = crate::cloud::open_storage(&opts, &parts, &path)?;
                    cloud = Some(c);
                    (storage, Some(lock))
                } else {
                    let choice = match b {
                        Backend::IoUring => BackendChoice::IoUring,
                        Backend::Pread => BackendChoice::Pread,
                        _ => BackendChoice::Auto,
                    };
                    let local = LocalOptions {
                        backend: choice,
                        faults: parts.faults.clone(),
                    };
                    (open_local_with(&path, local)?, Some(lock))
                }
            }
        };
        let store = Store::start(opts, parts.clock, storage, cloud, lock, false)?;
        // Table-wide operations a crash interrupted are finished before anything else runs.
        store.resolve_table_ops()?;
        Ok(store)
    }

    /// Starts the store over opened storage: shard threads, and the maintenance thread
    /// unless `read_only`.
    pub(crate) fn start(
        opts: Options,
        clock: Arc<dyn Clock>,
        storage: Arc<dyn Storage>,
        cloud: Option<bough_object::CloudStorage>,
        lock: Option<DirLock>,
        read_only: bool,
    ) -> Result<Store> {
        tracing::info!(backend = %storage.kind(), read_only, "store opened");
        let wake = Arc::new(wake::Wake::default());
        let maintained = opts.maintenance_interval_ms > 0 && !read_only;
        let head_cfg = HeadConfig {
            page_size: opts.page_size,
            file_pages: (opts.data_file_size / u64::from(opts.page_size)) as u32,
            preallocate: opts.data_file_size,
            checkpoint_chunks: opts.checkpoint_chunks,
            manifest_rewrite_bytes: opts.manifest_rewrite_bytes,
            file_per_commit: false,
            write_buffer_bytes: usize::try_from(opts.write_buffer_bytes).unwrap_or(usize::MAX),
            log: bough_tree::wal::LogConfig {
                file_bytes: opts.log_file_bytes,
                ..bough_tree::wal::LogConfig::default()
            },
            buffer_budget: Some(Arc::new(bough_tree::buffer::BufferBudget::new(match opts
                .write_buffer_total_bytes
            {
                0 => usize::MAX,
                n => usize::try_from(n).unwrap_or(usize::MAX),
            }))),
            history: opts.history_window_ms > 0,
            background_checkpoints: opts.background_checkpoints,
            checkpoint_notice: maintained.then(|| {
                let wake = wake.clone();
                CheckpointNotice::new(move |dir, branch| wake.checkpointed(dir, branch))
            }),
        };
        let head_cfg = crate::cloud::head_config(&opts, head_cfg);
        let mut shards = Vec::new();
        let mut threads = Vec::new();
        for i in 0..opts.shards {
            let (queue, rx, in_service) = shard::ShardQueue::new();
            shards.push(queue);
            let ctx = ShardContext {
                clock: clock.clone(),
                max_group: opts.max_group_commit,
                shards: opts.shards,
                in_service,
            };
            threads.push(
                std::thread::Builder::new()
                    .name(format!("bough-shard-{i}"))
                    .spawn(move || shard_loop(rx, ctx))
                    .map_err(|e| Error::new(ErrorKind::Io, format!("cannot start a shard: {e}")))?,
            );
        }
        let inner = Arc::new(Inner {
            cache: Arc::new(PageCache::with_structure_budget(
                opts.cache_bytes as usize,
                opts.structure_cache_bytes as usize,
            )),
            clock,
            registry: registry::Registry::default(),
            head_cfg,
            storage,
            cloud,
            partitions: Mutex::new(HashMap::new()),
            shards,
            threads: Mutex::new(threads),
            closed: AtomicBool::new(false),
            lock: Mutex::new(lock),
            wake,
            read_only,
            readers: readers::Readers::default(),
            maintaining: Mutex::new(()),
            opts,
        });
        if maintained {
            start_maintenance(&inner);
        }
        Ok(Store::for_caller(inner))
    }

    /// Which backend serves the store (`io_uring`, `pread` or `memory`).
    pub fn backend(&self) -> bough_io::BackendKind {
        self.inner.storage.kind()
    }

    /// Branch heads currently open (replayed and held in memory).
    pub fn open_branch_count(&self) -> usize {
        self.inner
            .partitions
            .lock()
            .values()
            .map(|p| p.branches.lock().len())
            .sum()
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// A partition of a table. No I/O happens until a branch of it is opened.
    pub fn partition(&self, table: &str, partition: PartitionId) -> Result<PartitionHandle> {
        let table = TableName::new(table)?;
        Ok(PartitionHandle {
            store: self.clone(),
            dir: PartitionDir::new(table, partition),
        })
    }

    /// The partitions of a table that exist in the store ([`Table::partitions`]).
    pub(crate) fn partitions_of(&self, table: &str) -> Result<Vec<PartitionId>> {
        let table = TableName::new(table)?;
        let mut out: Vec<PartitionId> = self
            .inner
            .storage
            .list_dirs()?
            .iter()
            .filter_map(|d| classify_dir(d))
            .filter(|p| p.table == table)
            .map(|p| p.partition)
            .collect();
        out.sort_unstable();
        Ok(out)
    }

    /// Removes every key of `branch` on every partition of `table`; other branches keep
    /// theirs ([`Table::truncate_branch`]). Each partition is truncated in bounded pieces,
    /// one after the other (see [`Branch::truncate`]): a crash midway leaves the partitions
    /// before it emptied, the one it was in with a prefix of its keys removed, and the rest
    /// untouched.
    pub(crate) fn drop_table_branch(&self, table: &str, branch: &str) -> Result<()> {
        for p in self.partitions_of(table)? {
            self.partition(table, p)?
                .branch(branch)?
                .truncate_blocking([])?;
        }
        Ok(())
    }

    /// Stops the writers and releases the directory. Later calls on any handle fail with
    /// `Closed`.
    pub fn close(&self) -> Result<()> {
        self.inner.shutdown();
        Ok(())
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::closed());
        }
        Ok(())
    }

    fn partition_entry(&self, dir: &PartitionDir) -> Result<Arc<PartitionEntry>> {
        self.partition_entry_with(dir, true)
    }

    /// The open partition `dir`; a partition not yet on storage is created only if `create`
    /// (otherwise `NotFound`).
    fn partition_entry_with(
        &self,
        dir: &PartitionDir,
        create: bool,
    ) -> Result<Arc<PartitionEntry>> {
        self.check_open()?;
        let key = dir.to_string();
        let mut parts = self.inner.partitions.lock();
        if let Some(p) = parts.get(&key) {
            return Ok(p.clone());
        }
        let mut part = if self.inner.read_only {
            Partition::open_read_only(
                self.inner.storage.clone(),
                dir.clone(),
                self.inner.head_cfg.clone(),
                self.inner.cache.clone(),
                self.inner.opts.cache_data_pages,
            )
        } else {
            Partition::open(
                self.inner.storage.clone(),
                dir.clone(),
                self.inner.head_cfg.clone(),
                self.inner.cache.clone(),
                self.inner.opts.cache_data_pages,
                create,
            )
        }
        .map_err(|e| Error::from(e).at(dir))?;
        if self.inner.opts.backend == Backend::Object {
            let clock = self.inner.clock.clone();
            part.set_take_over_on_open(Arc::new(move || clock.now_ms()));
        }
        let staging_removed = if self.inner.read_only || self.inner.opts.backend == Backend::Object
        {
            Vec::new()
        } else {
            staging::remove_interrupted(&part)
        };
        // Branches whose expiry passed while no process had the partition open.
        if !self.inner.read_only && self.inner.opts.backend != Backend::Object {
            policy::expire_at_open(&part, self.inner.clock.now_ms());
        }
        let entry = Arc::new(PartitionEntry {
            part,
            branches: Mutex::new(HashMap::new()),
            catalog: Mutex::new(()),
            retired: Mutex::new(Vec::new()),
            epoch: AtomicU64::new(0),
            usage: Mutex::new(None),
            gc_states: bough_gc::StateCache::default(),
            tag_views: Mutex::new(Vec::new()),
            staging_removed,
        });
        parts.insert(key, entry.clone());
        read_ahead::after_partition_open(&self.inner, &entry);
        Ok(entry)
    }

    fn branch_entry(&self, dir: &PartitionDir, branch: &BranchName) -> Result<Arc<BranchEntry>> {
        let label = format!("{dir}@{branch}");
        // Only `main` brings a partition into existence; looking up another branch of a
        // partition that does not exist creates nothing.
        let p = self
            .partition_entry_with(dir, branch.is_main())
            .map_err(|e| match e.kind() {
                ErrorKind::NotFound => Error::new(
                    ErrorKind::NotFound,
                    format!("no such branch: partition {dir} does not exist"),
                )
                .at(&label),
                _ => e,
            })?;
        let mut branches = p.branches.lock();
        if let Some(b) = branches.get(branch) {
            return Ok(b.clone());
        }
        let mut head = p
            .part
            .open_head(branch)
            .map_err(|e| Error::from(e).at(&label))?;
        // Bases of deleted branches are normally dropped when the branch is deleted; one a
        // crash (or a failure) left behind goes the first time its head opens again, before
        // any merge can see it or the name can be reused by a branch this base is not about.
        // (A reader leaves that to the writer: merges, which use bases, are writes.)
        if !self.inner.read_only {
            p.part
                .prune_merge_bases(&mut head, self.inner.clock.now_ms())
                .map_err(|e| Error::from(e).at(&label))?;
        }
        let entry = self.register(head, dir);
        branches.insert(branch.clone(), entry.clone());
        drop(branches);
        self.evict_idle_branches();
        read_ahead::after_branch_open(&self.inner, &entry);
        Ok(entry)
    }

    fn register(&self, head: Head, dir: &PartitionDir) -> Arc<BranchEntry> {
        new_branch_entry(head, dir, self.inner.shards.len())
    }

    fn submit(&self, request: Request, shard: usize) -> Result<()> {
        self.check_open()?;
        self.check_writable()?;
        // Shard numbers are assigned modulo the shard count when a branch is registered.
        let queue = self.inner.shards.get(shard).ok_or_else(Error::closed)?;
        if !queue.send(request) {
            return Err(Error::closed());
        }
        Ok(())
    }

    /// Commits `muts` to `branch` on the calling thread if its shard has nothing queued
    /// or in service (see `shard.rs`); `Err(muts)`: it has, so the write must queue.
    fn commit_if_idle(
        &self,
        branch: &BranchEntry,
        muts: Vec<Mutation>,
        sync: bool,
    ) -> std::result::Result<Result<()>, Vec<Mutation>> {
        let queue = self.inner.shards.get(branch.shard);
        let Some(_claim) = queue.and_then(|q| q.claim_idle()) else {
            return Err(muts);
        };
        let (clock, closed) = (self.inner.clock.as_ref(), &self.inner.closed);
        Ok(shard::commit_now(branch, muts, sync, clock, Some(closed)))
    }

    /// Runs the background work once now (expiry, compaction, the checkpoint of every
    /// write buffer, GC) on every branch: what the maintenance thread does on each tick,
    /// except that a tick leaves a branch that took a write within the last interval for
    /// a later one (up to six ticks in a row).
    pub fn run_maintenance(&self) -> Result<()> {
        self.check_writable()?;
        self.inner.maintain(false)
    }
}

/// How long closing the store waits for a branch head another thread holds before it leaves
/// that branch's manifest unsealed.
const CLOSE_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

impl Inner {
    fn shutdown(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.wake.stop();
        // A pass in flight finishes while the writers it may wait on still run.
        self.wait_for_maintenance();
        for s in &self.shards {
            let _ = s.send(Request::Stop);
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        // A write committing on its caller's thread finishes (or is refused) before the
        // heads are sealed, as one on a shard thread does before that thread stops.
        for s in &self.shards {
            s.wait_for_callers();
        }
        // The writers have stopped. Each head that appended since it opened seals its
        // manifest as one snapshot record (no commit: the version stays), so after this clean
        // close a damaged manifest record is reported, never dropped as a torn append; a
        // head that only read writes nothing. Then it gives back its files' unused
        // preallocation while the directory is still ours (a handle still held would do it
        // only when dropped, after the lock is gone). In name order, so the syncs of a close
        // come in the same order every run (the power-loss sweep counts them).
        let mut parts: Vec<Arc<PartitionEntry>> =
            self.partitions.lock().values().cloned().collect();
        parts.sort_by_key(|p| p.part.dir().to_string());
        for p in parts {
            let mut branches: Vec<Arc<BranchEntry>> = p.branches.lock().values().cloned().collect();
            // Parents a fork by reference waits on first: their checkpoint at the fork
            // version is the tree the fork then shares instead of rewriting.
            let waited_on = |b: &BranchEntry| b.head.try_lock().is_some_and(|h| h.forks_waiting());
            branches.sort_by_cached_key(|b| (!waited_on(b), b.label.clone()));
            for b in branches {
                // Bounded: a head held elsewhere (a caller's operation stuck in I/O) is left
                // as it is — every acknowledged commit is durable already.
                let Some(mut head) = b.head.try_lock_for(CLOSE_LOCK_WAIT) else {
                    tracing::warn!(branch = %b.label, "the branch is busy: its manifest is not sealed at close");
                    continue;
                };
                // Every acknowledged commit is durable already; only the seal is missing.
                // The write buffer is checkpointed first (the next open replays nothing).
                if !self.read_only
                    && !b.gone.load(Ordering::Acquire)
                    && let Err(e) = head
                        .checkpoint_buffer(self.clock.now_ms())
                        .and_then(|()| head.close_clean())
                {
                    tracing::warn!(branch = %b.label, error = %e, "could not seal the manifest at close");
                }
                head.release_reservation();
            }
        }
        self.partitions.lock().clear();
        self.lock.lock().take();
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}
