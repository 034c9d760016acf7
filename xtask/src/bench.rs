//! `cargo xtask bench`: builds and runs the side-by-side benchmark harness in `bench/`
//! (a separate workspace with its own lock file and target directory, so no root-workspace
//! command ever compiles the peers), installing fio and libclang-dev first when missing,
//! and starting a local S3 server (moto) for the cloud set when it is installed.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::process;
use crate::workspace;

/// Engines the harness knows, in the order it reports them.
pub const ENGINES: &[&str] = &["bough", "redb", "fjall", "lmdb", "rocksdb"];

/// Engines of the cloud set (on an S3 server), selected by `--cloud` or by name.
pub const CLOUD_ENGINES: &[&str] = &["bough-s3", "slatedb"];

/// The bucket the cloud set uses on the moto server xtask starts.
const S3_BUCKET: &str = "bough-bench";

const USAGE: &str = "\
usage: cargo xtask bench [--smoke | --quick] [--keys N]
                         [--engines bough,redb,fjall,lmdb,rocksdb,bough-s3,slatedb]
                         [--bough-rev REV] [--cloud] [--no-fio] [--no-branches]
                         [--data-dir DIR] [--target-dir DIR]

Builds bench/ in release mode (RocksDB only when it is among the engines: its first build
compiles RocksDB from source, ~16 min on 2 cores, longer with BOUGH_BENCH_JOBS=1) and runs
it. BOUGH_BENCH_JOBS sets cargo's -j for that build (default 1: the machines are shared).
--cloud adds the cloud set (bough-s3 against slatedb): xtask starts a moto S3 server when
moto is installed (`pip install 'moto[server]'`; BOUGH_S3_ENDPOINT, if set, is used
instead) and otherwise reports those rows as not measured.
--target-dir (or BOUGH_BENCH_TARGET_DIR) sets bench/'s target directory (default
bench/target; CARGO_TARGET_DIR is not used: it usually names the root workspace's).
--smoke: tiny sizes that prove every row runs; --keys N: the main data set's size.
--bough-rev REV (repeatable) also builds the harness against Bough at git revision REV
(exported with `git archive` under the bench target directory) and runs it right after
`bough` as engine `bough@REV`: the before/after rows in one run.
The report goes to target/bench-report/.";

/// What one `cargo xtask bench` invocation does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub quick: bool,
    pub engines: Vec<String>,
    /// `--cloud`: the cloud set as well.
    pub cloud: bool,
    /// bench/'s target directory when not bench/target.
    pub target_dir: Option<PathBuf>,
    /// Arguments handed to the harness unchanged.
    pub passthrough: Vec<String>,
    /// `--bough-rev`: revisions of Bough to run beside this tree's.
    pub bough_revs: Vec<String>,
}

impl Plan {
    /// Whether the harness must be built with RocksDB.
    pub fn needs_rocksdb(&self) -> bool {
        self.engines.iter().any(|e| e == "rocksdb")
    }

    /// Whether the cloud set runs (and so needs an S3 server).
    pub fn needs_s3(&self) -> bool {
        self.cloud
            || self
                .engines
                .iter()
                .any(|e| CLOUD_ENGINES.contains(&e.as_str()))
    }

    /// The harness's command-line arguments.
    pub fn harness_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.quick {
            args.push("--quick".to_string());
        }
        args.push("--engines".to_string());
        args.push(self.engines.join(","));
        if self.cloud {
            args.push("--cloud".to_string());
        }
        args.extend(self.passthrough.iter().cloned());
        args
    }
}

