//! [`CloudStorage`]: the [`Storage`] trait over an object store, with a bounded local cache.
//!
//! The pieces: `fencing` (who may write), `envelopes` (conditional writes of small objects),
//! `claims` (numbered versions), `lease` (GC lease), `data` (data objects), `ranges`
//! (page-granular reads of them), `file` (open files), `listing`, `prewarm`, and `storage`
//! (the `Storage` trait over all of it).
//!
//! How file operations become object operations (details in docs/format.md, "Object
//! storage layout"):
//!
//! - **Data files** (`data_*`) are written once. While written they live in memory; their
//!   `sync` uploads the whole file as one object with create-if-absent, then the bytes move
//!   to the disk cache (if they fit) and the memory is freed. Reads go through the cache.
//!   A miss fetches the aligned ranges the read touches (`range_read_bytes`, one ranged
//!   GET) and caches them; a scan (ranges in a row), a read of most of an object, a
//!   prewarm, or `range_read_bytes = 0` downloads the whole object.
//! - **Log files** (`wal_*`) are sequences of immutable segment objects, one per `sync`
//!   (`cloud/logs.rs`); a takeover fences the previous term's logs with an empty segment.
//! - **Every other file** (manifests, archives, `CURRENT_TERM`, anything else) is a small
//!   object wrapped in an [`Envelope`] carrying a writer token. Writes are buffered. A
//!   manifest is a chain of numbered versions (`cloud/claims.rs`): its `sync` creates the
//!   next version holding only the bytes appended since the version this instance last
//!   saw (a whole-file version after a rewrite, and every `MAX_CHAIN` commits).
//!   `CURRENT_TERM` is uploaded whole with If-Match on the ETag this instance last saw
//!   (If-None-Match when new), other files plainly.
//! - **Ownership.** Only the instance that created `manifest_<b>_<t>` (create-if-absent:
//!   one winner) may write it or create data files of `(b, t)`. Creating
//!   `manifest_<b>_<t+1>` first *seals* `manifest_<b>_<t>` (the next version of its chain,
//!   whole and with the SEALED flag), so the previous owner's next commit fails and it is
//!   `Fenced`.
//! - A conditional write that comes back "precondition failed", or that ran out of retries
//!   after a timeout, is resolved by reading the object back and comparing the writer
//!   token: never reported wrongly either way.
//! - Directories do not exist in object stores: a partition "directory" exists when an
//!   object lives under its prefix, or when this instance created it.
//! - **Fencing modes.** With compare-and-swap (S3, GCS, Azure) manifests, `CURRENT_TERM`
//!   and the GC lease are single objects updated with If-Match. On a service with only
//!   create-if-absent (opendal memory and fs) they are numbered versions instead, each
//!   created once (`cloud/claims.rs`); the layers above see the same files either way.
//! - **GC lease.** Data objects are deleted only under the partition's GC lease
//!   (`cloud/lease.rs`), which one process holds at a time.
//! - **Burnt terms.** A manifest upload whose outcome stays unknown (retries exhausted,
//!   read-back failed) ends this instance's ownership of that term: the head is poisoned,
//!   and a reopen must take the branch over at a new term, never write the old one again.

mod claims;
mod data;
mod envelopes;
mod fencing;
mod file;
mod lease;
mod listing;
mod logs;
mod prewarm;
mod ranges;
mod sizes;
mod storage;

use data::get_full;
pub use fencing::{Fencing, Refusal, check_guarantees, select_fencing};
use file::{CloudFile, FileBody};
pub use lease::{GcLease, LEASE_RECORD_LEN, LEASE_RELEASED, LeaseRecord, LeaseRecordError};
use logs::LogFile;
pub use prewarm::PrewarmReport;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use bough_io::{
    BackendKind, IoError, IoResult, IoStats, OpenOptions, PreadStorage, Storage, StorageFile,
};
use bough_names::{FileKind, ManifestName, VersionTarget, parse_file_name};
use parking_lot::{Mutex, RwLock};

use crate::cache::{CacheStats, DiskCache};
use crate::config::{CloudConfig, FencingMode};
use crate::envelope::{AppendPayload, Envelope, FLAG_APPEND, FLAG_SEALED};
use crate::memory::MsClock;
use crate::object::{Etag, Guarantees, ObjectError, ObjectStore, list_all};
use crate::retry::{Retrier, is_not_found};

/// Counters of the cloud tier (beyond the generic I/O counters).
#[derive(Debug, Default)]
pub struct CloudCounters {
    /// Objects uploaded (data and envelope objects).
    pub uploads: AtomicU64,
    /// Bytes uploaded.
    pub upload_bytes: AtomicU64,
    /// Conditional writes whose outcome was settled by reading the object back.
    pub read_backs: AtomicU64,
    /// Deletions of data objects postponed because the object was younger than the minimum
    /// age.
    pub deferred_deletes: AtomicU64,
    /// Writes refused because a newer owner took over (or a GC lease was lost).
    pub fenced: AtomicU64,
    /// Terms this instance gave up because a manifest upload's outcome stayed unknown.
    pub burnt_terms: AtomicU64,
}

