//! Branch commands: `ls`, `branch`, `archive`, `gc`, `diff`, `merge`, `reset`, `rehome`.

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

/// `bough branch ...`.
#[derive(Debug, Subcommand)]
pub enum BranchCmd {
    /// Create branch NAME from --from (default main); no data is copied.
    #[command(
        after_help = "Examples:\n  bough branch create feature orders.0 --from main\n  bough branch create feature --all-partitions orders --from main"
    )]
    Create {
        /// The new branch.
        name: String,
        /// TABLE.PART[@FROM] (or --all-partitions TABLE).
        #[arg(
            value_name = "TABLE.PART[@FROM]",
            required_unless_present = "all_partitions"
        )]
        target: Option<String>,
        /// The branch to fork from.
        #[arg(long, value_name = "BRANCH")]
        from: Option<String>,
        /// Create it on every partition of TABLE, all or nothing.
        #[arg(long, value_name = "TABLE", conflicts_with = "target")]
        all_partitions: Option<String>,
        /// The branch to fork from (same as --from).
        #[arg(long, short = 'b', value_name = "BRANCH")]
        branch: Option<String>,
    },
    /// Delete branch NAME (its data stays until `bough gc` finds nothing else needs it).
    #[command(
        after_help = "Examples:\n  bough branch delete feature orders.0\n  bough branch delete feature --all-partitions orders"
    )]
    Delete {
        /// The branch.
        name: String,
        /// TABLE.PART (or --all-partitions TABLE).
        #[arg(value_name = "TABLE.PART", required_unless_present = "all_partitions")]
        target: Option<String>,
        /// Delete it on every partition of TABLE that has it.
        #[arg(long, value_name = "TABLE", conflicts_with = "target")]
        all_partitions: Option<String>,
    },
    /// List branches of a partition, of every partition of a table, or of the whole store.
    #[command(
        after_help = "Examples:\n  bough branch list orders.0\n  bough branch list orders\n  bough branch list"
    )]
    List {
        /// TABLE.PART or TABLE (default: every partition).
        #[arg(value_name = "TABLE[.PART]")]
        scope: Option<String>,
    },
    /// Parent, fork point, term, creation time, files and archives of a branch.
    #[command(after_help = "Example:\n  bough branch info orders.0@feature")]
    Info(TargetArgs),
    /// Draw the branch hierarchy with fork points, terms, sizes and archives.
    #[command(after_help = "Example:\n  bough branch tree orders.0")]
    Tree {
        /// TABLE.PART.
        #[arg(value_name = "TABLE.PART")]
        partition: String,
    },
}

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

/// `bough gc`.
#[derive(Debug, Args)]
pub struct GcArgs {
    /// TABLE.PART or TABLE (default: every partition).
    #[arg(value_name = "TABLE[.PART]")]
    scope: Option<String>,
    /// Report what would be deleted without deleting.
    #[arg(long)]
    dry_run: bool,
    /// Only the summary line per partition.
    #[arg(long, short = 's')]
    summary: bool,
}

/// `bough diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The branch to compare from: BRANCH, or TABLE.PART@BRANCH.
    #[arg(value_name = "A")]
    a: String,
    /// The branch to compare to: BRANCH, or TABLE.PART@BRANCH.
    #[arg(value_name = "B")]
    b: String,
    /// TABLE.PART (unless A or B names it).
    #[arg(value_name = "TABLE.PART")]
    partition: Option<String>,
    /// Exit with 1 when there are differences, 0 when there are none (as `git diff`).
    #[arg(long)]
    exit_code: bool,
    /// Keys only.
    #[arg(long)]
    keys_only: bool,
    /// Keys and values in hex.
    #[arg(long, short = 'x')]
    hex: bool,
    /// Only the counts.
    #[arg(long)]
    stat: bool,
    /// Most keys printed.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
}

/// Conflict policies on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PolicyArg {
    /// Change nothing and report the conflicts (exit code 7).
    Fail,
    /// Keep the target's version.
    Ours,
    /// Take the source's version.
    Theirs,
    /// The newer user timestamp wins (a deletion loses).
    Newest,
}

/// `bough merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// The branch whose changes are merged: BRANCH, or TABLE.PART@BRANCH.
    #[arg(value_name = "SOURCE")]
    source: String,
    /// The branch that receives them: BRANCH, or TABLE.PART@BRANCH.
    #[arg(value_name = "TARGET")]
    target: String,
    /// TABLE.PART (unless SOURCE or TARGET names it).
    #[arg(value_name = "TABLE.PART")]
    partition: Option<String>,
    /// What to do with keys both sides changed differently.
    #[arg(long, value_enum, default_value_t = PolicyArg::Fail)]
    policy: PolicyArg,
    /// Report what would happen; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Always merge key by key, even when a fast-forward by reference is possible.
    #[arg(long)]
    no_ff: bool,
    /// On a fast-forward, also count the keys it brings (a diff, whose cost follows how far
    /// the branches diverged; without it a fast-forward costs the same however far).
    #[arg(long)]
    count: bool,
    /// Keys and values of conflicts in hex.
    #[arg(long, short = 'x')]
    hex: bool,
}

