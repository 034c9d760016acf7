//! The integrity check (as redb's `check_integrity`): reads everything a store holds and
//! reports every problem as a typed [`Finding`]. `bough verify` and the reliability
//! harness are two readers of the same report.
//!
//! Per partition, reading only (so it runs on a read-only open, and without the store lock
//! beside a writer in another process; see [`check_partition`]):
//! 1. every `CURRENT_TERM` record decodes, and every live branch has its current manifest;
//! 2. every manifest and archive replays (checksums, sequence, decoding), names the branch
//!    and term of its file name, and an archive holds one record;
//! 3. from every snapshot they hold — each branch head, each archive, each recorded merge
//!    base — the key tree and the TTL index are walked from their roots (every page once,
//!    leaves at one depth, keys in order inside their parents' bounds, every overflow value
//!    read whole), every mapped logical page must be reachable from a root, and every page
//!    the snapshot references (tree, overflow and mapping pages) is collected;
//! 4. every data file is read page by page: header and identity, each page's checksum and
//!    layout; a referenced page that is missing, past the end of its file or bad is an
//!    error; a bad page (or header) nothing references — left by an interrupted or
//!    superseded write — is a warning;
//! 5. unknown and leftover temporary files are warnings; so is a manifest tail that replay
//!    drops (a torn last append or a damaged last record: the commit it held, if any, is
//!    not applied) and a torn tail the engine kept aside before appending over it;
//! 6. at the store level, every record of the branch registry (`tableop_<seq>[_end]`)
//!    decodes, and an interrupted table-wide operation is a warning;
//! 7. optionally ([`CheckOptions::gc`]), GC's dry run sorts every data file into
//!    referenced, in flight or collectable.
//!
//! Damage is a finding, never a panic and never an error: only failing to list the store
//! is one.

use std::sync::Arc;

use bough_io::Storage;
use bough_names::classify_dir;

mod data_file;
mod files;
mod findings;
mod partition;
mod tree;

pub use data_file::{DataFileCheck, check_data_file, page_type_name};
pub use files::{Held, MAX_MANIFEST_BYTES, PartitionFiles, ReplayFailure, replay_manifest};
pub use findings::{Finding, Problem, Referent, Severity, SnapshotPart, join_referents};

use crate::error::{Error, Result};

/// Where a check is, for a progress display.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use bough::check::{CheckOptions, CheckProgress};
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let main = store.partition("t", 0)?.branch("main")?;
/// main.put_blocking("k", "v")?;
/// main.checkpoint_blocking()?;
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let opts = CheckOptions {
///     progress: Some(Arc::new(move |p: &CheckProgress| {
///         log.lock().unwrap().push((p.snapshots_done, p.snapshots_total));
///     })),
///     ..CheckOptions::default()
/// };
/// store.check(&opts)?;
/// assert!(!seen.lock().unwrap().is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct CheckProgress {
    /// The partition being checked.
    pub dir: String,
    /// Snapshots walked, of how many.
    pub snapshots_done: usize,
    /// Snapshots the partition holds.
    pub snapshots_total: usize,
    /// Data files read, of how many.
    pub data_files_done: usize,
    /// Data files the partition holds.
    pub data_files_total: usize,
    /// Pages of data files read so far.
    pub pages: u64,
}

/// A progress callback.
pub type ProgressFn = Arc<dyn Fn(&CheckProgress) + Send + Sync>;

/// What a check does besides the walk.
///
/// ```
/// use bough::check::CheckOptions;
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// store.partition("t", 0)?.branch("main")?.put_blocking("k", "v")?;
/// // Also sort every data file as GC would.
/// let report = store.check(&CheckOptions { gc: true, ..CheckOptions::default() })?;
/// assert!(report.partitions[0].files.is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct CheckOptions {
    /// Also run GC's dry run and sort every data file ([`PartitionReport::files`]).
    pub gc: bool,
    /// Called after each snapshot walked and each data file read.
    pub progress: Option<ProgressFn>,
}

impl std::fmt::Debug for CheckOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckOptions")
            .field("gc", &self.gc)
            .field("progress", &self.progress.is_some())
            .finish()
    }
}

/// How GC's dry run sorts a partition's data files.
///
/// ```
/// use bough::check::CheckOptions;
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let part = store.partition("t", 0)?;
/// let main = part.branch("main")?;
/// main.put_blocking("k", "v")?;
/// main.checkpoint_blocking()?;
/// let report = part.check(&CheckOptions { gc: true, ..CheckOptions::default() })?;
/// let files = report.files.unwrap();
/// assert!(files.referenced > 0);
/// assert_eq!(files.collectable, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileClasses {
    /// Referenced by a manifest, archive or merge base.
    pub referenced: usize,
    /// Above a live writer's durable high-water mark (a crashed commit's leftovers, or the
    /// file the next writing open continues).
    pub in_flight: usize,
    /// What GC would delete.
    pub collectable: usize,
}

