//! [`CloudStorage`]: the [`Storage`] trait over an object store, with a bounded local cache.
//!
//! How file operations become object operations (details in docs/format.md, "Object
//! storage layout"):
//!
//! - **Data files** (`data_*`) are written once. While written they live in memory; their
//!   `sync` uploads the whole file as one object with create-if-absent, then the bytes move
//!   to the disk cache (if they fit) and the memory is freed. Reads go through the cache,
//!   downloading a whole object on a miss (or reading ranges when it cannot fit).
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
mod lease;

pub use lease::{GcLease, LEASE_RECORD_LEN, LEASE_RELEASED, LeaseRecord};

use std::collections::{BTreeSet, HashMap, HashSet};
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

/// Why a service cannot hold a Bough store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No atomic create-if-absent: data objects, new manifests and numbered claims could be
    /// overwritten. Nothing can be fenced without it.
    NoConditionalCreate { service: String },
    /// Compare-and-swap fencing was asked for, but the service has no If-Match.
    NoCompareAndSwap { service: String },
    /// PUTs may be observed half-done (accepted only with `test_only`).
    NoAtomicPut { service: String },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NoConditionalCreate { service } => write!(
                f,
                "object store {service} has no atomic conditional create (If-None-Match), \
                 which every fencing mode needs"
            ),
            Refusal::NoCompareAndSwap { service } => write!(
                f,
                "object store {service} has no compare-and-swap (If-Match on the ETag), which \
                 `fencing = \"compare_and_swap\"` needs (use `auto` or `numbered_claims`)"
            ),
            Refusal::NoAtomicPut { service } => write!(
                f,
                "object store {service} does not publish PUTs atomically (tests only: set \
                 `test_only = true`)"
            ),
        }
    }
}

/// How this store fences terms (see [`FencingMode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fencing {
    /// Single objects, updated with If-Match.
    CompareAndSwap,
    /// Numbered versions, each created with create-if-absent.
    NumberedClaims,
}

/// The fencing a service with `g` gets when `wanted` is asked for, or why it cannot hold
/// a store. `test_only` accepts a service whose PUTs are not atomic.
pub fn select_fencing(
    service: &str,
    g: &Guarantees,
    wanted: FencingMode,
    test_only: bool,
) -> Result<Fencing, Refusal> {
    let service = service.to_string();
    if !g.atomic_put && !test_only {
        return Err(Refusal::NoAtomicPut { service });
    }
    if !g.conditional_create {
        return Err(Refusal::NoConditionalCreate { service });
    }
    match wanted {
        FencingMode::CompareAndSwap if !g.compare_and_swap => {
            Err(Refusal::NoCompareAndSwap { service })
        }
        FencingMode::CompareAndSwap => Ok(Fencing::CompareAndSwap),
        FencingMode::NumberedClaims => Ok(Fencing::NumberedClaims),
        FencingMode::Auto if g.compare_and_swap => Ok(Fencing::CompareAndSwap),
        FencingMode::Auto => Ok(Fencing::NumberedClaims),
    }
}

/// Checks that a store can hold a Bough store with automatic fencing, and which fencing
/// it gets.
pub fn check_guarantees(store: &dyn ObjectStore) -> Result<Fencing, Refusal> {
    select_fencing(
        store.service(),
        &store.guarantees(),
        FencingMode::Auto,
        false,
    )
}

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

/// What [`CloudStorage::prewarm`] loaded.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PrewarmReport {
    /// Data objects downloaded into the cache.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Data objects already cached (a warm cache), left as they were.
    pub already_cached: usize,
    /// Data objects left out because the budget was full.
    pub skipped: usize,
}

