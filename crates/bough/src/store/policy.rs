//! Protected branches and branch expiry from the facade (`bough_catalog`'s `policy`
//! module holds the rules).
//!
//! Expiry runs on the store clock: at partition open (local storage, writable stores) and
//! on every maintenance tick, a branch whose expiry has passed is deleted the way
//! [`PartitionHandle::delete_branch`] deletes it — tombstone, manifests, the merge bases
//! naming it dropped from the other branches — so its children keep every key.

use super::*;

/// A branch's policy: protected or not, and when it expires.
///
/// ```
/// use bough::{ErrorKind, Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// orders.branch("main")?.put_blocking("k", "v")?;
/// let policy = orders.protect("main")?;
/// assert!(policy.protected && policy.expires_at_ms.is_none());
/// // A protected branch refuses to be deleted until it is unprotected.
/// let refused = orders.delete_branch("main").unwrap_err();
/// assert_ne!(refused.kind(), ErrorKind::NotFound);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_catalog::BranchPolicy;

/// A change of a branch's policy, made in its write queue.
pub(super) enum PolicyChange {
    /// Protect (`true`) or unprotect it.
    Protected(bool),
    /// Set its expiry (`None`: never), `force` past the refusals.
    Expiry { at: Option<u64>, force: bool },
    /// Set its expiry `ttl_ms` after now, `force` past the refusals.
    ExpiryIn { ttl_ms: u64, force: bool },
}

/// The writer's side of a policy change.
pub(super) fn set_policy(
    head: &mut Head,
    now: u64,
    part: &PartitionEntry,
    change: PolicyChange,
) -> Result<BranchPolicy> {
    let p = &part.part;
    Ok(match change {
        PolicyChange::Protected(on) => p.set_protected(head, on, now)?,
        PolicyChange::Expiry { at, force } => p.set_expiry(head, at, force, now)?,
        PolicyChange::ExpiryIn { ttl_ms, force } => {
            p.set_expiry(head, Some(now.saturating_add(ttl_ms)), force, now)?
        }
    })
}

/// The writer's side of [`PartitionHandle::create_branch_with_ttl`].
pub(super) fn create_expiring(
    head: &mut Head,
    now: u64,
    part: &PartitionEntry,
    name: BranchName,
    ttl_ms: u64,
    shards: usize,
) -> Result<Arc<BranchEntry>> {
    let _catalog = part.catalog_change();
    let dir = part.part.dir();
    let policy = BranchPolicy {
        protected: false,
        expires_at_ms: Some(now.saturating_add(ttl_ms)),
    };
    let new_head = part
        .part
        .create_branch_with_policy(head, &name, policy, now)
        .map_err(|e| Error::from(e).at(format!("{dir}@{name}")))?;
    let b = new_branch_entry(new_head, dir, shards);
    part.branches.lock().insert(name, b.clone());
    Ok(b)
}

/// The writer's side of an expiry's deletion: as `writer_ops::delete`, once the catalog has
/// read the expiry again and found it passed.
pub(super) fn delete_expired(
    head: &mut Head,
    now: u64,
    branch: &BranchEntry,
    part: &PartitionEntry,
) -> Result<bool> {
    let _catalog = part.catalog_change();
    if !part.part.delete_expired_branch(&branch.name, now)? {
        return Ok(false);
    }
    head.retire();
    part.retired.lock().push(branch.published.clone());
    branch.gone.store(true, Ordering::Release);
    part.branches.lock().remove(&branch.name);
    Ok(true)
}

impl PartitionHandle {
    fn update_policy(&self, name: &str, change: PolicyChange) -> Result<BranchPolicy> {
        let branch = self.branch(name)?;
        let part = self.entry()?;
        branch.call(|reply| BranchOp::SetPolicy {
            part,
            change,
            reply,
        })
    }

    /// Protects branch `name` (`main` too): until [`unprotect`](Self::unprotect), deleting
    /// it, resetting it, restoring it from an archive and merging into it other than by a
    /// fast-forward are refused with `InvalidArgument`. Durable when it returns.
    pub fn protect(&self, name: &str) -> Result<BranchPolicy> {
        self.update_policy(name, PolicyChange::Protected(true))
    }

    /// Lifts [`protect`](Self::protect).
    pub fn unprotect(&self, name: &str) -> Result<BranchPolicy> {
        self.update_policy(name, PolicyChange::Protected(false))
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
        self.update_policy(
            name,
            PolicyChange::Expiry {
                at: expires_at_ms,
                force,
            },
        )
    }

    /// [`set_expiry`](Self::set_expiry) at `ttl_ms` after now on the store clock.
    pub fn set_expiry_in(&self, name: &str, ttl_ms: u64, force: bool) -> Result<BranchPolicy> {
        self.update_policy(name, PolicyChange::ExpiryIn { ttl_ms, force })
    }

    /// [`create_branch`](Self::create_branch) with an expiry `ttl_ms` after now (store
    /// clock), recorded in the branch's first manifest.
    pub fn create_branch_with_ttl(&self, name: &str, from: &str, ttl_ms: u64) -> Result<Branch> {
        let label = format!("{}@{name}", self.dir);
        let bname = BranchName::new(name).map_err(|e| Error::from(e).at(&label))?;
        let parent = self.branch(from)?;
        let part = self.entry()?;
        let entry = parent
            .call(|reply| BranchOp::CreateExpiring {
                part,
                name: bname,
                ttl_ms,
                reply,
            })
            .map_err(|e| e.at(&label))?;
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
