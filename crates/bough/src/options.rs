//! Store settings: plain data (serde, TOML), a builder of setters, and validation that names
//! the offending field. The objects a store runs on (clock, memory or object store, fault
//! injection) are not settings: [`StoreBuilder`](crate::StoreBuilder) takes them.

use std::path::{Path, PathBuf};

use bough_object::CloudConfig;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Which storage backend holds the store.
///
/// ```
/// use bough::{Backend, Options, Store};
///
/// let dir = tempfile::tempdir()?;
/// // Positional reads and writes, whatever the kernel offers (`Auto` tries io_uring first).
/// let store = Store::open(Options::new(dir.path()).backend(Backend::Pread))?;
/// println!("running on {}", store.backend());
/// store.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// io_uring when the kernel allows it, positional I/O otherwise.
    #[default]
    Auto,
    /// io_uring (fails to open where io_uring is unavailable).
    IoUring,
    /// Positional read/write system calls.
    Pread,
    /// Process memory: nothing survives the process.
    Memory,
    /// An object store (the `[object]` table: S3 or S3-compatible) holds the data; `path`
    /// is the local cache directory.
    Object,
}

/// When a write is acknowledged ([`Options::durability`], or per batch with
/// [`WriteBatch::durability`](crate::WriteBatch::durability)). Applies to writes that go
/// through the write buffer (`write_buffer_bytes` > 0); with the buffer off every commit
/// writes its pages and a manifest record and is acknowledged once they are durable,
/// whatever this says.
///
/// With `Buffered`, a write is acknowledged once it is in the buffer and its log record is
/// written to the OS, before the `fdatasync` — for a user with a log of their own in front
/// of Bough, who replays that after a power loss. Such writes may then be lost (never a
/// wrong value: the branch comes back at an earlier version, no later one acknowledged
/// before a sync), but everything acknowledged before a successful
/// [`Branch::sync`](crate::Branch::sync) or [`Store::sync`](crate::Store::sync) is durable.
/// The log is also synced before every checkpoint, before a branch operation (fork,
/// archive, merge, …) reads the branch, by the maintenance timer, and at close.
///
/// ```
/// use bough::{Durability, Options, Store, WriteBatch};
///
/// let store = Store::open(
///     Options::in_memory()
///         .write_buffer_bytes(64 << 20)
///         .durability(Durability::Buffered),
/// )?;
/// let main = store.partition("t", 0)?.branch("main")?;
/// main.put_blocking("a", "1")?; // acknowledged before its log record is synced
/// main.put_blocking("b", "2")?;
/// main.sync_blocking()?; // both durable now
/// // One batch can ask for the other choice.
/// main.write_blocking(WriteBatch::new().put("c", "3").durability(Durability::Sync))?;
/// assert_eq!(
///     Options::from_toml_str("backend = \"memory\"\ndurability = \"buffered\"\n")?.durability,
///     Durability::Buffered
/// );
/// # Ok::<(), bough::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Durability {
    /// A write is acknowledged once it is durable (one `fdatasync` per group commit with
    /// the buffer on).
    #[default]
    Sync,
    /// A write is acknowledged once its log record is written, before it is synced;
    /// `sync()` makes everything acknowledged before it durable.
    Buffered,
}