/// What kind of object a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Data,
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
    dirs: Mutex<BTreeSet<String>>,
    stats: IoStats,
    counters: CloudCounters,
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
                dirs: Mutex::default(),
                stats: IoStats::default(),
                counters: CloudCounters::default(),
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

    /// Loads the most recently written data objects into the cache, newest first, within
    /// the space the budget has left (nothing cached is evicted for them). Objects already
    /// cached are kept as they are.
    pub fn prewarm(&self) -> IoResult<PrewarmReport> {
        let inner = &self.inner;
        let all = inner
            .retry
            .simple("list", || list_all(inner.store.as_ref(), ""))
            .map_err(|e| obj_err("", e))?;
        let mut data: Vec<crate::object::ObjectMeta> = all
            .into_iter()
            .filter(|o| kind_of(&o.key) == Kind::Data)
            .collect();
        // Newest first; objects without a time go last.
        data.sort_by_key(|o| std::cmp::Reverse(o.last_modified_ms.unwrap_or(0)));
        let mut report = PrewarmReport::default();
        let mut free = inner.cache.budget().saturating_sub(inner.cache.used());
        let mut chosen = Vec::new();
        for o in data {
            if inner.cache.contains(&o.key) {
                report.already_cached += 1;
            } else if o.size <= free {
                free -= o.size;
                chosen.push(o);
            } else {
                report.skipped += 1;
            }
        }
        // Oldest of the chosen first, so the newest end up most recently used.
        for o in chosen.into_iter().rev() {
            let bytes = inner.download(&o.key)?;
            if bytes.len() as u64 != o.size {
                return Err(IoError::corruption(
                    &o.key,
                    0,
                    format!("object holds {} bytes, listed as {}", bytes.len(), o.size),
                ));
            }
            if inner.cache.insert(&o.key, &bytes)?.is_some() {
                report.files += 1;
                report.bytes += o.size;
                inner.cache.stats.prewarmed.fetch_add(1, Ordering::Relaxed);
            }
        }
        tracing::info!(
            files = report.files,
            bytes = report.bytes,
            already_cached = report.already_cached,
            skipped = report.skipped,
            "cache prewarmed"
        );
        Ok(report)
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

    /// Reads an envelope object and remembers its version.
    fn fetch_doc(&self, path: &str) -> IoResult<Doc> {
        if self.claims_for(kind_of(path)) {
            let c = self.claims_get(path)?;
            let doc = Doc {
                etag: c.meta.etag,
                sealed: c.env.sealed(),
                payload: Arc::new(c.env.payload),
                chain: c.chain,
            };
            self.docs.lock().insert(path.to_string(), doc.clone());
            return Ok(doc);
        }
        let (env, meta) = self
            .get_envelope(path)?
            .ok_or_else(|| IoError::NotFound { path: path.into() })?;
        let sealed = env.sealed();
        let doc = Doc {
            etag: meta.etag,
            payload: Arc::new(env.payload),
            sealed,
            chain: 0,
        };
        self.docs.lock().insert(path.to_string(), doc.clone());
        Ok(doc)
    }

    /// The envelope object at `key`, `None` when there is none. Without atomic PUTs (the fs
    /// service) a read can meet a write in progress: it is read again a few times before
    /// being called damage.
    fn get_envelope(&self, key: &str) -> IoResult<Option<(Envelope, crate::object::ObjectMeta)>> {
        let mut torn = 0;
        loop {
            let (bytes, meta) = match self
                .retry
                .simple("get", || get_full(self.store.as_ref(), key))
            {
                Ok(got) => got,
                Err(e) if is_not_found(&e) => return Ok(None),
                Err(e) => return Err(obj_err(key, e)),
            };
            match Envelope::decode(&bytes) {
                Ok(env) => {
                    self.stats.add_read(bytes.len());
                    return Ok(Some((env, meta)));
                }
                Err(_) if !self.atomic_put && torn < 8 => {
                    torn += 1;
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Err(r) => return Err(IoError::corruption(key, 0, r)),
            }
        }
    }

    /// A conditional write of an envelope object: If-Match `etag`, or If-None-Match when
    /// `etag` is `None`. A lost or unresolved outcome is settled by reading back.
    fn put_cond(&self, path: &str, env: &Envelope, etag: Option<&str>) -> IoResult<Cond> {
        if self.claims_for(kind_of(path)) {
            return self.claims_put_cond(path, env, etag);
        }
        let body = env.encode();
        let out = self.retry.run("put_cond", || match etag {
            Some(e) => self.store.put_if_match(path, &body, e),
            None => self.store.put_if_absent(path, &body),
        });
        match out.result {
            Ok(new) => {
                self.count_upload(body.len());
                Ok(Cond::Won(new))
            }
            Err(ObjectError::PreconditionFailed { .. }) => self.read_back(path, env.token),
            Err(e) if out.maybe_applied || e.may_have_applied() => {
                // Out of retries, and an attempt may have landed: look before answering.
                match self.read_back(path, env.token) {
                    Ok(Cond::Won(etag)) => Ok(Cond::Won(etag)),
                    _ => Err(obj_err(path, e)),
                }
            }
            Err(e) => Err(obj_err(path, e)),
        }
    }

    fn read_back(&self, path: &str, token: u128) -> IoResult<Cond> {
        self.counters.read_backs.fetch_add(1, Ordering::Relaxed);
        match self
            .retry
            .simple("get", || get_full(self.store.as_ref(), path))
        {
            Ok((bytes, meta)) => {
                let env = Envelope::decode(&bytes).map_err(|r| IoError::corruption(path, 0, r))?;
                if env.token == token {
                    tracing::debug!(path, "conditional write landed on an earlier attempt");
                    self.count_upload(bytes.len());
                    Ok(Cond::Won(meta.etag))
                } else {
                    Ok(Cond::Lost(Some((env, meta.etag))))
                }
            }
            Err(e) if is_not_found(&e) => Ok(Cond::Lost(None)),
            Err(e) => Err(obj_err(path, e)),
        }
    }

    /// The ETag of a version we just wrote, asking the store if the write did not say.
    fn etag_after(&self, path: &str, etag: Option<Etag>) -> IoResult<Option<Etag>> {
        match etag {
            Some(e) => Ok(Some(e)),
            None => Ok(self.head_of(path)?.etag),
        }
    }

    /// Metadata of the object a path names (the newest version with numbered claims).
    fn head_of(&self, path: &str) -> IoResult<crate::object::ObjectMeta> {
        if self.claims_for(kind_of(path)) {
            return self.claims_head(path);
        }
        self.retry
            .simple("head", || self.store.head(path))
            .map_err(|e| obj_err(path, e))
    }

    fn fenced(&self, path: &str, why: &str) -> IoError {
        self.counters.fenced.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(path, why, "write refused: a newer owner holds this branch");
        IoError::Fenced {
            what: format!("{path}: {why}"),
        }
    }

    /// Publishes the whole contents of an envelope file.
    fn publish(&self, path: &str, kind: Kind, payload: &[u8], create_new: bool) -> IoResult<()> {
        let env = Envelope {
            flags: 0,
            token: self.token(),
            payload: payload.to_vec(),
        };
        match kind {
            Kind::Data => Err(invalid(path, "data files are not envelope objects")),
            Kind::GcLease => Err(invalid(
                path,
                "the GC lease is written only by acquiring and renewing it",
            )),
            Kind::Manifest | Kind::CurrentTerm => {
                let known = self.docs.lock().get(path).cloned();
                if kind == Kind::Manifest && !create_new {
                    if !self.owned.lock().contains(path) {
                        return Err(self.fenced(
                            path,
                            "this process did not create this manifest; writing it needs a new \
                             term (take the branch over)",
                        ));
                    }
                    if known.as_ref().is_some_and(|d| d.sealed) {
                        return Err(self.fenced(path, "sealed by a newer owner"));
                    }
                }
                let etag = if create_new {
                    None
                } else {
                    known.as_ref().and_then(|d| d.etag.clone())
                };
                // A commit that only appended to the version this instance wrote or read
                // uploads just the appended bytes, as the next version of the chain.
                let append_to = known.as_ref().filter(|d| {
                    kind == Kind::Manifest
                        && etag.is_some()
                        && d.chain < claims::MAX_CHAIN
                        && payload.len() > d.payload.len()
                        && payload.starts_with(&d.payload)
                });
                let wire = match append_to {
                    Some(d) => Envelope {
                        flags: FLAG_APPEND,
                        token: env.token,
                        payload: AppendPayload::encode(
                            d.payload.len() as u64,
                            &payload[d.payload.len()..],
                        ),
                    },
                    None => env.clone(),
                };
                let chain = append_to.map_or(0, |d| d.chain + 1);
                let outcome = match self.put_cond(path, &wire, etag.as_deref()) {
                    Ok(c) => c,
                    Err(e) => {
                        self.unresolved(path, kind, &e);
                        return Err(e);
                    }
                };
                match outcome {
                    Cond::Won(e) => {
                        let etag = self.etag_after(path, e)?;
                        self.docs.lock().insert(
                            path.to_string(),
                            Doc {
                                etag,
                                payload: Arc::new(env.payload),
                                sealed: false,
                                chain,
                            },
                        );
                        if kind == Kind::Manifest {
                            self.owned.lock().insert(path.to_string());
                        }
                        Ok(())
                    }
                    Cond::Lost(theirs) => {
                        if create_new {
                            if let Some((theirs, etag)) = theirs {
                                self.remember(path, theirs, etag);
                            }
                            return Err(IoError::AlreadyExists { path: path.into() });
                        }
                        if kind == Kind::CurrentTerm
                            && let Some((t, etag)) = &theirs
                            && t.payload == env.payload
                            && !t.sealed()
                        {
                            // Someone wrote exactly this record (a recovery finishing the
                            // same step): the state we wanted holds.
                            let (t, etag) = (t.clone(), etag.clone());
                            self.remember(path, t, etag);
                            return Ok(());
                        }
                        match theirs {
                            Some((t, etag)) => {
                                self.remember(path, t, etag);
                                Err(self.fenced(path, "changed by another writer"))
                            }
                            None => {
                                self.docs.lock().remove(path);
                                Err(self.fenced(path, "deleted by a newer owner"))
                            }
                        }
                    }
                }
            }
            Kind::Other => {
                let body = env.encode();
                let r = if create_new {
                    match self.put_cond(path, &env, None)? {
                        Cond::Won(_) => Ok(()),
                        Cond::Lost(_) => Err(IoError::AlreadyExists { path: path.into() }),
                    }
                } else {
                    let r = self
                        .retry
                        .simple("put", || self.store.put(path, &body))
                        .map_err(|e| obj_err(path, e));
                    if r.is_ok() {
                        self.count_upload(body.len());
                    }
                    r.map(|_| ())
                };
                if r.is_ok() {
                    self.docs.lock().insert(
                        path.to_string(),
                        Doc {
                            etag: None,
                            payload: Arc::new(env.payload),
                            sealed: false,
                            chain: 0,
                        },
                    );
                }
                r
            }
        }
    }

    /// A conditional write of a manifest or `CURRENT_TERM` failed without a known outcome:
    /// what this instance remembers of the object may be stale, so it is forgotten (the
    /// next reader fetches it). For a manifest this also ends the ownership of its term:
    /// the head is poisoned, and writing the term again after a reopen could reuse data
    /// file names the failed commit uploaded, or overwrite a commit that did land. A reopen
    /// takes the branch over at a new term instead.
    fn unresolved(&self, path: &str, kind: Kind, e: &IoError) {
        self.docs.lock().remove(path);
        if kind == Kind::Manifest && self.owned.lock().remove(path) {
            self.counters.burnt_terms.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                manifest = path,
                error = %e,
                "manifest upload outcome unknown: this term is given up; reopen to continue at a new term"
            );
        }
    }

    fn remember(&self, path: &str, env: Envelope, etag: Option<Etag>) {
        self.docs.lock().insert(
            path.to_string(),
            Doc {
                etag,
                sealed: env.sealed(),
                payload: Arc::new(env.payload),
                // Unknown here: the next write of this instance starts a FULL version.
                chain: claims::MAX_CHAIN,
            },
        );
    }

    /// Before creating `manifest_<b>_<t>`, seals `manifest_<b>_<t-1>` if this instance read
    /// it: after that, its writer can no longer commit, so the state the new manifest
    /// starts from is final.
    fn seal_predecessor(&self, path: &str) -> IoResult<()> {
        let dir = parent_of(path);
        let name = path.rsplit('/').next().unwrap_or(path);
        let Ok(FileKind::Manifest(m)) = parse_file_name(name) else {
            return Ok(());
        };
        if m.term == 0 {
            return Ok(());
        }
        let prev_name = ManifestName::new(m.branch.clone(), m.term - 1).to_string();
        let prev = if dir.is_empty() {
            prev_name
        } else {
            format!("{dir}/{prev_name}")
        };
        let Some(doc) = self.docs.lock().get(&prev).cloned() else {
            return Ok(());
        };
        if doc.sealed {
            return Ok(());
        }
        let Some(etag) = doc.etag.clone() else {
            return Ok(());
        };
        let env = Envelope {
            flags: FLAG_SEALED,
            token: self.token(),
            payload: doc.payload.as_ref().clone(),
        };
        match self.put_cond(&prev, &env, Some(&etag))? {
            Cond::Won(e) => {
                let etag = self.etag_after(&prev, e)?;
                self.docs.lock().insert(
                    prev.clone(),
                    Doc {
                        etag,
                        payload: doc.payload,
                        sealed: true,
                        chain: 0,
                    },
                );
                self.owned.lock().remove(&prev);
                tracing::info!(manifest = %prev, "sealed the previous term's manifest");
                Ok(())
            }
            Cond::Lost(Some((t, _))) if !t.sealed() => {
                // The previous owner committed after we read its state: our new term would
                // miss that commit. Forget what we read; the takeover must start over.
                self.docs.lock().remove(&prev);
                Err(IoError::Locked {
                    path: format!("{prev} (its owner committed during the takeover; retry it)"),
                })
            }
            Cond::Lost(_) => {
                self.docs.lock().remove(&prev);
                Err(self.fenced(&prev, "another process took this branch over first"))
            }
        }
    }

    /// Uploads a data file once (create-if-absent); an existing object with the same bytes
    /// (an earlier attempt that landed) counts as success.
    fn upload_data(&self, path: &str, bytes: &[u8]) -> IoResult<()> {
        let out = self
            .retry
            .run("put_if_absent", || self.store.put_if_absent(path, bytes));
        let same = || -> IoResult<bool> {
            self.counters.read_backs.fetch_add(1, Ordering::Relaxed);
            match self
                .retry
                .simple("get", || get_full(self.store.as_ref(), path))
            {
                Ok((theirs, _)) => Ok(theirs == bytes),
                Err(e) if is_not_found(&e) => Ok(false),
                Err(e) => Err(obj_err(path, e)),
            }
        };
        match out.result {
            Ok(_) => {}
            Err(ObjectError::PreconditionFailed { .. }) => {
                if !same()? {
                    return Err(IoError::AlreadyExists { path: path.into() });
                }
            }
            Err(e) if out.maybe_applied || e.may_have_applied() => {
                if !same()? {
                    return Err(obj_err(path, e));
                }
            }
            Err(e) => return Err(obj_err(path, e)),
        }
        self.count_upload(bytes.len());
        Ok(())
    }

    /// Whether data files of the manifest's lineage may be created here.
    fn owns_lineage_of(&self, path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        let Ok(FileKind::Data(d)) = parse_file_name(name) else {
            return true;
        };
        let m = ManifestName::new(d.branch, d.term).to_string();
        let dir = parent_of(path);
        let m = if dir.is_empty() {
            m
        } else {
            format!("{dir}/{m}")
        };
        self.owned.lock().contains(&m)
    }

    /// Reads `buf.len()` bytes at `offset` of an uploaded data object of length `len`.
    fn read_data(&self, path: &str, len: u64, offset: u64, buf: &mut [u8]) -> IoResult<()> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|e| e > len) {
            return Err(IoError::unexpected_eof(path));
        }
        if buf.is_empty() {
            return Ok(());
        }
        if let Some((f, _)) = self.cache.get(path) {
            return f.read_at(offset, buf);
        }
        if len <= self.cache.budget() {
            let bytes = self.download(path)?;
            if bytes.len() as u64 != len {
                return Err(IoError::corruption(
                    path,
                    0,
                    format!("object holds {} bytes, expected {len}", bytes.len()),
                ));
            }
            match self.cache.insert(path, &bytes)? {
                Some(f) => return f.read_at(offset, buf),
                None => {
                    buf.copy_from_slice(&bytes[offset as usize..offset as usize + buf.len()]);
                    return Ok(());
                }
            }
        }
        let got = self
            .retry
            .simple("get_range", || {
                let b = self.store.get_range(path, offset, buf.len() as u64)?;
                if b.len() != buf.len() {
                    return Err(short_body(path, b.len(), buf.len()));
                }
                Ok(b)
            })
            .map_err(|e| obj_err(path, e))?;
        buf.copy_from_slice(&got);
        Ok(())
    }

    /// Downloads a whole data object, checking its length against the metadata.
    fn download(&self, path: &str) -> IoResult<Vec<u8>> {
        let (bytes, _) = self
            .retry
            .simple("get", || get_full(self.store.as_ref(), path))
            .map_err(|e| obj_err(path, e))?;
        self.cache.stats.downloads.fetch_add(1, Ordering::Relaxed);
        Ok(bytes)
    }

    /// Whether `dir` exists: created here, or some object lives under it.
    fn dir_exists(&self, dir: &str) -> IoResult<bool> {
        if dir.is_empty() || self.dirs.lock().contains(dir) {
            return Ok(true);
        }
        let page = self
            .retry
            .simple("list", || {
                self.store.list(&format!("{dir}/"), true, None, 1)
            })
            .map_err(|e| obj_err(dir, e))?;
        let exists = !page.objects.is_empty() || !page.prefixes.is_empty();
        if exists {
            self.dirs.lock().insert(dir.to_string());
        }
        Ok(exists)
    }

    /// The file name an object of `dir` lists as: a version becomes the name of its
    /// object, the GC lease is hidden (it is the cloud tier's, not a store file). An object
    /// of the other fencing mode means the prefix was written in that mode: refused, since
    /// the two modes must never share a prefix.
    fn listed_name(&self, dir: &str, name: &str) -> IoResult<Option<String>> {
        let claims = self.fencing == Fencing::NumberedClaims;
        let mode_error = |what: &str| IoError::InvalidArgument {
            what: format!(
                "{dir}/{name}: {what}; this prefix was written with the other fencing mode \
                 (set `fencing` to match it)"
            ),
        };
        Ok(match parse_file_name(name) {
            Ok(FileKind::GcLease) if !claims => None,
            // Manifests are chains of versions in either mode.
            Ok(FileKind::Version(v)) if matches!(v.target, VersionTarget::Manifest(_)) => {
                Some(v.target.to_string())
            }
            Ok(FileKind::Version(v)) if claims => match v.target {
                VersionTarget::GcLease => None,
                t => Some(t.to_string()),
            },
            Ok(FileKind::Version(_)) => {
                return Err(mode_error(
                    "a numbered version, but this store fences by compare-and-swap",
                ));
            }
            Ok(FileKind::Manifest(_)) => {
                return Err(IoError::InvalidArgument {
                    what: format!(
                        "{dir}/{name}: a manifest kept as one object, an older layout of this \
                         tier (manifests are chains of numbered versions now); it cannot be \
                         read or fenced here"
                    ),
                });
            }
            Ok(FileKind::CurrentTerm(_) | FileKind::GcLease) if claims => {
                return Err(mode_error(
                    "a single swapped object, but this store fences by numbered claims",
                ));
            }
            _ => Some(name.to_string()),
        })
    }

    fn live_buf(&self, path: &str) -> Option<Arc<Buf>> {
        if let Some(b) = self.pending.lock().get(path) {
            return Some(b.clone());
        }
        self.bufs.lock().get(path).and_then(Weak::upgrade)
    }
}

