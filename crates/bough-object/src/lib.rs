//! Bough: the cloud tier. Data lives in an object store (S3 and S3-compatible services
//! through opendal; GCS and Azure with the `gcs` / `azblob` features); the local disk is a
//! bounded cache; branch ownership moves between processes by terms, fenced with
//! conditional writes.
//!
//! - [`ObjectStore`]: the narrow interface the tier uses (get, ranged get, head, put,
//!   put-if-absent, put-if-match, paginated list, delete, batch delete), implemented by
//!   [`OpendalStore`] (S3, GCS, Azure; opendal's memory and fs services for tests),
//!   [`MemoryObjectStore`] (in-process, atomic If-None-Match and If-Match with real ETags,
//!   or without If-Match) and wrapped by [`FaultyObjectStore`] (5xx/429, timeouts before or
//!   after the request applied, cut-off bodies).
//! - [`CloudStorage`]: a `bough_io::Storage` over an object store, so every layer above
//!   runs unchanged; data files are uploaded once when sealed, manifests are compare-and-swap
//!   objects (numbered claims on services without If-Match), ownership of a branch term is
//!   exclusive, and data objects are deleted only under the partition's [`GcLease`] (see
//!   `cloud.rs`).
//!
//! The object layout is specified in `docs/format.md` ("Object storage layout").

// Library code returns errors, never panics on input (tests may unwrap).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

mod cache;
mod cloud;
mod config;
pub mod envelope;
pub use envelope::EnvelopeError;
mod faults;
mod memory;
mod object;
mod opendal_store;
mod retry;

pub use cache::CacheStats;
pub use cloud::{
    CloudCounters, CloudStorage, Fencing, GcLease, LEASE_RECORD_LEN, LEASE_RELEASED, LeaseRecord,
    LeaseRecordError, PrewarmReport, Refusal, check_guarantees, select_fencing, wipe,
};
pub use config::{CloudConfig, ConfigError, DEFAULT_RANGE_READ_BYTES, FencingMode, Service};
pub use faults::{Fault, FaultyObjectStore, ObjOp};
pub use memory::{MemoryObjectStore, MsClock};
pub use object::{
    Etag, Guarantees, ListPage, ObjResult, ObjectError, ObjectMeta, ObjectStore, Transient,
    list_all,
};
pub use opendal_store::OpendalStore;
pub use retry::RetryPolicy;

/// Builds the object store a configuration describes (opendal).
pub fn open_object_store(
    cfg: &CloudConfig,
) -> Result<std::sync::Arc<dyn ObjectStore>, ObjectError> {
    Ok(std::sync::Arc::new(OpendalStore::new(cfg)?))
}
