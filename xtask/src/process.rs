//! Running child commands: echoing them, and stopping a whole process tree that runs past
//! its deadline.

use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How a command ended.
#[derive(Debug)]
pub enum Outcome {
    Exited(ExitStatus),
    /// Stopped by us at the deadline.
    TimedOut,
    /// Could not be started at all.
    NotStarted(String),
}

impl Outcome {
    pub fn success(&self) -> bool {
        matches!(self, Outcome::Exited(status) if status.success())
    }

    pub fn describe(&self) -> String {
        match self {
            Outcome::Exited(status) => match status.code() {
                Some(code) => format!("exit code {code}"),
                None => format!("{status}"),
            },
            Outcome::TimedOut => "stopped at its deadline".to_string(),
            Outcome::NotStarted(why) => format!("could not start: {why}"),
        }
    }
}

/// A printable form of `cmd` (program and arguments).
pub fn render(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    parts.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    parts.join(" ")
}

/// Runs `cmd` with inherited stdio; when `deadline` passes first, stops the command and
/// every process it started (TERM, then KILL after a grace period).
pub fn run_until(cmd: &mut Command, deadline: Option<Instant>) -> Outcome {
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return Outcome::NotStarted(e.to_string()),
    };
    let Some(deadline) = deadline else {
        return match child.wait() {
            Ok(status) => Outcome::Exited(status),
            Err(e) => Outcome::NotStarted(e.to_string()),
        };
    };
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Outcome::Exited(status),
            Ok(None) => {}
            Err(e) => return Outcome::NotStarted(e.to_string()),
        }
        if Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let root = child.id();
    eprintln!("xtask: deadline passed, stopping process {root} and its descendants");
    signal_tree(root, "TERM");
    let grace = Instant::now() + Duration::from_secs(10);
    while Instant::now() < grace {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    signal_tree(root, "KILL");
    let _ = child.kill();
    let _ = child.wait();
    Outcome::TimedOut
}

/// Runs `cmd` like [`run_until`], but with stdout and stderr captured (interleaved as they
/// arrive, line by line) instead of inherited: for commands whose output is parsed.
pub fn run_captured(cmd: &mut Command, deadline: Option<Instant>) -> (Outcome, String) {
    use std::io::{BufRead, BufReader};
    use std::sync::mpsc;

    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return (Outcome::NotStarted(e.to_string()), String::new()),
    };
    let (tx, rx) = mpsc::channel::<String>();
    let mut readers = Vec::new();
    let out = child
        .stdout
        .take()
        .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>);
    let err = child
        .stderr
        .take()
        .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>);
    for pipe in [out, err].into_iter().flatten() {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let mut text = String::new();
    let collect = |text: &mut String| {
        while let Ok(line) = rx.try_recv() {
            text.push_str(&line);
            text.push('\n');
        }
    };
    let outcome = loop {
        collect(&mut text);
        match child.try_wait() {
            Ok(Some(status)) => break Outcome::Exited(status),
            Ok(None) => {}
            Err(e) => break Outcome::NotStarted(e.to_string()),
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            let root = child.id();
            eprintln!("xtask: deadline passed, stopping process {root} and its descendants");
            signal_tree(root, "KILL");
            let _ = child.kill();
            let _ = child.wait();
            break Outcome::TimedOut;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for r in readers {
        let _ = r.join();
    }
    collect(&mut text);
    (outcome, text)
}

/// Sends `signal` to `root` and all its descendants (found through /proc), children first.
fn signal_tree(root: u32, signal: &str) {
    let mut pids = descendants(root);
    pids.reverse();
    pids.push(root);
    let args: Vec<String> = pids.iter().map(u32::to_string).collect();
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .args(&args)
        .stderr(std::process::Stdio::null())
        .status();
}

/// Descendants of `root`, parents before children.
fn descendants(root: u32) -> Vec<u32> {
    let mut parent_of: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // `pid (comm) state ppid ...`; comm may contain spaces and parentheses.
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            if let Some(ppid) = after.split_whitespace().nth(1).and_then(|s| s.parse().ok()) {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        for &(pid, ppid) in &parent_of {
            if ppid == parent && !found.contains(&pid) {
                found.push(pid);
            }
        }
        i += 1;
    }
    found.remove(0);
    found
}

/// Whether `program args...` runs and exits successfully (output discarded).
pub fn probe(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_stops_the_whole_tree() {
        let start = Instant::now();
        // A shell whose child would outlive a plain kill of the shell.
        let outcome = run_until(
            Command::new("sh").args(["-c", "sleep 30 & sleep 30; wait"]),
            Some(Instant::now() + Duration::from_millis(500)),
        );
        assert!(matches!(outcome, Outcome::TimedOut), "{outcome:?}");
        assert!(start.elapsed() < Duration::from_secs(15));
    }

    #[test]
    fn captured_output_keeps_both_streams() {
        let (outcome, text) = run_captured(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 4"]),
            Some(Instant::now() + Duration::from_secs(30)),
        );
        assert_eq!(outcome.describe(), "exit code 4");
        assert!(text.contains("out\n") && text.contains("err\n"), "{text:?}");
    }

    #[test]
    fn exit_status_is_reported() {
        let outcome = run_until(Command::new("sh").args(["-c", "exit 3"]), None);
        assert_eq!(outcome.describe(), "exit code 3");
        assert!(
            run_until(
                &mut Command::new("true"),
                Some(Instant::now() + Duration::from_secs(30))
            )
            .success()
        );
    }
}
