//! Sweeping: deleting the data and log files marking proved unreachable.

use super::*;
use crate::error::GcResult;

/// Deletes (unless `dry_run`) every listed data file nothing reaches, and reports why the
/// others stay.
pub(crate) fn sweep(
    files: &FileTable,
    marked: &Marked<'_>,
    dry_run: bool,
    report: &mut GcReport,
) -> GcResult<()> {
    let storage = files.storage();
    let dir = files.dir();
    for d in &marked.data {
        let name = d.to_string();
        if let Some(why) = marked.walk.referenced.get(&name) {
            report.kept.push((name, why.clone()));
            continue;
        }
        if marked.pins.writing.contains(&name) {
            report.kept.push((name, KeepReason::Writing));
            continue;
        }
        let live_term = marked
            .terms
            .get(&d.branch)
            .is_some_and(|ct| !ct.deleted && ct.term == d.term);
        let above = marked
            .high_water
            .get(&(d.branch.clone(), d.term))
            .is_none_or(|&max| d.file_id >= max);
        if live_term && above {
            report.kept.push((name, KeepReason::InFlight));
            continue;
        }
        let path = format!("{dir}/{name}");
        let size = storage.file_len(&path).unwrap_or(0);
        if !dry_run {
            storage.delete(&path)?;
            files.forget(&name);
        }
        tracing::debug!(file = %path, bytes = size, "gc deleted an unreachable data file");
        report.bytes_freed += size;
        report.deleted.push((name, size));
    }
    sweep_logs(files, marked, dry_run, report)
}

/// Deletes (unless `dry_run`) every listed log file no `LOG` reference names, except those
/// of a live (branch, term) at or above the highest id its manifest names: its writer
/// creates a log file and syncs it before the manifest record naming it, so such a file
/// may be named any moment (the data files' in-flight rule, for logs).
fn sweep_logs(
    files: &FileTable,
    marked: &Marked<'_>,
    dry_run: bool,
    report: &mut GcReport,
) -> GcResult<()> {
    let storage = files.storage();
    let dir = files.dir();
    for l in &marked.logs {
        let name = l.to_string();
        if let Some(why) = marked.logs_named.get(&name) {
            report.kept_logs.push((name, why.clone()));
            continue;
        }
        let live_term = marked
            .terms
            .get(&l.branch)
            .is_some_and(|ct| !ct.deleted && ct.term == l.term);
        let above = marked
            .log_high_water
            .get(&(l.branch.clone(), l.term))
            .is_none_or(|&max| l.log_id >= max);
        if live_term && above {
            report.kept_logs.push((name, KeepReason::InFlight));
            continue;
        }
        let path = format!("{dir}/{name}");
        let size = storage.file_len(&path).unwrap_or(0);
        if !dry_run {
            storage.delete(&path)?;
        }
        tracing::debug!(file = %path, bytes = size, "gc deleted an unreachable log file");
        report.bytes_freed += size;
        report.deleted_logs.push((name, size));
    }
    Ok(())
}
