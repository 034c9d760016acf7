//! `bough gc`: what garbage collection would free or frees, and why the rest is kept.

use super::*;

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

pub(crate) fn keep_text(why: &KeepReason) -> String {
    match why {
        KeepReason::Referenced { by } => format!("referenced by {by}"),
        KeepReason::PinnedByReader => "a reader's snapshot still uses it".into(),
        KeepReason::Writing => "a writer is appending to it".into(),
        KeepReason::InFlight => {
            "above the durable high-water mark (a commit may be in flight)".into()
        }
    }
}

pub(crate) fn keep_json(why: &KeepReason) -> Json {
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
        let report: GcReport = if a.dry_run {
            part.gc_dry_run()?
        } else {
            part.gc()?
        };
        // Opening the partition for writing removed what interrupted commands left.
        let staging_removed = part.staging_removed()?;
        // Data and write-ahead log files are listed together: both are files GC decides on.
        let deleted_all = [report.deleted.as_slice(), &report.deleted_logs].concat();
        let kept_all = [report.kept.as_slice(), &report.kept_logs].concat();
        total_files += deleted_all.len();
        total_bytes += report.bytes_freed;
        let kept_bytes: u64 = kept_all
            .iter()
            .filter_map(|(f, _)| file_size(&root, &dir, f))
            .sum();
        if ctx.json {
            docs.push(json!({
                "partition": dir,
                "deleted": deleted_all.iter().map(|(f, b)| json!({"file": f, "bytes": b})).collect::<Vec<_>>(),
                "kept": kept_all.iter().map(|(f, why)| {
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
            plural(deleted_all.len() as u64, "file", "files"),
            output::size(report.bytes_freed),
            plural(kept_all.len() as u64, "file", "files"),
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
        let mut deleted = deleted_all.clone();
        deleted.sort();
        for (f, b) in &deleted {
            rows.push(vec![
                format!("  {short}"),
                f.clone(),
                output::size(*b),
                String::new(),
            ]);
        }
        let mut kept = kept_all.clone();
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
