//! `bough`: the command-line tool. Today it runs the demo; the full CLI grows from here.

use std::process::ExitCode;

use bough::{Options, ScanOptions, Store, WriteBatch};

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BOUGH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("demo") => demo(args.get(1).map(String::as_str)),
        Some("--help") | Some("-h") | None => {
            println!(
                "usage: bough demo [DIR]\n\nRuns the demo on an embedded local store in DIR (default: a fresh temporary directory)."
            );
            Ok(())
        }
        Some(other) => Err(format!("unknown command `{other}`; try `bough --help`").into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

type CliResult = Result<(), Box<dyn std::error::Error>>;

fn count(branch: &bough::Branch) -> Result<usize, bough::Error> {
    Ok(branch.scan_blocking(&ScanOptions::default())?.entries.len())
}

/// Creates a store, loads data, branches it, diverges, deletes the branch and collects
/// garbage, printing what happened at each step.
fn demo(dir: Option<&str>) -> CliResult {
    let path = match dir {
        Some(d) => std::path::PathBuf::from(d),
        None => std::env::temp_dir().join(format!("bough-demo-{}", std::process::id())),
    };
    if path.exists() && std::fs::read_dir(&path)?.next().is_some() {
        return Err(format!(
            "{} is not empty; give an empty or new directory",
            path.display()
        )
        .into());
    }
    let store = Store::open(Options::new(&path).maintenance_interval_ms(0))?;
    println!(
        "store      {} (backend: {})",
        path.display(),
        store.backend()
    );
    let part = store.partition("orders", 0)?;
    let main = part.branch("main")?;

    let started = std::time::Instant::now();
    let n = 100_000u32;
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let mut b = WriteBatch::new();
        for i in chunk {
            b.put(
                format!("order-{i:06}"),
                format!("{{\"id\":{i},\"status\":\"pending\"}}"),
            );
        }
        main.write_blocking(b)?;
    }
    println!(
        "load       {n} orders into orders.0@main in {:.0?}",
        started.elapsed()
    );

    let before = store.io_stats();
    let t = std::time::Instant::now();
    let feature = part.create_branch("repricing", "main")?;
    let written = store.io_stats().write_bytes - before.write_bytes;
    println!(
        "branch     orders.0@repricing from main in {:.1?}, {written} bytes written (no data copied)",
        t.elapsed()
    );

    let mut b = WriteBatch::new();
    for i in (0..n).step_by(1000) {
        b.put(
            format!("order-{i:06}"),
            format!("{{\"id\":{i},\"status\":\"repriced\"}}"),
        );
    }
    b.put("order-999999", "{\"id\":999999,\"status\":\"new\"}");
    feature.write_blocking(b)?;
    let mut b = WriteBatch::new();
    b.delete("order-000001");
    main.write_blocking(b)?;
    println!("diverge    101 writes on repricing, 1 delete on main");
    for (name, br) in [("main", &main), ("repricing", &feature)] {
        let v = br
            .get_blocking(b"order-000000")?
            .map(|v| String::from_utf8_lossy(&v.value).into_owned());
        println!(
            "read       {name:<10} {} keys; order-000000 = {}",
            count(br)?,
            v.unwrap_or_default()
        );
    }
    let archive = feature.archive()?;
    println!("archive    {archive}");
    part.delete_branch("repricing")?;
    println!("delete     orders.0@repricing (data kept until GC proves it unreachable)");
    let report = part.gc(false)?;
    println!(
        "gc         {} files deleted ({} bytes), {} kept; every file main still needs is kept",
        report.deleted.len(),
        report.bytes_freed,
        report.kept.len()
    );
    for (file, why) in &report.kept {
        println!("             kept {file}: {why:?}");
    }
    println!("branches   {:?}", part.branches()?);
    store.close()?;
    println!("done       reopen with the same directory to see the data again");
    Ok(())
}
