//! Store options: a builder, TOML loading, and validation that names the offending field.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bough_io::{FaultInjector, MemoryStorage};
use bough_object::{CloudConfig, ObjectStore};
use serde::Deserialize;

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};

/// Which storage backend holds the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
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

/// How the store is configured. Build with [`Options::new`] or load with
/// [`Options::from_toml_file`]; [`Options::validate`] runs on open.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Options {
    /// Store directory (required unless the backend is `memory`).
    pub path: Option<PathBuf>,
    /// Storage backend.
    pub backend: Backend,
    /// Page size in bytes: a power of two from 4096 to 65536. Fixed when a partition is
    /// created.
    pub page_size: u32,
    /// Size of each data file in bytes (a multiple of the page size).
    pub data_file_size: u64,
    /// Byte budget of the page cache.
    pub cache_bytes: u64,
    /// Whether leaf (data) pages are cached too; index and mapping pages always are.
    pub cache_data_pages: bool,
    /// Writer threads; each (partition, branch) is served by one of them.
    pub shards: usize,
    /// Checkpoint the mapping table after this many of its chunks changed.
    pub checkpoint_chunks: usize,
    /// Rewrite a manifest as a fresh snapshot once it exceeds this many bytes.
    pub manifest_rewrite_bytes: u64,
    /// Interval of the background work (expiry, compaction, GC) in ms; 0 turns it off.
    pub maintenance_interval_ms: u64,
    /// Compact a data file once at least this fraction of its pages is garbage to the branch
    /// compacting it — and only if no other branch, archive or merge base references it
    /// (ARCHITECTURE.md, "Compaction").
    pub compaction_garbage_ratio: f64,
    /// How long a delete's tombstone is kept, in ms, before the expiry sweep purges it.
    /// While it is kept, a write with a timestamp older than the delete's is refused (it
    /// lost to the delete); after it is purged such a write applies again — like
    /// Cassandra's `gc_grace_seconds`, so writers must not lag behind by more than this.
    pub tombstone_retention_ms: u64,
    /// How far ahead of the store clock a user timestamp (`PutOptions::timestamp`,
    /// `WriteBatch::delete_at`) may be, in ms; a later one is refused with
    /// `InvalidArgument`, because under last-writer-wins it would make the key impossible to
    /// overwrite until the clock caught up. Default: one hour.
    pub max_timestamp_skew_ms: u64,
    /// Most write batches coalesced into one commit.
    pub max_group_commit: usize,
    /// Most keys one piece of a truncate removes ([`Branch::truncate`](crate::Branch::truncate),
    /// `drop_table`): each piece is one durable commit, and the branch's other writes are
    /// served between pieces, so no truncate holds the writer longer than a piece takes.
    /// Default 4096; from 1 to 2^20.
    pub truncate_piece_keys: usize,
    /// Branch heads kept open (replayed) at once; idle ones beyond this are closed and
    /// replayed again on next use.
    pub max_open_branches: usize,
    /// Threads that serve async reads (`get`, `floor`, `scan`) whose pages are not all cached:
    /// such a read's first try runs on the caller's executor thread from the cache only, and
    /// only a miss moves to these threads, so an executor thread never waits for storage.
    /// Started on the first miss. From 1 to 64.
    pub read_threads: usize,
    /// How long opening for writing waits, in ms, for another process that has the store
    /// open for writing to close it; 0 fails at once (`Busy`). Read-only opens
    /// ([`Store::open_read_only`](crate::Store::open_read_only)) never wait: they take no
    /// lock.
    pub lock_wait_ms: u64,
    /// Time source (tests inject a manual clock).
    #[serde(skip, default = "default_clock")]
    pub clock: Arc<dyn Clock>,
    /// Fault injection for the local backends (tests).
    #[serde(skip)]
    pub faults: Option<FaultInjector>,
    /// A memory store to open (so tests can reopen the same memory).
    #[serde(skip)]
    pub memory: Option<MemoryStorage>,
    /// The object store of `backend = "object"`, and the tier's cache and retry settings.
    pub object: CloudConfig,
    /// An object store to use instead of the one `object` describes (tests: in-memory,
    /// fault-injecting).
    #[serde(skip)]
    pub object_store: Option<Arc<dyn ObjectStore>>,
}

fn default_clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
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
            shards: 2,
            checkpoint_chunks: 128,
            manifest_rewrite_bytes: 16 << 20,
            maintenance_interval_ms: 10_000,
            compaction_garbage_ratio: 0.5,
            tombstone_retention_ms: 24 * 60 * 60 * 1000,
            max_timestamp_skew_ms: DEFAULT_MAX_TIMESTAMP_SKEW_MS,
            max_group_commit: 1024,
            truncate_piece_keys: 4096,
            max_open_branches: 4096,
            read_threads: 4,
            lock_wait_ms: 0,
            clock: default_clock(),
            faults: None,
            memory: None,
            object: CloudConfig::default(),
            object_store: None,
        }
    }
}

impl Options {
    /// Defaults for a store in `path`.
    pub fn new(path: impl AsRef<Path>) -> Self {
        Options {
            path: Some(path.as_ref().to_path_buf()),
            ..Options::default()
        }
    }

    /// Defaults for an in-memory store.
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
    pub fn from_toml_str(text: &str) -> Result<Self> {
        let opts: Options =
            toml::from_str(text).map_err(|e| Error::invalid(format!("options: {e}")))?;
        opts.validate()?;
        Ok(opts)
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
    pub fn cache_bytes(mut self, n: u64) -> Self {
        self.cache_bytes = n;
        self
    }
    /// Whether data pages are cached.
    pub fn cache_data_pages(mut self, yes: bool) -> Self {
        self.cache_data_pages = yes;
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
    pub fn maintenance_interval_ms(mut self, ms: u64) -> Self {
        self.maintenance_interval_ms = ms;
        self
    }
    /// Sets the clock.
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
    /// Sets the fault injector.
    pub fn faults(mut self, f: FaultInjector) -> Self {
        self.faults = Some(f);
        self
    }
    /// Uses (and shares) this memory store.
    pub fn memory(mut self, m: MemoryStorage) -> Self {
        self.backend = Backend::Memory;
        self.memory = Some(m);
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
    /// Uses `store` as the object store (`backend = "object"`; the cache goes to `path`).
    pub fn object_store(mut self, store: Arc<dyn ObjectStore>) -> Self {
        self.backend = Backend::Object;
        self.object_store = Some(store);
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
        if self.backend == Backend::Object {
            // A store handed over ready-made brings its own service settings.
            let checked = if self.object_store.is_some() {
                self.object.validate_tier()
            } else {
                self.object.validate()
            };
            if let Err(e) = checked {
                return Err(Error::invalid(format!("option `{e}`")));
            }
        }
        if self.memory.is_some() && self.backend != Backend::Memory {
            return field("memory", "a memory store needs backend = \"memory\"".into());
        }
        Ok(())
    }

    /// Longest key accepted: an eighth of a page, so a leaf and an index page always hold
    /// several entries.
    pub fn max_key_len(&self) -> usize {
        bough_tree::btree::max_key_len(self.page_size)
    }
}

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
    }
}
