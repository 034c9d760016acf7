//! Tags: immutable, named states of a branch, kept until deleted explicitly.
//!
//! A tag is one file, `tag_<name>`, holding one snapshot record: the branch's durable state
//! when the tag was taken (checkpointed, so it has no overlay), in the manifest format. Its
//! `ORIGIN` extension names the branch and term it was taken from, the branch's commit
//! version then (`fork_version`) and when (`created_at_ms`); its `MERGE_BASES` are the
//! branch's at that moment, so the tag can be a merge source like the branch was. The
//! branch's `POLICY` and `STAGING` are not carried: they are decisions about the branch.
//!
//! The record's branch file ranges carry each lineage's incarnation, so the tag reads its
//! pages whatever happens to the branch afterwards: GC walks tags as roots (they outlive the
//! branch they were taken from, which owns nothing of them), and deleting the branch leaves
//! them alone.
//!
//! Written with `create_new` (temporary file written and synced, renamed without
//! replacing, directory synced): a crash leaves no tag or the whole tag, and a leftover
//! temporary file is debris recovery deletes.
//!
//! Tags and branches share one name space ([`bough_names::alias_of`]): a tag and a branch
//! may not share a name, nor names that differ only in case.

use super::*;
use crate::error::{CatalogError, CatalogResult};

/// What `tag list` tells about a tag.
/// What holds a name in a partition's one name space of branches and tags
/// ([`Partition::name_holder`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameHolder {
    /// A live branch of that name or of one differing only by case.
    Branch(BranchName),
    /// A tag likewise.
    Tag(BranchName),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagInfo {
    /// The tag.
    pub name: BranchName,
    /// The branch it was taken from (which may have been deleted since).
    pub branch: BranchName,
    /// That branch's term when the tag was taken.
    pub term: Term,
    /// That branch's commit version when the tag was taken: what a read of the tag shows.
    pub version: u64,
    /// When the tag was taken (ms since the epoch, store clock).
    pub created_at_ms: u64,
}

impl Partition {
    /// The tags of the partition, by name. A writer on local storage holds the store lock,
    /// so only it changes them: the directory is listed once and the list kept (every branch
    /// creation asks, and must not list a partition of many branches each time). A reader,
    /// or a writer on shared storage, lists every time.
    pub fn tags(&self) -> CatalogResult<Vec<BranchName>> {
        let cache = !self.read_only && self.take_over.is_none();
        if cache && let Some(known) = self.known_tags.lock().as_ref() {
            return Ok(known.iter().cloned().collect());
        }
        let mut out: Vec<BranchName> = self
            .storage()
            .list(self.files.dir())?
            .iter()
            .filter_map(|n| match classify(n) {
                FileKind::Tag(t) => Some(t.tag),
                _ => None,
            })
            .collect();
        out.sort();
        if cache {
            *self.known_tags.lock() = Some(out.iter().cloned().collect());
        }
        Ok(out)
    }

    /// Keeps the cached tag list in line with a tag created (`true`) or deleted.
    fn note_tag(&self, name: &BranchName, exists: bool) {
        if let Some(known) = self.known_tags.lock().as_mut() {
            if exists {
                known.insert(name.clone());
            } else {
                known.remove(name);
            }
        }
    }

    /// The state tag `name` keeps (`NotFound` if there is no such tag).
    pub fn read_tag(&self, name: &BranchName) -> CatalogResult<Snapshot> {
        let path = self
            .files
            .path_of(&TagFileName::new(name.clone()).to_string());
        let bytes = self.storage().read_file(&path, MAX_MANIFEST_BYTES)?;
        let r = replay(&bytes)
            .map_err(|e| CatalogError::corruption(path.clone(), e.offset, e.to_string()))?;
        if r.records != 1 {
            return Err(CatalogError::corruption(
                path,
                0,
                "a tag holds exactly one snapshot record",
            ));
        }
        let snap = r.state.to_snapshot();
        if !snap.overlay.is_empty() {
            return Err(CatalogError::corruption(
                path,
                0,
                "a tag's state is checkpointed: it has no mapping overlay",
            ));
        }
        Ok(snap)
    }

    /// Where tag `name` came from, read from its `ORIGIN` extension.
    pub fn tag_info(&self, name: &BranchName) -> CatalogResult<TagInfo> {
        let snap = self.read_tag(name)?;
        let path = self
            .files
            .path_of(&TagFileName::new(name.clone()).to_string());
        let origin = BranchOrigin::from_extensions(&snap.extensions).map_err(|r| {
            CatalogError::corruption(path.clone(), 0, format!("origin extension: {r:?}"))
        })?;
        let Some(BranchOrigin {
            parent: Some((branch, term)),
            fork_version,
            created_at_ms,
        }) = origin
        else {
            return Err(CatalogError::corruption(
                path,
                0,
                "a tag's ORIGIN extension names the branch it was taken from",
            ));
        };
        Ok(TagInfo {
            name: name.clone(),
            branch,
            term,
            version: fork_version,
            created_at_ms,
        })
    }

    /// Refuses `name` for a new branch or tag when a live branch or a tag has it, or a name
    /// that differs from it only in case (they would alias on a case-insensitive store):
    /// `AlreadyExists` for the same name, `InvalidArgument` for a case fold.
    pub(crate) fn check_name_free(&self, name: &BranchName) -> CatalogResult<()> {
        match self.name_holder(name)? {
            Some(NameHolder::Branch(b)) => Err(self.name_taken(name, &b, "branch")),
            Some(NameHolder::Tag(t)) => Err(self.name_taken(name, &t, "tag")),
            None => Ok(()),
        }
    }

