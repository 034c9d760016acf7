//! Bough: reachability-complete garbage collection of data files.
//!
//! A data file is deleted only when it is proven unreachable from everything that can still
//! read it:
//! - every manifest and every archive of every branch and term in the partition directory,
//!   and every tag (a tag has no owner: it stays when the branch it was taken from goes),
//!   each resolved through its **own** `BranchFileMapping` (an inherited file keeps the name
//!   of the lineage that wrote it — the seed's pseudo-code, which builds names from the
//!   manifest's own branch and term, would miss those);
//! - every merge base recorded in those manifests (a later three-way merge reads it);
//! - every snapshot a reader still holds (passed in by the caller);
//! - every file a writer is still filling (`writing`), and every file at or above the
//!   durable high-water mark of a live (branch, term) — a commit may be about to reference
//!   it, or the term's next writer continue the newest one (`Head::resume_last_file`)
//!   before GC sees it registered as being written.
//!
//! Mapping pages shared by many branches are visited once (they are identified by physical
//! location), so the cost grows with the distinct mapping pages, not with branches × pages.
//! A crash mid-GC loses nothing: a deletion only ever removes an unreachable file, and the
//! next run finishes what the last one started.
//!
//! The same walk can also *measure* ([`measure`], [`collect_measured`]): per data file, the
//! distinct pages anything references (the union over every referent, each shared page
//! counted once) and which durable referents — branch heads, archives, merge bases — hold
//! it. Compaction uses that to move a branch's pages only out of files it alone holds.

// Library code returns errors, never panics on input (tests may unwrap).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

use crate::error::GcResult;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use bough_io::ErrorKind;
use bough_manifest::{BranchFileMapping, CurrentTerm, PageAddr, log_refs, merge_bases, replay};
use bough_names::{BranchName, DataFileName, FileKind, LogFileName, Term, classify};
use bough_tree::cache::CachedPage;
use bough_tree::files::FileTable;
use bough_tree::head::{MAX_MANIFEST_BYTES, TreeSnapshot};
use bough_tree::mapping::{NodePos, Radix, Slot};

pub mod error;
mod marking;
mod space;
mod state_cache;
mod sweeping;
mod walk;
use marking::{Marked, mark};
pub use space::branch_space;
pub use state_cache::StateCache;
use sweeping::sweep;
use walk::{Shadow, Track, Walk};

/// Why a file was kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeepReason {
    /// A manifest or archive references it (the first one found is named).
    Referenced { by: String },
    /// A snapshot held by a reader references it.
    PinnedByReader,
    /// A writer is appending to it.
    Writing,
    /// Its id is at or above the durable high-water mark of its live (branch, term): a
    /// commit in flight may reference it, or a writer continue it.
    InFlight,
}

/// What a GC run did.
#[derive(Debug, Default, Clone)]
pub struct GcReport {
    /// Deleted data files and their sizes.
    pub deleted: Vec<(String, u64)>,
    /// Data files kept, with the reason.
    pub kept: Vec<(String, KeepReason)>,
    /// Deleted write-ahead log files and their sizes (no `LOG` reference named them).
    pub deleted_logs: Vec<(String, u64)>,
    /// Log files kept, with the reason.
    pub kept_logs: Vec<(String, KeepReason)>,
    /// Names GC did not recognise (left alone, with a warning).
    pub unknown: Vec<String>,
    /// Bytes freed (data and log files).
    pub bytes_freed: u64,
    /// Manifests and archives read.
    pub manifests_read: usize,
    /// Manifests and archives not read: a [`StateCache`] held their state, and their files
    /// had not changed since it was read.
    pub manifests_reused: usize,
    /// Distinct mapping pages visited.
    pub mapping_pages_visited: usize,
}

/// What besides the directory's manifests must be protected.
#[derive(Debug, Default)]
pub struct Pins {
    /// Snapshots readers still hold.
    pub snapshots: Vec<Arc<TreeSnapshot>>,
    /// Names of data files writers are appending to.
    pub writing: HashSet<String>,
}

/// A state that references pages, as far as compaction cares.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Referent {
    /// The current state of a branch at a term (`manifest_<branch>_<term>`): the head that
    /// moves its pages out when it compacts.
    Head {
        /// The branch.
        branch: BranchName,
        /// Its term.
        term: Term,
    },
    /// A state nothing moves off: an archive, a tag, or a merge base recorded in a manifest,
    /// an archive or a tag (named by the file and, for a merge base, the other branch).
    Pinned(String),
}

/// Which durable referents (heads, archives, merge bases) reference pages of a file.
/// Reader snapshots are transient and not counted: a file only readers hold besides its
/// head becomes unreachable once they let go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holders {
    /// None: only reader snapshots reference it.
    None,
    /// Exactly one.
    One(Referent),
    /// Two or more.
    Many,
}

/// What the walk found about one data file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileUsage {
    /// Distinct pages of the file that anything references (the union over every manifest,
    /// archive, merge base and reader snapshot; a page shared by many counts once).
    pub live_pages: u64,
    /// `live_pages` × the page size.
    pub live_bytes: u64,
    /// The durable referents that reference a page of it.
    pub holders: Holders,
    /// Whether a reader snapshot references a page of it.
    pub read_by_snapshot: bool,
    /// Every durable referent that references a page of it: indexes into
    /// [`Usage::holders`], in walk order.
    pub held_by: Vec<u32>,
}

