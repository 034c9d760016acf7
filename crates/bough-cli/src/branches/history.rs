//! `bough history`: list a branch's history points, branch from or restore a branch to
//! any instant inside the store's history window (`history_window_ms` in the config).

use super::*;

/// When, for a point-in-time command: an absolute store-clock time or a time ago.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct When {
    /// The instant, in ms since the epoch (store clock).
    #[arg(long, value_name = "MS")]
    at: Option<u64>,
    /// The instant as a time before now (`90s`, `30m`, `1h`, `7d`, or milliseconds).
    #[arg(long, value_name = "DURATION")]
    ago: Option<String>,
}

impl When {
    /// The instant in ms since the epoch, by the store's clock.
    fn instant(&self, store: &Store) -> CliResult<u64> {
        match (&self.at, &self.ago) {
            (Some(at), _) => Ok(*at),
            (None, Some(ago)) => {
                let ms = super::policy::duration_ms(ago)?;
                Ok(store.now_ms().saturating_sub(ms))
            }
            (None, None) => Err(CliError::usage("give --at MS or --ago DURATION")),
        }
    }
}

/// `bough history ...`.
#[derive(Debug, Subcommand)]
pub enum HistoryCmd {
    /// List the history points of a branch (the states point-in-time reads start from).
    #[command(after_help = "Example:\n  bough history list orders.0@main")]
    List(TargetArgs),
    /// Create branch NAME as the branch was at an instant (no archive needed).
    #[command(
        after_help = "Examples:\n  bough history branch orders.0@main before-import --ago 10m\n  bough history branch orders.0@feature at-noon --at 1767268800000"
    )]
    Branch {
        #[command(flatten)]
        target: TargetArgs,
        /// The new branch.
        name: String,
        #[command(flatten)]
        when: When,
    },
    /// Put a branch back to its state at an instant; the state it replaces is kept as a
    /// branch.
    #[command(
        after_help = "Example:\n  bough history restore orders.0@main --ago 5m --backup main-before"
    )]
    Restore {
        #[command(flatten)]
        target: TargetArgs,
        #[command(flatten)]
        when: When,
        /// Name of the branch that keeps the replaced state (default: <branch>-backup-<now>).
        #[arg(long, value_name = "NAME")]
        backup: Option<String>,
    },
}

/// Runs `bough history ...`.
pub fn history(ctx: &Ctx, cmd: HistoryCmd) -> CliResult<()> {
    match cmd {
        HistoryCmd::List(a) => {
            let t = resolve(&a.target, a.branch.as_deref(), &[])?;
            let store = ctx.open_read_only()?;
            let part = ctx::partition(&store, &t.table, t.partition, false)?;
            let points = part.history_points(&t.branch)?;
            if points.is_empty() && !part.branches()?.contains(&t.branch) {
                return Err(ctx::missing_branch(&part, &t.branch));
            }
            if ctx.json {
                let list: Vec<Json> = points
                    .iter()
                    .map(|p| json!({"name": p.to_string(), "term": p.term, "stamp_ms": p.stamp}))
                    .collect();
                return output::print_json(&json!({"branch": t.label(), "history_points": list}));
            }
            let rows: Vec<Vec<String>> = points
                .iter()
                .map(|p| vec![p.to_string(), p.term.to_string(), output::time(p.stamp)])
                .collect();
            print!("{}", output::table(&["POINT", "TERM", "AT"], &rows));
            Ok(())
        }
        HistoryCmd::Branch { target, name, when } => {
            let t = resolve(&target.target, target.branch.as_deref(), &[])?;
            target::branch_name(&name, "NAME")?;
            let store = ctx.open(false)?;
            let part = ctx::partition(&store, &t.table, t.partition, false)?;
            let at = when.instant(&store)?;
            let b = part.branch_at(&name, &t.branch, at).map_err(window_hint)?;
            let label = b.label().to_string();
            store.close()?;
            done(
                ctx,
                &format!(
                    "created {label} as {} was at {}",
                    t.branch,
                    output::time(at)
                ),
                json!({"created": label, "from": t.branch, "at_ms": at}),
            )
        }
        HistoryCmd::Restore {
            target,
            when,
            backup,
        } => {
            let t = resolve(&target.target, target.branch.as_deref(), &[])?;
            let backup =
                backup.unwrap_or_else(|| format!("{}-backup-{}", t.branch, output::now_ms()));
            target::branch_name(&backup, "--backup")?;
            let store = ctx.open(false)?;
            let part = ctx::partition(&store, &t.table, t.partition, false)?;
            let at = when.instant(&store)?;
            ctx::branch(&part, &t.branch)?
                .restore_at(at, &backup)
                .map_err(window_hint)?;
            store.close()?;
            done(
                ctx,
                &format!(
                    "restored {} to its state at {}; the replaced state is branch {backup}",
                    t.label(),
                    output::time(at)
                ),
                json!({"branch": t.label(), "at_ms": at, "backup": backup}),
            )
        }
    }
}

/// A refused instant, with what would let it be read.
fn window_hint(e: bough::Error) -> CliError {
    let not_kept = e.kind() == bough::ErrorKind::NotFound && e.to_string().contains("is kept");
    let err = CliError::from(e);
    if not_kept {
        err.hint(
            "point-in-time reads need `history_window_ms` in the store's config (--config), set \
             on every process that writes: states written without it have no history points",
        )
    } else {
        err
    }
}