    /// The live branch or tag that `name` is or aliases (`bough_names::alias_of`: the same
    /// name, else one differing only by case), a branch before a tag. One lookup in the
    /// partition's name index once the branches were listed (the first call lists them;
    /// every create, delete, term change and repair keeps the index true), so refusing a
    /// name costs the same with ten branches or a hundred thousand. For callers that check
    /// a name across partitions before creating it (a table-wide registry).
    pub fn name_holder(&self, name: &BranchName) -> CatalogResult<Option<NameHolder>> {
        if !self.terms.lock().complete {
            self.branches()?;
        }
        if let Some(b) = self.terms.lock().live_alias(name) {
            return Ok(Some(NameHolder::Branch(b)));
        }
        let tags = self.tags()?;
        Ok(bough_names::alias_of(name, &tags).map(|t| NameHolder::Tag(t.clone())))
    }

    fn name_taken(&self, name: &BranchName, existing: &BranchName, what: &str) -> CatalogError {
        if existing == name {
            if what == "branch" {
                return CatalogError::AlreadyExists {
                    path: format!("{}@{name}", self.dir),
                };
            }
            return CatalogError::AlreadyExists {
                path: format!("{}: tag {name}", self.dir),
            };
        }
        CatalogError::InvalidArgument {
            what: format!(
                "name {name} differs from the existing {what} {existing} only by case; \
                 branches and tags share one name space, and the two would alias on a \
                 case-insensitive store"
            ),
        }
    }

    /// Tags `head`'s current durable state as `name` (run in the branch's write queue, so
    /// the tag holds exactly the commits queued before it). Never replaces a tag.
    pub fn create_tag(
        &self,
        head: &mut Head,
        name: &BranchName,
        now_ms: u64,
    ) -> CatalogResult<TagInfo> {
        self.check_name_free(name)?;
        let mut snapshot = head.fork_point(now_ms)?.snapshot;
        let version = head.version();
        let exts = &mut snapshot.extensions;
        bough_manifest::ext::remove(exts, bough_manifest::POLICY);
        bough_manifest::ext::remove(exts, bough_manifest::STAGING);
        let origin = BranchOrigin {
            parent: Some((head.branch().clone(), head.term())),
            fork_version: version,
            created_at_ms: now_ms,
        };
        origin.store(exts);
        let file = TagFileName::new(name.clone());
        let bytes = encode_snapshot(&snapshot).map_err(|e| CatalogError::InvalidArgument {
            what: format!("cannot encode tag {name}: {e}"),
        })?;
        self.storage()
            .create_new(&self.files.path_of(&file.to_string()), &bytes)
            .map_err(|e| match e {
                bough_io::IoError::AlreadyExists { .. } => CatalogError::AlreadyExists {
                    path: format!("{}: tag {name}", self.dir),
                },
                e => CatalogError::Io(e),
            })?;
        self.note_tag(name, true);
        Ok(TagInfo {
            name: name.clone(),
            branch: head.branch().clone(),
            term: head.term(),
            version,
            created_at_ms: now_ms,
        })
    }

    /// Deletes tag `name`, durably (the directory is synced). Its data stays for GC.
    pub fn delete_tag(&self, name: &BranchName) -> CatalogResult<()> {
        let path = self
            .files
            .path_of(&TagFileName::new(name.clone()).to_string());
        // Not every backend reports deleting a missing file: ask first.
        let missing = || CatalogError::NotFound {
            path: format!("{}: tag {name}", self.dir),
        };
        if !self.tags()?.contains(name) {
            return Err(missing());
        }
        // Forgotten first: if the deletion fails halfway, the next look lists again.
        *self.known_tags.lock() = None;
        self.storage().delete(&path).map_err(|e| match e {
            bough_io::IoError::NotFound { .. } => missing(),
            e => CatalogError::Io(e),
        })?;
        self.note_tag(name, false);
        Ok(self.storage().sync_dir(self.files.dir())?)
    }

    /// The tags taken from `branch` (by name; a tag of an earlier branch of the same name
    /// counts too: it was that name's).
    pub fn tags_of(&self, branch: &BranchName) -> CatalogResult<Vec<BranchName>> {
        let mut out = Vec::new();
        for t in self.tags()? {
            match self.tag_info(&t) {
                Ok(info) if info.branch == *branch => out.push(t),
                Ok(_) => {}
                // Deleted since the listing.
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Creates branch `name` at the state tag `tag` keeps. Its parent is the branch the tag
    /// was taken from, at the tag's version, and the tag's state is their first merge base.
    pub fn branch_from_tag(
        &self,
        tag: &BranchName,
        name: &BranchName,
        now_ms: u64,
    ) -> CatalogResult<Head> {
        let term = self.check_new_name(name)?;
        let info = self.tag_info(tag)?;
        let mut snapshot = self.read_tag(tag)?;
        // The new branch's own bases start at the fork; the tag's bases stay the tag's.
        bough_manifest::ext::remove(&mut snapshot.extensions, bough_manifest::MERGE_BASES);
        let origin = BranchOrigin {
            parent: Some((info.branch, info.term)),
            fork_version: info.version,
            created_at_ms: now_ms,
        };
        self.create_checkpointed(snapshot, name, term, origin)
    }
}
