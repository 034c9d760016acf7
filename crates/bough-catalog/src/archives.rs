//! Archives of a branch: taking, listing, pruning and reading them, branching from one, and
//! restoring a branch from one.

use super::*;
use crate::error::{CatalogError, CatalogResult};

impl Partition {
    pub(crate) fn read_archive_state(
        &self,
        a: &ArchiveName,
    ) -> CatalogResult<bough_manifest::ManifestState> {
        let path = self.files.path_of(&a.to_string());
        let bytes = self.storage().read_file(&path, MAX_MANIFEST_BYTES)?;
        replay(&bytes)
            .map(|r| r.state)
            .map_err(|e| CatalogError::record(path, e))
    }

    /// Writes the head's current state as `manifest_<branch>_<term>_<ts>` (never overwriting
    /// an existing archive).
    pub fn archive(
        &self,
        head: &mut Head,
        ts: Timestamp,
        now_ms: u64,
    ) -> CatalogResult<ArchiveName> {
        let mut fork = head.fork_point(now_ms)?;
        // Nothing merges from an archive (a restore or a point-in-time branch starts with
        // bases of its own), and GC keeps every state an archive's bases reference: they
        // would pin other branches' old versions for as long as the archive lives.
        bough_manifest::ext::remove(&mut fork.snapshot.extensions, bough_manifest::MERGE_BASES);
        // Protection and expiry are decisions about the branch, not about its archives.
        bough_manifest::ext::remove(&mut fork.snapshot.extensions, bough_manifest::POLICY);
        let name = ArchiveName::new(head.branch().clone(), head.term(), ts);
        let bytes = encode_snapshot(&fork.snapshot).map_err(|e| CatalogError::InvalidArgument {
            what: format!("cannot encode archive {name}: {e}"),
        })?;
        self.storage()
            .create_new(&self.files.path_of(&name.to_string()), &bytes)?;
        Ok(name)
    }

    /// Archives of a branch, oldest first.
    pub fn archives(&self, branch: &BranchName) -> CatalogResult<Vec<ArchiveName>> {
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
    pub fn prune_archives(
        &self,
        branch: &BranchName,
        keep: usize,
    ) -> CatalogResult<Vec<ArchiveName>> {
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
    pub fn read_archive(&self, archive: &ArchiveName) -> CatalogResult<Snapshot> {
        let path = self.files.path_of(&archive.to_string());
        let bytes = self.storage().read_file(&path, MAX_MANIFEST_BYTES)?;
        let r = replay(&bytes).map_err(|e| CatalogError::record(path.clone(), e))?;
        if r.records != 1 {
            return Err(CatalogError::corruption(
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
    ) -> CatalogResult<Head> {
        let term = self.check_new_name(name)?;
        let snapshot = self.read_archive(archive)?;
        let origin = BranchOrigin {
            parent: Some((archive.branch.clone(), archive.term)),
            fork_version: 0,
            created_at_ms: now_ms,
        };
        self.create_checkpointed(snapshot, name, term, origin)
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
    ) -> CatalogResult<Head> {
        let name = head.branch().clone();
        if archive.branch != name {
            return Err(CatalogError::InvalidArgument {
                what: format!(
                    "archive {archive} belongs to branch {}, not {name}",
                    archive.branch
                ),
            });
        }
        Self::refuse_if_head_protected(head, "restoring it from an archive")?;
        let snapshot = self.read_archive(archive)?;
        self.restore_snapshot(head, snapshot, backup, now_ms)
    }

    /// Moves `head`'s branch to a new term whose manifest is `snapshot` (a recorded state
    /// of the branch), keeping the current state as branch `backup`. The caller checked
    /// that the branch may be restored.
    pub(crate) fn restore_snapshot(
        &self,
        head: &mut Head,
        mut snapshot: Snapshot,
        backup: &BranchName,
        now_ms: u64,
    ) -> CatalogResult<Head> {
        let name = head.branch().clone();
        let policy = Self::policy(head)?;
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
        // The same branch: its incarnation continues, and its expiry.
        bough_manifest::set_incarnation(&mut exts, head.incarnation());
        if policy != bough_manifest::BranchPolicy::default() {
            policy.store(&mut exts);
        }
        let mut restored = Head::create(
            self.files.clone(),
            self.cfg.clone(),
            name.clone(),
            new_term,
            Some(&ForkPoint::checkpointed(snapshot)),
            exts,
        )?;
        // The restored state is the branch's state from now on: its history says so.
        let point = self.first_history_point(&mut restored, now_ms, head.version())?;
        self.owned.lock().insert((name.clone(), new_term));
        self.name_term(&restored, head.incarnation(), point, RecordEntry::Synced)?;
        restored.set_fence(self.fence(&name, new_term));
        let _ = self.storage().delete(
            &self
                .files
                .path_of(&ManifestName::new(name, new_term - 1).to_string()),
        );
        Ok(restored)
    }
}
