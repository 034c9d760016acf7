//! Branch lifecycle: creating a branch from another, deleting it, and opening a branch at a
//! new term.

use super::*;
use crate::error::{CatalogError, CatalogResult};

impl Partition {
    pub(crate) fn check_new_name(&self, name: &BranchName) -> CatalogResult<Term> {
        // Branches and tags share one name space: the same name, or one differing only by
        // case, is refused whichever holds it.
        self.check_name_free(name)?;
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
    ) -> CatalogResult<Head> {
        let term = self.check_new_name(name)?;
        let fork = parent.fork_by_reference(now_ms)?;
        let origin = BranchOrigin {
            parent: Some((parent.branch().clone(), parent.term())),
            fork_version: parent.version(),
            created_at_ms: now_ms,
        };
        self.create_from(fork, name, term, origin, None, None)
    }

    /// [`create_branch`](Self::create_branch) with a policy (an expiry given at creation)
    /// in its first manifest, so the branch never exists without it.
    pub fn create_branch_with_policy(
        &self,
        parent: &mut Head,
        name: &BranchName,
        policy: bough_manifest::BranchPolicy,
        now_ms: u64,
    ) -> CatalogResult<Head> {
        let term = self.check_new_name(name)?;
        let fork = parent.fork_by_reference(now_ms)?;
        let origin = BranchOrigin {
            parent: Some((parent.branch().clone(), parent.term())),
            fork_version: parent.version(),
            created_at_ms: now_ms,
        };
        let head = self.create_from(fork, name, term, origin, None, Some(policy))?;
        self.note_expiry(name, policy.expires_at_ms);
        Ok(head)
    }

    /// [`create_from`](Self::create_from) a checkpointed state (an archive, a tag, a
    /// point in history), with no staging purpose and no policy.
    pub(crate) fn create_checkpointed(
        &self,
        snapshot: bough_manifest::Snapshot,
        name: &BranchName,
        term: Term,
        origin: BranchOrigin,
    ) -> CatalogResult<Head> {
        self.create_from(
            ForkPoint::checkpointed(snapshot),
            name,
            term,
            origin,
            None,
            None,
        )
    }

