//! The typed protocol between the facade and a shard thread: one request per operation the
//! writer performs, each with a reply channel of its own answer's type.
//!
//! A request of a branch runs on the branch's shard thread, in the order it was queued,
//! holding the branch head; the shard loop (`shard.rs`) answers each with one function of
//! `writer_ops.rs`. Writes are the one request that is not answered alone: batches of one
//! branch queued together commit as one (group commit).

use super::*;

/// Where a request's answer goes: the caller awaits (or blocks on) the other end.
pub(super) type Reply<T> = oneshot::Sender<Result<T>>;

/// What a shard thread is asked to do.
pub(super) enum Request {
    /// Commit a batch, grouped with the other batches of the branch queued with it;
    /// `sync`: acknowledged once durable (else once its log record is written, see
    /// `Durability::Buffered`).
    Write {
        branch: Arc<BranchEntry>,
        muts: Vec<Mutation>,
        sync: bool,
        reply: Reply<()>,
    },
    /// Any other operation of one branch. The branch's pending group commits first, so
    /// requests keep their queue order.
    Branch {
        branch: Arc<BranchEntry>,
        op: BranchOp,
    },
    /// Stop the thread once the requests taken with this one are answered.
    Stop,
}

/// An operation of one branch other than a grouped write, with its reply.
pub(super) enum BranchOp {
    /// Commit a batch on its own and count what it changed.
    WriteCounted {
        muts: Vec<Mutation>,
        reply: Reply<WriteReport>,
    },
    /// One piece of a truncate: at most `limit` keys of `start` from `from` on.
    TruncatePiece {
        /// The state the truncate began at; `None` for its first piece (taken then).
        start: Option<Arc<TreeSnapshot>>,
        /// First key of the piece; `None` for the branch's first key.
        from: Option<Vec<u8>>,
        limit: usize,
        reply: Reply<TruncateProgress>,
    },
    /// One piece of the expiry sweep; answers whether it removed anything (more may follow).
    ExpirePiece { limit: usize, reply: Reply<bool> },
    /// Compaction of the branch's mostly-garbage files that only it holds. It moves pages
    /// and changes no content, so it leaves the write buffer as it is (`Head::relocate_files`).
    Compact {
        ratio: f64,
        usage: Arc<Usage>,
        /// Do nothing while a checkpoint of the buffer runs (waiting for it would hold up
        /// the branch's commits): the pass that follows a checkpoint asks this way.
        give_way: bool,
        /// One step's report and whether victims were left for the next step
        /// (`maintenance::compact_in_steps`).
        reply: Reply<(CompactionReport, bool)>,
    },
    /// Write the mapping's dirty chunks into mapping pages, if there are any.
    CheckpointIfDirty { reply: Reply<()> },
    /// Make every write acknowledged before it durable (one sync of the branch's log, if
    /// anything waits for one).
    Sync { reply: Reply<()> },
    /// Archive the branch's state at timestamp `ts`.
    Archive {
        part: Arc<PartitionEntry>,
        ts: u64,
        reply: Reply<ArchiveName>,
    },
    /// Restore the branch to `archive`, keeping the state it replaces as `backup`.
    Restore {
        part: Arc<PartitionEntry>,
        archive: ArchiveName,
        backup: BranchName,
        reply: Reply<()>,
    },
    /// Restore the branch to its state at `at_ms` (inside a history window of `window_ms`),
    /// keeping the state it replaces as `backup`.
    RestoreAt {
        part: Arc<PartitionEntry>,
        at_ms: u64,
        window_ms: u64,
        backup: BranchName,
        reply: Reply<()>,
    },
    /// Create branch `name` at this branch's state at `at_ms` (inside a history window of
    /// `window_ms`).
    BranchAt {
        part: Arc<PartitionEntry>,
        name: BranchName,
        at_ms: u64,
        window_ms: u64,
        reply: Reply<Arc<BranchEntry>>,
    },
    /// Create branch `name` (a staging branch when `staging` says what it stages) at this
    /// branch's latest commit.
    CreateBranch {
        part: Arc<PartitionEntry>,
        name: BranchName,
        staging: Option<String>,
        reply: Reply<Arc<BranchEntry>>,
    },
    /// Delete this branch.
    Delete {
        part: Arc<PartitionEntry>,
        reply: Reply<()>,
    },
    /// Drop the merge bases no live branch can use any more.
    PruneMergeBases {
        part: Arc<PartitionEntry>,
        reply: Reply<()>,
    },
    /// Hand the branch to a new term.
    OpenNewTerm {
        part: Arc<PartitionEntry>,
        reply: Reply<()>,
    },
    /// A checkpointed snapshot record of the branch, with the reader snapshot of that state.
    ForkPoint {
        reply: Reply<(bough_manifest::Snapshot, Arc<TreeSnapshot>)>,
    },
    /// Merge `source`'s state `record` into this branch; `pin` keeps that state's files
    /// from GC until the merge is durable.
    Merge {
        part: Arc<PartitionEntry>,
        source: BranchName,
        record: bough_manifest::Snapshot,
        pin: Arc<TreeSnapshot>,
        opts: MergeOptions,
        reply: Reply<MergeReport>,
    },
    /// Reset this branch to `source`'s state `record` by reference (`pin` as for a merge).
    Reset {
        part: Arc<PartitionEntry>,
        source: BranchName,
        record: bough_manifest::Snapshot,
        pin: Arc<TreeSnapshot>,
        reply: Reply<()>,
    },
    /// Copy into the branch's own files every page it borrows.
    Rehome {
        part: Arc<PartitionEntry>,
        opts: RehomeOptions,
        reply: Reply<RehomeReport>,
    },
    /// Tag the branch's latest commit as `name` (`tags.rs`).
    CreateTag {
        part: Arc<PartitionEntry>,
        name: BranchName,
        reply: Reply<TagInfo>,
    },
    /// Change the branch's protection or expiry (`policy.rs`).
    SetPolicy {
        part: Arc<PartitionEntry>,
        change: PolicyChange,
        reply: Reply<BranchPolicy>,
    },
    /// Create branch `name`, expiring `ttl_ms` after now, at this branch's latest commit.
    CreateExpiring {
        part: Arc<PartitionEntry>,
        name: BranchName,
        ttl_ms: u64,
        reply: Reply<Arc<BranchEntry>>,
    },
    /// Delete this branch if its expiry has passed (checked again here); answers whether
    /// it did.
    DeleteExpired {
        part: Arc<PartitionEntry>,
        reply: Reply<bool>,
    },
    /// Rebase this branch onto `onto`'s state `record` (`pin` as for a merge).
    Rebase {
        part: Arc<PartitionEntry>,
        onto: BranchName,
        record: bough_manifest::Snapshot,
        pin: Arc<TreeSnapshot>,
        opts: MergeOptions,
        reply: Reply<MergeReport>,
    },
    /// Cherry-pick (or revert) the range between two states onto this branch.
    Pick {
        part: Arc<PartitionEntry>,
        ends: [pick::End; 2],
        range: bough_catalog::PickRange,
        opts: bough_catalog::PickOptions,
        reply: Reply<MergeReport>,
    },
}