/// A whole object, refusing a body shorter or longer than its metadata says (a cut-off
/// transfer), as a transient error so it is retried.
fn get_full(
    store: &dyn ObjectStore,
    path: &str,
) -> Result<(Vec<u8>, crate::object::ObjectMeta), ObjectError> {
    let (b, meta) = store.get(path)?;
    if b.len() as u64 != meta.size {
        return Err(short_body(path, b.len(), meta.size as usize));
    }
    Ok((b, meta))
}

fn short_body(path: &str, got: usize, want: usize) -> ObjectError {
    ObjectError::Transient {
        op: "get",
        key: path.to_string(),
        reason: crate::object::Transient::Network,
        message: format!("body cut off: {got} of {want} bytes"),
    }
}

/// An open file of a [`CloudStorage`].
#[derive(Debug)]
struct CloudFile {
    inner: Arc<Inner>,
    path: String,
    writable: bool,
    body: FileBody,
}

#[derive(Debug)]
enum FileBody {
    /// A buffer shared by every handle of the file.
    Buf(Arc<Buf>),
    /// An uploaded data object of this length.
    Sealed(u64),
}

impl CloudFile {
    fn check_writable(&self, op: &'static str) -> IoResult<()> {
        if !self.writable {
            return Err(IoError::errno(op, &self.path, libc::EBADF));
        }
        Ok(())
    }

