//! Bough: an embedded key-value storage engine with git-like branches.
//!
//! ```
//! use bough::{Options, Store, WriteBatch};
//!
//! let store = Store::open(Options::in_memory())?;
//! let orders = store.partition("orders", 3)?;
//! let main = orders.branch("main")?;
//! main.put_blocking("order-1", "pending")?;
//! main.write_blocking(WriteBatch::new().put("order-2", "paid").delete("order-0"))?;
//! assert_eq!(main.get_blocking("order-1")?.unwrap().value, b"pending");
//!
//! let what_if = orders.create_branch("what-if", "main")?; // no data copied
//! what_if.put_blocking("order-1", "cancelled")?;
//! let keys: Vec<Vec<u8>> = what_if.prefix("order-").map(|kv| kv.map(|kv| kv.key)).collect::<bough::Result<_>>()?;
//! assert_eq!(keys, [b"order-1".to_vec(), b"order-2".to_vec()]);
//! orders.delete_branch("what-if")?;
//! orders.gc()?;
//! store.close()?;
//! # Ok::<(), bough::Error>(())
//! ```
//!
//! The same calls are `async` without the `_blocking` suffix and work on any executor. The
//! README's example (a store in a directory) runs as a doctest too. Handles: [`Store`] →
//! [`Table`] / [`PartitionHandle`] → [`Branch`] (reads, writes, [`RangeIter`]s) and
//! [`ReadView`] (one commit); settings are [`Options`], components go through
//! [`StoreBuilder`].

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

mod batch;
mod builder;
pub mod check;
pub mod clock;
mod cloud;
mod error;
pub mod oneshot;
mod options;
mod store;

pub use batch::{PutOptions, WriteBatch, show_key};
pub use builder::StoreBuilder;
pub use clock::{Clock, ManualClock, SystemClock};
pub use error::{Error, ErrorKind, Result};
pub use options::{
    Backend, DEFAULT_LOG_FILE_BYTES, DEFAULT_MAX_TIMESTAMP_SKEW_MS, DEFAULT_WRITE_BUFFER_BYTES,
    DEFAULT_WRITE_BUFFER_TOTAL_BYTES, Durability, MAX_VALUE_LEN, Options,
};
pub use store::{
    Branch, BranchPolicy, CompactionReport, DiffChange, DiffEntry, KeyValue, PartitionHandle,
    RangeIter, ReadView, RegistryStatus, RepairReport, ScanOptions, ScanPage, StateRef, Store,
    Table, TagInfo, Value, WriteBufferUsage, WriteReport,
};

mod reexports;
pub use reexports::*;

/// Lower layers, for users who embed them directly.
pub use bough_io as io;
/// The object-store tier (`backend = "object"`).
pub use bough_object as object;

/// The README's examples, run as doctests (`cargo test --doc -p bough`).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
