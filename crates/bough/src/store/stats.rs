//! What a store reports about itself: I/O counters, the page cache, and what the write
//! buffers hold together ([`Store::write_buffer_usage`]).

use super::*;

/// What [`Store::write_buffer_usage`] reports.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// store.partition("t", 0)?.branch("main")?.put_blocking("k", "v")?;
/// let usage = store.write_buffer_usage();
/// // The write waits in its branch's buffer until a checkpoint.
/// assert!(usage.bytes > 0);
/// assert!(usage.limit.is_some());
/// assert_eq!(usage.forced_checkpoints, 0);
/// assert_eq!(usage.commit_checkpoints, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteBufferUsage {
    /// Bytes every branch's write buffer holds now (keys, values and per-entry overhead).
    pub bytes: u64,
    /// [`Options::write_buffer_total_bytes`] (`None`: 0, no bound).
    pub limit: Option<u64>,
    /// Checkpoints of a buffer below its own `write_buffer_bytes` that the bound forced.
    pub forced_checkpoints: u64,
    /// Checkpoints that ran inside a commit, before it was acknowledged: with
    /// [`Options::background_checkpoints`] off, a buffer over its `write_buffer_bytes` (or
    /// one the bound forced) is checkpointed by the commit that filled it; with it on, a
    /// commit waits for the running checkpoint when the buffer reached twice its bound (or
    /// the store's bound presses) before it was done, or when its log file is full. A
    /// commit that finds its log file full and `LOG` naming eight files checkpoints the
    /// buffer with the record naming the next file. This is the back-pressure a writer
    /// sees.
    pub commit_checkpoints: u64,
    /// Checkpoints started on a thread of their own while commits went on
    /// ([`Options::background_checkpoints`]).
    pub background_checkpoints: u64,
    /// How long those commits waited for their checkpoints, together.
    pub commit_checkpoint_wait: std::time::Duration,
}

impl Store {
    /// What the write buffers of every branch hold together, against
    /// [`Options::write_buffer_total_bytes`], and how many checkpoints that bound forced.
    ///
    /// ```
    /// # fn main() -> bough::Result<()> {
    /// let store = bough::Store::open(bough::Options::in_memory().write_buffer_bytes(1 << 20))?;
    /// store.partition("t", 0)?.branch("main")?.put_blocking("k", "v")?;
    /// assert!(store.write_buffer_usage().bytes > 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn write_buffer_usage(&self) -> WriteBufferUsage {
        let budget = self.inner.head_cfg.buffer_budget.as_ref();
        let stalls = budget.map_or((0, std::time::Duration::ZERO), |b| b.commit_checkpoints());
        WriteBufferUsage {
            bytes: budget.map_or(0, |b| b.used() as u64),
            limit: match self.inner.opts.write_buffer_total_bytes {
                0 => None,
                n => Some(n),
            },
            forced_checkpoints: budget.map_or(0, |b| b.forced_checkpoints()),
            commit_checkpoints: stalls.0,
            commit_checkpoint_wait: stalls.1,
            background_checkpoints: budget.map_or(0, |b| b.background_checkpoints()),
        }
    }

    /// I/O counters of the storage backend.
    pub fn io_stats(&self) -> IoStatsSnapshot {
        self.inner.storage.stats().snapshot()
    }

    /// The page cache (hit counters, size).
    pub fn cache(&self) -> &PageCache {
        &self.inner.cache
    }
}
