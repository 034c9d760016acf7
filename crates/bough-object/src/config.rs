//! The configuration of the cloud tier: where the object store is, how large the local
//! cache may grow, how requests are retried. Loadable from TOML (the `[object]` table of the
//! store options); credentials are never part of it (they come from the environment).

use serde::Deserialize;

use crate::retry::RetryPolicy;

/// Which opendal service holds the objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Service {
    /// Amazon S3 or an S3-compatible server (MinIO, moto, …): atomic PUT, If-None-Match and
    /// If-Match. Everything the cloud tier needs.
    #[default]
    S3,
    /// opendal's in-process memory service: atomic create-if-absent, but no If-Match and no
    /// ETags, and nothing survives the process. Refused by the cloud tier (no
    /// compare-and-swap); usable through [`ObjectStore`](crate::ObjectStore) in tests.
    Memory,
}

/// Configuration of the object store and of the cloud tier over it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CloudConfig {
    /// The service.
    pub service: Service,
    /// Endpoint URL (`http://127.0.0.1:5055`); empty = the service default (AWS).
    pub endpoint: String,
    /// Region (`us-east-1` when empty).
    pub region: String,
    /// Bucket (must exist; it is never created here).
    pub bucket: String,
    /// Key prefix inside the bucket; every object of the store lives under it.
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
    /// A data object no manifest references is deleted only once it is this old (ms): a
    /// writer in another process may be about to publish it.
    pub min_delete_age_ms: u64,
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
            min_delete_age_ms: 10 * 60 * 1000,
            retry: RetryPolicy::default(),
            writer_id: 0,
        }
    }
}
