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
}

/// The clock of takeovers (milliseconds since the epoch).
struct TakeOver(Arc<dyn Fn() -> u64 + Send + Sync>);

impl std::fmt::Debug for TakeOver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TakeOver")
    }
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
                    Some(term) => p.write_current_term(&main, term, false)?,
                    None if create || exists => {
                        Head::create(
                            p.files.clone(),
                            p.cfg.clone(),
                            main.clone(),
                            0,
                            None,
                            Vec::new(),
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
                        p.write_current_term(&main, 0, false)?;
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
    pub fn write_current_term(
        &self,
        branch: &BranchName,
        term: Term,
        deleted: bool,
    ) -> IoResult<()> {
        let path = self
            .files
            .path_of(&CurrentTermName::new(branch.clone()).to_string());
        // An unreadable previous record counts as none: replacing it must not fail on it.
        let first_term = match self.current_term(branch).ok().flatten() {
            Some(prev) if prev.deleted && !deleted => term,
            Some(prev) => prev.first_term.min(term),
            None => 0,
        };
        let ct = CurrentTerm {
            term,
            deleted,
            first_term,
        };
        self.storage().write_atomic(&path, &ct.encode())?;
        self.terms.lock().terms.insert(branch.clone(), ct);
        Ok(())
    }

    /// Points `CURRENT_TERM` of `branch` at `term`, whose manifest was just created. If that
    /// fails and `CURRENT_TERM` on storage still names another term, the new manifest is
    /// removed again, durably, so the failed operation leaves nothing behind: a retry can
    /// create it anew, and a reopen does not finish an operation that reported failure. If
    /// the removal fails too, heads of the older terms are fenced (a reopen will finish the
    /// operation, as after a crash, so they must not acknowledge anything meanwhile).
    fn point_current_term(&self, branch: &BranchName, term: Term) -> IoResult<()> {
        let Err(e) = self.write_current_term(branch, term, false) else {
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
        let mut head = Head::open(self.files.clone(), self.cfg.clone(), branch.clone(), term)?;
        head.set_fence(self.fence(branch, term));
        head.release_previous_file();
        Ok(head)
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

    /// Finishes or undoes what a crash interrupted: a branch whose newest manifest is newer
    /// than its `CURRENT_TERM` (creation or term change cut short) is completed; manifests
    /// of deleted branches and of superseded terms are removed; stale temporary files go.
    fn recover(&self) -> IoResult<()> {
        let names = self.storage().list(self.files.dir())?;
        let mut newest: HashMap<BranchName, Term> = HashMap::new();
        for n in &names {
            if let FileKind::Manifest(m) = classify(n) {
                let e = newest.entry(m.branch).or_insert(m.term);
                *e = (*e).max(m.term);
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
        for (branch, term) in &newest {
            let Some(current) = term_of(branch)? else {
                continue;
            };
            match current {
                None => self.write_current_term(branch, *term, false)?,
                Some(ct) if ct.term < *term => self.write_current_term(branch, *term, false)?,
                // A tombstone newer than or equal to the manifests: the deletion won.
                _ => {}
            }
        }
        for n in names {
            let path = self.files.path_of(&n);
            let doomed = match classify(&n) {
                FileKind::Manifest(m) => term_of(&m.branch)?
                    .flatten()
                    .is_some_and(|ct| m.term < ct.term || (ct.deleted && m.term == ct.term)),
                FileKind::Archive(a) => term_of(&a.branch)?
                    .flatten()
                    .is_some_and(|ct| ct.deleted && a.term <= ct.term),
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
        // A deleted branch leaves a tombstone with its last term: a new branch of that name
        // continues above it, so no (branch, term) pair — and no file name — is used twice.
        Ok(match self.current_term(name)? {
            Some(ct) => ct.term + 1,
            None => 0,
        })
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
        self.point_current_term(name, term)?;
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
        for n in self.storage().list(self.files.dir())? {
            let doomed = match classify(&n) {
                FileKind::Manifest(m) => m.branch == *name,
                FileKind::Archive(a) => a.branch == *name,
                _ => false,
            };
            if doomed {
                self.storage().delete(&self.files.path_of(&n))?;
            }
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
        self.point_current_term(&name, new_term)?;
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
        let origin = BranchOrigin::from_extensions(&snapshot.extensions)
            .ok()
            .flatten()
            .unwrap_or(BranchOrigin {
                parent: None,
                fork_version: 0,
                created_at_ms: now_ms,
            });
        let mut exts = Vec::new();
        origin.store(&mut exts);
        // A restore is a change of the branch's state like a commit: its version moves on
        // from the current one, never back to the archive's.
        bough_manifest::set_commit_version(&mut exts, head.version().saturating_add(1));
        let mut restored = Head::create(
            self.files.clone(),
            self.cfg.clone(),
            name.clone(),
            new_term,
            Some(&ForkPoint { snapshot }),
            exts,
        )?;
        self.owned.lock().insert((name.clone(), new_term));
        self.point_current_term(&name, new_term)?;
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
