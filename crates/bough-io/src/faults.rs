//! Fault injection, one injector per storage instance (no global registry, so tests running in
//! parallel never see each other's faults).
//!
//! A backend built with an injector calls [`FaultInjector::before`] at the start of every
//! operation. Two kinds of faults exist:
//!
//! - *errors*: `fail_next(op, errno, count)` makes the next `count` operations of kind `op`
//!   fail with `errno`, as if the system call had returned it;
//! - *stalls*: `stall_sync()` closes a gate that every sync (file or directory) waits at until
//!   `release_sync()`, so a test can hold a writer "inside fsync" and check who else waits;
//!   `stall_reads()` / `release_reads()` do the same for file reads (a slow device);
//! - *short writes*: `short_writes_next(count)` makes the next `count` file writes of a backend
//!   that supports it (the memory backend) write only a prefix of their buffer and then fail
//!   with `EIO`, as a write cut short by a device error would;
//! - *short reads*: `short_reads_after(skip, count, then)` makes `count` reads (after `skip`)
//!   transfer only a prefix of what was asked, as a `pread` or an io_uring read may (a signal,
//!   a network or FUSE file system, a device splitting the transfer). Every backend honours
//!   it: the rest must be read again (`then = None`), or, when `then` names an errno, reading
//!   the rest fails with it — the transfer was cut off by a device error. Either way a reader
//!   gets all the bytes it asked for or an error, never a partly filled buffer.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// The operation a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultOp {
    /// `write_at`, each request of `write_batch`, the payload of `write_atomic`/`create_new`,
    /// `set_len` and `preallocate`.
    Write,
    /// File sync (`fdatasync`) and directory sync, including those inside
    /// `write_atomic`/`create_new`/`create_dir`. A failed sync poisons the instance.
    Sync,
    /// `read_at`, each request of `read_batch`, `read_file`.
    Read,
    /// Opening with `create`/`create_new`, `create_new`, `create_dir`, and the temporary file of
    /// `write_atomic`.
    Create,
    /// The rename (or link) step of `write_atomic` and `create_new`.
    Rename,
    /// `delete` and `remove_dir`.
    Delete,
}

#[derive(Debug, Clone, Copy)]
struct Planned {
    /// Operations of this kind to let through before failing.
    skip: u64,
    /// Operations to fail once `skip` reached zero.
    count: u64,
    errno: i32,
}

/// A read cut short: only `prefix` bytes of the request arrive in the first transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShortRead {
    /// Bytes the first transfer delivers (at least 1, fewer than asked).
    pub prefix: usize,
    /// `None`: the rest arrives when read again. `Some(errno)`: reading the rest fails with
    /// `errno` (the device gave up mid-transfer).
    pub then_errno: Option<i32>,
}

#[derive(Debug, Clone, Copy)]
struct PlannedShortRead {
    skip: u64,
    count: u64,
    then_errno: Option<i32>,
}

#[derive(Debug, Default)]
struct Gate {
    closed: bool,
    waiting: usize,
    /// The read gate: like the sync gate, for file reads.
    reads_closed: bool,
    reads_waiting: usize,
}

#[derive(Debug, Default)]
struct Inner {
    planned: Mutex<HashMap<FaultOp, VecDeque<Planned>>>,
    short_writes: AtomicU64,
    short_reads: Mutex<VecDeque<PlannedShortRead>>,
    fired: AtomicU64,
    gate: Mutex<Gate>,
    gate_cv: Condvar,
}

/// Per-instance fault injector. Cheap to clone; clones share the plan.
#[derive(Debug, Clone, Default)]
pub struct FaultInjector {
    inner: Arc<Inner>,
}

impl FaultInjector {
    /// An injector with nothing planned.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the next `count` operations of kind `op` fail with `errno` (for example
    /// `libc::EIO` or `libc::ENOSPC`). Plans for the same `op` run one after the other.
    pub fn fail_next(&self, op: FaultOp, errno: i32, count: u64) {
        self.fail_after(op, 0, errno, count);
    }

    /// Lets `skip` operations of kind `op` succeed, then fails the following `count`.
    pub fn fail_after(&self, op: FaultOp, skip: u64, errno: i32, count: u64) {
        if count == 0 {
            return;
        }
        self.inner
            .planned
            .lock()
            .entry(op)
            .or_default()
            .push_back(Planned { skip, count, errno });
    }

