//! Warm point gets on one thread, the benchmark's `get_warm_t1` without its harness: KEYS
//! random 16-byte keys with 100-byte values loaded in 10k-key durable batches and
//! checkpointed, every page read once, then ROUNDS rounds of gets of random loaded keys.
//! Prints gets/s per round; run it under `perf record` to see where a warm get goes.
//! `cargo run --release --example get_probe -p bough [-- KEYS ROUNDS]` (default 2,000,000
//! keys, 5 rounds); the files go under `$BOUGH_PROBE_DIR` (default: the system's
//! temporary directory).
use bough::{Options, Store, WriteBatch};

const BATCH: usize = 10_000;

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().ok());
    let keys = args.next().flatten().unwrap_or(2_000_000);
    let rounds = args.next().flatten().unwrap_or(5);
    let dir = match std::env::var_os("BOUGH_PROBE_DIR") {
        Some(d) => tempfile::tempdir_in(d).expect("probe dir"),
        None => tempfile::tempdir().expect("temporary dir"),
    };
    let opts = Options::new(dir.path())
        .cache_bytes(1 << 30)
        .cache_data_pages(true);
    let store = Store::open(opts).expect("open");
    let main = store
        .partition("bench", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        // xorshift64: spread over the whole key space, as the benchmark's keys are.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let all: Vec<[u8; 16]> = (0..keys)
        .map(|_| {
            let r = next();
            let mut k = [0u8; 16];
            k[..8].copy_from_slice(&r.to_be_bytes());
            k[8..].copy_from_slice(&r.wrapping_mul(31).to_le_bytes());
            k
        })
        .collect();
    for chunk in all.chunks(BATCH) {
        let mut wb = WriteBatch::new();
        for k in chunk {
            wb.put(k, vec![b'v'; 100]);
        }
        main.write_blocking(wb).expect("write");
    }
    main.checkpoint_blocking().expect("checkpoint");
    let order: Vec<usize> = (0..keys).map(|_| next() as usize % keys).collect();
    for k in &all {
        std::hint::black_box(main.get_blocking(k).expect("get"));
    }
    for round in 0..rounds {
        let started = std::time::Instant::now();
        for &i in &order {
            let got = main.get_blocking(all[i]).expect("get");
            assert!(got.is_some(), "a loaded key is missing");
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "round {round}: {:.0} gets/s ({:.2} µs/get)",
            keys as f64 / secs,
            secs * 1e6 / keys as f64
        );
    }
}
