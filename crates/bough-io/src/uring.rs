//! io_uring rings, one per calling thread.
//!
//! A caller turns its request (one or more reads, writes or an fsync on one file) into raw
//! operations pointing at its own buffers and runs them on its own thread's ring: it pushes
//! them as SQEs (a whole batch at once, up to the ring's capacity), enters the kernel once to
//! submit and wait, resubmits the remainder of short reads and writes and of
//! `EINTR`/`EAGAIN` completions, and returns when every operation has completed. There is
//! no hand-off to another thread: an earlier design queued requests for ring threads and
//! woke them through an eventfd, and the two context switches per request made every
//! workload slower than plain positional I/O (bench: random loads 4× slower).
//!
//! File syncs and writes of one buffer do not go through the ring: io_uring always hands an
//! fsync to a kernel worker thread (io-wq), and a buffered write too when the file system
//! cannot finish it without blocking (ext4 here), and wakes the caller when it is done. A
//! lone `fdatasync` took 15–30 µs longer per single-key commit than the system call made
//! in place, and the record's write 10–15 µs more than `pwrite` (measured with
//! `commit_probe`, see ARCHITECTURE.md, "Write path"). Batches of writes (a checkpoint's
//! pages) still go through the ring, where the workers copy them in parallel.
//!
//! Memory safety rests on one rule: [`RingPool::read`] and [`RingPool::write`] do not
//! return before the last completion of their request has been reaped, so the buffers and
//! the file descriptor the kernel uses stay alive (they are borrowed for the whole call)
//! for as long as the kernel may touch them, and no completion of one request is left for
//! the next one on the same ring.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::OnceLock;
use std::time::Duration;

use io_uring::{IoUring, opcode, types};

use crate::faults::ShortRead;

/// Longest single read or write submitted; longer requests continue as short transfers.
const MAX_CHUNK: usize = 1 << 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Read,
    Write,
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

thread_local! {
    /// This thread's ring, made on its first request.
    static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
}

/// Runs `f` on the calling thread's ring (created with `entries` SQ entries if missing).
fn with_ring<T>(
    entries: u32,
    f: impl FnOnce(&mut IoUring) -> std::io::Result<T>,
) -> std::io::Result<T> {
    RING.with(|cell| {
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| std::io::Error::other("io_uring ring entered twice on one thread"))?;
        let ring = match &mut *slot {
            Some(r) => r,
            empty => empty.insert(IoUring::new(entries)?),
        };
        f(ring)
    })
}

/// The rings of a storage: each calling thread uses its own (see the module docs).
#[derive(Debug)]
pub(crate) struct RingPool {
    entries: u32,
}

impl RingPool {
    /// Rings of `entries` SQ entries; makes the calling thread's ring now, so a setup
    /// failure shows when the storage is opened.
    pub(crate) fn new(entries: u32) -> std::io::Result<RingPool> {
        with_ring(entries, |_| Ok(()))?;
        Ok(RingPool { entries })
    }

    /// Runs `ops` on `fd` and waits for all of them. The caller keeps the buffers and the
    /// descriptor alive for the whole call (they are borrowed by the safe wrappers below).
    fn run(&self, fd: RawFd, ops: Vec<RawOp>) -> std::io::Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        with_ring(self.entries, |ring| Batch::new(fd, ops).run(ring))
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
}

/// One request on a ring: its operations, which wait for an SQE, and the first error.
struct Batch {
    fd: RawFd,
    ops: Vec<RawOp>,
    /// Operations waiting for an SQE.
    ready: VecDeque<usize>,
    /// Operations not finished yet.
    remaining: usize,
    error: Option<std::io::Error>,
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

impl Batch {
    fn new(fd: RawFd, ops: Vec<RawOp>) -> Batch {
        let n = ops.len();
        Batch {
            fd,
            ops,
            ready: (0..n).collect(),
            remaining: n,
            error: None,
        }
    }