/// How the store is configured: settings only, plain data that serializes (TOML is the file
/// format). Build with [`Options::new`] / [`Options::in_memory`] and the setters, or load
/// with [`Options::from_toml_file`]; [`Options::validate`] runs on open. Components (a
/// clock, a memory or object store, fault injection) go to
/// [`Store::builder`](crate::Store::builder).
///
/// ```
/// use bough::{Backend, Options, Store};
///
/// let opts = Options::in_memory().page_size(8192).shards(1);
/// assert_eq!(opts.cache_bytes, 256 << 20); // the default
/// let store = Store::open(opts)?;
/// assert_eq!(store.options().page_size, 8192);
///
/// let opts = Options::from_toml_str("path = \"/var/lib/app\"\nbackend = \"pread\"\n")?;
/// assert_eq!(opts.backend, Backend::Pread);
/// // Settings write back out as TOML (unknown keys are refused when read).
/// let text = opts.to_toml_string()?;
/// assert_eq!(Options::from_toml_str(&text)?, opts);
/// # Ok::<(), bough::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
#[non_exhaustive]
pub struct Options {
    /// Store directory (required unless the backend is `memory`). Default: none.
    pub path: Option<PathBuf>,
    /// Storage backend. Default: `auto`.
    pub backend: Backend,
    /// Page size in bytes: a power of two from 4096 to 65536. Fixed when a partition is
    /// created. Default: 4096.
    pub page_size: u32,
    /// Size of each data file in bytes (a multiple of the page size, 16 to 2^24 pages).
    /// Default: 8 MiB.
    pub data_file_size: u64,
    /// Byte budget of the page cache (at least 1 MiB). Default: 256 MiB.
    pub cache_bytes: u64,
    /// Whether leaf (data) pages are cached too; index and mapping pages always are.
    /// Default: true.
    pub cache_data_pages: bool,
    /// How much of `cache_bytes` index and mapping pages may hold where leaves never evict
    /// them, only other index and mapping pages do (a few MiB per GiB of data; clamped to
    /// three quarters of `cache_bytes`, so leaves keep at least a quarter). Default: 64 MiB.
    pub structure_cache_bytes: u64,
    /// Whether opening a branch reads its index and mapping pages into the cache (within
    /// `structure_cache_bytes`), so that its cold gets read only their leaves. The `bough`
    /// CLI turns it off: a one-shot command reads a few pages, not a whole index.
    /// Default: true.
    pub prewarm_on_open: bool,
    /// Writer threads (1 to 256); each (partition, branch) is served by one of them.
    /// Default: 2.
    pub shards: usize,
    /// Checkpoint the mapping table after this many of its chunks changed. Default: 128.
    pub checkpoint_chunks: usize,
    /// Rewrite a manifest as a fresh snapshot once it exceeds this many bytes (at least
    /// 64 KiB). Default: 16 MiB.
    pub manifest_rewrite_bytes: u64,
    /// Interval of the background work (expiry, compaction, checkpoints of idle write
    /// buffers, GC) in ms; 0 turns it off. A branch that took a write within the last
    /// interval is left for a later tick, at most six in a row, so its buffer is
    /// checkpointed once it goes idle or fills rather than on every tick.
    /// Default: 10 000 (10 s).
    pub maintenance_interval_ms: u64,
    /// Compact a data file once at least this fraction of its pages is garbage to the branch
    /// compacting it — and only if no other branch, archive or merge base references it
    /// (ARCHITECTURE.md, "Compaction"). In (0, 1]. Default: 0.5.
    pub compaction_garbage_ratio: f64,
    /// How long a delete's tombstone is kept, in ms, before the expiry sweep purges it.
    /// While it is kept, a write with a timestamp older than the delete's is refused (it
    /// lost to the delete); after it is purged such a write applies again — like
    /// Cassandra's `gc_grace_seconds`, so writers must not lag behind by more than this.
    /// At least 1. Default: 86 400 000 (24 h).
    pub tombstone_retention_ms: u64,
    /// How far ahead of the store clock a user timestamp (`PutOptions::timestamp`,
    /// `WriteBatch::delete_at`) may be, in ms; a later one is refused with
    /// `InvalidArgument`, because under last-writer-wins it would make the key impossible to
    /// overwrite until the clock caught up. Default: 3 600 000 (one hour,
    /// [`DEFAULT_MAX_TIMESTAMP_SKEW_MS`]).
    pub max_timestamp_skew_ms: u64,
    /// How far back a point-in-time branch or restore may reach (`branch_at`,
    /// `restore_at`), in ms; 0 keeps no history. While it is above 0 every head writes a
    /// history point (one small file, a snapshot record) after each manifest record it
    /// makes durable — each checkpoint with the write buffer on, each commit without it —
    /// and GC keeps the points, pages and log files the window needs (ARCHITECTURE.md,
    /// "Point in time"). Default: 0.
    pub history_window_ms: u64,
    /// Most write batches coalesced into one commit (at least 1). Default: 1024.
    pub max_group_commit: usize,
    /// Bytes of acknowledged writes a branch holds in its write buffer before a checkpoint
    /// applies them to the tree (ARCHITECTURE.md, "Write path"). Above 0, a durable commit
    /// is one append to the branch's write-ahead log and one `fdatasync`; reads see the
    /// buffer above the tree, and the buffer is also checkpointed by the maintenance
    /// timer, at close, and before any other operation on the branch (merge, archive,
    /// fork, diff, …). 0 turns the log off: every commit writes its pages and a manifest
    /// record (two syncs). Ignored (0) with `backend = "object"`, which has no appends.
    /// Each branch written to has its own buffer; `write_buffer_total_bytes` bounds them
    /// together. Default: 64 MiB ([`DEFAULT_WRITE_BUFFER_BYTES`]).
    pub write_buffer_bytes: u64,
    /// Bytes the write buffers of every branch of the store hold together. Once they hold
    /// more, a branch whose buffer is at least a sixteenth of this checkpoints after its
    /// next commit, and past twice this every branch does, so the store's buffers stay
    /// below twice this (plus one commit) however many branches are written. 0: no bound
    /// but each branch's `write_buffer_bytes`. `Store::write_buffer_usage` reports the
    /// bytes held and the checkpoints it forced. Default: 256 MiB
    /// ([`DEFAULT_WRITE_BUFFER_TOTAL_BYTES`]).
    pub write_buffer_total_bytes: u64,
    /// Bytes of one write-ahead log file of a branch: a full file is left for the next
    /// one. A commit's record takes at least 4 KiB, so single-key commits fill a file of
    /// 64 MiB in about 16,000. The commits of up to eight files stay in the write buffer
    /// (no checkpoint for a full file until then), so an open replays at most eight
    /// files. A batch whose record would take more than half a file commits through the
    /// tree. From 64 KiB to 1 GiB, a multiple of 4 KiB. Default: 64 MiB
    /// ([`DEFAULT_LOG_FILE_BYTES`]).
    pub log_file_bytes: u64,
    /// Whether a full write buffer is checkpointed on a thread of its own while commits
    /// go on (a commit then waits only when the buffer reaches twice its bound before the
    /// checkpoint is done); `false`: the commit that fills the buffer checkpoints it
    /// before it returns. Default: `true`.
    pub background_checkpoints: bool,
    /// When writes through the write buffer are acknowledged: `sync` (durable first) or
    /// `buffered` (before the log's `fdatasync`; see [`Durability`]). A
    /// [`WriteBatch::durability`](crate::WriteBatch::durability) overrides it per batch.
    /// No effect while `write_buffer_bytes` is 0. Default: `sync`.
    pub durability: Durability,
    /// Most keys one piece of a truncate removes ([`Branch::truncate`](crate::Branch::truncate),
    /// `drop_table`): each piece is one durable commit, and the branch's other writes are
    /// served between pieces, so no truncate holds the writer longer than a piece takes.
    /// Default 4096; from 1 to 2^20.
    pub truncate_piece_keys: usize,
    /// Branch heads kept open (replayed) at once; idle ones beyond this are closed and
    /// replayed again on next use. At least 1. Default: 4096.
    pub max_open_branches: usize,
    /// Threads that serve async reads (`get`, `floor`, `scan`) whose pages are not all cached:
    /// such a read's first try runs on the caller's executor thread from the cache only, and
    /// only a miss moves to these threads, so an executor thread never waits for storage.
    /// Started on the first miss. From 1 to 64. Default: 4.
    pub read_threads: usize,
    /// How long opening for writing waits, in ms, for another process that has the store
    /// open for writing to close it; 0 fails at once (`Busy`). Read-only opens
    /// ([`Store::open_read_only`](crate::Store::open_read_only)) never wait: they take no
    /// lock. Default: 0.
    pub lock_wait_ms: u64,
    /// The object store of `backend = "object"` (the `[object]` table), and the tier's cache
    /// and retry settings. Default: [`CloudConfig::default`] (S3, no bucket: it must be set
    /// for that backend).
    pub object: CloudConfig,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            path: None,
            backend: Backend::Auto,
            page_size: 4096,
            data_file_size: 8 << 20,
            cache_bytes: 256 << 20,
            cache_data_pages: true,
            structure_cache_bytes: 64 << 20,
            prewarm_on_open: true,
            shards: 2,
            checkpoint_chunks: 128,
            manifest_rewrite_bytes: 16 << 20,
            maintenance_interval_ms: 10_000,
            compaction_garbage_ratio: 0.5,
            tombstone_retention_ms: 24 * 60 * 60 * 1000,
            max_timestamp_skew_ms: DEFAULT_MAX_TIMESTAMP_SKEW_MS,
            history_window_ms: 0,
            max_group_commit: 1024,
            write_buffer_bytes: DEFAULT_WRITE_BUFFER_BYTES,
            write_buffer_total_bytes: DEFAULT_WRITE_BUFFER_TOTAL_BYTES,
            log_file_bytes: DEFAULT_LOG_FILE_BYTES,
            background_checkpoints: true,
            durability: Durability::Sync,
            truncate_piece_keys: 4096,
            max_open_branches: 4096,
            read_threads: 4,
            lock_wait_ms: 0,
            object: CloudConfig::default(),
        }
    }
}

