//! `bough repair`: bring a branch whose manifest is damaged back from its newest intact
//! archive, saying exactly what is lost.

use bough::{DiffChange, PartitionHandle, RepairReport};
use clap::Args;
use serde_json::json;

use crate::TargetArgs;
use crate::ctx::{self, Ctx};
use crate::error::{CliError, CliResult};
use crate::output;
use crate::target::{Target, resolve};

/// `bough repair`.
#[derive(Debug, Args)]
pub struct RepairArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// The archive to go back to (file name or timestamp; default: the newest that reads).
    #[arg(long, value_name = "ARCHIVE")]
    archive: Option<String>,
}

/// Lost changes printed before "… and N more".
const SHOWN: usize = 20;

/// `bough repair`.
pub fn repair(ctx: &Ctx, a: RepairArgs) -> CliResult<()> {
    let t = resolve(&a.target.target, a.target.branch.as_deref(), &[])?;
    let store = ctx.open(false)?;
    let part = ctx::partition(&store, &t.table, t.partition, false)?;
    let archive = match &a.archive {
        Some(arg) => Some(crate::target::find_archive_in(
            part.archives(&t.branch)?,
            &t.label(),
            arg,
        )?),
        None => None,
    };
    let report = part
        .repair_from_archive(&t.branch, archive.as_ref())
        .map_err(|e| {
            let not_found = e.kind() == bough::ErrorKind::NotFound;
            let err = CliError::from(e);
            if not_found {
                err.or_hint("without an archive the branch cannot be repaired: `bough branch delete` it, or restore the store from a backup")
            } else {
                err
            }
        })?;
    store.close()?;
    print_report(ctx, &t.label(), &report)
}

/// Prints what a repair did and lost.
pub fn print_report(ctx: &Ctx, label: &str, r: &RepairReport) -> CliResult<()> {
    let lost = r.lost_changes.as_ref();
    if ctx.json {
        return output::print_json(&json!({
            "repaired": label,
            "archive": r.archive.to_string(),
            "archive_timestamp_ms": r.archive.timestamp,
            "damaged_manifest": r.damaged_manifest,
            "damage": r.damage,
            "last_readable_version": r.last_readable_version,
            "lost_changes": lost.map(|l| l.iter().map(|d| json!({
                "key": output::escape(&d.key),
                "change": match &d.change {
                    DiffChange::Added(_) => "added",
                    DiffChange::Removed(_) => "removed",
                    DiffChange::Changed { .. } => "changed",
                },
            })).collect::<Vec<_>>()),
            "unreadable_commits": r.unreadable_commits,
        }));
    }
    println!(
        "repaired {label}: it now holds archive {} (taken {}); the damaged {} ({}) is replaced",
        r.archive.timestamp,
        output::time(r.archive.timestamp),
        r.damaged_manifest,
        r.damage
    );
    match (lost, r.last_readable_version) {
        (Some(changes), Some(v)) => {
            println!(
                "lost: {} made after the archive, up to version {v} (the last state that \
                 could be read):",
                output::plural(changes.len() as u64, "key change", "key changes")
            );
            for d in changes.iter().take(SHOWN) {
                let what = match &d.change {
                    DiffChange::Added(_) => "written",
                    DiffChange::Removed(_) => "deleted",
                    DiffChange::Changed { .. } => "changed",
                };
                println!("  {what:<8} {}", output::escape(&d.key));
            }
            if changes.len() > SHOWN {
                println!("  … and {} more", changes.len() - SHOWN);
            }
        }
        _ => println!(
            "lost: every change made after the archive (the damaged manifest's states cannot be read)"
        ),
    }
    if r.unreadable_commits > 0 {
        println!(
            "lost: {} after the damage, whose contents cannot be read",
            output::plural(r.unreadable_commits as u64, "commit", "commits")
        );
    }
    Ok(())
}

/// For `branch info` on a damaged branch: what is known without its manifest, and the way
/// back. Prints the archives; returns the error to exit with.
pub fn damaged_info(
    ctx: &Ctx,
    part: &PartitionHandle,
    t: &Target,
    e: CliError,
) -> CliResult<CliError> {
    let archives = part.archives(&t.branch)?;
    if !ctx.json {
        println!("branch     {}", t.label());
        println!("state      damaged: its manifest cannot be read");
        println!("archives   {}", archives.len());
        for a in &archives {
            println!("  {a}  term {}  {}", a.term, output::time(a.timestamp));
        }
    }
    Ok(e.hint(ctx::remedy(&t.label(), !archives.is_empty())))
}
