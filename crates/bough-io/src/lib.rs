//! Bough: page frames, data-file layout and storage backends (io_uring, positional I/O,
//! memory). The only crate allowed `unsafe` (io_uring submissions, aligned buffers); every
//! block carries a `// SAFETY:` comment.
#![allow(unsafe_code)]

pub mod error;
pub mod storage;

pub use error::{ErrorKind, IoError, IoResult};
pub use storage::{BackendKind, OpenOptions, Storage, StorageFile};
