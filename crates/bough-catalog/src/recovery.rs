//! Recovery at open: what each branch's state is (live, deleted or unknown), and which
//! superseded manifests may go.

use super::*;
use crate::error::CatalogResult;

/// What recovery established about a branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Settled {
    /// Live at `term`, whose manifest exists and replays: older manifests are superseded.
    Live { term: Term },
    /// Deleted: its manifests and archives up to `upto` belong to the deleted incarnation.
    Deleted { upto: Term },
    /// Not established: nothing of it is deleted.
    Unknown,
}

impl Partition {
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
    pub(crate) fn recover(&self) -> CatalogResult<()> {
        let names = self.storage().list(self.files.dir())?;
        let kinds: Vec<FileKind> = names.iter().map(|n| classify(n)).collect();
        let mut manifests: HashMap<BranchName, Vec<Term>> = HashMap::new();
        let mut archived: HashMap<BranchName, Vec<ArchiveName>> = HashMap::new();
        let mut recorded: Vec<BranchName> = Vec::new();
        for kind in &kinds {
            match kind {
                FileKind::Manifest(m) => {
                    manifests.entry(m.branch.clone()).or_default().push(m.term)
                }
                FileKind::Archive(a) => archived
                    .entry(a.branch.clone())
                    .or_default()
                    .push(a.clone()),
                FileKind::CurrentTerm(c) => recorded.push(c.branch.clone()),
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
        // Every record listed, read at once into the cache the loop below answers from (and
        // `branches` lists from: the cache is complete once recovery is done). A failed read
        // fails recovery as it would below (a damaged record is the loop's to report): a
        // read that failed is not retried here and taken for an answer.
        for read in bough_io::fan_out::map_parallel(&recorded, |b| self.current_term(b)) {
            if let Err(e) = read
                && e.kind() != ErrorKind::Corruption
            {
                return Err(e);
            }
        }
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
        for (n, kind) in names.iter().zip(kinds) {
            let path = self.files.path_of(n);
            let doomed = match kind {
                FileKind::Manifest(m) => match settled.get(&m.branch) {
                    Some(Settled::Live { term }) => m.term < *term,
                    Some(Settled::Deleted { upto }) => m.term <= *upto,
                    _ => false,
                },
                FileKind::Archive(a) => {
                    matches!(settled.get(&a.branch), Some(Settled::Deleted { upto }) if a.term <= *upto)
                }
                // Also a point of a term above the branch's: its creation was cut short and
                // that state never became the branch's (a read would take it for one).
                FileKind::History(h) => match settled.get(&h.branch) {
                    Some(Settled::Deleted { upto }) => h.term <= *upto,
                    Some(Settled::Live { term }) => h.term > *term,
                    _ => false,
                },
                // No writer is running while a partition opens: a temp file is debris.
                FileKind::Tmp(_) => true,
                _ => false,
            };
            if doomed {
                self.storage().delete(&path)?;
            }
        }
        // Every listed record was read (or is damaged, which `branches` leaves out too), and
        // every record written since went through the cache.
        self.terms.lock().complete = true;
        Ok(())
    }

    /// Brings `branch`'s `CURRENT_TERM` (`current`) in line with its manifests (`terms`,
    /// ascending, not empty) and says what of its files may go.
    pub(crate) fn settle(
        &self,
        branch: &BranchName,
        current: Option<CurrentTerm>,
        terms: &[Term],
    ) -> CatalogResult<Settled> {
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
    pub(crate) fn continue_from(
        &self,
        branch: &BranchName,
        recorded: Term,
        state: bough_manifest::ManifestState,
        incarnation: u64,
    ) -> CatalogResult<Settled> {
        let term = self.fresh_term(branch)?.max(recorded.saturating_add(1));
        let snapshot = state.to_snapshot();
        let exts = snapshot.extensions.clone();
        Head::create(
            self.files.clone(),
            self.cfg.clone(),
            branch.clone(),
            term,
            Some(&ForkPoint::checkpointed(snapshot)),
            exts,
        )?;
        self.owned.lock().insert((branch.clone(), term));
        self.write_term_record(branch, term, false, incarnation)?;
        Ok(Settled::Live { term })
    }
}
