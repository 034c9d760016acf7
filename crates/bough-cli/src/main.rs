//! `bough`: the command-line tool of the Bough storage engine.
//!
//! Subcommands read and write keys (`put`, `get`, `del`, `scan`, `load`), manage branches
//! (`branch`, `archive`, `diff`, `merge`, `reset`, `rehome`, `gc`), inspect and check the
//! files (`inspect`, `verify`), move data between stores (`export`, `import`) and run the
//! `demo`. Output is quiet and readable by default, `--json` gives machine-readable output,
//! and every error says what was wrong and how to fix it, with the exit codes listed in
//! [`error::EXIT_CODES`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

mod branches;
mod ctx;
mod data;
mod demo;
mod error;
mod export;
mod inspect;
mod output;
mod repair;
mod space;
mod target;
mod verify;
mod walk;

use ctx::Ctx;
use error::{CliError, CliResult, EXIT_CODES};

const ABOUT: &str = "Bough: an embedded key-value store with git-like branches";

const LONG_ABOUT: &str = "\
Bough: an embedded key-value store with git-like branches.

A store is a directory of partitions (TABLE.PARTITION, e.g. orders.0); each partition has
branches (main always exists). Commands name what they work on as TABLE.PART[@BRANCH];
`--branch` names the branch too, and naming two different branches is refused.

Examples:
  bough demo
  bough put orders.0 order-1 pending
  bough get orders.0 order-1
  bough branch create what-if orders.0 --from main
  bough put orders.0@what-if order-1 cancelled
  bough diff orders.0@main orders.0@what-if
  bough merge what-if main orders.0 --policy theirs
  bough branch tree orders.0
  bough gc --dry-run
  bough verify";

#[derive(Debug, Parser)]
#[command(
    name = "bough",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = EXIT_CODES,
    propagate_version = true,
    max_term_width = 100
)]
struct Cli {
    /// Store directory [default: ./bough-data, in the working directory; a write creates it].
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "BOUGH_STORE",
        value_name = "DIR"
    )]
    store: Option<PathBuf>,
    /// Store options as TOML (the keys of `bough::Options`); --store and --backend override it.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "BOUGH_CONFIG",
        value_name = "FILE"
    )]
    config: Option<PathBuf>,
    /// Local I/O backend.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        value_enum,
        value_name = "BACKEND"
    )]
    backend: Option<BackendArg>,
    /// Machine-readable output: one JSON document (JSON lines for scan and diff).
    #[arg(long, global = true, help_heading = "Global options")]
    json: bool,
    /// No progress line on stderr.
    #[arg(long, global = true, help_heading = "Global options")]
    no_progress: bool,
    /// Commands that write wait up to this long for another process that has the store open
    /// for writing (default 10; 0 fails at once). Read-only commands never wait: they read
    /// beside a writer.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        value_name = "SECONDS"
    )]
    wait: Option<f64>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum BackendArg {
    /// io_uring when the kernel allows it, pread otherwise.
    Auto,
    /// io_uring (fails where it is unavailable).
    #[value(name = "io_uring")]
    IoUring,
    /// Positional read/write system calls.
    Pread,
}

