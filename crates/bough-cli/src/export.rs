//! `bough export` and `bough import`: a branch as an export stream and back. The stream
//! format (version 1) is the `bough-export` crate's; see `docs/format.md` ("Export stream
//! (version 1)").

use std::io::{self, Read, Write};
use std::path::PathBuf;

use bough::{MergeOptions, ScanOptions, WriteBatch, WriteReport};
use bough_export::{
    ExportEntry, ExportHeader, MAGIC, StreamError, StreamReader, StreamWriter, TRAILER_LEN,
};
use clap::Args;
use serde_json::json;

use crate::TargetArgs;
use crate::ctx::{self, Ctx, open_target};
use crate::error::{CliError, CliResult};
use crate::output::{self, Progress};
use crate::target::resolve;

// The stream bounds values by the store's limit; the two must not drift apart.
const _: () = assert!(bough_export::MAX_VALUE_LEN as usize == bough::MAX_VALUE_LEN);

/// `bough export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Write to FILE instead of stdout (created; an existing file is refused).
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
}

/// `bough import`: the same argument order as `load` (the target first).
#[derive(Debug, Args)]
pub struct ImportArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// The export stream, or `-` for stdin.
    #[arg(value_name = "FILE|-")]
    input: PathBuf,
    /// Entries per write batch.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    batch: usize,
}

/// `bough export`.
pub fn export(ctx: &Ctx, a: ExportArgs) -> CliResult<()> {
    let t = resolve(&a.target.target, a.target.branch.as_deref(), &[])?;
    let out: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(p)
                .map_err(|e| {
                    CliError::new(
                        if e.kind() == io::ErrorKind::AlreadyExists {
                            crate::error::code::EXISTS
                        } else {
                            crate::error::code::FAILURE
                        },
                        format!("cannot create {}: {e}", p.display()),
                    )
                })?,
        ),
        None => {
            if io::IsTerminal::is_terminal(&io::stdout()) {
                return Err(CliError::usage(
                    "the export stream is binary; refusing to write it to a terminal",
                )
                .hint("use -o FILE, or redirect stdout: `bough export ... > FILE`"));
            }
            Box::new(io::stdout().lock())
        }
    };
    let store = ctx.open_read_only()?;
    let (_, branch) = open_target(&store, &t, false)?;
    let view = branch.read_view()?;
    let header = ExportHeader {
        exported_at_ms: output::now_ms(),
        source_version: view.version(),
        partition: t.dir(),
        branch: t.branch.clone(),
    };
    let werr = |e: io::Error| CliError::io(format!("writing the export stream: {e}"));
    let mut w =
        StreamWriter::new(io::BufWriter::with_capacity(1 << 20, out), &header).map_err(werr)?;
    let mut progress = Progress::new(format!("export {}", t.label()), ctx.progress, None);
    let mut begin = std::ops::Bound::Unbounded;
    loop {
        let page = view.scan(&ScanOptions {
            begin,
            limit: 1024,
            max_bytes: 8 << 20,
            ..ScanOptions::default()
        })?;
        for kv in &page.entries {
            w.entry(&ExportEntry {
                key: kv.key.clone(),
                value: kv.value.value.clone(),
                timestamp: kv.value.timestamp,
                expire_at: kv.value.expire_at.unwrap_or(0),
            })
            .map_err(werr)?;
        }
        progress.tick(w.count(), w.bytes());
        match page.next {
            Some(n) => begin = std::ops::Bound::Included(n),
            None => break,
        }
    }
    let bytes = w.bytes() + TRAILER_LEN as u64;
    let (_, count) = w.finish().map_err(werr)?;
    progress.finish();
    let elapsed = progress.elapsed();
    drop(view);
    store.close()?;
    let msg = format!(
        "exported {count} entries ({}) of {} at version {} in {:.1?}",
        output::size(bytes),
        t.label(),
        header.source_version,
        elapsed
    );
    if ctx.json {
        let doc = json!({"target": t.label(), "entries": count, "bytes": bytes, "version": header.source_version});
        if a.output.is_some() {
            output::print_json(&doc)?;
        } else {
            eprintln!("{doc}");
        }
    } else if a.output.is_some() {
        println!("{msg}");
    } else if ctx.progress && io::IsTerminal::is_terminal(&io::stderr()) {
        eprintln!("{msg}");
    }
    Ok(())
}

