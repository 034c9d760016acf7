//! Bough: the branches of a partition — their `CURRENT_TERM` records, their manifests and
//! the heads that write them.
//!
//! A partition directory holds, per branch, `CURRENT_TERM.<branch>` (the branch's current
//! term, or a tombstone after deletion) and `manifest_<branch>_<term>`. Opening a branch reads
//! its term and replays that manifest.

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

use crate::error::{CatalogError, CatalogResult};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bough_io::{ErrorKind, Storage};
use bough_manifest::{BranchOrigin, CurrentTerm, ExpiryHint, Snapshot, encode_snapshot, replay};
use bough_names::{
    ArchiveName, BranchName, CurrentTermName, FileKind, ManifestName, PartitionDir, TagFileName,
    Term, Timestamp, classify,
};
use bough_tree::cache::PageCache;
use bough_tree::files::FileTable;
use bough_tree::head::{ForkPoint, Head, HeadConfig, MAX_MANIFEST_BYTES};
use parking_lot::Mutex;

mod archives;
mod describe;
pub mod error;
mod history;
mod lifecycle;
mod lineage;
mod merge;
mod pick;
mod policy;
mod read_only;
mod recovery;
mod repair;
mod staging;
mod tags;
mod terms;
pub use bough_manifest::BranchPolicy;
pub use describe::{BranchInfo, BranchSpace};
pub use history::PointInTime;
pub use lineage::{BaseRoute, MergeBaseInfo, NoCommonState, ReleaseCause};
pub use merge::{Conflict, ConflictPolicy, MergeOptions, MergeReport, RehomeOptions, RehomeReport};
pub use pick::{PickOptions, PickRange};
pub use repair::Damaged;
pub use staging::{STAGING_PREFIXES, is_staging_name};
pub use tags::{NameHolder, TagInfo};
use terms::{RecordEntry, TermCache};

/// The incarnation a replayed manifest records (0 if none); `what` names it in errors.
fn state_incarnation(st: &bough_manifest::ManifestState, what: &str) -> CatalogResult<u64> {
    bough_manifest::incarnation(&st.extensions)
        .map(|i| i.unwrap_or(0))
        .map_err(|e| CatalogError::corruption(what, 0, format!("incarnation extension: {e}")))
}

/// The origin a restored state keeps: the archive's, or a root branch's made now when the
/// archive records none (or an unreadable one).
pub(crate) fn restored_origin(exts: &bough_manifest::ext::Extensions, now_ms: u64) -> BranchOrigin {
    BranchOrigin::from_extensions(exts)
        .ok()
        .flatten()
        .unwrap_or(BranchOrigin {
            parent: None,
            fork_version: 0,
            created_at_ms: now_ms,
        })
}

/// One partition directory and its branches.
#[derive(Debug)]
pub struct Partition {
    dir: PartitionDir,
    files: Arc<FileTable>,
    cfg: HeadConfig,
    /// Current term of each branch opened in this process (heads of older terms are fenced).
    fences: Mutex<HashMap<BranchName, Arc<AtomicU64>>>,
    /// `CURRENT_TERM` records read or written so far; `complete` once the directory was
    /// listed. This process holds the store lock, so nobody else changes them.
    terms: Mutex<TermCache>,
    /// Shared storage (object stores): opening a branch this instance does not own takes it
    /// over at a new term, reading the term from storage each time (other processes move
    /// it). Holds the clock that stamps the takeover.
    take_over: Option<TakeOver>,
    /// (branch, term) pairs whose manifest this instance created: it may write them.
    owned: Mutex<std::collections::HashSet<(BranchName, Term)>>,
    /// Opened with [`open_read_only`](Self::open_read_only): heads only read.
    read_only: bool,
    /// Source of incarnation ids for new branches (injected randomness).
    incarnations: Incarnations,
    /// Per branch name, the highest term any file name of the partition or any manifest's
    /// branch file ranges use (`None` until first needed: one scan of the partition, then
    /// kept up to date by every term this catalog writes). A new incarnation of a name
    /// starts above it.
    used_terms: Mutex<terms::UsedTerms>,
    /// Held for the whole of a [`prefill_used_terms`](Self::prefill_used_terms) scan, so a
    /// [`fresh_term`](Self::fresh_term) meanwhile waits for it instead of scanning too.
    term_scan: Mutex<()>,
    /// Per live branch with an expiry, when it expires (`None` until first needed: one read
    /// of every live branch's manifest, then kept up to date by every policy this catalog
    /// writes and every branch it deletes).
    expiries: Mutex<Option<std::collections::BTreeMap<BranchName, u64>>>,
    /// The partition's tags (`None` until first listed; see [`Partition::tags`]).
    known_tags: Mutex<Option<std::collections::BTreeSet<BranchName>>>,
}

/// A source of random 64-bit ids.
pub type Random = Arc<dyn Fn() -> u64 + Send + Sync>;

