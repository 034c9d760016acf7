//! Branch benchmarks (a plain harness: each case is one long operation, timed once per
//! size, printed as a table): branch-creation cost against partition size, GC time against
//! branch count, diff and merge time against the number of changed keys.
//!
//! `cargo bench -p bough --bench branches` runs the full set (1 GB partition, 10,000
//! branches); `-- --quick` runs the small sizes only; `-- create`, `-- gc` or `-- diff`
//! runs one table. Compare ratios within one run: these machines are noisy.

use std::time::{Duration, Instant};

use bough::{Backend, MergeOptions, Options, Store, WriteBatch};

fn store(dir: &std::path::Path) -> Store {
    Store::open(
        Options::new(dir)
            .backend(Backend::Auto)
            .cache_bytes(512 << 20)
            .maintenance_interval_ms(0),
    )
    .expect("open")
}

fn load(b: &bough::Branch, keys: u64, value_len: usize) {
    let value = vec![b'v'; value_len];
    let mut i = 0;
    while i < keys {
        let mut batch = WriteBatch::new();
        for k in i..(i + 10_000).min(keys) {
            batch.put(format!("key{k:012}"), value.clone());
        }
        b.write_blocking(batch).expect("load");
        i += 10_000;
    }
}

fn dir_bytes(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| {
                    let m = e.metadata().map(|m| m.len()).unwrap_or(0);
                    if e.path().is_dir() {
                        dir_bytes(&e.path())
                    } else {
                        m
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // A table named on the command line (cargo passes `--bench` and the like: flags).
    let only: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let want = |table: &str| only.as_deref().is_none_or(|o| o == table);
    println!(
        "# Bough branch benchmarks ({})",
        if quick { "quick" } else { "full" }
    );

    if want("create") {
        println!("\n## Branch creation against partition size\n");
        println!("| partition bytes on disk | keys | create ms | bytes written by create |");
        println!("|---|---|---|---|");
        let sizes: &[u64] = if quick {
            &[10_000, 1_000_000]
        } else {
            &[10_000, 1_000_000, 10_000_000]
        };
        for &keys in sizes {
            // ~100 bytes of key + value per entry: 10 k keys ≈ 1 MB, 1 M ≈ 100 MB, 10 M ≈ 1 GB.
            let dir = tempfile::tempdir().expect("tempdir");
            let s = store(dir.path());
            let p = s.partition("t", 0).expect("partition");
            let main = p.branch("main").expect("main");
            load(&main, keys, 84);
            // Steady state: the background work has checkpointed the idle branch; then one small
            // write dirties one mapping chunk. Creation writes that chunk's path, the new
            // manifest and CURRENT_TERM.
            s.run_maintenance().expect("maintenance");
            let mut w = WriteBatch::new();
            w.put("last", "write");
            main.write_blocking(w).expect("write");
            let before = s.io_stats();
            let t = Instant::now();
            p.create_branch("feature", "main").expect("create");
            let took = t.elapsed();
            let written = s.io_stats().since(&before).write_bytes;
            println!(
                "| {} | {keys} | {} | {written} |",
                dir_bytes(dir.path()),
                ms(took)
            );
        }
    }

    if want("gc") {
        println!("\n## GC time against branch count\n");
        println!("| branches | create all s | gc ms | manifests read | mapping pages visited |");
        println!("|---|---|---|---|---|");
        let counts: &[usize] = if quick {
            &[100, 1000]
        } else {
            &[100, 1000, 10_000]
        };
        for &n in counts {
            let dir = tempfile::tempdir().expect("tempdir");
            let s = store(dir.path());
            let p = s.partition("t", 0).expect("partition");
            let main = p.branch("main").expect("main");
            load(&main, 100_000, 84);
            let t = Instant::now();
            for i in 0..n {
                let b = p.create_branch(&format!("b{i}"), "main").expect("create");
                let mut w = WriteBatch::new();
                w.put(format!("key{:012}", i * 7), format!("branch {i}"));
                b.write_blocking(w).expect("write");
            }
            let created = t.elapsed();
            let t = Instant::now();
            let r = p.gc().expect("gc");
            let took = t.elapsed();
            println!(
                "| {n} | {:.1} | {} | {} | {} |",
                created.as_secs_f64(),
                ms(took),
                r.manifests_read,
                r.mapping_pages_visited
            );
        }
    }

    if want("diff") {
        println!(
            "\n## Diff and merge against changed keys (200 k-key partition quick, 1 M full)\n"
        );
        println!(
            "| changed keys | diff ms | merge ms | fast-forward ms, source just written | fast-forward ms, source checkpointed |"
        );
        println!("|---|---|---|---|---|");
        let dir = tempfile::tempdir().expect("tempdir");
        let s = store(dir.path());
        let p = s.partition("t", 0).expect("partition");
        let main = p.branch("main").expect("main");
        load(&main, if quick { 200_000 } else { 1_000_000 }, 84);
        for (round, &changed) in [10u64, 1000, 100_000].iter().enumerate() {
            let a = format!("a{round}");
            let b = format!("b{round}");
            let ba = p.create_branch(&a, "main").expect("create");
            let bb = p.create_branch(&b, &a).expect("create");
            let mut w = WriteBatch::new();
            for k in 0..changed {
                w.put(
                    format!("key{:012}", k * 7 % 200_000),
                    format!("changed {round}"),
                );
            }
            bb.write_blocking(w).expect("write");
            let mut w = WriteBatch::new();
            w.put(format!("other{round}"), "x");
            ba.write_blocking(w).expect("write");
            let t = Instant::now();
            let d = p.diff(&a, &b).expect("diff");
            let diff_ms = t.elapsed();
            assert!(d.len() as u64 >= changed.min(200_000));
            let t = Instant::now();
            p.merge(&b, &a, MergeOptions::default()).expect("merge");
            let merge_ms = t.elapsed();
            // A fast-forward of the same divergence: a target unchanged since its fork, and
            // a source forked from it with the same changed keys. It adopts the source's
            // state by reference; its time must not follow `changed`. Timed twice: right
            // after the source's write (the merge first checkpoints the source, writing
            // the mapping pages its write left dirty: the source's own deferred work, which
            // follows how much it wrote), and once background maintenance has checkpointed
            // the idle source (the steady state, as for branch creation above).
            let mut ff = Vec::new();
            for settled in [false, true] {
                let target = format!("ff{round}{settled}");
                let source = format!("fs{round}{settled}");
                p.create_branch(&target, "main").expect("create");
                let bs = p.create_branch(&source, &target).expect("create");
                let mut w = WriteBatch::new();
                for k in 0..changed {
                    w.put(format!("key{:012}", k * 7 % 200_000), format!("ff {round}"));
                }
                bs.write_blocking(w).expect("write");
                if settled {
                    s.run_maintenance().expect("maintenance");
                }
                let before = s.io_stats();
                let t = Instant::now();
                let r = p
                    .merge(&source, &target, MergeOptions::default())
                    .expect("ff");
                let took = t.elapsed();
                let io = s.io_stats().since(&before);
                assert!(r.fast_forward);
                ff.push(format!(
                    "{} ({} reads, {} KiB written, {} syncs)",
                    ms(took),
                    io.reads,
                    io.write_bytes / 1024,
                    io.syncs
                ));
            }
            println!(
                "| {changed} | {} | {} | {} | {} |",
                ms(diff_ms),
                ms(merge_ms),
                ff[0],
                ff[1]
            );
        }
    }
}