/// A `TABLE.PART[@BRANCH]` target and `--branch`.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// TABLE.PARTITION[@BRANCH], e.g. orders.0 or orders.0@feature (branch: main).
    #[arg(value_name = "TABLE.PART[@BRANCH]")]
    pub target: String,
    /// The branch (the same as writing @BRANCH; naming two different branches is refused).
    #[arg(long, short = 'b', value_name = "BRANCH")]
    pub branch: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Write one key.
    #[command(
        after_help = "Examples:\n  bough put orders.0 order-1 pending\n  bough put orders.0@feature order-1 cancelled --ttl 60000\n  bough put --hex orders.0 00ff 6869\n  bough put orders.0 blob --value-file picture.png"
    )]
    Put(data::PutArgs),
    /// Read one key (exit code 3 when it is absent).
    #[command(
        after_help = "Examples:\n  bough get orders.0 order-1\n  bough get orders.0@feature order-1 --json\n  bough get orders.0 blob --raw > picture.png"
    )]
    Get(data::GetArgs),
    /// Delete one key.
    #[command(after_help = "Example:\n  bough del orders.0 order-1")]
    Del(data::DelArgs),
    /// List keys and values in key order: KEY<TAB>VALUE lines (escaped), or JSON lines.
    #[command(
        after_help = "Examples:\n  bough scan orders.0\n  bough scan orders.0@feature --from order-1 --to order-2 --limit 10\n  bough scan orders.0 --keys-only --hex\n  bough scan orders.0 --json > dump.jsonl"
    )]
    Scan(data::ScanArgs),
    /// Bulk-load KEY<TAB>VALUE lines or JSON lines from a file or stdin.
    #[command(
        after_help = "Input: KEY<TAB>VALUE lines (with the escapes scan prints: \\\\ \\t \\n \\r \\xNN),\nor JSON lines {\"key\": .., \"value\": .., \"ttl_ms\": .., \"expire_at\": .., \"timestamp\": ..}\n(key_hex/value_hex for binary; `scan --json` output loads back as is).\n\nAn interrupted load keeps the batches it committed (`bough scan` shows them; loading\nthe whole file again is safe: the later write of a key wins). With --atomic it loads all or\nnothing.\n\nExamples:\n  bough load orders.0 orders.tsv\n  bough load orders.0 orders.tsv --atomic\n  bough scan old.0 --json | bough load orders.0 -"
    )]
    Load(data::LoadArgs),
    /// List the partitions of the store with their branches and sizes.
    Ls,
    /// Create, delete, list, describe and draw branches.
    #[command(subcommand)]
    Branch(branches::BranchCmd),
    /// Archive a branch's state, list archives, restore one.
    #[command(subcommand)]
    Archive(branches::ArchiveCmd),
    /// Branch from or restore a branch to any instant inside the history window.
    #[command(subcommand)]
    History(branches::HistoryCmd),
    /// Tag a branch's state (immutable, kept until deleted), list, read or delete tags.
    #[command(subcommand)]
    Tag(branches::TagCmd),
    /// Delete data files nothing references any more; report why the rest is kept.
    #[command(
        after_help = "Examples:\n  bough gc --dry-run\n  bough gc orders\n  bough gc orders.0 --json"
    )]
    Gc(branches::GcArgs),
    /// Show every key that differs from branch A to branch B.
    #[command(
        after_help = "Output: `+ KEY VALUE` (only in B), `- KEY VALUE` (only in A), `~ KEY OLD -> NEW`.\n\nExamples:\n  bough diff main feature orders.0\n  bough diff orders.0@main orders.0@feature --stat\n  bough diff orders.0@main feature --exit-code"
    )]
    Diff(branches::DiffArgs),
    /// Merge branch SOURCE into branch TARGET (fast-forward or three-way).
    #[command(
        after_help = "Conflicts (a key both sides changed differently) stop the merge with exit code 7\nunless a --policy settles them.\n\nExamples:\n  bough merge feature main orders.0 --dry-run\n  bough merge orders.0@feature orders.0@main --policy newest"
    )]
    Merge(branches::MergeArgs),
    /// Replay a branch's changes since its merge base with ONTO on ONTO's current state.
    #[command(
        after_help = "BRANCH moves (one commit); ONTO becomes their merge base, so merging BRANCH into\nONTO next is a fast-forward. Conflicts (keys both changed differently) stop it with exit\ncode 7 unless a --policy settles them: ours = ONTO's version, theirs = BRANCH's change.\n\nExamples:\n  bough rebase feature main orders.0 --dry-run\n  bough rebase orders.0@feature main --policy theirs"
    )]
    Rebase(branches::RebaseArgs),
    /// Apply the changes between two states (FROM..TO) to a branch, in one commit.
    #[command(
        name = "cherry-pick",
        after_help = "A state is BRANCH, BRANCH:VERSION (retained by an archive or a merge base) or\narchive:NAME. A key applies where the branch still holds FROM's entry; otherwise it\nis a conflict (exit code 7 unless a --policy settles it: ours = the branch, theirs = TO).\n\nExamples:\n  bough cherry-pick feature:12..feature orders.0@main --dry-run\n  bough cherry-pick archive:feature:1714564800000..feature orders.0 --policy theirs"
    )]
    CherryPick(branches::PickArgs),
    /// Undo on a branch the changes between two states (FROM..TO), in one commit.
    #[command(
        after_help = "What TO changed goes back to what FROM held; a key the branch changed since is a\nconflict (exit code 7 unless a --policy settles it: ours = the branch, theirs = FROM).\n\nExamples:\n  bough revert archive:main:1714564800000..main orders.0\n  bough revert main:40..main orders.0@main --dry-run"
    )]
    Revert(branches::PickArgs),
    /// Reset a branch to another branch's current state (by reference, no copy).
    #[command(after_help = "Example:\n  bough reset orders.0@feature --to main")]
    Reset(branches::ResetArgs),
    /// Bring a branch whose manifest is damaged back from its newest intact archive.
    #[command(
        after_help = "Reports exactly what is lost: the key changes since the archive that can still be\nread, and the commits after the damage.\n\nExamples:\n  bough repair orders.0@main\n  bough repair orders.0@main --archive 1714564800000"
    )]
    Repair(repair::RepairArgs),
    /// Copy into a branch's own files every page it borrows from other branches.
    #[command(
        after_help = "Afterwards the branches it was forked from can be deleted and collected. It\nforgets the branch's merge bases and names the merges that makes impossible;\n--keep-merge-bases keeps them (and reports what the states they pin cost).\n\nExamples:\n  bough rehome orders.0@feature\n  bough rehome orders.0@feature --keep-merge-bases"
    )]
    Rehome(branches::RehomeArgs),
    /// Compact now: move live pages out of mostly-garbage files, then GC.
    #[command(
        after_help = "What a long-lived process does on its maintenance tick. A file another branch,\narchive or merge base still uses is left alone (it frees once the sharing ends).\n\nExamples:\n  bough compact\n  bough compact orders.0@main --json"
    )]
    Compact(space::CompactArgs),
    /// Look inside store files.
    #[command(subcommand)]
    Inspect(inspect::InspectCmd),
    /// Check every manifest, archive, key and data page; exit 0 only when clean.
    #[command(after_help = "Examples:\n  bough verify\n  bough verify orders.0 --json")]
    Verify(verify::VerifyArgs),
    /// Write a branch as a versioned, checksummed export stream (docs/format.md).
    #[command(
        after_help = "Examples:\n  bough export orders.0 -o orders.bexp\n  bough export orders.0@feature | bough --store other import orders.0 -"
    )]
    Export(export::ExportArgs),
    /// Load an export stream into a branch, all or nothing.
    #[command(
        after_help = "The stream is written to a staging branch and merged into the target only after\nits trailer checked out, so a cut-short or corrupt stream changes nothing. An entry\nolder than the stored one for its key is superseded (last writer wins) and counted so.\nKEY<TAB>VALUE lines and JSON lines are read by `bough load`.\n\nExample:\n  bough import orders.0 orders.bexp"
    )]
    Import(export::ImportArgs),
    /// Run the demo: load, branch, diverge, diff, merge, archive, delete, collect garbage.
    Demo {
        /// Directory for the demo store (default: a new temporary directory).
        dir: Option<PathBuf>,
    },
    /// Print a shell completion script.
    #[command(after_help = "Example:\n  bough completions bash > /etc/bash_completion.d/bough")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BOUGH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<OsString> = std::env::args_os().collect();
    let cli = match command()
        .try_get_matches_from(&args)
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let ctx = Ctx {
        store: cli.store.clone(),
        config: cli.config.clone(),
        backend: cli.backend.map(|b| match b {
            BackendArg::Auto => bough::Backend::Auto,
            BackendArg::IoUring => bough::Backend::IoUring,
            BackendArg::Pread => bough::Backend::Pread,
        }),
        json: cli.json,
        progress: !cli.no_progress,
        wait: cli.wait,
    };
    match run(&ctx, cli.cmd) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            report(&ctx, &e);
            ExitCode::from(e.code)
        }
    }
}

