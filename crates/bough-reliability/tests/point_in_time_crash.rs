//! Power loss at every sync point of point-in-time operations (issue 18 §5): commits on a
//! root and a child branch, a branch of each at an earlier instant, a restore to an
//! instant. At every crash point (every unsynced write dropped, kept, or each one kept,
//! torn or garbled, by the seed), the recovered store must hold every acknowledged
//! operation, the operation in flight whole or not at all, and every instant an
//! acknowledged operation made readable must read the same state after the crash; the
//! integrity check must pass. Runs with the harness's settings (a 16 KiB write buffer, so
//! commits cross checkpoints) and once with no write buffer (a point per commit).

use std::collections::BTreeMap;
use std::sync::Arc;

use bough::io::{FaultInjector, FaultOp, MemoryStorage, Storage};
use bough::{
    Branch, Clock, ErrorKind, ManualClock, PartitionHandle, ScanOptions, Store, WriteBatch,
};
use bough_reliability::power::{memory_options, policy_for};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Instants refused after a crash (a state change left without its point), reported.
static REFUSED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One store run of the script, stopping at the first failed operation.
struct Run {
    /// Instants and the state of a branch at each, made readable by acknowledged commits.
    instants: Vec<(&'static str, u64, Model)>,
    /// Branches an acknowledged operation created, with their contents.
    branches: BTreeMap<&'static str, Model>,
    /// The operation that failed (in flight at the crash), with what it would have made.
    in_flight: Option<(&'static str, Option<(&'static str, Model)>)>,
    /// `main` after its last acknowledged operation; before the in-flight one.
    main: Model,
}

fn contents(b: &Branch) -> Model {
    b.scan_blocking(&ScanOptions::default())
        .map(|p| {
            p.entries
                .into_iter()
                .map(|kv| (kv.key, kv.value.value))
                .collect()
        })
        .unwrap_or_else(|e| panic!("scan of {}: {e}", b.label()))
}

fn batch(model: &mut Model, from: usize, n: usize, tag: &str) -> WriteBatch {
    let mut wb = WriteBatch::new();
    for i in from..from + n {
        let (k, v) = (
            format!("k{i:04}").into_bytes(),
            format!("{tag}-{i}").into_bytes(),
        );
        wb.put(k.clone(), v.clone());
        model.insert(k, v);
    }
    wb
}

fn script(store: &Store, clock: &ManualClock) -> Run {
    let mut run = Run {
        instants: Vec::new(),
        branches: BTreeMap::new(),
        in_flight: None,
        main: Model::new(),
    };
    let Ok(p) = store.partition("t", 0) else {
        run.in_flight = Some(("open", None));
        return run;
    };
    let step = |run: &mut Run, what: &'static str, r: bough::Result<()>, makes| match r {
        Ok(()) => true,
        Err(e) => {
            assert!(
                matches!(e.kind(), ErrorKind::Io | ErrorKind::Poisoned),
                "{what} failed with {:?}: {e}",
                e.kind()
            );
            run.in_flight = Some((what, makes));
            false
        }
    };
    let Ok(main) = p.branch("main") else {
        run.in_flight = Some(("branch main", None));
        return run;
    };
    let mut m = Model::new();
    for (round, tag) in ["a", "b", "c"].into_iter().enumerate() {
        clock.advance(10);
        let mut next = m.clone();
        let wb = batch(&mut next, round * 30, 60, tag);
        if !step(
            &mut run,
            "commit on main",
            main.write_blocking(wb),
            Some(("main", next.clone())),
        ) {
            return run;
        }
        m = next;
        run.main = m.clone();
        clock.advance(10);
        run.instants.push(("main", clock.now_ms(), m.clone()));
    }
    let at_a = run.instants[0].1;
    let model_a = run.instants[0].2.clone();
    clock.advance(10);
    let child = match p.create_branch("child", "main") {
        Ok(b) => b,
        Err(e) => {
            step(&mut run, "create child", Err(e), Some(("child", m.clone())));
            return run;
        }
    };
    run.branches.insert("child", m.clone());
    let mut c = m.clone();
    clock.advance(10);
    let wb = batch(&mut c, 100, 40, "child");
    if !step(
        &mut run,
        "commit on child",
        child.write_blocking(wb),
        Some(("child", c.clone())),
    ) {
        return run;
    }
    run.branches.insert("child", c.clone());
    clock.advance(10);
    run.instants.push(("child", clock.now_ms(), c.clone()));
    let at_child = clock.now_ms();
    clock.advance(10);
    let r = p.branch_at("child-then", "child", at_child).map(|_| ());
    if !step(
        &mut run,
        "branch_at child",
        r,
        Some(("child-then", c.clone())),
    ) {
        return run;
    }
    run.branches.insert("child-then", c.clone());
    clock.advance(10);
    let r = p.branch_at("main-then", "main", at_a).map(|_| ());
    if !step(
        &mut run,
        "branch_at main",
        r,
        Some(("main-then", model_a.clone())),
    ) {
        return run;
    }
    run.branches.insert("main-then", model_a.clone());
    clock.advance(10);
    if !step(
        &mut run,
        "restore_at main",
        main.restore_at(at_a, "main-before"),
        Some(("main-before", m.clone())),
    ) {
        return run;
    }
    run.branches.insert("main-before", m.clone());
    run.main = model_a;
    run
}

