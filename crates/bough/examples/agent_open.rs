//! Reopening a partition with many branches, timed by step (issue 18 §7), on a directory
//! kept between runs: `cargo run --release --example agent_open -p bough -- DIR COUNT`.
//! The first run creates COUNT branches of `main`; every run then times store open,
//! partition open, `main` and one get, a GC cycle, and a branch creation.
use bough::{Options, Store, WriteBatch};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: agent_open DIR COUNT")?;
    let count: usize = args.next().ok_or("usage: agent_open DIR COUNT")?.parse()?;
    let opts = || Options::new(&dir).maintenance_interval_ms(0);
    if !std::path::Path::new(&dir).join("done").exists() {
        let store = Store::open(opts())?;
        let p = store.partition("t", 0)?;
        let main = p.branch("main")?;
        let mut wb = WriteBatch::new();
        for k in 0..1000 {
            wb.put(format!("k{k:06}"), vec![b'v'; 100]);
        }
        main.write_blocking(wb)?;
        main.checkpoint_blocking()?;
        for i in 0..count {
            drop(p.create_branch(&format!("agent{i}"), "main")?);
        }
        store.close()?;
        std::fs::write(std::path::Path::new(&dir).join("done"), b"")?;
    }
    let t = Instant::now();
    let store = Store::open(opts())?;
    let t_store = t.elapsed();
    let p = store.partition("t", 0)?;
    let t_part = t.elapsed();
    let main = p.branch("main")?;
    main.get_blocking(b"k000001")?;
    let t_get = t.elapsed();
    let g = Instant::now();
    let r = p.gc()?;
    let t_gc = g.elapsed();
    let g = Instant::now();
    let r2 = p.gc()?;
    let t_gc2 = g.elapsed();
    // Optional: more unchanged cycles, for a profiler.
    let rounds: usize = args.next().map_or(Ok(0), |a| a.parse())?;
    for _ in 0..rounds {
        p.gc()?;
    }
    let c = Instant::now();
    p.create_branch("after-reopen", "main")?;
    let t_create = c.elapsed();
    p.delete_branch("after-reopen")?;
    println!(
        "store {:?}, +partition {:?}, +main+get {:?}; gc {:?} ({} manifests), gc again {:?} ({} manifests); first create {:?}",
        t_store, t_part, t_get, t_gc, r.manifests_read, t_gc2, r2.manifests_read, t_create
    );
    Ok(())
}
