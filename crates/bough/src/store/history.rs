//! Point-in-time branches and restores from the facade (`bough_catalog`'s `history` module
//! holds the rules): a branch of any branch, or a branch put back, as it was at an instant
//! inside `Options::history_window_ms`, at commit granularity, with no archive made in
//! advance (ARCHITECTURE.md, "Point in time").

use super::*;
use bough_names::HistoryName;

impl Store {
    /// Now, by the store's clock (ms since the epoch): the time point-in-time reads, branch
    /// expiry and the history window are measured in.
    pub fn now_ms(&self) -> u64 {
        self.inner.clock.now_ms()
    }
}

impl PartitionHandle {
    /// Creates branch `name` as branch `from` was at store-clock instant `at_ms`: the
    /// state after every commit acknowledged at or before `at_ms`, none after. `from` may
    /// be any branch, root or child; the instant must lie inside the history window
    /// (`Options::history_window_ms`) and after `from` was created. No data is copied: the
    /// branch starts from `from`'s history point before `at_ms` (pages shared), plus one
    /// commit of the logged writes between that point and `at_ms`.
    ///
    /// Refused with `NotFound` when no state at `at_ms` is kept (outside the window, in
    /// the future, before `from` existed), and as [`create_branch`](Self::create_branch)
    /// refuses a name.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bough::{ManualClock, Options, Store};
    /// let clock = ManualClock::new(1_000_000);
    /// let store = Store::builder(Options::in_memory().history_window_ms(3_600_000))
    ///     .clock(Arc::new(clock.clone()))
    ///     .open()?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v1")?;
    /// clock.advance(10);
    /// let before = store.now_ms();
    /// clock.advance(10);
    /// main.put_blocking("k", "v2")?;
    /// // `main` as it was before the second write.
    /// let then = orders.branch_at("then", "main", before)?;
    /// assert_eq!(then.get_blocking("k")?.unwrap().value, b"v1");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn branch_at(&self, name: &str, from: &str, at_ms: u64) -> Result<Branch> {
        self.store
            .inner
            .registry
            .check_free(&self.dir.table, name)?;
        let label = format!("{}@{name}", self.dir);
        let name = BranchName::new(name).map_err(|e| Error::from(e).at(&label))?;
        let parent = self.branch(from)?;
        let part = self.entry()?;
        let window_ms = self.store.inner.opts.history_window_ms;
        let entry = parent
            .call(|reply| BranchOp::BranchAt {
                part,
                name,
                at_ms,
                window_ms,
                reply,
            })
            .map_err(|e| e.at(&label))?;
        self.store.evict_idle_branches();
        Ok(Branch {
            store: self.store.clone(),
            entry,
        })
    }

    /// The history points of branch `name`, oldest first: the states point-in-time reads
    /// start from (each is one small file; see `Options::history_window_ms`).
    pub fn history_points(&self, name: &str) -> Result<Vec<HistoryName>> {
        let label = format!("{}@{name}", self.dir);
        let b = BranchName::new(name).map_err(|e| Error::from(e).at(&label))?;
        self.entry()?
            .part
            .history_points(&b)
            .map_err(|e| Error::from(e).at(&label))
    }
}

impl Branch {
    /// Puts the branch back to its state at store-clock instant `at_ms` (inside the
    /// history window), in place; the state it replaces is kept as branch `backup`. As
    /// [`restore`](Self::restore) does for an archive: the branch moves to a new term, and
    /// a protected branch refuses.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use bough::{ManualClock, Options, Store};
    /// let clock = ManualClock::new(1_000_000);
    /// let store = Store::builder(Options::in_memory().history_window_ms(3_600_000))
    ///     .clock(Arc::new(clock.clone()))
    ///     .open()?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "good")?;
    /// clock.advance(10);
    /// let good = store.now_ms();
    /// clock.advance(10);
    /// main.put_blocking("k", "bad")?;
    /// main.restore_at(good, "before-undo")?;
    /// assert_eq!(orders.branch("main")?.get_blocking("k")?.unwrap().value, b"good");
    /// assert_eq!(orders.branch("before-undo")?.get_blocking("k")?.unwrap().value, b"bad");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn restore_at(&self, at_ms: u64, backup: &str) -> Result<()> {
        let backup = BranchName::new(backup).map_err(|e| Error::from(e).at(&self.entry.label))?;
        let part = self.store.partition_entry(self.partition_dir())?;
        let window_ms = self.store.inner.opts.history_window_ms;
        self.call(|reply| BranchOp::RestoreAt {
            part,
            at_ms,
            window_ms,
            backup,
            reply,
        })
    }
}
