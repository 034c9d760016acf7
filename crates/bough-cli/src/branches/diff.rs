//! `bough diff`: the changes between two branches (or an archive and a branch).

use super::*;

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

/// The two branches and the partition of `diff` and `merge`: `A B TABLE.PART`, or with
/// `TABLE.PART@BRANCH` for A or B (then TABLE.PART may be left out; every partition named
/// must be the same one).
pub(crate) fn two_branches(
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
    // Either side may be a tag.
    ctx::state_view(&part, &a.a)?;
    ctx::state_view(&part, &a.b)?;
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