/// What checking one partition found.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let part = store.partition("t", 0)?;
/// let main = part.branch("main")?;
/// main.put_blocking("k", "v")?;
/// main.checkpoint_blocking()?;
/// let report = part.check(&Default::default())?;
/// assert_eq!((report.dir.as_str(), report.branches, report.keys), ("t.0", 1, 1));
/// assert!(report.findings.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct PartitionReport {
    /// `table.partition`.
    pub dir: String,
    /// Live branches.
    pub branches: usize,
    /// Archives.
    pub archives: usize,
    /// Tags.
    pub tags: usize,
    /// History points (kept for point-in-time branches).
    pub history_points: usize,
    /// Merge bases recorded in the manifests.
    pub merge_bases: usize,
    /// Snapshots walked (heads, archives, merge bases).
    pub snapshots: usize,
    /// Entries of the branch heads' key trees (commits still only in a write-ahead log are
    /// replayed by the check, not counted here).
    pub keys: u64,
    /// Entries of every snapshot's key tree and TTL index.
    pub entries: u64,
    /// Data files.
    pub data_files: usize,
    /// Pages in the data files (after their headers).
    pub pages: u64,
    /// GC's sorting of the data files, when asked for ([`CheckOptions::gc`]).
    pub files: Option<FileClasses>,
    /// What is wrong, in the order found.
    pub findings: Vec<Finding>,
}

impl PartitionReport {
    /// Findings of severity `s`.
    pub fn count(&self, s: Severity) -> usize {
        self.findings.iter().filter(|f| f.severity() == s).count()
    }
}

/// What checking a store found.
///
/// ```
/// use bough::{Options, Store};
///
/// let dir = tempfile::tempdir()?;
/// let store = Store::open(Options::new(dir.path()))?;
/// let orders = store.partition("orders", 0)?;
/// let main = orders.branch("main")?;
/// main.put_blocking("a", "1")?;
/// main.archive()?;
/// store.close()?;
/// // The branch's manifest is damaged (a bad disk, a careless operator):
/// let manifest = dir.path().join("orders.0").join("manifest_main_0");
/// let mut bytes = std::fs::read(&manifest)?;
/// bytes[40] ^= 1;
/// std::fs::write(&manifest, &bytes)?;
/// let store = Store::open(Options::new(dir.path()))?;
/// let report = store.check(&Default::default())?;
/// assert!(!report.is_clean(false));
/// for f in &report.findings {
///     println!("{}: {}", f.file, f.problem);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    /// One report per partition.
    pub partitions: Vec<PartitionReport>,
    /// Findings about the store itself (directories that are not partitions).
    pub findings: Vec<Finding>,
}

impl CheckReport {
    /// Every finding, store-level ones first, with the partition it is in (`None` for the
    /// store's own).
    pub fn all(&self) -> impl Iterator<Item = (Option<&str>, &Finding)> {
        self.findings.iter().map(|f| (None, f)).chain(
            self.partitions
                .iter()
                .flat_map(|p| p.findings.iter().map(move |f| (Some(p.dir.as_str()), f))),
        )
    }

    /// Findings of severity `s`.
    pub fn count(&self, s: Severity) -> usize {
        self.all().filter(|(_, f)| f.severity() == s).count()
    }

    /// Whether nothing is wrong: no error, and (when `strict`) no warning either.
    pub fn is_clean(&self, strict: bool) -> bool {
        self.count(Severity::Error) == 0 && (!strict || self.count(Severity::Warning) == 0)
    }
}

/// Most runs of one partition's check while a writer beside it keeps changing what it
/// finds.
const RUNS: usize = 3;

/// Checks partition directory `dir` of `storage`.
///
/// It reads only, so a writer (in this process or another) may be running: its progress
/// during a run — a manifest handed to a new term, a file collected after the state naming
/// it was superseded — can look like damage, so a run that finds errors is repeated until
/// two runs agree (or three ran): damage stays, a writer's progress does not.
pub fn check_partition(
    storage: &Arc<dyn Storage>,
    dir: &str,
    opts: &CheckOptions,
) -> Result<PartitionReport> {
    let at = |e| Error::from(e).at(dir);
    let mut report = partition::run(storage, dir, opts).map_err(at)?;
    for _ in 1..RUNS {
        if report.count(Severity::Error) == 0 {
            break;
        }
        let again = partition::run(storage, dir, opts).map_err(at)?;
        let same = again.findings == report.findings;
        report = again;
        if same {
            break;
        }
    }
    Ok(report)
}

/// Checks every partition of the store `storage` holds.
pub fn check_storage(storage: &Arc<dyn Storage>, opts: &CheckOptions) -> Result<CheckReport> {
    let mut out = CheckReport::default();
    let (status, bad) = crate::store::check_table_ops(storage)?;
    for (file, why) in bad {
        out.findings.push(Finding {
            file,
            problem: Problem::TableOpUnreadable { why },
        });
    }
    for seq in status.unresolved {
        out.findings.push(Finding {
            file: bough_names::TableOpName::intent(seq).to_string(),
            problem: Problem::TableOpUnresolved { seq },
        });
    }
    let mut dirs = storage.list_dirs().map_err(Error::from)?;
    dirs.sort();
    for d in dirs {
        if classify_dir(&d).is_some() {
            out.partitions.push(check_partition(storage, &d, opts)?);
        } else {
            out.findings.push(Finding {
                file: d,
                problem: Problem::StrayDirectory,
            });
        }
    }
    Ok(out)
}
