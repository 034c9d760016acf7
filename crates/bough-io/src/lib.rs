//! Bough: page frames, data-file layout and storage backends (io_uring, positional I/O,
//! memory). The only crate allowed `unsafe` (io_uring submissions, aligned buffers); every
//! block carries a `// SAFETY:` comment.
//!
//! - [`Storage`]/[`StorageFile`]: the narrow trait the engine does all file I/O through,
//!   implemented by [`MemoryStorage`] (with power-loss simulation), [`PreadStorage`] and
//!   [`UringStorage`]; [`open_local`] picks a local backend.
//! - [`layout`]: the data-file header and the page frame (pure functions on bytes).
//! - [`FaultInjector`]: per-instance error injection, short writes and reads, and sync
//!   stalls for tests.
//! - [`lock_dir`]: the store lock; [`ReadOnlyStorage`]: a backend that refuses every change.
//!
//! The on-disk format and the durability rules are described in `docs/format.md ("Data files")`.

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
#![allow(unsafe_code)]

pub mod error;
pub mod fan_out;
pub mod faults;
pub mod layout;
mod local;
pub mod lock;
pub mod memory;
mod path;
mod readonly;
pub mod stats;
pub mod storage;
mod uring;

pub use error::{ErrorKind, IoError, IoResult};
pub use faults::{FaultInjector, FaultOp, ShortRead};
pub use layout::{
    DataFileHeader, FRAME_HEADER_LEN, FileSalt, MAX_PAGE_SIZE, MIN_PAGE_SIZE, open_page, seal_page,
    validate_page_size,
};
pub use local::{
    BackendChoice, LocalOptions, PreadStorage, UringOptions, UringStorage, open_local,
    open_local_with,
};
pub use lock::{DirLock, lock_dir, lock_dir_wait};
pub use memory::{CrashPolicy, CrashReport, MemoryStorage, RandomCrash};
pub use readonly::ReadOnlyStorage;
pub use stats::{IoStats, IoStatsSnapshot};
pub use storage::{BackendKind, FileStamp, OpenOptions, Staged, Storage, StorageFile};