/// What kind of object a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Data,
    /// Log files: a sequence of segment objects (`cloud/logs.rs`).
    Log,
    Manifest,
    CurrentTerm,
    GcLease,
    /// Archives and anything else: enveloped, written plainly.
    Other,
}

impl Kind {
    /// Objects that change by compare-and-swap (numbered versions without If-Match).
    fn swapped(self) -> bool {
        matches!(self, Kind::Manifest | Kind::CurrentTerm | Kind::GcLease)
    }
}

fn kind_of(path: &str) -> Kind {
    let name = path.rsplit('/').next().unwrap_or(path);
    match parse_file_name(name) {
        Ok(FileKind::Data(_)) => Kind::Data,
        Ok(FileKind::Log(_)) => Kind::Log,
        Ok(FileKind::Manifest(_)) => Kind::Manifest,
        Ok(FileKind::CurrentTerm(_)) => Kind::CurrentTerm,
        Ok(FileKind::GcLease) => Kind::GcLease,
        _ => Kind::Other,
    }
}

/// The last version of an envelope object this instance read or wrote.
#[derive(Debug, Clone)]
struct Doc {
    etag: Option<Etag>,
    payload: Arc<Vec<u8>>,
    sealed: bool,
    /// For a manifest chain: APPEND versions above its newest FULL one.
    chain: u32,
}

/// The contents of a file being written.
#[derive(Debug)]
enum BufState {
    Open(Vec<u8>),
    /// A data file after its upload: reads go through the cache.
    Uploaded {
        len: u64,
    },
}

#[derive(Debug)]
struct Buf {
    kind: Kind,
    state: RwLock<BufState>,
}

struct Inner {
    store: Arc<dyn ObjectStore>,
    retry: Retrier,
    cache: DiskCache,
    min_delete_age_ms: u64,
    gc_lease_ms: u64,
    fencing: Fencing,
    /// PUTs are atomic: a torn envelope is damage, not a read racing a write.
    atomic_put: bool,
    /// GC leases held by this instance, by partition directory.
    leases: Mutex<HashMap<String, Weak<lease::LeaseState>>>,
    clock: MsClock,
    instance: u64,
    seq: AtomicU64,
    docs: Mutex<HashMap<String, Doc>>,
    owned: Mutex<HashSet<String>>,
    /// Files open for writing: data files until uploaded, other files while a handle lives.
    bufs: Mutex<HashMap<String, Weak<Buf>>>,
    /// Data files written but not uploaded yet (the only copy is here).
    pending: Mutex<HashMap<String, Arc<Buf>>>,
    /// Log files open for writing here.
    logs: Mutex<HashMap<String, Weak<LogFile>>>,
    /// Segments read of each log file (the fewest since the last fence): where a takeover
    /// fences it (`cloud/logs.rs`).
    log_seen: Mutex<HashMap<String, u32>>,
    dirs: Mutex<BTreeSet<String>>,
    stats: IoStats,
    counters: CloudCounters,
    /// `CloudConfig::range_read_bytes` (0: whole objects).
    range_bytes: u64,
    /// The ranges read last from each object, to tell a scan (`ranges.rs`).
    recent_ranges: Mutex<ranges::RecentRanges>,
    /// Range fetches in flight, so concurrent readers send one GET per range.
    range_flights: ranges::RangeFlights,
    /// Lengths of data objects already seen, so opening one again sends no HEAD.
    sizes: sizes::ObjectSizes,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CloudStorage")
            .field("store", &self.store)
            .field("cache", &self.cache)
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

/// A [`Storage`] whose durable copy lives in an object store (see the module docs).
#[derive(Debug, Clone)]
pub struct CloudStorage {
    inner: Arc<Inner>,
}

fn obj_err(path: &str, e: ObjectError) -> IoError {
    match e {
        ObjectError::NotFound { .. } => IoError::NotFound { path: path.into() },
        ObjectError::PreconditionFailed { .. } => IoError::AlreadyExists { path: path.into() },
        ObjectError::Unsupported { what } => IoError::Unsupported { what },
        ObjectError::Transient {
            op,
            reason,
            message,
            ..
        } => IoError::os(
            op,
            path,
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("object store: {reason:?}: {message} (retries exhausted)"),
            ),
        ),
        ObjectError::Other { op, message, .. } => IoError::os(
            op,
            path,
            std::io::Error::other(format!("object store: {message}")),
        ),
    }
}

fn invalid(path: &str, why: &str) -> IoError {
    IoError::InvalidArgument {
        what: format!("path {path:?}: {why}"),
    }
}

fn check_path(path: &str, file: bool) -> IoResult<()> {
    if path.is_empty() {
        return if file {
            Err(invalid(path, "empty path"))
        } else {
            Ok(())
        };
    }
    if path.contains('\0') || path.starts_with('/') {
        return Err(invalid(path, "absolute path or NUL byte"));
    }
    if path
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(invalid(path, "empty, `.` or `..` path component"));
    }
    Ok(())
}

fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(p, _)| p)
}

