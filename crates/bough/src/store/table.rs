//! [`Table`]: the partitions of one table, and operations over all of them at once (branch
//! create, delete, archive and merge, all or nothing through the store's branch registry
//! (`registry.rs`); truncate).

use bough_catalog::ConflictPolicy;
use bough_manifest::{TableOpIntent, TableOpKind};

use super::*;

/// A table: every partition of it in the store, and the branch operations that span them.
///
/// A table has no storage of its own: its partitions are the directories `table.N` that
/// exist (a partition is created by opening its `main` branch, [`Store::partition`]).
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.table("orders")?;
/// for p in 0..3 {
///     orders.partition(p)?.branch("main")?.put_blocking("k", format!("v{p}"))?;
/// }
/// assert_eq!(orders.partitions()?, [0, 1, 2]);
///
/// orders.create_branch("feature", "main")?; // on every partition, all or nothing
/// let ts = orders.archive("feature")?; // one timestamp shared by every partition
/// assert_eq!(orders.partition(1)?.branch("feature")?.archives()?.len(), 1);
/// # let _ = ts;
/// orders.truncate_branch("feature")?; // its keys go, on every partition; main keeps its
/// assert!(orders.partition(2)?.branch("feature")?.get_blocking("k")?.is_none());
/// assert!(orders.partition(2)?.branch("main")?.get_blocking("k")?.is_some());
/// orders.delete_branch("feature")?;
/// assert_eq!(orders.partition(0)?.branches()?, ["main"]);
/// # Ok::<(), bough::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Table {
    store: Store,
    name: TableName,
}

impl Store {
    /// The table `name` (a handle: nothing is read or created until it is used).
    pub fn table(&self, name: &str) -> Result<Table> {
        Ok(Table {
            store: self.clone(),
            name: TableName::new(name)?,
        })
    }
}

impl Table {
    /// The table's name.
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// Partition `partition` of the table (as [`Store::partition`]).
    pub fn partition(&self, partition: PartitionId) -> Result<PartitionHandle> {
        self.store.partition(self.name(), partition)
    }

    /// The partitions of the table that exist in the store, in ascending order.
    pub fn partitions(&self) -> Result<Vec<PartitionId>> {
        self.store.partitions_of(self.name())
    }

    /// Creates `name` from `from` on every partition of the table, all or nothing, across
    /// crashes too: the operation is recorded in the store's branch registry before any
    /// partition acts, and a crash midway is finished at the next open (see
    /// `docs/format.md`, "Table-wide branch operations"). The name is checked once for the
    /// table: `AlreadyExists` if a partition has it, and while the create runs a
    /// per-partition create or delete of it is `Busy`. If a partition refuses (its `from`
    /// is missing), the branches created so far are deleted again and every partition's
    /// error is reported.
    pub fn create_branch(&self, name: &str, from: &str) -> Result<()> {
        BranchName::new(name)?;
        BranchName::new(from)?;
        let parts = self.partitions()?;
        let table = self.name();
        // The table-level check, once, before anything is recorded: every partition is
        // asked through its catalog, and every refusal is reported.
        let (mut taken, mut missing) = (Vec::new(), Vec::new());
        for p in &parts {
            let part = self.partition(*p)?;
            let branches = part.branches()?;
            if branches.iter().any(|b| b == name) {
                taken.push(format!("{table}.{p}@{name}: already exists"));
            }
            if !branches.iter().any(|b| b == from)
                && !part.tags()?.iter().any(|t| t.name.as_str() == from)
            {
                missing.push(format!("{table}.{p}@{from}: no such branch or tag"));
            }
        }
        for (kind, errs) in [
            (ErrorKind::AlreadyExists, taken),
            (ErrorKind::NotFound, missing),
        ] {
            if !errs.is_empty() {
                return Err(Error::new(
                    kind,
                    format!(
                        "creating branch {name} on table {table} refused (nothing changed): {}",
                        errs.join("; ")
                    ),
                ));
            }
        }
        self.run(
            TableOpKind::Create,
            name,
            from,
            0,
            parts,
            ConflictPolicy::Fail,
        )
        .map(|_| ())
    }

    /// Deletes `name` on every partition of the table that has it, all or nothing across
    /// crashes (a deletion a crash interrupted is finished at the next open).
    pub fn delete_branch(&self, name: &str) -> Result<()> {
        BranchName::new(name)?;
        let parts = self.partitions()?;
        self.run(
            TableOpKind::Delete,
            name,
            "",
            0,
            parts,
            ConflictPolicy::Fail,
        )
        .map(|_| ())
    }

    /// Archives `branch` on every partition of the table with one shared timestamp, which
    /// it returns (each partition's archive is `manifest_<branch>_<term>_<ts>`); all or
    /// nothing across crashes.
    pub fn archive(&self, branch: &str) -> Result<u64> {
        BranchName::new(branch)?;
        let ts = self.store.inner.clock.now_ms();
        let parts = self.partitions()?;
        for p in &parts {
            // Refused before anything is recorded when a partition lacks the branch.
            self.partition(*p)?.branch(branch)?;
        }
        self.run(
            TableOpKind::Archive,
            branch,
            "",
            ts,
            parts,
            ConflictPolicy::Fail,
        )?;
        Ok(ts)
    }

    /// Merges `source` into `target` on every partition of the table, all or nothing: a
    /// dry run on every partition first, and if any reports a conflict `policy` does not
    /// resolve, nothing is changed and those dry-run reports are returned (none
    /// `committed`). Otherwise the merge is recorded in the branch registry and runs on
    /// every partition; a crash midway is finished at the next open (merging again where
    /// it was done is a no-op unless `source` changed since). Returns each partition's
    /// report.
    pub fn merge(
        &self,
        source: &str,
        target: &str,
        policy: ConflictPolicy,
    ) -> Result<Vec<(PartitionId, MergeReport)>> {
        BranchName::new(source)?;
        BranchName::new(target)?;
        let parts = self.partitions()?;
        let mut dry = Vec::new();
        let opts = MergeOptions {
            policy,
            dry_run: true,
            ..MergeOptions::default()
        };
        for p in &parts {
            dry.push((*p, self.partition(*p)?.merge(source, target, opts)?));
        }
        if policy == ConflictPolicy::Fail && dry.iter().any(|(_, r)| !r.conflicts.is_empty()) {
            return Ok(dry);
        }
        self.run(TableOpKind::Merge, target, source, 0, parts, policy)
    }

    fn run(
        &self,
        kind: TableOpKind,
        branch: &str,
        other: &str,
        ts: u64,
        partitions: Vec<PartitionId>,
        policy: ConflictPolicy,
    ) -> Result<Vec<(PartitionId, MergeReport)>> {
        if partitions.is_empty() {
            return Ok(Vec::new());
        }
        let timestamp = if ts == 0 {
            self.store.inner.clock.now_ms()
        } else {
            ts
        };
        let intent = TableOpIntent {
            kind,
            table: self.name().to_string(),
            branch: branch.to_string(),
            other: other.to_string(),
            timestamp,
            policy: 0,
            partitions,
        };
        self.store.table_op(intent, policy)
    }

    /// Removes every key of `branch` on every partition of the table; the branch stays, and
    /// other branches keep their keys.
    pub fn truncate_branch(&self, branch: &str) -> Result<()> {
        self.store.drop_table_branch(self.name(), branch)
    }

    /// Removes every key of the table's `main` branch on every partition.
    pub fn truncate(&self) -> Result<()> {
        self.truncate_branch("main")
    }
}
