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
