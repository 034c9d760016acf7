//! io_uring rings driven by dedicated threads.
//!
//! A caller turns its request (one or more reads, writes or an fsync on one file) into raw
//! operations pointing at its own buffers, queues them for a ring thread, wakes the thread
//! through an eventfd, and blocks until every operation of the request has completed. The
//! ring thread pushes the operations as SQEs (a whole batch at once, up to the ring's
//! capacity), resubmits the remainder of short reads and writes and of `EINTR`/`EAGAIN`
//! completions, and signals the caller when the request is done.
//!
//! Memory safety rests on one rule: a caller does not return from [`RingPool::read`],
//! [`RingPool::write`] or [`RingPool::fdatasync`] before the ring thread has reaped the last
//! completion of its request, so the buffers and the file descriptor the kernel uses stay
//! alive (they are borrowed for the whole call) for as long as the kernel may touch them.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use io_uring::{IoUring, opcode, types};
use parking_lot::{Condvar, Mutex};

use crate::faults::ShortRead;

/// Longest single read or write submitted; longer requests continue as short transfers.
const MAX_CHUNK: usize = 1 << 30;
/// `user_data` of the eventfd poll that wakes the ring thread.
const WAKE: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Read,
    Write,
    Fdatasync,
}

/// One operation: a raw view of a caller's buffer.
#[derive(Debug)]
struct RawOp {
    kind: OpKind,
    buf: *mut u8,
    len: usize,
    offset: u64,
    /// Bytes transferred so far.
    done: usize,
    /// Most bytes the first submission asks for (`len` unless an injected short read cuts
    /// it), so the kernel returns a short count and the continuation path runs for real.
    first: usize,
    /// An injected failure of the continuation after a short first transfer (the device
    /// gave up mid-transfer): the errno the operation fails with instead of resubmitting.
    fail_rest: Option<i32>,
}

/// A caller's request, handed to a ring thread.
#[derive(Debug)]
struct Request {
    fd: RawFd,
    ops: Vec<RawOp>,
    completion: Arc<Completion>,
}

// SAFETY: the raw buffer pointers in `ops` refer to memory the submitting caller keeps
// borrowed (and does not touch) until `completion` is signalled, which happens only after the
// last use of the pointers by the ring thread and the kernel; moving the request to the ring
// thread therefore creates no aliasing the borrow checker would have rejected.
unsafe impl Send for Request {}

/// A oneshot: the ring thread stores the result, the caller waits for it.
#[derive(Debug, Default)]
struct Completion {
    result: Mutex<Option<std::io::Result<()>>>,
    cv: Condvar,
}

impl Completion {
    fn complete(&self, r: std::io::Result<()>) {
        *self.result.lock() = Some(r);
        self.cv.notify_one();
    }

    fn wait(&self) -> std::io::Result<()> {
        let mut g = self.result.lock();
        loop {
            if let Some(r) = g.take() {
                return r;
            }
            self.cv.wait(&mut g);
        }
    }
}

#[derive(Debug)]
struct WorkerShared {
    queue: Mutex<VecDeque<Request>>,
    /// Written by callers, polled by the ring.
    wake: File,
    shutdown: AtomicBool,
    /// Set when the ring itself failed; new requests fail with this message.
    dead: Mutex<Option<String>>,
}

impl WorkerShared {
    fn wake(&self) {
        // An eventfd write only fails when the counter would overflow, which means a wake-up
        // is pending anyway.
        let _ = (&self.wake).write(&1u64.to_ne_bytes());
    }
}

#[derive(Debug)]
struct Worker {
    shared: Arc<WorkerShared>,
    thread: Option<JoinHandle<()>>,
}

/// A fixed set of ring threads; requests go round-robin.
#[derive(Debug)]
pub(crate) struct RingPool {
    workers: Vec<Worker>,
    next: AtomicUsize,
}

