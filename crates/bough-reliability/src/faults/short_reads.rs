//! The short-read class on local backends: reads cut short must be completed or fail,
//! never return a partly filled buffer.

use super::*;

/// One run on local files (`backend`: pread or io_uring) under short reads.
///
/// 1. The workload runs with reads cut short at random (the rest arrives when read again):
///    every operation must succeed.
/// 2. Reopened cold, every read at risk of being cut short and continued: every family
///    matches its model exactly.
/// 3. Reopened cold a few times with one read (at a random point) cut short and its rest
///    failed: reading a family either matches its model or fails with `Io`, and once the
///    fault is gone the same store reads it exactly (nothing half-read was kept).
/// 4. The integrity checker passes.
pub fn short_reads_local(
    run_seed: u64,
    seed: u64,
    cfg: &WorkloadConfig,
    backend: Backend,
) -> Tally {
    let mut tally = Tally::default();
    let ctx = format!("seed {seed}: short reads on {backend:?} (run seed {run_seed})");
    if backend == Backend::IoUring && !crate::kill::uring_available() {
        eprintln!("!!! {ctx}: io_uring is unavailable here; this run is SKIPPED");
        return tally;
    }
    let dir = match tempfile::Builder::new()
        .prefix("bough-shortread-")
        .tempdir()
    {
        Ok(d) => d,
        Err(e) => {
            tally.fail(format!("{ctx}: no temporary directory: {e}"));
            return tally;
        }
    };
    let place = Place::Local(dir, backend);
    let faults = FaultInjector::new();
    let clock = ManualClock::new(1_000_000);
    let mut r = Rng::new(run_seed);
    let (store, storage) = match place.open("open", Some(&faults), &clock) {
        Ok(opened) => opened,
        Err(e) => {
            tally.fail(format!("{ctx}: {e}"));
            return tally;
        }
    };
    let order = schedule(seed, cfg);
    let mut models: Vec<FamilyModel> = (0..cfg.families).map(FamilyModel::new).collect();
    let fired_before = faults.fired();
    for &f in &order {
        if faults.short_reads_pending() == 0 {
            faults.short_reads_after(r.below(8), r.range(1, 6), None);
        }
        let f = f as usize;
        let op = models[f].next_op(seed, cfg);
        clock.advance(1);
        if let Err(e) = execute(&store, seed, f as u32, models[f].applied, &op) {
            tally.fail(format!(
                "{ctx}: {} (family {f} op {}) failed under continued short reads: {e}",
                op.kind(),
                models[f].applied
            ));
            let _ = store.close();
            return tally;
        }
        models[f].apply(seed, &op);
    }
    faults.clear();
    let _ = store.close();
    tally.short_reads += faults.fired() - fired_before;
    // Cold, every read cut short and continued.
    let reopen = |tally: &mut Tally| match Store::open(place.options(Some(&faults), &clock)) {
        Ok(s) => Some(s),
        Err(e) => {
            tally.fail(format!("{ctx}: reopen failed: {e}"));
            None
        }
    };
    let fired_before = faults.fired();
    faults.short_reads_after(0, u64::MAX, None);
    let Some(store) = reopen(&mut tally) else {
        return tally;
    };
    let ok = verify_all(&store, &storage, seed, &models, &ctx, &mut tally);
    faults.clear();
    tally.short_reads += faults.fired() - fired_before;
    let _ = store.close();
    if !ok {
        return tally;
    }
    // Cold, one read's rest failing at a random point.
    for round in 0..3 {
        let Some(store) = reopen(&mut tally) else {
            return tally;
        };
        let fired_before = faults.fired();
        faults.short_reads_after(r.below(40), 1, Some(libc::EIO));
        for m in &models {
            match verify_family(&store, &storage, seed, m.family, std::slice::from_ref(m)) {
                Verdict::Match(_) => {}
                Verdict::Error(e) if e.kind() == ErrorKind::Io => {}
                Verdict::Error(e) => tally.fail(format!(
                    "{ctx}: round {round}: a failed short read of family {} surfaced as {:?}: {e}",
                    m.family,
                    e.kind()
                )),
                Verdict::Mismatch {
                    detail,
                    lost,
                    wrong,
                } => {
                    tally.mismatch(lost, wrong, format!(
                        "{ctx}: round {round}: with a failed short read, family {} read: {detail}",
                        m.family
                    ));
                }
            }
        }
        faults.clear();
        tally.short_reads_failed += faults.fired() - fired_before;
        // The same store, the fault gone: exact (a half-read page was never cached).
        let ok = verify_all(&store, &storage, seed, &models, &ctx, &mut tally);
        let _ = store.close();
        if !ok {
            return tally;
        }
    }
    tally.integrity_checks += 1;
    match crate::check::check_storage(storage) {
        Ok(rep) if rep.is_ok() => {}
        Ok(rep) => tally.fail(format!("{ctx}: integrity check: {rep}")),
        Err(e) => tally.fail(format!("{ctx}: integrity check could not run: {e}")),
    }
    tally
}
