//! A branch's entry in the store: its head (behind the lock its writer takes), its
//! snapshot slot, the shard that serves it, and the hook that installs the head's
//! background checkpoints as soon as they are ready.

use super::*;

#[derive(Debug)]
pub(crate) struct BranchEntry {
    /// Shared with every read view (cloned per read, so not a `String`).
    pub(super) label: Arc<str>,
    pub(super) published: Arc<Published>,
    pub(super) head: Mutex<Head>,
    pub(super) shard: usize,
    /// Set when the branch is deleted: handles still held report `NotFound`.
    pub(super) gone: AtomicBool,
    pub(super) dir: PartitionDir,
    pub(super) name: BranchName,
    /// When it last took a write (the maintenance thread leaves a busy branch alone).
    pub(super) activity: activity::Activity,
}

/// The entry of a newly opened or created head; `shards` places it on its writer.
pub(super) fn new_branch_entry(
    mut head: Head,
    dir: &PartitionDir,
    shards: usize,
) -> Arc<BranchEntry> {
    let label = format!("{dir}@{}", head.branch());
    let shard = shard::shard_of(&label, shards);
    let name = head.branch().clone();
    Arc::new_cyclic(|entry: &std::sync::Weak<BranchEntry>| {
        // A background checkpoint's result is installed as soon as it is ready when the
        // head is free; a busy head installs it itself at the end of what it is doing.
        let entry = entry.clone();
        head.set_background_done(bough_tree::head::BackgroundDone::new(move || {
            if let Some(e) = entry.upgrade()
                && let Some(mut h) = e.head.try_lock()
            {
                h.install_finished_background();
                let work = h.take_deferred_work();
                drop(h);
                // This is the checkpoint's own thread, done with its work: it runs it.
                if let Some(work) = work {
                    work.run();
                }
            }
        }));
        BranchEntry {
            label: label.into(),
            published: head.published(),
            head: Mutex::new(head),
            shard,
            gone: AtomicBool::new(false),
            dir: dir.clone(),
            name,
            activity: activity::Activity::default(),
        }
    })
}

/// Runs what an installed background checkpoint left (taken from the head while it was
/// held: caching its pages, freeing what it replaced) on a thread of its own, so neither
/// the head nor the caller that installed it waits (`bough_tree::head::DeferredWork`).
/// None of it is a duty: work that finds no thread is dropped here.
pub(super) fn run_deferred(work: Option<bough_tree::head::DeferredWork>) {
    let Some(work) = work else {
        return;
    };
    let spawned = std::thread::Builder::new()
        .name("bough-deferred".into())
        .spawn(move || work.run());
    if let Err(e) = spawned {
        tracing::debug!(error = %e, "no thread for a checkpoint's deferred work: its pages are left uncached");
    }
}
