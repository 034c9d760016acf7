//! Bough: the branches of a partition — their `CURRENT_TERM` records, their manifests and
//! the heads that write them.
//!
//! A partition directory holds, per branch, `CURRENT_TERM.<branch>` (the branch's current
//! term, or a tombstone after deletion) and `manifest_<branch>_<term>`. Opening a branch reads
//! its term and replays that manifest.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bough_io::{ErrorKind, IoError, IoResult, Storage};
use bough_manifest::{BranchOrigin, CurrentTerm, Snapshot, encode_snapshot, replay};
use bough_names::{
    ArchiveName, BranchName, CurrentTermName, FileKind, ManifestName, PartitionDir, Term,
    Timestamp, classify,
};
use bough_tree::cache::PageCache;
use bough_tree::files::FileTable;
use bough_tree::head::{ForkPoint, Head, HeadConfig, MAX_MANIFEST_BYTES};
use parking_lot::Mutex;

mod merge;
mod read_only;
mod repair;
mod staging;
pub use merge::{Conflict, ConflictPolicy, MergeOptions, MergeReport, RehomeReport};
pub use repair::Damaged;
pub use staging::{STAGING_PREFIXES, is_staging_name};

/// The incarnation a replayed manifest records (0 if none); `what` names it in errors.
fn state_incarnation(st: &bough_manifest::ManifestState, what: &str) -> IoResult<u64> {
    bough_manifest::incarnation(&st.extensions)
        .map(|i| i.unwrap_or(0))
        .map_err(|e| IoError::corruption(what, 0, format!("incarnation extension: {e}")))
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
    used_terms: Mutex<Option<HashMap<BranchName, Term>>>,
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

/// What recovery established about a branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settled {
    /// Live at `term`, whose manifest exists and replays: older manifests are superseded.
    Live { term: Term },
    /// Deleted: its manifests and archives up to `upto` belong to the deleted incarnation.
    Deleted { upto: Term },
    /// Not established: nothing of it is deleted.
    Unknown,
}

#[derive(Debug, Default)]
struct TermCache {
    terms: std::collections::BTreeMap<BranchName, CurrentTerm>,
    complete: bool,
}

/// What `describe` tells about a branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchInfo {
    /// The branch.
    pub name: BranchName,
    /// Its current term.
    pub term: Term,
    /// Parent, fork version and creation time (absent for a `main` created empty).
    pub origin: Option<BranchOrigin>,
    /// Its archives, oldest first.
    pub archives: Vec<ArchiveName>,
    /// What it stages, if it is a staging branch (`bough_manifest::STAGING`): the work of an
    /// interrupted command when no command is running.
    pub staging: Option<String>,
    /// What it costs on storage, when measured (the catalog alone does not measure: the
    /// store fills this in from GC's walk; `None` when the partition could not be walked).
    pub space: Option<BranchSpace>,
}

