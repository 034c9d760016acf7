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