    fn sealed_error(&self) -> IoError {
        IoError::InvalidArgument {
            what: format!(
                "{}: a data object is written once; it was already uploaded",
                self.path
            ),
        }
    }
}

impl StorageFile for CloudFile {
    fn path(&self) -> &str {
        &self.path
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> IoResult<()> {
        match &self.body {
            FileBody::Sealed(len) => {
                self.inner.read_data(&self.path, *len, offset, buf)?;
            }
            FileBody::Buf(b) => {
                let st = b.state.read();
                match &*st {
                    BufState::Open(data) => {
                        let end = offset.checked_add(buf.len() as u64);
                        if end.is_none_or(|e| e > data.len() as u64) {
                            return Err(IoError::unexpected_eof(&self.path));
                        }
                        let o = offset as usize;
                        buf.copy_from_slice(&data[o..o + buf.len()]);
                    }
                    BufState::Uploaded { len } => {
                        let len = *len;
                        drop(st);
                        self.inner.read_data(&self.path, len, offset, buf)?;
                    }
                }
            }
        }
        self.inner.stats.add_read(buf.len());
        Ok(())
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> IoResult<()> {
        self.check_writable("write")?;
        let FileBody::Buf(b) = &self.body else {
            return Err(self.sealed_error());
        };
        let mut st = b.state.write();
        let BufState::Open(data) = &mut *st else {
            return Err(self.sealed_error());
        };
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= bough_io::memory::MAX_MEMORY_FILE_LEN)
            .ok_or_else(|| IoError::errno("write", &self.path, libc::EFBIG))?;
        if buf.is_empty() {
            return Ok(());
        }
        if (data.len() as u64) < end {
            data.resize(end as usize, 0);
        }
        data[offset as usize..end as usize].copy_from_slice(buf);
        Ok(())
    }

    fn sync(&self) -> IoResult<()> {
        let FileBody::Buf(b) = &self.body else {
            return Ok(());
        };
        if !self.writable {
            return Ok(());
        }
        if b.kind == Kind::Data {
            let mut st = b.state.write();
            let BufState::Open(data) = &*st else {
                return Ok(());
            };
            self.inner.upload_data(&self.path, data)?;
            // The bytes are durable in the store: keep a cached copy if it fits, then free
            // the memory.
            if let Err(e) = self.inner.cache.insert(&self.path, data) {
                tracing::warn!(path = %self.path, error = %e, "could not cache an uploaded data file");
            }
            let len = data.len() as u64;
            *st = BufState::Uploaded { len };
            drop(st);
            self.inner.pending.lock().remove(&self.path);
            return Ok(());
        }
        let payload = match &*b.state.read() {
            BufState::Open(data) => data.clone(),
            BufState::Uploaded { .. } => return Ok(()),
        };
        self.inner.publish(&self.path, b.kind, &payload, false)
    }

    fn len(&self) -> IoResult<u64> {
        Ok(match &self.body {
            FileBody::Sealed(len) => *len,
            FileBody::Buf(b) => match &*b.state.read() {
                BufState::Open(d) => d.len() as u64,
                BufState::Uploaded { len } => *len,
            },
        })
    }

    fn set_len(&self, len: u64) -> IoResult<()> {
        self.check_writable("set_len")?;
        let FileBody::Buf(b) = &self.body else {
            return Err(self.sealed_error());
        };
        let mut st = b.state.write();
        match &mut *st {
            BufState::Open(d) => {
                d.resize(len as usize, 0);
                Ok(())
            }
            BufState::Uploaded { len: l } if *l == len => Ok(()),
            BufState::Uploaded { .. } => Err(self.sealed_error()),
        }
    }

    fn preallocate(&self, _offset: u64, _len: u64) -> IoResult<()> {
        // Nothing to reserve: the file lives in memory until it is uploaded.
        self.check_writable("preallocate")
    }
}

impl Storage for CloudStorage {
    fn kind(&self) -> BackendKind {
        BackendKind::Object
    }

