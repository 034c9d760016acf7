//! What a history window (`Options::history_window_ms`) costs on the write path: the same
//! commits with it off and on, three alternating rounds, in one run (ratios are what
//! count on a shared machine). `cargo run --release --example history_cost -p bough`.
use bough::{Options, Store, WriteBatch};
use std::time::Instant;

fn run(history: u64, buffer: u64, commits: usize, keys: usize) -> (f64, u64, usize) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        Options::new(dir.path())
            .maintenance_interval_ms(0)
            .history_window_ms(history)
            .write_buffer_bytes(buffer),
    )
    .unwrap();
    let p = store.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let t = Instant::now();
    for c in 0..commits {
        let mut wb = WriteBatch::new();
        for k in 0..keys {
            wb.put(
                format!("k{:08}", (c * 7919 + k * 104729) % 1_000_000),
                vec![b'v'; 100],
            );
        }
        main.write_blocking(wb).unwrap();
    }
    main.checkpoint_blocking().unwrap();
    let secs = t.elapsed().as_secs_f64();
    let points = p.history_points("main").unwrap().len();
    let space = p
        .describe("main")
        .unwrap()
        .space
        .map_or(0, |s| s.history_bytes);
    store.close().unwrap();
    (secs, space, points)
}

fn main() {
    for (label, buffer, commits, keys) in [
        ("unbuffered single-key", 0u64, 2000usize, 1usize),
        ("buffered single-key", 64 << 20, 2000, 1),
        ("buffered 1k-key batches", 64 << 20, 200, 1000),
    ] {
        for round in 0..3 {
            let (off, _, _) = run(0, buffer, commits, keys);
            let (on, hb, pts) = run(3_600_000, buffer, commits, keys);
            println!(
                "{label} round {round}: off {:.3} s, on {:.3} s ({:.2}x); {pts} points, {hb} history bytes",
                off,
                on,
                on / off
            );
        }
    }
}
