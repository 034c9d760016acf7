//! Protected branches and branch expiry from the facade (`bough_catalog`'s `policy`
//! module holds the rules).
//!
//! Expiry runs on the store clock: at partition open (local storage, writable stores) and
//! on every maintenance tick, a branch whose expiry has passed is deleted the way
//! [`PartitionHandle::delete_branch`] deletes it — tombstone, manifests, the merge bases
//! naming it dropped from the other branches — so its children keep every key.

use super::*;

pub use bough_catalog::BranchPolicy;

impl PartitionHandle {
    fn update_policy(
        &self,
        name: &str,
        change: impl FnOnce(&Partition, &mut Head, u64) -> bough_io::IoResult<BranchPolicy>
        + Send
        + 'static,
    ) -> Result<BranchPolicy> {
        let branch = self.branch(name)?;
        let entry = self.entry()?;
        let out: Arc<Mutex<Option<BranchPolicy>>> = Arc::new(Mutex::new(None));
        let slot = out.clone();
        branch.run(Box::new(move |head, now| {
            *slot.lock() = Some(change(&entry.part, head, now)?);
            Ok(())
        }))?;
        let policy = out.lock().take();
        policy.ok_or_else(|| Error::new(ErrorKind::Io, "no policy reported").at(branch.label()))
    }

    /// Protects branch `name` (`main` too): until [`unprotect`](Self::unprotect), deleting
    /// it, resetting it, restoring it from an archive and merging into it other than by a
    /// fast-forward are refused with `InvalidArgument`. Durable when it returns.
    pub fn protect(&self, name: &str) -> Result<BranchPolicy> {
        self.update_policy(name, |part, head, now| part.set_protected(head, true, now))
    }

    /// Lifts [`protect`](Self::protect).
    pub fn unprotect(&self, name: &str) -> Result<BranchPolicy> {
        self.update_policy(name, |part, head, now| part.set_protected(head, false, now))
    }

    /// Sets when branch `name` expires (ms since the epoch on the store clock; `None`: never),
    /// replacing any earlier expiry (so this also extends one). Once the store clock passes
    /// it the branch is deleted as [`delete_branch`](Self::delete_branch) deletes it; its
    /// children and its tags stay. `main` cannot expire; a protected branch or one with tags
    /// gets an expiry only with `force` (`InvalidArgument` otherwise), and a forced expiry
    /// deletes it even while protected.
    pub fn set_expiry(
        &self,
        name: &str,
        expires_at_ms: Option<u64>,
        force: bool,
    ) -> Result<BranchPolicy> {
        self.update_policy(name, move |part, head, now| {
            part.set_expiry(head, expires_at_ms, force, now)
        })
    }

    /// [`set_expiry`](Self::set_expiry) at `ttl_ms` after now on the store clock.
    pub fn set_expiry_in(&self, name: &str, ttl_ms: u64, force: bool) -> Result<BranchPolicy> {
        let at = self.store.inner.clock.now_ms().saturating_add(ttl_ms);
        self.set_expiry(name, Some(at), force)
    }

    /// [`create_branch`](Self::create_branch) with an expiry `ttl_ms` after now (store
    /// clock), recorded in the branch's first manifest.
    pub fn create_branch_with_ttl(&self, name: &str, from: &str, ttl_ms: u64) -> Result<Branch> {
        let label = format!("{}@{name}", self.dir);
        let bname = BranchName::new(name).map_err(|e| Error::from(e).at(&label))?;
        let parent = self.branch(from)?;
        let entry = self.entry()?;
        let store = self.store.clone();
        let dir = self.dir.clone();
        let created: Arc<Mutex<Option<Arc<BranchEntry>>>> = Arc::new(Mutex::new(None));
        let out = created.clone();
        parent
            .run(Box::new(move |head, now| {
                let _catalog = entry.catalog_change();
                let policy = BranchPolicy {
                    protected: false,
                    expires_at_ms: Some(now.saturating_add(ttl_ms)),
                };
                let new_head = entry
                    .part
                    .create_branch_with_policy(head, &bname, policy, now)
                    .map_err(|e| Error::from(e).at(format!("{dir}@{bname}")))?;
                let b = store.register(new_head, &dir);
                entry.branches.lock().insert(bname, b.clone());
                *out.lock() = Some(b);
                Ok(())
            }))
            .map_err(|e| e.at(&label))?;
        let entry = created.lock().take().ok_or_else(|| {
            Error::new(ErrorKind::Io, "branch creation reported no branch").at(&label)
        })?;
        self.store.evict_idle_branches();
        Ok(Branch {
            store: self.store.clone(),
            entry,
        })
    }

    /// Deletes every branch of the partition whose expiry is at or before the store clock's
    /// now; returns their names. What maintenance runs on every tick.
    pub fn expire_branches(&self) -> Result<Vec<String>> {
        self.store.check_writable()?;
        let entry = self.entry()?;
        let now = self.store.inner.clock.now_ms();
        let due = entry
            .part
            .due_expiries(now)
            .map_err(|e| Error::from(e).at(&self.dir))?;
        let mut deleted = Vec::new();
        for name in due {
            match self.delete_branch_as(name.as_str(), true) {
                Ok(true) => {
                    tracing::info!(partition = %self.dir, branch = %name, "branch expired and was deleted");
                    deleted.push(name.to_string());
                }
                Ok(false) => {}
                // Deleted meanwhile.
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(deleted)
    }
}

/// Expiry at partition open: deletes, through the catalog, every branch whose expiry has
/// passed (no head of the partition is open yet in this process, so nothing else must stop;
/// the merge bases naming a deleted branch are dropped when their heads open).
pub(super) fn expire_at_open(part: &Partition, now_ms: u64) {
    let due = match part.due_expiries(now_ms) {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(partition = %part.dir(), error = %e, "cannot read branch expiries");
            return;
        }
    };
    for b in due {
        match part.delete_expired_branch(&b, now_ms) {
            Ok(true) => {
                tracing::info!(partition = %part.dir(), branch = %b, "branch expired and was deleted");
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(partition = %part.dir(), branch = %b, error = %e,
                    "cannot delete an expired branch");
            }
        }
    }
}
