//! The configuration of the cloud tier: where the object store is, how large the local
//! cache may grow, how requests are retried, how terms are fenced. Loadable from TOML (the
//! `[object]` table of the store options); credentials are never part of it (they come
//! from the environment).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::object::Guarantees;
use crate::retry::RetryPolicy;

/// Which opendal service holds the objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Service {
    /// Amazon S3 or an S3-compatible server (MinIO, moto, …): atomic PUT, If-None-Match and
    /// If-Match. Everything the cloud tier needs.
    #[default]
    S3,
    /// Google Cloud Storage: atomic uploads, `ifGenerationMatch=0` (create-if-absent) and
    /// `ifGenerationMatch=<generation>` (compare-and-swap on the generation, which stands in
    /// for the ETag). Built only with the `gcs` feature of `bough-object`.
    Gcs,
    /// Azure Blob Storage: atomic block-blob PUT, If-None-Match: \* and If-Match on the
    /// ETag. Built only with the `azblob` feature of `bough-object`.
    Azblob,
    /// opendal's in-process memory service: atomic create-if-absent but no If-Match, and
    /// nothing survives the process. Terms are fenced with numbered claims; needs
    /// `test_only = true`.
    Memory,
    /// opendal's local file-system service, under the directory `root`: create-if-absent
    /// is atomic (`O_EXCL`), but a PUT is written in place (readers may see it half done)
    /// and directories are never fsynced. Tests only: needs `test_only = true`.
    Fs,
}

impl Service {
    /// The configuration name (`s3`, `gcs`, …).
    pub fn name(self) -> &'static str {
        match self {
            Service::S3 => "s3",
            Service::Gcs => "gcs",
            Service::Azblob => "azblob",
            Service::Memory => "memory",
            Service::Fs => "fs",
        }
    }

    /// What the service guarantees, as declared here from its documentation and opendal
    /// 0.59's capabilities (the opendal store checks the capabilities it is built with
    /// against this and takes the weaker of the two).
    pub fn declared_guarantees(self) -> Guarantees {
        match self {
            // S3 and Azure: If-None-Match: * and If-Match on the ETag, single-request PUTs
            // published whole. Batch deletes of 1000 (S3) and 256 (Azure blob batch).
            Service::S3 => Guarantees {
                conditional_create: true,
                compare_and_swap: true,
                atomic_put: true,
                durable: true,
                max_batch_delete: 1000,
            },
            Service::Azblob => Guarantees {
                conditional_create: true,
                compare_and_swap: true,
                atomic_put: true,
                durable: true,
                max_batch_delete: 256,
            },
            // GCS has no If-Match on writes in opendal 0.59, but generation preconditions
            // (`if_version_match`), which are the same compare-and-swap.
            Service::Gcs => Guarantees {
                conditional_create: true,
                compare_and_swap: true,
                atomic_put: true,
                durable: true,
                max_batch_delete: 100,
            },
            Service::Memory => Guarantees {
                conditional_create: true,
                compare_and_swap: false,
                atomic_put: true,
                durable: false,
                max_batch_delete: 1,
            },
            // `O_EXCL` makes create-if-absent atomic, but the bytes are written in place
            // (opendal's `atomic_write_dir` would make PUTs atomic and create-if-absent a
            // racy check-then-rename: no mode has both).
            Service::Fs => Guarantees {
                conditional_create: true,
                compare_and_swap: false,
                atomic_put: false,
                durable: false,
                max_batch_delete: 1,
            },
        }
    }

    /// Whether this build of `bough-object` includes the service.
    pub fn is_built(self) -> bool {
        match self {
            Service::S3 | Service::Memory | Service::Fs => true,
            Service::Gcs => cfg!(feature = "gcs"),
            Service::Azblob => cfg!(feature = "azblob"),
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the owner of a branch term is made exclusive and a stale owner fenced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FencingMode {
    /// Compare-and-swap where the service has it, numbered claims otherwise.
    #[default]
    Auto,
    /// Manifests, `CURRENT_TERM` and the GC lease are single objects updated with If-Match
    /// (or the generation precondition). Refused on a service without it.
    CompareAndSwap,
    /// Manifests, `CURRENT_TERM` and the GC lease are kept as numbered versions
    /// (`<name>.v<n>`), each created with create-if-absent; the highest is current. Needs
    /// only conditional create (and a strongly consistent listing).
    NumberedClaims,
}

/// A configuration field that breaks a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The field, as written in the `[object]` table (`bucket`, `service`, …).
    pub field: &'static str,
    /// What is wrong with it.
    pub rule: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "object.{}: {}", self.field, self.rule)
    }
}

impl std::error::Error for ConfigError {}

/// The default [`CloudConfig::range_read_bytes`]: a cold get fetches the 256 KiB around
/// its page. On an object store a request's first byte costs far more than 256 KiB of
/// transfer (and each GET is billed), so neighbours come almost free; bytes per cold get
/// stay far below a whole data object. Measured against 64 KiB and 1 MiB in
/// `bench/results/2026-12-05/cloud-range-reads.md`.
pub const DEFAULT_RANGE_READ_BYTES: u64 = 256 << 10;
const MIN_RANGE_READ_BYTES: u64 = 4 << 10;
const MAX_RANGE_READ_BYTES: u64 = 64 << 20;

