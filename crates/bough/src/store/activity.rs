//! [`Activity`]: when a branch last took a write, so the maintenance thread checkpoints a
//! branch's write buffer once the branch goes idle instead of on every tick.
//!
//! Expiry and the mapping checkpoint read a branch's tree, so they checkpoint the write
//! buffer first. Run on every tick under a steady load, that turned one large checkpoint
//! per full buffer into one small one per tick, each rewriting the leaves its writes touch.
//! A branch that took a write within the last interval is now left alone for the tick, at
//! most [`MAX_DEFERRED_TICKS`] ticks in a row, so expiry still runs under a load that never
//! pauses. (Compaction keeps the buffer; under load it follows each large checkpoint:
//! `store/wake.rs`.)

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Ticks in a row the background maintenance of a busy branch may be put off (six 10 s
/// ticks by default: a branch under a load that never pauses is still compacted and swept
/// for expired keys about once a minute).
pub(super) const MAX_DEFERRED_TICKS: u32 = 6;

/// When a branch last took a write, and how many maintenance ticks in a row passed it by.
#[derive(Debug, Default)]
pub(super) struct Activity {
    /// The store clock's time of the last commit (0: none since the branch was opened).
    last_write_ms: AtomicU64,
    deferred: AtomicU32,
}

impl Activity {
    /// A commit at `now_ms`.
    pub(super) fn wrote(&self, now_ms: u64) {
        self.last_write_ms.store(now_ms.max(1), Ordering::Relaxed);
    }

    /// Whether this tick leaves the branch alone: it took a write less than `idle_ms` ago
    /// (it is not idle), and the ticks before did not already put it off
    /// [`MAX_DEFERRED_TICKS`] times in a row. Counts the tick either way.
    pub(super) fn defer_tick(&self, now_ms: u64, idle_ms: u64) -> bool {
        let last = self.last_write_ms.load(Ordering::Relaxed);
        let busy = last != 0 && now_ms.saturating_sub(last) < idle_ms;
        if busy && self.deferred.load(Ordering::Relaxed) < MAX_DEFERRED_TICKS {
            self.deferred.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        self.deferred.store(0, Ordering::Relaxed);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_branch_is_left_alone_while_busy_and_at_most_max_deferred_ticks_in_a_row() {
        let a = Activity::default();
        // Never written: maintained at every tick.
        assert!(!a.defer_tick(1_000, 10_000));
        a.wrote(1_000);
        // Busy: put off, but not forever.
        for tick in 0..MAX_DEFERRED_TICKS {
            assert!(a.defer_tick(1_000 + u64::from(tick), 10_000), "tick {tick}");
        }
        assert!(
            !a.defer_tick(1_100, 10_000),
            "the seventh tick maintains it"
        );
        assert!(a.defer_tick(1_200, 10_000), "and the count starts again");
        // Idle for a whole interval: maintained.
        assert!(!a.defer_tick(11_000, 10_000));
        assert!(!a.defer_tick(11_001, 10_000));
        // A clock that went back reads as busy, not as a huge idle time.
        a.wrote(20_000);
        assert!(a.defer_tick(19_000, 10_000));
    }
}