fn system_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// How a conditional write ended.
enum Cond {
    /// Our bytes are the object's current version.
    Won(Option<Etag>),
    /// Someone else's version is there (or nothing: the object was deleted).
    Lost(Option<(Envelope, Option<Etag>)>),
}

impl CloudStorage {
    /// Opens the cloud tier over `store`, caching data objects in the local directory
    /// `cache_dir` (created if missing; data files already there are reused, up to the
    /// budget). Picks the fencing mode from the store's guarantees and `cfg.fencing`, and
    /// refuses a store that cannot be fenced ([`select_fencing`]).
    pub fn open(
        store: Arc<dyn ObjectStore>,
        cache_dir: impl AsRef<Path>,
        cfg: &CloudConfig,
        clock: Option<MsClock>,
    ) -> IoResult<CloudStorage> {
        cfg.validate_tier().map_err(|e| IoError::InvalidArgument {
            what: e.to_string(),
        })?;
        let g = store.guarantees();
        let fencing =
            select_fencing(store.service(), &g, cfg.fencing, cfg.test_only).map_err(|r| {
                IoError::Unsupported {
                    what: r.to_string(),
                }
            })?;
        let local = PreadStorage::new(cache_dir)?;
        let cache = DiskCache::open(local, cfg.cache_bytes)?;
        let instance = if cfg.writer_id != 0 {
            cfg.writer_id
        } else {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            nanos ^ (u64::from(std::process::id()) << 40) ^ 0x9e37_79b9_7f4a_7c15
        };
        tracing::info!(
            service = store.service(),
            cache_bytes = cfg.cache_bytes,
            ?fencing,
            "object storage opened"
        );
        Ok(CloudStorage {
            inner: Arc::new(Inner {
                store,
                retry: Retrier::new(cfg.retry, instance),
                cache,
                min_delete_age_ms: cfg.min_delete_age_ms,
                gc_lease_ms: cfg.gc_lease_ms,
                fencing,
                atomic_put: g.atomic_put,
                leases: Mutex::default(),
                clock: clock.unwrap_or_else(|| Arc::new(system_ms)),
                instance,
                seq: AtomicU64::new(1),
                docs: Mutex::default(),
                owned: Mutex::default(),
                bufs: Mutex::default(),
                pending: Mutex::default(),
                logs: Mutex::default(),
                log_seen: Mutex::default(),
                dirs: Mutex::default(),
                stats: IoStats::default(),
                counters: CloudCounters::default(),
                range_bytes: cfg.range_read_bytes,
                recent_ranges: Mutex::default(),
                range_flights: ranges::RangeFlights::default(),
                sizes: sizes::ObjectSizes::default(),
            }),
        })
    }

    /// The object store.
    pub fn object_store(&self) -> &Arc<dyn ObjectStore> {
        &self.inner.store
    }

    /// Bytes held by the local cache now.
    pub fn cache_used(&self) -> u64 {
        self.inner.cache.used()
    }

    /// The cache's byte budget.
    pub fn cache_budget(&self) -> u64 {
        self.inner.cache.budget()
    }

    /// Files in the local cache.
    pub fn cache_files(&self) -> usize {
        self.inner.cache.files()
    }

    /// Cache counters (hits, downloads, evictions, peak bytes).
    pub fn cache_stats(&self) -> &CacheStats {
        &self.inner.cache.stats
    }

    /// Cloud counters (uploads, read-backs, deferred deletes, fenced writes).
    pub fn counters(&self) -> &CloudCounters {
        &self.inner.counters
    }

    /// How this store fences terms.
    pub fn fencing(&self) -> Fencing {
        self.inner.fencing
    }

    /// Claims the GC lease of partition directory `dir` (`Busy` while another process, or
    /// another GC of this one, holds it). Data objects of `dir` can be deleted only while
    /// the returned lease is held; once another process has taken it over, deletions are
    /// `Fenced`.
    pub fn acquire_gc_lease(&self, dir: &str) -> IoResult<GcLease> {
        self.inner.acquire_gc_lease(dir)
    }
}

impl Inner {
    fn token(&self) -> u128 {
        (u128::from(self.instance) << 64) | u128::from(self.seq.fetch_add(1, Ordering::Relaxed))
    }

    fn count_upload(&self, bytes: usize) {
        self.counters.uploads.fetch_add(1, Ordering::Relaxed);
        self.counters
            .upload_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
        self.stats.add_write(bytes);
        self.stats.add_sync();
    }

    /// Whether `kind` is kept as numbered versions here: manifests always (a chain whose
    /// commits append versions, so a commit uploads only its own record), `CURRENT_TERM`
    /// and the GC lease on services without If-Match.
    fn claims_for(&self, kind: Kind) -> bool {
        kind == Kind::Manifest || (self.fencing == Fencing::NumberedClaims && kind.swapped())
    }
}

impl CloudFile {}

/// Deletes every object under the store's root (tests and tooling).
pub fn wipe(store: &dyn ObjectStore) -> Result<usize, ObjectError> {
    let keys: Vec<String> = list_all(store, "")?.into_iter().map(|o| o.key).collect();
    store.delete_batch(&keys)?;
    Ok(keys.len())
}