/// What a subcommand's `--help` says instead of repeating every global option.
const SUBCOMMAND_HELP: &str = "\
{before-help}{about-with-newline}
{usage-heading} {usage}

{all-args}

Global options (--store DIR, --config FILE, --backend, --json, --no-progress) go before or
after the subcommand; `bough --help` describes them.{after-help}";

/// The command line, with the global options listed once: in `bough --help`. Clap copies
/// them into every subcommand (where they are accepted), and hides the copies from the
/// subcommands' help.
fn command() -> clap::Command {
    fn quiet_globals(sc: clap::Command) -> clap::Command {
        sc.mut_args(|a| if a.is_global_set() { a.hide(true) } else { a })
            .help_template(SUBCOMMAND_HELP)
            .mut_subcommands(quiet_globals)
    }
    let mut cmd = Cli::command();
    cmd.build();
    cmd.mut_subcommands(quiet_globals)
}

fn report(ctx: &Ctx, e: &CliError) {
    if ctx.json {
        let v = serde_json::json!({
            "error": {
                "message": e.message,
                "hint": e.hint,
                "kind": e.kind_name(),
                "exit_code": e.code,
            }
        });
        eprintln!("{v}");
    } else {
        eprintln!("error: {}", e.message);
        if let Some(h) = &e.hint {
            eprintln!("hint: {h}");
        }
    }
}

