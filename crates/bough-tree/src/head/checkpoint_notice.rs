//! [`CheckpointNotice`]: tells the store that a large tree update (a checkpoint of a full
//! write buffer, or a large batch through the tree) has just left garbage behind, so its
//! compaction and GC follow it instead of waiting for the next maintenance tick
//! (ARCHITECTURE.md, "Compaction under load").

use super::*;

/// Called once a tree update that wrote at least a data file's worth of pages is durable
/// and installed, with the partition and the branch. Under a steady load of random writes
/// such an update (most often the checkpoint of a full write buffer) rewrites most
/// leaves: the files the pages before it sit in are nearly all garbage now.
#[derive(Clone)]
pub struct CheckpointNotice(Arc<NoticeFn>);

/// What a [`CheckpointNotice`] calls: the partition directory and the branch.
type NoticeFn = dyn Fn(&str, &BranchName) + Send + Sync;

impl CheckpointNotice {
    /// A notice calling `f`.
    pub fn new(f: impl Fn(&str, &BranchName) + Send + Sync + 'static) -> Self {
        CheckpointNotice(Arc::new(f))
    }
}

impl std::fmt::Debug for CheckpointNotice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CheckpointNotice")
    }
}

impl Head {
    /// After a tree update that wrote `pages` pages is installed.
    pub(super) fn notice_checkpoint(&self, pages: usize) {
        if let Some(n) = &self.cfg.checkpoint_notice
            && pages >= self.cfg.file_pages as usize
        {
            (n.0)(self.files.dir(), &self.branch);
        }
    }
}
