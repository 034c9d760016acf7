//! The maintenance thread: expiry, compaction, checkpoints of idle branches and GC on a
//! timer, and compaction and GC right after a large checkpoint (`store/wake.rs`).

use super::*;

impl Inner {
    /// One maintenance pass; `tick`: the background thread's, which leaves busy branches
    /// alone for a while ([`activity::Activity::defer_tick`]); otherwise every branch is
    /// maintained now.
    pub(super) fn maintain(self: &Arc<Self>, tick: bool) -> Result<()> {
        self.maintenance_pass(|| self.maintain_partitions(tick))
    }

    fn maintain_partitions(self: &Arc<Self>, tick: bool) -> Result<()> {
        let store = Store::internal(self.clone());
        let parts: Vec<Arc<PartitionEntry>> = self.partitions.lock().values().cloned().collect();
        let ratio = self.opts.compaction_garbage_ratio;
        for p in parts {
            // Expired branches go first, as a user would delete them (their children stay).
            let handle = PartitionHandle {
                store: store.clone(),
                dir: p.part.dir().clone(),
            };
            if let Err(e) = handle.expire_branches() {
                tracing::warn!(partition = %p.part.dir(), error = %e, "cannot expire branches");
            }
            let entries: Vec<Arc<BranchEntry>> = p.branches.lock().values().cloned().collect();
            if entries.is_empty() {
                continue;
            }
            // Forks by reference checkpoint after the parents they wait for (before the
            // usage is measured, so it sees the files those parents' checkpoints write).
            store.offer_awaited_shares(&p, &entries);
            // One usage per partition per tick, shared by its branches (outside their write
            // queues, so no writer waits for the walk). Without it nobody can tell which
            // files are shared: the partition's branches are not compacted this tick, the
            // rest of the work goes on (GC reports the damage).
            let usage = usage_of(&p)
                .inspect_err(|e| {
                    tracing::warn!(error = %e, "cannot measure the partition; compaction skipped");
                })
                .ok();
            let idle_ms = self.opts.maintenance_interval_ms;
            for b in entries {
                if tick && b.activity.defer_tick(self.clock.now_ms(), idle_ms) {
                    continue;
                }
                let branch = Branch {
                    store: store.clone(),
                    entry: b.clone(),
                };
                // Each step is a request of its own: the branch's writes go on between them.
                branch.expire_now()?;
                if let Some(usage) = &usage {
                    compact_in_steps(&branch, ratio, usage, false)?;
                }
                branch.call(|reply| BranchOp::CheckpointIfDirty { reply })?;
            }
        }
        store.gc()?;
        Ok(())
    }

