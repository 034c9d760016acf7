//! What the probes share: where their files go, the store and branch the benchmark's rows
//! use, the random keys they write and the bytes left on disk. Each probe uses a part.
#![allow(dead_code, reason = "each probe uses a part of this module")]

use bough::{Branch, Options, Store};

/// A fresh directory under `$BOUGH_PROBE_DIR` (default: the system's temporary directory).
pub fn probe_dir() -> tempfile::TempDir {
    match std::env::var_os("BOUGH_PROBE_DIR") {
        Some(d) => tempfile::tempdir_in(d).expect("probe dir"),
        None => tempfile::tempdir().expect("temporary dir"),
    }
}

/// A store in `dir` as the benchmark opens Bough (1 GiB cache, leaves cached) and its
/// branch `bench/0@main`.
pub fn open_bench(dir: &std::path::Path) -> (Store, Branch) {
    let opts = Options::new(dir)
        .cache_bytes(1 << 30)
        .cache_data_pages(true);
    let store = Store::open(opts).expect("open");
    let main = store
        .partition("bench", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    (store, main)
}

/// The next value of the xorshift64 generator in `x`.
pub fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// A 16-byte key made of the random value `r`: spread over the whole key space, as the
/// benchmark's keys are.
pub fn random_key(r: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&r.to_be_bytes());
    k[8..].copy_from_slice(&r.wrapping_mul(31).to_le_bytes());
    k
}

/// Bytes of every file under `p` (their lengths).
pub fn disk_bytes(p: &std::path::Path) -> u64 {
    let mut sum = 0;
    for e in std::fs::read_dir(p).expect("read_dir").flatten() {
        let Ok(m) = e.metadata() else { continue };
        sum += if m.is_dir() {
            disk_bytes(&e.path())
        } else {
            m.len()
        };
    }
    sum
}
