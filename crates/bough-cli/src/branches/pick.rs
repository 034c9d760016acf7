//! `bough rebase`, `bough cherry-pick` and `bough revert`: changes replayed from the same
//! diff and merge machinery as `bough merge`, one commit on the branch that changes.

use bough::{Conflict, MergeReport, PickOptions, StateRef};
use bough_tree::page::leaf::{Entry, ValueLoc};

use super::merge::{PolicyArg, conflict_stop};
use super::*;

fn policy(p: PolicyArg) -> ConflictPolicy {
    match p {
        PolicyArg::Fail => ConflictPolicy::Fail,
        PolicyArg::Ours => ConflictPolicy::Ours,
        PolicyArg::Theirs => ConflictPolicy::Theirs,
        PolicyArg::Newest => ConflictPolicy::NewestTimestamp,
    }
}

/// `bough rebase`.
#[derive(Debug, Args)]
pub struct RebaseArgs {
    /// The branch whose changes are replayed (it moves): BRANCH, or TABLE.PART@BRANCH.
    #[arg(value_name = "BRANCH")]
    branch: String,
    /// The branch they are replayed on: BRANCH, or TABLE.PART@BRANCH.
    #[arg(value_name = "ONTO")]
    onto: String,
    /// TABLE.PART (unless BRANCH or ONTO names it).
    #[arg(value_name = "TABLE.PART")]
    partition: Option<String>,
    /// Keys both changed differently: ours = ONTO's version, theirs = BRANCH's own change.
    #[arg(long, value_enum, default_value_t = PolicyArg::Fail)]
    policy: PolicyArg,
    /// Report what would happen; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Replay key by key even when BRANCH has no changes of its own (it would take ONTO's
    /// state by reference).
    #[arg(long)]
    no_ff: bool,
    /// Keys and values of conflicts in hex.
    #[arg(long, short = 'x')]
    hex: bool,
}

/// `bough rebase`; returns the exit code (7 when conflicts stopped it).
pub fn rebase(ctx: &Ctx, a: RebaseArgs) -> CliResult<u8> {
    let (p, [branch, onto]) = two_branches(
        "rebase",
        [("BRANCH", &a.branch), ("ONTO", &a.onto)],
        a.partition.as_deref(),
    )?;
    if branch == onto {
        return Err(CliError::usage("BRANCH and ONTO are the same branch"));
    }
    let store = ctx.open(false)?;
    let part = ctx::partition(&store, p.table.as_str(), p.partition, false)?;
    ctx::branch(&part, &branch)?;
    ctx::branch(&part, &onto)?;
    let report = part.rebase(
        &branch,
        &onto,
        MergeOptions {
            policy: policy(a.policy),
            dry_run: a.dry_run,
            fast_forward: !a.no_ff,
            count_fast_forward: true,
        },
    )?;
    store.close()?;
    let how = if report.fast_forward {
        format!("{branch} had no changes of its own: it takes {onto}'s state by reference")
    } else {
        "replayed key by key".to_string()
    };
    let what = Outcome {
        cmd: "rebase",
        what: format!("{p}@{branch} onto {onto}"),
        how,
        dry_run: a.dry_run,
        hex: a.hex,
        policy: a.policy,
        json: json!({"branch": branch, "onto": onto, "partition": p.to_string()}),
    };
    what.finish(ctx, &report)
}

/// `bough cherry-pick` and `bough revert`.
#[derive(Debug, Args)]
pub struct PickArgs {
    /// FROM..TO: the changes from state FROM to state TO. A state is BRANCH (its current
    /// state), BRANCH:VERSION (a version an archive or a merge base retains), or
    /// archive:NAME (an archive's file name, manifest_<branch>_<term>_<ts>, or
    /// archive:BRANCH:TIMESTAMP).
    #[arg(value_name = "FROM..TO")]
    range: String,
    #[command(flatten)]
    target: TargetArgs,
    /// Keys the branch changed otherwise: ours = the branch's entry, theirs = the range's.
    #[arg(long, value_enum, default_value_t = PolicyArg::Fail)]
    policy: PolicyArg,
    /// Report what would happen; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Keys and values of conflicts in hex.
    #[arg(long, short = 'x')]
    hex: bool,
}