/// Parses `cargo xtask bench` arguments.
pub fn plan(args: &[String]) -> Result<Plan, String> {
    let mut p = Plan {
        quick: false,
        engines: ENGINES.iter().map(|e| e.to_string()).collect(),
        cloud: false,
        target_dir: std::env::var_os("BOUGH_BENCH_TARGET_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from),
        passthrough: Vec::new(),
        bough_revs: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => p.quick = true,
            "--engines" => {
                let list = it
                    .next()
                    .ok_or_else(|| format!("--engines needs a list\n{USAGE}"))?;
                let engines: Vec<String> = list
                    .split(',')
                    .map(|e| e.trim().to_lowercase())
                    .filter(|e| !e.is_empty())
                    .collect();
                if let Some(bad) = engines.iter().find(|e| {
                    !ENGINES.contains(&e.as_str()) && !CLOUD_ENGINES.contains(&e.as_str())
                }) {
                    return Err(format!(
                        "unknown engine {bad:?}; engines: {}, {}",
                        ENGINES.join(", "),
                        CLOUD_ENGINES.join(", ")
                    ));
                }
                if engines.is_empty() {
                    return Err(format!("--engines needs at least one engine\n{USAGE}"));
                }
                p.engines = engines;
            }
            "--no-fio" | "--no-branches" | "--smoke" => p.passthrough.push(arg.clone()),
            "--keys" => {
                let n = it
                    .next()
                    .ok_or_else(|| format!("--keys needs a number\n{USAGE}"))?;
                p.passthrough.push(arg.clone());
                p.passthrough.push(n.clone());
            }
            "--bough-rev" => {
                let rev = it
                    .next()
                    .ok_or_else(|| format!("--bough-rev needs a git revision\n{USAGE}"))?;
                p.bough_revs.push(rev.clone());
            }
            "--cloud" => p.cloud = true,
            "--target-dir" => {
                let dir = it
                    .next()
                    .ok_or_else(|| format!("--target-dir needs a path\n{USAGE}"))?;
                p.target_dir = Some(PathBuf::from(dir));
            }
            "--data-dir" => {
                let dir = it
                    .next()
                    .ok_or_else(|| format!("--data-dir needs a path\n{USAGE}"))?;
                p.passthrough.push(arg.clone());
                p.passthrough.push(dir.clone());
            }
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(p)
}

fn bench_dir(root: &Path) -> PathBuf {
    root.join("bench")
}

/// Whether a libclang shared library is installed (bindgen loads it at build time).
fn has_libclang() -> bool {
    let Ok(entries) = std::fs::read_dir("/usr/lib") else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        let name = name.to_string_lossy();
        name.starts_with("llvm-")
            && std::fs::read_dir(e.path().join("lib")).is_ok_and(|libs| {
                libs.flatten()
                    .any(|l| l.file_name().to_string_lossy().starts_with("libclang.so"))
            })
    })
}

/// Installs Debian `packages` with apt-get (updating the lists first).
fn apt_install(packages: &[&str]) -> Result<(), String> {
    println!("xtask: installing {} with apt-get", packages.join(" "));
    let update = process::run_until(Command::new("apt-get").args(["update", "-qq"]), None);
    if !update.success() {
        return Err(format!("apt-get update: {}", update.describe()));
    }
    let mut cmd = Command::new("apt-get");
    cmd.args(["install", "-y", "-qq"]).args(packages);
    cmd.env("DEBIAN_FRONTEND", "noninteractive");
    let outcome = process::run_until(&mut cmd, None);
    if outcome.success() {
        Ok(())
    } else {
        Err(format!(
            "apt-get install {}: {}",
            packages.join(" "),
            outcome.describe()
        ))
    }
}

/// `cargo xtask bench ...`.
pub fn cli(root: &Path, args: &[String]) -> Result<(), String> {
    let plan = plan(args)?;
    let mut missing = Vec::new();
    if !plan.passthrough.iter().any(|a| a == "--no-fio") && !process::probe("fio", &["--version"]) {
        missing.push("fio");
    }
    if plan.needs_rocksdb() && !has_libclang() {
        missing.push("libclang-dev");
    }
    if !missing.is_empty() {
        apt_install(&missing)?;
    }

    let dir = bench_dir(root);
    let target = match &plan.target_dir {
        Some(t) if t.is_absolute() => t.clone(),
        Some(t) => std::env::current_dir()
            .map_err(|e| format!("current directory: {e}"))?
            .join(t),
        None => dir.join("target"),
    };
    let jobs = std::env::var("BOUGH_BENCH_JOBS").unwrap_or_else(|_| "1".to_string());
    let mut build = Command::new(workspace::cargo());
    build
        .current_dir(&dir)
        .args(["build", "--release", "-j", &jobs])
        .arg("--target-dir")
        .arg(&target);
    if plan.needs_rocksdb() {
        build.args(["--features", "rocksdb"]);
        println!(
            "xtask: building the harness with RocksDB (its first build compiles RocksDB from source)"
        );
    }
    // bench/ keeps its own target directory (bench/target unless --target-dir says
    // otherwise): different dependencies, no thrashing. CARGO_TARGET_DIR is the root
    // workspace's, so it is not inherited.
    build.env_remove("CARGO_TARGET_DIR");
    println!("$ {}", process::render(&build));
    let outcome = process::run_until(&mut build, None);
    if !outcome.success() {
        return Err(format!("building bench/: {}", outcome.describe()));
    }

    let mut baselines = Vec::new();
    for rev in &plan.bough_revs {
        let (label, bin) = crate::bench_rev::build(root, rev, &target, &jobs)?;
        baselines.push(format!("{label}={}", bin.display()));
    }

    let binary = target.join("release").join("bough-bench");
    let mut run = Command::new(&binary);
    run.current_dir(&dir).args(plan.harness_args());
    for b in &baselines {
        run.args(["--baseline", b]);
    }
    // Kept alive (and stopped when dropped) until the harness is done.
    let _moto = if plan.needs_s3() {
        s3_for_harness(root, &mut run)
    } else {
        None
    };
    println!("$ {}", process::render(&run));
    let outcome = process::run_until(&mut run, None);
    if !outcome.success() {
        return Err(format!("bough-bench: {}", outcome.describe()));
    }
    let report = root.join("target").join("bench-report");
    println!(
        "xtask: report in {} (report.md, report.json, *.svg)",
        report.display()
    );
    Ok(())
}