/// Configuration of the object store and of the cloud tier over it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CloudConfig {
    /// The service.
    pub service: Service,
    /// Endpoint URL (`http://127.0.0.1:5055`; for Azure `https://<account>.blob.core.
    /// windows.net`); empty = the service default (AWS, GCS).
    pub endpoint: String,
    /// Region (`us-east-1` when empty; S3 only).
    pub region: String,
    /// Bucket (S3, GCS) or container (Azure); must exist, it is never created here.
    pub bucket: String,
    /// Key prefix inside the bucket; every object of the store lives under it. For the `fs`
    /// service, the directory.
    pub root: String,
    /// Virtual-host-style addressing (`bucket.host`); path style (`host/bucket`) otherwise,
    /// which is what local S3-compatible servers need.
    pub virtual_host_style: bool,
    /// Per-request timeout in milliseconds (0 = none).
    pub request_timeout_ms: u64,
    /// Send unsigned requests when no credentials are found (public or test servers).
    pub allow_anonymous: bool,
    /// Byte budget of the local cache of data objects.
    pub cache_bytes: u64,
    /// Page-granular reads: a read of a data object the cache does not hold fetches the
    /// aligned ranges of this many bytes it touches (one ranged GET, neighbours coalesced)
    /// and caches them, instead of downloading the whole object; three ranges in a row of
    /// one object (a scan) download it whole, and scattered reads that have fetched a
    /// quarter of an object's ranges fetch the rest in one request. 0 = whole objects
    /// always, as before. At least 4096 when set.
    pub range_read_bytes: u64,
    /// Fill the cache at open with the most recently written data objects (newest first,
    /// within `cache_bytes`, never evicting what a warm cache already holds).
    pub prewarm: bool,
    /// A data object no manifest references is deleted only once it is this old (ms): a
    /// writer in another process may be about to publish it.
    pub min_delete_age_ms: u64,
    /// How long a partition's GC lease lasts without renewal (ms). GC renews it before a
    /// deletion once half of it has passed; it must exceed the clock skew between
    /// processes.
    pub gc_lease_ms: u64,
    /// How terms are fenced (see [`FencingMode`]).
    pub fencing: FencingMode,
    /// Accept services that are for tests only (`memory`, `fs`): nothing they hold is
    /// durable, and `fs` may show a PUT half done.
    pub test_only: bool,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
    /// The high 64 bits of every writer token (0 = derived from the process and the clock).
    pub writer_id: u64,
}

impl Default for CloudConfig {
    fn default() -> Self {
        CloudConfig {
            service: Service::S3,
            endpoint: String::new(),
            region: "us-east-1".into(),
            bucket: String::new(),
            root: "/".into(),
            virtual_host_style: false,
            request_timeout_ms: 30_000,
            allow_anonymous: false,
            cache_bytes: 1 << 30,
            range_read_bytes: DEFAULT_RANGE_READ_BYTES,
            prewarm: false,
            min_delete_age_ms: 10 * 60 * 1000,
            gc_lease_ms: 60_000,
            fencing: FencingMode::Auto,
            test_only: false,
            retry: RetryPolicy::default(),
            writer_id: 0,
        }
    }
}

impl CloudConfig {
    /// Checks the settings of the tier itself (cache, lease, retries), whatever store it
    /// runs over.
    pub fn validate_tier(&self) -> Result<(), ConfigError> {
        let err = |field, rule: String| Err(ConfigError { field, rule });
        if self.retry.attempts == 0 {
            return err("retry.attempts", "must be at least 1".into());
        }
        if self.retry.base_delay_ms > self.retry.max_delay_ms {
            return err(
                "retry.base_delay_ms",
                format!(
                    "{} is above retry.max_delay_ms ({})",
                    self.retry.base_delay_ms, self.retry.max_delay_ms
                ),
            );
        }
        if self.range_read_bytes != 0
            && !(MIN_RANGE_READ_BYTES..=MAX_RANGE_READ_BYTES).contains(&self.range_read_bytes)
        {
            return err(
                "range_read_bytes",
                format!(
                    "{} is outside {MIN_RANGE_READ_BYTES}..={MAX_RANGE_READ_BYTES} (0 reads \
                     whole objects)",
                    self.range_read_bytes
                ),
            );
        }
        if self.gc_lease_ms < 1_000 {
            return err(
                "gc_lease_ms",
                format!(
                    "{} ms is below 1 s: a lease shorter than the requests GC makes \
                     would expire while it deletes",
                    self.gc_lease_ms
                ),
            );
        }
        Ok(())
    }

    /// Checks everything, including the service settings (for a store this configuration
    /// describes, not one handed over ready-made).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_tier()?;
        let err = |field, rule: String| Err(ConfigError { field, rule });
        let service = self.service;
        if !service.is_built() {
            return err(
                "service",
                format!(
                    "`{service}` is not built into this binary: enable the `{service}` feature \
                     of bough-object"
                ),
            );
        }
        let g = service.declared_guarantees();
        if !g.durable && !self.test_only {
            return err(
                "service",
                format!(
                    "`{service}` keeps nothing durable (tests only); set `test_only = true` to \
                     use it anyway"
                ),
            );
        }
        match service {
            Service::S3 | Service::Gcs | Service::Azblob if self.bucket.is_empty() => err(
                "bucket",
                format!(
                    "required for `{service}` ({})",
                    if service == Service::Azblob {
                        "the container"
                    } else {
                        "the bucket"
                    }
                ),
            ),
            Service::Azblob if self.endpoint.is_empty() => err(
                "endpoint",
                "required for `azblob` (https://<account>.blob.core.windows.net)".into(),
            ),
            Service::Fs if !self.root.starts_with('/') || self.root == "/" => err(
                "root",
                format!(
                    "{:?}: the `fs` service needs an absolute directory other than /",
                    self.root
                ),
            ),
            _ if !(self.endpoint.is_empty()
                || self.endpoint.starts_with("http://")
                || self.endpoint.starts_with("https://")) =>
            {
                err(
                    "endpoint",
                    format!("{:?} is not an http:// or https:// URL", self.endpoint),
                )
            }
            _ => Ok(()),
        }
    }
}
