//! Garbage collection of a partition from the facade: the pins readers and writers hold, the
//! measuring walk, and space per branch.

use super::*;

/// Every snapshot a reader of the partition holds and every file a writer is filling. Taken
/// after the walk has read the manifests (see `bough_gc::collect_with`).
pub(super) fn pins_of(p: &PartitionEntry) -> Pins {
    let mut pins = Pins::default();
    for b in p.branches.lock().values() {
        pins.snapshots.extend(b.published.live());
    }
    p.retired.lock().retain(|r| {
        let held = r.held_by_readers();
        let keep = !held.is_empty();
        pins.snapshots.extend(held);
        keep
    });
    p.tag_views.lock().retain(|w| match w.upgrade() {
        Some(s) => {
            pins.snapshots.push(s);
            true
        }
        None => false,
    });
    pins.writing.extend(p.part.files().writing());
    pins
}

/// GC of one partition: everything its manifests and archives reference, every snapshot a
/// reader holds, every file a writer is filling. The same walk measures the partition's
/// usage, which is cached for the next compactions (see [`usage_of`]).
///
/// In cloud mode the run holds the partition's GC lease (one process at a time collects a
/// partition; `Busy` while another does): every deletion checks it, so a run that lost it
/// deletes nothing more.
/// Deletes the history points the window no longer needs, before a GC pass, so the pass
/// frees what only they held. A failure leaves them for the next pass.
pub(super) fn prune_history(p: &PartitionEntry, inner: &Inner) {
    let now = inner.clock.now_ms();
    let pruned = {
        let _catalog = p.catalog.lock();
        p.part.prune_history(now, inner.opts.history_window_ms)
    };
    if let Err(e) = pruned {
        tracing::warn!(partition = %p.part.dir(), error = %e, "cannot prune history points");
    }
}

pub(super) fn gc_partition(
    p: &PartitionEntry,
    cloud: Option<&bough_object::CloudStorage>,
    dry_run: bool,
) -> Result<GcReport> {
    let _catalog = p.catalog.lock();
    // Read under the catalog lock, before the walk lists the directory: a change after this
    // point bumps the epoch past it, so the cached usage is never taken for newer than it is.
    let epoch = p.epoch.load(Ordering::Acquire);
    let lease = if dry_run {
        None
    } else {
        crate::cloud::gc_lease(cloud, &p.part.dir().to_string())?
    };
    let measured = std::thread::scope(|scope| {
        // Keep the lease alive while GC reads manifests and walks mapping pages (which can
        // take longer than the lease); every deletion checks it again anyway. A renewal
        // that fails stops the keeper: the deletions then find the lease lost or uncertain
        // and delete nothing.
        let (stop, stopped) = mpsc::channel::<()>();
        if let Some(l) = &lease {
            let every = Duration::from_millis((l.ttl_ms() / 4).clamp(50, 5_000));
            scope.spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                    if let Err(e) = l.check() {
                        tracing::warn!(error = %e, "GC lease not renewed");
                        return;
                    }
                }
            });
        }
        let r = bough_gc::collect_measured_cached(
            p.part.files(),
            || pins_of(p),
            dry_run,
            Some(&p.gc_states),
        )
        .map_err(|e| Error::from(e).at(p.part.dir()));
        drop(stop);
        r
    });
    if let Some(lease) = lease {
        lease.release();
    }
    let (report, usage) = measured?;
    *p.usage.lock() = Some((epoch, Arc::new(usage)));
    Ok(report)
}

/// Which files of the partition are live and who holds them, for compaction: the usage the
/// last GC walk measured while no catalog change happened since, otherwise a new walk.
///
/// Why a cached walk is good enough: compaction counts the compacting branch's own live
/// pages afresh and takes from the usage only who *else* holds a file. Without a catalog
/// change, other referents can only drop pages (commits, compactions and readers letting
/// go), so a cached answer errs towards keeping a file that became compactable, which the
/// next GC corrects; every change that can add a holder (fork, archive, merge, reset,
/// restore, new term, delete) bumps the epoch and forces a new walk. Choosing a victim is
/// advisory either way: GC's own walk decides what is deleted. So the maintenance thread
/// pays one walk per partition per tick — GC's, which it ran anyway — and a catalog change
/// costs one more.
pub(super) fn usage_of(p: &PartitionEntry) -> Result<Arc<Usage>> {
    let epoch = p.epoch.load(Ordering::Acquire);
    if let Some((at, u)) = p.usage.lock().as_ref()
        && *at == epoch
    {
        return Ok(u.clone());
    }
    let _catalog = p.catalog.lock();
    let epoch = p.epoch.load(Ordering::Acquire);
    let usage = bough_gc::measure_cached(p.part.files(), || pins_of(p), Some(&p.gc_states))
        .map_err(|e| Error::from(e).at(p.part.dir()))?;
    let usage = Arc::new(usage);
    *p.usage.lock() = Some((epoch, usage.clone()));
    Ok(usage)
}

/// The partition's usage measured now, with the catalog lock held (as GC walks), and cached
/// for the next compactions as [`usage_of`] would.
pub(super) fn measure_locked(p: &PartitionEntry) -> Result<Arc<Usage>> {
    let epoch = p.epoch.load(Ordering::Acquire);
    let usage = bough_gc::measure_cached(p.part.files(), || pins_of(p), Some(&p.gc_states))
        .map_err(|e| Error::from(e).at(p.part.dir()))?;
    let usage = Arc::new(usage);
    *p.usage.lock() = Some((epoch, usage.clone()));
    Ok(usage)
}

/// [`measure_locked`] for a description: a partition another branch's damage keeps from being
/// walked still describes its branches, only their cost is unknown (GC and verify report
/// the damage).
/// How long a description waits for a catalog change in progress before it leaves the
/// space figures out.
pub(super) const DESCRIBE_LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

pub(super) fn measure_or_warn(p: &PartitionEntry) -> Option<Arc<Usage>> {
    // A description never waits for a catalog change (a deletion stalled in I/O holds the
    // lock): then the branches are described without their cost.
    let Some(_catalog) = p.catalog.try_lock_for(DESCRIBE_LOCK_WAIT) else {
        tracing::info!("a catalog change is running: the branches' space is not measured");
        return None;
    };
    measure_locked(p)
        .inspect_err(|e| tracing::warn!(error = %e, "cannot measure the partition's space"))
        .ok()
}

pub(super) fn space_or_warn(
    p: &PartitionEntry,
    usage: &Usage,
    branch: &BranchName,
) -> Option<bough_catalog::BranchSpace> {
    bough_gc::branch_space(p.part.files(), usage, branch)
        .inspect_err(|e| tracing::warn!(error = %e, %branch, "cannot measure the branch's space"))
        .ok()
}

impl Store {
    /// Garbage-collects every partition opened so far; returns a report per partition. In
    /// cloud mode a partition whose GC lease another process holds is skipped this time
    /// (it is being collected there).
    pub fn gc(&self) -> Result<Vec<(String, GcReport)>> {
        self.check_writable()?;
        let parts: Vec<Arc<PartitionEntry>> =
            self.inner.partitions.lock().values().cloned().collect();
        let mut out = Vec::with_capacity(parts.len());
        for p in &parts {
            prune_history(p, &self.inner);
            match gc_partition(p, self.inner.cloud.as_ref(), false) {
                Ok(report) => out.push((p.part.dir().to_string(), report)),
                Err(e) if e.kind() == ErrorKind::Busy && self.inner.cloud.is_some() => {
                    tracing::info!(partition = %p.part.dir(), error = %e, "GC skipped: another process holds the lease");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}