    fn open(&self, path: &str, opts: OpenOptions) -> IoResult<Arc<dyn StorageFile>> {
        check_path(path, true)?;
        let inner = &self.inner;
        let creating = opts.create || opts.create_new;
        let writable = opts.write || creating;
        if inner.dirs.lock().contains(path) {
            return Err(IoError::errno("open", path, libc::EISDIR));
        }
        let kind = kind_of(path);
        let file = |body: FileBody| -> Arc<dyn StorageFile> {
            Arc::new(CloudFile {
                inner: inner.clone(),
                path: path.to_string(),
                writable,
                body,
            })
        };
        // A file already open for writing here: share its buffer.
        if let Some(b) = inner.live_buf(path) {
            if opts.create_new {
                return Err(IoError::AlreadyExists { path: path.into() });
            }
            return Ok(file(FileBody::Buf(b)));
        }
        if creating && !inner.dir_exists(parent_of(path))? {
            return Err(IoError::NotFound {
                path: parent_of(path).into(),
            });
        }
        if kind == Kind::Data {
            if writable {
                if !creating {
                    return Err(IoError::InvalidArgument {
                        what: format!("{path}: data objects are written once; open read-only"),
                    });
                }
                if !inner.owns_lineage_of(path) {
                    return Err(inner.fenced(
                        path,
                        "this process does not own the term this data file belongs to",
                    ));
                }
                let b = Arc::new(Buf {
                    kind,
                    state: RwLock::new(BufState::Open(Vec::new())),
                });
                inner.pending.lock().insert(path.to_string(), b.clone());
                return Ok(file(FileBody::Buf(b)));
            }
            if let Some((_, size)) = inner.cache.get(path) {
                return Ok(file(FileBody::Sealed(size)));
            }
            let meta = inner
                .retry
                .simple("head", || inner.store.head(path))
                .map_err(|e| obj_err(path, e))?;
            if meta.size <= inner.cache.budget() {
                // Download on open: the header is read next anyway.
                let bytes = inner.download(path)?;
                inner.cache.insert(path, &bytes)?;
            }
            return Ok(file(FileBody::Sealed(meta.size)));
        }
        // An envelope file: its contents come from the store (or start empty). A writer
        // starts from the version this instance last saw, if any: its upload is conditional
        // on that version's ETag, so a stale start can only fail, never overwrite.
        let known = if writable {
            inner.docs.lock().get(path).cloned()
        } else {
            None
        };
        let fetched = match known {
            Some(d) => Ok(d),
            None => inner.fetch_doc(path),
        };
        let current = match fetched {
            Ok(d) => Some(d.payload.as_ref().clone()),
            Err(e) if e.kind() == bough_io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        if opts.create_new && current.is_some() {
            return Err(IoError::AlreadyExists { path: path.into() });
        }
        let data = match current {
            Some(d) => d,
            None if creating => Vec::new(),
            None => return Err(IoError::NotFound { path: path.into() }),
        };
        let b = Arc::new(Buf {
            kind,
            state: RwLock::new(BufState::Open(data)),
        });
        if writable {
            inner
                .bufs
                .lock()
                .insert(path.to_string(), Arc::downgrade(&b));
        }
        Ok(file(FileBody::Buf(b)))
    }

    fn read_file(&self, path: &str, max_len: u64) -> IoResult<Vec<u8>> {
        check_path(path, true)?;
        let inner = &self.inner;
        let too_long = |len: u64| {
            IoError::corruption(
                path,
                max_len,
                format!("file is {len} bytes, longer than the limit of {max_len}"),
            )
        };
        if kind_of(path) == Kind::Data {
            if let Some(b) = inner.pending.lock().get(path).cloned()
                && let BufState::Open(d) = &*b.state.read()
            {
                if d.len() as u64 > max_len {
                    return Err(too_long(d.len() as u64));
                }
                return Ok(d.clone());
            }
            let meta = inner
                .retry
                .simple("head", || inner.store.head(path))
                .map_err(|e| obj_err(path, e))?;
            if meta.size > max_len {
                return Err(too_long(meta.size));
            }
            let mut buf = vec![0u8; meta.size as usize];
            inner.read_data(path, meta.size, 0, &mut buf)?;
            inner.stats.add_read(buf.len());
            return Ok(buf);
        }
        // A manifest this instance owns is, in the store, exactly the version it wrote
        // last (only its owner appends to it, and a seal repeats that state): no request.
        // GC and the catalog read every manifest of a partition.
        let owned = (kind_of(path) == Kind::Manifest && inner.owned.lock().contains(path))
            .then(|| inner.docs.lock().get(path).cloned())
            .flatten();
        let doc = match owned {
            Some(d) => d,
            None => inner.fetch_doc(path)?,
        };
        if doc.payload.len() as u64 > max_len {
            return Err(too_long(doc.payload.len() as u64));
        }
        Ok(doc.payload.as_ref().clone())
    }

    fn write_atomic(&self, path: &str, bytes: &[u8]) -> IoResult<()> {
        check_path(path, true)?;
        let inner = &self.inner;
        if !inner.dir_exists(parent_of(path))? {
            return Err(IoError::NotFound {
                path: parent_of(path).into(),
            });
        }
        let kind = kind_of(path);
        if kind == Kind::Data {
            return Err(IoError::InvalidArgument {
                what: format!("{path}: data objects are written once, not replaced"),
            });
        }
        inner.publish(path, kind, bytes, false)?;
        if let Some(b) = inner.live_buf(path) {
            *b.state.write() = BufState::Open(bytes.to_vec());
        }
        Ok(())
    }

    fn create_new(&self, path: &str, bytes: &[u8]) -> IoResult<()> {
        check_path(path, true)?;
        let inner = &self.inner;
        if !inner.dir_exists(parent_of(path))? {
            return Err(IoError::NotFound {
                path: parent_of(path).into(),
            });
        }
        let kind = kind_of(path);
        if kind == Kind::Data {
            if !inner.owns_lineage_of(path) {
                return Err(inner.fenced(path, "this process does not own this data file's term"));
            }
            let out = inner
                .retry
                .run("put_if_absent", || inner.store.put_if_absent(path, bytes));
            return match out.result {
                Ok(_) => {
                    inner.count_upload(bytes.len());
                    Ok(())
                }
                Err(ObjectError::PreconditionFailed { .. }) if !out.maybe_applied => {
                    Err(IoError::AlreadyExists { path: path.into() })
                }
                Err(_) => inner.upload_data(path, bytes),
            };
        }
        if kind == Kind::Manifest {
            inner.seal_predecessor(path)?;
        }
        inner.publish(path, kind, bytes, true)
    }

    fn delete(&self, path: &str) -> IoResult<()> {
        check_path(path, true)?;
        let inner = &self.inner;
        if inner.dirs.lock().contains(path) {
            return Err(IoError::errno("delete", path, libc::EISDIR));
        }
        let kind = kind_of(path);
        if kind == Kind::Data && inner.pending.lock().remove(path).is_some() {
            // Never uploaded (or an upload that failed): nothing in the store to delete
            // here; an object an ambiguous upload left behind is garbage for GC.
            return Ok(());
        }
        if kind == Kind::GcLease {
            return Err(invalid(path, "the GC lease is released, not deleted"));
        }
        if kind == Kind::Data {
            // One process at a time deletes data objects of a partition: the GC holding its
            // lease (checked, and renewed when due, before every deletion).
            inner.check_gc_lease(parent_of(path), path)?;
        }
        if kind == Kind::Data && inner.min_delete_age_ms > 0 {
            match inner.retry.simple("head", || inner.store.head(path)) {
                Ok(meta) => {
                    let now = (inner.clock)();
                    let young = meta
                        .last_modified_ms
                        .is_some_and(|m| now.saturating_sub(m) < inner.min_delete_age_ms);
                    if young {
                        inner
                            .counters
                            .deferred_deletes
                            .fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(path, "data object too young to delete; kept for now");
                        return Ok(());
                    }
                }
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(obj_err(path, e)),
            }
        }
        if inner.claims_for(kind) {
            inner.claims_delete(path)?;
        } else {
            inner
                .retry
                .simple("delete", || inner.store.delete(path))
                .map_err(|e| obj_err(path, e))?;
        }
        inner.cache.remove(path)?;
        inner.pending.lock().remove(path);
        inner.docs.lock().remove(path);
        inner.owned.lock().remove(path);
        Ok(())
    }

    fn list(&self, dir: &str) -> IoResult<Vec<String>> {
        check_path(dir, false)?;
        let inner = &self.inner;
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let mut names: BTreeSet<String> = BTreeSet::new();
        let mut after: Option<String> = None;
        loop {
            let page = inner
                .retry
                .simple("list", || {
                    inner.store.list(&prefix, true, after.as_deref(), 1000)
                })
                .map_err(|e| obj_err(dir, e))?;
            for o in page.objects {
                if let Some(n) = o.key.strip_prefix(&prefix)
                    && !n.is_empty()
                    && !n.contains('/')
                    && let Some(name) = inner.listed_name(dir, n)?
                {
                    names.insert(name);
                }
            }
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        let local: Vec<String> = inner
            .pending
            .lock()
            .keys()
            .chain(
                inner
                    .bufs
                    .lock()
                    .iter()
                    .filter(|(_, w)| w.strong_count() > 0)
                    .map(|(k, _)| k),
            )
            .cloned()
            .collect();
        for p in local {
            if parent_of(&p) == dir {
                names.insert(p.rsplit('/').next().unwrap_or(&p).to_string());
            }
        }
        Ok(names.into_iter().collect())
    }

    fn list_dirs(&self) -> IoResult<Vec<String>> {
        let inner = &self.inner;
        let mut out: BTreeSet<String> = inner
            .dirs
            .lock()
            .iter()
            .filter(|d| !d.contains('/'))
            .cloned()
            .collect();
        let mut after: Option<String> = None;
        loop {
            let page = inner
                .retry
                .simple("list", || {
                    inner.store.list("", true, after.as_deref(), 1000)
                })
                .map_err(|e| obj_err("", e))?;
            for p in page.prefixes {
                let d = p.trim_end_matches('/').to_string();
                if !d.is_empty() {
                    inner.dirs.lock().insert(d.clone());
                    out.insert(d);
                }
            }
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        Ok(out.into_iter().collect())
    }

    fn create_dir(&self, dir: &str) -> IoResult<()> {
        check_path(dir, false)?;
        let mut dirs = self.inner.dirs.lock();
        let mut walked = String::new();
        for c in dir.split('/').filter(|c| !c.is_empty()) {
            if !walked.is_empty() {
                walked.push('/');
            }
            walked.push_str(c);
            dirs.insert(walked.clone());
        }
        Ok(())
    }

    fn remove_dir(&self, dir: &str) -> IoResult<()> {
        check_path(dir, false)?;
        if dir.is_empty() {
            return Err(invalid(dir, "cannot remove the root directory"));
        }
        let inner = &self.inner;
        let prefix = format!("{dir}/");
        let sub = inner.dirs.lock().iter().any(|d| d.starts_with(&prefix));
        let page = inner
            .retry
            .simple("list", || inner.store.list(&prefix, true, None, 1))
            .map_err(|e| obj_err(dir, e))?;
        if sub || !page.objects.is_empty() || !page.prefixes.is_empty() {
            return Err(IoError::errno("remove_dir", dir, libc::ENOTEMPTY));
        }
        inner.dirs.lock().remove(dir);
        Ok(())
    }

    fn sync_dir(&self, dir: &str) -> IoResult<()> {
        check_path(dir, false)?;
        // Object PUTs are durable when acknowledged; there are no directory entries.
        if !self.inner.dir_exists(dir)? {
            return Err(IoError::NotFound { path: dir.into() });
        }
        Ok(())
    }

    fn file_len(&self, path: &str) -> IoResult<u64> {
        check_path(path, true)?;
        let inner = &self.inner;
        if let Some(b) = inner.live_buf(path) {
            return Ok(match &*b.state.read() {
                BufState::Open(d) => d.len() as u64,
                BufState::Uploaded { len } => *len,
            });
        }
        if inner.dirs.lock().contains(path) {
            return Err(IoError::errno("stat", path, libc::EISDIR));
        }
        if kind_of(path) == Kind::Data
            && let Some((_, size)) = inner.cache.get(path)
        {
            return Ok(size);
        }
        let meta = inner.head_of(path)?;
        Ok(if kind_of(path) == Kind::Data {
            meta.size
        } else {
            meta.size
                .saturating_sub(crate::envelope::ENVELOPE_HEADER as u64)
        })
    }

    fn stats(&self) -> &IoStats {
        &self.inner.stats
    }
}

/// Deletes every object under the store's root (tests and tooling).
pub fn wipe(store: &dyn ObjectStore) -> Result<usize, ObjectError> {
    let keys: Vec<String> = list_all(store, "")?.into_iter().map(|o| o.key).collect();
    store.delete_batch(&keys)?;
    Ok(keys.len())
}
