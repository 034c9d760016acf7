//! [`PartitionHandle`]: a partition of a table and its branches.

use super::*;

/// A partition of a table: its branches, and what runs between them (diff, merge, reset) or
/// over all of them (GC).
///
/// ```
/// use bough::{DiffChange, MergeOptions, Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// orders.branch("main")?.put_blocking("k", "v1")?;
/// let dev = orders.create_branch("dev", "main")?;
/// dev.put_blocking("k", "v2")?;
/// assert_eq!(orders.branches()?, ["dev", "main"]);
///
/// let diff = orders.diff("main", "dev")?;
/// assert!(matches!(&diff[0].change, DiffChange::Changed { new, .. } if new.value == b"v2"));
/// let report = orders.merge("dev", "main", MergeOptions::default())?;
/// assert!(report.fast_forward && report.conflicts.is_empty());
/// assert_eq!(orders.branch("main")?.get_blocking("k")?.unwrap().value, b"v2");
///
/// orders.delete_branch("dev")?;
/// let would = orders.gc_dry_run()?; // what GC would delete, deleting nothing
/// let did = orders.gc()?;
/// assert_eq!(would.deleted, did.deleted);
/// # Ok::<(), bough::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct PartitionHandle {
    pub(super) store: Store,
    pub(super) dir: PartitionDir,
}