    /// Submits and reaps until every operation has completed; never returns earlier (see
    /// the module docs), whatever the kernel answers.
    fn run(mut self, ring: &mut IoUring) -> std::io::Result<()> {
        let capacity = (ring.params().sq_entries() as usize).max(1);
        let mut in_kernel = 0usize;
        let mut failures = 0u32;
        while self.remaining > 0 {
            while in_kernel < capacity {
                let Some(i) = self.ready.pop_front() else {
                    break;
                };
                let Some(entry) = self.entry(i) else {
                    continue;
                };
                // SAFETY: the entry points into a buffer of the caller of `RingPool::run`,
                // which does not return before this operation completes (module docs), at an
                // offset and length within that buffer (`done < len`, chunk ≤ `len - done`),
                // and at a descriptor the caller keeps open for the same time.
                if unsafe { ring.submission().push(&entry) }.is_err() {
                    self.ready.push_front(i);
                    break;
                }
                in_kernel += 1;
            }
            match ring.submit_and_wait(1) {
                Ok(_) => failures = 0,
                Err(e)
                    if e.raw_os_error()
                        .is_some_and(|n| retryable(n) || n == libc::EBUSY) => {}
                Err(e) => {
                    // Operations may be in the kernel: returning now would free buffers it
                    // may still write. Keep entering until they complete.
                    failures += 1;
                    if failures.is_power_of_two() {
                        tracing::error!(error = %e, failures, "io_uring_enter failed");
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            let done: Vec<(u64, i32)> = ring
                .completion()
                .map(|c| (c.user_data(), c.result()))
                .collect();
            for (user_data, res) in done {
                in_kernel = in_kernel.saturating_sub(1);
                self.complete(user_data as usize, res);
            }
        }
        match self.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The SQE for the rest of operation `i`.
    fn entry(&self, i: usize) -> Option<io_uring::squeue::Entry> {
        let op = self.ops.get(i)?;
        let fd = types::Fd(self.fd);
        let (buf, len, offset) = rest(op);
        let e = match op.kind {
            OpKind::Read => opcode::Read::new(fd, buf, len).offset(offset).build(),
            OpKind::Write => opcode::Write::new(fd, buf.cast_const(), len)
                .offset(offset)
                .build(),
        };
        Some(e.user_data(i as u64))
    }

    /// Takes the completion `res` of operation `i`: finished, failed, or queued again for
    /// the rest of a short transfer or after `EINTR`/`EAGAIN`.
    fn complete(&mut self, i: usize, res: i32) {
        let Some(op) = self.ops.get_mut(i) else {
            tracing::error!(op = i, "io_uring completion for an unknown operation");
            return;
        };
        let outcome: Option<std::io::Error> = if res < 0 {
            if retryable(-res) && self.error.is_none() {
                self.ready.push_back(i);
                return;
            }
            Some(std::io::Error::from_raw_os_error(-res))
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
            if op.done < op.len && self.error.is_none() {
                if let Some(errno) = op.fail_rest.take() {
                    // Injected: the device gave up after the short first transfer.
                    Some(std::io::Error::from_raw_os_error(errno))
                } else {
                    // Short transfer: submit the rest.
                    self.ready.push_back(i);
                    return;
                }
            } else {
                None
            }
        };
        if let Some(e) = outcome {
            self.error.get_or_insert(e);
        }
        self.remaining -= 1;
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

    /// Feeds synthetic completion results to a batch (nothing is submitted to the kernel):
    /// retries, short transfers and end-of-file.
    #[test]
    fn synthetic_completions() {
        let mut buf = [0u8; 100];
        let op = |kind: OpKind, buf: &mut [u8]| RawOp {
            kind,
            buf: buf.as_mut_ptr(),
            len: buf.len(),
            offset: 1000,
            done: 0,
            first: buf.len(),
            fail_rest: None,
        };
        let mut b = Batch::new(-1, vec![op(OpKind::Read, &mut buf)]);
        assert_eq!(b.ready.drain(..).collect::<Vec<_>>(), vec![0]);
        for res in [-libc::EINTR, 40, -libc::EAGAIN] {
            b.complete(0, res);
            assert_eq!(b.ready.drain(..).count(), 1, "requeued after {res}");
        }
        assert_eq!(b.ops[0].done, 40, "short read remembered");
        assert_eq!(
            rest(&b.ops[0]),
            (buf.as_mut_ptr().wrapping_add(40), 60, 1040)
        );
        assert!(b.entry(0).is_some());
        b.complete(0, 60);
        assert!(b.ready.is_empty());
        assert_eq!(b.remaining, 0);
        assert!(b.error.is_none());

        let mut b = Batch::new(-1, vec![op(OpKind::Read, &mut buf)]);
        b.ready.clear();
        b.complete(0, 0);
        assert_eq!(
            b.error.as_ref().map(std::io::Error::kind),
            Some(std::io::ErrorKind::UnexpectedEof)
        );

        let mut b = Batch::new(-1, vec![op(OpKind::Write, &mut buf)]);
        b.ready.clear();
        b.complete(0, -libc::EIO);
        assert_eq!(
            b.error.as_ref().and_then(std::io::Error::raw_os_error),
            Some(libc::EIO)
        );
        assert_eq!(b.remaining, 0);
    }

    /// A file holding `bytes` in a fresh directory, opened read-only; `None` (said loudly)
    /// where io_uring is unavailable.
    fn ring_test_file(bytes: &[u8]) -> Option<(tempfile::TempDir, std::path::PathBuf, File)> {
        if let Err(why) = probe() {
            eprintln!("!!! io_uring unavailable ({why}); ring unit test skipped LOUDLY");
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, bytes).expect("write");
        let file = File::open(&path).expect("open");
        Some((dir, path, file))
    }

    #[test]
    fn short_reads_continue_and_eof_is_reported() {
        let Some((dir, path, file)) = ring_test_file(&[7u8; 10_000]) else {
            return;
        };
        let pool = RingPool::new(8).expect("pool");
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
        rw.sync_data().expect("fdatasync");
        assert_eq!(rw.metadata().expect("stat").len(), 20_003);
    }

    /// Every thread runs its requests on its own ring; concurrent callers do not see each
    /// other's completions.
    #[test]
    fn threads_use_their_own_rings() {
        let bytes: Vec<u8> = (0..64_000u32).map(|i| (i % 251) as u8).collect();
        let Some((_dir, _, file)) = ring_test_file(&bytes) else {
            return;
        };
        let pool = RingPool::new(4).expect("pool");
        std::thread::scope(|s| {
            for t in 0..4usize {
                let (pool, file, bytes) = (&pool, &file, &bytes);
                s.spawn(move || {
                    for round in 0..200usize {
                        let at = (t * 7919 + round * 104_729) % 60_000;
                        let mut a = vec![0u8; 1000];
                        let mut b = vec![0u8; 3000];
                        pool.read(
                            file,
                            &mut [(at as u64, &mut a[..]), (at as u64 / 2, &mut b[..])],
                            &[],
                        )
                        .expect("read");
                        assert_eq!(a, bytes[at..at + 1000]);
                        assert_eq!(b, bytes[at / 2..at / 2 + 3000]);
                    }
                });
            }
        });
    }
}
