//! `bough verify`: reads everything a partition holds and reports every problem.
//!
//! The check itself is the library's (`bough::check`: the one the reliability harness runs
//! too; its module documentation lists what it reads); this file chooses the partitions,
//! names referents and remedies for people, and prints what it found. It reads through a
//! read-only storage without the store lock, so a writer may run beside it.
//!
//! The exit code is 0 only when no error was found (with `--strict`, no warning either).

use std::sync::{Arc, Mutex};

use bough::check::{
    CheckOptions, Finding, PartitionReport, Problem, Referent, Severity, check_partition,
};
use clap::Args;
use serde_json::json;

use crate::ctx::{Ctx, partitions_in};
use crate::error::{CliError, CliResult, code};
use crate::output::{self, Progress, plural};
use crate::target::{self, Scope};
use crate::walk;

/// `bough verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// TABLE.PART or TABLE (default: the whole store).
    #[arg(value_name = "TABLE[.PART]")]
    scope: Option<String>,
    /// Warnings (unreferenced bad pages, stray files) fail the check too.
    #[arg(long)]
    strict: bool,
}

/// What holds a snapshot, as a user names it: `branch main`, `archive … of main (taken …)`,
/// `merge base of branch main with feature`.
fn referent(r: &Referent) -> String {
    match r {
        Referent::Archive {
            branch, timestamp, ..
        } => format!(
            "archive {timestamp} of {branch} (taken {})",
            output::time(*timestamp)
        ),
        other => other.to_string(),
    }
}

/// What to do about a bad page the referents `whos` reach: each affected branch goes back
/// to its newest archive that does not reach the page (what changed since is lost), or,
/// without one, keeps what still reads. `archives` are the partition's archives.
fn remedy(dir: &str, whos: &[Referent], archives: &[(String, u64)]) -> String {
    let mut steps = Vec::new();
    let mut seen = Vec::new();
    for who in whos {
        let Referent::Branch { branch, .. } = who else {
            continue;
        };
        if seen.contains(&branch) {
            continue;
        }
        seen.push(branch);
        let intact = archives
            .iter()
            .filter(|(b, ts)| {
                b == branch
                    && !whos.iter().any(|w| {
                        matches!(w, Referent::Archive { branch: wb, timestamp, .. }
                            if wb == b && timestamp == ts)
                    })
            })
            .map(|(_, ts)| *ts)
            .max();
        steps.push(match intact {
            Some(ts) => format!(
                "`bough archive restore {dir}@{branch} {ts}` brings {branch} back to its newest \
                 intact archive (the changes since {} are lost)",
                output::time(ts)
            ),
            None => format!(
                "{branch} has no intact archive: `bough export` or `bough scan` it to keep \
                 what still reads"
            ),
        });
    }
    if steps.is_empty() {
        "Remedy: only archives or merge bases reach it; restore nothing from them".into()
    } else {
        format!("Remedy: {}", steps.join("; "))
    }
}

/// The sentence a finding prints as: the check's own, with referents named for a user and
/// the remedy for a bad page.
fn detail(dir: &str, f: &Finding, archives: &[(String, u64)]) -> String {
    let named = |whos: &[Referent]| {
        let shown: Vec<String> = whos.iter().map(referent).collect();
        bough::check::join_referents(&shown)
    };
    match &f.problem {
        Problem::BadPage {
            page,
            offset,
            why,
            referents,
        } => format!(
            "page {page} (offset {offset}): {why}; referenced by {}. {}",
            named(referents),
            remedy(dir, referents, archives)
        ),
        Problem::BadPageRead {
            page,
            why,
            referents,
        } => format!(
            "page {page}: {why}; read by {}. {}",
            named(referents),
            remedy(dir, referents, archives)
        ),
        Problem::SnapshotUnreadable {
            referent: who,
            part,
            why,
        } => format!("{}: {part}: {why}", referent(who)),
        other => other.to_string(),
    }
}

/// The partition's archives, (branch, timestamp), for remedies.
fn archives_of(storage: &Arc<dyn bough::io::Storage>, dir: &str) -> Vec<(String, u64)> {
    storage
        .list(dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|n| match bough_names::classify(n) {
            bough_names::FileKind::Archive(a) => Some((a.branch.to_string(), a.timestamp)),
            _ => None,
        })
        .collect()
}

