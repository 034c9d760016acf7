//! Sweeping: deleting the data and log files marking proved unreachable.

use super::*;
use crate::error::GcResult;

/// Deletes (unless `dry_run`) every listed data and log file nothing reaches, and reports
/// why the others stay.
pub(crate) fn sweep(
    files: &FileTable,
    marked: &Marked<'_>,
    dry_run: bool,
    report: &mut GcReport,
) -> GcResult<()> {
    for d in &marked.data {
        let name = d.to_string();
        let keep = marked.walk.referenced.get(&name).cloned().or_else(|| {
            if marked.pins.writing.contains(&name) {
                Some(KeepReason::Writing)
            } else {
                in_flight(marked, &marked.high_water, &d.branch, d.term, d.file_id)
            }
        });
        match keep {
            Some(why) => report.kept.push((name, why)),
            None => {
                let size = delete(files, &name, dry_run)?;
                if !dry_run {
                    files.forget(&name);
                }
                report.bytes_freed += size;
                report.deleted.push((name, size));
            }
        }
    }
    // Log files: kept while a `LOG` reference names them, or while in flight (a writer
    // creates and syncs a log file before the manifest record naming it).
    for l in &marked.logs {
        let name = l.to_string();
        let keep = marked
            .logs_named
            .get(&name)
            .cloned()
            .or_else(|| in_flight(marked, &marked.log_high_water, &l.branch, l.term, l.log_id));
        match keep {
            Some(why) => report.kept_logs.push((name, why)),
            None => {
                let size = delete(files, &name, dry_run)?;
                report.bytes_freed += size;
                report.deleted_logs.push((name, size));
            }
        }
    }
    Ok(())
}

/// `InFlight` for a file of a live (branch, term) whose id is at or above the highest one
/// that term's manifest names (`high_water`): a commit may be about to name it, or the
/// term's writer continue it.
fn in_flight(
    marked: &Marked<'_>,
    high_water: &BTreeMap<(BranchName, Term), u64>,
    branch: &BranchName,
    term: Term,
    id: u64,
) -> Option<KeepReason> {
    let live_term = marked
        .terms
        .get(branch)
        .is_some_and(|ct| !ct.deleted && ct.term == term);
    let above = high_water
        .get(&(branch.clone(), term))
        .is_none_or(|&max| id >= max);
    (live_term && above).then_some(KeepReason::InFlight)
}

/// Deletes file `name` of the partition (unless `dry_run`); returns its size.
fn delete(files: &FileTable, name: &str, dry_run: bool) -> GcResult<u64> {
    let storage = files.storage();
    let path = format!("{}/{name}", files.dir());
    let size = storage.file_len(&path).unwrap_or(0);
    if !dry_run {
        storage.delete(&path)?;
    }
    tracing::debug!(file = %path, bytes = size, "gc deleted an unreachable file");
    Ok(size)
}
