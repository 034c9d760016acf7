//! The burst class: runs of injected errors (EIO, ENOSPC, short writes) across a workload.

use super::*;

/// A fault burst: what it injects and the error kind it must surface as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Burst {
    WriteEio,
    ShortWrite,
    NoSpaceWrite,
    NoSpaceCreate,
    /// Reads cut short whose rest arrives when read again: nothing may fail.
    ShortRead,
    /// Reads cut short whose rest fails with EIO.
    ShortReadFail,
}

/// One run of the workload on memory with bursts of write EIO, short writes, ENOSPC and
/// short reads. Each failing operation must fail with the right kind, never poison the
/// store, and the operations after the burst must succeed; a short read that is continued
/// must fail nothing.
pub fn bursts(run_seed: u64, seed: u64, cfg: &WorkloadConfig) -> Tally {
    let mut tally = Tally::default();
    let ctx = format!("seed {seed}: fault bursts (run seed {run_seed})");
    let faults = FaultInjector::new();
    let mem = MemoryStorage::with_faults(faults.clone());
    let storage: Arc<dyn Storage> = Arc::new(mem.clone());
    let clock = ManualClock::new(1_000_000);
    let store = match Store::open(memory_options(mem.clone(), &clock)) {
        Ok(s) => s,
        Err(e) => {
            tally.fail(format!("{ctx}: open failed: {e}"));
            return tally;
        }
    };
    let mut r = Rng::new(run_seed);
    let order = schedule(seed, cfg);
    let mut models: Vec<FamilyModel> = (0..cfg.families).map(FamilyModel::new).collect();
    let mut armed: Option<Burst> = None;
    let mut pos = 0;
    let mut retries = 0;
    let mut extra = 0usize;
    let trace = std::env::var_os("BOUGH_TRACE").is_some();
    while pos < order.len() {
        // A retry after a cleared fault runs with no fault armed: it must succeed.
        if armed.is_none() && retries == 0 && r.chance(15) {
            let burst = match r.below(6) {
                0 => Burst::WriteEio,
                1 => Burst::ShortWrite,
                2 => Burst::NoSpaceWrite,
                3 => Burst::NoSpaceCreate,
                4 => Burst::ShortRead,
                _ => Burst::ShortReadFail,
            };
            let skip = r.below(6);
            let count = r.range(1, 4);
            match burst {
                Burst::WriteEio => faults.fail_after(FaultOp::Write, skip, libc::EIO, count),
                Burst::ShortWrite => faults.short_writes_next(count),
                Burst::NoSpaceWrite => faults.fail_after(FaultOp::Write, skip, libc::ENOSPC, count),
                Burst::NoSpaceCreate => {
                    faults.fail_after(FaultOp::Create, skip, libc::ENOSPC, count)
                }
                Burst::ShortRead => faults.short_reads_after(skip, count, None),
                Burst::ShortReadFail => faults.short_reads_after(skip, count, Some(libc::EIO)),
            }
            armed = Some(burst);
            if trace {
                eprintln!("trace: arm {burst:?} skip {skip} count {count}");
            }
        }
        let f = order[pos] as usize;
        let op = models[f].next_op(seed, cfg);
        clock.advance(1);
        let fired_before = faults.fired();
        let result = execute(&store, seed, f as u32, models[f].applied, &op);
        if trace {
            eprintln!(
                "trace: family {f} op {} {op:?}: {:?}",
                models[f].applied,
                result.as_ref().err().map(|e| e.to_string())
            );
        }
        match result {
            Ok(()) => {
                models[f].apply(seed, &op);
                pos += 1;
                retries = 0;
                // Short reads may fire inside an operation that still succeeds (continued,
                // or a failed read the operation could do without): counted here, and the
                // burst ends once its plan is used up.
                let fired = faults.fired() - fired_before;
                match armed {
                    Some(Burst::ShortRead) => tally.short_reads += fired,
                    Some(Burst::ShortReadFail) => tally.short_reads_failed += fired,
                    _ => {}
                }
                if matches!(armed, Some(Burst::ShortRead | Burst::ShortReadFail))
                    && faults.short_reads_pending() == 0
                {
                    armed = None;
                }
            }
            Err(e) => {
                let fired = faults.fired() - fired_before;
                let burst = armed.take();
                let want = match burst {
                    Some(Burst::NoSpaceWrite | Burst::NoSpaceCreate) => ErrorKind::NoSpace,
                    _ => ErrorKind::Io,
                };
                match burst {
                    Some(Burst::WriteEio) => tally.eio_write += fired,
                    Some(Burst::ShortWrite) => tally.short_writes += fired,
                    Some(Burst::ShortRead) => tally.short_reads += fired,
                    Some(Burst::ShortReadFail) => tally.short_reads_failed += fired,
                    Some(_) => tally.enospc += fired,
                    None => {}
                }
                if burst.is_none()
                    || burst == Some(Burst::ShortRead)
                    || fired == 0
                    || e.kind() != want
                {
                    tally.fail(format!(
                        "{ctx}: {} (family {f} op {}) failed with {:?} ({e}); expected {:?} from {:?}",
                        op.kind(),
                        models[f].applied,
                        e.kind(),
                        want,
                        burst
                    ));
                    break;
                }
                // Space freed / device healthy again: no reopen, the next operations work.
                faults.clear();
                let Some(m) = resolve(
                    &Reader {
                        store: &store,
                        storage: &storage,
                        seed,
                    },
                    &models[f],
                    &op,
                    &ctx,
                    &mut tally,
                    true,
                ) else {
                    break;
                };
                if m.applied > models[f].applied {
                    tally.ambiguous += 1;
                    pos += 1;
                    models[f] = m;
                } else {
                    // Before the retry, an unrelated write on the branch the failed
                    // operation touched: whatever the failure left staged in its head must
                    // not ride along.
                    models[f] = m;
                    extra += 1;
                    let branch = match &op {
                        Op::Write { branch, .. }
                        | Op::Archive { branch }
                        | Op::NewTerm { branch }
                        | Op::Compact { branch }
                        | Op::Rehome { branch }
                        | Op::Restore { branch, .. }
                        | Op::PruneArchives { branch, .. }
                        | Op::BranchFromArchive { branch, .. } => branch.clone(),
                        Op::Merge { target, .. } => target.clone(),
                        Op::CreateBranch { from, .. } => from.clone(),
                        Op::DeleteBranch { .. } | Op::Gc => "main".to_string(),
                    };
                    if models[f].branches.contains_key(&branch) {
                        let keys = [r.below(u64::from(cfg.keys)) as u32];
                        let tag = EXTRA_OPS + extra;
                        let mut b = WriteBatch::new();
                        b.put(key(keys[0]), value(seed, f as u32, tag, &branch, keys[0]));
                        clock.advance(1);
                        if trace {
                            eprintln!("trace: extra write on {branch}");
                        }
                        let written = store
                            .partition(TABLE, f as u32)
                            .and_then(|p| p.branch(&branch))
                            .and_then(|b2| b2.write_blocking(b));
                        if let Err(e) = written {
                            tally.fail(format!(
                                "{ctx}: a write on {branch} after the cleared fault failed: {e}"
                            ));
                            break;
                        }
                        models[f].extra_write(seed, &branch, &keys, tag);
                    }
                }
                retries += 1;
                if retries > 1 {
                    tally.fail(format!(
                        "{ctx}: {} (family {f} op {}) failed again after the fault was cleared: {e}",
                        op.kind(),
                        models[f].applied
                    ));
                    break;
                }
            }
        }
    }
    faults.clear();
    // Every read of the final check may be cut short (and continued): still exact.
    let fired_before = faults.fired();
    faults.short_reads_after(r.below(3), u64::MAX, None);
    let ok = verify_all(&store, &storage, seed, &models, &ctx, &mut tally);
    faults.clear();
    tally.short_reads += faults.fired() - fired_before;
    let _ = store.close();
    if !ok {
        return tally;
    }
    // Everything acknowledged is durable.
    if trace {
        let (keep, _) = mem.crash_image(CrashPolicy::KeepAllUnsynced);
        let (drop, _) = mem.crash_image(CrashPolicy::DropAllUnsynced);
        for d in keep.list_dirs().unwrap_or_default() {
            for n in keep.list(&d).unwrap_or_default() {
                let p = format!("{d}/{n}");
                let a = keep.read_file(&p, 1 << 32).ok();
                let b = drop.read_file(&p, 1 << 32).ok();
                if a != b {
                    eprintln!(
                        "trace: unsynced: {p}: {:?} vs durable {:?} bytes",
                        a.map(|x| x.len()),
                        b.map(|x| x.len())
                    );
                }
            }
        }
    }
    if trace {
        for d in mem.list_dirs().unwrap_or_default() {
            for n in mem.list(&d).unwrap_or_default() {
                if n.starts_with("manifest_") {
                    let p = format!("{d}/{n}");
                    let bytes = mem.read_file(&p, 1 << 32).unwrap_or_default();
                    let r = bough_manifest::replay(&bytes);
                    eprintln!(
                        "trace: {p}: {} bytes, {:?}",
                        bytes.len(),
                        r.as_ref()
                            .map(|r| (r.records, r.state.last_seq, r.end_offset, r.dropped_tail))
                            .map_err(|e| e.to_string())
                    );
                }
            }
        }
    }
    mem.crash(CrashPolicy::DropAllUnsynced);
    clock.advance(1000);
    match Store::open(memory_options(mem.clone(), &clock)) {
        Ok(store) => {
            verify_all(
                &store,
                &storage,
                seed,
                &models,
                &format!("{ctx} after power loss"),
                &mut tally,
            );
            let _ = store.close();
        }
        Err(e) => tally.fail(format!("{ctx}: reopen failed: {e}")),
    }
    check(&mem, &ctx, &mut tally);
    tally
}
