//! `bough archive`: take, list, prune, restore and branch from archives.

use super::*;
use crate::target::{find_archive, find_archive_in};

/// `bough archive ...`.
#[derive(Debug, Subcommand)]
pub enum ArchiveCmd {
    /// Archive a branch's current state (a manifest_<branch>_<term>_<ts> file).
    #[command(
        after_help = "Examples:\n  bough archive create orders.0@main\n  bough archive create --all-partitions orders -b main"
    )]
    Create {
        /// TABLE.PART[@BRANCH] (or --all-partitions TABLE).
        #[arg(
            value_name = "TABLE.PART[@BRANCH]",
            required_unless_present = "all_partitions"
        )]
        target: Option<String>,
        /// Archive the branch on every partition of TABLE with one timestamp.
        #[arg(long, value_name = "TABLE", conflicts_with = "target")]
        all_partitions: Option<String>,
        /// The branch.
        #[arg(long, short = 'b', value_name = "BRANCH")]
        branch: Option<String>,
    },
    /// List a branch's archives, oldest first.
    List(TargetArgs),
    /// Restore a branch to an archive in place; the state it replaces is kept as a branch.
    #[command(
        after_help = "ARCHIVE is the archive's file name or its timestamp.\n\nExample:\n  bough archive restore orders.0@main 1714564800000 --backup main-before"
    )]
    Restore {
        #[command(flatten)]
        target: TargetArgs,
        /// The archive (file name or timestamp).
        archive: String,
        /// Name of the branch that keeps the replaced state (default: <branch>-backup-<now>).
        #[arg(long, value_name = "NAME")]
        backup: Option<String>,
    },
    /// Create a new branch at an archived state (point-in-time branch).
    #[command(
        name = "branch",
        after_help = "Example:\n  bough archive branch orders.0@main 1714564800000 yesterday"
    )]
    BranchFrom {
        #[command(flatten)]
        target: TargetArgs,
        /// The archive (file name or timestamp).
        archive: String,
        /// The new branch.
        name: String,
    },
    /// Delete all but the newest KEEP archives of a branch.
    Prune {
        #[command(flatten)]
        target: TargetArgs,
        /// Archives to keep.
        #[arg(long, value_name = "N")]
        keep: usize,
    },
}

/// `bough archive ...`.
pub fn archive(ctx: &Ctx, cmd: ArchiveCmd) -> CliResult<()> {
    match cmd {
        ArchiveCmd::Create {
            target,
            all_partitions,
            branch,
        } => {
            if let Some(table) = all_partitions {
                let b = resolve_branch(&[("--branch", branch.as_deref())])?;
                let store = ctx.open(false)?;
                if store.table(&table)?.partitions()?.is_empty() {
                    return Err(CliError::not_found(format!(
                        "table `{table}` has no partitions"
                    )));
                }
                let ts = store.table(&table)?.archive(&b)?;
                store.close()?;
                return done(
                    ctx,
                    &format!(
                        "archived {b} on every partition of {table} at {ts} ({})",
                        output::time(ts)
                    ),
                    json!({"table": table, "branch": b, "timestamp_ms": ts}),
                );
            }
            let t = resolve(&target.unwrap_or_default(), branch.as_deref(), &[])?;
            let store = ctx.open(false)?;
            let (_, b) = open_target(&store, &t, false)?;
            let name = b.archive()?;
            store.close()?;
            done(
                ctx,
                &format!("{name}"),
                json!({"archive": name.to_string(), "branch": t.label(), "timestamp_ms": name.timestamp}),
            )
        }
        ArchiveCmd::List(a) => {
            let t = resolve(&a.target, a.branch.as_deref(), &[])?;
            let store = ctx.open_read_only()?;
            // Through the partition, not a head: a damaged branch's archives still list.
            let part = ctx::partition(&store, &t.table, t.partition, false)?;
            let archives = part.archives(&t.branch)?;
            if archives.is_empty() && !part.branches()?.contains(&t.branch) {
                return Err(ctx::missing_branch(&part, &t.branch));
            }
            if ctx.json {
                let list: Vec<Json> = archives.iter().map(|a| json!({"name": a.to_string(), "term": a.term, "timestamp_ms": a.timestamp})).collect();
                return output::print_json(&json!({"branch": t.label(), "archives": list}));
            }
            let rows: Vec<Vec<String>> = archives
                .iter()
                .map(|a| {
                    vec![
                        a.to_string(),
                        a.term.to_string(),
                        a.timestamp.to_string(),
                        output::time(a.timestamp),
                    ]
                })
                .collect();
            print!(
                "{}",
                output::table(&["ARCHIVE", "TERM", "TIMESTAMP", "TAKEN"], &rows)
            );
            Ok(())
        }
        ArchiveCmd::Restore {
            target,
            archive,
            backup,
        } => {
            let t = resolve(&target.target, target.branch.as_deref(), &[])?;
            let backup =
                backup.unwrap_or_else(|| format!("{}-backup-{}", t.branch, output::now_ms()));
            target::branch_name(&backup, "--backup")?;
            let store = ctx.open(false)?;
            let part = ctx::partition(&store, &t.table, t.partition, false)?;
            let b = match ctx::branch(&part, &t.branch) {
                Ok(b) => b,
                // Its manifest is damaged: bring it back from the archive without a head.
                Err(e) if e.code == crate::error::code::CORRUPT => {
                    let a = find_archive_in(part.archives(&t.branch)?, &t.label(), &archive)?;
                    let report = part.repair_from_archive(&t.branch, Some(&a))?;
                    store.close()?;
                    return crate::repair::print_report(ctx, &t.label(), &report);
                }
                Err(e) => return Err(e),
            };
            let a = find_archive(&b, &archive)?;
            b.restore(&a, &backup)?;
            store.close()?;
            done(
                ctx,
                &format!(
                    "restored {} to {a}; the replaced state is branch {backup}",
                    t.label()
                ),
                json!({"branch": t.label(), "archive": a.to_string(), "backup": backup}),
            )
        }
        ArchiveCmd::BranchFrom {
            target,
            archive,
            name,
        } => {
            let t = resolve(&target.target, target.branch.as_deref(), &[])?;
            target::branch_name(&name, "NAME")?;
            let store = ctx.open(false)?;
            // Through the partition: the archived branch may be damaged.
            let part = ctx::partition(&store, &t.table, t.partition, false)?;
            let a = find_archive_in(part.archives(&t.branch)?, &t.label(), &archive)?;
            let nb = part.branch_from_archive(&a, &name)?;
            let label = nb.label().to_string();
            store.close()?;
            done(
                ctx,
                &format!("created {label} at {a}"),
                json!({"created": label, "archive": a.to_string()}),
            )
        }
        ArchiveCmd::Prune { target, keep } => {
            let t = resolve(&target.target, target.branch.as_deref(), &[])?;
            let store = ctx.open(false)?;
            let (_, b) = open_target(&store, &t, false)?;
            let gone = b.prune_archives(keep)?;
            store.close()?;
            let names: Vec<String> = gone.iter().map(ToString::to_string).collect();
            done(
                ctx,
                &format!(
                    "deleted {} of {}",
                    plural(names.len() as u64, "archive", "archives"),
                    t.label()
                ),
                json!({"branch": t.label(), "deleted": names}),
            )
        }
    }
}
