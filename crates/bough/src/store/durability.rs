//! [`Store::sync`]: every open branch's buffered-durability writes made durable.

use super::*;

impl Store {
    /// Returns once every write acknowledged on any branch of the store before the call is
    /// durable: [`Branch::sync`] on every open branch (one `fdatasync` of each log that has
    /// writes waiting for one; heads closed while idle were checkpointed, so synced, when
    /// they closed). The first failure is returned, after every branch was asked. Nothing
    /// to do on a read-only store.
    pub async fn sync(&self) -> Result<()> {
        let mut first_err = None;
        for rx in self.sync_requests()? {
            if let Err(e) = rx.await.unwrap_or_else(|| Err(Error::closed())) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Blocking [`sync`](Self::sync).
    pub fn sync_blocking(&self) -> Result<()> {
        oneshot::block_on(self.sync())
    }

    /// Queues a sync on every open, live branch (all queued before any is awaited, so the
    /// shards sync in parallel).
    fn sync_requests(&self) -> Result<Vec<oneshot::Receiver<Result<()>>>> {
        self.check_open()?;
        if self.inner.read_only {
            return Ok(Vec::new());
        }
        let parts: Vec<Arc<PartitionEntry>> =
            self.inner.partitions.lock().values().cloned().collect();
        let mut out = Vec::new();
        for p in parts {
            let entries: Vec<Arc<BranchEntry>> = p.branches.lock().values().cloned().collect();
            for entry in entries {
                if entry.gone.load(Ordering::Acquire) {
                    continue;
                }
                let branch = Branch {
                    store: self.clone(),
                    entry,
                };
                match branch.send(|reply| BranchOp::Sync { reply }) {
                    Ok(rx) => out.push(rx),
                    // Deleted since it was listed: nothing of it to make durable.
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(out)
    }
}
