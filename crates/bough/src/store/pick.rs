//! Rebase, cherry-pick and revert on a [`PartitionHandle`], and [`StateRef`], the states a
//! range of changes runs between.

use std::fmt;

use bough_catalog::{PickOptions, PickRange};

use super::*;

/// A state of a partition, as an end of a range of changes (cherry-pick, revert).
///
/// ```
/// use bough::{Options, PickOptions, StateRef, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// orders.branch("main")?.put_blocking("a", "1")?;
/// let dev = orders.create_branch("dev", "main")?;
/// let start = dev.archive()?;
/// dev.put_blocking("b", "2")?;
/// // The changes from an archive of `dev` to its current state, onto `main`.
/// let report = orders.cherry_pick(
///     &StateRef::Archive(start),
///     &StateRef::Branch("dev".into()),
///     "main",
///     PickOptions::default(),
/// )?;
/// assert_eq!(report.applied, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateRef {
    /// A branch's current state.
    Branch(String),
    /// A branch at commit version `version` ([`ReadView::version`]), while something
    /// retains that state: the branch itself (at its current version), one of its archives,
    /// or a merge base another branch records of it.
    Version {
        /// The branch.
        branch: String,
        /// Its commit version.
        version: u64,
    },
    /// An archive.
    Archive(ArchiveName),
}

impl StateRef {
    /// A branch's current state.
    pub fn branch(name: impl Into<String>) -> StateRef {
        StateRef::Branch(name.into())
    }

    /// A branch at one of its versions.
    pub fn version(branch: impl Into<String>, version: u64) -> StateRef {
        StateRef::Version {
            branch: branch.into(),
            version,
        }
    }
}

impl fmt::Display for StateRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateRef::Branch(b) => write!(f, "{b}"),
            StateRef::Version { branch, version } => write!(f, "{branch}:{version}"),
            StateRef::Archive(a) => write!(f, "archive:{a}"),
        }
    }
}

/// An end of a range: pinned now (a branch's published state), or read from the catalog in
/// the target's write queue, under the catalog lock (archives, merge bases).
pub(super) enum End {
    Pinned(Arc<TreeSnapshot>),
    Archive(ArchiveName),
    Retained(BranchName, u64),
}

impl PartitionHandle {
    fn pin_end(&self, s: &StateRef) -> Result<End> {
        Ok(match s {
            // As reads see it: the range's diff reads through a buffered end's write
            // buffer, so the end is not checkpointed first.
            StateRef::Branch(b) => End::Pinned(self.branch(b)?.read_state()?),
            StateRef::Version { branch, version } => {
                let snap = self.branch(branch)?.read_state()?;
                if snap.version == *version {
                    End::Pinned(snap)
                } else {
                    End::Retained(BranchName::new(branch)?, *version)
                }
            }
            StateRef::Archive(a) => End::Archive(a.clone()),
        })
    }

    /// Rebases branch `branch` onto branch `onto`: `branch`'s changes since its merge base
    /// with `onto` replayed on `onto`'s current state, as one commit on `branch`, and
    /// `onto`'s state becomes their merge base (a merge of `branch` into `onto` right after
    /// is a fast-forward). The merge base is found as for [`merge`](Self::merge); the
    /// options are the merge's, with *ours* meaning `onto` (the state replayed on) and
    /// *theirs* `branch`'s own changes, in the policy and in each reported conflict.
    pub fn rebase(&self, branch: &str, onto: &str, opts: MergeOptions) -> Result<MergeReport> {
        let label = format!("{}@{branch}", self.dir);
        if branch == onto {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "a branch cannot be rebased onto itself",
            )
            .at(&label));
        }
        let (oname, record, pin) = self.snapshot_record(onto)?;
        let b = self.branch(branch)?;
        let part = self.entry()?;
        b.call(|reply| BranchOp::Rebase {
            part,
            onto: oname,
            record,
            pin,
            opts,
            reply,
        })
        .map_err(|e| e.at(&label))
    }

    /// Cherry-picks onto branch `onto` the changes from state `from` to state `to` (any two
    /// states of this partition: branches, versions, archives), in one commit. A key
    /// applies when `onto` still holds what `from` held there; a key `onto` changed
    /// otherwise is a conflict, settled by `opts.policy` (*ours*: `onto`'s entry, *theirs*:
    /// `to`'s). Reads only the pages `from` and `to` do not share, and on `onto` the
    /// leaves holding the changed keys (each once). Expired entries are absent, as in a merge.
    pub fn cherry_pick(
        &self,
        from: &StateRef,
        to: &StateRef,
        onto: &str,
        opts: PickOptions,
    ) -> Result<MergeReport> {
        self.pick(from, to, onto, PickRange::Forward, opts)
    }

    /// Reverts on branch `branch` the changes from state `from` to state `to`: applies
    /// their inverse (what `to` changed goes back to what `from` held), in one commit, with
    /// conflicts as in [`cherry_pick`](Self::cherry_pick) (*theirs*: `from`'s entry).
    pub fn revert(
        &self,
        from: &StateRef,
        to: &StateRef,
        branch: &str,
        opts: PickOptions,
    ) -> Result<MergeReport> {
        self.pick(from, to, branch, PickRange::Inverse, opts)
    }

    fn pick(
        &self,
        from: &StateRef,
        to: &StateRef,
        onto: &str,
        range: PickRange,
        opts: PickOptions,
    ) -> Result<MergeReport> {
        let label = format!("{}@{onto} ({from}..{to})", self.dir);
        let ends = [self.pin_end(from)?, self.pin_end(to)?];
        let t = self.branch(onto)?;
        let part = self.entry()?;
        t.call(|reply| BranchOp::Pick {
            part,
            ends,
            range,
            opts,
            reply,
        })
        .map_err(|e| e.at(&label))
    }
}

/// Runs a rebase in the branch's write queue. Under the catalog lock GC cannot run between
/// "`onto`'s state is pinned by a reader snapshot" and "the branch's manifest references it".
pub(super) fn rebase(
    head: &mut Head,
    now: u64,
    part: &PartitionEntry,
    onto: &BranchName,
    record: &bough_manifest::Snapshot,
    pin: Arc<TreeSnapshot>,
    opts: MergeOptions,
) -> Result<MergeReport> {
    let _catalog = part.catalog_change();
    let report = part.part.rebase(head, onto, record, opts, now)?;
    drop(pin);
    Ok(report)
}

/// Runs a cherry-pick or revert in the target's write queue. Archives and merge bases are
/// read and used under the catalog lock: GC cannot collect them meanwhile.
pub(super) fn pick(
    head: &mut Head,
    now: u64,
    part: &PartitionEntry,
    ends: [End; 2],
    range: PickRange,
    opts: PickOptions,
) -> Result<MergeReport> {
    let _catalog = part.catalog_change();
    let files = part.part.files().clone();
    let resolve = |end: End| -> Result<Arc<TreeSnapshot>> {
        Ok(match end {
            End::Pinned(s) => s,
            End::Archive(a) => {
                let rec = part.part.read_archive(&a)?;
                Arc::new(TreeSnapshot::from_record(files.clone(), &rec)?)
            }
            End::Retained(b, v) => {
                let rec = part.part.retained_state(&b, v)?;
                Arc::new(TreeSnapshot::from_record(files.clone(), &rec)?)
            }
        })
    };
    let [from, to] = ends;
    let (from, to) = (resolve(from)?, resolve(to)?);
    Ok(part.part.pick(head, &from, &to, range, opts, now)?)
}
