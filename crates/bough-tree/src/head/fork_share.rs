//! A branch forked by reference takes its parent's tree at the fork version instead of
//! rewriting the inherited writes itself (ARCHITECTURE.md, "Forks").
//!
//! A fork writes nothing in the parent. The parent's next checkpoint in line that leaves
//! its tree at exactly the fork version offers that state in the fork's share slot: its
//! checkpoint before its first commit after the fork, at close (parents first), or on
//! demand. That record also writes the parent's mapping, so the two mappings share their
//! pages. The child's next record that absorbs its buffer then starts from that tree, names
//! its mapping root and applies only its own runs. Pages stay shared, so a diff, merge or
//! rebase of the two keeps costing their divergence, and the child's merge base with the
//! parent becomes that tree (no log to replay).
//!
//! Only a durable record's tree is offered (pages a checkpoint wrote whose record then
//! failed are garbage the parent's next write may land on), and only by the parent's own
//! operations, never by a background checkpoint's install: whether a fork shares then
//! depends on the order of operations alone, not on a thread's timing (the power-loss
//! sweep replays a seed's sync points exactly).
//!
//! A share is best effort. A restart, or a child that wrote a record first, leaves the
//! child with its own copy of the leaves the inherited writes touch. The result is the
//! same content either way.

use super::*;
use bough_manifest::{encode_merge_bases, merge_bases};

/// The parent's state at a fork version, once a durable record left its tree there.
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    /// Its durable snapshot: the mapping's changes since its last mapping checkpoint as
    /// the overlay, the fork version as the commit version, no other extension.
    snapshot: Snapshot,
    /// A tree-only snapshot of that state registered with the parent's readers: GC keeps
    /// the pages it reaches while the child holds it, until the child's own manifest
    /// names them.
    _pin: Arc<TreeSnapshot>,
}

impl Shared {
    /// The tree's mapping root when its mapping is all in its pages (no overlay): a
    /// record on this tree can name it, its own changes on top, writing no mapping page.
    pub(super) fn mapping_root_if_clean(&self) -> Option<PageAddr> {
        self.snapshot
            .overlay
            .is_empty()
            .then_some(self.snapshot.mapping_root)
    }
}

/// Where a fork stands with its parent's tree at the fork version.
#[derive(Debug)]
enum ShareState {
    /// The parent's tree is not there yet (a later record of the parent's may bring it).
    Waiting,
    Ready(Shared),
    /// The parent's tree went past the fork version first.
    Gone,
}

/// Where a fork finds its parent's tree at the fork version.
#[derive(Debug)]
pub(crate) struct ShareSlot {
    /// The branch that offers it (so whoever is about to checkpoint the fork can have the
    /// parent checkpoint first).
    parent: BranchName,
    state: parking_lot::Mutex<ShareState>,
}

impl ShareSlot {
    fn new(parent: BranchName) -> Self {
        ShareSlot {
            parent,
            state: parking_lot::Mutex::new(ShareState::Waiting),
        }
    }

    /// Moves a waiting slot to `to`.
    fn offer(&self, to: ShareState) {
        let mut st = self.state.lock();
        if matches!(*st, ShareState::Waiting) {
            *st = to;
        }
    }
}

impl Head {
    /// Registers a fork at the current version; returns the slot the child watches. No
    /// checkpoint starts (a fork writes nothing): this head's next checkpoint that ends
    /// exactly at the fork version offers its tree.
    /// Forks at one version share one slot, so many forks of an unchanged parent (agents
    /// fork thousands) keep one entry here.
    pub(super) fn share_fork(&mut self) -> Arc<ShareSlot> {
        let v = self.version();
        if let Some((at, w)) = self.fork_shares.last()
            && *at == v
            && let Some(slot) = w.upgrade()
        {
            return slot;
        }
        let slot = Arc::new(ShareSlot::new(self.branch.clone()));
        self.fork_shares.retain(|(_, w)| w.strong_count() > 0);
        self.fork_shares.push((v, Arc::downgrade(&slot)));
        slot
    }

    /// Whether a fork waits for this head's tree at its fork version (this head has not
    /// checkpointed or written since): checkpointing this head first lets the fork share
    /// its pages.
    pub fn forks_waiting(&self) -> bool {
        let v = self.version();
        self.fork_shares
            .iter()
            .any(|(at, w)| *at == v && w.strong_count() > 0)
    }

    /// The parent this fork still waits for: it has written no record of its own, and the
    /// parent has not yet offered its tree at the fork version. Checkpointing the parent
    /// first ([`offer_fork_shares`](Self::offer_fork_shares)) lets this head's next
    /// checkpoint share the parent's pages instead of writing its own copy of every leaf
    /// the inherited writes touch — once per fork, which thousands of forks of one idle
    /// parent would multiply.
    pub fn awaited_parent(&self) -> Option<&BranchName> {
        let (_, slot) = self.log.fork_base.as_ref()?;
        matches!(*slot.state.lock(), ShareState::Waiting).then_some(&slot.parent)
    }

    /// Offers this head's tree to the forks waiting for it: checkpoints in line when one
    /// waits at the current version (see [`checkpoint_for_forks`](Self::checkpoint_for_forks)).
    pub fn offer_fork_shares(&mut self, now_ms: u64) -> TreeResult<()> {
        self.checkpoint_for_forks(now_ms)
    }