    /// Forgets every planned error, short write and short read (a closed sync gate stays
    /// closed).
    pub fn clear(&self) {
        self.inner.planned.lock().clear();
        self.inner.short_writes.store(0, Ordering::Relaxed);
        self.inner.short_reads.lock().clear();
    }

    /// Makes the next `count` file writes (`write_at`, each request of `write_batch`) write
    /// only a prefix of their buffer and then fail with `EIO`. Only the memory backend
    /// honours it; planned errors are consulted first.
    pub fn short_writes_next(&self, count: u64) {
        self.inner.short_writes.fetch_add(count, Ordering::Relaxed);
    }

    /// Called by a backend that supports short writes before writing `len` bytes: `Some(n)`
    /// means write only the first `n` bytes (`n < len`, half of it rounded down to a 512-byte
    /// multiple) and then fail with `EIO`.
    pub fn take_short_write(&self, len: usize) -> Option<usize> {
        if len == 0 {
            return None;
        }
        let taken = self
            .inner
            .short_writes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        if !taken {
            return None;
        }
        self.inner.fired.fetch_add(1, Ordering::Relaxed);
        Some((len / 2) / 512 * 512)
    }

    /// Lets `skip` reads (`read_at`, each request of `read_batch`, `read_file`; reads of fewer
    /// than two bytes are not counted, they cannot be cut short) through whole, then cuts the
    /// next `count` short: each delivers half of what was asked in its first transfer. With
    /// `then_errno` `None` the backend reads the rest again, as it must after a short `pread`;
    /// with `Some(errno)` reading the rest fails with `errno`. Plans run one after the other;
    /// planned `FaultOp::Read` errors are consulted first.
    pub fn short_reads_after(&self, skip: u64, count: u64, then_errno: Option<i32>) {
        if count == 0 {
            return;
        }
        self.inner.short_reads.lock().push_back(PlannedShortRead {
            skip,
            count,
            then_errno,
        });
    }

    /// Cuts the next `count` reads short; the backend must read the rest again.
    pub fn short_reads_next(&self, count: u64) {
        self.short_reads_after(0, count, None);
    }

    /// Called by every backend before a read of `len` bytes: `Some` when this read is cut
    /// short (see [`short_reads_after`](Self::short_reads_after)).
    pub fn take_short_read(&self, len: usize) -> Option<ShortRead> {
        if len < 2 {
            return None;
        }
        let mut plans = self.inner.short_reads.lock();
        let front = plans.front_mut()?;
        if front.skip > 0 {
            front.skip -= 1;
            return None;
        }
        let then_errno = front.then_errno;
        front.count -= 1;
        if front.count == 0 {
            plans.pop_front();
        }
        self.inner.fired.fetch_add(1, Ordering::Relaxed);
        Some(ShortRead {
            prefix: len / 2,
            then_errno,
        })
    }

    /// Short reads still planned (not yet fired).
    pub fn short_reads_pending(&self) -> u64 {
        self.inner.short_reads.lock().iter().map(|p| p.count).sum()
    }

    /// How many injected errors have fired so far.
    pub fn fired(&self) -> u64 {
        self.inner.fired.load(Ordering::Relaxed)
    }

    /// Closes the sync gate: every sync started from now on blocks until [`release_sync`].
    ///
    /// [`release_sync`]: FaultInjector::release_sync
    pub fn stall_sync(&self) {
        self.inner.gate.lock().closed = true;
    }

    /// Opens the sync gate and wakes the stalled syncs.
    pub fn release_sync(&self) {
        self.inner.gate.lock().closed = false;
        self.inner.gate_cv.notify_all();
    }

    /// How many syncs are waiting at the closed gate right now.
    pub fn stalled_syncs(&self) -> usize {
        self.inner.gate.lock().waiting
    }

    /// Waits until at least `n` syncs are stalled at the gate, or `timeout` passes. Returns
    /// whether they are.
    pub fn wait_for_stalled_syncs(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut gate = self.inner.gate.lock();
        while gate.waiting < n {
            if self
                .inner
                .gate_cv
                .wait_until(&mut gate, deadline)
                .timed_out()
            {
                return gate.waiting >= n;
            }
        }
        true
    }

    /// Closes the read gate: every file read started from now on blocks until
    /// [`release_reads`](FaultInjector::release_reads).
    pub fn stall_reads(&self) {
        self.inner.gate.lock().reads_closed = true;
    }

    /// Opens the read gate and wakes the stalled reads.
    pub fn release_reads(&self) {
        self.inner.gate.lock().reads_closed = false;
        self.inner.gate_cv.notify_all();
    }

