//! Per-storage I/O counters, and the poison flag every backend instance carries.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::error::{IoError, IoResult};

/// I/O counters of one storage instance (shared by its clones and open files). Only
/// successful operations are counted. Relaxed atomics: exact once the counted calls returned.
#[derive(Debug, Default)]
pub struct IoStats {
    reads: AtomicU64,
    read_bytes: AtomicU64,
    writes: AtomicU64,
    write_bytes: AtomicU64,
    syncs: AtomicU64,
    dir_syncs: AtomicU64,
}

/// A plain copy of [`IoStats`], for assertions and differences.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IoStatsSnapshot {
    /// Read requests (a batch of n counts n).
    pub reads: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Write requests (a batch of n counts n).
    pub writes: u64,
    /// Bytes written.
    pub write_bytes: u64,
    /// File syncs (`fdatasync`).
    pub syncs: u64,
    /// Directory syncs.
    pub dir_syncs: u64,
}

impl IoStatsSnapshot {
    /// Counts accumulated since `earlier`.
    pub fn since(&self, earlier: &IoStatsSnapshot) -> IoStatsSnapshot {
        IoStatsSnapshot {
            reads: self.reads.wrapping_sub(earlier.reads),
            read_bytes: self.read_bytes.wrapping_sub(earlier.read_bytes),
            writes: self.writes.wrapping_sub(earlier.writes),
            write_bytes: self.write_bytes.wrapping_sub(earlier.write_bytes),
            syncs: self.syncs.wrapping_sub(earlier.syncs),
            dir_syncs: self.dir_syncs.wrapping_sub(earlier.dir_syncs),
        }
    }
}

impl IoStats {
    /// A copy of the counters.
    pub fn snapshot(&self) -> IoStatsSnapshot {
        IoStatsSnapshot {
            reads: self.reads.load(Ordering::Relaxed),
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
            writes: self.writes.load(Ordering::Relaxed),
            write_bytes: self.write_bytes.load(Ordering::Relaxed),
            syncs: self.syncs.load(Ordering::Relaxed),
            dir_syncs: self.dir_syncs.load(Ordering::Relaxed),
        }
    }
    /// Read requests served.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }
    /// Bytes read.
    pub fn read_bytes(&self) -> u64 {
        self.read_bytes.load(Ordering::Relaxed)
    }
    /// Write requests served.
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }
    /// Bytes written.
    pub fn write_bytes(&self) -> u64 {
        self.write_bytes.load(Ordering::Relaxed)
    }
    /// File syncs.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }
    /// Directory syncs.
    pub fn dir_syncs(&self) -> u64 {
        self.dir_syncs.load(Ordering::Relaxed)
    }

    /// Counts one successful operation (for backends outside this crate).
    pub fn add_read(&self, bytes: usize) {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.read_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }
    /// Counts one successful operation (for backends outside this crate).
    pub fn add_write(&self, bytes: usize) {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.write_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }
    /// Counts one successful operation (for backends outside this crate).
    pub fn add_sync(&self) {
        self.syncs.fetch_add(1, Ordering::Relaxed);
    }
    /// Counts one successful operation (for backends outside this crate).
    pub fn add_dir_sync(&self) {
        self.dir_syncs.fetch_add(1, Ordering::Relaxed);
    }
}

/// Set by the first failed sync; from then on the instance refuses durable work. A failed
/// fsync may have dropped dirty pages the kernel will never write again, so retrying it and
/// seeing success would be a lie.
#[derive(Debug, Default)]
pub(crate) struct Poison {
    cause: Mutex<Option<String>>,
}

impl Poison {
    /// `Err(Poisoned)` if poisoned.
    pub(crate) fn check(&self) -> IoResult<()> {
        match &*self.cause.lock() {
            None => Ok(()),
            Some(cause) => Err(IoError::Poisoned {
                cause: cause.clone(),
            }),
        }
    }

    /// Records the failed sync (the first cause wins) and hands the error back.
    pub(crate) fn poison(&self, err: IoError) -> IoError {
        let mut cause = self.cause.lock();
        if cause.is_none() {
            tracing::error!(error = %err, "sync failed: storage instance poisoned");
            *cause = Some(err.to_string());
        }
        err
    }

    pub(crate) fn is_poisoned(&self) -> bool {
        self.cause.lock().is_some()
    }

    pub(crate) fn clear(&self) {
        *self.cause.lock() = None;
    }
}
