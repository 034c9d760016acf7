//! Space a user sees: what a branch costs (`branch info`), and `bough compact`.

use bough::BranchSpace;
use bough_names::PartitionDir;
use clap::Args;
use serde_json::{Value as Json, json};

use crate::branches::{handle, partitions_of_scope};
use crate::ctx::{self, Ctx};
use crate::error::CliResult;
use crate::output::{self, plural};
use crate::target::{self, split_target};

/// A branch's space as JSON (`null` when the partition could not be measured).
pub fn space_json(s: Option<&BranchSpace>) -> Json {
    match s {
        None => Json::Null,
        Some(s) => json!({
            "exclusive_bytes": s.exclusive_bytes,
            "exclusive_files": s.exclusive_files,
            "shared_bytes": s.shared_bytes,
            "shared_files": s.shared_files,
            "log_bytes": s.log_bytes,
            "history_points": s.history_points,
            "history_bytes": s.history_bytes,
            "shared_with": s.shared_with.iter()
                .map(|(b, n)| json!({"branch": b.as_str(), "bytes": n}))
                .collect::<Vec<_>>(),
        }),
    }
}

/// The `exclusive` and `shared` lines of `branch info`.
pub fn print_space(s: Option<&BranchSpace>) {
    let Some(s) = s else {
        println!("space      unknown (the partition could not be walked; run `bough verify`)");
        return;
    };
    println!(
        "exclusive  {} ({}): freed if this branch is deleted and GC runs",
        plural(s.exclusive_files, "file", "files"),
        output::size(s.exclusive_bytes)
    );
    let with: Vec<String> = s
        .shared_with
        .iter()
        .map(|(b, n)| format!("{b} ({})", output::size(*n)))
        .collect();
    println!(
        "shared     {} ({}){}",
        plural(s.shared_files, "file", "files"),
        output::size(s.shared_bytes),
        if with.is_empty() {
            String::new()
        } else {
            format!(" with {}", with.join(", "))
        }
    );
    if s.log_bytes > 0 {
        println!(
            "log        {} of these in write-ahead log files (writes not yet checkpointed)",
            output::size(s.log_bytes)
        );
    }
    if s.history_points > 0 {
        println!(
            "history    {} ({}): kept for point-in-time branches inside the history window",
            plural(s.history_points, "point", "points"),
            output::size(s.history_bytes)
        );
    }
}

/// What `import` says when it went into a branch that already held entries: the stream's
/// copy now lives in new files, and the old files stay until compaction moves what is
/// still live out of them (GC alone frees only files nothing references any more).
pub const REIMPORT_HINT: &str = "the branch already held entries: their files may now be \
     mostly garbage; `bough compact` frees them (GC alone keeps a file while any page of it \
     is live)";

/// Whether `branch` holds at least one live entry.
pub fn holds_entries(part: &bough::PartitionHandle, branch: &str) -> CliResult<bool> {
    let first = ctx::branch(part, branch)?
        .read_view()?
        .scan(&bough::ScanOptions {
            limit: 1,
            keys_only: true,
            ..bough::ScanOptions::default()
        })?;
    Ok(!first.entries.is_empty())
}

/// `bough compact`.
#[derive(Debug, Args)]
pub struct CompactArgs {
    /// TABLE, TABLE.PART or TABLE.PART@BRANCH (default: every branch of every partition).
    #[arg(value_name = "TABLE[.PART][@BRANCH]")]
    scope: Option<String>,
}

/// `bough compact`: each branch moves its live pages out of its mostly-garbage files that
/// nothing else references (what the maintenance tick of a long-lived process does), then
/// GC deletes what that freed.
pub fn compact(ctx: &Ctx, a: CompactArgs) -> CliResult<()> {
    let store = ctx.open(false)?;
    let (parts, only): (Vec<PartitionDir>, Option<String>) = match a.scope.as_deref() {
        Some(s) if s.contains('@') => {
            let (dir, branch) = split_target(s)?;
            ctx::partition(&store, dir.table.as_str(), dir.partition, false)?;
            (vec![dir], branch)
        }
        scope => (partitions_of_scope(ctx, &store, scope)?, None),
    };
    let mut docs = Vec::new();
    let mut text = String::new();
    let (mut freed_files, mut freed_bytes, mut skipped_total) = (0u64, 0u64, 0u64);
    for p in &parts {
        let part = handle(&store, p)?;
        let names = match &only {
            Some(b) => {
                target::branch_name(b, "the target")?;
                vec![b.clone()]
            }
            None => part.branches()?,
        };
        let mut branch_docs = Vec::new();
        let (mut compacted, mut moved, mut skipped) = (0u64, 0u64, 0u64);
        for name in &names {
            let r = ctx::branch(&part, name)?.compact_now()?;
            compacted += r.compacted.len() as u64;
            moved += r.pages_moved;
            skipped += r.shared_skipped.len() as u64;
            branch_docs.push(json!({
                "branch": name,
                "compacted": r.compacted,
                "pages_moved": r.pages_moved,
                "shared_skipped": r.shared_skipped,
            }));
        }
        let gc = part.gc()?;
        freed_files += gc.deleted.len() as u64;
        freed_bytes += gc.bytes_freed;
        skipped_total += skipped;
        docs.push(json!({
            "partition": p.to_string(),
            "branches": branch_docs,
            "gc": {
                "deleted": gc.deleted.iter().map(|(f, b)| json!({"file": f, "bytes": b})).collect::<Vec<_>>(),
                "bytes_freed": gc.bytes_freed,
                "kept_files": gc.kept.len(),
            },
        }));
        text.push_str(&format!(
            "{p}: compacted {} of {} ({} moved); GC deleted {} ({}), kept {}{}\n",
            plural(compacted, "file", "files"),
            plural(names.len() as u64, "branch", "branches"),
            plural(moved, "page", "pages"),
            plural(gc.deleted.len() as u64, "file", "files"),
            output::size(gc.bytes_freed),
            plural(gc.kept.len() as u64, "file", "files"),
            if skipped > 0 {
                format!(
                    "; left {} other branches, archives or merge bases still use",
                    plural(skipped, "mostly-garbage file", "mostly-garbage files")
                )
            } else {
                String::new()
            }
        ));
    }
    store.close()?;
    if ctx.json {
        return output::print_json(&json!({
            "partitions": docs,
            "files_deleted": freed_files,
            "bytes_freed": freed_bytes,
        }));
    }
    print!("{text}");
    println!(
        "freed {} ({})",
        plural(freed_files, "file", "files"),
        output::size(freed_bytes)
    );
    if skipped_total > 0 {
        println!(
            "hint: a file shared with another branch frees once that branch is deleted or this one \
             is re-homed (`bough rehome TABLE.PART@BRANCH`)"
        );
    }
    Ok(())
}