/// `bough verify`; the exit code is 5 when problems were found.
pub fn verify(ctx: &Ctx, a: VerifyArgs) -> CliResult<u8> {
    let root = ctx.require_store()?;
    let all = partitions_in(&root)?;
    let parts: Vec<String> = match a.scope.as_deref().map(target::scope).transpose()? {
        None => all.iter().map(ToString::to_string).collect(),
        Some(Scope::Partition(p)) => {
            if !all.contains(&p) {
                return Err(CliError::not_found(format!(
                    "partition {p} does not exist in {}",
                    root.display()
                ))
                .hint("run `bough ls` to see the partitions"));
            }
            vec![p.to_string()]
        }
        Some(Scope::Table(t)) => {
            let v: Vec<String> = all
                .iter()
                .filter(|p| p.table.as_str() == t)
                .map(ToString::to_string)
                .collect();
            if v.is_empty() {
                return Err(CliError::not_found(format!(
                    "table `{t}` has no partitions in {}",
                    root.display()
                )));
            }
            v
        }
    };
    let storage = walk::storage(&root)?;
    let mut reports: Vec<(PartitionReport, Vec<String>)> = Vec::new();
    for dir in &parts {
        let progress = Arc::new(Mutex::new(Progress::of_units(
            format!("verify {dir}"),
            ctx.progress,
            0,
        )));
        let shown = progress.clone();
        let opts = CheckOptions {
            // One unit per snapshot walked and per data file read: the two passes a check makes.
            progress: Some(Arc::new(move |p| {
                if let Ok(mut line) = shown.lock() {
                    let done = (p.snapshots_done + p.data_files_done) as u64;
                    let total = (p.snapshots_total + p.data_files_total) as u64;
                    let what = format!("{} pages read", p.pages);
                    line.step(done, total, &what);
                }
            })),
            ..CheckOptions::default()
        };
        let r = check_partition(&storage, dir, &opts)?;
        if let Ok(mut line) = progress.lock() {
            line.finish();
        }
        let archives = archives_of(&storage, dir);
        let details = r
            .findings
            .iter()
            .map(|f| detail(dir, f, &archives))
            .collect();
        reports.push((r, details));
    }
    let errors: usize = reports.iter().map(|(r, _)| r.count(Severity::Error)).sum();
    let warnings: usize = reports
        .iter()
        .map(|(r, _)| r.count(Severity::Warning))
        .sum();
    let failed = errors > 0 || (a.strict && warnings > 0);
    if ctx.json {
        let docs: Vec<_> = reports
            .iter()
            .map(|(r, details)| {
                json!({
                    "partition": r.dir, "branches": r.branches, "archives": r.archives,
                    "snapshots": r.snapshots, "keys": r.keys, "data_files": r.data_files, "pages": r.pages,
                    "problems": r.findings.iter().zip(details).map(|(p, d)| json!({
                        "severity": if p.severity() == Severity::Error { "error" } else { "warning" },
                        "file": p.file, "detail": d,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        output::print_json(
            &json!({"clean": !failed, "errors": errors, "warnings": warnings, "partitions": docs}),
        )?;
    } else {
        for (r, details) in &reports {
            let (e, w) = (r.count(Severity::Error), r.count(Severity::Warning));
            let status = match (e, w) {
                (0, 0) => "clean".to_string(),
                _ => format!(
                    "{}, {}",
                    plural(e as u64, "error", "errors"),
                    plural(w as u64, "warning", "warnings")
                ),
            };
            println!(
                "{}: {}, {}, {}, {} in branch heads; {}, {}: {status}",
                r.dir,
                plural(r.branches as u64, "branch", "branches"),
                plural(r.archives as u64, "archive", "archives"),
                plural(r.snapshots as u64, "snapshot", "snapshots"),
                plural(r.keys, "key", "keys"),
                plural(r.data_files as u64, "data file", "data files"),
                plural(r.pages, "page", "pages"),
            );
            for (p, d) in r.findings.iter().zip(details) {
                let s = if p.severity() == Severity::Error {
                    "error  "
                } else {
                    "warning"
                };
                println!("  {s}  {}: {d}", p.file);
            }
        }
        let n = plural(parts.len() as u64, "partition", "partitions");
        if parts.is_empty() {
            println!("no partitions in {}", root.display());
        } else if failed {
            println!(
                "verified {n}: {}, {}",
                plural(errors as u64, "error", "errors"),
                plural(warnings as u64, "warning", "warnings")
            );
        } else if warnings > 0 {
            println!(
                "verified {n}: clean ({})",
                plural(warnings as u64, "warning", "warnings")
            );
        } else {
            println!("verified {n}: clean");
        }
    }
    Ok(if failed { code::CORRUPT } else { code::OK })
}