/// A durable referent the walk met, and the branches whose deletion removes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The state.
    pub referent: Referent,
    /// The branch whose manifest or archive holds it first; for a merge base, also the
    /// other branch of the pair (deleting either drops the base).
    pub owners: Vec<BranchName>,
}

/// Per log file name, the durable referents whose `LOG` references name it (indexes into
/// [`Usage::holders`], ascending).
pub type LogHolders = BTreeMap<String, Vec<u32>>;

/// Per data file, what is live and who holds it: the result of [`measure`].
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// Page size of the partition.
    pub page_size: u32,
    /// Every data file something references, by name. A file not listed had no referent
    /// when the walk ran (it is garbage, or was created since).
    pub files: BTreeMap<String, FileUsage>,
    /// Every write-ahead log file a `LOG` reference names, by name: the durable referents
    /// (indexes into [`Usage::holders`]) naming it. A log file not listed is named by none.
    pub logs: LogHolders,
    /// Manifests and archives read.
    pub manifests_read: usize,
    /// Manifests and archives whose state a [`StateCache`] supplied instead.
    pub manifests_reused: usize,
    /// Distinct mapping pages visited.
    pub mapping_pages_visited: usize,
    /// The durable referents [`FileUsage::held_by`] points into.
    pub holders: Vec<Holder>,
}

impl Usage {
    /// Whether the head of `branch` at `term` is the only durable referent of `file`: if it
    /// moves its pages out, the file becomes unreachable (once readers let go). For a file
    /// the walk did not see (written since): true only for this head's own file, which
    /// nothing else referenced then; another branch's file is at least that branch's.
    pub fn held_only_by(&self, file: &str, branch: &BranchName, term: Term) -> bool {
        match self.files.get(file).map(|u| &u.holders) {
            // A file the measure does not know was written after it: exclusive only if it
            // is this head's own (another branch's file is that branch's at least).
            None => matches!(
                classify(file),
                FileKind::Data(d) if d.branch == *branch && d.term == term
            ),
            Some(Holders::None) => true,
            Some(Holders::One(Referent::Head { branch: b, term: t })) => b == branch && *t == term,
            Some(_) => false,
        }
    }

    /// Bytes of distinct live pages over every data file.
    pub fn live_bytes(&self) -> u64 {
        self.files.values().map(|u| u.live_bytes).sum()
    }
}

/// Runs GC over one partition directory. `dry_run` reports without deleting.
pub fn collect(files: &FileTable, pins: &Pins, dry_run: bool) -> GcResult<GcReport> {
    let copy = || Pins {
        snapshots: pins.snapshots.clone(),
        writing: pins.writing.clone(),
    };
    collect_with(files, copy, dry_run)
}

/// Like [`collect`], taking the pins only once every manifest has been read. Pins taken
/// before the directory is listed miss a snapshot published in between that references a
/// file created in between, which a later commit (before its manifest is read) stops
/// referencing; taken after the manifests, every snapshot alive then is pinned, and any
/// later one only references pinned pages, files being written or files not listed.
pub fn collect_with(
    files: &FileTable,
    pins: impl FnOnce() -> Pins,
    dry_run: bool,
) -> GcResult<GcReport> {
    let mut report = GcReport::default();
    let marked = mark(files, pins, false, None, &mut report)?;
    sweep(files, &marked, dry_run, &mut report)?;
    Ok(report)
}

/// [`collect_with`] that also returns the [`Usage`] its walk measured (one walk for both).
pub fn collect_measured(
    files: &FileTable,
    pins: impl FnOnce() -> Pins,
    dry_run: bool,
) -> GcResult<(GcReport, Usage)> {
    collect_measured_cached(files, pins, dry_run, None)
}

/// [`collect_measured`] reusing, through `cache`, the states of the state files that did
/// not change since an earlier walk of the same directory with the same cache stored them
/// (see [`StateCache`]); `None` reads every file, as [`collect_measured`]. What is marked
/// and deleted is the same either way: only reading and replaying unchanged files is saved
/// ([`GcReport::manifests_reused`] counts them).
pub fn collect_measured_cached(
    files: &FileTable,
    pins: impl FnOnce() -> Pins,
    dry_run: bool,
    cache: Option<&StateCache>,
) -> GcResult<(GcReport, Usage)> {
    let mut report = GcReport::default();
    let mut marked = mark(files, pins, true, cache, &mut report)?;
    sweep(files, &marked, dry_run, &mut report)?;
    let usage = marked.usage(files, &report);
    Ok((report, usage))
}

/// Measures a partition without deleting anything: per data file, the distinct live pages
/// over every referent GC protects and which durable referents hold it. The walk is GC's
/// (every manifest, archive, merge base and reader snapshot, each shared mapping page
/// visited once), so it costs what a GC run costs minus the deletions, plus one bit per
/// page of the partition's data files.
pub fn measure(files: &FileTable, pins: impl FnOnce() -> Pins) -> GcResult<Usage> {
    measure_cached(files, pins, None)
}

/// [`measure`] reusing the unchanged states `cache` holds, as [`collect_measured_cached`].
pub fn measure_cached(
    files: &FileTable,
    pins: impl FnOnce() -> Pins,
    cache: Option<&StateCache>,
) -> GcResult<Usage> {
    let mut report = GcReport::default();
    let mut marked = mark(files, pins, true, cache, &mut report)?;
    Ok(marked.usage(files, &report))
}
