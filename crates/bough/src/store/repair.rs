//! Archives and other branches stay usable when one branch's manifest is damaged, and a
//! damaged branch comes back from its newest intact archive.

use bough_catalog::Damaged;
use bough_catalog::error::CatalogResult;
use bough_names::{ArchiveName, BranchName};
use bough_tree::head::{Head, TreeSnapshot};

use super::{Branch, DiffEntry, PartitionHandle};
use crate::error::{Error, ErrorKind, Result};

/// What [`PartitionHandle::repair_from_archive`] did and lost.
///
/// ```
/// use bough::{Options, Store};
///
/// let dir = tempfile::tempdir()?;
/// let store = Store::open(Options::new(dir.path()))?;
/// let orders = store.partition("orders", 0)?;
/// let main = orders.branch("main")?;
/// main.put_blocking("a", "1")?;
/// main.archive()?;
/// store.close()?;
/// // The branch's manifest is damaged (a bad disk, a careless operator):
/// let manifest = dir.path().join("orders.0").join("manifest_main_0");
/// let mut bytes = std::fs::read(&manifest)?;
/// bytes[40] ^= 1;
/// std::fs::write(&manifest, &bytes)?;
/// let store = Store::open(Options::new(dir.path()))?;
/// let orders = store.partition("orders", 0)?;
/// assert!(orders.branch("main").is_err());
/// let report = orders.repair_from_archive("main", None)?;
/// assert_eq!(orders.branch("main")?.get_blocking("a")?.unwrap().value, b"1");
/// println!("back from {}, lost: {:?}", report.archive, report.lost_changes);
/// store.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct RepairReport {
    /// The archive the branch now holds.
    pub archive: ArchiveName,
    /// The damaged manifest that was replaced.
    pub damaged_manifest: String,
    /// Why it could not be opened.
    pub damage: String,
    /// The commit version of the last state of the damaged manifest that could be read
    /// (`None`: none could).
    pub last_readable_version: Option<u64>,
    /// The keys that differ between the archive and that last readable state: the changes
    /// the repair loses (`None` when that state could not be read).
    pub lost_changes: Option<Vec<DiffEntry>>,
    /// Commits written after the damaged record: lost too, with contents unknown.
    pub unreadable_commits: usize,
}

impl PartitionHandle {
    /// The archives of branch `name`, oldest first. Needs no head of the branch, so it works
    /// when the branch's manifest is damaged.
    pub fn archives(&self, name: &str) -> Result<Vec<ArchiveName>> {
        let label = format!("{}@{name}", self.dir);
        let b = BranchName::new(name).map_err(|e| Error::from(e).at(&label))?;
        self.entry()?
            .part
            .archives(&b)
            .map_err(|e| Error::from(e).at(&label))
    }

    /// Creates branch `name` at the state `archive` recorded, without opening the archive's
    /// branch (which may be damaged).
    pub fn branch_from_archive(&self, archive: &ArchiveName, name: &str) -> Result<Branch> {
        self.store.check_writable()?;
        self.branch_from_record(name, |part, bname, now| {
            part.branch_from_archive(archive, bname, now)
        })
    }

    /// Creates branch `name` from a head `create` makes out of a recorded state (an archive,
    /// a tag), under the catalog lock, and registers it with the store.
    pub(super) fn branch_from_record(
        &self,
        name: &str,
        create: impl FnOnce(&bough_catalog::Partition, &BranchName, u64) -> CatalogResult<Head>,
    ) -> Result<Branch> {
        let label = format!("{}@{name}", self.dir);
        let bname = BranchName::new(name).map_err(|e| Error::from(e).at(&label))?;
        let entry = self.entry()?;
        let head = {
            let _catalog = entry.catalog_change();
            create(&entry.part, &bname, self.store.inner.clock.now_ms())
                .map_err(|e| Error::from(e).at(&label))?
        };
        let b = self.store.register(head, &self.dir);
        entry.branches.lock().insert(bname, b.clone());
        self.store.evict_idle_branches();
        Ok(Branch {
            store: self.store.clone(),
            entry: b,
        })
    }

    /// Brings branch `name`, whose manifest is damaged (opening it fails with
    /// `Corruption`), back to `archive` — by default its newest archive that reads — at a
    /// new term, and reports exactly what that loses: the changes between the archive and
    /// the last state of the damaged manifest that can still be read, and how many commits
    /// after the damage cannot be read at all. A branch that opens is refused
    /// (`InvalidArgument`: use [`Branch::restore`], which keeps a backup).
    pub fn repair_from_archive(
        &self,
        name: &str,
        archive: Option<&ArchiveName>,
    ) -> Result<RepairReport> {
        self.store.check_writable()?;
        let label = format!("{}@{name}", self.dir);
        let bname = BranchName::new(name).map_err(|e| Error::from(e).at(&label))?;
        let damage = match self.branch(name) {
            Ok(_) => {
                return Err(Error::invalid(format!(
                    "{label} is not damaged: restore it with Branch::restore (`bough archive \
                     restore`), which keeps the current state as a backup branch"
                )));
            }
            Err(e) if e.kind() == ErrorKind::Corruption => e.to_string(),
            Err(e) => return Err(e),
        };
        let entry = self.entry()?;
        let part = &entry.part;
        let damaged: Damaged = part
            .damaged(&bname, &damage)
            .map_err(|e| Error::from(e).at(&label))?;
        let files = part.files().clone();
        // The archive and its state, checked to read whole (every page it references).
        let readable = |a: &ArchiveName| -> Result<TreeSnapshot> {
            let record = part
                .read_archive(a)
                .map_err(|e| Error::from(e).at(&label))?;
            let snap = TreeSnapshot::from_record(files.clone(), &record)
                .map_err(|e| Error::from(e).at(&label))?;
            snap.for_each_page(&mut |_| {})
                .map_err(|e| Error::from(e).at(&label))?;
            Ok(snap)
        };
        let (archive, from) = match archive {
            Some(a) => (a.clone(), readable(a)?),
            None => {
                let mut newest = None;
                for a in part
                    .archives(&bname)
                    .map_err(|e| Error::from(e).at(&label))?
                    .into_iter()
                    .rev()
                {
                    match readable(&a) {
                        Ok(s) => {
                            newest = Some((a, s));
                            break;
                        }
                        Err(e) => tracing::warn!(archive = %a, error = %e, "archive skipped"),
                    }
                }
                newest.ok_or_else(|| {
                    Error::new(
                        ErrorKind::NotFound,
                        format!("{label} is damaged ({damage}) and has no intact archive"),
                    )
                })?
            }
        };
        let last = damaged
            .salvaged
            .as_ref()
            .and_then(|s| s.state.as_ref())
            .map(|st| (st.version(), st.to_snapshot()));
        let lost_changes = last.as_ref().and_then(|(_, snap)| {
            let to = TreeSnapshot::from_record(files.clone(), snap).ok()?;
            self.diff_snapshots(&from, &to, label.clone()).ok()
        });
        let head = {
            let _catalog = entry.catalog_change();
            part.restore_damaged(&bname, &archive, &damaged, self.store.inner.clock.now_ms())
                .map_err(|e| Error::from(e).at(&label))?
        };
        let b = self.store.register(head, &self.dir);
        entry.branches.lock().insert(bname, b);
        Ok(RepairReport {
            archive,
            damaged_manifest: damaged.manifest.clone(),
            damage,
            last_readable_version: last.map(|(v, _)| v),
            lost_changes,
            unreadable_commits: damaged.salvaged.as_ref().map_or(0, |s| s.later_records),
        })
    }
}