/// `bough reset`.
#[derive(Debug, Args)]
pub struct ResetArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// The branch whose current state the target takes.
    #[arg(long, value_name = "BRANCH")]
    to: String,
}

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
            let parts = store.partitions_of(&t)?;
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

/// `bough branch ...`.
pub fn branch(ctx: &Ctx, cmd: BranchCmd) -> CliResult<()> {
    match cmd {
        BranchCmd::Create {
            name,
            target,
            from,
            all_partitions,
            branch,
        } => {
            target::branch_name(&name, "NAME")?;
            if let Some(table) = all_partitions {
                let from = resolve_branch(&[
                    ("--from", from.as_deref()),
                    ("--branch", branch.as_deref()),
                ])?;
                let store = ctx.open(false)?;
                let parts = store.partitions_of(&table)?;
                if parts.is_empty() {
                    return Err(CliError::not_found(format!(
                        "table `{table}` has no partitions"
                    )));
                }
                store.create_branch_global(&table, &name, &from)?;
                store.close()?;
                return done(
                    ctx,
                    &format!(
                        "created branch {name} from {from} on {} of table {table}",
                        plural(parts.len() as u64, "partition", "partitions")
                    ),
                    json!({"created": name, "from": from, "table": table, "partitions": parts}),
                );
            }
            let target = target.unwrap_or_default();
            let t = resolve(&target, branch.as_deref(), &[("--from", from.as_deref())])?;
            let store = ctx.open(false)?;
            let part = ctx::partition(&store, &t.table, t.partition, false)?;
            ctx::branch(&part, &t.branch)?;
            let created = part.create_branch(&name, &t.branch).map_err(|e| {
                let exists = e.kind() == bough::ErrorKind::AlreadyExists;
                let err = CliError::from(e);
                if exists {
                    err.hint(format!(
                        "choose another name, or delete the branch first: `bough branch delete {name} {}`",
                        t.dir()
                    ))
                } else {
                    err
                }
            })?;
            let info = part.describe(&name)?;
            let label = created.label().to_string();
            store.close()?;
            let fork = info.origin.as_ref().map_or(0, |o| o.fork_version);
            done(
                ctx,
                &format!(
                    "created {label} from {} at version {fork} (no data copied)",
                    t.branch
                ),
                json!({"created": label, "from": t.branch, "fork_version": fork}),
            )
        }
        BranchCmd::Delete {
            name,
            target,
            all_partitions,
        } => {
            target::branch_name(&name, "NAME")?;
            if let Some(table) = all_partitions {
                let store = ctx.open(false)?;
                store.delete_branch_global(&table, &name)?;
                store.close()?;
                return done(
                    ctx,
                    &format!(
                        "deleted branch {name} on every partition of {table}; run `bough gc` to free its files"
                    ),
                    json!({"deleted": name, "table": table}),
                );
            }
            let t = resolve(&target.unwrap_or_default(), None, &[("NAME", Some(&name))])?;
            let store = ctx.open(false)?;
            let part = ctx::partition(&store, &t.table, t.partition, false)?;
            ctx::branch(&part, &t.branch)?;
            let children = children_of(&part, &t.branch);
            part.delete_branch(&t.branch).map_err(|e| {
                let main = t.branch == "main";
                let err = CliError::from(e);
                if main {
                    err.hint("main cannot be deleted")
                } else {
                    err
                }
            })?;
            store.close()?;
            let mut text = format!(
                "deleted {}; run `bough gc` to free files nothing else references",
                t.label()
            );
            if !children.is_empty() {
                let one = children.len() == 1;
                let [were, are, they, them] = if one {
                    ["was", "is", "it keeps", "it as a root"]
                } else {
                    ["were", "are", "they keep", "them as roots"]
                };
                text.push_str(&format!(
                    "\n{} {were} forked from it and {are} unaffected: {they} every key, and the files \
                     borrowed from it stay until nothing needs them (`bough rehome` copies them \
                     over); `bough branch tree` now draws {them}",
                    children.join(", ")
                ));
            }
            done(
                ctx,
                &text,
                json!({"deleted": t.label(), "children": children}),
            )
        }
        BranchCmd::List { scope } => list(ctx, scope.as_deref()),
        BranchCmd::Info(a) => info(ctx, &a),
        BranchCmd::Tree { partition } => tree(ctx, &partition),
    }
}

/// The branches forked from `name` (their origin names it as the parent).
fn children_of(part: &PartitionHandle, name: &str) -> Vec<String> {
    let Ok(all) = part.branches() else {
        return Vec::new();
    };
    all.into_iter()
        .filter(|b| {
            part.describe(b).is_ok_and(|i| {
                i.origin
                    .as_ref()
                    .and_then(|o| o.parent.as_ref())
                    .is_some_and(|(p, _)| p.as_str() == name)
            })
        })
        .collect()
}

fn done(ctx: &Ctx, text: &str, doc: Json) -> CliResult<()> {
    if ctx.json {
        output::print_json(&doc)
    } else {
        println!("{text}");
        Ok(())
    }
}

