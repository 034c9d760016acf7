//! Measuring: latency percentiles, process I/O counters, directory sizes, the page cache,
//! and the deterministic key and value generators every engine is fed with.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Latency samples in nanoseconds.
#[derive(Debug, Default, Clone)]
pub struct Latencies(Vec<u64>);

impl Latencies {
    pub fn with_capacity(n: usize) -> Self {
        Latencies(Vec::with_capacity(n))
    }

    pub fn push(&mut self, d: Duration) {
        self.0.push(d.as_nanos().min(u128::from(u64::MAX)) as u64);
    }

    pub fn extend(&mut self, other: Latencies) {
        self.0.extend(other.0);
    }

    /// The `p`-th percentile (0..=100) in microseconds; 0 without samples.
    pub fn percentile_us(&mut self, p: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.sort_unstable();
        let rank = ((p / 100.0) * (self.0.len() - 1) as f64).round() as usize;
        self.0[rank.min(self.0.len() - 1)] as f64 / 1e3
    }
}

/// This process's storage I/O counters (`/proc/self/io`): bytes it caused to be read from
/// and written to the storage layer, all threads included.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcIo {
    pub read_bytes: u64,
    pub write_bytes: u64,
}

impl ProcIo {
    pub fn now() -> ProcIo {
        let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        ProcIo {
            read_bytes: field("read_bytes:"),
            write_bytes: field("write_bytes:"),
        }
    }

    pub fn since(self, earlier: ProcIo) -> ProcIo {
        ProcIo {
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
        }
    }
}

/// Bytes allocated on disk below `p` (st_blocks × 512, so sparse and preallocated files
/// count what they really hold).
pub fn disk_bytes(p: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if meta.is_dir() {
        std::fs::read_dir(p)
            .map(|rd| rd.flatten().map(|e| disk_bytes(&e.path())).sum())
            .unwrap_or(0)
    } else {
        meta.blocks() * 512
    }
}

/// How "cold" is made cold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColdMethod {
    /// `sync; echo 3 > /proc/sys/vm/drop_caches` before each round of reads.
    DropCaches,
    /// Nothing could be done: the "cold" figures are not cold.
    Unavailable,
}

impl ColdMethod {
    /// Picks the method. A memory-capped cgroup needs a delegated cgroup-v2 memory
    /// controller; without one (this machine mounts cgroup v1 and the session's memory
    /// cgroup belongs to the sandbox) the page cache is dropped instead, which needs root.
    pub fn detect() -> (ColdMethod, String) {
        let v2_memory = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
            .map(|c| c.split_whitespace().any(|w| w == "memory"))
            .unwrap_or(false);
        let why_not_cgroup = if v2_memory {
            "a cgroup-v2 memory controller exists, but capping it would also cap the page cache of the other engines' warm phases in this one process; the page cache is dropped instead"
        } else {
            "no delegated cgroup-v2 memory controller (cgroup v1 hierarchy; the memory cgroup belongs to the sandbox)"
        };
        if drop_caches().is_ok() {
            (
                ColdMethod::DropCaches,
                format!(
                    "page cache dropped (`sync; echo 3 > /proc/sys/vm/drop_caches`) before every round of cold reads; memory cgroup not used: {why_not_cgroup}"
                ),
            )
        } else {
            (
                ColdMethod::Unavailable,
                format!(
                    "NOT COLD: cannot write /proc/sys/vm/drop_caches (not root?) and {why_not_cgroup}"
                ),
            )
        }
    }
}

/// Flushes dirty pages and drops the clean page cache, dentries and inodes.
pub fn drop_caches() -> std::io::Result<()> {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", b"3\n")
}

/// SplitMix64: a fast, well-mixed bijection on u64.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Key length in bytes for every workload.
pub const KEY_LEN: usize = 16;

/// Key `i` of the random-order key space: 16 bytes, uniformly spread, distinct for each i.
pub fn random_key(i: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(KEY_LEN);
    k.extend_from_slice(&mix(i).to_be_bytes());
    k.extend_from_slice(&i.to_be_bytes());
    k
}

/// Key `i` of the sorted key space: 16 bytes, increasing with i.
pub fn sorted_key(i: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(KEY_LEN);
    k.extend_from_slice(b"seqkey__");
    k.extend_from_slice(&i.to_be_bytes());
    k
}

/// A `len`-byte incompressible value derived from `seed`.
pub fn value(seed: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len + 8);
    let mut x = seed;
    while v.len() < len {
        x = mix(x);
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// A small xorshift generator for choosing keys inside a workload.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(mix(seed) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

// Object-store request counters (the cloud engines wrap their clients with them).

/// Requests one engine sent to the object store, and the bytes of their bodies.
#[derive(Debug, Default)]
pub struct Counters {
    pub(crate) gets: AtomicU64,
    pub(crate) get_bytes: AtomicU64,
    pub(crate) puts: AtomicU64,
    pub(crate) put_bytes: AtomicU64,
    pub(crate) heads: AtomicU64,
    pub(crate) lists: AtomicU64,
    pub(crate) deletes: AtomicU64,
}

/// A snapshot of [`Counters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requests {
    /// GET requests (whole objects and ranges).
    pub gets: u64,
    pub get_bytes: u64,
    /// PUT requests (plain, conditional, and each part of a multipart upload).
    pub puts: u64,
    pub put_bytes: u64,
    pub heads: u64,
    /// LIST requests (one per page where the client pages itself, else one per listing).
    pub lists: u64,
    /// Objects deleted.
    pub deletes: u64,
}

impl Requests {
    pub fn since(self, e: Requests) -> Requests {
        Requests {
            gets: self.gets - e.gets,
            get_bytes: self.get_bytes - e.get_bytes,
            puts: self.puts - e.puts,
            put_bytes: self.put_bytes - e.put_bytes,
            heads: self.heads - e.heads,
            lists: self.lists - e.lists,
            deletes: self.deletes - e.deletes,
        }
    }

    pub fn add(&mut self, o: Requests) {
        self.gets += o.gets;
        self.get_bytes += o.get_bytes;
        self.puts += o.puts;
        self.put_bytes += o.put_bytes;
        self.heads += o.heads;
        self.lists += o.lists;
        self.deletes += o.deletes;
    }
}

impl Counters {
    pub fn snapshot(&self) -> Requests {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Requests {
            gets: l(&self.gets),
            get_bytes: l(&self.get_bytes),
            puts: l(&self.puts),
            put_bytes: l(&self.put_bytes),
            heads: l(&self.heads),
            lists: l(&self.lists),
            deletes: l(&self.deletes),
        }
    }

    pub(crate) fn get(&self, bytes: u64) {
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.get_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn put(&self, bytes: u64) {
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.put_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn bump(a: &AtomicU64, n: u64) {
        a.fetch_add(n, Ordering::Relaxed);
    }
}
