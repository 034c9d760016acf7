//! Branch commands: `ls`, `branch`, `tag`, `archive`, `gc`, `diff`, `merge`, `rebase`,
//! `cherry-pick`, `revert`, `reset`, `rehome`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use bough::{
    ArchiveName, Branch, BranchInfo, ConflictPolicy, DiffChange, GcReport, KeepReason,
    MergeOptions, PartitionHandle, Store,
};
use bough_names::{FileKind, PartitionDir, classify};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Map, Value as Json, json};

use crate::TargetArgs;
use crate::ctx::{self, Ctx, open_target};
use crate::error::{CliError, CliResult, code};
use crate::output::{self, plural};
use crate::target::{self, Scope, resolve, resolve_branch};

mod archive;
mod branch;
mod diff;
mod gc;
mod history;
mod merge;
mod pick;
mod policy;
mod reset;
mod tag;

use crate::target::find_archive;
pub use archive::{ArchiveCmd, archive};
pub use branch::{BranchCmd, branch};
use diff::two_branches;
pub use diff::{DiffArgs, diff};
pub use gc::{GcArgs, gc};
pub use history::{HistoryCmd, history};
pub use merge::{MergeArgs, merge};
pub use pick::{PickArgs, RebaseArgs, pick, rebase};
pub use reset::{RehomeArgs, ResetArgs, rehome, reset};
pub use tag::{TagCmd, tag};

/// Data files of a partition directory, by branch: (files, bytes).
fn own_files(root: &Path, dir: &str) -> BTreeMap<String, (u64, u64)> {
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(root.join(dir)) else {
        return out;
    };
    for e in rd.flatten() {
        let Some(name) = e.file_name().to_str().map(String::from) else {
            continue;
        };
        if let FileKind::Data(d) = classify(&name) {
            let len = e.metadata().map_or(0, |m| m.len());
            let slot = out.entry(d.branch.as_str().to_string()).or_default();
            slot.0 += 1;
            slot.1 += len;
        }
    }
    out
}

fn file_size(root: &Path, dir: &str, name: &str) -> Option<u64> {
    std::fs::metadata(root.join(dir).join(name))
        .ok()
        .map(|m| m.len())
}

/// The partitions a scope covers (all of the store when absent).
pub(crate) fn partitions_of_scope(
    ctx: &Ctx,
    store: &Store,
    scope: Option<&str>,
) -> CliResult<Vec<PartitionDir>> {
    match scope.map(target::scope).transpose()? {
        None => ctx.all_partitions(),
        Some(Scope::Partition(p)) => {
            ctx::partition(store, p.table.as_str(), p.partition, false)?;
            Ok(vec![p])
        }
        Some(Scope::Table(t)) => {
            let parts = store.table(&t)?.partitions()?;
            if parts.is_empty() {
                return Err(CliError::not_found(format!(
                    "table `{t}` has no partitions in this store"
                ))
                .hint("run `bough ls` to see the tables"));
            }
            let table = target::table(&t)?;
            Ok(parts
                .into_iter()
                .map(|p| PartitionDir::new(table.clone(), p))
                .collect())
        }
    }
}

pub(crate) fn handle(store: &Store, p: &PartitionDir) -> CliResult<PartitionHandle> {
    Ok(store.partition(p.table.as_str(), p.partition)?)
}

/// `bough ls`.
pub fn ls(ctx: &Ctx) -> CliResult<()> {
    let store = ctx.open_read_only()?;
    let root = ctx.root()?;
    let mut rows = Vec::new();
    let mut docs = Vec::new();
    for p in ctx.all_partitions()? {
        let part = handle(&store, &p)?;
        let branches = part.branches()?;
        let files = own_files(&root, &p.to_string());
        let (n, bytes) = files.values().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        rows.push(vec![
            p.to_string(),
            some_branches(&branches),
            n.to_string(),
            output::size(bytes),
        ]);
        docs.push(json!({"partition": p.to_string(), "branches": branches, "data_files": n, "bytes": bytes}));
    }
    if ctx.json {
        return output::print_json(
            &json!({"store": root.display().to_string(), "partitions": docs}),
        );
    }
    if rows.is_empty() {
        println!("no partitions in {}", root.display());
    } else {
        print!(
            "{}",
            output::table(&["PARTITION", "BRANCHES", "FILES", "SIZE"], &rows)
        );
        if docs.iter().any(|d| {
            d["branches"]
                .as_array()
                .is_some_and(|b| b.len() > LS_BRANCHES)
        }) {
            println!("(`bough branch list TABLE.PART` lists every branch)");
        }
    }
    Ok(())
}

/// The first few branch names and how many more, so `ls` stays one screen wide however
/// many branches a partition has (`branch list` shows them all).
fn some_branches(names: &[String]) -> String {
    match names.get(..LS_BRANCHES) {
        Some(first) if names.len() > LS_BRANCHES => {
            format!("{}, … {} more", first.join(", "), names.len() - LS_BRANCHES)
        }
        _ => names.join(", "),
    }
}

/// Branch names `ls` shows per partition.
const LS_BRANCHES: usize = 5;

fn done(ctx: &Ctx, text: &str, doc: Json) -> CliResult<()> {
    if ctx.json {
        output::print_json(&doc)
    } else {
        println!("{text}");
        Ok(())
    }
}