/// `bough import`: the stream goes into a staging branch forked from the target; only after
/// its trailer checked out is the staging branch merged into the target (by reference when
/// the target did not change meanwhile) and deleted. A stream that is cut short or corrupt
/// leaves the target as it was.
pub fn import(ctx: &Ctx, a: ImportArgs) -> CliResult<()> {
    let t = resolve(&a.target.target, a.target.branch.as_deref(), &[]).map_err(|e| {
        // `import` used to take FILE first: a swapped pair gets the right order as a hint.
        match a.input.to_str() {
            Some(i) if resolve(i, None, &[]).is_ok() => e.hint(format!(
                "the target comes first, as for `load`: `bough import {} {}`",
                crate::target::shown(i),
                crate::target::shown(&a.target.target)
            )),
            _ => e,
        }
    })?;
    if a.batch == 0 {
        return Err(CliError::usage("--batch must be at least 1"));
    }
    let input: Box<dyn Read> =
        if a.input.as_os_str() == "-" {
            Box::new(io::stdin().lock())
        } else {
            Box::new(std::fs::File::open(&a.input).map_err(|e| {
                CliError::not_found(format!("cannot open {}: {e}", a.input.display()))
            })?)
        };
    let shown = if a.input.as_os_str() == "-" {
        "stdin".to_string()
    } else {
        a.input.display().to_string()
    };
    let corrupt = |e: StreamError| {
        CliError::corrupt(format!("{shown}: {e}"))
            .hint("nothing was imported; export the branch again")
    };
    let input = sniff(input, &shown)?;
    let (mut reader, header) =
        StreamReader::open(io::BufReader::with_capacity(1 << 20, input)).map_err(corrupt)?;
    let store = ctx.open(true)?;
    let existed = store.table(&t.table)?.partitions()?.contains(&t.partition);
    let part = ctx::partition(&store, &t.table, t.partition, true)?;
    ctx::branch(&part, &t.branch)?;
    let replaced = crate::space::holds_entries(&part, &t.branch)?;
    let staging = format!("import-{}-{}", std::process::id(), output::now_ms());
    let stage =
        part.create_staging_branch(&staging, &t.branch, &format!("import into {}", t.label()))?;
    // A file's length gives the percentage and ETA (stdin has none).
    let total = std::fs::metadata(&a.input)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    let mut progress = Progress::new(format!("import {}", t.label()), ctx.progress, total);
    let mut written = WriteReport::default();
    let mut stage_write = |batch: WriteBatch| -> CliResult<()> {
        let r = stage.write_counted_blocking(batch)?;
        written.applied += r.applied;
        written.superseded += r.superseded;
        Ok(())
    };
    let result: CliResult<u64> = (|| {
        let mut batch = WriteBatch::new();
        let mut count = 0u64;
        let mut batch_bytes = 0usize;
        while let Some(e) = reader.next_entry().map_err(corrupt)? {
            batch_bytes += e.key.len() + e.value.len();
            batch.put_with(
                e.key,
                e.value,
                bough::PutOptions {
                    timestamp: Some(e.timestamp),
                    expire_at: (e.expire_at != 0).then_some(e.expire_at),
                    ttl_ms: None,
                },
            );
            count += 1;
            if batch.len() >= a.batch || batch_bytes >= 8 << 20 {
                stage_write(std::mem::take(&mut batch))?;
                batch_bytes = 0;
            }
            progress.tick(count, reader.offset());
        }
        if !batch.is_empty() {
            stage_write(batch)?;
        }
        Ok(count)
    })();
    progress.finish();
    let count = match result {
        Ok(c) => c,
        Err(e) => {
            // The target never saw the stream; the staging branch's files go at the next GC.
            let _ = part.delete_branch(&staging);
            if !existed {
                drop(part);
                let _ = store.close();
                remove_new_partition(ctx, &t.dir());
            }
            return Err(e);
        }
    };
    let merged = part.merge(
        &staging,
        &t.branch,
        MergeOptions {
            policy: bough::ConflictPolicy::Theirs,
            dry_run: false,
            fast_forward: true,
            count_fast_forward: false,
        },
    );
    let cleanup = part.delete_branch(&staging);
    let report = merged?;
    cleanup?;
    let elapsed = progress.elapsed();
    store.close()?;
    if ctx.json {
        output::print_json(&json!({
            "target": t.label(), "entries": count, "applied": written.applied,
            "superseded": written.superseded, "source_partition": header.partition,
            "source_branch": header.branch, "source_version": header.source_version,
            "exported_at_ms": header.exported_at_ms, "fast_forward": report.fast_forward,
            "hint": replaced.then_some(crate::space::REIMPORT_HINT),
        }))?;
    } else {
        println!(
            "imported {count} entries into {} from {}@{} (version {}, exported {}) in {:.1?}: {}",
            t.label(),
            header.partition,
            header.branch,
            header.source_version,
            output::time(header.exported_at_ms),
            elapsed,
            applied_text(written)
        );
        if replaced {
            println!("hint: {}", crate::space::REIMPORT_HINT);
        }
    }
    Ok(())
}

