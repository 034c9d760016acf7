//! Staging branches: the work of one command (an `import`, an atomic `load`) until it is
//! merged into its target and deleted.
//!
//! A staging branch is marked twice: its name starts with one of [`STAGING_PREFIXES`] (so
//! finding the candidates costs a directory listing, not a manifest read per branch), and
//! its first manifest carries the `STAGING` extension (the durable proof: a user's branch
//! that merely has such a name is never taken for one). Only a dead command leaves one
//! behind: on local storage one process writes at a time, so when a writer opens a
//! partition, every staging branch is an interrupted command's, and it is removed.

use crate::error::{CatalogError, CatalogResult};
use bough_manifest::BranchOrigin;
use bough_names::BranchName;
use bough_tree::head::Head;

use crate::Partition;

/// Name prefixes of staging branches.
pub const STAGING_PREFIXES: &[&str] = &["import-", "load-", "pitr-"];

/// Whether `name` can be a staging branch's (its manifest says whether it is).
pub fn is_staging_name(name: &str) -> bool {
    STAGING_PREFIXES.iter().any(|p| name.starts_with(p))
}

impl Partition {
    /// Creates the staging branch `name` at `parent`'s latest commit, marked with
    /// `purpose` in its first manifest (run in the parent's write queue, as
    /// [`create_branch`](Self::create_branch)). `name` must start with one of
    /// [`STAGING_PREFIXES`].
    pub fn create_staging_branch(
        &self,
        parent: &mut Head,
        name: &BranchName,
        purpose: &str,
        now_ms: u64,
    ) -> CatalogResult<Head> {
        if !is_staging_name(name.as_str()) {
            return Err(CatalogError::InvalidArgument {
                what: format!(
                    "a staging branch's name starts with one of {STAGING_PREFIXES:?}, not {name}"
                ),
            });
        }
        let term = self.check_new_name(name)?;
        let fork = parent.fork_point(now_ms)?;
        let origin = BranchOrigin {
            parent: Some((parent.branch().clone(), parent.term())),
            fork_version: parent.version(),
            created_at_ms: now_ms,
        };
        self.create_from(fork, name, term, origin, Some(purpose), None)
    }

    /// The live staging branches and what each stages. A branch whose manifest cannot be
    /// read is left out (it is reported when used, and `verify` names it).
    pub fn staging_branches(&self) -> CatalogResult<Vec<(BranchName, String)>> {
        let mut out = Vec::new();
        for b in self.branches()? {
            if !is_staging_name(b.as_str()) {
                continue;
            }
            if let Ok(info) = self.describe(&b)
                && let Some(purpose) = info.staging
            {
                out.push((b, purpose));
            }
        }
        Ok(out)
    }
}
