//! `CURRENT_TERM` records of a partition's branches: reading, caching and writing them, and
//! choosing the term a new incarnation of a name starts at.

use super::*;
use crate::error::{CatalogError, CatalogResult};

/// Whether writing a `CURRENT_TERM` record syncs its directory entry before returning.
#[derive(Debug)]
pub(crate) enum RecordEntry {
    /// The record is durable on return.
    Synced,
    /// The record's bytes are synced and it is visible, but its directory entry is durable
    /// only at the directory's next sync: after a power loss the previous record (or none)
    /// may be back. Only where recovery's `settle` puts the branch back at the term the
    /// record names from the branch's manifests, durable before the record is written.
    /// With the record staged ahead (`Storage::stage_atomic`: written and synced while the
    /// manifest was), used if it is the record to write.
    Unsynced(Option<bough_io::Staged>),
}

/// The expiry hint a `CURRENT_TERM` record carries for a branch whose manifest has the
/// extensions `exts` (unknown when its policy does not decode).
pub(crate) fn expiry_hint(exts: &[(u64, Vec<u8>)]) -> ExpiryHint {
    bough_manifest::BranchPolicy::from_extensions(exts)
        .map_or(ExpiryHint::Unknown, |p| ExpiryHint::of(p.expires_at_ms))
}

/// The highest term each branch name is used with anywhere, once scanned, and how many
/// terms were recorded so far (a scan that ran while one was recorded is stale).
#[derive(Debug, Default)]
pub(crate) struct UsedTerms {
    pub(crate) map: Option<HashMap<BranchName, Term>>,
    pub(crate) notes: u64,
}

/// What [`Partition::scan_state_files`] found.
pub(crate) struct StateScan {
    /// The highest term each branch name is used with anywhere.
    pub(crate) used: HashMap<BranchName, Term>,
    /// The expiry of each live branch whose current manifest records one.
    pub(crate) expiries: std::collections::BTreeMap<BranchName, u64>,
}

/// What one state file contributes to a [`StateScan`].
#[derive(Default)]
struct FileScan {
    /// The live branch whose current manifest this is, and its expiry.
    expiry: Option<(BranchName, u64)>,
    /// (name, term) pairs its states use.
    terms: Vec<(BranchName, Term)>,
}

/// The `CURRENT_TERM` records known in memory, and the name index of the live branches.
#[derive(Debug, Default)]
pub(crate) struct TermCache {
    terms: std::collections::BTreeMap<BranchName, CurrentTerm>,
    /// The live branches by [`BranchName::case_fold_key`]: what a new name could alias, so
    /// checking a name costs one lookup instead of a pass over every branch. Changed only
    /// with `terms`, so the two always agree.
    folds: HashMap<String, std::collections::BTreeSet<BranchName>>,
    /// Every `CURRENT_TERM` of the directory was listed into `terms`.
    pub(crate) complete: bool,
}

impl TermCache {
    pub(crate) fn get(&self, branch: &BranchName) -> Option<&CurrentTerm> {
        self.terms.get(branch)
    }

    pub(crate) fn insert(&mut self, branch: BranchName, ct: CurrentTerm) {
        let fold = branch.case_fold_key();
        if ct.deleted {
            self.unindex(&fold, &branch);
        } else {
            self.folds.entry(fold).or_default().insert(branch.clone());
        }
        self.terms.insert(branch, ct);
    }

    pub(crate) fn remove(&mut self, branch: &BranchName) {
        self.unindex(&branch.case_fold_key(), branch);
        self.terms.remove(branch);
    }

    fn unindex(&mut self, fold: &str, branch: &BranchName) {
        if let Some(set) = self.folds.get_mut(fold) {
            set.remove(branch);
            if set.is_empty() {
                self.folds.remove(fold);
            }
        }
    }

    /// The live branch `name` would alias (`bough_names::alias_of`, over the only names
    /// that can: those with its case fold).
    pub(crate) fn live_alias(&self, name: &BranchName) -> Option<BranchName> {
        let same_fold = self.folds.get(&name.case_fold_key())?;
        bough_names::alias_of(name, same_fold).cloned()
    }

    /// The live branches, in name order.
    pub(crate) fn live(&self) -> Vec<BranchName> {
        self.terms
            .iter()
            .filter(|(_, ct)| !ct.deleted)
            .map(|(b, _)| b.clone())
            .collect()
    }
}

impl Partition {
    /// The branch's `CURRENT_TERM` record, if the file exists.
    pub fn current_term(&self, branch: &BranchName) -> CatalogResult<Option<CurrentTerm>> {
        {
            let cache = self.terms.lock();
            if let Some(ct) = cache.get(branch) {
                return Ok(Some(*ct));
            }
        }
        let ct = self.read_current_term(branch)?;
        if let Some(ct) = ct {
            self.terms.lock().insert(branch.clone(), ct);
        }
        Ok(ct)
    }

