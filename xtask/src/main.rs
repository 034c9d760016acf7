//! Project tooling for Bough: `cargo xtask <command>`.
//!
//! Nearly dependency-free on purpose: it must build fast on a cold CI machine. Its one
//! dependency, `serde_json` (untyped, no derive), reads `cargo metadata`.

use std::process::ExitCode;

mod bench;
mod bench_rev;
mod ci;
mod fuzz;
mod junit;
mod process;
mod release;
mod reliability;
mod tidy;
mod workspace;

const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  tidy                       layering, unsafe, placeholder macros, lints, module names
  ci [--skip S] [--only S]   every CI stage, timed against budgets (fmt, clippy, tidy,
                             doctest, test, fuzz-smoke); BOUGH_FUZZ_SECS sets seconds per
                             fuzz target (default 20)
  fuzz list                  the fuzz targets
  fuzz <target> [--secs N]   run one fuzz target on stable (--sanitizer none)
  release [--bump patch|minor|major] [--dry-run] [--no-package]
                             bump the workspace version, check CHANGELOG.md, package
  reliability [--seed N] [--long] [--fuzz-secs N]
                             the reliability harness (kill cycles, power-loss sweep,
                             injected faults, object-store faults, bit flips) after every
                             fuzz target for N s each (default 10; 0 skips; needs
                             cargo-fuzz): one table; fails if anything was lost, wrong,
                             panicked, hung or crashed; BOUGH_SEED=N replays too
  bench [--quick] [--engines bough,redb,fjall,lmdb,rocksdb,bough-s3,slatedb] [--cloud]
        [--no-fio] [--no-branches] [--data-dir DIR] [--target-dir DIR]
                             build and run the side-by-side benchmarks in bench/
                             (report in target/bench-report/; --cloud: Bough's S3 mode
                             against SlateDB on a moto server xtask starts)
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = workspace::root();
    let result = match args.first().map(String::as_str) {
        Some("tidy") if args.len() == 1 => tidy::run(&root),
        Some("ci") => ci::cli(&root, &args[1..]),
        Some("fuzz") => fuzz::cli(&root, &args[1..]),
        Some("release") => release::cli(&root, &args[1..]),
        Some("bench") => bench::cli(&root, &args[1..]),
        Some("reliability") => reliability::cli(&root, &args[1..]),
        Some("help" | "-h" | "--help") => {
            print!("{USAGE}");
            Ok(())
        }
        _ => Err(USAGE.trim_end().to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}
