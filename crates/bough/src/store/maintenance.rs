//! The maintenance thread: expiry, compaction, checkpoints of idle branches and GC on a
//! timer.

use super::*;

pub(super) fn start_maintenance(inner: &Arc<Inner>) {
    let (tx, rx) = mpsc::channel::<()>();
    *inner.maintenance_stop.lock() = Some(tx);
    let weak: Weak<Inner> = Arc::downgrade(inner);
    let every = Duration::from_millis(inner.opts.maintenance_interval_ms);
    let _ = std::thread::Builder::new()
        .name("bough-maintenance".into())
        .spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(every) {
                let Some(inner) = weak.upgrade() else { return };
                if let Err(e) = inner.maintain(true)
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
pub(super) fn compact(
    head: &mut Head,
    garbage_ratio: f64,
    now: u64,
    usage: &Usage,
) -> Result<CompactionReport> {
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
    for f in candidates {
        // A live page in a file id no range covers is damage the next read reports; leave
        // the file alone here.
        let Ok(name) = head.files().resolve(&snap.ranges, f) else {
            continue;
        };
        let name = name.to_string();
        if usage.held_only_by(&name, head.branch(), head.term()) {
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
    Ok(report)
}
