//! [`Table`]: the partitions of one table, and operations over all of them at once (branch
//! create, delete, archive, truncate).

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

    /// Creates `name` from `from` on every partition of the table, all or nothing: if any
    /// partition fails, the branches created so far are deleted again and every
    /// per-partition error is reported.
    pub fn create_branch(&self, name: &str, from: &str) -> Result<()> {
        BranchName::new(name)?;
        BranchName::new(from)?;
        let table = self.name();
        let parts = self.partitions()?;
        let mut done = Vec::new();
        let mut errors = Vec::new();
        // The kind shared by every failure (`Io` when they differ).
        let mut kind = None;
        for p in &parts {
            match self.partition(*p)?.create_branch(name, from) {
                Ok(_) => done.push(*p),
                Err(e) => {
                    kind = match kind {
                        None => Some(e.kind()),
                        Some(k) if k == e.kind() => Some(k),
                        Some(_) => Some(ErrorKind::Io),
                    };
                    errors.push(e.to_string());
                }
            }
        }
        if errors.is_empty() {
            return Ok(());
        }
        for p in done {
            if let Err(e) = self.partition(p)?.delete_branch(name) {
                errors.push(format!("rollback: {e}"));
            }
        }
        Err(Error::new(
            kind.unwrap_or(ErrorKind::Io),
            format!(
                "creating branch {name} on table {table} failed: {}",
                errors.join("; ")
            ),
        ))
    }

    /// Deletes `name` on every partition of the table that has it.
    pub fn delete_branch(&self, name: &str) -> Result<()> {
        for p in self.partitions()? {
            match self.partition(p)?.delete_branch(name) {
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                other => other?,
            }
        }
        Ok(())
    }

    /// Archives `branch` on every partition of the table with one shared timestamp, which
    /// it returns (each partition's archive is `manifest_<branch>_<term>_<ts>`).
    pub fn archive(&self, branch: &str) -> Result<u64> {
        let ts = self.store.inner.clock.now_ms();
        for p in self.partitions()? {
            self.partition(p)?.branch(branch)?.archive_at(ts)?;
        }
        Ok(ts)
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