/// Runs a command; `Ok(code)` is the exit code of a command that reports rather than fails
/// (e.g. `verify` finding problems).
fn run(ctx: &Ctx, cmd: Cmd) -> CliResult<u8> {
    match cmd {
        Cmd::Put(a) => data::put(ctx, a).map(|_| 0),
        Cmd::Get(a) => data::get(ctx, a).map(|_| 0),
        Cmd::Del(a) => data::del(ctx, a).map(|_| 0),
        Cmd::Scan(a) => data::scan(ctx, a).map(|_| 0),
        Cmd::Load(a) => data::load(ctx, a).map(|_| 0),
        Cmd::Ls => branches::ls(ctx).map(|_| 0),
        Cmd::Branch(c) => branches::branch(ctx, c).map(|_| 0),
        Cmd::Archive(c) => branches::archive(ctx, c).map(|_| 0),
        Cmd::History(c) => branches::history(ctx, c).map(|_| 0),
        Cmd::Tag(c) => branches::tag(ctx, c).map(|_| 0),
        Cmd::Gc(a) => branches::gc(ctx, a).map(|_| 0),
        Cmd::Diff(a) => branches::diff(ctx, a),
        Cmd::Merge(a) => branches::merge(ctx, a),
        Cmd::Rebase(a) => branches::rebase(ctx, a),
        Cmd::CherryPick(a) => branches::pick(ctx, a, false),
        Cmd::Revert(a) => branches::pick(ctx, a, true),
        Cmd::Reset(a) => branches::reset(ctx, a).map(|_| 0),
        Cmd::Repair(a) => repair::repair(ctx, a).map(|_| 0),
        Cmd::Rehome(a) => branches::rehome(ctx, a).map(|_| 0),
        Cmd::Compact(a) => space::compact(ctx, a).map(|_| 0),
        Cmd::Inspect(c) => inspect::inspect(ctx, c),
        Cmd::Verify(a) => verify::verify(ctx, a),
        Cmd::Export(a) => export::export(ctx, a).map(|_| 0),
        Cmd::Import(a) => export::import(ctx, a).map(|_| 0),
        Cmd::Demo { dir } => demo::demo(ctx, dir).map(|_| 0),
        Cmd::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "bough", &mut std::io::stdout());
            Ok(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
        command().debug_assert();
    }
}
