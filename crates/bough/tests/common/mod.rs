//! Helpers shared by the acceptance tests: a seeded PRNG, seed selection (`BOUGH_SEED`), a
//! tiny executor for the async write API, and store openers per backend.
//!
//! Every test binary includes this module with `mod common;` and uses a different subset of
//! it, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::future::Future;
use std::path::Path;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use bough::io::MemoryStorage;
use bough::{Backend, Options, Store, StoreBuilder};

/// The backends every test runs on.
pub const ALL_BACKENDS: [Backend; 3] = [Backend::Memory, Backend::Pread, Backend::IoUring];

/// A small, fast, seedable PRNG (SplitMix64). Deterministic across platforms.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        // Lemire's multiply-shift; the tiny bias does not matter for tests.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..hi` (`lo < hi`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo)
    }

    /// Uniform `usize` in `lo..hi`.
    pub fn urange(&mut self, lo: usize, hi: usize) -> usize {
        self.range(lo as u64, hi as u64) as usize
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p && p > 0.0
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let r = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }

    /// A random element of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// The SplitMix64 finaliser: a good 64-bit hash of `x`.
pub fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// `BOUGH_SEED`, if set (decimal or `0x` hex).
pub fn seed_from_env() -> Option<u64> {
    let s = std::env::var("BOUGH_SEED").ok()?;
    let s = s.trim();
    let parsed = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    Some(parsed.unwrap_or_else(|e| panic!("BOUGH_SEED={s:?} is not a u64: {e}")))
}

/// The seeds a randomized test runs: the one in `BOUGH_SEED` (replay), or `count` fresh
/// ones. Printed either way, with the command that replays them.
pub fn seeds(test: &str, count: usize) -> Vec<u64> {
    if let Some(seed) = seed_from_env() {
        eprintln!("[{test}] replaying BOUGH_SEED={seed}");
        return vec![seed];
    }
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id()).rotate_left(32);
    let seeds: Vec<u64> = (0..count as u64)
        .map(|i| mix(base.wrapping_add(i)))
        .collect();
    for s in &seeds {
        eprintln!("[{test}] seed {s} (replay: BOUGH_SEED={s} cargo nextest run -p bough {test})");
    }
    seeds
}

/// Whether the test replays a single seed from `BOUGH_SEED`.
pub fn replaying() -> bool {
    seed_from_env().is_some()
}

struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs a future to completion on the current thread (the store's futures work on any
/// executor; this one parks the thread between polls).
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = pin!(fut);
    loop {
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => std::thread::park_timeout(Duration::from_millis(50)),
        }
    }
}

/// Options for `backend`, rooted at `dir` (local backends) or sharing `mem` (memory), with
/// background maintenance off.
pub fn options(backend: Backend, dir: &Path, mem: &MemoryStorage) -> StoreBuilder {
    match backend {
        Backend::Memory => Store::builder(Options::in_memory()).memory(mem.clone()),
        b => Store::builder(Options::new(dir).backend(b)),
    }
    .map_settings(|o| o.maintenance_interval_ms(0))
}

/// Opens `opts` and logs which backend serves it.
pub fn open(test: &str, opts: impl Into<StoreBuilder>) -> Store {
    let store = Store::open(opts).unwrap_or_else(|e| panic!("[{test}] open failed: {e}"));
    eprintln!("[{test}] backend: {}", store.backend());
    store
}

/// Sum of file sizes and of allocated bytes (st_blocks) of the files in `dir`.
pub fn dir_bytes(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut len = 0;
    let mut alloc = 0;
    for e in std::fs::read_dir(dir).expect("read_dir") {
        let m = e.expect("dir entry").metadata().expect("metadata");
        if m.is_file() {
            len += m.len();
            alloc += m.blocks() * 512;
        }
    }
    (len, alloc)
}

/// Simple stopwatch for reporting phases.
#[derive(Debug)]
pub struct Timer(Instant, String);

impl Timer {
    /// Starts timing `what`.
    pub fn start(what: impl Into<String>) -> Self {
        Timer(Instant::now(), what.into())
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        eprintln!("{} took {:.2?}", self.1, self.0.elapsed());
    }
}
