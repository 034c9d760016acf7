//! What `describe` tells about a branch: origin, term, archives, staging, protection and
//! expiry, tags and space.

use super::*;
use crate::error::{CatalogError, CatalogResult};

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
    /// Whether it is protected and when it expires (`POLICY`).
    pub policy: bough_manifest::BranchPolicy,
    /// The tags taken from it, by name.
    pub tags: Vec<BranchName>,
    /// What it costs on storage, when measured (the catalog alone does not measure: the
    /// store fills this in from GC's walk; `None` when the partition could not be walked).
    pub space: Option<BranchSpace>,
}

/// What a branch costs on storage, from GC's measuring walk (`bough_gc::branch_space`):
/// its data files and its write-ahead log files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BranchSpace {
    /// Bytes of the data and log files only this branch holds (its heads, archives and the
    /// merge bases naming it) and of its own files nothing references yet: what deleting
    /// the branch now and running GC frees.
    pub exclusive_bytes: u64,
    /// How many files that is.
    pub exclusive_files: u64,
    /// Bytes of the data and log files it holds together with other branches (kept if it
    /// goes).
    pub shared_bytes: u64,
    /// How many files that is.
    pub shared_files: u64,
    /// Per other branch, the bytes of the files this branch shares with it, by name.
    pub shared_with: Vec<(BranchName, u64)>,
    /// Of the bytes above, those in write-ahead log files: acknowledged writes not yet
    /// checkpointed into data files (and the laid-out space ahead of them).
    pub log_bytes: u64,
    /// What the history window costs this branch (`Options::history_window_ms`): its
    /// history points, and the bytes of the points and of the data and log files nothing
    /// but those points holds (what pruning them would free).
    pub history_points: u64,
    /// See `history_points`.
    pub history_bytes: u64,
}

impl Partition {
    /// Parent, term, creation time and archives of a live branch.
    pub fn describe(&self, name: &BranchName) -> CatalogResult<BranchInfo> {
        let term = self.live_term(name)?;
        let path = self
            .files
            .path_of(&ManifestName::new(name.clone(), term).to_string());
        let bytes = self.storage().read_file(&path, MAX_MANIFEST_BYTES)?;
        let state = replay(&bytes)
            .map_err(|e| CatalogError::record(path.clone(), e))?
            .state;
        let origin = BranchOrigin::from_extensions(&state.extensions).map_err(|r| {
            CatalogError::corruption(path.clone(), 0, format!("origin extension: {r:?}"))
        })?;
        let staging = bough_manifest::staging_purpose(&state.extensions)
            .map_err(|r| CatalogError::corruption(path.clone(), 0, r))?;
        let policy = bough_manifest::BranchPolicy::from_extensions(&state.extensions)
            .map_err(|r| CatalogError::corruption(path, 0, format!("policy extension: {r:?}")))?;
        Ok(BranchInfo {
            name: name.clone(),
            term,
            origin,
            archives: self.archives(name)?,
            staging,
            policy,
            tags: self.tags_of(name)?,
            space: None,
        })
    }
}