    /// Before the first commit after a fork: brings this head's tree to the fork version
    /// in line (once per fork: the commit then moves past it), so the fork can share it.
    /// Best effort (the share saves work, it holds no data): a failure that did not poison
    /// the head is logged and the commit goes on.
    pub(super) fn checkpoint_for_forks(&mut self, now_ms: u64) -> TreeResult<()> {
        if !self.forks_waiting() {
            return Ok(());
        }
        match self.checkpoint_buffer(now_ms) {
            Err(e) if self.poisoned.is_some() => Err(e),
            Err(e) => {
                tracing::warn!(branch = %self.branch, error = %e, "no checkpoint at the fork version; the fork will not share this tree");
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    }

    /// After a record of this head's own operation: puts its state in the slots of forks
    /// at the version its tree now covers exactly, and lets go of the forks it has passed.
    pub(super) fn fill_fork_shares(&mut self) {
        self.settle_fork_shares(true);
    }

    /// After a record installed from a background checkpoint: lets go of the forks this
    /// head's tree has passed, offering none.
    pub(super) fn drop_passed_forks(&mut self) {
        self.settle_fork_shares(false);
    }

    fn settle_fork_shares(&mut self, offer: bool) {
        if self.fork_shares.is_empty() {
            return;
        }
        let covered = self.version().saturating_sub(self.log.buffered);
        let mut shared: Option<Option<Shared>> = None;
        for (v, w) in std::mem::take(&mut self.fork_shares) {
            if v > covered || (v == covered && !offer) {
                self.fork_shares.push((v, w));
                continue;
            }
            let Some(slot) = w.upgrade() else {
                continue;
            };
            if v < covered {
                slot.offer(ShareState::Gone);
                continue;
            }
            let s = shared.get_or_insert_with(|| self.shared_at(covered).ok());
            slot.offer(match s {
                Some(s) => ShareState::Ready(s.clone()),
                None => ShareState::Gone,
            });
        }
    }

    /// This head's state (its tree covering `covered`) as a snapshot record with no
    /// extension but the version, and a pin of it registered with its readers.
    fn shared_at(&self, covered: u64) -> TreeResult<Shared> {
        let mut snapshot = self.snapshot_with_overlay()?;
        snapshot.extensions.clear();
        bough_manifest::set_commit_version(&mut snapshot.extensions, covered);
        let st = &self.state;
        let pin = Arc::new(TreeSnapshot {
            root: st.root,
            ttl_root: st.ttl_root,
            mapping: st.mapping.view(),
            ranges: Arc::new(st.ranges.clone()),
            files: Arc::clone(&self.files),
            version: covered,
            buffer: crate::buffer::WriteBuffer::new(),
            top: Arc::default(),
        });
        self.published.register(&pin);
        Ok(Shared {
            snapshot,
            _pin: pin,
        })
    }

    /// The parent's tree at this fork's version, when the parent has put it in the slot
    /// and this head's tree is still the one it was forked with (every fork at that version
    /// takes it; the slot goes when the last of them has written a record).
    pub(super) fn take_fork_base(&mut self) -> Option<(u64, Shared)> {
        let (v, slot) = self.log.fork_base.as_ref()?;
        match &*slot.state.lock() {
            ShareState::Ready(shared) => Some((*v, shared.clone())),
            _ => None,
        }
    }

    /// Bytes of this head's buffer that are its own: a fork that has not written a record
    /// leaves the inherited runs (held by the parent too, or until the parent's checkpoint)
    /// to the parent's bound, so its own writes do not checkpoint them before the parent
    /// can share its tree. It holds at most twice its bound meanwhile. (Not whether the
    /// parent passed the fork version: that may follow a background install's timing.)
    pub(super) fn own_buffer_bytes(&self) -> usize {
        match &self.log.fork_base {
            Some((v, _)) => self.log.buffer.bytes_after(*v),
            _ => self.log.buffer.bytes(),
        }
    }

    /// The head state a record starts from when it takes the parent's tree `s`: that tree
    /// (its overlay replayed), with this head's file and page counters where they are
    /// ahead (as an adoption does).
    pub(super) fn state_from_shared(&self, shared: &Shared) -> TreeResult<HeadState> {
        let s = &shared.snapshot;
        let next_page_id = s.next_page_id.max(self.state.mapping.next_page_id());
        let mapping = snapshot::mapping_of_record(&self.files, s, next_page_id)?;
        Ok(HeadState {
            root: s.meta.root,
            ttl_root: s.meta.ttl_root,
            mapping,
            ranges: s.meta.branch_file_ranges.clone(),
            max_file_id: s.max_file_id.max(self.state.max_file_id),
            active: None,
            resume: None,
        })
    }

    /// The `MERGE_BASES` of a record that takes the parent's tree at fork version `v`:
    /// the base recorded at the fork (the parent's last checkpoint and its log up to `v`)
    /// replaced by that tree. `None` when no base names the fork.
    pub(super) fn bases_with_shared(&self, v: u64, shared: &Shared) -> Option<Vec<u8>> {
        let mut bases = merge_bases(&self.extensions).ok()?;
        let mut replaced = false;
        for b in &mut bases {
            let at_fork = bough_manifest::commit_version(&b.state.extensions)
                .ok()
                .flatten()
                == Some(v)
                && bough_manifest::log_refs(&b.state.extensions)
                    .ok()
                    .flatten()
                    .is_some_and(|r| bough_manifest::inherited_only(&r));
            if at_fork {
                b.state = shared.snapshot.clone();
                replaced = true;
            }
        }
        if !replaced {
            return None;
        }
        encode_merge_bases(&bases).ok()
    }
}
