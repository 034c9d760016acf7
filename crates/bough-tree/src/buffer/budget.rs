//! [`BufferBudget`]: one bound on the bytes every write buffer of a store holds together.
//! `write_buffer_bytes` bounds one branch; a store with a thousand branches that each
//! buffer a little would otherwise hold a thousand buffers' worth of memory.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Bytes held by every write buffer sharing this budget, against a limit.
///
/// A head checkpoints its own buffer after a commit when the total is over the limit and
/// its buffer is a sizeable part of it (at least [`SHARE_DIVISOR`]th of the limit), or
/// when the total is over twice the limit whatever its size. So the total stays below
/// twice the limit plus what one commit adds, and a branch that buffers little is not made
/// to checkpoint for the others while the total is merely over.
#[derive(Debug)]
pub struct BufferBudget {
    used: AtomicUsize,
    limit: usize,
    forced: AtomicU64,
    /// Checkpoints a commit ran before it was acknowledged, and the nanoseconds they took
    /// (the back-pressure a full buffer puts on its writer).
    commit_checkpoints: AtomicU64,
    commit_checkpoint_nanos: AtomicU64,
    /// Checkpoints started on a thread of their own (commits went on meanwhile).
    background: AtomicU64,
}

/// A buffer holding at least `limit / SHARE_DIVISOR` bytes checkpoints once the total is
/// over the limit.
pub const SHARE_DIVISOR: usize = 16;

impl BufferBudget {
    /// A budget of `limit` bytes (at least 1).
    pub fn new(limit: usize) -> BufferBudget {
        BufferBudget {
            used: AtomicUsize::new(0),
            limit: limit.max(1),
            forced: AtomicU64::new(0),
            commit_checkpoints: AtomicU64::new(0),
            commit_checkpoint_nanos: AtomicU64::new(0),
            background: AtomicU64::new(0),
        }
    }

    /// Bytes every buffer sharing the budget holds now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Checkpoints the budget forced (a buffer below its own size checkpointed because the
    /// store's buffers together were over the limit).
    pub fn forced_checkpoints(&self) -> u64 {
        self.forced.load(Ordering::Relaxed)
    }

    /// A buffer charged `old` bytes now holds `new`.
    pub(crate) fn recharge(&self, old: usize, new: usize) {
        if new >= old {
            self.used.fetch_add(new - old, Ordering::Relaxed);
        } else {
            // Never below zero: every byte taken off was added before by the same head.
            let _ = self
                .used
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                    Some(u.saturating_sub(old - new))
                });
        }
    }

    /// Whether a buffer holding `own` bytes should checkpoint now for the budget's sake.
    pub(crate) fn wants_checkpoint(&self, own: usize) -> bool {
        let used = self.used();
        own > 0
            && used > self.limit
            && (own >= self.limit / SHARE_DIVISOR || used > self.limit.saturating_mul(2))
    }

    /// Counts a checkpoint the budget forced.
    pub(crate) fn note_forced(&self) {
        self.forced.fetch_add(1, Ordering::Relaxed);
    }

    /// Checkpoints commits ran before they were acknowledged (their buffer over its size,
    /// the budget asking, or their log file full), and how long those commits waited for
    /// them together.
    pub fn commit_checkpoints(&self) -> (u64, std::time::Duration) {
        (
            self.commit_checkpoints.load(Ordering::Relaxed),
            std::time::Duration::from_nanos(self.commit_checkpoint_nanos.load(Ordering::Relaxed)),
        )
    }

    /// Checkpoints started on a thread of their own.
    pub fn background_checkpoints(&self) -> u64 {
        self.background.load(Ordering::Relaxed)
    }

    /// Counts a checkpoint started on a thread of its own.
    pub(crate) fn note_background(&self) {
        self.background.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a checkpoint a commit waited `took` for.
    pub(crate) fn note_commit_checkpoint(&self, took: std::time::Duration) {
        self.commit_checkpoints.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.commit_checkpoint_nanos
            .fetch_add(nanos, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_asks_large_buffers_first_and_every_buffer_past_twice_the_limit() {
        let b = BufferBudget::new(1600);
        b.recharge(0, 1000);
        assert!(!b.wants_checkpoint(1000), "under the limit");
        b.recharge(0, 700);
        assert_eq!(b.used(), 1700);
        assert!(b.wants_checkpoint(700), "over, and a sizeable share");
        assert!(!b.wants_checkpoint(50), "over, but a small share");
        b.recharge(0, 1600);
        assert!(b.wants_checkpoint(50), "over twice the limit: every buffer");
        assert!(
            !b.wants_checkpoint(0),
            "an empty buffer has nothing to give"
        );
        b.recharge(1600, 0);
        b.recharge(700, 0);
        b.recharge(1000, 0);
        assert_eq!(b.used(), 0);
        b.recharge(5, 0);
        assert_eq!(b.used(), 0, "never below zero");
    }
}