/// One end of a range on the command line.
fn state_ref(part: &PartitionHandle, arg: &str, what: &str) -> CliResult<StateRef> {
    if let Some(rest) = arg.strip_prefix("archive:") {
        let (branch, archive) = match rest.split_once(':') {
            Some((b, ts)) => (b.to_string(), ts.to_string()),
            None => {
                match ArchiveName::parse(rest) {
                    Ok(a) => (a.branch.to_string(), rest.to_string()),
                    Err(_) => {
                        return Err(CliError::usage(format!(
                        "{what} `{}` names no archive",
                        target::shown(arg)
                    ))
                    .hint("write archive:manifest_<branch>_<term>_<ts> or archive:BRANCH:TIMESTAMP"));
                    }
                }
            }
        };
        target::branch_name(&branch, what)?;
        let b = ctx::branch(part, &branch)?;
        return Ok(StateRef::Archive(find_archive(&b, &archive)?));
    }
    match arg.split_once(':') {
        Some((branch, v)) => {
            target::branch_name(branch, what)?;
            let version = v.parse::<u64>().map_err(|_| {
                CliError::usage(format!(
                    "{what} `{}`: the version after `:` is not a number",
                    target::shown(arg)
                ))
            })?;
            ctx::branch(part, branch)?;
            Ok(StateRef::version(branch, version))
        }
        None => {
            target::branch_name(arg, what)?;
            ctx::branch(part, arg)?;
            Ok(StateRef::branch(arg))
        }
    }
}

/// `bough cherry-pick` (`revert` false) or `bough revert`; returns the exit code.
pub fn pick(ctx: &Ctx, a: PickArgs, revert: bool) -> CliResult<u8> {
    let cmd = if revert { "revert" } else { "cherry-pick" };
    let Some((from, to)) = a.range.split_once("..") else {
        return Err(CliError::usage(format!(
            "{cmd}: `{}` is not a range FROM..TO",
            target::shown(&a.range)
        ))
        .hint("e.g. feature:12..feature, or archive:feature:1714564800000..feature"));
    };
    let t = resolve(&a.target.target, a.target.branch.as_deref(), &[])?;
    let store = ctx.open(false)?;
    let (part, _) = open_target(&store, &t, false)?;
    let (from, to) = (state_ref(&part, from, "FROM")?, state_ref(&part, to, "TO")?);
    let opts = PickOptions {
        policy: policy(a.policy),
        dry_run: a.dry_run,
    };
    let report = if revert {
        part.revert(&from, &to, &t.branch, opts)?
    } else {
        part.cherry_pick(&from, &to, &t.branch, opts)?
    };
    store.close()?;
    let (what, how) = if revert {
        (
            format!("{from}..{to} on {}", t.label()),
            "its inverse applied key by key".to_string(),
        )
    } else {
        (
            format!("{from}..{to} onto {}", t.label()),
            "applied key by key".to_string(),
        )
    };
    let out = Outcome {
        cmd,
        what,
        how,
        dry_run: a.dry_run,
        hex: a.hex,
        policy: a.policy,
        json: json!({"from": from.to_string(), "to": to.to_string(), "branch": t.label()}),
    };
    out.finish(ctx, &report)
}

/// What a rebase, cherry-pick or revert prints.
struct Outcome {
    cmd: &'static str,
    what: String,
    how: String,
    dry_run: bool,
    hex: bool,
    policy: PolicyArg,
    json: Json,
}

