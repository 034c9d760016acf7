//! When a store shuts down. Its state (`Inner`) is shared by the caller's handles and, for
//! the length of one pass, by the maintenance thread; so the last caller handle to go does
//! not always drop it. A [`CallerHold`] shared by the caller's handles alone shuts the store
//! down when the last of them goes, on the caller's thread: once the drop returns the
//! directory is free for the next open. Shutting down waits for a maintenance pass in flight
//! (`Inner::maintaining`), so nothing this instance does — a GC deleting files above all —
//! happens after the `LOCK` is released.

use super::*;

/// Shared by every [`Store`], `PartitionHandle` and `Branch` a caller holds.
#[derive(Debug)]
pub(super) struct CallerHold {
    inner: Weak<Inner>,
}

impl Drop for CallerHold {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            inner.shutdown();
        }
    }
}

impl Store {
    /// The first handle of a newly opened store, handed to the caller.
    pub(super) fn for_caller(inner: Arc<Inner>) -> Store {
        let caller = Some(Arc::new(CallerHold {
            inner: Arc::downgrade(&inner),
        }));
        Store {
            inner,
            _caller: caller,
        }
    }

    /// A handle for the store's own threads: it never keeps the store open for a caller.
    pub(super) fn internal(inner: Arc<Inner>) -> Store {
        Store {
            inner,
            _caller: None,
        }
    }
}

impl Inner {
    /// Runs `pass` as the one maintenance pass in flight; refused once shutdown began.
    pub(super) fn maintenance_pass<T>(&self, pass: impl FnOnce() -> Result<T>) -> Result<T> {
        let _running = self.maintaining.lock();
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::closed());
        }
        pass()
    }

    /// Waits until no maintenance pass runs (shutdown has set `closed`, so none starts).
    pub(super) fn wait_for_maintenance(&self) {
        debug_assert!(self.closed.load(Ordering::Acquire));
        drop(self.maintaining.lock());
    }
}