fn check(p: &PartitionHandle, run: &Run, ctx: &str) {
    let names = p
        .branches()
        .unwrap_or_else(|e| panic!("{ctx}: branches: {e}"));
    let in_flight = run.in_flight.as_ref().and_then(|(_, m)| m.as_ref());
    // What branch `name` may hold: its acknowledged state, or the in-flight operation's.
    let allowed = |name: &str, got: &Model, acked: Option<&Model>| {
        acked == Some(got) || in_flight.is_some_and(|(n, m)| *n == name && m == got)
    };
    let main = contents(&p.branch("main").expect("main"));
    let restore_in_flight = matches!(run.in_flight, Some(("restore_at main", _)));
    let restored = run.instants.first().map(|i| &i.2);
    assert!(
        allowed("main", &main, Some(&run.main)) || (restore_in_flight && Some(&main) == restored),
        "{ctx}: main holds neither its acknowledged state nor the one in flight"
    );
    for (name, want) in &run.branches {
        let b = p
            .branch(name)
            .unwrap_or_else(|e| panic!("{ctx}: acknowledged branch {name} is gone: {e}"));
        assert!(
            allowed(name, &contents(&b), Some(want)),
            "{ctx}: branch {name}"
        );
    }
    if let Some((name, want)) = in_flight
        && *name != "main"
        && !run.branches.contains_key(name)
        && names.iter().any(|n| n == name)
    {
        let got = contents(&p.branch(name).expect("listed"));
        assert_eq!(
            got, *want,
            "{ctx}: {name}, made by the operation in flight, is partial"
        );
    }
    // Every instant an acknowledged commit made readable reads the same after the crash.
    // Only after a failed operation may one be refused instead: a state change whose
    // history point was never written leaves the instants around it untold (never told
    // wrong).
    for (i, (branch, at, want)) in run.instants.iter().enumerate() {
        if !names.iter().any(|n| n == branch) {
            continue;
        }
        let name = format!("check-{i}");
        match p.branch_at(&name, branch, *at) {
            Ok(b) => {
                assert_eq!(contents(&b), *want, "{ctx}: {branch} at {at}");
                p.delete_branch(&name).expect("delete check branch");
            }
            Err(e)
                if run.in_flight.is_some()
                    && e.kind() == ErrorKind::NotFound
                    && e.to_string().contains("no history point") =>
            {
                REFUSED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Err(e) => panic!("{ctx}: {branch} at {at} is no longer readable: {e}"),
        }
    }
}

fn sweep(buffer: Option<u64>) {
    let label = format!("write buffer {buffer:?}");
    let builder = |mem: MemoryStorage, clock: &ManualClock| {
        let b = memory_options(mem, clock);
        match buffer {
            Some(n) => b.map_settings(|o| o.write_buffer_bytes(n)),
            None => b,
        }
    };
    // How many syncs the whole script takes.
    let mem = MemoryStorage::new();
    let clock = ManualClock::new(1_000_000);
    let store = builder(mem.clone(), &clock).open().expect("open");
    let before = store.io_stats();
    let full = script(&store, &clock);
    assert!(
        full.in_flight.is_none(),
        "{label}: the script fails without faults"
    );
    let syncs = store.io_stats().since(&before);
    let points = syncs.syncs + syncs.dir_syncs + 8;
    store.close().expect("close");
    let seed = 0x5eed_71e5;
    let mut crashed = 0;
    for k in 0..points {
        let faults = FaultInjector::new();
        faults.fail_after(FaultOp::Sync, k, libc::EIO, u64::MAX);
        let mem = MemoryStorage::with_faults(faults.clone());
        let clock = ManualClock::new(1_000_000);
        let Ok(store) = builder(mem.clone(), &clock).open() else {
            continue;
        };
        let run = script(&store, &clock);
        let _ = store.close();
        if faults.fired() == 0 {
            continue;
        }
        let policy = policy_for(seed, k);
        faults.clear();
        mem.crash(policy);
        crashed += 1;
        let ctx = format!(
            "{label}, crash at sync {k} ({policy:?}), in flight {:?}",
            run.in_flight.as_ref().map(|f| f.0)
        );
        clock.advance(1000);
        let store = builder(mem.clone(), &clock)
            .open()
            .unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        let p = store.partition("t", 0).expect("partition");
        check(&p, &run, &ctx);
        store.close().expect("close");
        let storage: Arc<dyn Storage> = Arc::new(mem.clone());
        let integrity = bough_reliability::check::check_storage(storage).expect("check runs");
        assert!(integrity.is_ok(), "{ctx}: integrity check: {integrity}");
    }
    eprintln!(
        "{label}: {crashed} crash points of {points}; instants refused after a crash (all \
         tests of this binary so far): {}",
        REFUSED.load(std::sync::atomic::Ordering::Relaxed)
    );
    assert!(crashed > 10, "{label}: only {crashed} crash points");
}

#[test]
fn point_in_time_operations_survive_power_loss_at_every_sync_point() {
    sweep(None);
}

#[test]
fn point_in_time_operations_survive_power_loss_at_every_sync_point_without_a_buffer() {
    sweep(Some(0));
}
