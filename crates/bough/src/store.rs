//! The store: partitions spread over writer shards, one write queue per (partition,
//! branch), readers on immutable snapshots.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use bough_catalog::{BranchInfo, MergeOptions, MergeReport, Partition, RehomeReport};
use bough_gc::{GcReport, Pins, Usage};
use bough_io::{
    BackendChoice, DirLock, IoStatsSnapshot, LocalOptions, Storage, lock_dir_wait, open_local_with,
};
use bough_names::ArchiveName;
use bough_names::{BranchName, PartitionDir, PartitionId, TableName, classify_dir};
use bough_tree::btree::{self, Mutation, Op};
use bough_tree::cache::PageCache;
use bough_tree::diff::Change;
use bough_tree::head::{Head, HeadConfig, Published, TreeSnapshot};
use bough_tree::page::leaf::{Entry, ValueLoc};
use parking_lot::Mutex;

use crate::batch::{WriteBatch, check_key};
use crate::clock::Clock;
use crate::error::{Error, ErrorKind, Result};
use crate::oneshot;
use crate::options::{Backend, Options};
pub use repair::RepairReport;

mod read_only;
mod repair;
mod staging;

/// A key's value and metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    /// The value bytes.
    pub value: Vec<u8>,
    /// The user timestamp it was written with.
    pub timestamp: u64,
    /// When it expires (ms since the epoch), if ever.
    pub expire_at: Option<u64>,
}

/// A key with its value, as a scan returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: Vec<u8>,
    /// Its value and metadata.
    pub value: Value,
}

/// How a key differs between two branches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffChange {
    /// Only in the second branch.
    Added(Value),
    /// Only in the first branch.
    Removed(Value),
    /// In both, different.
    Changed { old: Value, new: Value },
}

/// One key of a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffEntry {
    /// The key.
    pub key: Vec<u8>,
    /// How it differs.
    pub change: DiffChange,
    /// For a [`DiffChange::Removed`] key that the second branch deleted: the timestamp of
    /// its delete (the tombstone it keeps). `None` otherwise — also for a key removed
    /// without a tombstone (expired, truncated).
    pub deleted_at: Option<u64>,
}

/// What a scan reads.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Where to start (inclusive or exclusive; unbounded = from the first key).
    pub begin: Bound<Vec<u8>>,
    /// Where to stop (exclusive; unbounded = to the last key).
    pub end: Option<Vec<u8>>,
    /// Most entries returned; at least 1 (0 is refused as an invalid argument).
    pub limit: usize,
    /// Stop after this many key + value bytes (at least one entry is returned).
    pub max_bytes: usize,
    /// Return keys without reading values.
    pub keys_only: bool,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            begin: Bound::Unbounded,
            end: None,
            limit: usize::MAX,
            max_bytes: usize::MAX,
            keys_only: false,
        }
    }
}

/// What [`Branch::write_counted_blocking`] changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteReport {
    /// Puts and deletes that took effect.
    pub applied: u64,
    /// Puts and deletes that last-writer-wins skipped: the stored entry (or the tombstone
    /// of a delete) had a newer timestamp.
    pub superseded: u64,
}

/// One page of scan results.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanPage {
    /// Entries in key order.
    pub entries: Vec<KeyValue>,
    /// Where the next page starts (inclusive), if the scan stopped at a limit.
    pub next: Option<Vec<u8>>,
}

/// A batch waiting in a group commit, with its waiter.
type Pending = (Vec<Mutation>, oneshot::Sender<Result<()>>);

type Task = Box<dyn FnOnce(&mut Head, u64) -> Result<()> + Send>;

enum Job {
    Write {
        branch: Arc<BranchEntry>,
        muts: Vec<Mutation>,
        reply: oneshot::Sender<Result<()>>,
    },
    Run {
        branch: Arc<BranchEntry>,
        task: Task,
        reply: oneshot::Sender<Result<()>>,
    },
    Stop,
}

#[derive(Debug)]
pub(crate) struct BranchEntry {
    /// Shared with every read view (cloned per read, so not a `String`).
    label: Arc<str>,
    published: Arc<Published>,
    head: Mutex<Head>,
    shard: usize,
    /// Set when the branch is deleted: handles still held report `NotFound`.
    gone: AtomicBool,
    dir: PartitionDir,
    name: BranchName,
}

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
    head_cfg: HeadConfig,
    partitions: Mutex<HashMap<String, Arc<PartitionEntry>>>,
    shards: Vec<Mutex<mpsc::Sender<Job>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    closed: AtomicBool,
    lock: Mutex<Option<DirLock>>,
    maintenance_stop: Mutex<Option<mpsc::Sender<()>>>,
    /// Opened with [`Store::open_read_only`]: nothing is written, every change is refused.
    read_only: bool,
}