/// A side of a conflict for output: the value (inline ones), its length, its timestamp;
/// a delete as `deleted`.
fn side_json(e: &Option<Entry>, hex: bool) -> Json {
    let Some(e) = e else { return Json::Null };
    let mut m = Map::new();
    match &e.value {
        ValueLoc::Inline(v) => output::put_bytes(&mut m, "value", v, hex),
        ValueLoc::Overflow { len, .. } => {
            m.insert("value_len".into(), json!(len));
        }
        ValueLoc::Tombstone => {
            m.insert("deleted".into(), json!(true));
        }
    }
    m.insert("timestamp".into(), json!(e.timestamp));
    Json::Object(m)
}

fn side_text(e: &Option<Entry>, hex: bool) -> String {
    match e {
        None => "(absent)".into(),
        Some(e) => match &e.value {
            ValueLoc::Inline(v) => format!("{} (ts {})", output::show(v, hex), e.timestamp),
            ValueLoc::Overflow { len, .. } => format!("({len} bytes, ts {})", e.timestamp),
            ValueLoc::Tombstone => format!("(deleted, ts {})", e.timestamp),
        },
    }
}

impl Outcome {
    fn finish(self, ctx: &Ctx, r: &MergeReport) -> CliResult<u8> {
        let stopped = !r.conflicts.is_empty() && !r.committed;
        if ctx.json {
            let conflicts: Vec<Json> = r
                .conflicts
                .iter()
                .map(|c: &Conflict| {
                    let mut m = Map::new();
                    output::put_bytes(&mut m, "key", &c.key, self.hex);
                    m.insert("ours".into(), side_json(&c.ours, self.hex));
                    m.insert("theirs".into(), side_json(&c.theirs, self.hex));
                    Json::Object(m)
                })
                .collect();
            let mut out = match self.json {
                Json::Object(m) => m,
                _ => Map::new(),
            };
            let base = r.base.as_ref().map(|b| {
                json!({"branch": b.branch.to_string(), "version": b.version,
                       "holder": b.holder.to_string()})
            });
            for (k, v) in [
                ("command", json!(self.cmd)),
                ("dry_run", json!(self.dry_run)),
                ("fast_forward", json!(r.fast_forward)),
                ("applied", json!(r.applied)),
                ("resolved", json!(r.resolved)),
                ("committed", json!(r.committed)),
                ("merge_base", base.unwrap_or(Json::Null)),
                ("conflicts", Json::Array(conflicts)),
            ] {
                out.insert(k.into(), v);
            }
            output::print_json(&Json::Object(out))?;
        } else {
            let verb = if self.dry_run {
                format!("would {}", self.cmd)
            } else if r.committed {
                format!("{} done:", self.cmd)
            } else if stopped {
                format!("did not {}", self.cmd)
            } else {
                format!("{}: nothing to change for", self.cmd)
            };
            let policy = format!("{:?}", self.policy).to_lowercase();
            let resolved = if r.resolved > 0 {
                format!(
                    ", {} settled by --policy {policy}",
                    plural(r.resolved as u64, "conflict", "conflicts")
                )
            } else {
                String::new()
            };
            let applied = if self.dry_run || !r.committed {
                "to apply"
            } else {
                "applied"
            };
            println!(
                "{verb} {}: {}; {} {applied}{resolved}",
                self.what,
                self.how,
                plural(r.applied as u64, "key", "keys")
            );
            if !r.conflicts.is_empty() {
                println!(
                    "{}:",
                    plural(r.conflicts.len() as u64, "conflict", "conflicts")
                );
                for c in &r.conflicts {
                    println!(
                        "  {}\tours: {}\ttheirs: {}",
                        output::show(&c.key, self.hex),
                        side_text(&c.ours, self.hex),
                        side_text(&c.theirs, self.hex)
                    );
                }
            }
        }
        if stopped {
            return Ok(conflict_stop(
                ctx,
                &format!("{} of {}", self.cmd, self.what),
                r.conflicts.len(),
                "settle them with --policy ours|theirs|newest",
            ));
        }
        Ok(0)
    }
}
