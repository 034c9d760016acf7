//! Bough: an embedded key-value storage engine with git-like branches.
//!
//! ```
//! use bough::{Options, Store, WriteBatch};
//!
//! let store = Store::open(Options::in_memory()).unwrap();
//! let main = store.partition("orders", 3).unwrap().branch("main").unwrap();
//! let mut batch = WriteBatch::new();
//! batch.put("order-1", "pending");
//! main.write_blocking(batch).unwrap();
//! let v = main.get_blocking(b"order-1").unwrap().unwrap();
//! assert_eq!(v.value, b"pending");
//! store.close().unwrap();
//! ```
//!
//! The same calls are `async` without the `_blocking` suffix and work on any executor.

// Library code returns errors, never panics on input (tests may unwrap).
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

mod batch;
pub mod check;
pub mod clock;
mod cloud;
mod error;
pub mod oneshot;
mod options;
mod store;

pub use batch::{PutOptions, WriteBatch, show_key};
pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{Error, ErrorKind, Result};
pub use options::{Backend, DEFAULT_MAX_TIMESTAMP_SKEW_MS, MAX_VALUE_LEN, Options};
pub use store::{
    Branch, CompactionReport, DiffChange, DiffEntry, KeyValue, PartitionHandle, ReadView,
    RepairReport, ScanOptions, ScanPage, StateRef, Store, Value, WriteReport,
};

pub use bough_catalog::{
    BaseRoute, BranchInfo, BranchSpace, Conflict, ConflictPolicy, MergeBaseInfo, MergeOptions,
    MergeReport, NoCommonState, PickOptions, RehomeOptions, RehomeReport, ReleaseCause,
};
pub use bough_gc::{GcReport, KeepReason};
pub use bough_manifest::BranchOrigin;
pub use bough_names::ArchiveName;

/// Lower layers, for users who embed them directly.
pub use bough_io as io;
/// The object-store tier (`backend = "object"`).
pub use bough_object as object;