    /// The pass that follows large checkpoints (ARCHITECTURE.md, "Compaction under load"):
    /// each branch in `due` is compacted, keeping its write buffer and giving way to a
    /// checkpoint that runs again, and its partition is collected, so the files the
    /// checkpoint turned into garbage go now rather than at a tick that puts a busy
    /// branch off.
    fn collect_after_checkpoints(self: &Arc<Self>, due: &[(String, BranchName)]) -> Result<()> {
        self.maintenance_pass(|| {
            let store = Store::internal(self.clone());
            let ratio = self.opts.compaction_garbage_ratio;
            let mut dirs: Vec<&str> = due.iter().map(|(d, _)| d.as_str()).collect();
            dirs.sort_unstable();
            dirs.dedup();
            for dir in dirs {
                let Some(p) = self.partitions.lock().get(dir).cloned() else {
                    continue;
                };
                match usage_of(&p) {
                    Ok(usage) => {
                        for (_, name) in due.iter().filter(|(d, _)| d == dir) {
                            let Some(entry) = p.branches.lock().get(name).cloned() else {
                                continue;
                            };
                            let branch = Branch {
                                store: store.clone(),
                                entry,
                            };
                            let compacted = compact_in_steps(&branch, ratio, &usage, true);
                            if let Err(e) = compacted {
                                tracing::warn!(partition = dir, branch = %name, error = %e, "compaction after a checkpoint failed");
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(partition = dir, error = %e, "cannot measure the partition; compaction skipped");
                    }
                }
                prune_history(&p, self);
                match gc_partition(&p, self.cloud.as_ref(), false) {
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::Busy && self.cloud.is_some() => {
                        tracing::info!(partition = dir, error = %e, "GC skipped: another process holds the lease");
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        })
    }
}

pub(super) fn start_maintenance(inner: &Arc<Inner>) {
    let weak: Weak<Inner> = Arc::downgrade(inner);
    let wake = inner.wake.clone();
    let every = Duration::from_millis(inner.opts.maintenance_interval_ms);
    let _ = std::thread::Builder::new()
        .name("bough-maintenance".into())
        .spawn(move || {
            let mut next_tick = std::time::Instant::now() + every;
            loop {
                let woken = wake.wait(next_tick);
                let Some(inner) = weak.upgrade() else { return };
                let pass = match woken {
                    Woken::Stop => return,
                    Woken::Tick => {
                        next_tick = std::time::Instant::now() + every;
                        inner.maintain(true)
                    }
                    Woken::Checkpointed(due) => inner.collect_after_checkpoints(&due),
                };
                if let Err(e) = pass
                    && e.kind() != ErrorKind::Closed
                {
                    tracing::warn!(error = %e, "background maintenance failed");
                }
            }
        });
}

/// Most keys one piece of the expiry sweep removes (one commit; the branch's other requests
/// run between pieces).
pub(super) const EXPIRE_PIECE_KEYS: usize = 4096;

/// One piece of the expiry sweep: deletes up to `limit` keys whose expiry has passed (the
/// TTL index says which), and purges tombstones whose retention has passed: a purge
/// removes nothing a reader could see. Answers whether it removed anything; the sweep is
/// done at the first piece that did not.
pub(super) fn expire_piece(head: &mut Head, now: u64, limit: usize) -> Result<bool> {
    let keys = head.expired_keys(now, limit)?;
    if keys.is_empty() {
        return Ok(false);
    }
    let muts: Vec<Mutation> = keys
        .into_iter()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|key| Mutation {
            key,
            op: Op::ForceDelete,
        })
        .collect();
    head.commit(&muts, now)?;
    Ok(true)
}

/// What one compaction of one branch did.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let main = store.partition("t", 0)?.branch("main")?;
/// for i in 0..100 {
///     main.put_blocking(format!("k{i:03}"), "v")?;
/// }
/// let report = main.compact_now()?;
/// println!("moved {} pages out of {:?}", report.pages_moved, report.compacted);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// Data files whose live pages were moved out (GC frees them once no reader holds them).
    pub compacted: Vec<String>,
    /// Pages rewritten into the branch's current file.
    pub pages_moved: u64,
    /// Data files mostly garbage to this branch that another branch, an archive or a merge
    /// base still references: left alone, since copying out of them would free nothing.
    pub shared_skipped: Vec<String>,
}

/// Moves this head's live pages out of its sealed files that are mostly garbage and that
/// no other durable referent needs.
///
/// A file is a victim when (1) at least `garbage_ratio` of it is garbage to this head — the
/// head's own live pages against the file's capacity — and (2) `usage` says no other branch
/// head, archive or merge base references any page of it. Then the head is the file's only
/// durable holder, so every page it does not reference is referenced by no one (the garbage
/// is real), and once its pages are moved out nothing keeps the file (readers only until
/// they let go). A file another referent still needs is left alone whatever its garbage:
/// moving out of it would free nothing, and would turn pages the branches share into
/// copies. Its garbage comes back once the sharing ends (ARCHITECTURE.md, "Compaction").
/// Inherited files qualify like the head's own: the rule is about holders, not lineage.
///
/// One step moves the pages of victims holding at most [`RELOCATION_PAGES_PER_STEP`] live
/// pages (at least one victim), holding the head throughout; the second value says whether
/// victims were left for the next step ([`compact_in_steps`]).
pub(super) fn compact_step(
    head: &mut Head,
    garbage_ratio: f64,
    now: u64,
    usage: &Usage,
) -> Result<(CompactionReport, bool)> {
    let live = head.live_pages_per_file()?;
    let snap = head.snapshot();
    let active = head.active_file();
    let per_file = f64::from(head.file_pages().saturating_sub(1).max(1));
    // In cloud mode every commit writes its own small file: judge it by the pages it holds.
    let cloud = head.files().storage().kind() == bough_io::BackendKind::Object;
    let pages_in = |f: u64| -> f64 {
        let page_size = u64::from(head.files().page_size());
        let held = head
            .files()
            .handle(&snap.ranges, f)
            .and_then(|h| Ok(h.file.len()?))
            .map(|len| (len / page_size).saturating_sub(1).max(1) as f64);
        if cloud {
            held.unwrap_or(per_file)
        } else {
            per_file
        }
    };
    let mut candidates: Vec<u64> = live
        .iter()
        .filter(|(f, _)| Some(**f) != active)
        .filter(|(f, n)| 1.0 - (**n as f64 / pages_in(**f)) >= garbage_ratio)
        .map(|(f, _)| *f)
        .collect();
    candidates.sort_unstable();
    let mut report = CompactionReport::default();
    let mut victims = Vec::new();
    let mut pages = 0u64;
    let mut left = false;
    for f in candidates {
        let n = live.get(&f).copied().unwrap_or(0);
        if !victims.is_empty() && pages + n > RELOCATION_PAGES_PER_STEP {
            left = true;
            continue;
        }
        // A live page in a file id no range covers is damage the next read reports; leave
        // the file alone here.
        let Ok(name) = head.files().resolve(&snap.ranges, f) else {
            continue;
        };
        let name = name.to_string();
        if usage.held_only_by(&name, head.branch(), head.term()) {
            pages += n;
            victims.push(f);
            report.compacted.push(name);
        } else {
            report.shared_skipped.push(name);
        }
    }
    if !victims.is_empty() {
        let moved = head.relocate_files(&victims, now)?;
        report.pages_moved = moved;
        tracing::debug!(files = victims.len(), pages = moved, "compacted");
    }
    if !report.shared_skipped.is_empty() {
        tracing::debug!(
            files = ?report.shared_skipped,
            "left mostly-garbage files other referents still need"
        );
    }
    Ok((report, left))
}

/// Most live pages one compaction step moves while it holds the branch head. A step
/// reads, rewrites and syncs its pages with the head held (~40 µs a page on this
/// machine), and a commit waits for it: 816 pages in one step held single-key commits up
/// for 36 ms in `stall_probe`. Steps of at most 256 pages (1 MiB) hold it ~10 ms each and
/// let the branch's commits in between.
pub(super) const RELOCATION_PAGES_PER_STEP: u64 = 256;

/// Compacts `branch` in steps of [`compact_step`], each a request of its own so the
/// branch's writes go on between them, until no victim is left; the steps' reports are
/// merged. Each step relocates at least one victim, which then holds no live page and is
/// no candidate again, so the steps end; they are capped anyway.
pub(super) fn compact_in_steps(
    branch: &Branch,
    ratio: f64,
    usage: &Arc<Usage>,
    give_way: bool,
) -> Result<CompactionReport> {
    let mut total = CompactionReport::default();
    for _ in 0..MAX_COMPACTION_STEPS {
        let (step, left) = branch.call(|reply| BranchOp::Compact {
            ratio,
            usage: usage.clone(),
            give_way,
            reply,
        })?;
        let progressed = !step.compacted.is_empty();
        total.compacted.extend(step.compacted);
        total.pages_moved += step.pages_moved;
        for f in step.shared_skipped {
            if !total.shared_skipped.contains(&f) {
                total.shared_skipped.push(f);
            }
        }
        if !left || !progressed {
            break;
        }
    }
    Ok(total)
}

/// Most compaction steps one request for compaction takes (a branch has at most a few
/// thousand sealed files; the rest waits for the next pass).
const MAX_COMPACTION_STEPS: usize = 4096;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Backend, WriteBatch};

    fn value(i: usize, round: usize) -> Vec<u8> {
        let mut v = format!("{i}:{round}:").into_bytes();
        v.resize(100, b'a' + (round % 26) as u8);
        v
    }

    /// A step holds the head for at most its page budget (or one victim), says so when
    /// victims are left, and the steps together leave no victim; every value stays.
    #[test]
    fn a_compaction_step_moves_at_most_its_page_budget_and_the_steps_finish_the_job() {
        const KEYS: usize = 80_000;
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = Options::new(dir.path())
            .write_buffer_bytes(0)
            .backend(Backend::Pread)
            .maintenance_interval_ms(0)
            .data_file_size(16 * 4096 * 8)
            .compaction_garbage_ratio(0.5);
        let store = Store::open(opts).expect("open");
        let main = store
            .partition("cmp", 0)
            .and_then(|p| p.branch("main"))
            .expect("branch");
        let key = |i: usize| format!("key{i:06}").into_bytes();
        let mut model = vec![0usize; KEYS];
        let mut b = WriteBatch::new();
        for (i, round) in model.iter().enumerate() {
            b.put(key(i), value(i, *round));
        }
        main.write_blocking(b).expect("load");
        // Random overwrites leave sealed files partly live: the victims compaction moves
        // pages out of (a fixed sequence: nothing to replay).
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for round in 1..=3 {
            for _ in 0..5 {
                let mut b = WriteBatch::new();
                let mut seen = std::collections::HashSet::new();
                for _ in 0..KEYS / 20 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let i = (x % KEYS as u64) as usize;
                    if seen.insert(i) {
                        model[i] = round;
                        b.put(key(i), value(i, round));
                    }
                }
                main.write_blocking(b).expect("overwrite");
            }
        }
        let entry = store
            .partition_entry(main.partition_dir())
            .expect("partition");
        let usage = usage_of(&entry).expect("usage");
        let now = store.inner.clock.now_ms();
        let step = |main: &Branch| {
            let mut head = main.entry.head.lock();
            compact_step(&mut head, 0.5, now, &usage).expect("step")
        };
        let (first, left) = step(&main);
        assert!(left, "no victim left for a second step: {first:?}");
        assert!(
            first.pages_moved <= RELOCATION_PAGES_PER_STEP || first.compacted.len() == 1,
            "one step moved {} pages out of {} files",
            first.pages_moved,
            first.compacted.len()
        );
        let rest = compact_in_steps(&main, 0.5, &usage, false).expect("steps");
        assert!(
            rest.pages_moved > 0,
            "the steps after the first moved nothing"
        );
        for f in &rest.compacted {
            assert!(!first.compacted.contains(f), "{f} compacted twice");
        }
        let (last, left) = step(&main);
        assert!(
            last.compacted.is_empty() && !left,
            "victims left after the steps: {last:?}"
        );
        for (i, round) in model.iter().enumerate() {
            let got = main.get_blocking(key(i)).expect("get");
            assert_eq!(got.map(|v| v.value), Some(value(i, *round)), "key {i}");
        }
        store.close().expect("close");
    }
}
