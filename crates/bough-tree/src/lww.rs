//! Last-writer-wins: the one rule that decides which write to a key survives.
//!
//! A write with a user timestamp replaces what is stored when its timestamp is at least the
//! stored one; equal timestamps go to the later write (the later commit). A tombstone is a
//! write with a timestamp like any other. The leaf merge, the write buffer's run merge and
//! its reads, group commit and the three-way merge's `NewestTimestamp` policy all call
//! [`wins`], so they cannot disagree. The `Force*`/`Replace*` ops bypass the rule on
//! purpose (expiry, truncate, merges applying the other side exactly).

use crate::btree::mutation::Op;
use crate::page::leaf::{Entry, ValueLoc};

/// Whether a write with timestamp `new` replaces a stored write (or tombstone) with
/// timestamp `old`, the new one arriving later.
pub fn wins(new: u64, old: u64) -> bool {
    new >= old
}

/// The timestamp an op competes with, or `None` for an op that applies regardless.
pub fn contested_timestamp(op: &Op) -> Option<u64> {
    match op {
        Op::Put { timestamp, .. } | Op::Delete { timestamp, .. } => Some(*timestamp),
        Op::ForceDelete | Op::Replace { .. } | Op::ReplaceWithTombstone { .. } => None,
    }
}

/// The entry `op` leaves for `key`, or `None` when it leaves nothing.
fn written(key: &[u8], op: &Op) -> Option<Entry> {
    let (timestamp, expire_at, value) = match op {
        Op::Put {
            value,
            timestamp,
            expire_at,
        }
        | Op::Replace {
            value,
            timestamp,
            expire_at,
        } => (*timestamp, *expire_at, ValueLoc::Inline(value.clone())),
        Op::Delete {
            timestamp,
            expire_at,
        }
        | Op::ReplaceWithTombstone {
            timestamp,
            expire_at,
        } => (*timestamp, *expire_at, ValueLoc::Tombstone),
        Op::ForceDelete => return None,
    };
    Some(Entry {
        key: key.to_vec(),
        timestamp,
        expire_at,
        value,
    })
}

/// What applying `op` to the stored entry `stored` (tombstones included) leaves: exactly
/// what the leaf merge writes for one key.
pub fn apply(stored: Option<Entry>, key: &[u8], op: &Op) -> Option<Entry> {
    match (stored, contested_timestamp(op)) {
        (Some(old), Some(ts)) if !wins(ts, old.timestamp) => Some(old),
        _ => written(key, op),
    }
}

/// One op with the effect of `older` then `newer` on any stored entry, so runs of a write
/// buffer can be merged without the tree below them.
pub fn compose(older: Op, newer: Op) -> Op {
    match (contested_timestamp(&older), contested_timestamp(&newer)) {
        // The newer op applies regardless.
        (_, None) => newer,
        // Both contest: whichever wins against the other wins against anything the older
        // one would have met (the winner's timestamp is the larger).
        (Some(old_ts), Some(new_ts)) => {
            if wins(new_ts, old_ts) {
                newer
            } else {
                older
            }
        }
        // The older op leaves a known state; the newer one is decided against it now.
        (None, Some(new_ts)) => match older {
            Op::ForceDelete => unconditional(newer),
            Op::Replace { timestamp, .. } | Op::ReplaceWithTombstone { timestamp, .. } => {
                if wins(new_ts, timestamp) {
                    unconditional(newer)
                } else {
                    older
                }
            }
            // Contested ops were matched above.
            Op::Put { .. } | Op::Delete { .. } => older,
        },
    }
}

/// The same write, applied regardless of timestamps.
fn unconditional(op: Op) -> Op {
    match op {
        Op::Put {
            value,
            timestamp,
            expire_at,
        } => Op::Replace {
            value,
            timestamp,
            expire_at,
        },
        Op::Delete {
            timestamp,
            expire_at,
        } => Op::ReplaceWithTombstone {
            timestamp,
            expire_at,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn op_strategy() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..4u64, 0..3u8).prop_map(|(ts, v)| Op::Put {
                value: vec![v],
                timestamp: ts,
                expire_at: 0
            }),
            (0..4u64).prop_map(|ts| Op::Delete {
                timestamp: ts,
                expire_at: 0
            }),
            Just(Op::ForceDelete),
            (0..4u64, 0..3u8).prop_map(|(ts, v)| Op::Replace {
                value: vec![v],
                timestamp: ts,
                expire_at: 0
            }),
            (0..4u64).prop_map(|ts| Op::ReplaceWithTombstone {
                timestamp: ts,
                expire_at: 0
            }),
        ]
    }

    fn stored_strategy() -> impl Strategy<Value = Option<Entry>> {
        prop::option::of(op_strategy()).prop_map(|o| o.and_then(|op| written(b"k", &op)))
    }

    #[test]
    fn equal_timestamps_go_to_the_later_write() {
        assert!(wins(5, 5));
        assert!(wins(6, 5));
        assert!(!wins(4, 5));
        let put = |ts, v| Op::Put {
            value: vec![v],
            timestamp: ts,
            expire_at: 0,
        };
        let stored = apply(None, b"k", &put(5, 1));
        assert_eq!(
            apply(stored.clone(), b"k", &put(5, 2)).map(|e| e.value),
            Some(ValueLoc::Inline(vec![2]))
        );
        assert_eq!(
            apply(stored, b"k", &put(4, 3)).map(|e| e.value),
            Some(ValueLoc::Inline(vec![1]))
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Composing two ops is applying one after the other, whatever was stored.
        #[test]
        fn compose_is_apply_then_apply(
            stored in stored_strategy(),
            a in op_strategy(),
            b in op_strategy(),
        ) {
            let step = apply(apply(stored.clone(), b"k", &a), b"k", &b);
            let once = apply(stored, b"k", &compose(a, b));
            prop_assert_eq!(once, step);
        }
    }
}