/// `2 applied, 3 superseded by newer entries` (the second part only when there are any).
pub fn applied_text(r: WriteReport) -> String {
    if r.superseded == 0 {
        format!("{} applied", r.applied)
    } else {
        format!(
            "{} applied, {} superseded (the stored entry was newer; last writer wins)",
            r.applied, r.superseded
        )
    }
}

/// Refuses input that is not an export stream before anything is created: a file of
/// KEY<TAB>VALUE or JSON lines is a wrong format (for `load`), not a damaged stream.
fn sniff(mut input: Box<dyn Read>, shown: &str) -> CliResult<Box<dyn Read>> {
    let mut head = Vec::with_capacity(MAGIC.len());
    (&mut input)
        .take(MAGIC.len() as u64)
        .read_to_end(&mut head)
        .map_err(|e| CliError::io(format!("reading {shown}: {e}")))?;
    if head.is_empty() || !MAGIC.starts_with(&head) {
        let what = if head.is_empty() {
            "is empty".to_string()
        } else {
            format!("does not start with {}", String::from_utf8_lossy(&MAGIC))
        };
        return Err(CliError::usage(format!(
            "{shown} is not a Bough export stream (it {what}): wrong input format; nothing was imported"
        ))
        .hint("`bough import` reads what `bough export` writes; to load KEY<TAB>VALUE lines or JSON lines use `bough load TABLE.PART FILE`"));
    }
    Ok(Box::new(io::Cursor::new(head).chain(input)))
}

/// Removes a partition directory a failed import created (checked absent under the store
/// lock, so everything in it is this import's and nothing acknowledged lives there): its
/// Bough files, then the directory if nothing else is in it.
fn remove_new_partition(ctx: &Ctx, dir: &str) {
    let Ok(root) = ctx.root() else { return };
    let path = root.join(dir);
    if let Ok(rd) = std::fs::read_dir(&path) {
        for e in rd.flatten() {
            let name = e.file_name();
            let ours = name.to_str().is_some_and(|n| {
                !matches!(bough_names::classify(n), bough_names::FileKind::Unknown(_))
            });
            if ours && e.file_type().is_ok_and(|t| t.is_file()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(&path);
}
