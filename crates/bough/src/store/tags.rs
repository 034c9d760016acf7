//! Tags from the facade: creating, listing, reading and deleting them, and naming a tag
//! wherever a state is read from (a branch source, a merge or reset source, a diff side).
//!
//! Branches and tags share one name space, so a name is resolved once: a live branch of
//! that name, else a tag of that name, else `NotFound` ([`PartitionHandle::resolve_state`]).
//! The catalog refuses a tag and a branch that share a name or differ only by case, so the
//! order of the lookup never decides between two candidates.

use super::*;

/// A tag: an immutable, named state of a branch.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// let main = orders.branch("main")?;
/// main.put_blocking("k", "v1")?;
/// let tag = orders.create_tag("v1", "main")?;
/// assert_eq!((tag.name.as_str(), tag.branch.as_str()), ("v1", "main"));
/// main.put_blocking("k", "v2")?;
/// // The tag still reads as main did when it was taken.
/// assert_eq!(orders.tag("v1")?.get("k")?.unwrap().value, b"v1");
/// assert_eq!(orders.tags()?.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_catalog::TagInfo;

/// What a state name resolves to.
pub(super) enum Named {
    /// A live branch.
    Branch(Branch),
    /// A tag (by name).
    Tag(BranchName),
}

/// The writer's side of [`PartitionHandle::create_tag`], in the branch's queue: under the
/// catalog lock GC cannot run between the branch's checkpoint and the tag's creation.
pub(super) fn create_tag(
    head: &mut Head,
    now: u64,
    part: &PartitionEntry,
    name: &BranchName,
) -> Result<TagInfo> {
    let _catalog = part.catalog_change();
    Ok(part.part.create_tag(head, name, now)?)
}

impl PartitionHandle {
    /// Resolves `name` to a live branch or, failing that, a tag (`NotFound` if neither).
    pub(super) fn resolve_state(&self, name: &str) -> Result<Named> {
        match self.branch(name) {
            Ok(b) => Ok(Named::Branch(b)),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let tag = BranchName::new(name).map_err(|e| Error::from(e).at(&self.dir))?;
                let entry = self.entry()?;
                let tags = entry
                    .part
                    .tags()
                    .map_err(|e| Error::from(e).at(&self.dir))?;
                if tags.contains(&tag) {
                    Ok(Named::Tag(tag))
                } else {
                    Err(e)
                }
            }
            Err(e) => Err(e),
        }
    }

    /// Tags branch `from`'s latest commit as `name`: an immutable state, readable with
    /// [`tag`](Self::tag), usable as a branch source ([`create_branch`](Self::create_branch)),
    /// a merge or reset source and a diff side, kept by GC until
    /// [`delete_tag`](Self::delete_tag) (deleting `from` leaves it). Runs in `from`'s write
    /// queue: the tag holds exactly the commits queued before it. A name a branch or another
    /// tag has (or one differing from it only by case) is refused.
    pub fn create_tag(&self, name: &str, from: &str) -> Result<TagInfo> {
        let label = format!("{}: tag {name}", self.dir);
        let tag = BranchName::new(name).map_err(|e| Error::from(e).at(&label))?;
        let branch = self.branch(from)?;
        let part = self.entry()?;
        branch
            .call(|reply| BranchOp::CreateTag {
                part,
                name: tag,
                reply,
            })
            .map_err(|e| e.at(&label))
    }

    /// Deletes tag `name` (only this deletes a tag). Its data stays until GC finds nothing
    /// else references it.
    pub fn delete_tag(&self, name: &str) -> Result<()> {
        let label = format!("{}: tag {name}", self.dir);
        let tag = BranchName::new(name).map_err(|e| Error::from(e).at(&label))?;
        self.store.check_writable()?;
        let entry = self.entry()?;
        let _catalog = entry.catalog_change();
        entry
            .part
            .delete_tag(&tag)
            .map_err(|e| Error::from(e).at(&label))
    }

    /// The partition's tags, by name, with the branch and version each was taken from.
    pub fn tags(&self) -> Result<Vec<TagInfo>> {
        let entry = self.entry()?;
        let names = entry
            .part
            .tags()
            .map_err(|e| Error::from(e).at(&self.dir))?;
        let mut out = Vec::with_capacity(names.len());
        for t in names {
            match entry.part.tag_info(&t) {
                Ok(info) => out.push(info),
                // Deleted since the listing.
                Err(e) if e.kind() == bough_io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::from(e).at(format!("{}: tag {t}", self.dir))),
            }
        }
        Ok(out)
    }

    /// A read view of tag `name`: the state it keeps, read like a branch's. While the view
    /// is held, GC keeps every file of that state even if the tag is deleted meanwhile.
    pub fn tag(&self, name: &str) -> Result<ReadView> {
        let label = format!("{}: tag {name}", self.dir);
        let tag = BranchName::new(name).map_err(|e| Error::from(e).at(&label))?;
        let snap = self.tag_snapshot(&tag)?;
        Ok(ReadView {
            snap,
            now: self.store.inner.clock.now_ms(),
            label: label.into(),
            max_key: self.store.inner.opts.max_key_len(),
        })
    }

    /// The state tag `tag` keeps, pinned for GC while the returned snapshot lives.
    pub(super) fn tag_snapshot(&self, tag: &BranchName) -> Result<Arc<TreeSnapshot>> {
        let label = format!("{}: tag {tag}", self.dir);
        let entry = self.entry()?;
        // Under the catalog lock GC cannot run between reading the tag and pinning it.
        let _catalog = entry.catalog.lock();
        let record = entry
            .part
            .read_tag(tag)
            .map_err(|e| Error::from(e).at(&label))?;
        let snap = Arc::new(
            TreeSnapshot::from_record(entry.part.files().clone(), &record)
                .map_err(|e| Error::from(e).at(&label))?,
        );
        let mut views = entry.tag_views.lock();
        views.retain(|w| w.strong_count() > 0);
        views.push(Arc::downgrade(&snap));
        Ok(snap)
    }

    /// The checkpointed record of tag `tag` as a state of the branch it was taken from
    /// (what a merge or reset from the tag uses), pinned like [`tag_snapshot`].
    pub(super) fn tag_record(
        &self,
        tag: &BranchName,
    ) -> Result<(BranchName, bough_manifest::Snapshot, Arc<TreeSnapshot>)> {
        let label = format!("{}: tag {tag}", self.dir);
        let entry = self.entry()?;
        let pin = self.tag_snapshot(tag)?;
        let info = entry
            .part
            .tag_info(tag)
            .map_err(|e| Error::from(e).at(&label))?;
        let record = entry
            .part
            .read_tag(tag)
            .map_err(|e| Error::from(e).at(&label))?;
        Ok((info.branch, record, pin))
    }

    /// Creates branch `name` at the state tag `tag` keeps (what
    /// [`create_branch`](Self::create_branch) does when `from` names a tag).
    pub(super) fn branch_from_tag(&self, tag: &BranchName, name: &str) -> Result<Branch> {
        self.branch_from_record(name, |part, bname, now| {
            part.branch_from_tag(tag, bname, now)
        })
    }
}
