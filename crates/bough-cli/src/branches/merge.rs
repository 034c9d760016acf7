//! `bough merge`: merge one branch into another under a conflict policy.

use super::*;

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
    /// Merge on every partition of TABLE, all or nothing: a dry run on every partition
    /// first, nothing changed if any stops on conflicts; recorded in the store's branch
    /// registry, so a crash midway is finished at the next open.
    #[arg(long, value_name = "TABLE", conflicts_with = "partition")]
    all_partitions: Option<String>,
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

/// `bough merge`; returns the exit code (7 when conflicts stopped it).
pub fn merge(ctx: &Ctx, mut a: MergeArgs) -> CliResult<u8> {
    if let Some(table) = a.all_partitions.clone() {
        return merge_table(ctx, &a, &table);
    }
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
    // The source may be a tag (a state, read, never written).
    let src = ctx::state_view(&part, &a.source)?;
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
    let source_value = |v: &bough::ReadView, k: &[u8]| v.get(k).ok().flatten();
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
                (source_value(&src, &c.key), deleted(&c.theirs)),
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
        return Ok(conflict_stop(
            ctx,
            &format!("merge of {} into {}", a.source, a.target),
            report.conflicts.len(),
            "settle them with --policy ours|theirs|newest, or change the keys on one side and merge again",
        ));
    }
    Ok(0)
}

fn policy_of(p: PolicyArg) -> ConflictPolicy {
    match p {
        PolicyArg::Fail => ConflictPolicy::Fail,
        PolicyArg::Ours => ConflictPolicy::Ours,
        PolicyArg::Theirs => ConflictPolicy::Theirs,
        PolicyArg::Newest => ConflictPolicy::NewestTimestamp,
    }
}

/// `bough merge --all-partitions TABLE SOURCE TARGET` (`Table::merge`).
fn merge_table(ctx: &Ctx, a: &MergeArgs, table: &str) -> CliResult<u8> {
    target::branch_name(&a.source, "SOURCE")?;
    target::branch_name(&a.target, "TARGET")?;
    if a.source == a.target {
        return Err(CliError::usage("SOURCE and TARGET are the same branch"));
    }
    if a.no_ff || a.count {
        return Err(CliError::usage(
            "--no-ff and --count merge one partition (drop --all-partitions)",
        ));
    }
    let policy = policy_of(a.policy);
    let store = ctx.open(false)?;
    let t = store.table(table)?;
    if t.partitions()?.is_empty() {
        return Err(CliError::not_found(format!(
            "table `{table}` has no partitions"
        )));
    }
    let reports = if a.dry_run {
        let opts = MergeOptions {
            policy,
            dry_run: true,
            ..MergeOptions::default()
        };
        let mut out = Vec::new();
        for p in t.partitions()? {
            out.push((p, t.partition(p)?.merge(&a.source, &a.target, opts)?));
        }
        out
    } else {
        t.merge(&a.source, &a.target, policy)?
    };
    store.close()?;
    let conflicts: usize = reports.iter().map(|(_, r)| r.conflicts.len()).sum();
    let stopped = reports.iter().any(|(_, r)| !r.committed) && conflicts > 0;
    if ctx.json {
        let parts: Vec<Json> = reports
            .iter()
            .map(|(p, r)| {
                json!({"partition": p, "fast_forward": r.fast_forward, "applied": r.applied,
                       "resolved": r.resolved, "committed": r.committed,
                       "conflicts": r.conflicts.len()})
            })
            .collect();
        output::print_json(&json!({
            "source": a.source, "target": a.target, "table": table, "dry_run": a.dry_run,
            "partitions": parts,
        }))?;
    } else {
        let verb = if a.dry_run {
            "would merge"
        } else if stopped {
            "did not merge"
        } else {
            "merged"
        };
        println!(
            "{verb} {} into {} on {} of table {table}",
            a.source,
            a.target,
            plural(reports.len() as u64, "partition", "partitions")
        );
        for (p, r) in &reports {
            println!(
                "  {table}.{p}: {}; {} {}",
                if r.fast_forward {
                    "fast-forward"
                } else {
                    "three-way"
                },
                plural(r.applied as u64, "key", "keys"),
                if r.conflicts.is_empty() {
                    String::new()
                } else {
                    format!("({} conflicts)", r.conflicts.len())
                }
            );
        }
    }
    if stopped {
        return Ok(conflict_stop(
            ctx,
            &format!("merge of {} into {} on table {table}", a.source, a.target),
            conflicts,
            "settle them with --policy ours|theirs|newest (`bough merge TABLE.PART@SOURCE TARGET` lists them per partition)",
        ));
    }
    Ok(0)
}

/// Reports a merge-like command that stopped on conflicts (on stderr unless `--json`, whose
/// report already lists them) and returns its exit code.
pub(super) fn conflict_stop(ctx: &Ctx, what: &str, conflicts: usize, hint: &str) -> u8 {
    if !ctx.json {
        eprintln!(
            "error: {what} stopped: {}; nothing was changed",
            plural(conflicts as u64, "conflict", "conflicts")
        );
        eprintln!("hint: {hint}");
    }
    code::CONFLICT
}
