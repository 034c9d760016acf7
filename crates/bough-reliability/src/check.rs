//! The integrity checker: the library's check (`bough::check`, the one `bough verify` runs)
//! over a store at rest, with GC's dry run, judged by the harness's rule: a store is sound
//! when the check finds no error and no file or directory the store does not know. What a
//! crash legitimately leaves — a dropped manifest tail, a torn tail kept aside, leftovers of
//! an interrupted write nothing references — is a warning there, and fine here.
//!
//! Damage is reported as problems, never as a panic; only failing to list the store is an
//! error. Beside it, readers of what a state holds, for comparing with the models.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use bough::check::{CheckOptions, CheckReport, Finding, Problem, Severity, check_storage as check};
use bough_io::{IoError, IoResult, Storage};
use bough_manifest::{CurrentTerm, merge_bases, replay};
use bough_names::{ArchiveName, ManifestName, PartitionDir};
use bough_tree::cache::PageCache;
use bough_tree::files::FileTable;
use bough_tree::head::{MAX_MANIFEST_BYTES, TreeSnapshot};
use bough_tree::page::leaf::ValueLoc;

use crate::workload::State;

/// Bytes of page cache the readers read through (small: they should read from storage).
const CHECK_CACHE_BYTES: usize = 1 << 20;

/// What the checker found.
#[derive(Debug, Clone)]
pub struct Integrity {
    /// The library's report.
    pub report: CheckReport,
    /// The findings the harness counts as damage, with their partition, one line each.
    pub problems: Vec<String>,
    /// The same findings, typed.
    pub failing: Vec<Finding>,
}

/// Whether the harness counts `f` as damage: every error, and a name the store does not
/// know (it never writes one).
fn fails(f: &Finding) -> bool {
    f.severity() == Severity::Error
        || matches!(f.problem, Problem::UnknownFile | Problem::StrayDirectory)
}

impl Integrity {
    /// Whether nothing is wrong.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl fmt::Display for Integrity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.report;
        let sum = |g: fn(&bough::check::PartitionReport) -> usize| -> usize {
            r.partitions.iter().map(g).sum()
        };
        let files = |g: fn(&bough::check::FileClasses) -> usize| -> usize {
            r.partitions
                .iter()
                .filter_map(|p| p.files.as_ref())
                .map(g)
                .sum()
        };
        write!(
            f,
            "{} partitions, {} branches, {} archives, {} merge bases, {} pages, {} entries, \
             {} data files ({} referenced, {} in flight, {} collectable), {} problems",
            r.partitions.len(),
            sum(|p| p.branches),
            sum(|p| p.archives),
            sum(|p| p.merge_bases),
            r.partitions.iter().map(|p| p.pages).sum::<u64>(),
            r.partitions.iter().map(|p| p.entries).sum::<u64>(),
            sum(|p| p.data_files),
            files(|c| c.referenced),
            files(|c| c.in_flight),
            files(|c| c.collectable),
            self.problems.len()
        )?;
        for p in self.problems.iter().take(8) {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

/// Checks every partition of the store `storage` holds.
pub fn check_storage(storage: Arc<dyn Storage>) -> bough::Result<Integrity> {
    let report = check(
        &storage,
        &CheckOptions {
            gc: true,
            ..CheckOptions::default()
        },
    )?;
    let mut problems = Vec::new();
    let mut failing = Vec::new();
    for (dir, f) in report.all() {
        if fails(f) {
            problems.push(match dir {
                Some(d) => format!("{d}/{f}"),
                None => f.to_string(),
            });
            failing.push(f.clone());
        }
    }
    Ok(Integrity {
        report,
        problems,
        failing,
    })
}

fn file_table(storage: &Arc<dyn Storage>, dir: &PartitionDir, page_size: u32) -> Arc<FileTable> {
    Arc::new(FileTable::new(
        storage.clone(),
        dir.to_string(),
        page_size,
        Arc::new(PageCache::new(CHECK_CACHE_BYTES)),
        false,
    ))
}

fn replay_file(storage: &Arc<dyn Storage>, path: &str) -> IoResult<bough_manifest::Replayed> {
    let bytes = storage.read_file(path, MAX_MANIFEST_BYTES)?;
    replay(&bytes).map_err(|e| IoError::corruption(path, e.offset, e.to_string()))
}

/// The entries of a state, values included (overflow values read); tombstones are absent.
pub fn read_entries(snap: &TreeSnapshot) -> IoResult<State> {
    let mut out = BTreeMap::new();
    // Through the snapshot's buffer: a merge base of a fork by reference holds the
    // parent's buffered commits there (read back from its log).
    let read = snap.buffered();
    let mut c = read.seek(None)?;
    while let Some(e) = c.next_entry()? {
        let v = match e.value {
            ValueLoc::Inline(v) => v,
            ValueLoc::Overflow { first, pages, len } => snap.read_overflow(first, pages, len)?,
            ValueLoc::Tombstone => continue,
        };
        out.insert(e.key, Arc::from(v));
    }
    Ok(Arc::new(out))
}

/// The keys and values an archive recorded.
pub fn read_archive(
    storage: Arc<dyn Storage>,
    dir: &PartitionDir,
    archive: &ArchiveName,
    page_size: u32,
) -> IoResult<State> {
    let files = file_table(&storage, dir, page_size);
    let path = files.path_of(&archive.to_string());
    let r = replay_file(&storage, &path)?;
    if r.records != 1 {
        return Err(IoError::corruption(
            path,
            0,
            "an archive holds exactly one snapshot record",
        ));
    }
    let s = r.state.to_snapshot();
    let snap = TreeSnapshot::from_record(files, &s)?;
    read_entries(&snap)
}

/// Where the last intact record of a manifest file starts (records are padded to 4 KiB
/// blocks; the payload length sits at bytes 20..24 of each record header).
pub fn last_record_offset(bytes: &[u8]) -> Option<u64> {
    let r = replay(bytes).ok()?;
    let mut last = None;
    let mut off = 0u64;
    while off < r.end_offset {
        last = Some(off);
        let at = usize::try_from(off).ok()?;
        let hdr = bytes.get(at + 20..at + 24)?;
        let payload = u64::from(u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]));
        off += (24 + payload).div_ceil(4096) * 4096;
    }
    last
}