impl PartitionHandle {
    /// Opens a branch. `main` always exists (a partition is created on first use); any
    /// other branch must exist, or this is `NotFound`.
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v")?; // `main` exists from the start; other names must be created
    /// assert!(orders.branch("dev").is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn branch(&self, name: &str) -> Result<Branch> {
        let name = BranchName::new(name).map_err(|e| Error::from(e).at(&self.dir))?;
        let entry = self.store.branch_entry(&self.dir, &name)?;
        Ok(Branch {
            store: self.store.clone(),
            entry,
        })
    }

    /// The partition's directory name (`table.partition`).
    pub fn dir(&self) -> &PartitionDir {
        &self.dir
    }

    pub(super) fn entry(&self) -> Result<Arc<PartitionEntry>> {
        self.store.partition_entry(&self.dir)
    }

    /// Creates branch `name` at the latest commit of branch `from`. Runs in `from`'s write
    /// queue, so a busy parent is fine: the branch sees exactly the parent's commits that
    /// were queued before it. No data is copied. `from` may name a tag: the branch then
    /// starts at the tag's state, as a child of the branch the tag was taken from.
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v")?;
    /// let dev = orders.create_branch("dev", "main")?; // no data copied
    /// dev.put_blocking("k", "changed")?;
    /// assert_eq!(main.get_blocking("k")?.unwrap().value, b"v");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_branch(&self, name: &str, from: &str) -> Result<Branch> {
        self.store
            .inner
            .registry
            .check_free(&self.dir.table, name)?;
        match self.resolve_state(from)? {
            Named::Tag(tag) => self.branch_from_tag(&tag, name),
            Named::Branch(_) => self.create_branch_marked(name, from, None),
        }
    }

    /// [`create_branch`](Self::create_branch), as a staging branch marked with `staging`
    /// when given (see `bough_catalog::STAGING_PREFIXES`).
    pub(super) fn create_branch_marked(
        &self,
        name: &str,
        from: &str,
        staging: Option<String>,
    ) -> Result<Branch> {
        let label = format!("{}@{name}", self.dir);
        let name = BranchName::new(name).map_err(|e| Error::from(e).at(&label))?;
        let parent = self.branch(from)?;
        let part = self.entry()?;
        let entry = parent
            .call(|reply| BranchOp::CreateBranch {
                part,
                name,
                staging,
                reply,
            })
            .map_err(|e| e.at(&label))?;
        // A new head counts against `max_open_branches` like an opened one.
        self.store.evict_idle_branches();
        Ok(Branch {
            store: self.store.clone(),
            entry,
        })
    }

    /// Deletes branch `name`: its manifests and archives go; its data stays until GC finds
    /// nothing else references it. `main` cannot be deleted; children are unaffected. Then
    /// every other branch drops the merge bases naming it (a metadata commit where it had
    /// one), so GC can free the states they pinned; an error from that step leaves the
    /// branch deleted, and those bases are dropped at their head's next open.
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v")?;
    /// orders.create_branch("dev", "main")?;
    /// orders.delete_branch("dev")?;
    /// assert!(orders.branch("dev").is_err());
    /// orders.gc()?; // frees what only `dev` held
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delete_branch(&self, name: &str) -> Result<()> {
        self.delete_branch_as(name, false).map(|_| ())
    }

    /// [`delete_branch`](Self::delete_branch); `expired`: because its expiry passed (the
    /// protection check is skipped, the expiry is checked again in the branch's queue, and
    /// `Ok(false)` says it was extended meanwhile and stays).
    pub(super) fn delete_branch_as(&self, name: &str, expired: bool) -> Result<bool> {
        self.store
            .inner
            .registry
            .check_free(&self.dir.table, name)?;
        let branch = match self.branch(name) {
            Ok(b) => b,
            // A damaged manifest: no head could open, so no writer runs; delete through the
            // catalog directly (the tombstone, then the manifests) so the name and GC work
            // again.
            Err(e) if e.kind() == ErrorKind::Corruption && !expired => {
                let entry = self.entry()?;
                let bname = BranchName::new(name)?;
                let _catalog = entry.catalog_change();
                return entry
                    .part
                    .delete_branch(&bname)
                    .map(|()| true)
                    .map_err(|err| Error::from(err).at(format!("{}@{name}", self.dir)));
            }
            Err(e) => return Err(e),
        };
        let entry = self.entry()?;
        let part = entry.clone();
        let gone = if expired {
            branch.call(|reply| BranchOp::DeleteExpired { part, reply })?
        } else {
            branch.call(|reply| BranchOp::Delete { part, reply })?;
            true
        };
        drop(branch);
        if !gone {
            return Ok(false);
        }
        self.prune_merge_bases(&entry).map(|()| true).map_err(|e| {
            Error::new(
                e.kind(),
                format!(
                    "branch {name} is deleted, but dropping the merge bases naming it failed \
                     (they go when the branch holding them opens next): {e}"
                ),
            )
            .at(&self.dir)
        })
    }

    /// Drops the merge bases no live branch can use any more (those naming deleted
    /// branches) from every live branch of the partition, so GC can free the states they
    /// pinned. Each branch does it in its own write queue (a merge into it may be running).
    /// Every branch is tried; the first failure is returned. A base left behind is never
    /// used (merges check the incarnation) and goes when its head opens next.
    pub(super) fn prune_merge_bases(&self, entry: &Arc<PartitionEntry>) -> Result<()> {
        let mut first_error = None;
        for name in entry.part.branches().map_err(Error::from)? {
            let pruned = self.branch(name.as_str()).and_then(|b| {
                let part = entry.clone();
                b.call(|reply| BranchOp::PruneMergeBases { part, reply })
            });
            match pruned {
                Ok(()) => {}
                // Deleted meanwhile: nothing to prune.
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(branch = %name, error = %e, "cannot drop merge bases");
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The live branches of the partition.
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v")?;
    /// orders.create_branch("dev", "main")?;
    /// let names: Vec<String> = orders.branches()?.iter().map(|b| b.to_string()).collect();
    /// assert!(names.contains(&"main".to_string()) && names.contains(&"dev".to_string()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn branches(&self) -> Result<Vec<String>> {
        let e = self.entry()?;
        Ok(e.part
            .branches()
            .map_err(|err| Error::from(err).at(&self.dir))?
            .into_iter()
            .map(|b| b.to_string())
            .collect())
    }

    /// Parent, fork point, term, creation time and archives of a branch, and what it costs
    /// on storage ([`BranchInfo::space`]: its exclusive and shared bytes, from GC's
    /// measuring walk of the partition — one walk per call).
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v")?;
    /// orders.create_branch("dev", "main")?;
    /// let info = orders.describe("dev")?;
    /// assert_eq!(info.origin.unwrap().parent.unwrap().0.as_str(), "main");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn describe(&self, name: &str) -> Result<BranchInfo> {
        let label = format!("{}@{name}", self.dir);
        let bname = BranchName::new(name).map_err(|e| Error::from(e).at(&label))?;
        let entry = self.entry()?;
        let mut info = entry
            .part
            .describe(&bname)
            .map_err(|e| Error::from(e).at(&label))?;
        info.space = measure_or_warn(&entry).and_then(|u| space_or_warn(&entry, &u, &bname));
        Ok(info)
    }

    /// [`describe`](Self::describe) of every live branch of the partition, measured by one
    /// walk for all of them.
    pub fn describe_branches(&self) -> Result<Vec<BranchInfo>> {
        let entry = self.entry()?;
        let names = entry
            .part
            .branches()
            .map_err(|e| Error::from(e).at(&self.dir))?;
        let usage = measure_or_warn(&entry);
        names
            .iter()
            .map(|name| {
                let mut info = entry
                    .part
                    .describe(name)
                    .map_err(|e| Error::from(e).at(format!("{}@{name}", self.dir)))?;
                info.space = usage.as_ref().and_then(|u| space_or_warn(&entry, u, name));
                Ok(info)
            })
            .collect()
    }

    /// Hands branch `name` to a new term (a new owner): a new manifest, then
    /// `CURRENT_TERM`; a writer still holding the old term is fenced.
    pub fn open_new_term(&self, name: &str) -> Result<Branch> {
        let branch = self.branch(name)?;
        let part = self.entry()?;
        branch.call(|reply| BranchOp::OpenNewTerm { part, reply })?;
        Ok(branch)
    }

    /// A checkpointed snapshot record of a branch (with its manifest extensions), taken in
    /// the branch's write queue.
    ///
    /// The returned `Arc<TreeSnapshot>` is the same state as a reader snapshot: while it is
    /// held, GC keeps every file of that state even if the source moves on (the caller holds
    /// it until the state is durably adopted).
    pub(super) fn snapshot_record(
        &self,
        name: &str,
    ) -> Result<(BranchName, bough_manifest::Snapshot, Arc<TreeSnapshot>)> {
        let branch = match self.resolve_state(name)? {
            Named::Branch(b) => b,
            // A tag is a state of the branch it was taken from.
            Named::Tag(tag) => return self.tag_record(&tag),
        };
        let (snap, pin) = branch.call(|reply| BranchOp::ForkPoint { reply })?;
        Ok((BranchName::new(name)?, snap, pin))
    }

    /// Every key whose entry differs from branch `a` to branch `b`, in key order, as reads
    /// see both at the store clock's time: an entry that has expired is absent (an expired
    /// key on one side and no key on the other is no difference). Reads only the pages the
    /// two branches do not share. Either side may name a tag.
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("a", "1")?;
    /// let dev = orders.create_branch("dev", "main")?;
    /// dev.put_blocking("b", "2")?;
    /// let diff = orders.diff("main", "dev")?;
    /// assert_eq!((diff.len(), diff[0].key.as_slice()), (1, &b"b"[..]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn diff(&self, a: &str, b: &str) -> Result<Vec<DiffEntry>> {
        let (sa, sb) = (self.state(a)?, self.state(b)?);
        self.diff_snapshots(&sa, &sb, format!("{}@{a}..{b}", self.dir))
    }

    /// The current state of the branch or tag `name`, as reads see it (a branch's write
    /// buffer included: the diff reads through it, so nothing is checkpointed first).
    fn state(&self, name: &str) -> Result<Arc<TreeSnapshot>> {
        match self.resolve_state(name)? {
            Named::Branch(b) => b.read_state(),
            Named::Tag(tag) => self.tag_snapshot(&tag),
        }
    }

    /// Every key whose entry differs from `archive` to the current state of `branch` (expired
    /// entries absent, as in [`diff`](Self::diff)).
    pub fn diff_archive(&self, archive: &ArchiveName, branch: &str) -> Result<Vec<DiffEntry>> {
        let label = format!("{}@{archive}..{branch}", self.dir);
        let entry = self.entry()?;
        let record = entry
            .part
            .read_archive(archive)
            .map_err(|e| Error::from(e).at(&label))?;
        let sa = TreeSnapshot::from_record(entry.part.files().clone(), &record)
            .map_err(|e| Error::from(e).at(&label))?;
        let sb = self.branch(branch)?.read_state()?;
        self.diff_snapshots(&sa, &sb, label)
    }

    /// The diff as reads see it now: an expired entry is absent on its side.
    pub(super) fn diff_snapshots(
        &self,
        sa: &TreeSnapshot,
        sb: &TreeSnapshot,
        label: String,
    ) -> Result<Vec<DiffEntry>> {
        let (changes, _) =
            bough_tree::diff::diff_buffered(sa, sb).map_err(|e| Error::from(e).at(&label))?;
        let changes =
            bough_tree::diff::visible_changes_at(changes, self.store.inner.clock.now_ms());
        let value = |s: &TreeSnapshot, e: Entry| -> Result<Value> {
            let v = match e.value {
                ValueLoc::Inline(v) => v,
                ValueLoc::Overflow { first, pages, len } => s
                    .read_overflow(first, pages, len)
                    .map_err(|err| Error::from(err).at(&label))?,
                // `visible_at` drops tombstones (they are absent), so none reaches here.
                ValueLoc::Tombstone => Vec::new(),
            };
            Ok(Value {
                value: v,
                timestamp: e.timestamp,
                expire_at: (e.expire_at != 0).then_some(e.expire_at),
            })
        };
        changes
            .into_iter()
            .map(|v| {
                let deleted_at = v.tombstone.map(|t| t.timestamp);
                let change = match v.change {
                    Change::Added(e) => DiffChange::Added(value(sb, e)?),
                    Change::Removed(e) => DiffChange::Removed(value(sa, e)?),
                    Change::Changed { old, new } => DiffChange::Changed {
                        old: value(sa, old)?,
                        new: value(sb, new)?,
                    },
                };
                Ok(DiffEntry {
                    key: v.key,
                    change,
                    deleted_at,
                })
            })
            .collect()
    }

    /// Merges branch `source` into branch `target` (see [`MergeOptions`]): a fast-forward
    /// by reference when `target` has not changed since their merge base, otherwise a
    /// three-way merge committed atomically on `target`. All three states are seen as reads
    /// see them at the store clock's time: an entry that has expired is absent.
    ///
    /// ```
    /// use bough::{MergeOptions, Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("a", "1")?;
    /// let dev = orders.create_branch("dev", "main")?;
    /// dev.put_blocking("b", "2")?;
    /// main.put_blocking("c", "3")?;
    /// // Three-way: dev's changes since its fork go into main.
    /// let report = orders.merge("dev", "main", MergeOptions::default())?;
    /// assert!(report.committed && report.conflicts.is_empty());
    /// assert!(main.get_blocking("b")?.is_some() && main.get_blocking("c")?.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn merge(&self, source: &str, target: &str, opts: MergeOptions) -> Result<MergeReport> {
        let (sname, snap, pin) = self.snapshot_record(source)?;
        let t = self.branch(target)?;
        let part = self.entry()?;
        t.call(|reply| BranchOp::Merge {
            part,
            source: sname,
            record: snap,
            pin,
            opts,
            reply,
        })
    }

    /// Resets branch `target` to branch `to`'s current state by reference (e.g. refresh a
    /// child from its parent); `to` becomes their merge base.
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v1")?;
    /// let dev = orders.create_branch("dev", "main")?;
    /// dev.put_blocking("k", "v2")?;
    /// orders.reset_branch("dev", "main")?; // dev now holds main's state
    /// assert_eq!(orders.branch("dev")?.get_blocking("k")?.unwrap().value, b"v1");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reset_branch(&self, target: &str, to: &str) -> Result<()> {
        let (sname, snap, pin) = self.snapshot_record(to)?;
        let t = self.branch(target)?;
        let part = self.entry()?;
        t.call(|reply| BranchOp::Reset {
            part,
            source: sname,
            record: snap,
            pin,
            reply,
        })
    }

    /// Garbage-collects this partition: deletes every data file that no branch, archive,
    /// merge base, reader snapshot or writer still references, and reports what it deleted
    /// and what it kept (and why).
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v")?;
    /// let report = orders.gc()?;
    /// println!("freed {} bytes", report.bytes_freed);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gc(&self) -> Result<GcReport> {
        self.store.check_writable()?;
        let entry = self.entry()?;
        gc::prune_history(&entry, &self.store.inner);
        gc_partition(&entry, self.store.inner.cloud.as_ref(), false)
    }

    /// What [`gc`](Self::gc) would delete, deleting nothing (also on a read-only store).
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v")?;
    /// let would = orders.gc_dry_run()?; // deletes nothing
    /// println!("would free {} bytes", would.bytes_freed);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gc_dry_run(&self) -> Result<GcReport> {
        gc_partition(&*self.entry()?, self.store.inner.cloud.as_ref(), true)
    }
}
