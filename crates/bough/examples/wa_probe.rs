//! Where the bytes of a random durable load go (the benchmark's `fill_rand_10k`): KEYS
//! random 16-byte keys with 100-byte values in 10k-key durable batches, then the settle
//! in its parts — background work finishing, the last checkpoint, compaction, one
//! maintenance pass. Prints bytes written per user byte (Bough's own counter) after each
//! part, and the files left on disk.
//! `cargo run --release --example wa_probe -p bough [-- KEYS]` (default 2,000,000); the
//! files go under `$BOUGH_PROBE_DIR` (default: the system's temporary directory).
use bough::{Store, WriteBatch};

mod probe;

const BATCH: u64 = 10_000;
const USER_BYTES_PER_KEY: u64 = 16 + 100;

fn main() {
    let keys: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let dir = probe::probe_dir();
    let (store, main) = probe::open_bench(dir.path());
    let user = (keys * USER_BYTES_PER_KEY) as f64;
    let per_user = |store: &Store| store.io_stats().write_bytes as f64 / user;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let started = std::time::Instant::now();
    for _ in 0..keys / BATCH {
        let mut wb = WriteBatch::new();
        for _ in 0..BATCH {
            wb.put(probe::random_key(probe::xorshift(&mut x)), vec![b'v'; 100]);
        }
        main.write_blocking(wb).expect("write");
    }
    println!(
        "load: {:.2} s, {:.2} B/B",
        started.elapsed().as_secs_f64(),
        per_user(&store)
    );
    // A background checkpoint may still be running.
    std::thread::sleep(std::time::Duration::from_secs(3));
    println!("background work done: {:.2} B/B", per_user(&store));
    main.checkpoint_blocking().expect("checkpoint");
    println!("last checkpoint: {:.2} B/B", per_user(&store));
    let compaction = main.compact_now().expect("compaction");
    println!(
        "compaction: {:.2} B/B ({} files, {} pages moved)",
        per_user(&store),
        compaction.compacted.len(),
        compaction.pages_moved
    );
    store.run_maintenance().expect("maintenance");
    let usage = store.write_buffer_usage();
    println!(
        "maintenance: {:.2} B/B; checkpoints: {} on the commit path, {} in the background",
        per_user(&store),
        usage.commit_checkpoints,
        usage.background_checkpoints
    );
    println!(
        "files: {:.1} MiB for {:.1} MiB of user data",
        probe::disk_bytes(dir.path()) as f64 / 1048576.0,
        user / 1048576.0
    );
    store.close().expect("close");
}
