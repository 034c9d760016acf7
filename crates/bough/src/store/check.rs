//! [`Store::check`] and [`PartitionHandle::check`]: the integrity check over the store's
//! own storage (see [`crate::check`]). They read only, so they run on a read-only open
//! and beside the store's own writers.

use super::*;
use crate::check::{CheckOptions, CheckReport, PartitionReport, check_partition, check_storage};

impl Store {
    /// Reads everything the store holds and reports every problem found
    /// ([`CheckReport`]); damage is a finding, not an error. `Err` only when the store
    /// cannot be listed.
    ///
    /// ```
    /// use bough::{Options, Store, WriteBatch};
    ///
    /// let store = Store::open(Options::in_memory()).unwrap();
    /// let main = store.partition("orders", 0).unwrap().branch("main").unwrap();
    /// let mut batch = WriteBatch::new();
    /// batch.put("order-1", "pending");
    /// main.write_blocking(batch).unwrap();
    /// // The write is in the branch's log; a checkpoint puts it in the tree the check counts.
    /// main.checkpoint_blocking().unwrap();
    /// let report = store.check(&Default::default()).unwrap();
    /// assert!(report.is_clean(true), "{report:?}");
    /// assert_eq!(report.partitions[0].keys, 1);
    /// ```
    pub fn check(&self, opts: &CheckOptions) -> Result<CheckReport> {
        check_storage(&self.inner.storage, opts)
    }
}

impl PartitionHandle {
    /// [`Store::check`] for this partition only.
    pub fn check(&self, opts: &CheckOptions) -> Result<PartitionReport> {
        check_partition(&self.store.inner.storage, &self.dir.to_string(), opts)
    }
}
