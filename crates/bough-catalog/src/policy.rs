//! Protected branches and branch expiry: the `POLICY` extension of a branch's manifest
//! (`bough_manifest::BranchPolicy`).
//!
//! A protected branch refuses deletion, reset, restore and merges into it that are not
//! fast-forwards, with `InvalidArgument` (the call is refused as asked; nothing is wrong
//! with storage, and retrying cannot help until the branch is unprotected). An expiring
//! branch is deleted, as a user would delete it, once the store clock passes its expiry:
//! its children keep working (deletion never breaks children). A protected branch, a branch
//! with tags and `main` (which cannot be deleted) get an expiry only when asked explicitly
//! (`force`); a forced expiry deletes a protected branch too, since that was asked for.
//!
//! Setting a policy is one metadata record in the branch's manifest (run in its write
//! queue), durable before the call returns. The catalog keeps the expiries of the
//! partition's branches in memory (read once from every manifest, at open or first use),
//! so the maintenance tick finds the due ones without reading manifests.

use super::*;
use crate::error::{CatalogError, CatalogResult};
use bough_manifest::{BranchPolicy, POLICY};

impl Partition {
    /// The policy `head`'s manifest records.
    pub fn policy(head: &Head) -> CatalogResult<BranchPolicy> {
        BranchPolicy::from_extensions(head.extensions()).map_err(|r| {
            CatalogError::corruption(head.manifest_path(), 0, format!("policy extension: {r:?}"))
        })
    }

    /// The policy a live branch's manifest records (read from storage).
    pub fn branch_policy(&self, name: &BranchName) -> CatalogResult<BranchPolicy> {
        let term = self.live_term(name)?;
        let state = self.manifest_state(name, term)?;
        BranchPolicy::from_extensions(&state.extensions).map_err(|r| {
            CatalogError::corruption(
                self.files
                    .path_of(&ManifestName::new(name.clone(), term).to_string()),
                0,
                format!("policy extension: {r:?}"),
            )
        })
    }

    /// Refuses `what` on a protected branch.
    pub(crate) fn refuse_if_protected(
        policy: BranchPolicy,
        branch: &BranchName,
        what: &str,
    ) -> CatalogResult<()> {
        if policy.protected {
            return Err(CatalogError::InvalidArgument {
                what: format!(
                    "branch {branch} is protected: {what} is refused until it is unprotected \
                     (`bough branch unprotect {branch}`)"
                ),
            });
        }
        Ok(())
    }

    /// [`refuse_if_protected`](Self::refuse_if_protected) for a head.
    pub(crate) fn refuse_if_head_protected(head: &Head, what: &str) -> CatalogResult<()> {
        Self::refuse_if_protected(Self::policy(head)?, head.branch(), what)
    }

    fn set_policy(&self, head: &mut Head, policy: BranchPolicy, now_ms: u64) -> CatalogResult<()> {
        head.stage_extension(POLICY, policy.encode());
        head.checkpoint(now_ms)?;
        self.note_expiry(head.branch(), policy.expires_at_ms);
        Ok(())
    }

    /// Protects or unprotects `head`'s branch. Returns the policy now recorded; writes
    /// nothing when it is already so.
    pub fn set_protected(
        &self,
        head: &mut Head,
        protected: bool,
        now_ms: u64,
    ) -> CatalogResult<BranchPolicy> {
        let mut policy = Self::policy(head)?;
        if policy.protected == protected {
            return Ok(policy);
        }
        policy.protected = protected;
        self.set_policy(head, policy, now_ms)?;
        Ok(policy)
    }

