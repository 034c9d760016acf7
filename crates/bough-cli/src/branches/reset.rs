//! `bough reset` (a branch to another's state) and `bough rehome` (copy borrowed pages into
//! the branch's own files).

use super::*;

/// `bough reset`.
#[derive(Debug, Args)]
pub struct ResetArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// The branch whose current state the target takes.
    #[arg(long, value_name = "BRANCH")]
    to: String,
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
    ctx::state_view(&part, &a.to)?;
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
#[derive(Debug, Args)]
pub struct RehomeArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Keep the branch's merge bases: every merge it could make stays possible, and the
    /// states they pin stay on storage (reported as their cost).
    #[arg(long)]
    keep_merge_bases: bool,
}

/// `bough rehome`.
pub fn rehome(ctx: &Ctx, a: RehomeArgs) -> CliResult<()> {
    let t = resolve(&a.target.target, a.target.branch.as_deref(), &[])?;
    let store = ctx.open(false)?;
    let (_, b) = open_target(&store, &t, false)?;
    let r = b.rehome_with(bough::RehomeOptions {
        keep_merge_bases: a.keep_merge_bases,
    })?;
    store.close()?;
    let lost: Vec<String> = r
        .merges_lost
        .iter()
        .map(|(x, y)| format!("{x} and {y}"))
        .collect();
    let mut text = format!(
        "re-homed {}: {} copied from {} of other branches ({})",
        t.label(),
        plural(r.pages_copied, "page", "pages"),
        plural(r.files_rehomed as u64, "file", "files"),
        output::size(r.bytes_copied)
    );
    if a.keep_merge_bases {
        text.push_str(&format!(
            "\nkept {}: they pin {} of other branches' pages",
            plural(r.merge_bases_kept as u64, "merge base", "merge bases"),
            output::size(r.kept_bases_bytes)
        ));
    } else if !lost.is_empty() {
        let more = if r.merges_lost_unlisted > 0 {
            format!(" and {} more pairs", r.merges_lost_unlisted)
        } else {
            String::new()
        };
        text.push_str(&format!(
            "\nthese branches can no longer merge (the state they last shared is released): \
             {}{more}\n(`bough rehome --keep-merge-bases` keeps those merges possible)",
            lost.join(", ")
        ));
    }
    let lost_json: Vec<Json> = r
        .merges_lost
        .iter()
        .map(|(x, y)| json!([x.to_string(), y.to_string()]))
        .collect();
    done(
        ctx,
        &text,
        json!({"branch": t.label(), "files_rehomed": r.files_rehomed, "pages_copied": r.pages_copied,
               "bytes_copied": r.bytes_copied, "merges_lost": lost_json,
               "merges_lost_unlisted": r.merges_lost_unlisted,
               "merge_bases_kept": r.merge_bases_kept, "kept_bases_bytes": r.kept_bases_bytes}),
    )
}
