//! Branch creation on its own: a partition whose `main` holds BUFFERED keys in its write
//! buffer (100-byte values, 10k-key batches; at least one), then COUNT branches created
//! from `main`, each timed. Prints the p50 and the slowest; run it under `strace -f -T` to
//! see which file operations a creation pays for.
//! `cargo run --release --example fork_probe -p bough [-- COUNT BUFFERED]` (default 200
//! and 1); the files go under `$BOUGH_PROBE_DIR` (default: the system's temporary
//! directory).
use bough::{Options, Store, WriteBatch};

mod probe;

fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().ok());
    let count = args.next().flatten().unwrap_or(200);
    let buffered = args.next().flatten().unwrap_or(1).max(1);
    let dir = probe::probe_dir();
    let store = Store::open(Options::new(dir.path()).maintenance_interval_ms(0)).expect("open");
    let part = store.partition("bench", 0).expect("partition");
    let main = part.branch("main").expect("branch");
    for start in (0..buffered).step_by(10_000) {
        let mut wb = WriteBatch::new();
        for i in start..(start + 10_000).min(buffered) {
            wb.put(format!("key{i:012}"), vec![b'v'; 100]);
        }
        main.write_blocking(wb).expect("write");
    }
    let mut took: Vec<f64> = (0..count)
        .map(|i| {
            let started = std::time::Instant::now();
            part.create_branch(&format!("fork-{i}"), "main")
                .expect("create");
            started.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    took.sort_by(f64::total_cmp);
    let at = |q: f64| took.get(((took.len() as f64 - 1.0) * q) as usize).copied();
    println!(
        "{count} creations: p50 {:.3} ms, p90 {:.3} ms, max {:.3} ms",
        at(0.5).unwrap_or(0.0),
        at(0.9).unwrap_or(0.0),
        at(1.0).unwrap_or(0.0)
    );
}
