//! `bough demo`: a store in a fresh directory, sample data, a branch, diverging writes, the
//! diff, a cherry-pick and a merge of siblings, a merge, an archive, a deletion and GC, told
//! step by step.

use std::path::PathBuf;

use bough::{
    ConflictPolicy, DiffChange, MergeOptions, Options, PickOptions, ScanOptions, StateRef, Store,
    WriteBatch,
};

use crate::ctx::Ctx;
use crate::error::{CliError, CliResult};
use crate::output;

fn count(branch: &bough::Branch) -> CliResult<usize> {
    Ok(branch
        .scan_blocking(&ScanOptions {
            keys_only: true,
            ..ScanOptions::default()
        })?
        .entries
        .len())
}

fn text(v: Option<bough::Value>) -> String {
    v.map(|v| String::from_utf8_lossy(&v.value).into_owned())
        .unwrap_or_else(|| "(absent)".into())
}

/// Runs the demo in `dir` (default: a new temporary directory).
pub fn demo(ctx: &Ctx, dir: Option<PathBuf>) -> CliResult<()> {
    let path = match dir {
        Some(d) => d,
        None => std::env::temp_dir().join(format!(
            "bough-demo-{}-{}",
            std::process::id(),
            output::now_ms()
        )),
    };
    if path.exists()
        && std::fs::read_dir(&path)
            .map_err(|e| CliError::io(format!("{}: {e}", path.display())))?
            .next()
            .is_some()
    {
        return Err(CliError::usage(format!("{} is not empty", path.display()))
            .hint("give an empty or new directory: `bough demo DIR`"));
    }
    let mut opts = Options::new(&path).maintenance_interval_ms(0);
    if let Some(b) = ctx.backend {
        opts = opts.backend(b);
    }
    let store = Store::open(opts)?;
    println!(
        "store      {} (backend: {})",
        path.display(),
        store.backend()
    );
    let part = store.partition("orders", 0)?;
    let main = part.branch("main")?;

    let started = std::time::Instant::now();
    let n = 100_000u32;
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let mut b = WriteBatch::new();
        for i in chunk {
            b.put(
                format!("order-{i:06}"),
                format!("{{\"id\":{i},\"status\":\"pending\"}}"),
            );
        }
        main.write_blocking(b)?;
    }
    println!(
        "load       {n} orders into orders.0@main in {:.0?}",
        started.elapsed()
    );

    let before = store.io_stats();
    let t = std::time::Instant::now();
    let feature = part.create_branch("repricing", "main")?;
    let written = store.io_stats().write_bytes - before.write_bytes;
    println!(
        "branch     orders.0@repricing from main in {:.1?}, {} written (no data copied)",
        t.elapsed(),
        output::size(written)
    );

    let mut b = WriteBatch::new();
    for i in (0..n).step_by(1000) {
        b.put(
            format!("order-{i:06}"),
            format!("{{\"id\":{i},\"status\":\"repriced\"}}"),
        );
    }
    b.put("order-999999", "{\"id\":999999,\"status\":\"new\"}");
    feature.write_blocking(b)?;
    let mut b = WriteBatch::new();
    b.delete("order-000001");
    main.write_blocking(b)?;
    println!("diverge    101 writes on repricing, 1 delete on main");
    for (name, br) in [("main", &main), ("repricing", &feature)] {
        println!(
            "read       {name:<10} {} keys; order-000000 = {}",
            count(br)?,
            text(br.get_blocking(b"order-000000")?)
        );
    }

    let t = std::time::Instant::now();
    let diff = part.diff("main", "repricing")?;
    let (mut added, mut removed, mut changed) = (0, 0, 0);
    for d in &diff {
        match d.change {
            DiffChange::Added(_) => added += 1,
            DiffChange::Removed(_) => removed += 1,
            DiffChange::Changed { .. } => changed += 1,
        }
    }
    println!(
        "diff       main..repricing in {:.1?}: {added} added, {removed} removed, {changed} changed (only diverged pages read)",
        t.elapsed()
    );
    for d in diff.iter().take(3) {
        let line = match &d.change {
            DiffChange::Added(v) => {
                format!("+ {}  {}", output::escape(&d.key), output::escape(&v.value))
            }
            DiffChange::Removed(v) => {
                format!("- {}  {}", output::escape(&d.key), output::escape(&v.value))
            }
            DiffChange::Changed { old, new } => {
                format!(
                    "~ {}  {} -> {}",
                    output::escape(&d.key),
                    output::escape(&old.value),
                    output::escape(&new.value)
                )
            }
        };
        println!("             {line}");
    }
    if diff.len() > 3 {
        println!("             … and {} more", diff.len() - 3);
    }

    let archive = main.archive()?;
    println!(
        "archive    {archive} (main before the merge; `bough archive restore` brings it back)"
    );

    // A sibling of repricing: two fixes; main takes only the second (a cherry-pick of the
    // range between them), repricing takes both (a merge of siblings, whose merge base is
    // main's state where they forked, found from the fork tree).
    let hotfix = part.create_branch("hotfix", "main")?;
    let mut b = WriteBatch::new();
    b.put("order-000002", "{\"id\":2,\"status\":\"shipped\"}");
    hotfix.write_blocking(b)?;
    let first_fix = hotfix.archive()?;
    let mut b = WriteBatch::new();
    b.put("order-000003", "{\"id\":3,\"status\":\"shipped\"}");
    hotfix.write_blocking(b)?;
    let picked = part.cherry_pick(
        &StateRef::Archive(first_fix),
        &StateRef::branch("hotfix"),
        "main",
        PickOptions::default(),
    )?;
    println!(
        "pick       hotfix's second fix onto main (cherry-pick archive..hotfix): {} applied; \
         order-000002 = {}, order-000003 = {}",
        output::plural(picked.applied as u64, "key", "keys"),
        text(main.get_blocking(b"order-000002")?),
        text(main.get_blocking(b"order-000003")?)
    );
    let sib = part.merge("hotfix", "repricing", MergeOptions::default())?;
    let at = sib
        .base
        .as_ref()
        .and_then(|b| b.version)
        .map_or(String::new(), |v| format!(" at version {v}"));
    println!(
        "siblings   merge hotfix into repricing (both forked from main; base: main{at}, from \
         the fork tree): {} applied (the fixes, and main's delete, which hotfix forked after)",
        output::plural(sib.applied as u64, "key", "keys"),
    );

    let report = part.merge(
        "repricing",
        "main",
        MergeOptions {
            policy: ConflictPolicy::Fail,
            dry_run: false,
            fast_forward: true,
            count_fast_forward: true,
        },
    )?;
    println!(
        "merge      repricing into main: {} applied, {} conflicts ({}); main has {} keys, order-000000 = {}",
        report.applied,
        report.conflicts.len(),
        if report.fast_forward {
            "fast-forward"
        } else {
            "three-way: main had changed too"
        },
        count(&main)?,
        text(main.get_blocking(b"order-000000")?)
    );

    part.delete_branch("repricing")?;
    part.delete_branch("hotfix")?;
    println!(
        "delete     orders.0@repricing and @hotfix (their data stays until GC proves nothing \
         needs it)"
    );
    let rehomed = main.rehome()?;
    println!(
        "rehome     main: {} copied into its own files, merge base with repricing dropped",
        output::plural(rehomed.pages_copied, "borrowed page", "borrowed pages"),
    );
    println!(
        "             (borrowed pages: pages main uses that live in another branch's data files, \
         shared by the fork and the merge; re-homing copies them into main's own files so GC \
         can free the deleted branch's files)"
    );
    let report = part.gc()?;
    println!(
        "gc         {} deleted ({}), {} kept; every file main or its archive needs is kept",
        output::plural(report.deleted.len() as u64, "file", "files"),
        output::size(report.bytes_freed),
        report.kept.len()
    );
    for (file, why) in &report.kept {
        let why = match why {
            bough::KeepReason::Referenced { by } => format!("referenced by {by}"),
            other => format!("{other:?}"),
        };
        println!("             kept {file}: {why}");
    }
    println!("branches   {}", part.branches()?.join(", "));
    store.close()?;
    println!(
        "done       try: {} --store {} branch tree orders.0",
        this_command(),
        path.display()
    );
    Ok(())
}

/// How to run this binary again: `bough` when that is what PATH finds, otherwise its path
/// (after `cargo run` it is not on PATH).
fn this_command() -> String {
    let Ok(me) = std::env::current_exe().and_then(|p| p.canonicalize()) else {
        return "cargo run -p bough-cli --release --".into();
    };
    let on_path = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths)
            .find_map(|d| d.join("bough").canonicalize().ok())
            .is_some_and(|found| found == me)
    });
    if on_path {
        "bough".into()
    } else {
        me.display().to_string()
    }
}