/// The merge bases the live manifest of `branch` records that a merge can still use: other
/// branch → common state.
///
/// A base naming a deleted branch, or recorded with an earlier branch of the same name (its
/// state's term is below that name's `first_term`), is dead: no merge uses it, and the store
/// drops it when that branch is deleted — or, when that failed or a crash cut it short, at
/// the next open of the head holding it. Until then it is invisible to every operation, so
/// it is not part of what a family shows. (The facade's tests check that it does go.)
pub fn read_merge_bases(
    storage: Arc<dyn Storage>,
    dir: &PartitionDir,
    branch: &str,
    page_size: u32,
) -> IoResult<BTreeMap<String, State>> {
    let files = file_table(&storage, dir, page_size);
    let ct_path = files.path_of(&format!("CURRENT_TERM.{branch}"));
    let ct = CurrentTerm::decode(&storage.read_file(&ct_path, 4096)?)
        .map_err(|e| IoError::corruption(&ct_path, e.offset, e.to_string()))?;
    let bname = bough_names::BranchName::new(branch).map_err(|e| IoError::InvalidArgument {
        what: e.to_string(),
    })?;
    let path = files.path_of(&ManifestName::new(bname, ct.term).to_string());
    let r = replay_file(&storage, &path)?;
    let bases = merge_bases(&r.state.extensions)
        .map_err(|e| IoError::corruption(&path, 0, format!("merge bases: {e:?}")))?;
    let mut out = BTreeMap::new();
    for b in bases {
        let other = files.path_of(&format!("CURRENT_TERM.{}", b.branch));
        let current = match storage.read_file(&other, 4096) {
            Ok(bytes) => CurrentTerm::decode(&bytes)
                .map_err(|e| IoError::corruption(&other, e.offset, e.to_string()))?,
            Err(e) if e.kind() == bough_io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if current.deleted || b.state.meta.term < current.first_term {
            continue;
        }
        let snap = TreeSnapshot::from_record(files.clone(), &b.state)?;
        out.insert(b.branch.to_string(), read_entries(&snap)?);
    }
    Ok(out)
}