/// A moto server this invocation started; stopped when dropped.
struct Moto {
    child: Child,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How to start moto's server, if it is installed: the virtualenv `.ci/run` creates, then
/// `moto_server` on the PATH, then `python3 -m moto.server`.
fn moto_command() -> Option<Command> {
    let tmp = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    if let Ok(entries) = std::fs::read_dir(&tmp) {
        let mut venvs: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("bough-ci-moto-")
            })
            .map(|e| e.path().join("bin").join("moto_server"))
            .filter(|p| p.is_file())
            .collect();
        venvs.sort();
        if let Some(bin) = venvs.pop() {
            return Some(Command::new(bin));
        }
    }
    if process::probe("moto_server", &["--help"]) {
        return Some(Command::new("moto_server"));
    }
    if process::probe("python3", &["-c", "import moto.server"]) {
        let mut c = Command::new("python3");
        c.args(["-m", "moto.server"]);
        return Some(c);
    }
    None
}

/// Sends one bodiless HTTP/1.1 request; returns the status code.
fn http(port: u16, method: &str, path: &str) -> Result<u16, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut head = [0u8; 64];
    let n = s.read(&mut head).map_err(|e| e.to_string())?;
    status_code(&head[..n]).ok_or_else(|| "no HTTP status line".to_string())
}

/// The status code of an HTTP/1.x response's first line.
fn status_code(head: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(head).ok()?;
    let line = text.lines().next()?;
    let mut parts = line.split_whitespace();
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    parts.next()?.parse().ok()
}

/// Starts moto on a free local port with bucket [`S3_BUCKET`]; returns it and the port.
fn start_moto(root: &Path) -> Result<(Moto, u16), String> {
    let mut cmd = moto_command()
        .ok_or("moto is not installed (pip install 'moto[server]'; .ci/run installs it)")?;
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free local port: {e}"))?
        .port();
    let log_path = root.join("target").join("bench-moto.log");
    let _ = std::fs::create_dir_all(root.join("target"));
    let log =
        std::fs::File::create(&log_path).map_err(|e| format!("{}: {e}", log_path.display()))?;
    let log2 = log.try_clone().map_err(|e| e.to_string())?;
    cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2);
    println!("$ {}", process::render(&cmd));
    let child = cmd.spawn().map_err(|e| format!("starting moto: {e}"))?;
    let mut moto = Moto { child };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(Some(status)) = moto.child.try_wait() {
            return Err(format!(
                "moto exited at start ({status}); see {}",
                log_path.display()
            ));
        }
        if http(port, "GET", "/").is_ok() {
            break;
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "moto did not answer within 60 s; see {}",
                log_path.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    match http(port, "PUT", &format!("/{S3_BUCKET}")) {
        Ok(200) => Ok((moto, port)),
        Ok(code) => Err(format!("creating bucket {S3_BUCKET} on moto: HTTP {code}")),
        Err(e) => Err(format!("creating bucket {S3_BUCKET} on moto: {e}")),
    }
}