/// An open store. Cheap to clone; every clone is the same store.
#[derive(Debug, Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl Store {
    /// Opens (creating if needed) the store `opts` describes.
    pub fn open(opts: Options) -> Result<Store> {
        opts.validate()?;
        let mut cloud = None;
        let (storage, lock): (Arc<dyn Storage>, Option<DirLock>) = match opts.backend {
            Backend::Memory => {
                let mem = opts.memory.clone().unwrap_or_default();
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
                    let (storage, c) = crate::cloud::open_storage(&opts, &path)?;
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
                        faults: opts.faults.clone(),
                    };
                    (open_local_with(&path, local)?, Some(lock))
                }
            }
        };
        Store::start(opts, storage, cloud, lock, false)
    }

    /// Starts the store over opened storage: shard threads, and the maintenance thread
    /// unless `read_only`.
    pub(crate) fn start(
        opts: Options,
        storage: Arc<dyn Storage>,
        cloud: Option<bough_object::CloudStorage>,
        lock: Option<DirLock>,
        read_only: bool,
    ) -> Result<Store> {
        tracing::info!(backend = %storage.kind(), read_only, "store opened");
        let head_cfg = HeadConfig {
            page_size: opts.page_size,
            file_pages: (opts.data_file_size / u64::from(opts.page_size)) as u32,
            preallocate: opts.data_file_size,
            checkpoint_chunks: opts.checkpoint_chunks,
            manifest_rewrite_bytes: opts.manifest_rewrite_bytes,
            file_per_commit: false,
        };
        let head_cfg = crate::cloud::head_config(&opts, head_cfg);
        let mut shards = Vec::new();
        let mut threads = Vec::new();
        for i in 0..opts.shards {
            let (tx, rx) = mpsc::channel();
            shards.push(Mutex::new(tx));
            let clock = opts.clock.clone();
            let max_group = opts.max_group_commit;
            threads.push(
                std::thread::Builder::new()
                    .name(format!("bough-shard-{i}"))
                    .spawn(move || shard_loop(rx, clock, max_group))
                    .map_err(|e| Error::new(ErrorKind::Io, format!("cannot start a shard: {e}")))?,
            );
        }
        let inner = Arc::new(Inner {
            cache: Arc::new(PageCache::new(opts.cache_bytes as usize)),
            clock: opts.clock.clone(),
            head_cfg,
            storage,
            cloud,
            partitions: Mutex::new(HashMap::new()),
            shards,
            threads: Mutex::new(threads),
            closed: AtomicBool::new(false),
            lock: Mutex::new(lock),
            maintenance_stop: Mutex::new(None),
            read_only,
            opts,
        });
        if inner.opts.maintenance_interval_ms > 0 && !read_only {
            start_maintenance(&inner);
        }
        Ok(Store { inner })
    }

    /// Which backend serves the store (`io_uring`, `pread` or `memory`).
    pub fn backend(&self) -> bough_io::BackendKind {
        self.inner.storage.kind()
    }

    /// I/O counters of the storage backend.
    pub fn io_stats(&self) -> IoStatsSnapshot {
        self.inner.storage.stats().snapshot()
    }

    /// The page cache (hit counters, size).
    pub fn cache(&self) -> &PageCache {
        &self.inner.cache
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

    /// The partitions of a table that exist in the store.
    pub fn partitions_of(&self, table: &str) -> Result<Vec<PartitionId>> {
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
    /// theirs.
    pub fn drop_table_branch(&self, table: &str, branch: &str) -> Result<()> {
        for p in self.partitions_of(table)? {
            self.partition(table, p)?
                .branch(branch)?
                .truncate_blocking(&[])?;
        }
        Ok(())
    }

    /// Removes every key of the `main` branch of `table`.
    pub fn drop_table(&self, table: &str) -> Result<()> {
        self.drop_table_branch(table, "main")
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
        let entry = Arc::new(PartitionEntry {
            part,
            branches: Mutex::new(HashMap::new()),
            catalog: Mutex::new(()),
            retired: Mutex::new(Vec::new()),
            epoch: AtomicU64::new(0),
            usage: Mutex::new(None),
            staging_removed,
        });
        parts.insert(key, entry.clone());
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
        Ok(entry)
    }

    /// Keeps the number of open branch heads (replayed manifests, mapping chunks in memory)
    /// bounded: beyond `max_open_branches`, heads nobody holds — no handle, no queued job,
    /// no reader snapshot older than the current one — are closed; they replay again lazily
    /// on next use.
    fn evict_idle_branches(&self) {
        let limit = self.inner.opts.max_open_branches;
        let parts: Vec<Arc<PartitionEntry>> =
            self.inner.partitions.lock().values().cloned().collect();
        let mut open: usize = parts.iter().map(|p| p.branches.lock().len()).sum();
        for p in parts {
            if open <= limit {
                return;
            }
            let mut branches = p.branches.lock();
            let idle: Vec<BranchName> = branches
                .iter()
                .filter(|(_, b)| Arc::strong_count(b) == 1 && b.published.live().len() <= 1)
                .map(|(n, _)| n.clone())
                .collect();
            let mut closed = Vec::new();
            for n in idle {
                if open <= limit {
                    break;
                }
                closed.extend(branches.remove(&n));
                open -= 1;
            }
            drop(branches);
            // A head poisoned by an upload whose outcome is unknown must not be reopened at
            // its term: on shared storage the next open takes the branch over anew.
            for b in &closed {
                let head = b.head.lock();
                if head.poisoned().is_some() {
                    p.part.disown(head.branch(), head.term());
                }
            }
            // A reader may still hold a closed head's current snapshot: GC keeps pinning it,
            // as for a deleted branch, until no reader holds it. (No new reader can come: a
            // view needs a handle, and a closed head had none.)
            let mut retired = p.retired.lock();
            retired.retain(|r| !r.held_by_readers().is_empty());
            retired.extend(
                closed
                    .into_iter()
                    .map(|b| b.published.clone())
                    .filter(|pb| !pb.held_by_readers().is_empty()),
            );
        }
    }

    fn register(&self, head: Head, dir: &PartitionDir) -> Arc<BranchEntry> {
        let label = format!("{dir}@{}", head.branch());
        let shard = shard_of(&label, self.inner.shards.len());
        let name = head.branch().clone();
        Arc::new(BranchEntry {
            label: label.into(),
            published: head.published(),
            head: Mutex::new(head),
            shard,
            gone: AtomicBool::new(false),
            dir: dir.clone(),
            name,
        })
    }

    fn submit(&self, job: Job, shard: usize) -> Result<()> {
        self.check_open()?;
        self.check_writable()?;
        self.inner.shards[shard]
            .lock()
            .send(job)
            .map_err(|_| Error::closed())
    }

    /// Runs the background work once now (expiry, compaction, GC); what the maintenance
    /// thread does on each tick.
    pub fn run_maintenance(&self) -> Result<()> {
        self.check_writable()?;
        self.inner.maintain()
    }

    /// Garbage-collects every partition opened so far; returns a report per partition. In
    /// cloud mode a partition whose GC lease another process holds is skipped this time
    /// (it is being collected there).
    pub fn gc(&self) -> Result<Vec<(String, GcReport)>> {
        self.check_writable()?;
        let parts: Vec<Arc<PartitionEntry>> =
            self.inner.partitions.lock().values().cloned().collect();
        let mut out = Vec::with_capacity(parts.len());
        for p in &parts {
            match gc_partition(p, self.inner.cloud.as_ref(), false) {
                Ok(report) => out.push((p.part.dir().to_string(), report)),
                Err(e) if e.kind() == ErrorKind::Busy && self.inner.cloud.is_some() => {
                    tracing::info!(partition = %p.part.dir(), error = %e, "GC skipped: another process holds the lease");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Creates `name` from `from` on every partition of `table`, all or nothing: if any
    /// partition fails, the branches created so far are deleted again and every
    /// per-partition error is reported.
    pub fn create_branch_global(&self, table: &str, name: &str, from: &str) -> Result<()> {
        BranchName::new(name)?;
        BranchName::new(from)?;
        let parts = self.partitions_of(table)?;
        let mut done = Vec::new();
        let mut errors = Vec::new();
        // The kind shared by every failure (`Io` when they differ).
        let mut kind = None;
        for p in &parts {
            match self.partition(table, *p)?.create_branch(name, from) {
                Ok(_) => done.push(*p),
                Err(e) => {
                    kind = match kind {
                        None => Some(e.kind()),
                        Some(k) if k == e.kind() => Some(k),
                        Some(_) => Some(ErrorKind::Io),
                    };
                    errors.push(e.to_string());
                }
            }
        }
        if errors.is_empty() {
            return Ok(());
        }
        for p in done {
            if let Err(e) = self.partition(table, p)?.delete_branch(name) {
                errors.push(format!("rollback: {e}"));
            }
        }
        Err(Error::new(
            kind.unwrap_or(ErrorKind::Io),
            format!(
                "creating branch {name} on table {table} failed: {}",
                errors.join("; ")
            ),
        ))
    }

    /// Deletes `name` on every partition of `table` that has it.
    pub fn delete_branch_global(&self, table: &str, name: &str) -> Result<()> {
        for p in self.partitions_of(table)? {
            match self.partition(table, p)?.delete_branch(name) {
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                other => other?,
            }
        }
        Ok(())
    }

    /// Archives `branch` on every partition of `table` with one shared timestamp.
    pub fn archive_global(&self, table: &str, branch: &str) -> Result<u64> {
        let ts = self.inner.clock.now_ms();
        for p in self.partitions_of(table)? {
            self.partition(table, p)?.branch(branch)?.archive_at(ts)?;
        }
        Ok(ts)
    }
}

/// Every snapshot a reader of the partition holds and every file a writer is filling. Taken
/// after the walk has read the manifests (see `bough_gc::collect_with`).
fn pins_of(p: &PartitionEntry) -> Pins {
    let mut pins = Pins::default();
    for b in p.branches.lock().values() {
        pins.snapshots.extend(b.published.live());
    }
    p.retired.lock().retain(|r| {
        let held = r.held_by_readers();
        let keep = !held.is_empty();
        pins.snapshots.extend(held);
        keep
    });
    pins.writing.extend(p.part.files().writing());
    pins
}

/// GC of one partition: everything its manifests and archives reference, every snapshot a
/// reader holds, every file a writer is filling. The same walk measures the partition's
/// usage, which is cached for the next compactions (see [`usage_of`]).
///
/// In cloud mode the run holds the partition's GC lease (one process at a time collects a
/// partition; `Busy` while another does): every deletion checks it, so a run that lost it
/// deletes nothing more.
fn gc_partition(
    p: &PartitionEntry,
    cloud: Option<&bough_object::CloudStorage>,
    dry_run: bool,
) -> Result<GcReport> {
    let _catalog = p.catalog.lock();
    // Read under the catalog lock, before the walk lists the directory: a change after this
    // point bumps the epoch past it, so the cached usage is never taken for newer than it is.
    let epoch = p.epoch.load(Ordering::Acquire);
    let lease = if dry_run {
        None
    } else {
        crate::cloud::gc_lease(cloud, &p.part.dir().to_string())?
    };
    let measured = std::thread::scope(|scope| {
        // Keep the lease alive while GC reads manifests and walks mapping pages (which can
        // take longer than the lease); every deletion checks it again anyway. A renewal
        // that fails stops the keeper: the deletions then find the lease lost or uncertain
        // and delete nothing.
        let (stop, stopped) = mpsc::channel::<()>();
        if let Some(l) = &lease {
            let every = Duration::from_millis((l.ttl_ms() / 4).clamp(50, 5_000));
            scope.spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    if let Err(e) = l.check() {
                        tracing::warn!(error = %e, "GC lease not renewed");
                        return;
                    }
                }
            });
        }
        let r = bough_gc::collect_measured(p.part.files(), || pins_of(p), dry_run)
            .map_err(|e| Error::from(e).at(p.part.dir()));
        drop(stop);
        r
    });
    if let Some(lease) = lease {
        lease.release();
    }
    let (report, usage) = measured?;
    *p.usage.lock() = Some((epoch, Arc::new(usage)));
    Ok(report)
}

/// Which files of the partition are live and who holds them, for compaction: the usage the
/// last GC walk measured while no catalog change happened since, otherwise a new walk.
///
/// Why a cached walk is good enough: compaction counts the compacting branch's own live
/// pages afresh and takes from the usage only who *else* holds a file. Without a catalog
/// change, other referents can only drop pages (commits, compactions and readers letting
/// go), so a cached answer errs towards keeping a file that became compactable, which the
/// next GC corrects; every change that can add a holder (fork, archive, merge, reset,
/// restore, new term, delete) bumps the epoch and forces a new walk. Choosing a victim is
/// advisory either way: GC's own walk decides what is deleted. So the maintenance thread
/// pays one walk per partition per tick — GC's, which it ran anyway — and a catalog change
/// costs one more.
fn usage_of(p: &PartitionEntry) -> Result<Arc<Usage>> {
    let epoch = p.epoch.load(Ordering::Acquire);
    if let Some((at, u)) = p.usage.lock().as_ref()
        && *at == epoch
    {
        return Ok(u.clone());
    }
    let _catalog = p.catalog.lock();
    let epoch = p.epoch.load(Ordering::Acquire);
    let usage = bough_gc::measure(p.part.files(), || pins_of(p))
        .map_err(|e| Error::from(e).at(p.part.dir()))?;
    let usage = Arc::new(usage);
    *p.usage.lock() = Some((epoch, usage.clone()));
    Ok(usage)
}

/// The partition's usage measured now, with the catalog lock held (as GC walks), and cached
/// for the next compactions as [`usage_of`] would.
fn measure_locked(p: &PartitionEntry) -> Result<Arc<Usage>> {
    let epoch = p.epoch.load(Ordering::Acquire);
    let usage = bough_gc::measure(p.part.files(), || pins_of(p))
        .map_err(|e| Error::from(e).at(p.part.dir()))?;
    let usage = Arc::new(usage);
    *p.usage.lock() = Some((epoch, usage.clone()));
    Ok(usage)
}

/// [`measure_locked`] for a description: a partition another branch's damage keeps from being
/// walked still describes its branches, only their cost is unknown (GC and verify report
/// the damage).
/// How long a description waits for a catalog change in progress before it leaves the
/// space figures out.
const DESCRIBE_LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

fn measure_or_warn(p: &PartitionEntry) -> Option<Arc<Usage>> {
    // A description never waits for a catalog change (a deletion stalled in I/O holds the
    // lock): then the branches are described without their cost.
    let Some(_catalog) = p.catalog.try_lock_for(DESCRIBE_LOCK_WAIT) else {
        tracing::info!("a catalog change is running: the branches' space is not measured");
        return None;
    };
    measure_locked(p)
        .inspect_err(|e| tracing::warn!(error = %e, "cannot measure the partition's space"))
        .ok()
}

fn space_or_warn(
    p: &PartitionEntry,
    usage: &Usage,
    branch: &BranchName,
) -> Option<bough_catalog::BranchSpace> {
    bough_gc::branch_space(p.part.files(), usage, branch)
        .inspect_err(|e| tracing::warn!(error = %e, %branch, "cannot measure the branch's space"))
        .ok()
}

impl Inner {
    fn shutdown(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(stop) = self.maintenance_stop.lock().take() {
            let _ = stop.send(());
        }
        for s in &self.shards {
            let _ = s.lock().send(Job::Stop);
        }
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
        // Give back the files' unused preallocation while the directory is still ours (a
        // handle still held would do it only when dropped, after the lock is gone).
        for p in self.partitions.lock().values() {
            for b in p.branches.lock().values() {
                b.head.lock().release_reservation();
            }
        }
        self.partitions.lock().clear();
        self.lock.lock().take();
    }

    fn maintain(self: &Arc<Self>) -> Result<()> {
        let store = Store {
            inner: self.clone(),
        };
        let parts: Vec<Arc<PartitionEntry>> = self.partitions.lock().values().cloned().collect();
        let ratio = self.opts.compaction_garbage_ratio;
        for p in parts {
            let entries: Vec<Arc<BranchEntry>> = p.branches.lock().values().cloned().collect();
            if entries.is_empty() {
                continue;
            }
            // One usage per partition per tick, shared by its branches (outside their write
            // queues, so no writer waits for the walk). Without it nobody can tell which
            // files are shared: the partition's branches are not compacted this tick, the
            // rest of the work goes on (GC reports the damage).
            let usage = usage_of(&p)
                .inspect_err(|e| {
                    tracing::warn!(error = %e, "cannot measure the partition; compaction skipped");
                })
                .ok();
            for b in entries {
                let branch = Branch {
                    store: store.clone(),
                    entry: b.clone(),
                };
                let usage = usage.clone();
                branch.run(Box::new(move |head, now| {
                    expire(head, now)?;
                    if let Some(usage) = &usage {
                        compact(head, ratio, now, usage)?;
                    }
                    // An idle branch's mapping changes go into mapping pages now, so creating
                    // a branch from it later writes only what changed since.
                    if head.dirty_chunks() > 0 {
                        head.checkpoint(now)?;
                    }
                    Ok(())
                }))?;
            }
        }
        store.gc()?;
        Ok(())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn shard_of(label: &str, n: usize) -> usize {
    // FNV-1a: stable across runs, so a branch always lands on the same shard.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in label.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    (h % n as u64) as usize
}

fn start_maintenance(inner: &Arc<Inner>) {
    let (tx, rx) = mpsc::channel::<()>();
    *inner.maintenance_stop.lock() = Some(tx);
    let weak: Weak<Inner> = Arc::downgrade(inner);
    let every = Duration::from_millis(inner.opts.maintenance_interval_ms);
    let _ = std::thread::Builder::new()
        .name("bough-maintenance".into())
        .spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(every) {
                let Some(inner) = weak.upgrade() else { return };
                if let Err(e) = inner.maintain()
                    && e.kind() != ErrorKind::Closed
                {
                    tracing::warn!(error = %e, "background maintenance failed");
                }
            }
        });
}

/// Deletes keys whose expiry has passed (the TTL index says which), and purges tombstones
/// whose retention has passed: a purge removes nothing a reader could see.
fn expire(head: &mut Head, now: u64) -> Result<()> {
    loop {
        let keys = head.expired_keys(now, 4096)?;
        if keys.is_empty() {
            return Ok(());
        }
        let muts: Vec<Mutation> = keys
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .map(|key| Mutation {
                key,
                op: Op::ForceDelete,
            })
            .collect();
        head.commit(&muts, now)?;
    }
}

/// What one compaction of one branch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// Data files whose live pages were moved out (GC frees them once no reader holds them).
    pub compacted: Vec<String>,
    /// Pages rewritten into the branch's current file.
    pub pages_moved: u64,
    /// Data files mostly garbage to this branch that another branch, an archive or a merge
    /// base still references: left alone, since copying out of them would free nothing.
    pub shared_skipped: Vec<String>,
}

/// Moves this head's live pages out of its sealed files that are mostly garbage and that
/// no other durable referent needs.
///
/// A file is a victim when (1) at least `garbage_ratio` of it is garbage to this head — the
/// head's own live pages against the file's capacity — and (2) `usage` says no other branch
/// head, archive or merge base references any page of it. Then the head is the file's only
/// durable holder, so every page it does not reference is referenced by no one (the garbage
/// is real), and once its pages are moved out nothing keeps the file (readers only until
/// they let go). A file another referent still needs is left alone whatever its garbage:
/// moving out of it would free nothing, and would turn pages the branches share into
/// copies. Its garbage comes back once the sharing ends (ARCHITECTURE.md, "Compaction").
/// Inherited files qualify like the head's own: the rule is about holders, not lineage.
fn compact(
    head: &mut Head,
    garbage_ratio: f64,
    now: u64,
    usage: &Usage,
) -> Result<CompactionReport> {
    let live = head.live_pages_per_file()?;
    let snap = head.snapshot();
    let active = head.active_file();
    let per_file = f64::from(head.file_pages().saturating_sub(1).max(1));
    // In cloud mode every commit writes its own small file: judge it by the pages it holds.
    let cloud = head.files().storage().kind() == bough_io::BackendKind::Object;
    let pages_in = |f: u64| -> f64 {
        let page_size = u64::from(head.files().page_size());
        let held = head
            .files()
            .handle(&snap.ranges, f)
            .and_then(|h| h.file.len())
            .map(|len| (len / page_size).saturating_sub(1).max(1) as f64);
        if cloud {
            held.unwrap_or(per_file)
        } else {
            per_file
        }
    };
    let mut candidates: Vec<u64> = live
        .iter()
        .filter(|(f, _)| Some(**f) != active)
        .filter(|(f, n)| 1.0 - (**n as f64 / pages_in(**f)) >= garbage_ratio)
        .map(|(f, _)| *f)
        .collect();
    candidates.sort_unstable();
    let mut report = CompactionReport::default();
    let mut victims = Vec::new();
    for f in candidates {
        // A live page in a file id no range covers is damage the next read reports; leave
        // the file alone here.
        let Ok(name) = head.files().resolve(&snap.ranges, f) else {
            continue;
        };
        let name = name.to_string();
        if usage.held_only_by(&name, head.branch(), head.term()) {
            victims.push(f);
            report.compacted.push(name);
        } else {
            report.shared_skipped.push(name);
        }
    }
    if !victims.is_empty() {
        let moved = head.relocate_files(&victims, now)?;
        report.pages_moved = moved;
        tracing::debug!(files = victims.len(), pages = moved, "compacted");
    }
    if !report.shared_skipped.is_empty() {
        tracing::debug!(
            files = ?report.shared_skipped,
            "left mostly-garbage files other referents still need"
        );
    }
    Ok(report)
}

fn shard_loop(rx: mpsc::Receiver<Job>, clock: Arc<dyn Clock>, max_group: usize) {
    while let Ok(first) = rx.recv() {
        let mut jobs = vec![first];
        while jobs.len() < max_group {
            match rx.try_recv() {
                Ok(j) => jobs.push(j),
                Err(_) => break,
            }
        }
        // Writes of one branch that queued up together become one commit (group commit);
        // any other job of that branch first flushes the group, so order is kept.
        let mut groups: Vec<(Arc<BranchEntry>, Vec<Pending>)> = Vec::new();
        let mut stop = false;
        for job in jobs {
            match job {
                Job::Write {
                    branch,
                    muts,
                    reply,
                } => match groups.iter_mut().find(|(b, _)| Arc::ptr_eq(b, &branch)) {
                    Some((_, g)) => g.push((muts, reply)),
                    None => groups.push((branch, vec![(muts, reply)])),
                },
                Job::Run {
                    branch,
                    task,
                    reply,
                } => {
                    if let Some(pos) = groups.iter().position(|(b, _)| Arc::ptr_eq(b, &branch)) {
                        let (b, g) = groups.remove(pos);
                        commit_group(&b, g, clock.as_ref());
                    }
                    let mut head = branch.head.lock();
                    let r = task(&mut head, clock.now_ms()).map_err(|e| e.at(&branch.label));
                    reply.send(r);
                }
                Job::Stop => stop = true,
            }
        }
        for (b, g) in groups {
            commit_group(&b, g, clock.as_ref());
        }
        if stop {
            return;
        }
    }
}

/// Commits several batches of one branch as one tree update. Batches keep their order:
/// for a key written by two of them, last-writer-wins by timestamp decides, and a tie goes
/// to the later batch, exactly as if they had been committed one after the other. (A delete
/// leaves a tombstone, so a delete followed by an older put resolves the same way merged as
/// committed in turn: the delete wins.)
fn commit_group(branch: &BranchEntry, group: Vec<Pending>, clock: &dyn Clock) {
    if group.len() == 1 {
        let mut replies = Vec::with_capacity(1);
        let muts = group.into_iter().next().map_or(Vec::new(), |(m, r)| {
            replies.push(r);
            m
        });
        commit_merged(branch, &muts, replies, clock);
        return;
    }
    let mut replies = Vec::with_capacity(group.len());
    let mut merged: BTreeMap<Vec<u8>, Op> = BTreeMap::new();
    for (muts, reply) in group {
        replies.push(reply);
        for m in muts {
            // Later batches compose over earlier ones by the one last-writer-wins rule.
            let op = match merged.remove(&m.key) {
                Some(old) => bough_tree::lww::compose(old, m.op),
                None => m.op,
            };
            merged.insert(m.key, op);
        }
    }
    let run: Vec<Mutation> = merged
        .into_iter()
        .map(|(key, op)| Mutation { key, op })
        .collect();
    commit_merged(branch, &run, replies, clock);
}

/// Commits merged batches and answers each of their waiters.
fn commit_merged(
    branch: &BranchEntry,
    muts: &[Mutation],
    replies: Vec<oneshot::Sender<Result<()>>>,
    clock: &dyn Clock,
) {
    let result = branch
        .head
        .lock()
        .commit(muts, clock.now_ms())
        .map(|_| ())
        .map_err(|e| Error::from(e).at(&branch.label));
    match result {
        Ok(()) => replies.into_iter().for_each(|r| r.send(Ok(()))),
        Err(e) => replies.into_iter().for_each(|r| r.send(Err(e.duplicate()))),
    }
}

/// A partition of a table.
#[derive(Debug, Clone)]
pub struct PartitionHandle {
    store: Store,
    dir: PartitionDir,
}

impl PartitionHandle {
    /// Opens a branch. `main` always exists (a partition is created on first use); any
    /// other branch must exist, or this is `NotFound`.
    pub fn branch(&self, name: &str) -> Result<Branch> {
        let name = BranchName::new(name).map_err(|e| Error::from(e).at(&self.dir))?;
        let entry = self.store.branch_entry(&self.dir, &name)?;
        Ok(Branch {
            store: self.store.clone(),
            entry,
        })
    }

    /// The partition's directory name (`table.partition`).
    pub fn dir(&self) -> &PartitionDir {
        &self.dir
    }

    fn entry(&self) -> Result<Arc<PartitionEntry>> {
        self.store.partition_entry(&self.dir)
    }

    /// Creates branch `name` at the latest commit of branch `from`. Runs in `from`'s write
    /// queue, so a busy parent is fine: the branch sees exactly the parent's commits that
    /// were queued before it. No data is copied.
    pub fn create_branch(&self, name: &str, from: &str) -> Result<Branch> {
        self.create_branch_marked(name, from, None)
    }

    /// [`create_branch`](Self::create_branch), as a staging branch marked with `staging`
    /// when given (see `bough_catalog::STAGING_PREFIXES`).
    fn create_branch_marked(
        &self,
        name: &str,
        from: &str,
        staging: Option<String>,
    ) -> Result<Branch> {
        let label = format!("{}@{name}", self.dir);
        let name = BranchName::new(name).map_err(|e| Error::from(e).at(&label))?;
        let parent = self.branch(from)?;
        let entry = self.entry()?;
        let store = self.store.clone();
        let dir = self.dir.clone();
        let created: Arc<Mutex<Option<Arc<BranchEntry>>>> = Arc::new(Mutex::new(None));
        let out = created.clone();
        let task_name = name.clone();
        parent
            .run(Box::new(move |head, now| {
                let _catalog = entry.catalog_change();
                let new_head = match &staging {
                    Some(purpose) => entry
                        .part
                        .create_staging_branch(head, &task_name, purpose, now),
                    None => entry.part.create_branch(head, &task_name, now),
                }
                .map_err(|e| Error::from(e).at(format!("{dir}@{task_name}")))?;
                let b = store.register(new_head, &dir);
                entry.branches.lock().insert(task_name, b.clone());
                *out.lock() = Some(b);
                Ok(())
            }))
            .map_err(|e| e.at(&label))?;
        let entry = created.lock().take().ok_or_else(|| {
            Error::new(ErrorKind::Io, "branch creation reported no branch").at(&label)
        })?;
        // A new head counts against `max_open_branches` like an opened one.
        self.store.evict_idle_branches();
        Ok(Branch {
            store: self.store.clone(),
            entry,
        })
    }

    /// Deletes branch `name`: its manifests and archives go; its data stays until GC finds
    /// nothing else references it. `main` cannot be deleted; children are unaffected. Then
    /// every other branch drops the merge bases naming it (a metadata commit where it had
    /// one), so GC can free the states they pinned; an error from that step leaves the
    /// branch deleted, and those bases are dropped at their head's next open.
    pub fn delete_branch(&self, name: &str) -> Result<()> {
        let branch = match self.branch(name) {
            Ok(b) => b,
            // A damaged manifest: no head could open, so no writer runs; delete through the
            // catalog directly (the tombstone, then the manifests) so the name and GC work
            // again.
            Err(e) if e.kind() == ErrorKind::Corruption => {
                let entry = self.entry()?;
                let bname = BranchName::new(name)?;
                let _catalog = entry.catalog_change();
                return entry
                    .part
                    .delete_branch(&bname)
                    .map_err(|err| Error::from(err).at(format!("{}@{name}", self.dir)));
            }
            Err(e) => return Err(e),
        };
        let entry = self.entry()?;
        let bname = BranchName::new(name)?;
        let target = branch.entry.clone();
        let deleted = entry.clone();
        branch.run(Box::new(move |head, _now| {
            let _catalog = deleted.catalog_change();
            deleted.part.delete_branch(&bname)?;
            head.retire();
            deleted.retired.lock().push(target.published.clone());
            target.gone.store(true, Ordering::Release);
            deleted.branches.lock().remove(&bname);
            Ok(())
        }))?;
        drop(branch);
        self.prune_merge_bases(&entry).map_err(|e| {
            Error::new(
                e.kind(),
                format!(
                    "branch {name} is deleted, but dropping the merge bases naming it failed \
                     (they go when the branch holding them opens next): {e}"
                ),
            )
            .at(&self.dir)
        })
    }

    /// Drops the merge bases no live branch can use any more (those naming deleted
    /// branches) from every live branch of the partition, so GC can free the states they
    /// pinned. Each branch does it in its own write queue (a merge into it may be running).
    /// Every branch is tried; the first failure is returned. A base left behind is never
    /// used (merges check the incarnation) and goes when its head opens next.
    fn prune_merge_bases(&self, entry: &Arc<PartitionEntry>) -> Result<()> {
        let mut first_error = None;
        for name in entry.part.branches().map_err(Error::from)? {
            let pruned = self.branch(name.as_str()).and_then(|b| {
                let e = entry.clone();
                b.run(Box::new(move |head, now| {
                    let _catalog = e.catalog_change();
                    e.part.prune_merge_bases(head, now)?;
                    Ok(())
                }))
            });
            match pruned {
                Ok(()) => {}
                // Deleted meanwhile: nothing to prune.
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(branch = %name, error = %e, "cannot drop merge bases");
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The live branches of the partition.
    pub fn branches(&self) -> Result<Vec<String>> {
        let e = self.entry()?;
        Ok(e.part
            .branches()
            .map_err(|err| Error::from(err).at(&self.dir))?
            .into_iter()
            .map(|b| b.to_string())
            .collect())
    }

    /// Parent, fork point, term, creation time and archives of a branch, and what it costs
    /// on storage ([`BranchInfo::space`]: its exclusive and shared bytes, from GC's
    /// measuring walk of the partition — one walk per call).
    pub fn describe(&self, name: &str) -> Result<BranchInfo> {
        let label = format!("{}@{name}", self.dir);
        let bname = BranchName::new(name).map_err(|e| Error::from(e).at(&label))?;
        let entry = self.entry()?;
        let mut info = entry
            .part
            .describe(&bname)
            .map_err(|e| Error::from(e).at(&label))?;
        info.space = measure_or_warn(&entry).and_then(|u| space_or_warn(&entry, &u, &bname));
        Ok(info)
    }

    /// [`describe`](Self::describe) of every live branch of the partition, measured by one
    /// walk for all of them.
    pub fn describe_branches(&self) -> Result<Vec<BranchInfo>> {
        let entry = self.entry()?;
        let names = entry
            .part
            .branches()
            .map_err(|e| Error::from(e).at(&self.dir))?;
        let usage = measure_or_warn(&entry);
        names
            .iter()
            .map(|name| {
                let mut info = entry
                    .part
                    .describe(name)
                    .map_err(|e| Error::from(e).at(format!("{}@{name}", self.dir)))?;
                info.space = usage.as_ref().and_then(|u| space_or_warn(&entry, u, name));
                Ok(info)
            })
            .collect()
    }

    /// Hands branch `name` to a new term (a new owner): a new manifest, then
    /// `CURRENT_TERM`; a writer still holding the old term is fenced.
    pub fn open_new_term(&self, name: &str) -> Result<Branch> {
        let branch = self.branch(name)?;
        let entry = self.entry()?;
        let published = branch.entry.published.clone();
        branch.run(Box::new(move |head, now| {
            let _catalog = entry.catalog_change();
            let mut new_head = entry.part.open_new_term(head, now)?;
            new_head.share_published(published);
            *head = new_head;
            Ok(())
        }))?;
        Ok(branch)
    }

    /// A checkpointed snapshot record of a branch (with its manifest extensions), taken in
    /// the branch's write queue.
    ///
    /// The returned `Arc<TreeSnapshot>` is the same state as a reader snapshot: while it is
    /// held, GC keeps every file of that state even if the source moves on (the caller holds
    /// it until the state is durably adopted).
    fn snapshot_record(
        &self,
        name: &str,
    ) -> Result<(BranchName, bough_manifest::Snapshot, Arc<TreeSnapshot>)> {
        let branch = self.branch(name)?;
        type Out = Option<(bough_manifest::Snapshot, Arc<TreeSnapshot>)>;
        let out: Arc<Mutex<Out>> = Arc::new(Mutex::new(None));
        let slot = out.clone();
        branch.run(Box::new(move |head, now| {
            let record = head.fork_point(now)?.snapshot;
            *slot.lock() = Some((record, head.snapshot()));
            Ok(())
        }))?;
        let (snap, pin) = out
            .lock()
            .take()
            .ok_or_else(|| Error::new(ErrorKind::Io, "no snapshot produced").at(branch.label()))?;
        Ok((BranchName::new(name)?, snap, pin))
    }

    /// Every key whose entry differs from branch `a` to branch `b`, in key order, as reads
    /// see both at the store clock's time: an entry that has expired is absent (an expired
    /// key on one side and no key on the other is no difference). Reads only the pages the
    /// two branches do not share.
    pub fn diff(&self, a: &str, b: &str) -> Result<Vec<DiffEntry>> {
        let (ba, bb) = (self.branch(a)?, self.branch(b)?);
        let (sa, sb) = (ba.entry.published.load(), bb.entry.published.load());
        self.diff_snapshots(&sa, &sb, format!("{}@{a}..{b}", self.dir))
    }

    /// Every key whose entry differs from `archive` to the current state of `branch` (expired
    /// entries absent, as in [`diff`](Self::diff)).
    pub fn diff_archive(&self, archive: &ArchiveName, branch: &str) -> Result<Vec<DiffEntry>> {
        let label = format!("{}@{archive}..{branch}", self.dir);
        let entry = self.entry()?;
        let record = entry
            .part
            .read_archive(archive)
            .map_err(|e| Error::from(e).at(&label))?;
        let sa = TreeSnapshot::from_record(entry.part.files().clone(), &record)
            .map_err(|e| Error::from(e).at(&label))?;
        let sb = self.branch(branch)?.entry.published.load();
        self.diff_snapshots(&sa, &sb, label)
    }

    /// The diff as reads see it now: an expired entry is absent on its side.
    fn diff_snapshots(
        &self,
        sa: &TreeSnapshot,
        sb: &TreeSnapshot,
        label: String,
    ) -> Result<Vec<DiffEntry>> {
        let (changes, _) = bough_tree::diff::diff(sa, sb).map_err(|e| Error::from(e).at(&label))?;
        let changes =
            bough_tree::diff::visible_changes_at(changes, self.store.inner.clock.now_ms());
        let value = |s: &TreeSnapshot, e: Entry| -> Result<Value> {
            let v = match e.value {
                ValueLoc::Inline(v) => v,
                ValueLoc::Overflow { first, pages, len } => s
                    .read_overflow(first, pages, len)
                    .map_err(|err| Error::from(err).at(&label))?,
                // `visible_at` drops tombstones (they are absent), so none reaches here.
                ValueLoc::Tombstone => Vec::new(),
            };
            Ok(Value {
                value: v,
                timestamp: e.timestamp,
                expire_at: (e.expire_at != 0).then_some(e.expire_at),
            })
        };
        changes
            .into_iter()
            .map(|v| {
                let deleted_at = v.tombstone.map(|t| t.timestamp);
                let change = match v.change {
                    Change::Added(e) => DiffChange::Added(value(sb, e)?),
                    Change::Removed(e) => DiffChange::Removed(value(sa, e)?),
                    Change::Changed { old, new } => DiffChange::Changed {
                        old: value(sa, old)?,
                        new: value(sb, new)?,
                    },
                };
                Ok(DiffEntry {
                    key: v.key,
                    change,
                    deleted_at,
                })
            })
            .collect()
    }

    /// Merges branch `source` into branch `target` (see [`MergeOptions`]): a fast-forward
    /// by reference when `target` has not changed since their merge base, otherwise a
    /// three-way merge committed atomically on `target`. All three states are seen as reads
    /// see them at the store clock's time: an entry that has expired is absent.
    pub fn merge(&self, source: &str, target: &str, opts: MergeOptions) -> Result<MergeReport> {
        let (sname, snap, pin) = self.snapshot_record(source)?;
        let t = self.branch(target)?;
        let entry = self.entry()?;
        let out: Arc<Mutex<Option<MergeReport>>> = Arc::new(Mutex::new(None));
        let slot = out.clone();
        t.run(Box::new(move |head, now| {
            // Under the catalog lock GC cannot run between "the source state is pinned by a
            // reader snapshot" and "the target's manifest references it".
            let _catalog = entry.catalog_change();
            *slot.lock() = Some(entry.part.merge(head, &sname, &snap, opts, now)?);
            drop(pin);
            Ok(())
        }))?;
        let report = out.lock().take();
        report.ok_or_else(|| Error::new(ErrorKind::Io, "merge reported nothing").at(t.label()))
    }

    /// Resets branch `target` to branch `to`'s current state by reference (e.g. refresh a
    /// child from its parent); `to` becomes their merge base.
    pub fn reset_branch(&self, target: &str, to: &str) -> Result<()> {
        let (sname, snap, pin) = self.snapshot_record(to)?;
        let t = self.branch(target)?;
        let entry = self.entry()?;
        t.run(Box::new(move |head, now| {
            let _catalog = entry.catalog_change();
            entry.part.reset_to(head, &sname, &snap, now)?;
            drop(pin);
            Ok(())
        }))
    }

    /// Garbage-collects this partition (`dry_run`: report only).
    pub fn gc(&self, dry_run: bool) -> Result<GcReport> {
        if !dry_run {
            self.store.check_writable()?;
        }
        gc_partition(&*self.entry()?, self.store.inner.cloud.as_ref(), dry_run)
    }
}

/// One branch of one partition: reads, writes, truncate.
///
/// Reads run on the caller's thread against an immutable snapshot and never wait for a
/// writer. Writes go through the branch's write queue; the returned future (usable from any
/// executor, or blocked on with the `_blocking` methods) resolves once the batch is durable.
#[derive(Debug, Clone)]
pub struct Branch {
    store: Store,
    entry: Arc<BranchEntry>,
}

impl Branch {
    /// `table.partition@branch`.
    pub fn label(&self) -> &str {
        &self.entry.label
    }

    fn check_live(&self) -> Result<()> {
        self.store.check_open()?;
        if self.entry.gone.load(Ordering::Acquire) {
            return Err(
                Error::new(ErrorKind::NotFound, "the branch was deleted").at(&self.entry.label)
            );
        }
        Ok(())
    }

    /// Archives the branch's current state as `manifest_<branch>_<term>_<ts>` at the store
    /// clock's time (moved forward past any archive already using that timestamp).
    pub fn archive(&self) -> Result<ArchiveName> {
        let mut ts = self.store.inner.clock.now_ms();
        loop {
            match self.archive_at(ts) {
                Err(e) if e.kind() == ErrorKind::AlreadyExists => ts += 1,
                other => return other,
            }
        }
    }

    /// Archives at timestamp `ts`; `AlreadyExists` if that archive exists (never overwritten).
    pub fn archive_at(&self, ts: u64) -> Result<ArchiveName> {
        let entry = self.store.partition_entry(self.partition_dir())?;
        let out: Arc<Mutex<Option<ArchiveName>>> = Arc::new(Mutex::new(None));
        let slot = out.clone();
        self.run(Box::new(move |head, now| {
            // A new durable referent of the branch's files: compaction must see it.
            let _catalog = entry.catalog_change();
            let name = entry.part.archive(head, ts, now)?;
            *slot.lock() = Some(name);
            Ok(())
        }))?;
        out.lock().take().ok_or_else(|| {
            Error::new(ErrorKind::Io, "archive reported no name").at(&self.entry.label)
        })
    }

    /// The branch's archives, oldest first.
    pub fn archives(&self) -> Result<Vec<ArchiveName>> {
        let entry = self.store.partition_entry(self.partition_dir())?;
        let name = self.branch_name()?;
        entry
            .part
            .archives(&name)
            .map_err(|e| Error::from(e).at(&self.entry.label))
    }

    /// Keeps only the newest `keep` archives of this branch.
    pub fn prune_archives(&self, keep: usize) -> Result<Vec<ArchiveName>> {
        let entry = self.store.partition_entry(self.partition_dir())?;
        let name = self.branch_name()?;
        entry
            .part
            .prune_archives(&name, keep)
            .map_err(|e| Error::from(e).at(&self.entry.label))
    }

    /// Restores the branch to `archive` in place; the state it replaces is kept as branch
    /// `backup`.
    pub fn restore(&self, archive: &ArchiveName, backup: &str) -> Result<()> {
        let backup = BranchName::new(backup).map_err(|e| Error::from(e).at(&self.entry.label))?;
        let entry = self.store.partition_entry(self.partition_dir())?;
        let store = self.store.clone();
        let dir = self.partition_dir().clone();
        let published = self.entry.published.clone();
        let archive = archive.clone();
        self.run(Box::new(move |head, now| {
            let _catalog = entry.catalog_change();
            let mut restored = entry.part.restore(head, &archive, &backup, now)?;
            if let Ok(b) = entry.part.open_head(&backup) {
                let be = store.register(b, &dir);
                entry.branches.lock().insert(backup, be);
            }
            restored.share_published(published);
            *head = restored;
            Ok(())
        }))
    }

    /// Creates branch `name` at the state `archive` recorded (a point-in-time branch).
    pub fn branch_from_archive(&self, archive: &ArchiveName, name: &str) -> Result<Branch> {
        let label = format!("{}@{name}", self.partition_dir());
        let bname = BranchName::new(name).map_err(|e| Error::from(e).at(&label))?;
        let entry = self.store.partition_entry(self.partition_dir())?;
        let head = {
            let _catalog = entry.catalog_change();
            entry
                .part
                .branch_from_archive(archive, &bname, self.store.inner.clock.now_ms())
                .map_err(|e| Error::from(e).at(&label))?
        };
        let b = self.store.register(head, self.partition_dir());
        entry.branches.lock().insert(bname, b.clone());
        self.store.evict_idle_branches();
        Ok(Branch {
            store: self.store.clone(),
            entry: b,
        })
    }

    fn partition_dir(&self) -> &PartitionDir {
        &self.entry.dir
    }

    fn branch_name(&self) -> Result<BranchName> {
        Ok(self.entry.name.clone())
    }

    /// A consistent read view of the branch as of its latest commit.
    pub fn read_view(&self) -> Result<ReadView> {
        self.check_live()?;
        Ok(ReadView {
            snap: self.entry.published.load(),
            now: self.store.inner.clock.now_ms(),
            label: self.entry.label.clone(),
            max_key: self.store.inner.opts.max_key_len(),
        })
    }

    /// The value of `key`, unless absent or expired.
    pub async fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        self.get_blocking(key)
    }

    /// Blocking [`get`](Self::get).
    pub fn get_blocking(&self, key: &[u8]) -> Result<Option<Value>> {
        self.read_view()?.get(key)
    }

    /// The greatest live key ≤ `key`, with its value.
    pub async fn floor(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        self.floor_blocking(key)
    }

    /// Blocking [`floor`](Self::floor).
    pub fn floor_blocking(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        self.read_view()?.floor(key)
    }

    /// A page of entries in key order.
    pub async fn scan(&self, opts: &ScanOptions) -> Result<ScanPage> {
        self.scan_blocking(opts)
    }

    /// Blocking [`scan`](Self::scan).
    pub fn scan_blocking(&self, opts: &ScanOptions) -> Result<ScanPage> {
        self.read_view()?.scan(opts)
    }

    /// Applies a batch atomically; resolves once it is durable.
    pub fn write(
        &self,
        batch: WriteBatch,
    ) -> impl std::future::Future<Output = Result<()>> + use<> {
        let rx = self.submit_write(batch);
        async move {
            match rx {
                Ok(rx) => rx.await.unwrap_or_else(|| Err(Error::closed())),
                Err(e) => Err(e),
            }
        }
    }

    /// Blocking [`write`](Self::write).
    pub fn write_blocking(&self, batch: WriteBatch) -> Result<()> {
        self.submit_write(batch)?
            .wait()
            .unwrap_or_else(|| Err(Error::closed()))
    }

    /// [`write_blocking`](Self::write_blocking) that also says what the batch changed: how
    /// many of its puts and deletes took effect and how many last-writer-wins skipped
    /// because the stored entry was newer. The batch commits on its own (not grouped with
    /// other batches), so the counts are its own.
    pub fn write_counted_blocking(&self, batch: WriteBatch) -> Result<WriteReport> {
        let muts = self.mutations(batch)?;
        let ops = muts.len() as u64;
        let out: Arc<Mutex<Option<u64>>> = Arc::new(Mutex::new(None));
        let slot = out.clone();
        self.run(Box::new(move |head, now| {
            *slot.lock() = Some(head.commit(&muts, now)?.superseded);
            Ok(())
        }))?;
        let superseded = out.lock().take().unwrap_or(0);
        Ok(WriteReport {
            applied: ops.saturating_sub(superseded),
            superseded,
        })
    }

    fn mutations(&self, batch: WriteBatch) -> Result<Vec<Mutation>> {
        self.check_live()?;
        batch
            .into_mutations(
                self.store.inner.clock.now_ms(),
                self.store.inner.opts.page_size,
                self.store.inner.opts.tombstone_retention_ms,
                self.store.inner.opts.max_timestamp_skew_ms,
            )
            .map_err(|e| e.at(&self.entry.label))
    }

    fn submit_write(&self, batch: WriteBatch) -> Result<oneshot::Receiver<Result<()>>> {
        let muts = self.mutations(batch)?;
        let (tx, rx) = oneshot::channel();
        self.store.submit(
            Job::Write {
                branch: self.entry.clone(),
                muts,
                reply: tx,
            },
            self.entry.shard,
        )?;
        Ok(rx)
    }

    /// Removes every key ≥ `from` (every key when `from` is empty).
    pub async fn truncate(&self, from: &[u8]) -> Result<()> {
        self.truncate_blocking(from)
    }

    /// Blocking [`truncate`](Self::truncate).
    pub fn truncate_blocking(&self, from: &[u8]) -> Result<()> {
        let from = from.to_vec();
        self.run(Box::new(move |head, now| {
            let snap = head.snapshot();
            let start = if from.is_empty() {
                None
            } else {
                Some(from.as_slice())
            };
            let mut c = btree::Cursor::seek(snap.as_ref(), snap.root, start)?;
            let mut muts = Vec::new();
            while let Some(e) = c.next_entry(snap.as_ref())? {
                muts.push(Mutation {
                    key: e.key,
                    op: Op::ForceDelete,
                });
            }
            head.commit(&muts, now)?;
            Ok(())
        }))
    }

    /// Runs a task on the branch's writer, in queue order.
    pub(crate) fn run(&self, task: Task) -> Result<()> {
        self.check_live()?;
        let (tx, rx) = oneshot::channel();
        self.store.submit(
            Job::Run {
                branch: self.entry.clone(),
                task,
                reply: tx,
            },
            self.entry.shard,
        )?;
        rx.wait().unwrap_or_else(|| Err(Error::closed()))
    }

    /// Deletes expired keys now (the background task does this periodically).
    pub fn expire_now(&self) -> Result<()> {
        self.run(Box::new(expire))
    }

    /// Copies into the branch's own files every page it borrows from other branches' files
    /// and forgets its merge bases, so those branches can be deleted and collected.
    pub fn rehome(&self) -> Result<RehomeReport> {
        let entry = self.store.partition_entry(self.partition_dir())?;
        let out: Arc<Mutex<Option<RehomeReport>>> = Arc::new(Mutex::new(None));
        let slot = out.clone();
        self.run(Box::new(move |head, now| {
            *slot.lock() = Some(entry.part.rehome(head, now)?);
            Ok(())
        }))?;
        let r = out.lock().take();
        r.ok_or_else(|| Error::new(ErrorKind::Io, "re-home reported nothing").at(&self.entry.label))
    }

    /// Compacts the branch's mostly-garbage files now: moves its live pages out of every
    /// sealed file that is at least `compaction_garbage_ratio` garbage and that no other
    /// branch, archive or merge base references (see [`CompactionReport`]).
    pub fn compact_now(&self) -> Result<CompactionReport> {
        self.check_live()?;
        let ratio = self.store.inner.opts.compaction_garbage_ratio;
        let entry = self.store.partition_entry(self.partition_dir())?;
        let usage = usage_of(&entry).map_err(|e| e.at(&self.entry.label))?;
        let out: Arc<Mutex<CompactionReport>> = Arc::default();
        let slot = out.clone();
        self.run(Box::new(move |head, now| {
            *slot.lock() = compact(head, ratio, now, &usage)?;
            Ok(())
        }))?;
        let report = std::mem::take(&mut *out.lock());
        Ok(report)
    }
}

/// A consistent view of one branch at one commit.
#[derive(Debug, Clone)]
pub struct ReadView {
    snap: Arc<TreeSnapshot>,
    now: u64,
    label: Arc<str>,
    max_key: usize,
}

impl ReadView {
    fn live(&self, e: &Entry) -> bool {
        e.is_live_at(self.now)
    }

    fn value_of(&self, e: Entry, keys_only: bool) -> Result<Value> {
        let value = match e.value {
            _ if keys_only => Vec::new(),
            ValueLoc::Inline(v) => v,
            ValueLoc::Overflow { first, pages, len } => self
                .snap
                .read_overflow(first, pages, len)
                .map_err(|err| Error::from(err).at(&self.label))?,
            // Callers pass live entries only, and a tombstone is never live.
            ValueLoc::Tombstone => Vec::new(),
        };
        Ok(Value {
            value,
            timestamp: e.timestamp,
            expire_at: (e.expire_at != 0).then_some(e.expire_at),
        })
    }

    /// The commit this view shows.
    pub fn version(&self) -> u64 {
        self.snap.version
    }

    /// The value of `key`, unless absent or expired.
    pub fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        check_key(key, self.max_key).map_err(|e| e.at(&self.label))?;
        let found = btree::get(self.snap.as_ref(), self.snap.root, key)
            .map_err(|e| Error::from(e).at(&self.label))?;
        match found {
            Some(e) if self.live(&e) => Ok(Some(self.value_of(e, false)?)),
            _ => Ok(None),
        }
    }

    /// The greatest live key ≤ `key`.
    pub fn floor(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        let mut probe = key.to_vec();
        let mut inclusive = true;
        loop {
            let found =
                btree::Cursor::before(self.snap.as_ref(), self.snap.root, &probe, inclusive)
                    .map_err(|e| Error::from(e).at(&self.label))?;
            match found {
                None => return Ok(None),
                Some(e) if self.live(&e) => {
                    let key = e.key.clone();
                    return Ok(Some(KeyValue {
                        key,
                        value: self.value_of(e, false)?,
                    }));
                }
                // Expired: keep looking below it.
                Some(e) => {
                    probe = e.key;
                    inclusive = false;
                }
            }
        }
    }

    /// A page of live entries in `[begin, end)`.
    pub fn scan(&self, opts: &ScanOptions) -> Result<ScanPage> {
        if opts.limit == 0 {
            // A page of nothing whose continuation is its own start would make a paging
            // loop spin forever.
            return Err(Error::invalid("scan limit must be at least 1"));
        }
        let at = |e: bough_io::IoError| Error::from(e).at(&self.label);
        let (start, skip_equal) = match &opts.begin {
            Bound::Included(k) => (Some(k.as_slice()), None),
            Bound::Excluded(k) => (Some(k.as_slice()), Some(k.clone())),
            Bound::Unbounded => (None, None),
        };
        let mut c = btree::Cursor::seek(self.snap.as_ref(), self.snap.root, start).map_err(at)?;
        let mut entries = Vec::new();
        let mut bytes = 0usize;
        while let Some(e) = c.next_entry(self.snap.as_ref()).map_err(at)? {
            if skip_equal.as_ref().is_some_and(|k| *k == e.key) {
                continue;
            }
            if opts.end.as_ref().is_some_and(|end| e.key >= *end) {
                break;
            }
            if !self.live(&e) {
                continue;
            }
            if entries.len() >= opts.limit || (bytes >= opts.max_bytes && !entries.is_empty()) {
                return Ok(ScanPage {
                    entries,
                    next: Some(e.key),
                });
            }
            let key = e.key.clone();
            let value = self.value_of(e, opts.keys_only)?;
            bytes += key.len() + value.value.len();
            entries.push(KeyValue { key, value });
        }
        Ok(ScanPage {
            entries,
            next: None,
        })
    }
}