impl Options {
    /// Defaults for a store in `path`.
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(Options::new(dir.path()))?; // defaults: io_uring or pread, durable writes
    /// store.close()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(path: impl AsRef<Path>) -> Self {
        Options {
            path: Some(path.as_ref().to_path_buf()),
            ..Options::default()
        }
    }

    /// Defaults for an in-memory store.
    ///
    /// ```
    /// let store = bough::Store::open(bough::Options::in_memory())?; // for tests: nothing on disk
    /// store.close()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn in_memory() -> Self {
        Options {
            backend: Backend::Memory,
            ..Options::default()
        }
    }

    /// Loads options from a TOML file; unknown keys are errors.
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::invalid(format!("cannot read {}: {e}", path.display())))?;
        Self::from_toml_str(&text)
    }

    /// Parses options from TOML text.
    ///
    /// ```
    /// let opts = bough::Options::from_toml_str("path = \"/var/lib/app\"\ncache_bytes = 1048576\n")?;
    /// assert_eq!(opts.cache_bytes, 1 << 20);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_toml_str(text: &str) -> Result<Self> {
        let opts: Options =
            toml::from_str(text).map_err(|e| Error::invalid(format!("options: {e}")))?;
        opts.validate()?;
        Ok(opts)
    }

    /// The options as TOML text, as [`from_toml_str`](Self::from_toml_str) reads them.
    pub fn to_toml_string(&self) -> Result<String> {
        toml::to_string(self).map_err(|e| Error::invalid(format!("options: {e}")))
    }

    /// Sets the store directory.
    pub fn path(mut self, path: impl AsRef<Path>) -> Self {
        self.path = Some(path.as_ref().to_path_buf());
        self
    }
    /// Sets the backend.
    pub fn backend(mut self, b: Backend) -> Self {
        self.backend = b;
        self
    }
    /// Sets the page size.
    pub fn page_size(mut self, n: u32) -> Self {
        self.page_size = n;
        self
    }
    /// Sets the data file size.
    pub fn data_file_size(mut self, n: u64) -> Self {
        self.data_file_size = n;
        self
    }
    /// Sets the page cache budget.
    ///
    /// ```
    /// let opts = bough::Options::in_memory().cache_bytes(512 << 20);
    /// assert_eq!(opts.cache_bytes, 512 << 20);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cache_bytes(mut self, n: u64) -> Self {
        self.cache_bytes = n;
        self
    }
    /// Whether data pages are cached.
    pub fn cache_data_pages(mut self, yes: bool) -> Self {
        self.cache_data_pages = yes;
        self
    }
    /// Sets how much of the cache index and mapping pages may hold ahead of leaves.
    pub fn structure_cache_bytes(mut self, n: u64) -> Self {
        self.structure_cache_bytes = n;
        self
    }
    /// Whether opening a branch prewarms its index and mapping pages.
    ///
    /// ```
    /// let opts = bough::Options::in_memory().prewarm_on_open(false);
    /// assert!(!opts.prewarm_on_open);
    /// ```
    pub fn prewarm_on_open(mut self, yes: bool) -> Self {
        self.prewarm_on_open = yes;
        self
    }
    /// Sets the number of writer threads.
    pub fn shards(mut self, n: usize) -> Self {
        self.shards = n;
        self
    }
    /// Sets how long opening for writing waits for the store lock (0 = not at all).
    pub fn lock_wait_ms(mut self, ms: u64) -> Self {
        self.lock_wait_ms = ms;
        self
    }

    /// Sets the background interval (0 = off).
    ///
    /// ```
    /// // 0: no background maintenance; call `Store::run_maintenance` when it suits.
    /// let store = bough::Store::open(bough::Options::in_memory().maintenance_interval_ms(0))?;
    /// store.run_maintenance()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn maintenance_interval_ms(mut self, ms: u64) -> Self {
        self.maintenance_interval_ms = ms;
        self
    }
    /// Sets the write buffer's size (0: no write-ahead log).
    ///
    /// ```
    /// // 0: no write buffer, every commit written into the tree (pages + manifest record).
    /// let opts = bough::Options::in_memory().write_buffer_bytes(0);
    /// assert_eq!(opts.write_buffer_bytes, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_buffer_bytes(mut self, n: u64) -> Self {
        self.write_buffer_bytes = n;
        self
    }
    /// Sets the bound on every branch's write buffer together (0: none).
    pub fn write_buffer_total_bytes(mut self, n: u64) -> Self {
        self.write_buffer_total_bytes = n;
        self
    }
    /// Sets the size of one write-ahead log file.
    ///
    /// ```
    /// let opts = bough::Options::in_memory().log_file_bytes(1 << 20);
    /// assert!(opts.validate().is_ok());
    /// assert!(opts.log_file_bytes(1000).validate().is_err());
    /// ```
    pub fn log_file_bytes(mut self, n: u64) -> Self {
        self.log_file_bytes = n;
        self
    }
    /// Sets whether full write buffers are checkpointed on a thread of their own.
    pub fn background_checkpoints(mut self, on: bool) -> Self {
        self.background_checkpoints = on;
        self
    }
    /// Sets when buffered writes are acknowledged (see [`Durability`]).
    ///
    /// ```
    /// use bough::{Durability, Options};
    /// let opts = Options::in_memory().durability(Durability::Buffered);
    /// assert_eq!(opts.durability, Durability::Buffered);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }
    /// Sets the manifest rewrite threshold.
    pub fn manifest_rewrite_bytes(mut self, n: u64) -> Self {
        self.manifest_rewrite_bytes = n;
        self
    }
    /// Sets the mapping checkpoint threshold.
    pub fn checkpoint_chunks(mut self, n: usize) -> Self {
        self.checkpoint_chunks = n;
        self
    }
    /// Sets how many branch heads stay open.
    pub fn max_open_branches(mut self, n: usize) -> Self {
        self.max_open_branches = n;
        self
    }
    /// Sets the most batches coalesced into one commit.
    pub fn max_group_commit(mut self, n: usize) -> Self {
        self.max_group_commit = n;
        self
    }
    /// Sets the number of reader threads for async reads that miss the cache.
    pub fn read_threads(mut self, n: usize) -> Self {
        self.read_threads = n;
        self
    }
    /// Sets the object tier's settings (`backend = "object"`).
    pub fn object(mut self, object: CloudConfig) -> Self {
        self.object = object;
        self
    }
    /// Sets the compaction threshold.
    pub fn compaction_garbage_ratio(mut self, r: f64) -> Self {
        self.compaction_garbage_ratio = r;
        self
    }

    /// Sets how long delete tombstones are kept.
    pub fn tombstone_retention_ms(mut self, ms: u64) -> Self {
        self.tombstone_retention_ms = ms;
        self
    }

    /// Sets how far back point-in-time branches and restores may reach (0: no history).
    ///
    /// ```
    /// use bough::Options;
    /// // Branches of any branch as it was up to an hour ago (`PartitionHandle::branch_at`).
    /// let opts = Options::in_memory().history_window_ms(60 * 60 * 1000);
    /// assert_eq!(opts.history_window_ms, 3_600_000);
    /// ```
    pub fn history_window_ms(mut self, ms: u64) -> Self {
        self.history_window_ms = ms;
        self
    }

    /// Sets how far ahead of the store clock a user timestamp may be.
    pub fn max_timestamp_skew_ms(mut self, ms: u64) -> Self {
        self.max_timestamp_skew_ms = ms;
        self
    }

    /// Sets [`truncate_piece_keys`](Self::truncate_piece_keys).
    pub fn truncate_piece_keys(mut self, n: usize) -> Self {
        self.truncate_piece_keys = n;
        self
    }

    /// Checks every field; the error names the field and the rule.
    pub fn validate(&self) -> Result<()> {
        self.check(false)
    }

    /// [`validate`](Self::validate), where `injected_object_store` says an object store
    /// was handed to the builder (so the `object` table need not name a service).
    pub(crate) fn check(&self, injected_object_store: bool) -> Result<()> {
        let field =
            |name: &str, rule: String| Err(Error::invalid(format!("option `{name}`: {rule}")));
        if self.backend != Backend::Memory && self.path.is_none() {
            return field("path", "required unless backend = \"memory\"".into());
        }
        if !self.page_size.is_power_of_two() || !(4096..=65536).contains(&self.page_size) {
            return field(
                "page_size",
                format!(
                    "{} is not a power of two from 4096 to 65536",
                    self.page_size
                ),
            );
        }
        let ps = u64::from(self.page_size);
        if !self.data_file_size.is_multiple_of(ps)
            || self.data_file_size / ps < 16
            || self.data_file_size / ps > (1 << 24)
        {
            return field(
                "data_file_size",
                format!(
                    "{} must be a multiple of page_size holding 16 to 2^24 pages",
                    self.data_file_size
                ),
            );
        }
        if self.cache_bytes < 1 << 20 {
            return field(
                "cache_bytes",
                format!("{} is below 1 MiB", self.cache_bytes),
            );
        }
        if !(1..=256).contains(&self.shards) {
            return field("shards", format!("{} is not in 1..=256", self.shards));
        }
        if self.checkpoint_chunks == 0 {
            return field("checkpoint_chunks", "must be at least 1".into());
        }
        if self.manifest_rewrite_bytes < 64 * 1024 {
            return field(
                "manifest_rewrite_bytes",
                format!("{} is below 64 KiB", self.manifest_rewrite_bytes),
            );
        }
        if !(self.compaction_garbage_ratio > 0.0 && self.compaction_garbage_ratio <= 1.0) {
            return field(
                "compaction_garbage_ratio",
                format!("{} is not in (0, 1]", self.compaction_garbage_ratio),
            );
        }
        // Zero would purge a tombstone at the next sweep, which is the resurrection bug again.
        if self.tombstone_retention_ms == 0 {
            return field("tombstone_retention_ms", "must be at least 1".into());
        }
        if self.max_open_branches == 0 {
            return field("max_open_branches", "must be at least 1".into());
        }
        if !(1..=64).contains(&self.read_threads) {
            return field(
                "read_threads",
                format!("{} is not from 1 to 64", self.read_threads),
            );
        }
        if self.max_group_commit == 0 {
            return field("max_group_commit", "must be at least 1".into());
        }
        if !(1..=1 << 20).contains(&self.truncate_piece_keys) {
            return field(
                "truncate_piece_keys",
                format!("{} is not from 1 to 2^20", self.truncate_piece_keys),
            );
        }
        if !(MIN_LOG_FILE_BYTES..=MAX_LOG_FILE_BYTES).contains(&self.log_file_bytes)
            || !self.log_file_bytes.is_multiple_of(4096)
        {
            return field(
                "log_file_bytes",
                format!(
                    "{} is not a multiple of 4 KiB from 64 KiB to 1 GiB",
                    self.log_file_bytes
                ),
            );
        }
        if self.backend == Backend::Object {
            // A store handed over ready-made brings its own service settings.
            let checked = if injected_object_store {
                self.object.validate_tier()
            } else {
                self.object.validate()
            };
            if let Err(e) = checked {
                return Err(Error::invalid(format!("option `{e}`")));
            }
        }
        Ok(())
    }

    /// Longest key accepted: an eighth of a page, so a leaf and an index page always hold
    /// several entries.
    pub fn max_key_len(&self) -> usize {
        bough_tree::btree::max_key_len(self.page_size)
    }
}