    /// How many file reads are waiting at the closed read gate right now.
    pub fn stalled_reads(&self) -> usize {
        self.inner.gate.lock().reads_waiting
    }

    /// Called by backends before an operation: waits at the sync gate (for `Sync`) or the
    /// read gate (for `Read`), then returns the planned error, if any.
    pub fn before(&self, op: FaultOp) -> Result<(), std::io::Error> {
        if op == FaultOp::Read {
            let mut gate = self.inner.gate.lock();
            if gate.reads_closed {
                gate.reads_waiting += 1;
                self.inner.gate_cv.notify_all();
                while gate.reads_closed {
                    self.inner.gate_cv.wait(&mut gate);
                }
                gate.reads_waiting -= 1;
            }
        }
        if op == FaultOp::Sync {
            let mut gate = self.inner.gate.lock();
            if gate.closed {
                gate.waiting += 1;
                // Wake `wait_for_stalled_syncs` callers.
                self.inner.gate_cv.notify_all();
                while gate.closed {
                    self.inner.gate_cv.wait(&mut gate);
                }
                gate.waiting -= 1;
            }
        }
        let mut planned = self.inner.planned.lock();
        let Some(queue) = planned.get_mut(&op) else {
            return Ok(());
        };
        let Some(front) = queue.front_mut() else {
            return Ok(());
        };
        if front.skip > 0 {
            front.skip -= 1;
            return Ok(());
        }
        let errno = front.errno;
        front.count -= 1;
        if front.count == 0 {
            queue.pop_front();
        }
        self.inner.fired.fetch_add(1, Ordering::Relaxed);
        Err(std::io::Error::from_raw_os_error(errno))
    }
}

/// Shorthand used by the backends: whether an optional injector cuts this read short.
pub(crate) fn short_read(faults: &Option<FaultInjector>, len: usize) -> Option<ShortRead> {
    faults.as_ref().and_then(|f| f.take_short_read(len))
}

/// Shorthand used by the backends: consult an optional injector.
pub(crate) fn check(faults: &Option<FaultInjector>, op: FaultOp) -> Result<(), std::io::Error> {
    match faults {
        Some(f) => f.before(op),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_fire_in_order_and_count_down() {
        let f = FaultInjector::new();
        f.fail_after(FaultOp::Write, 1, libc::EIO, 2);
        f.fail_next(FaultOp::Write, libc::ENOSPC, 1);
        assert!(f.before(FaultOp::Write).is_ok());
        assert!(f.before(FaultOp::Read).is_ok());
        let errs: Vec<_> = (0..4)
            .map(|_| {
                f.before(FaultOp::Write)
                    .err()
                    .and_then(|e| e.raw_os_error())
            })
            .collect();
        assert_eq!(
            errs,
            vec![Some(libc::EIO), Some(libc::EIO), Some(libc::ENOSPC), None]
        );
        assert_eq!(f.fired(), 3);
    }

    #[test]
    fn short_reads_skip_then_fire_in_order() {
        let f = FaultInjector::new();
        f.short_reads_after(1, 2, None);
        f.short_reads_after(0, 1, Some(libc::EIO));
        assert_eq!(f.short_reads_pending(), 3);
        assert_eq!(f.take_short_read(1), None, "a 1-byte read cannot be cut");
        assert_eq!(f.take_short_read(100), None, "skipped");
        let cut = |n| f.take_short_read(n);
        assert_eq!(
            cut(100),
            Some(ShortRead {
                prefix: 50,
                then_errno: None
            })
        );
        assert_eq!(
            cut(3),
            Some(ShortRead {
                prefix: 1,
                then_errno: None
            })
        );
        assert_eq!(
            cut(10),
            Some(ShortRead {
                prefix: 5,
                then_errno: Some(libc::EIO)
            })
        );
        assert_eq!(cut(10), None);
        assert_eq!(f.fired(), 3);
        f.short_reads_next(5);
        f.clear();
        assert_eq!(f.short_reads_pending(), 0);
    }

    #[test]
    fn sync_gate_blocks_until_released() {
        let f = FaultInjector::new();
        f.stall_sync();
        let g = f.clone();
        let t = std::thread::spawn(move || g.before(FaultOp::Sync).is_ok());
        assert!(f.wait_for_stalled_syncs(1, Duration::from_secs(10)));
        assert!(
            f.before(FaultOp::Read).is_ok(),
            "reads never wait at the gate"
        );
        f.release_sync();
        assert!(t.join().unwrap_or(false));
        assert_eq!(f.stalled_syncs(), 0);
    }
}