/// Where a truncate stands after one of its pieces.
pub(super) struct TruncateProgress {
    /// The state the truncate began at: the later pieces remove what it held.
    pub(super) start: Arc<TreeSnapshot>,
    /// First key of the next piece; `None` when the truncate is complete.
    pub(super) next: Option<Vec<u8>>,
}

impl BranchOp {
    /// Whether the operation reads the branch's data (then the write buffer is
    /// checkpointed before it runs); deleting the branch does not, a sync only syncs (a
    /// checkpoint would cost it a tree update and two more syncs), and compaction moves
    /// pages without reading what they hold.
    pub(super) fn reads_data(&self) -> bool {
        // A branch is created from the buffered state by reference (ARCHITECTURE.md,
        // "Forks"); a staging branch's fork point checkpoints on its own.
        !matches!(
            self,
            BranchOp::Delete { .. }
                | BranchOp::DeleteExpired { .. }
                | BranchOp::Sync { .. }
                | BranchOp::CreateBranch { .. }
                | BranchOp::Compact { .. }
        )
    }

    /// Answers the operation with `e` without running it.
    pub(super) fn fail(self, e: Error) {
        match self {
            BranchOp::WriteCounted { reply, .. } => reply.send(Err(e)),
            BranchOp::TruncatePiece { reply, .. } => reply.send(Err(e)),
            BranchOp::ExpirePiece { reply, .. } => reply.send(Err(e)),
            BranchOp::Compact { reply, .. } => reply.send(Err(e)),
            BranchOp::CheckpointIfDirty { reply, .. } => reply.send(Err(e)),
            BranchOp::Sync { reply } => reply.send(Err(e)),
            BranchOp::Archive { reply, .. } => reply.send(Err(e)),
            BranchOp::Restore { reply, .. } => reply.send(Err(e)),
            BranchOp::RestoreAt { reply, .. } => reply.send(Err(e)),
            BranchOp::BranchAt { reply, .. } => reply.send(Err(e)),
            BranchOp::CreateBranch { reply, .. } => reply.send(Err(e)),
            BranchOp::Delete { reply, .. } => reply.send(Err(e)),
            BranchOp::PruneMergeBases { reply, .. } => reply.send(Err(e)),
            BranchOp::OpenNewTerm { reply, .. } => reply.send(Err(e)),
            BranchOp::ForkPoint { reply, .. } => reply.send(Err(e)),
            BranchOp::Merge { reply, .. } => reply.send(Err(e)),
            BranchOp::Reset { reply, .. } => reply.send(Err(e)),
            BranchOp::Rehome { reply, .. } => reply.send(Err(e)),
            BranchOp::CreateTag { reply, .. } => reply.send(Err(e)),
            BranchOp::SetPolicy { reply, .. } => reply.send(Err(e)),
            BranchOp::CreateExpiring { reply, .. } => reply.send(Err(e)),
            BranchOp::DeleteExpired { reply, .. } => reply.send(Err(e)),
            BranchOp::Rebase { reply, .. } => reply.send(Err(e)),
            BranchOp::Pick { reply, .. } => reply.send(Err(e)),
        }
    }
}

impl Branch {
    /// Queues `op` (given its reply channel) on the branch's writer, behind every request
    /// queued before it; the receiver resolves to its answer.
    pub(super) fn send<T>(
        &self,
        op: impl FnOnce(Reply<T>) -> BranchOp,
    ) -> Result<oneshot::Receiver<Result<T>>> {
        self.check_live()?;
        let (tx, rx) = oneshot::channel();
        self.store.submit(
            Request::Branch {
                branch: self.entry.clone(),
                op: op(tx),
            },
            self.entry.shard,
        )?;
        Ok(rx)
    }

    /// [`send`](Self::send), then blocks until the writer answers.
    pub(super) fn call<T>(&self, op: impl FnOnce(Reply<T>) -> BranchOp) -> Result<T> {
        self.send(op)?
            .wait()
            .unwrap_or_else(|| Err(Error::closed()))
    }

    /// The branch's current state as reads see it (its write buffer included), for what
    /// reads through the buffer (diff, cherry-pick and revert ends).
    pub(super) fn read_state(&self) -> Result<Arc<TreeSnapshot>> {
        self.check_live()?;
        Ok(self.entry.published.load())
    }
}
