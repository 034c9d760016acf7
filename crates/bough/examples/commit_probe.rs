//! What a single-key durable commit costs next to the raw write + `fdatasync` it needs:
//! 4 KiB and 128-byte records into a laid-out file, then Bough on io_uring and on pread,
//! five alternating rounds of 2,000 commits (p50 and mean in µs); `eight`: 8 writers on
//! one branch (commits/s), on io_uring and on pread alternately. Ratios within one run are
//! what count on a shared machine.
//! `cargo run --release --example commit_probe -p bough [-- eight|bough]`; the files go
//! under `$BOUGH_PROBE_DIR` (default: the system's temporary directory).
use bough::{Options, Store, WriteBatch};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::time::Instant;

fn probe_dir() -> tempfile::TempDir {
    match std::env::var_os("BOUGH_PROBE_DIR") {
        Some(d) => tempfile::tempdir_in(d).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

fn pct(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v.iter().sum::<f64>() / v.len() as f64)
}

fn raw(rec: usize, n: usize) -> (f64, f64) {
    let dir = probe_dir();
    let path = dir.path().join("log");
    let mut f = OpenOptions::new()
        .create_new(true)
        .write(true)
        .read(true)
        .open(&path)
        .unwrap();
    f.write_all(&vec![0u8; 16 << 20]).unwrap();
    f.sync_all().unwrap();
    let buf = vec![7u8; rec];
    let mut v = Vec::new();
    for i in 0..n {
        let t = Instant::now();
        f.write_at(&buf, (i * rec) as u64).unwrap();
        f.sync_data().unwrap();
        v.push(t.elapsed().as_secs_f64() * 1e6);
    }
    pct(v)
}

fn bough(n: usize, b: bough::Backend) -> (f64, f64) {
    let dir = probe_dir();
    let store = Store::open(Options::new(dir.path()).backend(b)).unwrap();
    let p = store.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut v = Vec::new();
    for c in 0..n {
        let mut wb = WriteBatch::new();
        wb.put(format!("k{:08}", (c * 7919) % 1_000_000), vec![b'v'; 100]);
        let t = Instant::now();
        main.write_blocking(wb).unwrap();
        v.push(t.elapsed().as_secs_f64() * 1e6);
    }
    store.close().unwrap();
    pct(v)
}

fn bough8(n: usize, backend: bough::Backend) -> (f64, f64) {
    let dir = probe_dir();
    let store = Store::open(Options::new(dir.path()).backend(backend)).unwrap();
    let p = store.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let before = store.io_stats();
    let t = Instant::now();
    std::thread::scope(|s| {
        for w in 0..8 {
            let main = &main;
            s.spawn(move || {
                for c in 0..n / 8 {
                    main.put_blocking(format!("k{w}{c:08}"), vec![b'v'; 100])
                        .unwrap();
                }
            });
        }
    });
    let rate = n as f64 / t.elapsed().as_secs_f64();
    let syncs = store.io_stats().since(&before).syncs as f64 / n as f64;
    store.close().unwrap();
    (rate, syncs)
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("eight") {
        for _ in 0..3 {
            for backend in [bough::Backend::IoUring, bough::Backend::Pread] {
                let (rate, syncs) = bough8(8000, backend);
                println!(
                    "8 writers ({backend:?}): {rate:.0} commits/s, {syncs:.3} syncs per commit"
                );
            }
        }
        return;
    }
    let n = 2000;
    if std::env::args().nth(1).as_deref() == Some("bough") {
        let c = bough(n, bough::Backend::IoUring);
        println!("bough p50 {:.0} mean {:.0}", c.0, c.1);
        return;
    }
    for round in 0..5 {
        let a = raw(4096, n);
        let b = raw(128, n);
        let c = bough(n, bough::Backend::IoUring);
        let d = bough(n, bough::Backend::Pread);
        println!(
            "round {round}: raw4k p50 {:.0} mean {:.0} | raw128 p50 {:.0} mean {:.0} | bough uring p50 {:.0} mean {:.0} | pread p50 {:.0} mean {:.0}",
            a.0, a.1, b.0, b.1, c.0, c.1, d.0, d.1
        );
    }
}
