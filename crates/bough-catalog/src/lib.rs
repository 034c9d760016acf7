//! Bough: the branches of a partition — their `CURRENT_TERM` records, their manifests and
//! the heads that write them.
//!
//! A partition directory holds, per branch, `CURRENT_TERM.<branch>` (the branch's current
//! term, or a tombstone after deletion) and `manifest_<branch>_<term>`. Opening a branch reads
//! its term and replays that manifest.

use std::sync::Arc;

use bough_io::{ErrorKind, IoError, IoResult, Storage};
use bough_manifest::CurrentTerm;
use bough_names::{
    BranchName, CurrentTermName, FileKind, ManifestName, PartitionDir, Term, classify,
};
use bough_tree::cache::PageCache;
use bough_tree::files::FileTable;
use bough_tree::head::{Head, HeadConfig};

/// One partition directory and its branches.
#[derive(Debug)]
pub struct Partition {
    dir: PartitionDir,
    files: Arc<FileTable>,
    cfg: HeadConfig,
}

impl Partition {
    /// Opens partition `dir`; with `create`, makes the directory and the `main` branch if
    /// they do not exist. Without it, a missing partition is `NotFound`.
    pub fn open(
        storage: Arc<dyn Storage>,
        dir: PartitionDir,
        cfg: HeadConfig,
        cache: Arc<PageCache>,
        cache_data_pages: bool,
        create: bool,
    ) -> IoResult<Partition> {
        let path = dir.to_string();
        let exists = storage.list_dirs()?.contains(&path);
        if !exists {
            if !create {
                return Err(IoError::NotFound { path });
            }
            storage.create_dir(&path)?;
        }
        let files = Arc::new(FileTable::new(
            storage,
            path,
            cfg.page_size,
            cache,
            cache_data_pages,
        ));
        let p = Partition { dir, files, cfg };
        let main = BranchName::main();
        match p.current_term(&main)? {
            Some(_) => {}
            None => {
                // A manifest without CURRENT_TERM is a creation interrupted between its two
                // steps: finish it. Otherwise create main from nothing.
                let latest = p.latest_manifest_term(&main)?;
                match latest {
                    Some(term) => p.write_current_term(&main, term, false)?,
                    None if create || exists => {
                        Head::create(
                            p.files.clone(),
                            p.cfg.clone(),
                            main.clone(),
                            0,
                            None,
                            Vec::new(),
                        )
                        .or_else(|e| {
                            if e.kind() == ErrorKind::AlreadyExists {
                                Head::open(p.files.clone(), p.cfg.clone(), main.clone(), 0)
                            } else {
                                Err(e)
                            }
                        })?;
                        p.write_current_term(&main, 0, false)?;
                    }
                    None => {}
                }
            }
        }
        Ok(p)
    }

    /// The partition's name.
    pub fn dir(&self) -> &PartitionDir {
        &self.dir
    }

    /// The partition's data files.
    pub fn files(&self) -> &Arc<FileTable> {
        &self.files
    }

    /// The head configuration.
    pub fn config(&self) -> &HeadConfig {
        &self.cfg
    }

    fn storage(&self) -> &Arc<dyn Storage> {
        self.files.storage()
    }

    /// The branch's `CURRENT_TERM` record, if the file exists.
    pub fn current_term(&self, branch: &BranchName) -> IoResult<Option<CurrentTerm>> {
        let path = self
            .files
            .path_of(&CurrentTermName::new(branch.clone()).to_string());
        match self.storage().read_file(&path, 4096) {
            Ok(bytes) => CurrentTerm::decode(&bytes)
                .map(Some)
                .map_err(|e| IoError::corruption(path, e.offset, e.to_string())),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Durably replaces the branch's `CURRENT_TERM` record.
    pub fn write_current_term(
        &self,
        branch: &BranchName,
        term: Term,
        deleted: bool,
    ) -> IoResult<()> {
        let path = self
            .files
            .path_of(&CurrentTermName::new(branch.clone()).to_string());
        self.storage()
            .write_atomic(&path, &CurrentTerm { term, deleted }.encode())
    }

    /// The highest term of any manifest of `branch` in the directory.
    pub fn latest_manifest_term(&self, branch: &BranchName) -> IoResult<Option<Term>> {
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

    /// Opens the writer of a live branch at its current term.
    pub fn open_head(&self, branch: &BranchName) -> IoResult<Head> {
        let term = self.live_term(branch)?;
        Head::open(self.files.clone(), self.cfg.clone(), branch.clone(), term)
    }

    /// The current term of a live branch; `NotFound` for a missing or deleted branch.
    pub fn live_term(&self, branch: &BranchName) -> IoResult<Term> {
        match self.current_term(branch)? {
            Some(ct) if !ct.deleted => Ok(ct.term),
            _ => Err(IoError::NotFound {
                path: format!("{}@{}", self.dir, branch),
            }),
        }
    }

    /// Names of the live branches.
    pub fn branches(&self) -> IoResult<Vec<BranchName>> {
        let mut out = Vec::new();
        for name in self.storage().list(self.files.dir())? {
            if let FileKind::CurrentTerm(ct) = classify(&name)
                && self.current_term(&ct.branch)?.is_some_and(|c| !c.deleted)
            {
                out.push(ct.branch);
            }
        }
        out.sort();
        Ok(out)
    }

    /// The manifest name of a branch at a term.
    pub fn manifest_name(branch: &BranchName, term: Term) -> ManifestName {
        ManifestName::new(branch.clone(), term)
    }
}