/// Everything `list`, `info` and `tree` show about one branch.
struct Described {
    info: BranchInfo,
    version: Option<u64>,
    files: u64,
    bytes: u64,
}

fn describe_all(store: &Store, root: &Path, p: &PartitionDir) -> CliResult<Vec<Described>> {
    let part = handle(store, p)?;
    let files = own_files(root, &p.to_string());
    let mut out = Vec::new();
    let described: Vec<(String, bough::Result<BranchInfo>)> = match part.describe_branches() {
        Ok(all) => all
            .into_iter()
            .map(|i| (i.name.to_string(), Ok(i)))
            .collect(),
        // One damaged branch fails the one-walk description: each is described on its own.
        Err(e) if e.kind() == bough::ErrorKind::Corruption => part
            .branches()?
            .into_iter()
            .map(|name| {
                let info = part.describe(&name);
                (name, info)
            })
            .collect(),
        Err(e) => return Err(e.into()),
    };
    for (name, info) in described {
        // One damaged branch must not hide the others: it is named, and skipped.
        let info = match info {
            Ok(info) => info,
            Err(e) if e.kind() == bough::ErrorKind::Corruption => {
                eprintln!(
                    "warning: {p}@{name} is damaged ({e}); `bough repair {p}@{name}` brings it back \
                     from its newest intact archive"
                );
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let version = part
            .branch(&name)
            .and_then(|b| b.read_view())
            .map(|v| v.version())
            .ok();
        let (f, b) = files.get(&name).copied().unwrap_or_default();
        out.push(Described {
            info,
            version,
            files: f,
            bytes: b,
        });
    }
    Ok(out)
}

fn parent_text(d: &Described) -> String {
    match d.info.origin.as_ref().and_then(|o| o.parent.as_ref()) {
        Some((name, term)) => format!("{name} (term {term})"),
        None => "-".into(),
    }
}

fn described_json(p: &PartitionDir, d: &Described) -> Json {
    let o = d.info.origin.as_ref();
    json!({
        "partition": p.to_string(),
        "branch": d.info.name.as_str(),
        "term": d.info.term,
        "version": d.version,
        "parent": o.and_then(|o| o.parent.as_ref()).map(|(n, _)| n.as_str()),
        "parent_term": o.and_then(|o| o.parent.as_ref()).map(|(_, t)| *t),
        "fork_version": o.map(|o| o.fork_version),
        "created_at_ms": o.map(|o| o.created_at_ms),
        "archives": d.info.archives.iter().map(|a| json!({"name": a.to_string(), "term": a.term, "timestamp_ms": a.timestamp})).collect::<Vec<_>>(),
        "data_files": d.files,
        "bytes": d.bytes,
        "staging": d.info.staging,
        "space": crate::space::space_json(d.info.space.as_ref()),
    })
}

/// The line `branch list` prints under the table for a staging branch.
fn staging_note(p: &PartitionDir, d: &Described) -> Option<String> {
    d.info.staging.as_ref().map(|purpose| {
        format!(
            "note: {p}@{} is the staging branch of an interrupted `{purpose}`; the next command \
             that writes to {p} (or `bough gc`) removes it",
            d.info.name
        )
    })
}

fn list(ctx: &Ctx, scope: Option<&str>) -> CliResult<()> {
    let store = ctx.open_read_only()?;
    let root = ctx.root()?;
    let parts = partitions_of_scope(ctx, &store, scope)?;
    let mut rows = Vec::new();
    let mut docs = Vec::new();
    let mut notes = Vec::new();
    for p in &parts {
        for d in describe_all(&store, &root, p)? {
            notes.extend(staging_note(p, &d));
            let o = d.info.origin.as_ref();
            rows.push(vec![
                p.to_string(),
                d.info.name.to_string(),
                d.info.term.to_string(),
                d.version.map_or("?".into(), |v| v.to_string()),
                parent_text(&d),
                o.filter(|o| o.parent.is_some())
                    .map_or("-".into(), |o| format!("v{}", o.fork_version)),
                o.map_or("-".into(), |o| output::time(o.created_at_ms)),
                d.info.archives.len().to_string(),
                format!("{} ({})", d.files, output::size(d.bytes)),
            ]);
            docs.push(described_json(p, &d));
        }
    }
    if ctx.json {
        return output::print_json(&json!({"branches": docs}));
    }
    print!(
        "{}",
        output::table(
            &[
                "PARTITION",
                "BRANCH",
                "TERM",
                "VERSION",
                "PARENT",
                "FORKED AT",
                "CREATED",
                "ARCHIVES",
                "OWN FILES"
            ],
            &rows
        )
    );
    for n in notes {
        println!("{n}");
    }
    Ok(())
}

fn info(ctx: &Ctx, a: &TargetArgs) -> CliResult<()> {
    let t = resolve(&a.target, a.branch.as_deref(), &[])?;
    let store = ctx.open_read_only()?;
    let root = ctx.root()?;
    let part = ctx::partition(&store, &t.table, t.partition, false)?;
    let branch = match ctx::branch(&part, &t.branch) {
        Ok(b) => b,
        Err(e) if e.code == crate::error::code::CORRUPT => {
            return Err(crate::repair::damaged_info(ctx, &part, &t, e)?);
        }
        Err(e) => return Err(e),
    };
    let p = part.dir().clone();
    let info = part.describe(&t.branch)?;
    let version = branch.read_view()?.version();
    let (files, bytes) = own_files(&root, &p.to_string())
        .get(&t.branch)
        .copied()
        .unwrap_or_default();
    let d = Described {
        info,
        version: Some(version),
        files,
        bytes,
    };
    if ctx.json {
        return output::print_json(&described_json(&p, &d));
    }
    let o = d.info.origin.as_ref();
    println!("branch     {}", t.label());
    println!("term       {}", d.info.term);
    println!("version    {version} (commits on this branch)");
    match o.and_then(|o| o.parent.as_ref().map(|p| (p, o.fork_version))) {
        Some(((parent, pterm), fork)) => {
            println!("parent     {parent} (term {pterm}), forked at its version {fork}")
        }
        None => println!("parent     - (a root branch)"),
    }
    if let Some(o) = o {
        println!("created    {}", output::time(o.created_at_ms));
    }
    println!(
        "own files  {} ({})",
        plural(files, "data file", "data files"),
        output::size(bytes)
    );
    crate::space::print_space(d.info.space.as_ref());
    println!("archives   {}", d.info.archives.len());
    for a in &d.info.archives {
        println!("  {a}  term {}  {}", a.term, output::time(a.timestamp));
    }
    Ok(())
}

/// `bough branch tree`: the hierarchy drawn from each branch's origin.
fn tree(ctx: &Ctx, partition: &str) -> CliResult<()> {
    let p = target::plain_partition(partition, "branch tree")?;
    let store = ctx.open_read_only()?;
    let root = ctx.root()?;
    ctx::partition(&store, p.table.as_str(), p.partition, false)?;
    let all = describe_all(&store, &root, &p)?;
    let names: Vec<String> = all.iter().map(|d| d.info.name.to_string()).collect();
    let parent_of = |d: &Described| -> Option<String> {
        d.info
            .origin
            .as_ref()
            .and_then(|o| o.parent.as_ref())
            .map(|(n, _)| n.to_string())
            .filter(|n| names.contains(n) && *n != d.info.name.as_str())
    };
    let mut children: BTreeMap<Option<String>, Vec<usize>> = BTreeMap::new();
    for (i, d) in all.iter().enumerate() {
        children.entry(parent_of(d)).or_default().push(i);
    }
    let key = |i: &usize| {
        let d = &all[*i];
        let o = d.info.origin.as_ref();
        (
            !d.info.name.is_main(),
            o.map_or(0, |o| o.fork_version),
            o.map_or(0, |o| o.created_at_ms),
            d.info.name.to_string(),
        )
    };
    for v in children.values_mut() {
        v.sort_by_key(key);
    }
    if ctx.json {
        fn node(
            i: usize,
            all: &[Described],
            children: &BTreeMap<Option<String>, Vec<usize>>,
            p: &PartitionDir,
        ) -> Json {
            let mut doc = described_json(p, &all[i]);
            let kids: Vec<Json> = children
                .get(&Some(all[i].info.name.to_string()))
                .map(|v| v.iter().map(|&k| node(k, all, children, p)).collect())
                .unwrap_or_default();
            if let Json::Object(m) = &mut doc {
                m.insert("children".into(), Json::Array(kids));
            }
            doc
        }
        let roots: Vec<Json> = children
            .get(&None)
            .map(|v| v.iter().map(|&i| node(i, &all, &children, &p)).collect())
            .unwrap_or_default();
        return output::print_json(&json!({"partition": p.to_string(), "roots": roots}));
    }
    let mut t = Drawing {
        all: &all,
        children: &children,
        names: &names,
        out: format!("{p}\n"),
    };
    for &r in children.get(&None).map(Vec::as_slice).unwrap_or_default() {
        t.draw(r, "", "", "");
    }
    print!("{}", t.out);
    Ok(())
}

/// The text of `branch tree`.
struct Drawing<'a> {
    all: &'a [Described],
    children: &'a BTreeMap<Option<String>, Vec<usize>>,
    names: &'a [String],
    out: String,
}

impl Drawing<'_> {
    /// Draws branch `i` after `lead` + `glyph`, and its archives and children (depth first)
    /// with `child_lead` before each of their lines.
    fn draw(&mut self, i: usize, lead: &str, glyph: &str, child_lead: &str) {
        let d = &self.all[i];
        let o = d.info.origin.as_ref();
        let mut line = format!("{lead}{glyph}● {}", d.info.name);
        match o.and_then(|o| o.parent.as_ref().map(|p| (p, o.fork_version))) {
            Some(((parent, pterm), fork)) if self.names.iter().any(|n| n == parent.as_str()) => {
                line.push_str(&format!("  ⑂ {parent}@v{fork}"));
                let now = self
                    .all
                    .iter()
                    .find(|x| x.info.name == *parent)
                    .map(|x| x.info.term);
                if now != Some(*pterm) {
                    line.push_str(&format!(" (its term {pterm})"));
                }
            }
            Some(((parent, _), fork)) => line.push_str(&format!("  ⑂ {parent}@v{fork} (deleted)")),
            None => {}
        }
        line.push_str(&format!(
            "  term {} · v{} · owns {}, {}",
            d.info.term,
            d.version.map_or("?".into(), |v| v.to_string()),
            plural(d.files, "file", "files"),
            output::size(d.bytes)
        ));
        if let Some(o) = o {
            line.push_str(&format!(" · {}", output::time(o.created_at_ms)));
        }
        self.out.push_str(&line);
        self.out.push('\n');
        let kids = self
            .children
            .get(&Some(d.info.name.to_string()))
            .cloned()
            .unwrap_or_default();
        let total = d.info.archives.len() + kids.len();
        let mut k = 0;
        for a in &d.info.archives {
            k += 1;
            let corner = if k == total { "└─" } else { "├─" };
            self.out.push_str(&format!(
                "{child_lead}{corner}◇ archive {a}  {}\n",
                output::time(a.timestamp)
            ));
        }
        for c in kids {
            k += 1;
            let last = k == total;
            let corner = if last { "└─" } else { "├─" };
            let next = format!("{child_lead}{}", if last { "  " } else { "│ " });
            self.draw(c, child_lead, corner, &next);
        }
    }
}

