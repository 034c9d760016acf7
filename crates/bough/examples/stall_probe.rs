//! Single-key durable commits while a background checkpoint of a full write buffer runs
//! (what the benchmark's `commit_1w` row meets after its `mixed` row): KEYS random keys
//! loaded and checkpointed, random 1,000-key batches written until a background checkpoint
//! starts, then one writer of single-key commits for SECS seconds. Prints the commits'
//! rate and latency percentiles, and how many took over 10 ms.
//! `cargo run --release --example stall_probe -p bough [-- KEYS SECS]` (default 2,000,000
//! keys, 5 s); the files go under `$BOUGH_PROBE_DIR`.
use std::time::{Duration, Instant};

use bough::WriteBatch;

mod probe;

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().ok());
    let keys = args.next().flatten().unwrap_or(2_000_000);
    let secs = args.next().flatten().unwrap_or(5);
    let dir = probe::probe_dir();
    let (store, main) = probe::open_bench(dir.path());
    for start in (0..keys).step_by(10_000) {
        let mut wb = WriteBatch::new();
        for i in start..(start + 10_000).min(keys) {
            wb.put(probe::random_key(i), vec![b'v'; 100]);
        }
        main.write_blocking(wb).expect("load");
    }
    main.checkpoint_blocking().expect("checkpoint");
    let started_before = store.write_buffer_usage().background_checkpoints;
    let mut x = 0x1234_5678_9ABC_DEF1u64;
    while store.write_buffer_usage().background_checkpoints == started_before {
        let mut wb = WriteBatch::new();
        // 1,000 distinct loaded keys (a batch holds a key once).
        let base = probe::xorshift(&mut x) % keys;
        for j in 0..1000 {
            wb.put(probe::random_key((base + j * 1999) % keys), vec![b'w'; 100]);
        }
        main.write_blocking(wb).expect("overwrite");
    }
    let mut lat: Vec<Duration> = Vec::new();
    let began = Instant::now();
    let mut i = 0u64;
    while began.elapsed() < Duration::from_secs(secs) {
        let t = Instant::now();
        main.put_blocking(probe::random_key(keys + i), vec![b'c'; 100])
            .expect("commit");
        lat.push(t.elapsed());
        i += 1;
    }
    let elapsed = began.elapsed().as_secs_f64();
    lat.sort_unstable();
    let pct = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e6;
    let slow = lat
        .iter()
        .filter(|d| **d > Duration::from_millis(10))
        .count();
    println!(
        "commits: {:.0}/s; p50 {:.0} µs, p99 {:.0} µs, p99.9 {:.0} µs, max {:.0} µs; {slow} over 10 ms",
        lat.len() as f64 / elapsed,
        pct(0.5),
        pct(0.99),
        pct(0.999),
        pct(1.0)
    );
    store.close().expect("close");
}
