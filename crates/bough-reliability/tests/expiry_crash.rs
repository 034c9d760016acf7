//! Power loss at every sync point of branch expiry changes (issue 18 §7): an expiry set,
//! brought forward, pushed back and taken off. A branch's expiry is in its manifest and,
//! as a hint, in its `CURRENT_TERM` record, written in an order that keeps the hint never
//! later than the manifest. At every crash point, reopened after the earlier expiries have
//! passed: a branch whose acknowledged expiry passed is gone, one whose expiry has not is
//! there with that expiry (the change in flight may have taken effect or not), and once
//! every expiry has passed, maintenance deletes exactly the branches that have one.

use std::collections::BTreeMap;
use std::sync::Arc;

use bough::io::{FaultInjector, FaultOp, MemoryStorage, Storage};
use bough::{ErrorKind, ManualClock, PartitionHandle, Store};
use bough_reliability::power::{memory_options, policy_for};

const T0: u64 = 1_700_000_000_000;
const HOUR: u64 = 3_600_000;

/// Expiry per branch: `None` never expires.
type Expiries = BTreeMap<&'static str, Option<u64>>;

/// What a run of the script acknowledged, and the change in flight when it stopped: the
/// branch and the expiry it would have set (a creation in flight sets none).
#[derive(Default)]
struct Run {
    acked: Expiries,
    in_flight: Option<(&'static str, Option<u64>)>,
}

fn script(store: &Store) -> Run {
    let mut run = Run::default();
    let Ok(p) = store.partition("t", 0) else {
        return run;
    };
    let step = |run: &mut Run, name, r: bough::Result<()>, to| match r {
        Ok(()) => {
            run.acked.insert(name, to);
            true
        }
        Err(e) => {
            assert!(
                matches!(e.kind(), ErrorKind::Io | ErrorKind::Poisoned),
                "{name}: {:?}: {e}",
                e.kind()
            );
            run.in_flight = Some((name, to));
            false
        }
    };
    for name in ["sooner-from-none", "sooner", "later", "taken-off", "never"] {
        let r = p.create_branch(name, "main").map(drop);
        if !step(&mut run, name, r, None) {
            return run;
        }
    }
    let changes: [(&str, Option<u64>); 7] = [
        ("sooner-from-none", Some(T0 + HOUR)),
        ("sooner", Some(T0 + 3 * HOUR)),
        ("sooner", Some(T0 + HOUR)),
        ("later", Some(T0 + HOUR)),
        ("later", Some(T0 + 5 * HOUR)),
        ("taken-off", Some(T0 + HOUR)),
        ("taken-off", None),
    ];
    for (name, to) in changes {
        let r = p.set_expiry(name, to, false).map(drop);
        if !step(&mut run, name, r, to) {
            return run;
        }
    }
    run
}

/// The expiries branch `name` may have after the crash: its acknowledged one, or the one
/// the change in flight sets. Empty if it may not exist at all.
fn allowed(run: &Run, name: &str) -> Vec<Option<u64>> {
    let mut out: Vec<Option<u64>> = run.acked.get(name).copied().into_iter().collect();
    if let Some((n, to)) = run.in_flight
        && n == name
    {
        out.push(to);
    }
    out
}

fn check(p: &PartitionHandle, run: &Run, now: u64, ctx: &str) {
    let names = p
        .branches()
        .unwrap_or_else(|e| panic!("{ctx}: branches: {e}"));
    let passed = |e: &Option<u64>| e.is_some_and(|at| at <= now);
    let mut every: Vec<&str> = run.acked.keys().copied().collect();
    every.extend(run.in_flight.map(|(n, _)| n));
    for name in every {
        let may = allowed(run, name);
        let acked = run.acked.contains_key(name);
        if names.iter().any(|n| n == name) {
            let got = p
                .describe(name)
                .unwrap_or_else(|e| panic!("{ctx}: describe {name}: {e}"))
                .policy
                .expires_at_ms;
            assert!(
                may.contains(&got) && !passed(&got),
                "{ctx}: {name} is there with expiry {got:?} at {now}; may be {may:?}"
            );
        } else {
            // Gone: it was never acknowledged, or an expiry it may have passed.
            assert!(
                !acked || may.iter().any(passed),
                "{ctx}: {name} is gone though its expiry ({may:?}) has not passed at {now}"
            );
        }
    }
}

#[test]
fn expiry_changes_survive_power_loss_at_every_sync_point() {
    let seed = 0xe7_1e5_u64;
    let mem = MemoryStorage::new();
    let clock = ManualClock::new(T0);
    let store = memory_options(mem.clone(), &clock).open().expect("open");
    let full = script(&store);
    assert!(full.in_flight.is_none(), "the script fails without faults");
    let syncs = store.io_stats();
    let points = syncs.syncs + syncs.dir_syncs + 8;
    store.close().expect("close");
    let mut crashed = 0;
    for k in 0..points {
        let faults = FaultInjector::new();
        faults.fail_after(FaultOp::Sync, k, libc::EIO, u64::MAX);
        let mem = MemoryStorage::with_faults(faults.clone());
        let clock = ManualClock::new(T0);
        let Ok(store) = memory_options(mem.clone(), &clock).open() else {
            continue;
        };
        let run = script(&store);
        let _ = store.close();
        if faults.fired() == 0 {
            continue;
        }
        let policy = policy_for(seed, k);
        faults.clear();
        mem.crash(policy);
        crashed += 1;
        let ctx = format!(
            "seed {seed:#x}, crash at sync {k} ({policy:?}), in flight {:?}",
            run.in_flight
        );
        // Past the earlier expiries, before the latest: open deletes what is due.
        clock.set(T0 + 2 * HOUR);
        let store = memory_options(mem.clone(), &clock)
            .open()
            .unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        let p = store.partition("t", 0).expect("partition");
        check(&p, &run, T0 + 2 * HOUR, &format!("{ctx}, at open"));
        // Past every expiry: maintenance deletes every branch that has one.
        clock.set(T0 + 10 * HOUR);
        store.run_maintenance().expect("maintenance");
        check(&p, &run, T0 + 10 * HOUR, &format!("{ctx}, later"));
        for name in p.branches().expect("branches") {
            let e = p.describe(&name).expect("describe").policy.expires_at_ms;
            assert_eq!(e, None, "{ctx}: {name} outlived its expiry {e:?}");
        }
        store.close().expect("close");
        let storage: Arc<dyn Storage> = Arc::new(mem.clone());
        let integrity = bough_reliability::check::check_storage(storage).expect("check runs");
        assert!(integrity.is_ok(), "{ctx}: integrity check: {integrity}");
    }
    eprintln!("seed {seed:#x}: {crashed} crash points of {points}");
    assert!(crashed > 10, "only {crashed} crash points");
}
