//! Staging branches in the facade: creating them, and removing those interrupted commands
//! left behind (see `bough_catalog::STAGING_PREFIXES`).

use bough_catalog::Partition;

use super::{Branch, PartitionHandle};
use crate::error::{Error, Result};

/// Removes the staging branches of `part`. Called when a writer opens a local partition:
/// one process writes at a time there, so none of them belongs to a running command. A
/// failure is logged and leaves the branch for the next open: it must not stop the open.
pub(super) fn remove_interrupted(part: &Partition) -> Vec<(String, String)> {
    let found = match part.staging_branches() {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(partition = %part.dir(), error = %e, "cannot list staging branches");
            return Vec::new();
        }
    };
    let mut removed = Vec::new();
    for (branch, purpose) in found {
        match part.delete_branch(&branch) {
            Ok(()) => {
                tracing::warn!(partition = %part.dir(), branch = %branch, staged = %purpose,
                    "removed the staging branch of an interrupted command");
                removed.push((branch.to_string(), purpose));
            }
            Err(e) => {
                tracing::warn!(partition = %part.dir(), branch = %branch, error = %e,
                    "cannot remove the staging branch of an interrupted command");
            }
        }
    }
    removed
}

impl PartitionHandle {
    /// Creates the staging branch `name` from `from`, like
    /// [`create_branch`](Self::create_branch), durably marked as staging `purpose`: until
    /// it is deleted, listings report it, and if the process dies first the next writer
    /// to open the partition (or `bough gc`) removes it. `name` must start with one of
    /// `bough_catalog::STAGING_PREFIXES` (`import-`, `load-`).
    pub fn create_staging_branch(&self, name: &str, from: &str, purpose: &str) -> Result<Branch> {
        if !bough_catalog::is_staging_name(name) {
            return Err(Error::invalid(format!(
                "a staging branch's name starts with one of {:?}, not {name}",
                bough_catalog::STAGING_PREFIXES
            )));
        }
        self.create_branch_marked(name, from, Some(purpose.to_string()))
    }

    /// The live staging branches of the partition and what each stages.
    pub fn staging_branches(&self) -> Result<Vec<(String, String)>> {
        let e = self.entry()?;
        Ok(e.part
            .staging_branches()
            .map_err(|err| Error::from(err).at(&self.dir))?
            .into_iter()
            .map(|(b, p)| (b.to_string(), p))
            .collect())
    }

    /// The staging branches of interrupted commands this store removed when it opened the
    /// partition: (branch, what it staged).
    pub fn staging_removed(&self) -> Result<Vec<(String, String)>> {
        Ok(self.entry()?.staging_removed.clone())
    }
}
