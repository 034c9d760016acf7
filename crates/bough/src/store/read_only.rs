//! Opening a store read-only beside a writer in another process.

use std::sync::Arc;

use bough_io::{BackendChoice, LocalOptions, ReadOnlyStorage, Storage, open_local_with};

use super::Store;
use crate::builder::{Components, StoreBuilder};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{Backend, Options};

impl Store {
    /// Opens an existing store for reading only, beside a writer that may have it open in
    /// another process (or none).
    ///
    /// - It takes no lock and writes nothing — no recovery, no GC, no expiry, no compaction,
    ///   no tail truncation, not even the lock file: storage is wrapped so that every change
    ///   fails. Every write, branch or archive change, `gc` and `run_maintenance` fail with
    ///   `InvalidArgument`; a GC dry run (`PartitionHandle::gc_dry_run`) only reads.
    /// - Each branch reads the newest durable state storage holds when it is first opened
    ///   (after this call or the last [`refresh`](Store::refresh)): what the writer had
    ///   acknowledged by then, and possibly a commit it was acknowledging at that moment
    ///   (made durable before it is read). An interrupted operation is read as the writer's
    ///   recovery will finish it. A handle keeps its state until it is dropped, however far
    ///   the writer moves on; the writer's GC cannot take its files away (they are held
    ///   open).
    /// - The writer never waits for a reader, and a reader never waits for the writer.
    ///
    /// Local backends and `memory` only: the object tier has no read-only mode yet
    /// (`InvalidArgument`). The store directory must exist (`NotFound`).
    ///
    /// ```
    /// use bough::{Options, Store, WriteBatch};
    ///
    /// let dir = tempfile::tempdir().unwrap();
    /// let writer = Store::open(Options::new(dir.path())).unwrap();
    /// let main = writer.partition("orders", 0).unwrap().branch("main").unwrap();
    /// let mut batch = WriteBatch::new();
    /// batch.put("k", "v1");
    /// main.write_blocking(batch).unwrap();
    ///
    /// let reader = Store::open_read_only(Options::new(dir.path())).unwrap();
    /// let seen = reader.partition("orders", 0).unwrap().branch("main").unwrap();
    /// assert_eq!(seen.get_blocking(b"k").unwrap().unwrap().value, b"v1");
    ///
    /// let mut batch = WriteBatch::new();
    /// batch.put("k", "v2");
    /// main.write_blocking(batch).unwrap();
    /// // The handle keeps the state it opened at; a refresh sees the writer's progress.
    /// assert_eq!(seen.get_blocking(b"k").unwrap().unwrap().value, b"v1");
    /// reader.refresh().unwrap();
    /// let now = reader.partition("orders", 0).unwrap().branch("main").unwrap();
    /// assert_eq!(now.get_blocking(b"k").unwrap().unwrap().value, b"v2");
    /// ```
    pub fn open_read_only(opts: impl Into<StoreBuilder>) -> Result<Store> {
        opts.into().open_read_only()
    }

    /// [`open_read_only`](Self::open_read_only) of validated settings with their
    /// components.
    pub(crate) fn open_read_only_with(opts: Options, parts: Components) -> Result<Store> {
        let inner: Arc<dyn Storage> = match opts.backend {
            Backend::Memory => Arc::new(parts.memory.clone().unwrap_or_default()),
            Backend::Object => {
                return Err(Error::invalid(
                    "a read-only open needs a local store (backend auto, io_uring or pread); \
                     the object tier has no read-only mode",
                ));
            }
            b => {
                let path = opts
                    .path
                    .clone()
                    .ok_or_else(|| Error::invalid("option `path`: required"))?;
                if !path.is_dir() {
                    return Err(Error::new(
                        ErrorKind::NotFound,
                        format!("no store at {}", path.display()),
                    ));
                }
                let backend = match b {
                    Backend::IoUring => BackendChoice::IoUring,
                    Backend::Pread => BackendChoice::Pread,
                    _ => BackendChoice::Auto,
                };
                let local = LocalOptions {
                    backend,
                    faults: parts.faults.clone(),
                };
                open_local_with(&path, local)?
            }
        };
        let storage: Arc<dyn Storage> = Arc::new(ReadOnlyStorage::new(inner));
        Store::start(opts, parts.clock, storage, None, None, true)
    }

    /// Whether the store was opened with [`open_read_only`](Store::open_read_only).
    pub fn is_read_only(&self) -> bool {
        self.inner.read_only
    }

    /// A read-only store forgets the states it read: branches opened from now on read what
    /// storage holds now (handles already held keep their state). On a store open for
    /// writing this does nothing: it always reads its own latest commits.
    pub fn refresh(&self) -> Result<()> {
        self.check_open()?;
        if self.inner.read_only {
            self.inner.partitions.lock().clear();
        }
        Ok(())
    }

    /// Fails with `InvalidArgument` on a read-only store.
    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.inner.read_only {
            return Err(Error::invalid(
                "the store is open read-only (Store::open_read_only): open it for writing to change it",
            ));
        }
        Ok(())
    }
}