struct Incarnations(Random);

impl std::fmt::Debug for Incarnations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Incarnations")
    }
}

/// Random ids from the operating system's hash seeds (std's `RandomState`), never 0.
pub fn os_random() -> Random {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    Arc::new(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        h.finish().max(1)
    })
}

/// The clock of takeovers (milliseconds since the epoch).
struct TakeOver(Arc<dyn Fn() -> u64 + Send + Sync>);

impl std::fmt::Debug for TakeOver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TakeOver")
    }
}

impl Partition {
    /// Opens partition `dir`; with `create`, makes the directory and the `main` branch if
    /// they do not exist. Without it, a missing partition is `NotFound`.
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: PartitionDir,
        cfg: HeadConfig,
        cache: Arc<PageCache>,
        cache_data_pages: bool,
        create: bool,
    ) -> CatalogResult<Partition> {
        let path = dir.to_string();
        let exists = storage.list_dirs()?.contains(&path);
        if !exists {
            if !create {
                return Err(CatalogError::NotFound { path });
            }
            storage.create_dir(&path)?;
        }
        let files = Arc::new(FileTable::new(
            storage,
            path,
            cfg.page_size,
            cache,
            cache_data_pages,
        ));
        let p = Partition {
            dir,
            files,
            cfg,
            fences: Mutex::new(HashMap::new()),
            terms: Mutex::new(TermCache::default()),
            take_over: None,
            owned: Mutex::default(),
            read_only: false,
            incarnations: Incarnations(os_random()),
            used_terms: Mutex::default(),
            term_scan: Mutex::new(()),
            expiries: Mutex::new(None),
            known_tags: Mutex::new(None),
        };
        p.recover()?;
        let main = BranchName::main();
        let main_term = match p.current_term(&main) {
            // Reported when `main` is opened; the other branches stay usable.
            Err(e) if e.kind() == ErrorKind::Corruption => {
                tracing::warn!(error = %e, "CURRENT_TERM of main is damaged");
                return Ok(p);
            }
            other => other?,
        };
        match main_term {
            Some(_) => {}
            None => {
                // A manifest without CURRENT_TERM is a creation interrupted between its two
                // steps: finish it. Otherwise create main from nothing.
                let latest = p.latest_manifest_term(&main)?;
                match latest {
                    Some(term) => {
                        let incarnation = p.manifest_incarnation(&main, term).unwrap_or(0);
                        p.write_term_record(&main, term, false, incarnation)?
                    }
                    None if create || exists => {
                        let mut exts = Vec::new();
                        bough_manifest::set_incarnation(&mut exts, (p.incarnations.0)());
                        let head = Head::create(
                            p.files.clone(),
                            p.cfg.clone(),
                            main.clone(),
                            0,
                            None,
                            exts,
                        )
                        .inspect(|_| {
                            p.owned.lock().insert((main.clone(), 0));
                        })
                        .or_else(|e| {
                            if e.kind() == ErrorKind::AlreadyExists {
                                Head::open(p.files.clone(), p.cfg.clone(), main.clone(), 0)
                            } else {
                                Err(e)
                            }
                        })?;
                        // Another process's `main` if it won the race: its incarnation.
                        p.write_term_record(&main, 0, false, head.incarnation())?;
                    }
                    None => {}
                }
            }
        }
        Ok(p)
    }

    /// The partition's name.
    pub fn dir(&self) -> &PartitionDir {
        &self.dir
    }

    /// The partition's data files.
    pub fn files(&self) -> &Arc<FileTable> {
        &self.files
    }

    /// The head configuration.
    pub fn config(&self) -> &HeadConfig {
        &self.cfg
    }

    fn storage(&self) -> &Arc<dyn Storage> {
        self.files.storage()
    }

    /// Sets the source of incarnation ids (tests inject a seeded one; the default is
    /// [`os_random`]).
    pub fn set_incarnation_source(&mut self, source: Random) {
        self.incarnations = Incarnations(source);
    }

    /// Makes opening a branch this instance does not own take it over at a new term (see
    /// [`open_head`](Self::open_head)); `clock` gives milliseconds since the epoch. For
    /// storage several processes share (object stores), where a term is one owner.
    pub fn set_take_over_on_open(&mut self, clock: Arc<dyn Fn() -> u64 + Send + Sync>) {
        self.take_over = Some(TakeOver(clock));
    }

    /// Opens the writer of a live branch at its current term. With
    /// [`set_take_over_on_open`](Self::set_take_over_on_open), a term this instance did not
    /// create is taken over first ([`open_new_term`](Self::open_new_term)): the term is read
    /// from storage again, and a takeover that raced a commit of the previous owner
    /// (`Busy`) starts over, a few times.
    pub fn open_head(&self, branch: &BranchName) -> CatalogResult<Head> {
        if self.read_only {
            return self.open_head_read_only(branch);
        }
        if let Some(TakeOver(clock)) = &self.take_over {
            let mut attempt = 0;
            loop {
                let term = match self.refresh_current_term(branch)? {
                    Some(ct) if !ct.deleted => ct.term,
                    _ => {
                        return Err(CatalogError::NotFound {
                            path: format!("{}@{}", self.dir, branch),
                        });
                    }
                };
                let mut head =
                    Head::open(self.files.clone(), self.cfg.clone(), branch.clone(), term)?;
                if self.owned.lock().contains(&(branch.clone(), term)) {
                    head.set_fence(self.fence(branch, term));
                    return Ok(head);
                }
                match self.open_new_term(&mut head, clock()) {
                    Err(e) if e.kind() == ErrorKind::Busy && attempt < 8 => attempt += 1,
                    // The next term's manifest exists: another process's takeover stopped
                    // before moving `CURRENT_TERM`. Finish it, then take over from there.
                    Err(e) if e.kind() == ErrorKind::AlreadyExists && attempt < 8 => {
                        attempt += 1;
                        self.recover()?;
                    }
                    other => return other,
                }
            }
        }
        let term = self.live_term(branch)?;
        let mut head = Head::open(self.files.clone(), self.cfg.clone(), branch.clone(), term)
            .map_err(|e| self.missing_manifest_is_corruption(branch, term, e))?;
        head.set_fence(self.fence(branch, term));
        // Continue the last data file and fold a long manifest log: what lets short-lived
        // writers leave no more on disk than a long-lived one.
        head.prepare_for_writing()?;
        Ok(head)
    }

    /// A live `CURRENT_TERM` naming a manifest that does not exist is damage (recovery
    /// repairs it when another manifest of the branch exists), not "no such branch".
    fn missing_manifest_is_corruption(
        &self,
        branch: &BranchName,
        term: Term,
        e: bough_tree::error::TreeError,
    ) -> CatalogError {
        if e.kind() != ErrorKind::NotFound {
            return e.into();
        }
        CatalogError::corruption(
            self.files
                .path_of(&CurrentTermName::new(branch.clone()).to_string()),
            0,
            format!(
                "CURRENT_TERM names term {term}, but manifest_{branch}_{term} does not exist \
                 and no other manifest of the branch does"
            ),
        )
    }

    /// Forgets that this instance owns `(branch, term)`. For a head poisoned by a write
    /// whose outcome is unknown: with [`set_take_over_on_open`](Self::set_take_over_on_open)
    /// the next [`open_head`](Self::open_head) then takes the branch over at a new term
    /// instead of writing that term again (which could reuse the file names the failed
    /// commit uploaded).
    pub fn disown(&self, branch: &BranchName, term: Term) {
        self.owned.lock().remove(&(branch.clone(), term));
    }

    fn fence(&self, branch: &BranchName, term: Term) -> Arc<AtomicU64> {
        let mut f = self.fences.lock();
        let fence = f
            .entry(branch.clone())
            .or_insert_with(|| Arc::new(AtomicU64::new(term)));
        fence.fetch_max(term, Ordering::AcqRel);
        fence.clone()
    }

    /// The current term of a live branch; `NotFound` for a missing or deleted branch.
    pub fn live_term(&self, branch: &BranchName) -> CatalogResult<Term> {
        match self.current_term(branch)? {
            Some(ct) if !ct.deleted => Ok(ct.term),
            _ => Err(CatalogError::NotFound {
                path: format!("{}@{}", self.dir, branch),
            }),
        }
    }

    /// Names of the live branches.
    pub fn branches(&self) -> CatalogResult<Vec<BranchName>> {
        if !self.terms.lock().complete {
            for name in self.storage().list(self.files.dir())? {
                if let FileKind::CurrentTerm(ct) = classify(&name) {
                    // Known already (recovery read it at open): the cache is what
                    // `current_term` answers from, so reading it again adds nothing.
                    if self.terms.lock().get(&ct.branch).is_some() {
                        continue;
                    }
                    match self.read_current_term(&ct.branch) {
                        Ok(Some(rec)) => {
                            self.terms.lock().insert(ct.branch, rec);
                        }
                        // Deleted since the listing.
                        Ok(None) => {}
                        // A corrupt record is reported when that branch is used, not here:
                        // one damaged branch must not hide the others.
                        Err(e) if e.kind() == ErrorKind::Corruption => {}
                        // A failed read (an object store out of retries) says nothing about
                        // the branch: fail the listing rather than cache it as complete
                        // without the branch, which would hide a live branch until reopen.
                        Err(e) => return Err(e),
                    }
                }
            }
            self.terms.lock().complete = true;
        }
        Ok(self.terms.lock().live())
    }

    /// The manifest name of a branch at a term.
    pub fn manifest_name(branch: &BranchName, term: Term) -> ManifestName {
        ManifestName::new(branch.clone(), term)
    }
}
