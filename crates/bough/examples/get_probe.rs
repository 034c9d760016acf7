//! Warm point gets on one thread, the benchmark's `get_warm_t1` without its harness: KEYS
//! random 16-byte keys with 100-byte values loaded in 10k-key durable batches and
//! checkpointed, every page read once, then ROUNDS rounds of gets of random loaded keys.
//! Prints gets/s per round; run it under `perf record` to see where a warm get goes. With
//! SCAN > 0 each get is a borrowed walk of SCAN entries from the key instead (the
//! benchmark's `scan_100` as its Bough adapter runs it: `Branch::for_each_in`).
//! `cargo run --release --example get_probe -p bough [-- KEYS ROUNDS SCAN]` (default
//! 2,000,000 keys, 5 rounds, 0); the files go under `$BOUGH_PROBE_DIR` (default: the
//! system's temporary directory).
use bough::WriteBatch;

mod probe;

const BATCH: usize = 10_000;

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().ok());
    let keys = args.next().flatten().unwrap_or(2_000_000);
    let rounds = args.next().flatten().unwrap_or(5);
    let scan = args.next().flatten().unwrap_or(0);
    let dir = probe::probe_dir();
    let (_store, main) = probe::open_bench(dir.path());
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let all: Vec<[u8; 16]> = (0..keys)
        .map(|_| probe::random_key(probe::xorshift(&mut x)))
        .collect();
    for chunk in all.chunks(BATCH) {
        let mut wb = WriteBatch::new();
        for k in chunk {
            wb.put(k, vec![b'v'; 100]);
        }
        main.write_blocking(wb).expect("write");
    }
    main.checkpoint_blocking().expect("checkpoint");
    let order: Vec<usize> = (0..keys)
        .map(|_| probe::xorshift(&mut x) as usize % keys)
        .collect();
    for k in &all {
        std::hint::black_box(main.get_blocking(k).expect("get"));
    }
    let ops = if scan > 0 { keys / 20 } else { keys };
    for round in 0..rounds {
        let started = std::time::Instant::now();
        for &i in &order[..ops] {
            if scan > 0 {
                let mut got = 0;
                main.for_each_in(&all[i][..].., |k, v| {
                    std::hint::black_box((k, v));
                    got += 1;
                    if got >= scan {
                        std::ops::ControlFlow::Break(())
                    } else {
                        std::ops::ControlFlow::Continue(())
                    }
                })
                .expect("scan");
            } else {
                let got = main.get_blocking(all[i]).expect("get");
                assert!(got.is_some(), "a loaded key is missing");
            }
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "round {round}: {:.0} {}/s ({:.2} µs each)",
            ops as f64 / secs,
            if scan > 0 { "scans" } else { "gets" },
            secs * 1e6 / ops as f64
        );
    }
}