/// Finds an archive by file name or timestamp.
fn find_archive(branch: &Branch, arg: &str) -> CliResult<ArchiveName> {
    find_archive_in(branch.archives()?, branch.label(), arg)
}

/// The archive `arg` names (file name or timestamp) among `archives` of `label`.
pub(crate) fn find_archive_in(
    archives: Vec<ArchiveName>,
    label: &str,
    arg: &str,
) -> CliResult<ArchiveName> {
    let found = match ArchiveName::parse(arg) {
        Ok(a) => archives.into_iter().find(|x| *x == a),
        Err(_) => match arg.parse::<u64>() {
            Ok(ts) => archives.into_iter().find(|x| x.timestamp == ts),
            Err(_) => {
                return Err(CliError::usage(format!(
                    "`{}` is neither an archive name (manifest_<branch>_<term>_<ts>) nor a timestamp",
                    target::shown(arg)
                )));
            }
        },
    };
    found.ok_or_else(|| {
        CliError::not_found(format!("{label} has no archive `{}`", target::shown(arg)))
            .hint(format!("list them with `bough archive list {label}`"))
    })
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
                if store.partitions_of(&table)?.is_empty() {
                    return Err(CliError::not_found(format!(
                        "table `{table}` has no partitions"
                    )));
                }
                let ts = store.archive_global(&table, &b)?;
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

fn keep_text(why: &KeepReason) -> String {
    match why {
        KeepReason::Referenced { by } => format!("referenced by {by}"),
        KeepReason::PinnedByReader => "a reader's snapshot still uses it".into(),
        KeepReason::Writing => "a writer is appending to it".into(),
        KeepReason::InFlight => {
            "above the durable high-water mark (a commit may be in flight)".into()
        }
    }
}

fn keep_json(why: &KeepReason) -> Json {
    match why {
        KeepReason::Referenced { by } => json!({"reason": "referenced", "by": by}),
        KeepReason::PinnedByReader => json!({"reason": "pinned_by_reader"}),
        KeepReason::Writing => json!({"reason": "writing"}),
        KeepReason::InFlight => json!({"reason": "in_flight"}),
    }
}

/// `bough gc`.
pub fn gc(ctx: &Ctx, a: GcArgs) -> CliResult<()> {
    let store = ctx.open(false)?;
    let root = ctx.root()?;
    let parts = partitions_of_scope(ctx, &store, a.scope.as_deref())?;
    let mut docs = Vec::new();
    let mut out = String::new();
    let (mut total_files, mut total_bytes) = (0usize, 0u64);
    for p in &parts {
        let dir = p.to_string();
        let part = handle(&store, p)?;
        let report: GcReport = part.gc(a.dry_run)?;
        // Opening the partition for writing removed what interrupted commands left.
        let staging_removed = part.staging_removed()?;
        total_files += report.deleted.len();
        total_bytes += report.bytes_freed;
        let kept_bytes: u64 = report
            .kept
            .iter()
            .filter_map(|(f, _)| file_size(&root, &dir, f))
            .sum();
        if ctx.json {
            docs.push(json!({
                "partition": dir,
                "deleted": report.deleted.iter().map(|(f, b)| json!({"file": f, "bytes": b})).collect::<Vec<_>>(),
                "kept": report.kept.iter().map(|(f, why)| {
                    let mut m = Map::new();
                    m.insert("file".into(), json!(f));
                    m.insert("bytes".into(), json!(file_size(&root, &dir, f)));
                    if let Json::Object(w) = keep_json(why) { m.extend(w); }
                    Json::Object(m)
                }).collect::<Vec<_>>(),
                "unknown": report.unknown,
                "bytes_freed": report.bytes_freed,
                "manifests_read": report.manifests_read,
                "mapping_pages_visited": report.mapping_pages_visited,
                "staging_removed": staging_removed.iter().map(|(b, what)| json!({"branch": b, "staged": what})).collect::<Vec<_>>(),
            }));
            continue;
        }
        for (b, what) in &staging_removed {
            out.push_str(&format!(
                "{dir}: removed branch {b}, the staging branch of an interrupted `{what}`\n"
            ));
        }
        let verb = if a.dry_run { "would delete" } else { "deleted" };
        out.push_str(&format!(
            "{dir}: {verb} {} ({}), kept {} ({}); read {}, {}\n",
            plural(report.deleted.len() as u64, "file", "files"),
            output::size(report.bytes_freed),
            plural(report.kept.len() as u64, "file", "files"),
            output::size(kept_bytes),
            plural(report.manifests_read as u64, "manifest", "manifests"),
            plural(
                report.mapping_pages_visited as u64,
                "mapping page",
                "mapping pages"
            ),
        ));
        if a.summary {
            continue;
        }
        let mut rows: Vec<Vec<String>> = Vec::new();
        let short = if a.dry_run { "delete" } else { "deleted" };
        let mut deleted = report.deleted.clone();
        deleted.sort();
        for (f, b) in &deleted {
            rows.push(vec![
                format!("  {short}"),
                f.clone(),
                output::size(*b),
                String::new(),
            ]);
        }
        let mut kept = report.kept.clone();
        kept.sort_by(|x, y| x.0.cmp(&y.0));
        for (f, why) in &kept {
            rows.push(vec![
                "  kept".into(),
                f.clone(),
                file_size(&root, &dir, f).map_or("-".into(), output::size),
                keep_text(why),
            ]);
        }
        for f in &report.unknown {
            rows.push(vec![
                "  ignored".into(),
                f.clone(),
                "-".into(),
                "not a Bough file name; left alone".into(),
            ]);
        }
        if !rows.is_empty() {
            let t = output::table(&["", "", "", ""], &rows);
            // Skip the (empty) header line.
            out.extend(t.lines().skip(1).map(|l| format!("{l}\n")));
        }
    }
    store.close()?;
    if ctx.json {
        return output::print_json(
            &json!({"dry_run": a.dry_run, "partitions": docs, "files_deleted": total_files, "bytes_freed": total_bytes}),
        );
    }
    print!("{out}");
    if parts.len() > 1 {
        let verb = if a.dry_run { "would free" } else { "freed" };
        println!(
            "total: {verb} {} in {}",
            output::size(total_bytes),
            plural(total_files as u64, "file", "files")
        );
    }
    Ok(())
}

/// The two branches and the partition of `diff` and `merge`: `A B TABLE.PART`, or with
/// `TABLE.PART@BRANCH` for A or B (then TABLE.PART may be left out; every partition named
/// must be the same one).
fn two_branches(
    cmd: &str,
    sides: [(&str, &str); 2],
    partition: Option<&str>,
) -> CliResult<(PartitionDir, [String; 2])> {
    let mut dir: Option<(PartitionDir, String)> = None;
    let mut agree = |p: PartitionDir, from: &str| -> CliResult<()> {
        match &dir {
            Some((d, first)) if *d != p => Err(CliError::usage(format!(
                "{first} names partition {d} but {from} names {p}"
            ))
            .hint(format!("{cmd} compares two branches of one partition"))),
            Some(_) => Ok(()),
            None => {
                dir = Some((p, from.to_string()));
                Ok(())
            }
        }
    };
    let mut names = [String::new(), String::new()];
    for (slot, (what, arg)) in names.iter_mut().zip(sides) {
        // A branch name has no `.`, a partition always has one.
        if arg.contains('.') || arg.contains('@') {
            let (p, at) = target::split_target(arg)?;
            let Some(b) = at else {
                return Err(CliError::usage(format!(
                    "{what} `{}` names a partition but no branch",
                    target::shown(arg)
                ))
                .hint(format!("write {what} as BRANCH or TABLE.PART@BRANCH")));
            };
            target::branch_name(&b, what)?;
            agree(p, what)?;
            *slot = b;
        } else {
            target::branch_name(arg, what)?;
            *slot = arg.to_string();
        }
    }
    if let Some(p) = partition {
        agree(target::plain_partition(p, cmd)?, "TABLE.PART")?;
    }
    let Some((p, _)) = dir else {
        return Err(CliError::usage(format!("{cmd}: which partition?")).hint(format!(
            "add TABLE.PART, or write the branches as TABLE.PART@BRANCH: `bough {cmd} {0} {1} orders.0` or `bough {cmd} orders.0@{0} orders.0@{1}`",
            names[0], names[1]
        )));
    };
    Ok((p, names))
}

/// `bough diff`; returns the exit code (with `--exit-code`, 1 when there are differences).
pub fn diff(ctx: &Ctx, mut a: DiffArgs) -> CliResult<u8> {
    let (p, [from, to]) = two_branches("diff", [("A", &a.a), ("B", &a.b)], a.partition.as_deref())?;
    (a.a, a.b) = (from, to);
    let store = ctx.open_read_only()?;
    let part = ctx::partition(&store, p.table.as_str(), p.partition, false)?;
    ctx::branch(&part, &a.a)?;
    ctx::branch(&part, &a.b)?;
    let entries = part.diff(&a.a, &a.b)?;
    let (mut added, mut removed, mut changed) = (0u64, 0u64, 0u64);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let w = |r: std::io::Result<()>| r.map_err(|e| CliError::io(format!("stdout: {e}")));
    let limit = a.limit.unwrap_or(usize::MAX);
    for (i, e) in entries.iter().enumerate() {
        let show = |v: &[u8]| output::show(v, a.hex);
        match &e.change {
            DiffChange::Added(_) => added += 1,
            DiffChange::Removed(_) => removed += 1,
            DiffChange::Changed { .. } => changed += 1,
        }
        if a.stat || i >= limit {
            continue;
        }
        if ctx.json {
            let mut m = Map::new();
            output::put_bytes(&mut m, "key", &e.key, a.hex);
            match &e.change {
                DiffChange::Added(v) => {
                    m.insert("change".into(), json!("added"));
                    if !a.keys_only {
                        output::put_bytes(&mut m, "value", &v.value, a.hex);
                    }
                }
                DiffChange::Removed(v) => {
                    m.insert("change".into(), json!("removed"));
                    if !a.keys_only {
                        output::put_bytes(&mut m, "value", &v.value, a.hex);
                    }
                }
                DiffChange::Changed { old, new } => {
                    m.insert("change".into(), json!("changed"));
                    if !a.keys_only {
                        output::put_bytes(&mut m, "old", &old.value, a.hex);
                        output::put_bytes(&mut m, "new", &new.value, a.hex);
                    }
                }
            }
            w(writeln!(out, "{}", Json::Object(m)))?;
            continue;
        }
        let key = show(&e.key);
        let line = match (&e.change, a.keys_only) {
            (DiffChange::Added(_), true) => format!("+ {key}"),
            (DiffChange::Removed(_), true) => format!("- {key}"),
            (DiffChange::Changed { .. }, true) => format!("~ {key}"),
            (DiffChange::Added(v), false) => format!("+ {key}\t{}", show(&v.value)),
            (DiffChange::Removed(v), false) => format!("- {key}\t{}", show(&v.value)),
            (DiffChange::Changed { old, new }, false) => {
                format!("~ {key}\t{} -> {}", show(&old.value), show(&new.value))
            }
        };
        w(writeln!(out, "{line}"))?;
    }
    if !a.stat && !ctx.json && entries.len() > limit {
        w(writeln!(out, "… and {} more", entries.len() - limit))?;
    }
    if a.stat {
        if ctx.json {
            w(writeln!(
                out,
                "{}",
                json!({"from": a.a, "to": a.b, "added": added, "removed": removed, "changed": changed})
            ))?;
        } else {
            w(writeln!(
                out,
                "{p}: {}..{}: {added} added, {removed} removed, {changed} changed",
                a.a, a.b
            ))?;
        }
    }
    w(out.flush())?;
    Ok(if a.exit_code && !entries.is_empty() {
        code::FAILURE
    } else {
        code::OK
    })
}

/// `bough merge`; returns the exit code (7 when conflicts stopped it).
pub fn merge(ctx: &Ctx, mut a: MergeArgs) -> CliResult<u8> {
    let (p, [source, target]) = two_branches(
        "merge",
        [("SOURCE", &a.source), ("TARGET", &a.target)],
        a.partition.as_deref(),
    )?;
    (a.source, a.target) = (source, target);
    if a.source == a.target {
        return Err(CliError::usage("SOURCE and TARGET are the same branch"));
    }
    let store = ctx.open(false)?;
    let part = ctx::partition(&store, p.table.as_str(), p.partition, false)?;
    let src = ctx::branch(&part, &a.source)?;
    let tgt = ctx::branch(&part, &a.target)?;
    let policy = match a.policy {
        PolicyArg::Fail => ConflictPolicy::Fail,
        PolicyArg::Ours => ConflictPolicy::Ours,
        PolicyArg::Theirs => ConflictPolicy::Theirs,
        PolicyArg::Newest => ConflictPolicy::NewestTimestamp,
    };
    let report = part.merge(
        &a.source,
        &a.target,
        MergeOptions {
            policy,
            dry_run: a.dry_run,
            fast_forward: !a.no_ff,
            count_fast_forward: a.count,
        },
    )?;
    let counted = !report.fast_forward || a.count;
    let value = |b: &Branch, k: &[u8]| b.get_blocking(k).ok().flatten();
    // A side that deleted the key: its delete's timestamp.
    let deleted = |e: &Option<bough_tree::page::leaf::Entry>| {
        e.as_ref().filter(|e| e.is_tombstone()).map(|e| e.timestamp)
    };
    type Side = (Option<bough::Value>, Option<u64>);
    let conflicts: Vec<(Vec<u8>, Side, Side)> = report
        .conflicts
        .iter()
        .map(|c| {
            (
                c.key.clone(),
                (value(&tgt, &c.key), deleted(&c.ours)),
                (value(&src, &c.key), deleted(&c.theirs)),
            )
        })
        .collect();
    store.close()?;
    let stopped = !report.conflicts.is_empty() && !report.committed;
    if ctx.json {
        // A fast-forward not asked to count reports no count, rather than a 0.
        let applied_json = if counted {
            json!(report.applied)
        } else {
            Json::Null
        };
        let list: Vec<Json> = conflicts
            .iter()
            .map(|(k, ours, theirs)| {
                let mut m = Map::new();
                output::put_bytes(&mut m, "key", k, a.hex);
                for (name, (v, deleted_at)) in [("ours", ours), ("theirs", theirs)] {
                    let mut side = Map::new();
                    match (v, deleted_at) {
                        (Some(v), _) => {
                            output::put_bytes(&mut side, "value", &v.value, a.hex);
                            side.insert("timestamp".into(), json!(v.timestamp));
                            m.insert(name.into(), Json::Object(side));
                        }
                        (None, Some(ts)) => {
                            side.insert("deleted".into(), json!(true));
                            side.insert("timestamp".into(), json!(ts));
                            m.insert(name.into(), Json::Object(side));
                        }
                        (None, None) => {
                            m.insert(name.into(), Json::Null);
                        }
                    }
                }
                Json::Object(m)
            })
            .collect();
        output::print_json(&json!({
            "source": a.source, "target": a.target, "partition": p.to_string(),
            "dry_run": a.dry_run, "fast_forward": report.fast_forward,
            "applied": applied_json, "resolved": report.resolved,
            "committed": report.committed, "conflicts": list,
        }))?;
    } else {
        let how = if report.fast_forward {
            "fast-forward by reference, no data copied".to_string()
        } else {
            "three-way".to_string()
        };
        let verb = if a.dry_run {
            "would merge"
        } else if report.committed {
            "merged"
        } else {
            "did not merge"
        };
        let policy = format!("{:?}", a.policy).to_lowercase();
        let resolved = if report.resolved > 0 {
            format!(
                ", {} settled by --policy {policy}",
                plural(report.resolved as u64, "conflict", "conflicts")
            )
        } else {
            String::new()
        };
        let applied = if a.dry_run || !report.committed {
            "to apply"
        } else {
            "applied"
        };
        let keys = if counted {
            format!("{} {applied}", plural(report.applied as u64, "key", "keys"))
        } else {
            "keys not counted (--count counts them)".to_string()
        };
        println!(
            "{verb} {p}@{} into {}: {how}; {keys}{resolved}",
            a.source, a.target,
        );
        if !conflicts.is_empty() {
            println!(
                "{}:",
                plural(conflicts.len() as u64, "conflict", "conflicts")
            );
            let side = |(v, deleted_at): &Side| match (v, deleted_at) {
                (Some(v), _) => format!("{} (ts {})", output::show(&v.value, a.hex), v.timestamp),
                (None, Some(ts)) => format!("(deleted, ts {ts})"),
                (None, None) => "(deleted)".into(),
            };
            for (k, ours, theirs) in &conflicts {
                println!(
                    "  {}\tours: {}\ttheirs: {}",
                    output::show(k, a.hex),
                    side(ours),
                    side(theirs)
                );
            }
        }
    }
    if stopped {
        let e = CliError::new(
            code::CONFLICT,
            format!(
                "merge of {} into {} stopped: {}; nothing was changed",
                a.source,
                a.target,
                plural(report.conflicts.len() as u64, "conflict", "conflicts")
            ),
        )
        .hint("settle them with --policy ours|theirs|newest, or change the keys on one side and merge again");
        if !ctx.json {
            eprintln!("error: {}", e.message);
            if let Some(h) = &e.hint {
                eprintln!("hint: {h}");
            }
        }
        return Ok(code::CONFLICT);
    }
    Ok(0)
}

/// `bough reset`.
pub fn reset(ctx: &Ctx, a: ResetArgs) -> CliResult<()> {
    let t = resolve(&a.target.target, a.target.branch.as_deref(), &[])?;
    target::branch_name(&a.to, "--to")?;
    if a.to == t.branch {
        return Err(CliError::usage("--to names the branch being reset"));
    }
    let store = ctx.open(false)?;
    let (part, _) = open_target(&store, &t, false)?;
    ctx::branch(&part, &a.to)?;
    part.reset_branch(&t.branch, &a.to)?;
    store.close()?;
    done(
        ctx,
        &format!(
            "reset {} to {}'s current state (by reference)",
            t.label(),
            a.to
        ),
        json!({"branch": t.label(), "to": a.to}),
    )
}

/// `bough rehome`.
pub fn rehome(ctx: &Ctx, a: TargetArgs) -> CliResult<()> {
    let t = resolve(&a.target, a.branch.as_deref(), &[])?;
    let store = ctx.open(false)?;
    let (_, b) = open_target(&store, &t, false)?;
    let r = b.rehome()?;
    store.close()?;
    done(
        ctx,
        &format!(
            "re-homed {}: {} copied from {} of other branches ({})",
            t.label(),
            plural(r.pages_copied, "page", "pages"),
            plural(r.files_rehomed as u64, "file", "files"),
            output::size(r.bytes_copied)
        ),
        json!({"branch": t.label(), "files_rehomed": r.files_rehomed, "pages_copied": r.pages_copied, "bytes_copied": r.bytes_copied}),
    )
}