    /// Reads the branch's `CURRENT_TERM` from storage again (another process may have moved
    /// it) and caches what it found. A failed read leaves the cache as it was: forgetting
    /// the branch on a transient error would hide a live branch from `branches` until the
    /// partition is reopened.
    pub(crate) fn refresh_current_term(
        &self,
        branch: &BranchName,
    ) -> CatalogResult<Option<CurrentTerm>> {
        let ct = self.read_current_term(branch)?;
        let mut cache = self.terms.lock();
        match ct {
            Some(ct) => {
                cache.insert(branch.clone(), ct);
            }
            None => {
                cache.remove(branch);
            }
        }
        Ok(ct)
    }

    pub(crate) fn read_current_term(
        &self,
        branch: &BranchName,
    ) -> CatalogResult<Option<CurrentTerm>> {
        let path = self
            .files
            .path_of(&CurrentTermName::new(branch.clone()).to_string());
        match self.storage().read_file(&path, 4096) {
            Ok(bytes) => CurrentTerm::decode(&bytes)
                .map(Some)
                .map_err(|e| CatalogError::record(path, e)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
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
    ) -> CatalogResult<()> {
        let incarnation = self
            .current_term(branch)
            .ok()
            .flatten()
            .map_or(0, |prev| prev.incarnation);
        self.write_term_record(branch, term, deleted, incarnation)
    }

    /// [`write_current_term`](Self::write_current_term) for incarnation `incarnation`. A
    /// live record replacing a live one of another incarnation (a foreign or stale record
    /// being repaired) does not know where this incarnation began: first term 0. The expiry
    /// hint carries over from a live record of the same incarnation (new terms and restores
    /// keep the branch's policy); otherwise it is unknown.
    pub(crate) fn write_term_record(
        &self,
        branch: &BranchName,
        term: Term,
        deleted: bool,
        incarnation: u64,
    ) -> CatalogResult<()> {
        self.write_term_record_hinted(
            branch,
            term,
            deleted,
            incarnation,
            None,
            RecordEntry::Synced,
        )
    }

    /// [`write_term_record`](Self::write_term_record) with the expiry hint `hint` (`None`:
    /// carried over as there). The hint must never be later than the expiry the branch's
    /// manifest records once this record is durable (see [`set_expiry`](Self::set_expiry)).
    pub(crate) fn write_term_record_hinted(
        &self,
        branch: &BranchName,
        term: Term,
        deleted: bool,
        incarnation: u64,
        hint: Option<ExpiryHint>,
        entry: RecordEntry,
    ) -> CatalogResult<()> {
        let (path, ct) = self.term_record(branch, term, deleted, incarnation, hint);
        let bytes = ct.encode();
        match entry {
            RecordEntry::Synced => self.storage().write_atomic(&path, &bytes)?,
            RecordEntry::Unsynced(None) => {
                self.storage().write_atomic_entry_unsynced(&path, &bytes)?;
            }
            // Staged while the manifest was written: used only if it is this very record.
            RecordEntry::Unsynced(Some(staged))
                if staged.path() == path && staged.bytes() == bytes =>
            {
                self.storage().install_staged(staged)?;
            }
            RecordEntry::Unsynced(Some(staged)) => {
                self.storage().discard_staged(staged);
                self.storage().write_atomic_entry_unsynced(&path, &bytes)?;
            }
        }
        self.terms.lock().insert(branch.clone(), ct);
        self.note_term(branch, term);
        Ok(())
    }

    /// The path of `branch`'s `CURRENT_TERM` and the record
    /// [`write_term_record_hinted`](Self::write_term_record_hinted) writes there.
    pub(crate) fn term_record(
        &self,
        branch: &BranchName,
        term: Term,
        deleted: bool,
        incarnation: u64,
        hint: Option<ExpiryHint>,
    ) -> (String, CurrentTerm) {
        let path = self
            .files
            .path_of(&CurrentTermName::new(branch.clone()).to_string());
        // An unreadable previous record counts as none: replacing it must not fail on it.
        let prev = self.current_term(branch).ok().flatten();
        let first_term = match prev {
            Some(prev) if prev.deleted && !deleted => term,
            Some(prev) if prev.incarnation != incarnation => 0,
            Some(prev) => prev.first_term.min(term),
            None => 0,
        };
        let carried = match prev {
            Some(p) if !p.deleted && p.incarnation == incarnation => p.expiry,
            _ => ExpiryHint::Unknown,
        };
        let expiry = match (deleted, self.keeps_expiry_hints(), hint) {
            (true, _, _) | (_, false, _) => ExpiryHint::Unknown,
            (false, true, Some(h)) => h,
            (false, true, None) => carried,
        };
        let ct = CurrentTerm {
            term,
            deleted,
            first_term,
            incarnation,
            expiry,
        };
        (path, ct)
    }

    /// Whether this instance keeps the expiry hints of `CURRENT_TERM` records: only where
    /// it is the partition's one writer. Where several processes share the storage (object
    /// stores: takeovers), rewriting a record only for its hint could race another owner's
    /// new term, so records are written with the hint unknown and expiry reads manifests.
    pub(crate) fn keeps_expiry_hints(&self) -> bool {
        self.take_over.is_none() && !self.read_only
    }

    /// Records that `term` is used by `branch` (for [`fresh_term`](Self::fresh_term)).
    pub(crate) fn note_term(&self, branch: &BranchName, term: Term) {
        let mut used = self.used_terms.lock();
        used.notes = used.notes.wrapping_add(1);
        if let Some(map) = used.map.as_mut() {
            let e = map.entry(branch.clone()).or_insert(term);
            *e = (*e).max(term);
        }
    }

    /// Runs the scan [`fresh_term`](Self::fresh_term) needs ahead of the first branch
    /// creation (a partition with many branches reads every manifest for it), so it can run
    /// on a thread of its own after the partition opens. Its result is kept only if no term
    /// was recorded while it ran (a term written after its listing would be missing from
    /// it); otherwise the first `fresh_term` scans again. A `fresh_term` that comes while it
    /// runs waits for it.
    pub fn prefill_used_terms(&self) -> CatalogResult<()> {
        let _scanning = self.term_scan.lock();
        let notes = {
            let used = self.used_terms.lock();
            if used.map.is_some() {
                return Ok(());
            }
            used.notes
        };
        let scan = self.scan_state_files()?;
        let mut used = self.used_terms.lock();
        if used.map.is_none() && used.notes == notes {
            used.map = Some(scan.used);
        }
        Ok(())
    }

    /// The lowest term a new incarnation of `name` may start at: above every term any file
    /// name of the partition (manifests, archives, data files, `CURRENT_TERM`) and any
    /// manifest's or archive's branch file ranges (merge bases included) use for that name —
    /// not only above what `CURRENT_TERM` remembers, which an operator may have lost. The
    /// scan runs once per partition; every term this catalog writes later is added to it.
    pub fn fresh_term(&self, name: &BranchName) -> CatalogResult<Term> {
        // Waits for a scan in progress (see `prefill_used_terms`).
        drop(self.term_scan.lock());
        let mut used = self.used_terms.lock();
        if used.map.is_none() {
            self.fill_from_scan(&mut used.map)?;
        }
        let highest = used.map.as_ref().and_then(|u| u.get(name).copied());
        let recorded = self.current_term(name)?.map(|ct| ct.term);
        Ok(match highest.max(recorded) {
            Some(t) => t
                .checked_add(1)
                .ok_or_else(|| CatalogError::InvalidArgument {
                    what: format!("branch {name} has used every term"),
                })?,
            None => 0,
        })
    }

    /// Fills `used` (the caller holds `used_terms`, empty) and, if still unknown, the
    /// expiries from one [`scan_state_files`](Self::scan_state_files).
    pub(crate) fn fill_from_scan(
        &self,
        used: &mut Option<HashMap<BranchName, Term>>,
    ) -> CatalogResult<()> {
        let scan = self.scan_state_files()?;
        *used = Some(scan.used);
        let mut expiries = self.expiries.lock();
        if expiries.is_none() {
            *expiries = Some(scan.expiries);
        }
        Ok(())
    }

    /// One pass over every file name of the partition and every state file's contents:
    /// the terms each name uses (what [`fresh_term`](Self::fresh_term) needs) and, from each
    /// live branch's current manifest read on the way, its expiry (what
    /// [`due_expiries`](Self::due_expiries) needs), so a partition with many branches reads
    /// each manifest once for both.
    pub(crate) fn scan_state_files(&self) -> CatalogResult<StateScan> {
        let mut expiries = std::collections::BTreeMap::new();
        let mut used: HashMap<BranchName, Term> = HashMap::new();
        let mut note = |b: &BranchName, t: Term| {
            let e = used.entry(b.clone()).or_insert(t);
            *e = (*e).max(t);
        };
        let mut state_files = Vec::new();
        for n in self.storage().list(self.files.dir())? {
            let kind = classify(&n);
            match &kind {
                FileKind::Manifest(m) => note(&m.branch, m.term),
                FileKind::Archive(a) => note(&a.branch, a.term),
                FileKind::History(h) => note(&h.branch, h.term),
                FileKind::Data(d) => note(&d.branch, d.term),
                FileKind::CurrentTerm(c) => {
                    // A damaged record says nothing; the other evidence still counts. The
                    // cached record is the one `fresh_term` compares with anyway.
                    if let Ok(Some(ct)) = self.current_term(&c.branch) {
                        note(&c.branch, ct.term);
                    }
                }
                _ => {}
            }
            if matches!(
                kind,
                FileKind::Manifest(_) | FileKind::Archive(_) | FileKind::Tag(_)
            ) {
                state_files.push((n, kind));
            }
        }
        // The state files' contents, read at once (one manifest per branch).
        let read = bough_io::fan_out::map_parallel(&state_files, |(n, kind)| {
            self.scan_state_file(n, kind)
        });
        for found in read {
            let Some(found) = found? else { continue };
            if let Some((branch, at)) = found.expiry {
                expiries.insert(branch, at);
            }
            for (b, t) in &found.terms {
                note(b, *t);
            }
        }
        Ok(StateScan { used, expiries })
    }

    /// What one state file says for [`scan_state_files`](Self::scan_state_files): the
    /// terms its states use and, for a live branch's current manifest, its expiry. `None`:
    /// gone since the listing, or damaged (reported where it is used; its name counted).
    fn scan_state_file(&self, n: &str, kind: &FileKind) -> CatalogResult<Option<FileScan>> {
        let path = self.files.path_of(n);
        let bytes = match self.storage().read_file(&path, MAX_MANIFEST_BYTES) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let Ok(r) = replay(&bytes) else {
            return Ok(None);
        };
        let mut found = FileScan::default();
        if let FileKind::Manifest(m) = kind
            && let Ok(Some(ct)) = self.current_term(&m.branch)
            && !ct.deleted
            && ct.term == m.term
        {
            match bough_manifest::BranchPolicy::from_extensions(&r.state.extensions) {
                Ok(p) => found.expiry = p.expires_at_ms.map(|at| (m.branch.clone(), at)),
                Err(e) => {
                    tracing::warn!(branch = %m.branch, error = ?e, "cannot read the branch's expiry");
                }
            }
        }
        for range in &r.state.meta.branch_file_ranges {
            found.terms.push((range.branch.clone(), range.term));
        }
        if let Ok(bases) = bough_manifest::merge_bases(&r.state.extensions) {
            for b in bases {
                found
                    .terms
                    .push((b.state.meta.branch.clone(), b.state.meta.term));
                for range in &b.state.meta.branch_file_ranges {
                    found.terms.push((range.branch.clone(), range.term));
                }
            }
        }
        Ok(Some(found))
    }

    /// The replayed state of `manifest_<branch>_<term>` (`NotFound` if it does not exist,
    /// `Corruption` if it does not replay).
    pub(crate) fn manifest_state(
        &self,
        branch: &BranchName,
        term: Term,
    ) -> CatalogResult<bough_manifest::ManifestState> {
        let path = self
            .files
            .path_of(&ManifestName::new(branch.clone(), term).to_string());
        let bytes = self.storage().read_file(&path, MAX_MANIFEST_BYTES)?;
        replay(&bytes)
            .map(|r| r.state)
            .map_err(|e| CatalogError::record(path, e))
    }

    /// The incarnation a manifest records (0 if none).
    pub(crate) fn manifest_incarnation(
        &self,
        branch: &BranchName,
        term: Term,
    ) -> CatalogResult<u64> {
        let st = self.manifest_state(branch, term)?;
        state_incarnation(&st, &format!("manifest_{branch}_{term}"))
    }

    /// Points `CURRENT_TERM` of `branch` at `term`, whose manifest was just created. If that
    /// fails and `CURRENT_TERM` on storage still names another term, the new manifest is
    /// removed again, durably, so the failed operation leaves nothing behind: a retry can
    /// create it anew, and a reopen does not finish an operation that reported failure. If
    /// the removal fails too, heads of the older terms are fenced (a reopen will finish the
    /// operation, as after a crash, so they must not acknowledge anything meanwhile).
    pub(crate) fn point_current_term(
        &self,
        head: &Head,
        incarnation: u64,
        entry: RecordEntry,
    ) -> CatalogResult<()> {
        let (branch, term) = (head.branch(), head.term());
        let hint = expiry_hint(head.extensions());
        let Err(e) =
            self.write_term_record_hinted(branch, term, false, incarnation, Some(hint), entry)
        else {
            return Ok(());
        };
        // What storage holds now is what counts (the write may have happened or not).
        let on_storage = self.read_current_term(branch);
        match &on_storage {
            Ok(Some(ct)) => {
                self.terms.lock().insert(branch.clone(), *ct);
                if ct.term == term {
                    // It did move: heads of older terms must stop.
                    self.fence(branch, term);
                }
            }
            Ok(None) => {
                self.terms.lock().remove(branch);
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
    pub fn latest_manifest_term(&self, branch: &BranchName) -> CatalogResult<Option<Term>> {
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
}
