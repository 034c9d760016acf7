//! What a branch costs on storage: the data files deleting it (and running GC) would free,
//! and the ones it shares with other branches, from a measuring walk's holders.

use crate::error::GcResult;
use std::collections::BTreeMap;

use bough_catalog::BranchSpace;
use bough_io::ErrorKind;
use bough_names::{BranchName, FileKind, classify};
use bough_tree::files::FileTable;

use crate::Usage;

/// Splits the partition's data and write-ahead log files by what deleting `branch` would do
/// to them.
///
/// A file is *exclusive* when every durable referent holding it (a page of a data file, a
/// `LOG` reference naming a log file) goes with the branch — its
/// heads and archives, and merge bases naming it (deleting a branch drops those from every
/// other branch) — or when it is one of the branch's own files nothing references yet (the
/// file it is filling). GC deletes whole files, so these are exactly what it frees after the
/// deletion. A file the branch holds together with a referent that stays is *shared*, and
/// counted for each branch that keeps it. Sizes are the files' lengths, as GC reports what
/// it frees. Reader snapshots are transient and not counted, as in compaction.
pub fn branch_space(
    files: &FileTable,
    usage: &Usage,
    branch: &BranchName,
) -> GcResult<BranchSpace> {
    let storage = files.storage();
    let mut space = BranchSpace::default();
    let mut with: BTreeMap<BranchName, u64> = BTreeMap::new();
    let goes = |i: &u32| {
        usage
            .holders
            .get(*i as usize)
            .is_some_and(|h| h.owners.contains(branch))
    };
    // A holder that is one of this branch's history points.
    let history_point = |i: &u32| {
        usage.holders.get(*i as usize).is_some_and(|h| {
            matches!(&h.referent, crate::Referent::Pinned(n)
                if matches!(classify(n), FileKind::History(p) if p.branch == *branch))
        })
    };
    for name in storage.list(files.dir())? {
        let (of, held_by, is_log) = match classify(&name) {
            FileKind::History(h) if h.branch == *branch => {
                match storage.file_len(&files.path_of(&name)) {
                    Ok(n) => {
                        space.history_points += 1;
                        space.history_bytes += n;
                    }
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => return Err(e.into()),
                }
                continue;
            }
            FileKind::Data(d) => (
                d.branch,
                usage
                    .files
                    .get(&name)
                    .map_or(&[][..], |u| u.held_by.as_slice()),
                false,
            ),
            FileKind::Log(l) => (
                l.branch,
                usage.logs.get(&name).map_or(&[][..], Vec::as_slice),
                true,
            ),
            _ => continue,
        };
        let exclusive = if held_by.is_empty() {
            of == *branch
        } else if held_by.iter().any(goes) {
            held_by.iter().all(goes)
        } else {
            continue;
        };
        if !exclusive && held_by.is_empty() {
            continue;
        }
        let bytes = match storage.file_len(&files.path_of(&name)) {
            Ok(n) => n,
            // Deleted since the walk (GC, a branch deletion): it costs nothing any more.
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(e.into()),
        };
        if is_log {
            space.log_bytes += bytes;
        }
        if !held_by.is_empty() && held_by.iter().all(history_point) {
            space.history_bytes += bytes;
        }
        if exclusive {
            space.exclusive_bytes += bytes;
            space.exclusive_files += 1;
            continue;
        }
        space.shared_bytes += bytes;
        space.shared_files += 1;
        let mut others: Vec<&BranchName> = held_by
            .iter()
            .filter(|i| !goes(i))
            .filter_map(|i| usage.holders.get(*i as usize))
            .filter_map(|h| h.owners.first())
            .collect();
        others.sort_unstable();
        others.dedup();
        for o in others {
            *with.entry(o.clone()).or_default() += bytes;
        }
    }
    space.shared_with = with.into_iter().collect();
    Ok(space)
}
