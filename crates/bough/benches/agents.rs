//! Branches at agent scale (issue 18 §7): agents create and discard branches by the thousand.
//! A plain harness printing one table: for a partition grown to 10, 1,000 and 100,000
//! branches, how long creating one more branch takes (p50 / p99 over the last tenth of the
//! creations that brought it there, at least 10), what an idle branch costs in memory and on disk, how long the store
//! takes to open with that many branches, and how long a GC cycle takes right after the
//! growth and again after a single one-key write (a cycle's cost should follow what changed
//! since the last one, not the branch count).
//!
//! `cargo bench -p bough --bench agents` runs 10 / 1,000 / 100,000; `-- --quick` stops at
//! 1,000. Compare within one run: these machines are noisy.

use std::time::{Duration, Instant};

use bough::{Backend, Options, Store, WriteBatch};

fn options(dir: &std::path::Path) -> Options {
    Options::new(dir)
        .backend(Backend::Auto)
        .cache_bytes(256 << 20)
        .maintenance_interval_ms(0)
}

fn dir_bytes(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| {
                    if e.path().is_dir() {
                        dir_bytes(&e.path())
                    } else {
                        e.metadata().map(|m| m.len()).unwrap_or(0)
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

/// Resident set size of this process, in bytes (Linux; 0 elsewhere).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn us(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1e6)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let stages: &[usize] = if quick {
        &[10, 1_000]
    } else {
        &[10, 1_000, 100_000]
    };
    println!(
        "# Bough branches at agent scale ({})\n",
        if quick { "quick" } else { "full" }
    );
    println!(
        "| branches | create p50 µs | create p99 µs | idle memory per branch B | disk per branch B | open ms | gc after growth ms | gc after one write ms |"
    );
    println!("|---|---|---|---|---|---|---|---|");

    let dir = tempfile::tempdir().expect("tempdir");
    let mut store = Store::open(options(dir.path())).expect("open");
    {
        let p = store.partition("t", 0).expect("partition");
        let main = p.branch("main").expect("main");
        let mut w = WriteBatch::new();
        for k in 0..10_000u32 {
            w.put(format!("key{k:08}"), vec![b'v'; 100]);
        }
        main.write_blocking(w).expect("load");
        store.run_maintenance().expect("maintenance");
    }
    let mut made = 0usize;
    for &n in stages {
        let p = store.partition("t", 0).expect("partition");
        let disk_before = dir_bytes(dir.path());
        let rss_before = rss_bytes();
        let grown = n - made;
        let mut took = Vec::with_capacity(grown);
        for i in made..n {
            let t = Instant::now();
            let b = p
                .create_branch(&format!("agent{i}"), "main")
                .expect("create");
            took.push(t.elapsed());
            drop(b);
        }
        made = n;
        let rss_per = rss_bytes().saturating_sub(rss_before) / grown as u64;
        let disk_per = dir_bytes(dir.path()).saturating_sub(disk_before) / grown as u64;
        // The latest creations are the ones made with (close to) n branches present.
        let window = (grown / 10).max(10).min(grown);
        let mut tail = took.split_off(grown - window);
        tail.sort();
        let p50 = percentile(&tail, 0.5);
        let p99 = percentile(&tail, 0.99);

        let t = Instant::now();
        p.gc().expect("gc");
        let gc_growth = t.elapsed();
        let one = p.branch(&format!("agent{}", n / 2)).expect("branch");
        let mut w = WriteBatch::new();
        w.put("key00000001", "changed");
        one.write_blocking(w).expect("write");
        drop(one);
        let t = Instant::now();
        p.gc().expect("gc");
        let gc_one = t.elapsed();
        drop(p);

        store.close().expect("close");
        drop(store);
        let t = Instant::now();
        store = Store::open(options(dir.path())).expect("reopen");
        let p = store.partition("t", 0).expect("partition");
        let main = p.branch("main").expect("main");
        main.get_blocking(b"key00000001").expect("get");
        let open = t.elapsed();
        println!(
            "| {n} | {} | {} | {rss_per} | {disk_per} | {:.1} | {:.1} | {:.1} |",
            us(p50),
            us(p99),
            open.as_secs_f64() * 1e3,
            gc_growth.as_secs_f64() * 1e3,
            gc_one.as_secs_f64() * 1e3,
        );
    }
}