fn eventfd() -> std::io::Result<File> {
    // SAFETY: eventfd takes no pointers; the result is checked before use.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

impl RingPool {
    pub(crate) fn new(threads: usize, entries: u32) -> std::io::Result<RingPool> {
        // Built up worker by worker: on an error, dropping the pool stops the started ones.
        let mut pool = RingPool {
            workers: Vec::with_capacity(threads),
            next: AtomicUsize::new(0),
        };
        for i in 0..threads {
            let shared = Arc::new(WorkerShared {
                queue: Mutex::new(VecDeque::new()),
                wake: eventfd()?,
                shutdown: AtomicBool::new(false),
                dead: Mutex::new(None),
            });
            let (tx, rx) = std::sync::mpsc::channel();
            let thread_shared = shared.clone();
            let thread = std::thread::Builder::new()
                .name(format!("bough-uring-{i}"))
                .spawn(move || match IoUring::new(entries) {
                    Ok(ring) => {
                        let _ = tx.send(Ok(()));
                        RingLoop::new(ring, thread_shared).run();
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                })?;
            let started = rx
                .recv()
                .unwrap_or_else(|_| Err(std::io::Error::other("ring thread died at start")));
            if let Err(e) = started {
                let _ = thread.join();
                return Err(e);
            }
            pool.workers.push(Worker {
                shared,
                thread: Some(thread),
            });
        }
        Ok(pool)
    }

    /// Runs `ops` on `fd` and waits for all of them. The caller keeps the buffers and the
    /// descriptor alive for the whole call (they are borrowed by the safe wrappers below).
    fn run(&self, fd: RawFd, ops: Vec<RawOp>) -> std::io::Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.workers.len().max(1);
        let Some(worker) = self.workers.get(i) else {
            return Err(std::io::Error::other("no io_uring worker"));
        };
        let shared = &worker.shared;
        if let Some(why) = shared.dead.lock().as_ref() {
            return Err(std::io::Error::other(why.clone()));
        }
        let completion = Arc::new(Completion::default());
        shared.queue.lock().push_back(Request {
            fd,
            ops,
            completion: completion.clone(),
        });
        shared.wake();
        completion.wait()
    }

    /// Reads every request exactly; reaching the end of the file early is `UnexpectedEof`.
    /// `cuts[i]` (when present) cuts request `i` short, as an injected fault.
    pub(crate) fn read(
        &self,
        file: &File,
        reqs: &mut [(u64, &mut [u8])],
        cuts: &[Option<ShortRead>],
    ) -> std::io::Result<()> {
        let ops = reqs
            .iter_mut()
            .enumerate()
            .filter(|(_, (_, b))| !b.is_empty())
            .map(|(i, (offset, buf))| {
                let cut = cuts.get(i).copied().flatten();
                RawOp {
                    kind: OpKind::Read,
                    buf: buf.as_mut_ptr(),
                    len: buf.len(),
                    offset: *offset,
                    done: 0,
                    first: cut.map_or(buf.len(), |c| c.prefix.clamp(1, buf.len())),
                    fail_rest: cut.and_then(|c| c.then_errno),
                }
            })
            .collect();
        self.run(file.as_raw_fd(), ops)
    }

    /// Writes every request completely.
    pub(crate) fn write(&self, file: &File, reqs: &[(u64, &[u8])]) -> std::io::Result<()> {
        let ops = reqs
            .iter()
            .filter(|(_, b)| !b.is_empty())
            .map(|(offset, buf)| RawOp {
                kind: OpKind::Write,
                // Never written through: the op is a write.
                buf: buf.as_ptr().cast_mut(),
                len: buf.len(),
                offset: *offset,
                done: 0,
                first: buf.len(),
                fail_rest: None,
            })
            .collect();
        self.run(file.as_raw_fd(), ops)
    }

    /// `fdatasync` through the ring.
    pub(crate) fn fdatasync(&self, file: &File) -> std::io::Result<()> {
        let op = RawOp {
            kind: OpKind::Fdatasync,
            buf: std::ptr::null_mut(),
            len: 0,
            offset: 0,
            done: 0,
            first: 0,
            fail_rest: None,
        };
        self.run(file.as_raw_fd(), vec![op])
    }
}

impl Drop for RingPool {
    fn drop(&mut self) {
        // No request is in flight: callers hold a borrow of the pool while they wait.
        for w in &self.workers {
            w.shared.shutdown.store(true, Ordering::Release);
            w.shared.wake();
        }
        for w in &mut self.workers {
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// A request being served.
struct InFlight {
    req: Request,
    /// Operations not finished yet.
    remaining: usize,
    error: Option<std::io::Error>,
}

/// The state of one ring thread.
struct RingLoop {
    ring: IoUring,
    shared: Arc<WorkerShared>,
    slots: Vec<Option<InFlight>>,
    free: Vec<usize>,
    /// (slot, op) pairs waiting for an SQE.
    ready: VecDeque<(usize, usize)>,
    /// SQEs of operations in the kernel (the wake poll not counted).
    in_kernel: usize,
    capacity: usize,
    wake_armed: bool,
    live: usize,
}

/// Where the untransferred rest of an operation starts, and how much of it to submit.
fn rest(op: &RawOp) -> (*mut u8, u32, u64) {
    let left = if op.done == 0 {
        op.first.min(op.len)
    } else {
        op.len - op.done
    };
    let len = left.min(MAX_CHUNK) as u32;
    // In bounds: `done < len` for an operation still waiting.
    let buf = op.buf.wrapping_add(op.done);
    (buf, len, op.offset.wrapping_add(op.done as u64))
}

fn retryable(errno: i32) -> bool {
    errno == libc::EINTR || errno == libc::EAGAIN
}

impl RingLoop {
    fn new(ring: IoUring, shared: Arc<WorkerShared>) -> RingLoop {
        let capacity = (ring.params().sq_entries() as usize)
            .saturating_sub(1)
            .max(1);
        RingLoop {
            ring,
            shared,
            slots: Vec::new(),
            free: Vec::new(),
            ready: VecDeque::new(),
            in_kernel: 0,
            capacity,
            wake_armed: false,
            live: 0,
        }
    }

    fn run(mut self) {
        let mut cqes: Vec<(u64, i32)> = Vec::new();
        let mut failures = 0u32;
        loop {
            self.take_new_requests();
            if self.live == 0 && self.shared.shutdown.load(Ordering::Acquire) {
                return;
            }
            let dead = self.shared.dead.lock().is_some();
            if !dead {
                self.push_sqes();
                match self.ring.submit_and_wait(1) {
                    Ok(_) => failures = 0,
                    Err(e)
                        if e.raw_os_error()
                            .is_some_and(|n| retryable(n) || n == libc::EBUSY) => {}
                    Err(e) => {
                        failures += 1;
                        tracing::error!(error = %e, "io_uring_enter failed");
                        if failures >= 100 {
                            *self.shared.dead.lock() = Some(format!("io_uring ring failed: {e}"));
                            self.fail_unsubmitted();
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            } else {
                // The ring cannot be entered any more; completions of operations already in
                // the kernel still appear in the completion queue.
                std::thread::sleep(Duration::from_millis(1));
            }
            cqes.clear();
            cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
            for &(user_data, res) in &cqes {
                if user_data == WAKE {
                    self.wake_armed = false;
                    let mut counter = [0u8; 8];
                    // Non-blocking; `EAGAIN` just means another wake-up consumed it.
                    let _ = (&self.shared.wake).read(&mut counter);
                } else {
                    self.in_kernel = self.in_kernel.saturating_sub(1);
                    self.complete_op(
                        (user_data >> 32) as usize,
                        (user_data & 0xffff_ffff) as usize,
                        res,
                    );
                }
            }
        }
    }

    fn take_new_requests(&mut self) {
        let new: Vec<Request> = self.shared.queue.lock().drain(..).collect();
        let dead = self.shared.dead.lock().clone();
        for req in new {
            if let Some(why) = &dead {
                req.completion
                    .complete(Err(std::io::Error::other(why.clone())));
                continue;
            }
            let n = req.ops.len();
            let slot = match self.free.pop() {
                Some(s) => s,
                None => {
                    self.slots.push(None);
                    self.slots.len() - 1
                }
            };
            self.ready.extend((0..n).map(|i| (slot, i)));
            if let Some(s) = self.slots.get_mut(slot) {
                *s = Some(InFlight {
                    req,
                    remaining: n,
                    error: None,
                });
            }
            self.live += 1;
        }
    }

    fn push_sqes(&mut self) {
        if !self.wake_armed {
            let poll =
                opcode::PollAdd::new(types::Fd(self.shared.wake.as_raw_fd()), libc::POLLIN as u32)
                    .build()
                    .user_data(WAKE);
            // SAFETY: the poll references only the eventfd, which `self.shared` keeps open
            // until after the ring is dropped (dropping the ring cancels the poll).
            if unsafe { self.ring.submission().push(&poll) }.is_ok() {
                self.wake_armed = true;
            }
        }
        while self.in_kernel < self.capacity {
            let Some((slot, i)) = self.ready.pop_front() else {
                break;
            };
            let Some(entry) = self.entry(slot, i) else {
                continue;
            };
            // SAFETY: the entry points into a buffer of a caller blocked in `RingPool::run`
            // until this operation completes (see the module comment), at an offset and length
            // within that buffer (`done < len`, chunk ≤ `len - done`), and at a descriptor the
            // caller keeps open for the same time.
            if unsafe { self.ring.submission().push(&entry) }.is_err() {
                self.ready.push_front((slot, i));
                break;
            }
            self.in_kernel += 1;
        }
    }

    /// The SQE for the rest of operation `i` of `slot`.
    fn entry(&self, slot: usize, i: usize) -> Option<io_uring::squeue::Entry> {
        let f = self.slots.get(slot)?.as_ref()?;
        let op = f.req.ops.get(i)?;
        let fd = types::Fd(f.req.fd);
        let user_data = ((slot as u64) << 32) | i as u64;
        let (buf, len, offset) = rest(op);
        let e = match op.kind {
            OpKind::Read => opcode::Read::new(fd, buf, len).offset(offset).build(),
            OpKind::Write => opcode::Write::new(fd, buf.cast_const(), len)
                .offset(offset)
                .build(),
            OpKind::Fdatasync => opcode::Fsync::new(fd)
                .flags(types::FsyncFlags::DATASYNC)
                .build(),
        };
        Some(e.user_data(user_data))
    }

    fn complete_op(&mut self, slot: usize, i: usize, res: i32) {
        let Some(Some(f)) = self.slots.get_mut(slot) else {
            tracing::error!(slot, "io_uring completion for an unknown request");
            return;
        };
        let Some(op) = f.req.ops.get_mut(i) else {
            return;
        };
        let outcome: Option<std::io::Error> = if res < 0 {
            if retryable(-res) && f.error.is_none() {
                self.ready.push_back((slot, i));
                return;
            }
            Some(std::io::Error::from_raw_os_error(-res))
        } else if op.kind == OpKind::Fdatasync {
            None
        } else if res == 0 {
            Some(match op.kind {
                OpKind::Read => std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "read past the end of the file",
                ),
                _ => std::io::Error::new(std::io::ErrorKind::WriteZero, "write returned 0"),
            })
        } else {
            op.done = op.done.saturating_add(res as usize).min(op.len);
            if op.done < op.len && f.error.is_none() {
                if let Some(errno) = op.fail_rest.take() {
                    // Injected: the device gave up after the short first transfer.
                    Some(std::io::Error::from_raw_os_error(errno))
                } else {
                    // Short transfer: submit the rest.
                    self.ready.push_back((slot, i));
                    return;
                }
            } else {
                None
            }
        };
        if let Some(e) = outcome {
            f.error.get_or_insert(e);
        }
        f.remaining -= 1;
        if f.remaining == 0
            && let Some(f) = self.slots.get_mut(slot).and_then(Option::take)
        {
            self.free.push(slot);
            self.live -= 1;
            f.req.completion.complete(match f.error {
                Some(e) => Err(e),
                None => Ok(()),
            });
        }
    }

    /// After the ring failed: fails every operation not handed to the kernel yet.
    fn fail_unsubmitted(&mut self) {
        while let Some((slot, i)) = self.ready.pop_front() {
            self.complete_op(slot, i, -libc::EIO);
        }
    }
}

/// Whether io_uring works here (cached for the process).
pub(crate) fn probe() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE.get_or_init(probe_uncached).clone()
}

fn probe_uncached() -> Result<(), String> {
    let mut ring = IoUring::new(4).map_err(|e| format!("io_uring_setup failed: {e}"))?;
    let mut probe = io_uring::Probe::new();
    ring.submitter()
        .register_probe(&mut probe)
        .map_err(|e| format!("io_uring probe failed: {e}"))?;
    for (code, name) in [
        (opcode::Nop::CODE, "NOP"),
        (opcode::Read::CODE, "READ"),
        (opcode::Write::CODE, "WRITE"),
        (opcode::Fsync::CODE, "FSYNC"),
        (opcode::PollAdd::CODE, "POLL_ADD"),
    ] {
        if !probe.is_supported(code) {
            return Err(format!("io_uring lacks the {name} opcode"));
        }
    }
    let nop = opcode::Nop::new().build().user_data(42);
    // SAFETY: a NOP references no memory.
    unsafe { ring.submission().push(&nop) }.map_err(|_| "io_uring queue full".to_string())?;
    ring.submit_and_wait(1)
        .map_err(|e| format!("io_uring_enter failed: {e}"))?;
    let cqe = ring
        .completion()
        .next()
        .ok_or_else(|| "io_uring NOP did not complete".to_string())?;
    if cqe.result() < 0 || cqe.user_data() != 42 {
        return Err(format!("io_uring NOP failed: {}", cqe.result()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds synthetic completion results to a ring loop (nothing is submitted to the
    /// kernel): retries, short transfers and end-of-file.
    #[test]
    fn synthetic_completions() {
        if let Err(why) = probe() {
            eprintln!("!!! io_uring unavailable ({why}); ring unit test skipped LOUDLY");
            return;
        }
        let shared = Arc::new(WorkerShared {
            queue: Mutex::new(VecDeque::new()),
            wake: eventfd().expect("eventfd"),
            shutdown: AtomicBool::new(false),
            dead: Mutex::new(None),
        });
        let mut rl = RingLoop::new(IoUring::new(8).expect("ring"), shared.clone());
        let mut buf = [0u8; 100];
        let submit = |kind: OpKind, buf: &mut [u8]| {
            let completion = Arc::new(Completion::default());
            shared.queue.lock().push_back(Request {
                fd: -1,
                ops: vec![RawOp {
                    kind,
                    buf: buf.as_mut_ptr(),
                    len: buf.len(),
                    offset: 1000,
                    done: 0,
                    first: buf.len(),
                    fail_rest: None,
                }],
                completion: completion.clone(),
            });
            completion
        };

        let c = submit(OpKind::Read, &mut buf);
        rl.take_new_requests();
        assert_eq!(rl.ready.drain(..).collect::<Vec<_>>(), vec![(0, 0)]);
        for res in [-libc::EINTR, 40, -libc::EAGAIN] {
            rl.complete_op(0, 0, res);
            assert_eq!(rl.ready.drain(..).count(), 1, "requeued after {res}");
        }
        let done = rl.slots[0].as_ref().map(|f| f.req.ops[0].done);
        assert_eq!(done, Some(40), "short read remembered");
        let op = &rl.slots[0].as_ref().expect("in flight").req.ops[0];
        assert_eq!(rest(op), (buf.as_mut_ptr().wrapping_add(40), 60, 1040));
        assert!(rl.entry(0, 0).is_some());
        rl.complete_op(0, 0, 60);
        assert!(rl.ready.is_empty());
        c.wait().expect("complete");
        assert_eq!(rl.live, 0);

        let c = submit(OpKind::Read, &mut buf);
        rl.take_new_requests();
        rl.ready.clear();
        rl.complete_op(0, 0, 0);
        let e = c.wait().expect_err("EOF");
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);

        let c = submit(OpKind::Write, &mut buf);
        rl.take_new_requests();
        rl.ready.clear();
        rl.complete_op(0, 0, -libc::EIO);
        assert_eq!(c.wait().expect_err("EIO").raw_os_error(), Some(libc::EIO));
        assert_eq!(rl.live, 0);
    }

    #[test]
    fn short_reads_continue_and_eof_is_reported() {
        if let Err(why) = probe() {
            eprintln!("!!! io_uring unavailable ({why}); ring unit test skipped LOUDLY");
            return;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 10_000]).expect("write");
        let file = File::open(&path).expect("open");
        let pool = RingPool::new(2, 8).expect("pool");
        // More requests than ring entries, to exercise queueing.
        let mut bufs = vec![vec![0u8; 1000]; 10];
        let mut reqs: Vec<(u64, &mut [u8])> = bufs
            .iter_mut()
            .enumerate()
            .map(|(i, b)| ((i * 1000) as u64, &mut b[..]))
            .collect();
        pool.read(&file, &mut reqs, &[]).expect("read batch");
        assert!(bufs.iter().all(|b| b.iter().all(|&x| x == 7)));
        // Injected short reads: the first transfer stops at the prefix and the ring resubmits
        // the rest; a failure planned for the rest reaches the caller instead.
        let mut b = vec![0u8; 1000];
        let cut = |then_errno| {
            [Some(ShortRead {
                prefix: 300,
                then_errno,
            })]
        };
        pool.read(&file, &mut [(0, &mut b[..])], &cut(None))
            .expect("a short read is continued");
        assert!(b.iter().all(|&x| x == 7));
        let mut b = vec![0u8; 1000];
        let err = pool
            .read(&file, &mut [(0, &mut b[..])], &cut(Some(libc::EIO)))
            .expect_err("the rest failed");
        assert_eq!(err.raw_os_error(), Some(libc::EIO));
        let mut past = [0u8; 100];
        let err = pool
            .read(&file, &mut [(9_950, &mut past[..])], &[])
            .expect_err("past EOF");
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
        assert!(
            past[..50].iter().all(|&x| x == 7),
            "the first part was read"
        );
        // Errors reported by completions reach the caller.
        let err = pool
            .write(&file, &[(0, &b"x"[..])])
            .expect_err("write to a read-only descriptor");
        assert_eq!(err.raw_os_error(), Some(libc::EBADF));
        let d = File::open(dir.path()).expect("open dir");
        let mut one = [0u8; 1];
        let err = pool
            .read(&d, &mut [(0, &mut one[..])], &[])
            .expect_err("read a directory");
        assert_eq!(err.raw_os_error(), Some(libc::EISDIR));
        let rw = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open rw");
        pool.write(&rw, &[(0, &[1u8; 3][..]), (20_000, &[2u8; 3][..])])
            .expect("write batch");
        pool.fdatasync(&rw).expect("fdatasync");
        assert_eq!(rw.metadata().expect("stat").len(), 20_003);
    }
}