    /// Gives `head`'s branch an expiry (`None`: never expires). A protected branch, one with
    /// tags and `main` are refused unless `force`; `main` is refused even then, since it
    /// cannot be deleted.
    pub fn set_expiry(
        &self,
        head: &mut Head,
        expires_at_ms: Option<u64>,
        force: bool,
        now_ms: u64,
    ) -> CatalogResult<BranchPolicy> {
        let mut policy = Self::policy(head)?;
        let branch = head.branch().clone();
        if expires_at_ms.is_some() {
            if branch.is_main() {
                return Err(CatalogError::InvalidArgument {
                    what: "the main branch cannot be deleted, so it cannot expire".into(),
                });
            }
            if !force {
                if policy.protected {
                    return Err(CatalogError::InvalidArgument {
                        what: format!(
                            "branch {branch} is protected: it gets an expiry only when asked \
                             explicitly (--force), and is then deleted when it expires"
                        ),
                    });
                }
                let tags = self.tags_of(&branch)?;
                if !tags.is_empty() {
                    let names: Vec<String> = tags.iter().map(ToString::to_string).collect();
                    return Err(CatalogError::InvalidArgument {
                        what: format!(
                            "branch {branch} has tags ({}): it gets an expiry only when asked \
                             explicitly (--force); the tags stay when it expires",
                            names.join(", ")
                        ),
                    });
                }
            }
        }
        if policy.expires_at_ms == expires_at_ms {
            return Ok(policy);
        }
        let (old, new) = (
            ExpiryHint::of(policy.expires_at_ms),
            ExpiryHint::of(expires_at_ms),
        );
        policy.expires_at_ms = expires_at_ms;
        // The `CURRENT_TERM` hint is never later than the manifest's expiry, whichever of
        // the two writes a crash leaves durable: an earlier expiry goes to the hint first,
        // a later one (or none) to the manifest first.
        let hint = |p: &Self, head: &Head| {
            p.write_term_record_hinted(
                &branch,
                head.term(),
                false,
                head.incarnation(),
                Some(new),
                RecordEntry::Synced,
            )
        };
        let sooner = new.earlier(old) != old;
        if sooner && self.keeps_expiry_hints() {
            hint(self, head)?;
        }
        self.set_policy(head, policy, now_ms)?;
        if !sooner && self.keeps_expiry_hints() {
            hint(self, head)?;
        }
        Ok(policy)
    }

    /// Remembers a branch's expiry (`None`: none) once the expiries are known.
    pub(crate) fn note_expiry(&self, branch: &BranchName, at: Option<u64>) {
        if let Some(map) = self.expiries.lock().as_mut() {
            match at {
                Some(at) => {
                    map.insert(branch.clone(), at);
                }
                None => {
                    map.remove(branch);
                }
            }
        }
    }

    /// The live branches whose expiry may be at or before `now_ms` (the caller deletes them
    /// through [`delete_expired_branch`](Self::delete_expired_branch), which reads the
    /// manifest again). The first call takes the expiries from the `CURRENT_TERM` records
    /// recovery read at open, and reads only the manifests of branches whose record has no
    /// hint; later calls look at what the catalog remembers. A branch whose manifest cannot
    /// be read is left out (it is reported where it is used).
    pub fn due_expiries(&self, now_ms: u64) -> CatalogResult<Vec<BranchName>> {
        if self.expiries.lock().is_none() {
            let map = self.expiries_from_records()?;
            let mut known = self.expiries.lock();
            if known.is_none() {
                *known = Some(map);
            }
        }
        Ok(self
            .expiries
            .lock()
            .iter()
            .flatten()
            .filter(|(_, at)| **at <= now_ms)
            .map(|(b, _)| b.clone())
            .collect())
    }

    /// Every live branch's expiry at its earliest: its `CURRENT_TERM` hint, or its
    /// manifest's `POLICY` where the record has none (read on a few threads).
    fn expiries_from_records(&self) -> CatalogResult<std::collections::BTreeMap<BranchName, u64>> {
        let mut map = std::collections::BTreeMap::new();
        let mut unknown = Vec::new();
        for b in self.branches()? {
            match self.current_term(&b) {
                Ok(Some(ct)) if !ct.deleted => match ct.expiry {
                    ExpiryHint::Never => {}
                    ExpiryHint::NotBefore(at) => {
                        map.insert(b, at);
                    }
                    ExpiryHint::Unknown => unknown.push(b),
                },
                _ => unknown.push(b),
            }
        }
        let read = bough_io::fan_out::map_parallel(&unknown, |b| self.branch_policy(b));
        for (b, policy) in unknown.into_iter().zip(read) {
            match policy {
                Ok(BranchPolicy {
                    expires_at_ms: Some(at),
                    ..
                }) => {
                    map.insert(b, at);
                }
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::Corruption | ErrorKind::NotFound) => {
                    tracing::warn!(branch = %b, error = %e, "cannot read the branch's expiry");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(map)
    }

    /// Deletes `name` because it expired, as [`delete_branch`](Self::delete_branch) would,
    /// but without the protection check (an expiry on a protected branch was asked for
    /// explicitly). Its manifest is read again first: an expiry extended since the caller
    /// looked keeps the branch (`Ok(false)`).
    pub fn delete_expired_branch(&self, name: &BranchName, now_ms: u64) -> CatalogResult<bool> {
        match self.branch_policy(name)?.expires_at_ms {
            Some(at) if at <= now_ms => {}
            other => {
                self.note_expiry(name, other);
                return Ok(false);
            }
        }
        self.delete_branch_unchecked(name)?;
        Ok(true)
    }
}
