//! Injected time: the engine never reads the system clock directly, so tests control expiry.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A source of wall-clock time in milliseconds since the Unix epoch.
///
/// ```
/// use std::sync::Arc;
/// use bough::{Clock, Options, Store, SystemClock};
///
/// // The store reads time only through its clock (timestamps, expiry, branch TTLs).
/// let clock: Arc<dyn Clock> = Arc::new(SystemClock);
/// assert!(clock.now_ms() > 0);
/// let store = Store::builder(Options::in_memory()).clock(clock).open()?;
/// store.close()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now, in ms since the epoch.
    fn now_ms(&self) -> u64;
}

/// The system clock.
///
/// ```
/// use bough::{Clock, SystemClock};
///
/// // Milliseconds since the Unix epoch: after 2020.
/// assert!(SystemClock.now_ms() > 1_577_836_800_000);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// A clock that moves only when told (tests).
///
/// ```
/// use bough::{Clock, ManualClock};
///
/// let clock = ManualClock::new(1_000);
/// clock.advance(5);
/// assert_eq!(clock.now_ms(), 1_005);
/// clock.set(7);
/// assert_eq!(clock.now_ms(), 7);
/// ```
#[derive(Debug, Default, Clone)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock at `ms`.
    pub fn new(ms: u64) -> Self {
        ManualClock(Arc::new(AtomicU64::new(ms)))
    }

    /// Moves the clock forward.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    /// Sets the clock.
    pub fn set(&self, ms: u64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}