/// The default of [`Options::write_buffer_bytes`]: 64 MiB, large enough that a checkpoint
/// rewrites each touched leaf once for many commits, small enough to replay in well under
/// a second at open.
pub const DEFAULT_WRITE_BUFFER_BYTES: u64 = 64 << 20;

/// The default of [`Options::log_file_bytes`]: 64 MiB.
pub const DEFAULT_LOG_FILE_BYTES: u64 = 64 << 20;

/// Bounds of [`Options::log_file_bytes`]: a file holds at least 16 records, and open
/// reads one whole (at most 1 GiB, far below what replay refuses).
const MIN_LOG_FILE_BYTES: u64 = 64 << 10;
const MAX_LOG_FILE_BYTES: u64 = 1 << 30;

/// The default of [`Options::write_buffer_total_bytes`]: 256 MiB, four branches' full
/// buffers.
pub const DEFAULT_WRITE_BUFFER_TOTAL_BYTES: u64 = 256 << 20;

/// The default of [`Options::max_timestamp_skew_ms`]: one hour.
pub const DEFAULT_MAX_TIMESTAMP_SKEW_MS: u64 = 60 * 60 * 1000;

/// Longest value accepted (values above about a quarter page live in overflow pages).
pub const MAX_VALUE_LEN: usize = bough_tree::btree::MAX_VALUE_LEN;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_round_trip_and_field_errors() {
        let o = Options::from_toml_str(
            "path = \"/tmp/x\"\nbackend = \"pread\"\npage_size = 8192\ndata_file_size = 1048576\n",
        )
        .unwrap();
        assert_eq!(o.backend, Backend::Pread);
        assert_eq!(o.page_size, 8192);
        let e = Options::from_toml_str("path = \"/x\"\npage_size = 5000\n").unwrap_err();
        assert!(e.to_string().contains("page_size"), "{e}");
        let e = Options::from_toml_str("path = \"/x\"\nbogus = 1\n").unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        let e = Options::in_memory().shards(0).validate().unwrap_err();
        assert!(e.to_string().contains("shards"), "{e}");
        let o = Options::from_toml_str("path = \"/x\"\ntombstone_retention_ms = 60000\n").unwrap();
        assert_eq!(o.tombstone_retention_ms, 60_000);
        assert_eq!(Options::default().tombstone_retention_ms, 86_400_000);
        let e = Options::from_toml_str("path = \"/x\"\ntombstone_retention_ms = 0\n").unwrap_err();
        assert!(e.to_string().contains("tombstone_retention_ms"), "{e}");
        let o = Options::from_toml_str("path = \"/x\"\nmax_timestamp_skew_ms = 5000\n").unwrap();
        assert_eq!(o.max_timestamp_skew_ms, 5000);
        assert_eq!(Options::default().max_timestamp_skew_ms, 3_600_000);
        let e = Options::default().validate().unwrap_err();
        assert!(e.to_string().contains("path"), "{e}");
        assert_eq!(Options::default().durability, Durability::Sync);
        let o = Options::from_toml_str("path = \"/x\"\ndurability = \"buffered\"\n").unwrap();
        assert_eq!(o.durability, Durability::Buffered);
        assert!(
            o.to_toml_string()
                .unwrap()
                .contains("durability = \"buffered\"")
        );
        let e = Options::from_toml_str("path = \"/x\"\ndurability = \"never\"\n").unwrap_err();
        assert!(e.to_string().contains("durability"), "{e}");
    }
}
