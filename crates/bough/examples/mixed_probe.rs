//! The benchmark's `mixed` row without its harness: KEYS random keys (16-byte keys,
//! 100-byte values) loaded in 10k-key batches and checkpointed, then SECS seconds of one
//! writer overwriting random loaded keys in durable 100-key batches beside READERS threads
//! of random gets. Prints the writer's rate, Bough's bytes written per user byte of the
//! overwrite phase, its checkpoints, and the files on disk after it.
//! `cargo run --release --example mixed_probe -p bough [-- KEYS SECS READERS]` (default
//! 2,000,000 keys, 15 s, 2 readers); the files go under `$BOUGH_PROBE_DIR` (default: the
//! system's temporary directory).
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bough::WriteBatch;

mod probe;

fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().ok());
    let keys = args.next().flatten().unwrap_or(2_000_000);
    let secs = args.next().flatten().unwrap_or(15);
    let readers = args.next().flatten().unwrap_or(2);
    let dir = probe::probe_dir();
    let (store, main) = probe::open_bench(dir.path());
    for start in (0..keys).step_by(10_000) {
        let mut wb = WriteBatch::new();
        for i in start..(start + 10_000).min(keys) {
            wb.put(key(i), vec![b'v'; 100]);
        }
        main.write_blocking(wb).expect("load");
    }
    main.checkpoint_blocking().expect("checkpoint");
    let before = store.io_stats().write_bytes;
    let usage0 = store.write_buffer_usage();
    let stop = AtomicBool::new(false);
    let written = AtomicU64::new(0);
    let started = std::time::Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut x = 0x1234_5678_9ABC_DEF1u64;
            while !stop.load(Ordering::Relaxed) {
                let mut wb = WriteBatch::new();
                // 100 distinct keys spread over the key space (a batch holds a key once).
                let base = probe::xorshift(&mut x) % keys;
                for j in 0..100 {
                    wb.put(key((base + j * 7919) % keys), vec![b'w'; 100]);
                }
                main.write_blocking(wb).expect("overwrite");
                written.fetch_add(100, Ordering::Relaxed);
            }
        });
        for t in 0..readers {
            let (main, stop) = (&main, &stop);
            s.spawn(move || {
                let mut x = 0xABCD_EF01_2345_6789u64 ^ t;
                while !stop.load(Ordering::Relaxed) {
                    std::hint::black_box(
                        main.get_blocking(key(probe::xorshift(&mut x) % keys))
                            .expect("get"),
                    );
                }
            });
        }
        std::thread::sleep(std::time::Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
    });
    let elapsed = started.elapsed().as_secs_f64();
    let n = written.load(Ordering::Relaxed);
    let user = (n * (16 + 100)) as f64;
    let usage = store.write_buffer_usage();
    println!(
        "overwrites: {:.0} keys/s; {:.2} B/B; checkpoints: {} on the commit path, {} in the background",
        n as f64 / elapsed,
        (store.io_stats().write_bytes - before) as f64 / user,
        usage.commit_checkpoints - usage0.commit_checkpoints,
        usage.background_checkpoints - usage0.background_checkpoints
    );
    println!(
        "files: {:.1} MiB",
        probe::disk_bytes(dir.path()) as f64 / 1048576.0
    );
    store.close().expect("close");
}
