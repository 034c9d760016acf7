//! Bounded, jittered exponential backoff for transient object-store failures (5xx, 429,
//! timeouts, cut-off bodies). The jitter comes from a seeded generator, so a test replays.

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::object::{ObjResult, ObjectError};

/// How often and how patiently a transient failure is retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryPolicy {
    /// Attempts in total (the first one included); at least 1.
    pub attempts: u32,
    /// Delay before the first retry, in ms; doubled per retry.
    pub base_delay_ms: u64,
    /// Largest delay, in ms.
    pub max_delay_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 8,
            base_delay_ms: 50,
            max_delay_ms: 5_000,
        }
    }
}

/// A retry loop with its jitter generator.
#[derive(Debug)]
pub(crate) struct Retrier {
    policy: RetryPolicy,
    rng: Mutex<u64>,
}

/// The outcome of a retried call: the result, and whether an attempt that failed might
/// nevertheless have taken effect (a timeout after the store applied the request), which
/// makes a later "precondition failed" ambiguous.
pub(crate) struct Outcome<T> {
    pub result: ObjResult<T>,
    pub maybe_applied: bool,
}

impl Retrier {
    pub(crate) fn new(policy: RetryPolicy, seed: u64) -> Self {
        Retrier {
            policy,
            rng: Mutex::new(seed | 1),
        }
    }

    /// Full jitter: a delay drawn uniformly from [0, min(max, base * 2^retry)].
    fn delay_ms(&self, retry: u32) -> u64 {
        let cap = self
            .policy
            .base_delay_ms
            .saturating_mul(1u64 << retry.min(20))
            .min(self.policy.max_delay_ms);
        if cap == 0 {
            return 0;
        }
        let mut s = self.rng.lock();
        // xorshift64
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s % (cap + 1)
    }

    /// Calls `f` until it succeeds, fails for good, or the attempts run out.
    pub(crate) fn run<T>(&self, what: &str, mut f: impl FnMut() -> ObjResult<T>) -> Outcome<T> {
        let mut maybe_applied = false;
        let attempts = self.policy.attempts.max(1);
        let mut retry = 0;
        loop {
            match f() {
                Err(e) if e.is_transient() && retry + 1 < attempts => {
                    maybe_applied |= e.may_have_applied();
                    let d = self.delay_ms(retry);
                    tracing::debug!(error = %e, retry, delay_ms = d, what, "retrying an object-store request");
                    if d > 0 {
                        std::thread::sleep(std::time::Duration::from_millis(d));
                    }
                    retry += 1;
                }
                Err(e) => {
                    maybe_applied |= e.may_have_applied();
                    return Outcome {
                        result: Err(e),
                        maybe_applied,
                    };
                }
                Ok(v) => {
                    return Outcome {
                        result: Ok(v),
                        maybe_applied,
                    };
                }
            }
        }
    }

    /// Like [`run`](Self::run), for calls whose effect is never ambiguous (reads, deletes).
    pub(crate) fn simple<T>(&self, what: &str, f: impl FnMut() -> ObjResult<T>) -> ObjResult<T> {
        self.run(what, f).result
    }
}

/// Whether an error means the object does not exist.
pub(crate) fn is_not_found(e: &ObjectError) -> bool {
    matches!(e, ObjectError::NotFound { .. })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Transient;

    fn transient() -> ObjectError {
        ObjectError::Transient {
            op: "put",
            key: "k".into(),
            reason: Transient::Server,
            message: "503".into(),
        }
    }

    #[test]
    fn retries_transient_then_gives_up() {
        let r = Retrier::new(
            RetryPolicy {
                attempts: 3,
                base_delay_ms: 0,
                max_delay_ms: 0,
            },
            7,
        );
        let mut calls = 0;
        let out = r.run("t", || {
            calls += 1;
            Err::<(), _>(transient())
        });
        assert!(out.result.is_err());
        assert!(out.maybe_applied);
        assert_eq!(calls, 3);
        let mut calls = 0;
        let out = r.run("t", || {
            calls += 1;
            if calls < 2 { Err(transient()) } else { Ok(5) }
        });
        assert_eq!(out.result.ok(), Some(5));
        let mut calls = 0;
        let out = r.run("t", || {
            calls += 1;
            Err::<(), _>(ObjectError::NotFound { key: "k".into() })
        });
        assert!(out.result.is_err());
        assert_eq!(calls, 1, "permanent errors are not retried");
    }

    #[test]
    fn jitter_is_bounded() {
        let r = Retrier::new(
            RetryPolicy {
                attempts: 5,
                base_delay_ms: 10,
                max_delay_ms: 100,
            },
            42,
        );
        for retry in 0..30 {
            assert!(r.delay_ms(retry) <= 100);
        }
    }
}