/// Points the harness at an S3 server: BOUGH_S3_ENDPOINT when set, else a moto server
/// started here (returned, to be stopped after the run); without either the harness is
/// told why, and reports the cloud rows as not measured.
fn s3_for_harness(root: &Path, run: &mut Command) -> Option<Moto> {
    if std::env::var("BOUGH_S3_ENDPOINT").is_ok_and(|e| !e.is_empty()) {
        println!("xtask: cloud set on BOUGH_S3_ENDPOINT as set in the environment");
        return None;
    }
    match start_moto(root) {
        Ok((moto, port)) => {
            let endpoint = format!("http://127.0.0.1:{port}");
            println!("xtask: moto on {endpoint}, bucket {S3_BUCKET}");
            run.env("BOUGH_S3_ENDPOINT", &endpoint)
                .env("BOUGH_S3_BUCKET", S3_BUCKET)
                .env("AWS_REGION", "us-east-1");
            // moto accepts any credentials; the clients sign with these (never real ones).
            for var in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"] {
                run.env(var, "bough-bench");
            }
            Some(moto)
        }
        Err(why) => {
            println!("xtask: cloud set not measured: {why}");
            run.env("BOUGH_BENCH_CLOUD_UNAVAILABLE", why);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn defaults_to_every_engine_in_full_mode() {
        let p = plan(&[]).unwrap();
        assert!(!p.quick);
        assert_eq!(p.engines, ENGINES);
        assert!(p.needs_rocksdb());
        assert_eq!(
            p.harness_args(),
            args(&["--engines", "bough,redb,fjall,lmdb,rocksdb"])
        );
    }

    #[test]
    fn engines_narrow_the_build_and_the_run() {
        let p = plan(&args(&["--quick", "--engines", "Bough, redb", "--no-fio"])).unwrap();
        assert!(p.quick);
        assert_eq!(p.engines, ["bough", "redb"]);
        assert!(!p.needs_rocksdb());
        assert_eq!(
            p.harness_args(),
            args(&["--quick", "--engines", "bough,redb", "--no-fio"])
        );
    }

    #[test]
    fn cloud_engines_and_the_target_dir() {
        let p = plan(&args(&[
            "--quick",
            "--engines",
            "bough,rocksdb",
            "--cloud",
            "--target-dir",
            "/tmp/tb",
        ]))
        .unwrap();
        assert!(p.needs_rocksdb() && p.needs_s3());
        assert_eq!(p.target_dir, Some(PathBuf::from("/tmp/tb")));
        assert_eq!(
            p.harness_args(),
            args(&["--quick", "--engines", "bough,rocksdb", "--cloud"])
        );
        let p = plan(&args(&["--engines", "bough,slatedb"])).unwrap();
        assert!(p.needs_s3() && !p.needs_rocksdb());
        assert!(!plan(&args(&["--engines", "bough"])).unwrap().needs_s3());
        assert!(plan(&args(&["--target-dir"])).is_err());
    }

    #[test]
    fn smoke_keys_and_revisions() {
        let p = plan(&args(&[
            "--smoke",
            "--keys",
            "20000",
            "--bough-rev",
            "8e26e9c",
        ]))
        .unwrap();
        assert_eq!(p.bough_revs, ["8e26e9c"]);
        assert!(
            p.harness_args()
                .ends_with(&args(&["--smoke", "--keys", "20000"]))
        );
        assert!(plan(&args(&["--bough-rev"])).is_err());
        assert!(plan(&args(&["--keys"])).is_err());
    }

    #[test]
    fn http_status_lines_parse() {
        assert_eq!(status_code(b"HTTP/1.1 200 OK\r\n"), Some(200));
        assert_eq!(status_code(b"HTTP/1.0 409 Conflict\r\nx: y"), Some(409));
        assert_eq!(status_code(b"SSH-2.0\r\n"), None);
        assert_eq!(status_code(b""), None);
    }

    #[test]
    fn rejects_unknown_engines_and_arguments() {
        let e = plan(&args(&["--engines", "bough,sled"])).unwrap_err();
        assert!(e.contains("sled"), "{e}");
        assert!(plan(&args(&["--engines"])).is_err());
        assert!(plan(&args(&["--fast"])).unwrap_err().contains("--fast"));
    }

    #[test]
    fn the_bench_workspace_is_separate_and_declares_the_rocksdb_feature() {
        let root = workspace::root();
        let manifest = std::fs::read_to_string(bench_dir(&root).join("Cargo.toml")).unwrap();
        assert!(manifest.contains("[workspace]"));
        assert!(manifest.contains("rocksdb = [\"dep:rocksdb\"]"));
        let root_manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
        assert!(root_manifest.contains("exclude = [\"fuzz\", \"bench\"]"));
    }
}