/// What a branch costs on storage, from GC's measuring walk (`bough_gc::branch_space`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BranchSpace {
    /// Bytes of the data files only this branch holds (its heads, archives and the merge
    /// bases naming it) and of its own files nothing references yet: what deleting the
    /// branch now and running GC frees.
    pub exclusive_bytes: u64,
    /// How many files that is.
    pub exclusive_files: u64,
    /// Bytes of the data files it holds together with other branches (kept if it goes).
    pub shared_bytes: u64,
    /// How many files that is.
    pub shared_files: u64,
    /// Per other branch, the bytes of the files this branch shares with it, by name.
    pub shared_with: Vec<(BranchName, u64)>,
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
    ) -> IoResult<Partition> {
        let path = dir.to_string();
        let exists = storage.list_dirs()?.contains(&path);
        if !exists {
            if !create {
                return Err(IoError::NotFound { path });
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
            used_terms: Mutex::new(None),
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

    /// The branch's `CURRENT_TERM` record, if the file exists.
    pub fn current_term(&self, branch: &BranchName) -> IoResult<Option<CurrentTerm>> {
        {
            let cache = self.terms.lock();
            if let Some(ct) = cache.terms.get(branch) {
                return Ok(Some(*ct));
            }
        }
        let ct = self.read_current_term(branch)?;
        if let Some(ct) = ct {
            self.terms.lock().terms.insert(branch.clone(), ct);
        }
        Ok(ct)
    }

    /// Reads the branch's `CURRENT_TERM` from storage again (another process may have moved
    /// it) and caches what it found. A failed read leaves the cache as it was: forgetting
    /// the branch on a transient error would hide a live branch from `branches` until the
    /// partition is reopened.
    fn refresh_current_term(&self, branch: &BranchName) -> IoResult<Option<CurrentTerm>> {
        let ct = self.read_current_term(branch)?;
        let mut cache = self.terms.lock();
        match ct {
            Some(ct) => {
                cache.terms.insert(branch.clone(), ct);
            }
            None => {
                cache.terms.remove(branch);
            }
        }
        Ok(ct)
    }

    fn read_current_term(&self, branch: &BranchName) -> IoResult<Option<CurrentTerm>> {
        let path = self
            .files
            .path_of(&CurrentTermName::new(branch.clone()).to_string());
        match self.storage().read_file(&path, 4096) {
            Ok(bytes) => CurrentTerm::decode(&bytes)
                .map(Some)
                .map_err(|e| IoError::corruption(path, e.offset, e.to_string())),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Durably replaces the branch's `CURRENT_TERM` record.
    ///
    /// The record's first term follows from the one it replaces: a live record's is kept (a
    /// new term or a restore continues the same branch), a tombstone's is replaced by `term`
    /// (the name is reused: a new branch starts here), and with no record at all it is 0
    /// ("unknown"), which treats every older term as this branch's — the conservative
    /// reading when a record was lost, and the right one for a name never used before.
    ///
    /// The record keeps the previous record's incarnation (0 if there was none).
    pub fn write_current_term(
        &self,
        branch: &BranchName,
        term: Term,
        deleted: bool,
    ) -> IoResult<()> {
        let incarnation = self
            .current_term(branch)
            .ok()
            .flatten()
            .map_or(0, |prev| prev.incarnation);
        self.write_term_record(branch, term, deleted, incarnation)
    }

    /// [`write_current_term`](Self::write_current_term) for incarnation `incarnation`. A
    /// live record replacing a live one of another incarnation (a foreign or stale record
    /// being repaired) does not know where this incarnation began: first term 0.
    fn write_term_record(
        &self,
        branch: &BranchName,
        term: Term,
        deleted: bool,
        incarnation: u64,
    ) -> IoResult<()> {
        let path = self
            .files
            .path_of(&CurrentTermName::new(branch.clone()).to_string());
        // An unreadable previous record counts as none: replacing it must not fail on it.
        let first_term = match self.current_term(branch).ok().flatten() {
            Some(prev) if prev.deleted && !deleted => term,
            Some(prev) if prev.incarnation != incarnation => 0,
            Some(prev) => prev.first_term.min(term),
            None => 0,
        };
        let ct = CurrentTerm {
            term,
            deleted,
            first_term,
            incarnation,
        };
        self.storage().write_atomic(&path, &ct.encode())?;
        self.terms.lock().terms.insert(branch.clone(), ct);
        self.note_term(branch, term);
        Ok(())
    }

    /// Records that `term` is used by `branch` (for [`fresh_term`](Self::fresh_term)).
    fn note_term(&self, branch: &BranchName, term: Term) {
        if let Some(used) = self.used_terms.lock().as_mut() {
            let e = used.entry(branch.clone()).or_insert(term);
            *e = (*e).max(term);
        }
    }

    /// Sets the source of incarnation ids (tests inject a seeded one; the default is
    /// [`os_random`]).
    pub fn set_incarnation_source(&mut self, source: Random) {
        self.incarnations = Incarnations(source);
    }

    /// The lowest term a new incarnation of `name` may start at: above every term any file
    /// name of the partition (manifests, archives, data files, `CURRENT_TERM`) and any
    /// manifest's or archive's branch file ranges (merge bases included) use for that name —
    /// not only above what `CURRENT_TERM` remembers, which an operator may have lost. The
    /// scan runs once per partition; every term this catalog writes later is added to it.
    pub fn fresh_term(&self, name: &BranchName) -> IoResult<Term> {
        let mut used = self.used_terms.lock();
        if used.is_none() {
            *used = Some(self.scan_used_terms()?);
        }
        let highest = used.as_ref().and_then(|u| u.get(name).copied());
        let recorded = self.current_term(name)?.map(|ct| ct.term);
        Ok(match highest.max(recorded) {
            Some(t) => t.checked_add(1).ok_or_else(|| IoError::InvalidArgument {
                what: format!("branch {name} has used every term"),
            })?,
            None => 0,
        })
    }

    fn scan_used_terms(&self) -> IoResult<HashMap<BranchName, Term>> {
        let mut used: HashMap<BranchName, Term> = HashMap::new();
        let mut note = |b: &BranchName, t: Term| {
            let e = used.entry(b.clone()).or_insert(t);
            *e = (*e).max(t);
        };
        for n in self.storage().list(self.files.dir())? {
            let kind = classify(&n);
            let state_file = matches!(kind, FileKind::Manifest(_) | FileKind::Archive(_));
            match &kind {
                FileKind::Manifest(m) => note(&m.branch, m.term),
                FileKind::Archive(a) => note(&a.branch, a.term),
                FileKind::Data(d) => note(&d.branch, d.term),
                FileKind::CurrentTerm(c) => {
                    // A damaged record says nothing; the other evidence still counts.
                    if let Ok(Some(ct)) = self.read_current_term(&c.branch) {
                        note(&c.branch, ct.term);
                    }
                }
                _ => {}
            }
            if !state_file {
                continue;
            }
            let path = self.files.path_of(&n);
            let bytes = match self.storage().read_file(&path, MAX_MANIFEST_BYTES) {
                Ok(b) => b,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            // A damaged manifest is reported where it is used; its name was counted.
            let Ok(r) = replay(&bytes) else { continue };
            for range in &r.state.meta.branch_file_ranges {
                note(&range.branch, range.term);
            }
            if let Ok(bases) = bough_manifest::merge_bases(&r.state.extensions) {
                for b in bases {
                    note(&b.state.meta.branch, b.state.meta.term);
                    for range in &b.state.meta.branch_file_ranges {
                        note(&range.branch, range.term);
                    }
                }
            }
        }
        Ok(used)
    }

    /// The replayed state of `manifest_<branch>_<term>` (`NotFound` if it does not exist,
    /// `Corruption` if it does not replay).
    fn manifest_state(
        &self,
        branch: &BranchName,
        term: Term,
    ) -> IoResult<bough_manifest::ManifestState> {
        let path = self
            .files
            .path_of(&ManifestName::new(branch.clone(), term).to_string());
        let bytes = self.storage().read_file(&path, MAX_MANIFEST_BYTES)?;
        replay(&bytes)
            .map(|r| r.state)
            .map_err(|e| IoError::corruption(path, e.offset, e.to_string()))
    }

    /// The incarnation a manifest records (0 if none).
    fn manifest_incarnation(&self, branch: &BranchName, term: Term) -> IoResult<u64> {
        let st = self.manifest_state(branch, term)?;
        state_incarnation(&st, &format!("manifest_{branch}_{term}"))
    }

    /// Points `CURRENT_TERM` of `branch` at `term`, whose manifest was just created. If that
    /// fails and `CURRENT_TERM` on storage still names another term, the new manifest is
    /// removed again, durably, so the failed operation leaves nothing behind: a retry can
    /// create it anew, and a reopen does not finish an operation that reported failure. If
    /// the removal fails too, heads of the older terms are fenced (a reopen will finish the
    /// operation, as after a crash, so they must not acknowledge anything meanwhile).
    fn point_current_term(
        &self,
        branch: &BranchName,
        term: Term,
        incarnation: u64,
    ) -> IoResult<()> {
        let Err(e) = self.write_term_record(branch, term, false, incarnation) else {
            return Ok(());
        };
        // What storage holds now is what counts (the write may have happened or not).
        let on_storage = self.read_current_term(branch);
        match &on_storage {
            Ok(Some(ct)) => {
                self.terms.lock().terms.insert(branch.clone(), *ct);
                if ct.term == term {
                    // It did move: heads of older terms must stop.
                    self.fence(branch, term);
                }
            }
            Ok(None) => {
                self.terms.lock().terms.remove(branch);
            }
            Err(_) => {}
        }
        if let Ok(ct) = on_storage
            && ct.is_none_or(|ct| ct.term != term)
        {
            // Durably: a manifest that came back after a power loss would make recovery
            // finish this failed operation over everything acknowledged after it.
            let path = self
                .files
                .path_of(&ManifestName::new(branch.clone(), term).to_string());
            let removed = self
                .storage()
                .delete(&path)
                .and_then(|()| self.storage().sync_dir(self.files.dir()));
            if removed.is_err() {
                // The new manifest may stay, and a reopen then finishes the operation: the
                // old term must acknowledge nothing more meanwhile.
                self.fence(branch, term);
            }
        }
        Err(e)
    }

    /// The highest term of any manifest of `branch` in the directory.
    pub fn latest_manifest_term(&self, branch: &BranchName) -> IoResult<Option<Term>> {
        let mut best = None;
        for name in self.storage().list(self.files.dir())? {
            if let FileKind::Manifest(m) = classify(&name)
                && &m.branch == branch
            {
                best = best.max(Some(m.term));
            }
        }
        Ok(best)
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
    pub fn open_head(&self, branch: &BranchName) -> IoResult<Head> {
        if self.read_only {
            return self.open_head_read_only(branch);
        }
        if let Some(TakeOver(clock)) = &self.take_over {
            let mut attempt = 0;
            loop {
                let term = match self.refresh_current_term(branch)? {
                    Some(ct) if !ct.deleted => ct.term,
                    _ => {
                        return Err(IoError::NotFound {
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
        e: IoError,
    ) -> IoError {
        if e.kind() != ErrorKind::NotFound {
            return e;
        }
        IoError::corruption(
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
    pub fn live_term(&self, branch: &BranchName) -> IoResult<Term> {
        match self.current_term(branch)? {
            Some(ct) if !ct.deleted => Ok(ct.term),
            _ => Err(IoError::NotFound {
                path: format!("{}@{}", self.dir, branch),
            }),
        }
    }

    /// Names of the live branches.
    pub fn branches(&self) -> IoResult<Vec<BranchName>> {
        if !self.terms.lock().complete {
            for name in self.storage().list(self.files.dir())? {
                if let FileKind::CurrentTerm(ct) = classify(&name) {
                    match self.read_current_term(&ct.branch) {
                        Ok(Some(rec)) => {
                            self.terms.lock().terms.insert(ct.branch, rec);
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
        Ok(self
            .terms
            .lock()
            .terms
            .iter()
            .filter(|(_, ct)| !ct.deleted)
            .map(|(b, _)| b.clone())
            .collect())
    }

    /// The manifest name of a branch at a term.
    pub fn manifest_name(branch: &BranchName, term: Term) -> ManifestName {
        ManifestName::new(branch.clone(), term)
    }

    /// Finishes or undoes what a crash interrupted, and repairs what an operator mixed up:
    /// a branch whose newest manifest is newer than its `CURRENT_TERM` (creation or term
    /// change cut short, or a stale record) moves to it; a `CURRENT_TERM` that runs ahead of
    /// every manifest (a record restored from elsewhere, or whose manifest was lost) is
    /// repaired by continuing from the newest manifest at a fresh term above both; manifests
    /// of deleted branches and of superseded terms are removed; stale temporary files go.
    ///
    /// Nothing of a branch is deleted until its state is known: superseded manifests only
    /// once the manifest its `CURRENT_TERM` names exists and replays, a deleted branch's
    /// manifests and archives only when they belong to the incarnation the tombstone names.
    /// A branch whose state cannot be established (its record damaged, its newest manifest
    /// unreadable) is left exactly as it is.
    fn recover(&self) -> IoResult<()> {
        let names = self.storage().list(self.files.dir())?;
        let mut manifests: HashMap<BranchName, Vec<Term>> = HashMap::new();
        let mut archived: HashMap<BranchName, Vec<ArchiveName>> = HashMap::new();
        for n in &names {
            match classify(n) {
                FileKind::Manifest(m) => manifests.entry(m.branch).or_default().push(m.term),
                FileKind::Archive(a) => archived.entry(a.branch.clone()).or_default().push(a),
                _ => {}
            }
        }
        // A damaged `CURRENT_TERM` is reported when its branch is opened. It must not stop
        // the partition — and so every other branch — from opening; that branch's files
        // are left as they are.
        let term_of = |branch: &BranchName| match self.current_term(branch) {
            Err(e) if e.kind() == ErrorKind::Corruption => {
                tracing::warn!(branch = %branch, error = %e, "damaged CURRENT_TERM left alone");
                Ok(None)
            }
            other => other.map(Some),
        };
        let mut settled: HashMap<BranchName, Settled> = HashMap::new();
        for (branch, terms) in &mut manifests {
            terms.sort_unstable();
            let Some(current) = term_of(branch)? else {
                continue;
            };
            let outcome = self.settle(branch, current, terms)?;
            settled.insert(branch.clone(), outcome);
        }
        // Deleted branches with no manifest left: their archives go if they belong to the
        // incarnation the tombstone names.
        for (branch, list) in &archived {
            if manifests.contains_key(branch) {
                continue;
            }
            if let Some(Some(ct)) = term_of(branch)?
                && ct.deleted
            {
                let mine = list.iter().all(|a| {
                    a.term <= ct.term
                        && self
                            .read_archive_state(a)
                            .and_then(|st| state_incarnation(&st, &a.to_string()))
                            .is_ok_and(|i| i == ct.incarnation)
                });
                if mine {
                    settled.insert(branch.clone(), Settled::Deleted { upto: ct.term });
                }
            }
        }
        for n in names {
            let path = self.files.path_of(&n);
            let doomed = match classify(&n) {
                FileKind::Manifest(m) => match settled.get(&m.branch) {
                    Some(Settled::Live { term }) => m.term < *term,
                    Some(Settled::Deleted { upto }) => m.term <= *upto,
                    _ => false,
                },
                FileKind::Archive(a) => {
                    matches!(settled.get(&a.branch), Some(Settled::Deleted { upto }) if a.term <= *upto)
                }
                // No writer is running while a partition opens: a temp file is debris.
                FileKind::Tmp(_) => true,
                _ => false,
            };
            if doomed {
                self.storage().delete(&path)?;
            }
        }
        Ok(())
    }

    /// Brings `branch`'s `CURRENT_TERM` (`current`) in line with its manifests (`terms`,
    /// ascending, not empty) and says what of its files may go.
    fn settle(
        &self,
        branch: &BranchName,
        current: Option<CurrentTerm>,
        terms: &[Term],
    ) -> IoResult<Settled> {
        let Some(&newest) = terms.last() else {
            return Ok(Settled::Unknown);
        };
        let name = format!("manifest_{branch}_{newest}");
        // The newest manifest's state and incarnation; an unreadable one settles nothing.
        let newest_state = || -> Option<(bough_manifest::ManifestState, u64)> {
            match self.manifest_state(branch, newest).and_then(|st| {
                let inc = state_incarnation(&st, &name)?;
                Ok((st, inc))
            }) {
                Ok(x) => Some(x),
                Err(e) => {
                    tracing::warn!(branch = %branch, error = %e,
                        "newest manifest unreadable: the branch's files are left alone");
                    None
                }
            }
        };
        Ok(match current {
            // The record is lost: the manifests are all there is.
            None => match newest_state() {
                Some((_, inc)) => {
                    self.write_term_record(branch, newest, false, inc)?;
                    Settled::Live { term: newest }
                }
                None => {
                    // Visible again (opening it reports the damage); nothing deleted.
                    self.write_term_record(branch, newest, false, 0)?;
                    Settled::Unknown
                }
            },
            Some(ct) if !ct.deleted && ct.term == newest => {
                // Older manifests are only deleted once the current one is known to replay.
                if terms.len() == 1 || newest_state().is_some() {
                    Settled::Live { term: newest }
                } else {
                    Settled::Unknown
                }
            }
            // A creation or term change cut short, or a stale record: the newest manifest
            // is the branch's state.
            Some(ct) if ct.term < newest => match newest_state() {
                Some((_, inc)) => {
                    self.write_term_record(branch, newest, false, inc)?;
                    Settled::Live { term: newest }
                }
                None => Settled::Unknown,
            },
            // A tombstone at or above every manifest: a deletion cut short if the manifests
            // are of the incarnation it deleted; otherwise the tombstone is not theirs.
            Some(ct) if ct.deleted => match newest_state() {
                Some((_, inc)) if inc == ct.incarnation => Settled::Deleted { upto: ct.term },
                Some((st, inc)) => {
                    tracing::warn!(branch = %branch, tombstone_term = ct.term, newest,
                        "tombstone of another incarnation: the branch continues from its newest manifest");
                    self.continue_from(branch, ct.term, st, inc)?
                }
                None => Settled::Unknown,
            },
            // A live record ahead of every manifest: continue from the newest one at a term
            // above both, so nothing the lost term wrote is ever written again.
            Some(ct) => match newest_state() {
                Some((st, inc)) => {
                    tracing::warn!(branch = %branch, current_term = ct.term, newest,
                        "CURRENT_TERM names a term without a manifest: continuing from the newest manifest");
                    self.continue_from(branch, ct.term, st, inc)?
                }
                None => Settled::Unknown,
            },
        })
    }

    /// The repair of a `CURRENT_TERM` that names no existing manifest: a new manifest at a
    /// fresh term (above `recorded` and every term the name used) holding `state`, then
    /// `CURRENT_TERM` pointing at it.
    fn continue_from(
        &self,
        branch: &BranchName,
        recorded: Term,
        state: bough_manifest::ManifestState,
        incarnation: u64,
    ) -> IoResult<Settled> {
        let term = self.fresh_term(branch)?.max(recorded.saturating_add(1));
        let snapshot = state.to_snapshot();
        let exts = snapshot.extensions.clone();
        Head::create(
            self.files.clone(),
            self.cfg.clone(),
            branch.clone(),
            term,
            Some(&ForkPoint { snapshot }),
            exts,
        )?;
        self.owned.lock().insert((branch.clone(), term));
        self.write_term_record(branch, term, false, incarnation)?;
        Ok(Settled::Live { term })
    }

    fn read_archive_state(&self, a: &ArchiveName) -> IoResult<bough_manifest::ManifestState> {
        let path = self.files.path_of(&a.to_string());
        let bytes = self.storage().read_file(&path, MAX_MANIFEST_BYTES)?;
        replay(&bytes)
            .map(|r| r.state)
            .map_err(|e| IoError::corruption(path, e.offset, e.to_string()))
    }

    fn check_new_name(&self, name: &BranchName) -> IoResult<Term> {
        let fold = name.case_fold_key();
        for b in self.branches()? {
            if b == *name {
                return Err(IoError::AlreadyExists {
                    path: format!("{}@{}", self.dir, name),
                });
            }
            if b.case_fold_key() == fold {
                return Err(IoError::InvalidArgument {
                    what: format!(
                        "branch name {name} differs from the existing branch {b} only by case; \
                         they would alias on a case-insensitive store"
                    ),
                });
            }
        }
        // A deleted branch leaves a tombstone with its last term, but the tombstone may be
        // lost: a new branch of that name continues above every term the name appears with
        // anywhere, so no (branch, term) pair — and no file name — is used twice.
        self.fresh_term(name)
    }

    /// Creates `name` at `parent`'s latest commit (run in the parent's write queue: the
    /// parent is checkpointed first so the new manifest is one small snapshot). No data is
    /// copied; the new branch shares every page with its parent.
    pub fn create_branch(
        &self,
        parent: &mut Head,
        name: &BranchName,
        now_ms: u64,
    ) -> IoResult<Head> {
        let term = self.check_new_name(name)?;
        let fork = parent.fork_point(now_ms)?;
        let origin = BranchOrigin {
            parent: Some((parent.branch().clone(), parent.term())),
            fork_version: parent.version(),
            created_at_ms: now_ms,
        };
        self.create_from(fork, name, term, origin, None)
    }

    fn create_from(
        &self,
        fork: ForkPoint,
        name: &BranchName,
        term: Term,
        origin: BranchOrigin,
        staging: Option<&str>,
    ) -> IoResult<Head> {
        let mut exts = Vec::new();
        origin.store(&mut exts);
        if let Some(purpose) = staging {
            bough_manifest::set_staging(&mut exts, purpose);
        }
        // A new incarnation of the name: its pages can never validate as another's.
        let incarnation = (self.incarnations.0)();
        bough_manifest::set_incarnation(&mut exts, incarnation);
        // The branch starts at the version of the state it starts from (the parent's at the
        // fork, or the archive's), so its versions continue that history.
        let version = bough_manifest::commit_version(&fork.snapshot.extensions)
            .ok()
            .flatten()
            .unwrap_or(0);
        bough_manifest::set_commit_version(&mut exts, version);
        // The fork point is the first merge base between the branch and where it came from.
        if let Some((parent, _)) = &origin.parent {
            let mut state = fork.snapshot.clone();
            state.extensions.clear();
            let bases = [bough_manifest::MergeBase {
                branch: parent.clone(),
                recorded_at_ms: origin.created_at_ms,
                state,
            }];
            let bytes = bough_manifest::encode_merge_bases(&bases).map_err(|e| {
                IoError::InvalidArgument {
                    what: format!("cannot encode the merge base of {name}: {e}"),
                }
            })?;
            bough_manifest::ext::set(&mut exts, bough_manifest::MERGE_BASES, bytes);
        }
        // Manifest first, CURRENT_TERM second: a crash in between is finished by `recover`.
        let mut head = Head::create(
            self.files.clone(),
            self.cfg.clone(),
            name.clone(),
            term,
            Some(&fork),
            exts,
        )?;
        self.owned.lock().insert((name.clone(), term));
        self.point_current_term(name, term, incarnation)?;
        // A reused name still has its deleted incarnation's fence (u64::MAX). The new term is
        // above every term of that incarnation, so setting the fence to it keeps their heads
        // fenced and lets this one commit.
        let fence = self.fence(name, term);
        fence.store(term, Ordering::Release);
        head.set_fence(fence);
        Ok(head)
    }

    /// Deletes a branch: a tombstone `CURRENT_TERM` first (the branch is gone from then on),
    /// then its manifests and archives. Data files stay for GC. `main` cannot be deleted.
    /// The caller must have stopped the branch's writer.
    pub fn delete_branch(&self, name: &BranchName) -> IoResult<()> {
        if name.is_main() {
            return Err(IoError::InvalidArgument {
                what: "the main branch cannot be deleted".into(),
            });
        }
        let term = self.live_term(name)?;
        self.write_current_term(name, term, true)?;
        self.fence(name, term).store(u64::MAX, Ordering::Release);
        // Archives first, then manifests oldest term first: a deletion cut short leaves the
        // manifest at the tombstone's term, which recovery recognises as this incarnation's.
        let mut doomed: Vec<(u8, Term, String)> = Vec::new();
        for n in self.storage().list(self.files.dir())? {
            match classify(&n) {
                FileKind::Archive(a) if a.branch == *name => doomed.push((0, a.term, n)),
                FileKind::Manifest(m) if m.branch == *name => doomed.push((1, m.term, n)),
                _ => {}
            }
        }
        doomed.sort();
        for (_, _, n) in doomed {
            self.storage().delete(&self.files.path_of(&n))?;
        }
        self.storage().sync_dir(self.files.dir())
    }

    /// Opens `name` at the next term (a new owner takes over): a new manifest inheriting the
    /// old one's state, then `CURRENT_TERM`; the old term's head is fenced from then on.
    pub fn open_new_term(&self, old: &mut Head, now_ms: u64) -> IoResult<Head> {
        let name = old.branch().clone();
        let new_term = old.term() + 1;
        let mut fork = old.fork_point(now_ms)?;
        fork.snapshot.max_file_id = old.max_file_id();
        let exts = fork.snapshot.extensions.clone();
        let mut head = Head::create(
            self.files.clone(),
            self.cfg.clone(),
            name.clone(),
            new_term,
            Some(&fork),
            exts,
        )?;
        self.owned.lock().insert((name.clone(), new_term));
        self.point_current_term(&name, new_term, old.incarnation())?;
        head.set_fence(self.fence(&name, new_term));
        // The old term's manifest is superseded; its files stay reachable through the new one.
        self.storage().delete(
            &self
                .files
                .path_of(&ManifestName::new(name, new_term - 1).to_string()),
        )?;
        Ok(head)
    }

    /// Writes the head's current state as `manifest_<branch>_<term>_<ts>` (never overwriting
    /// an existing archive).
    pub fn archive(&self, head: &mut Head, ts: Timestamp, now_ms: u64) -> IoResult<ArchiveName> {
        let mut fork = head.fork_point(now_ms)?;
        // Nothing merges from an archive (a restore or a point-in-time branch starts with
        // bases of its own), and GC keeps every state an archive's bases reference: they
        // would pin other branches' old versions for as long as the archive lives.
        bough_manifest::ext::remove(&mut fork.snapshot.extensions, bough_manifest::MERGE_BASES);
        let name = ArchiveName::new(head.branch().clone(), head.term(), ts);
        let bytes = encode_snapshot(&fork.snapshot).map_err(|e| IoError::InvalidArgument {
            what: format!("cannot encode archive {name}: {e}"),
        })?;
        self.storage()
            .create_new(&self.files.path_of(&name.to_string()), &bytes)?;
        Ok(name)
    }

    /// Archives of a branch, oldest first.
    pub fn archives(&self, branch: &BranchName) -> IoResult<Vec<ArchiveName>> {
        let mut out: Vec<ArchiveName> = self
            .storage()
            .list(self.files.dir())?
            .iter()
            .filter_map(|n| match classify(n) {
                FileKind::Archive(a) if a.branch == *branch => Some(a),
                _ => None,
            })
            .collect();
        out.sort_by_key(|a| (a.timestamp, a.term));
        Ok(out)
    }

    /// Deletes a branch's oldest archives beyond `keep`, durably (the directory is synced);
    /// returns the deleted names.
    pub fn prune_archives(&self, branch: &BranchName, keep: usize) -> IoResult<Vec<ArchiveName>> {
        let all = self.archives(branch)?;
        let excess = all.len().saturating_sub(keep);
        let doomed: Vec<ArchiveName> = all.into_iter().take(excess).collect();
        for a in &doomed {
            self.storage().delete(&self.files.path_of(&a.to_string()))?;
        }
        // The deletions are acknowledged: make them durable (a power loss would otherwise
        // bring the archives back).
        if !doomed.is_empty() {
            self.storage().sync_dir(self.files.dir())?;
        }
        Ok(doomed)
    }

    /// The snapshot an archive recorded.
    pub fn read_archive(&self, archive: &ArchiveName) -> IoResult<Snapshot> {
        let path = self.files.path_of(&archive.to_string());
        let bytes = self.storage().read_file(&path, MAX_MANIFEST_BYTES)?;
        let r = replay(&bytes)
            .map_err(|e| IoError::corruption(path.clone(), e.offset, e.to_string()))?;
        if r.records != 1 {
            return Err(IoError::corruption(
                path,
                0,
                "an archive holds exactly one snapshot record",
            ));
        }
        Ok(r.state.to_snapshot())
    }

    /// Creates branch `name` at the state an archive recorded (a point-in-time branch).
    pub fn branch_from_archive(
        &self,
        archive: &ArchiveName,
        name: &BranchName,
        now_ms: u64,
    ) -> IoResult<Head> {
        let term = self.check_new_name(name)?;
        let snapshot = self.read_archive(archive)?;
        let origin = BranchOrigin {
            parent: Some((archive.branch.clone(), archive.term)),
            fork_version: 0,
            created_at_ms: now_ms,
        };
        self.create_from(ForkPoint { snapshot }, name, term, origin, None)
    }

    /// Restores `head`'s branch to an archive in place: the current state is kept as branch
    /// `backup`, then the branch moves to a new term whose manifest is the archive's state.
    /// The caller must drop `head` (it is fenced) and use the returned one.
    pub fn restore(
        &self,
        head: &mut Head,
        archive: &ArchiveName,
        backup: &BranchName,
        now_ms: u64,
    ) -> IoResult<Head> {
        let name = head.branch().clone();
        if archive.branch != name {
            return Err(IoError::InvalidArgument {
                what: format!(
                    "archive {archive} belongs to branch {}, not {name}",
                    archive.branch
                ),
            });
        }
        let mut snapshot = self.read_archive(archive)?;
        self.create_branch(head, backup, now_ms)?;
        let new_term = head.term() + 1;
        // Above every id this branch ever allocated, so the new term's ranges stay disjoint
        // from everything its own view and its backup's view can name.
        snapshot.max_file_id = snapshot.max_file_id.max(head.max_file_id());
        let origin = restored_origin(&snapshot.extensions, now_ms);
        let mut exts = Vec::new();
        origin.store(&mut exts);
        // A restore is a change of the branch's state like a commit: its version moves on
        // from the current one, never back to the archive's.
        bough_manifest::set_commit_version(&mut exts, head.version().saturating_add(1));
        // The same branch: its incarnation continues.
        bough_manifest::set_incarnation(&mut exts, head.incarnation());
        let mut restored = Head::create(
            self.files.clone(),
            self.cfg.clone(),
            name.clone(),
            new_term,
            Some(&ForkPoint { snapshot }),
            exts,
        )?;
        self.owned.lock().insert((name.clone(), new_term));
        self.point_current_term(&name, new_term, head.incarnation())?;
        restored.set_fence(self.fence(&name, new_term));
        let _ = self.storage().delete(
            &self
                .files
                .path_of(&ManifestName::new(name, new_term - 1).to_string()),
        );
        Ok(restored)
    }

    /// Parent, term, creation time and archives of a live branch.
    pub fn describe(&self, name: &BranchName) -> IoResult<BranchInfo> {
        let term = self.live_term(name)?;
        let path = self
            .files
            .path_of(&ManifestName::new(name.clone(), term).to_string());
        let bytes = self.storage().read_file(&path, MAX_MANIFEST_BYTES)?;
        let state = replay(&bytes)
            .map_err(|e| IoError::corruption(path.clone(), e.offset, e.to_string()))?
            .state;
        let origin = BranchOrigin::from_extensions(&state.extensions).map_err(|r| {
            IoError::corruption(path.clone(), 0, format!("origin extension: {r:?}"))
        })?;
        let staging = bough_manifest::staging_purpose(&state.extensions)
            .map_err(|r| IoError::corruption(path, 0, r))?;
        Ok(BranchInfo {
            name: name.clone(),
            term,
            origin,
            archives: self.archives(name)?,
            staging,
            space: None,
        })
    }
}