    pub(crate) fn create_from(
        &self,
        fork: ForkPoint,
        name: &BranchName,
        term: Term,
        origin: BranchOrigin,
        staging: Option<&str>,
        policy: Option<bough_manifest::BranchPolicy>,
    ) -> CatalogResult<Head> {
        let mut exts = Vec::new();
        origin.store(&mut exts);
        if let Some(p) = policy {
            p.store(&mut exts);
        }
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
            let bases = [bough_manifest::MergeBase {
                branch: parent.clone(),
                recorded_at_ms: origin.created_at_ms,
                state: crate::merge::base_state(&fork.snapshot),
            }];
            let bytes = bough_manifest::encode_merge_bases(&bases).map_err(|e| {
                CatalogError::InvalidArgument {
                    what: format!("cannot encode the merge base of {name}: {e}"),
                }
            })?;
            bough_manifest::ext::set(&mut exts, bough_manifest::MERGE_BASES, bytes);
        }
        // Manifest first, CURRENT_TERM second: a crash in between is finished by `recover`.
        // The record is written and synced while the manifest is (renamed into place only
        // after it is durable), as `point_current_term` will write it.
        let hint = Some(crate::terms::expiry_hint(&exts));
        let (record_path, record) = self.term_record(name, term, false, incarnation, hint);
        let (created, staged) = self.with_record_staged(&record_path, &record.encode(), || {
            Head::create(
                self.files.clone(),
                self.cfg.clone(),
                name.clone(),
                term,
                Some(&fork),
                exts,
            )
        });
        // A staged record that will not be installed leaves no temporary file behind.
        let discard = |staged: Option<bough_io::Staged>| {
            if let Some(s) = staged {
                self.storage().discard_staged(s);
            }
        };
        let mut head = match created {
            Ok(head) => head,
            Err(e) => {
                discard(staged);
                return Err(e.into());
            }
        };
        // The branch's history starts with its first state.
        // A new incarnation: nothing before it to account for.
        let before = head.version();
        let point = match self.first_history_point(&mut head, origin.created_at_ms, before) {
            Ok(point) => point,
            Err(e) => {
                discard(staged);
                return Err(e);
            }
        };
        self.owned.lock().insert((name.clone(), term));
        // The record's directory entry is left to the next directory sync: the manifest is
        // durable, and recovery settles a lost or stale record of a new branch from it
        // (`settle`: the newest manifest is newer than the record, or there is none). One
        // directory sync fewer per creation (see ARCHITECTURE.md, "Branch creation").
        self.name_term(&head, incarnation, point, RecordEntry::Unsynced(staged))?;
        // A reused name still has its deleted incarnation's fence (u64::MAX). The new term is
        // above every term of that incarnation, so setting the fence to it keeps their heads
        // fenced and lets this one commit.
        let fence = self.fence(name, term);
        fence.store(term, Ordering::Release);
        head.set_fence(fence);
        Ok(head)
    }

    /// Runs `create` (which writes the new branch's manifest) while `record` is staged for
    /// `path` (`Storage::stage_atomic`): on a thread of its own on local disks, where the two
    /// files' syncs then overlap (one sync fewer in series per creation); not at all
    /// elsewhere (the memory backend's sync points stay in one deterministic order). A
    /// staging that failed is not retried: the record is written as usual, which reports
    /// the failure if it persists (a failed sync has poisoned the storage).
    fn with_record_staged<T>(
        &self,
        path: &str,
        record: &[u8],
        create: impl FnOnce() -> T,
    ) -> (T, Option<bough_io::Staged>) {
        let storage = self.storage();
        if !matches!(
            storage.kind(),
            bough_io::BackendKind::Pread | bough_io::BackendKind::IoUring
        ) {
            return (create(), None);
        }
        std::thread::scope(|s| {
            let staging = s.spawn(|| storage.stage_atomic(path, record));
            let created = create();
            let staged = match staging.join() {
                Ok(Ok(staged)) => Some(staged),
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, path, "staging a CURRENT_TERM record failed");
                    None
                }
                Err(panic) => std::panic::resume_unwind(panic),
            };
            (created, staged)
        })
    }

    /// Deletes a branch: a tombstone `CURRENT_TERM` first (the branch is gone from then on),
    /// then its manifests and archives. Data files stay for GC; its tags stay. `main` and a
    /// protected branch cannot be deleted (a branch whose manifest is damaged cannot be
    /// shown protected and can be deleted: that is how it is got rid of). The caller must
    /// have stopped the branch's writer.
    pub fn delete_branch(&self, name: &BranchName) -> CatalogResult<()> {
        match self.branch_policy(name) {
            Ok(p) => Self::refuse_if_protected(p, name, "deleting it")?,
            // A missing branch is reported by the deletion itself; a damaged or missing
            // manifest cannot show the branch protected.
            Err(e) if matches!(e.kind(), ErrorKind::Corruption | ErrorKind::NotFound) => {
                if self.live_term(name).is_ok() {
                    tracing::warn!(branch = %name, error = %e,
                        "deleting a branch whose manifest cannot be read (its protection is unknown)");
                }
            }
            Err(e) => return Err(e),
        }
        self.delete_branch_unchecked(name)
    }

    /// [`delete_branch`](Self::delete_branch) without the protection check.
    pub(crate) fn delete_branch_unchecked(&self, name: &BranchName) -> CatalogResult<()> {
        if name.is_main() {
            return Err(CatalogError::InvalidArgument {
                what: "the main branch cannot be deleted".into(),
            });
        }
        let term = self.live_term(name)?;
        self.write_current_term(name, term, true)?;
        self.fence(name, term).store(u64::MAX, Ordering::Release);
        // Archives and history points first, then manifests oldest term first: a deletion cut short leaves the
        // manifest at the tombstone's term, which recovery recognises as this incarnation's.
        let mut doomed: Vec<(u8, Term, String)> = Vec::new();
        for n in self.storage().list(self.files.dir())? {
            match classify(&n) {
                FileKind::Archive(a) if a.branch == *name => doomed.push((0, a.term, n)),
                FileKind::History(h) if h.branch == *name => doomed.push((0, h.term, n)),
                FileKind::Manifest(m) if m.branch == *name => doomed.push((1, m.term, n)),
                _ => {}
            }
        }
        doomed.sort();
        self.note_expiry(name, None);
        for (_, _, n) in doomed {
            self.storage().delete(&self.files.path_of(&n))?;
        }
        Ok(self.storage().sync_dir(self.files.dir())?)
    }

    /// Opens `name` at the next term (a new owner takes over): a new manifest inheriting the
    /// old one's state, then `CURRENT_TERM`; the old term's head is fenced from then on.
    ///
    /// In cloud mode a failure may come after the next term's manifest exists: the next
    /// owner adopts it and would not see a commit `old` made now (found by the harness's
    /// object-store crashes: acknowledged, then lost), so `old` is poisoned. (A local
    /// open's recovery goes by `CURRENT_TERM`, and `old` goes on.)
    pub fn open_new_term(&self, old: &mut Head, now_ms: u64) -> CatalogResult<Head> {
        let cloud = self.storage().kind() == bough_io::BackendKind::Object;
        self.open_new_term_unguarded(old, now_ms).inspect_err(|e| {
            if cloud {
                old.poison(format!("opening a new term failed: {e}"));
            }
        })
    }

    fn open_new_term_unguarded(&self, old: &mut Head, now_ms: u64) -> CatalogResult<Head> {
        let name = old.branch().clone();
        let new_term = old.term() + 1;
        let mut fork = old.new_term_point(now_ms)?;
        fork.snapshot.max_file_id = old.max_file_id();
        let exts = fork.snapshot.extensions.clone();
        let inherits_log = bough_manifest::ext::get(&exts, bough_manifest::LOG).is_some();
        let mut head = Head::create(
            self.files.clone(),
            self.cfg.clone(),
            name.clone(),
            new_term,
            Some(&fork),
            exts,
        )?;
        if inherits_log {
            // The new manifest names the old term's log: open it as any head is opened, so
            // the buffer holds those commits until the new term's first checkpoint.
            drop(head);
            head = Head::open(self.files.clone(), self.cfg.clone(), name.clone(), new_term)?;
        }
        self.owned.lock().insert((name.clone(), new_term));
        self.point_current_term(&head, old.incarnation(), RecordEntry::Synced)?;
        head.set_fence(self.fence(&name, new_term));
        // The old term's manifest is superseded; its files stay reachable through the new one.
        self.storage().delete(
            &self
                .files
                .path_of(&ManifestName::new(name, new_term - 1).to_string()),
        )?;
        Ok(head)
    }
}
