//! Shard threads: each serves the requests of its branches in order and commits queued
//! batches in groups. A blocking write that finds its shard with nothing queued and nothing
//! in service commits on the caller's thread instead ([`ShardQueue::claim_idle`]): the two
//! thread hand-offs of a queued request (to the shard thread and back) cost about as much
//! as the log's `fdatasync` itself on a 2-vCPU machine, and a lone writer has nothing to
//! group with.

use super::*;
use std::sync::atomic::AtomicUsize;

/// A shard's queue and how many of its requests are queued or in service.
#[derive(Debug)]
pub(super) struct ShardQueue {
    tx: Mutex<mpsc::Sender<Request>>,
    /// Requests sent and not yet answered, plus writes committing on a caller's thread
    /// (changed under `tx`'s lock when it grows, so a claim sees every earlier send).
    in_service: Arc<AtomicUsize>,
    /// Writes committing on a caller's thread (closing waits for them, as it waits for
    /// the shard thread's own).
    on_callers: Arc<AtomicUsize>,
}

/// A write running on the caller's thread while its shard is otherwise idle: until it is
/// dropped, every request for the shard queues behind it.
pub(super) struct IdleClaim {
    in_service: Arc<AtomicUsize>,
    on_callers: Arc<AtomicUsize>,
}

impl Drop for IdleClaim {
    fn drop(&mut self) {
        self.on_callers.fetch_sub(1, Ordering::AcqRel);
        self.in_service.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ShardQueue {
    /// A queue and the receiving end its thread serves, with the shared count.
    pub(super) fn new() -> (ShardQueue, mpsc::Receiver<Request>, Arc<AtomicUsize>) {
        let (tx, rx) = mpsc::channel();
        let in_service = Arc::new(AtomicUsize::new(0));
        let queue = ShardQueue {
            tx: Mutex::new(tx),
            in_service: in_service.clone(),
            on_callers: Arc::new(AtomicUsize::new(0)),
        };
        (queue, rx, in_service)
    }

    /// Queues `request` for the shard thread; false if the thread is gone.
    pub(super) fn send(&self, request: Request) -> bool {
        let tx = self.tx.lock();
        self.in_service.fetch_add(1, Ordering::AcqRel);
        if tx.send(request).is_err() {
            self.in_service.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// A claim on the shard if nothing is queued or in service: every request sent before
    /// this call has been answered, so a write made under the claim keeps queue order.
    pub(super) fn claim_idle(&self) -> Option<IdleClaim> {
        let _tx = self.tx.lock();
        if self.in_service.load(Ordering::Acquire) != 0 {
            return None;
        }
        self.in_service.fetch_add(1, Ordering::AcqRel);
        self.on_callers.fetch_add(1, Ordering::AcqRel);
        Some(IdleClaim {
            in_service: self.in_service.clone(),
            on_callers: self.on_callers.clone(),
        })
    }

    /// Returns once no write commits on a caller's thread. Closing calls it after the
    /// shard thread stopped and the store was marked closed, so a write that claims the
    /// shard later finds the store closed once it holds the head, and this ends.
    pub(super) fn wait_for_callers(&self) {
        while self.on_callers.load(Ordering::Acquire) > 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

pub(super) fn shard_of(label: &str, n: usize) -> usize {
    // FNV-1a: stable across runs, so a branch always lands on the same shard.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in label.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    (h % n as u64) as usize
}

/// What every shard thread is started with.
pub(super) struct ShardContext {
    pub(super) clock: Arc<dyn Clock>,
    /// Most requests taken from the queue at once (and so most batches in one group).
    pub(super) max_group: usize,
    /// How many shards the store has (a branch created on this thread is placed by it).
    pub(super) shards: usize,
    /// The queue's count of requests in service ([`ShardQueue`]).
    pub(super) in_service: Arc<AtomicUsize>,
}

pub(super) fn shard_loop(rx: mpsc::Receiver<Request>, ctx: ShardContext) {
    while let Ok(first) = rx.recv() {
        let mut requests = vec![first];
        while requests.len() < ctx.max_group {
            match rx.try_recv() {
                Ok(r) => requests.push(r),
                Err(_) => break,
            }
        }
        let taken = requests.len();
        let stop = serve_requests(requests, &ctx);
        // Answered (or dropped with their reply): a caller may now write on its own thread.
        ctx.in_service.fetch_sub(taken, Ordering::AcqRel);
        if stop {
            return;
        }
    }
}

/// Serves requests taken from the queue together; true if one of them was `Stop`.
fn serve_requests(requests: Vec<Request>, ctx: &ShardContext) -> bool {
    let clock = ctx.clock.as_ref();
    // Writes of one branch that queued up together become one commit (group commit);
    // any other request of that branch first flushes the group, so order is kept.
    let mut groups: Vec<(Arc<BranchEntry>, Vec<Pending>)> = Vec::new();
    let mut stop = false;
    for request in requests {
        match request {
            Request::Write {
                branch,
                muts,
                sync,
                reply,
            } => match groups.iter_mut().find(|(b, _)| Arc::ptr_eq(b, &branch)) {
                Some((_, g)) => g.push((muts, sync, reply)),
                None => groups.push((branch, vec![(muts, sync, reply)])),
            },
            Request::Branch { branch, op } => {
                if let Some(pos) = groups.iter().position(|(b, _)| Arc::ptr_eq(b, &branch)) {
                    let (b, g) = groups.remove(pos);
                    commit_group(&b, g, clock);
                }
                serve(&branch, op, ctx);
            }
            Request::Stop => stop = true,
        }
    }
    for (b, g) in groups {
        commit_group(&b, g, clock);
    }
    stop
}

/// Answers one request of `branch` with the function of `writer_ops` (or `maintenance`)
/// that performs it, holding the branch head; a failure names the branch.
fn serve(branch: &BranchEntry, op: BranchOp, ctx: &ShardContext) {
    fn answer<T>(reply: Reply<T>, label: &str, result: Result<T>) {
        reply.send(result.map_err(|e| e.at(label)));
    }
    let mut guard = branch.head.lock();
    let head = &mut *guard;
    let now = ctx.clock.now_ms();
    let label = &*branch.label;
    // Everything but a plain commit reads the branch's tree: it checkpoints the write
    // buffer first (ARCHITECTURE.md, "Everything else sees buffered writes"). A failure
    // is that operation's failure.
    if op.reads_data()
        && let Err(e) = head.checkpoint_buffer(now)
    {
        op.fail(Error::from(e).at(label));
        return;
    }
    match op {
        BranchOp::WriteCounted { muts, reply } => {
            answer(reply, label, write_counted(head, &muts, now));
        }
        BranchOp::TruncatePiece {
            start,
            from,
            limit,
            reply,
        } => answer(
            reply,
            label,
            truncate_piece(head, now, start, from.as_deref(), limit),
        ),
        BranchOp::ExpirePiece { limit, reply } => {
            answer(reply, label, expire_piece(head, now, limit));
        }
        BranchOp::Compact {
            ratio,
            usage,
            give_way,
            reply,
        } => {
            let result = if give_way && head.checkpoint_running() {
                Ok((CompactionReport::default(), false))
            } else {
                compact_step(head, ratio, now, &usage)
            };
            answer(reply, label, result);
        }
        BranchOp::CheckpointIfDirty { reply } => {
            answer(reply, label, checkpoint_if_dirty(head, now));
        }
        BranchOp::Sync { reply } => answer(reply, label, head.sync_log(now).map_err(Error::from)),
        BranchOp::Archive { part, ts, reply } => {
            answer(reply, label, archive(head, now, &part, ts));
        }
        BranchOp::Restore {
            part,
            archive,
            backup,
            reply,
        } => answer(
            reply,
            label,
            restore(head, now, branch, &part, &archive, backup, ctx.shards),
        ),
        BranchOp::RestoreAt {
            part,
            at_ms,
            window_ms,
            backup,
            reply,
        } => answer(
            reply,
            label,
            restore_at(
                head, now, branch, &part, at_ms, window_ms, backup, ctx.shards,
            ),
        ),
        BranchOp::BranchAt {
            part,
            name,
            at_ms,
            window_ms,
            reply,
        } => answer(
            reply,
            label,
            branch_at(head, now, &part, name, at_ms, window_ms, ctx.shards),
        ),
        BranchOp::CreateBranch {
            part,
            name,
            staging,
            reply,
        } => answer(
            reply,
            label,
            create_branch(head, now, &part, name, staging.as_deref(), ctx.shards),
        ),
        BranchOp::Delete { part, reply } => answer(reply, label, delete(head, branch, &part)),
        BranchOp::PruneMergeBases { part, reply } => {
            answer(reply, label, prune_merge_bases(head, now, &part));
        }
        BranchOp::OpenNewTerm { part, reply } => {
            answer(reply, label, open_new_term(head, now, branch, &part));
        }
        BranchOp::ForkPoint { reply } => answer(reply, label, fork_point(head, now)),
        BranchOp::Merge {
            part,
            source,
            record,
            pin,
            opts,
            reply,
        } => answer(
            reply,
            label,
            merge(head, now, &part, &source, &record, pin, opts),
        ),
        BranchOp::Reset {
            part,
            source,
            record,
            pin,
            reply,
        } => answer(reply, label, reset(head, now, &part, &source, &record, pin)),
        BranchOp::Rehome { part, opts, reply } => {
            answer(reply, label, rehome(head, now, &part, opts))
        }
        BranchOp::CreateTag { part, name, reply } => {
            answer(reply, label, tags::create_tag(head, now, &part, &name));
        }
        BranchOp::SetPolicy {
            part,
            change,
            reply,
        } => answer(reply, label, policy::set_policy(head, now, &part, change)),
        BranchOp::CreateExpiring {
            part,
            name,
            ttl_ms,
            reply,
        } => answer(
            reply,
            label,
            policy::create_expiring(head, now, &part, name, ttl_ms, ctx.shards),
        ),
        BranchOp::DeleteExpired { part, reply } => {
            answer(
                reply,
                label,
                policy::delete_expired(head, now, branch, &part),
            );
        }
        BranchOp::Rebase {
            part,
            onto,
            record,
            pin,
            opts,
            reply,
        } => answer(
            reply,
            label,
            pick::rebase(head, now, &part, &onto, &record, pin, opts),
        ),
        BranchOp::Pick {
            part,
            ends,
            range,
            opts,
            reply,
        } => answer(
            reply,
            label,
            pick::pick(head, now, &part, ends, range, opts),
        ),
    }
    let work = guard.take_deferred_work();
    drop(guard);
    branch_entry::run_deferred(work);
}

/// Commits several batches of one branch as one tree update. Batches keep their order:
/// for a key written by two of them, last-writer-wins by timestamp decides
/// (`bough_tree::lww`), and a tie goes to the later batch, exactly as if they had been committed one after the other. (A delete
/// leaves a tombstone, so a delete followed by an older put resolves the same way merged as
/// committed in turn: the delete wins.) The group is one record: synced if any batch in it
/// waits for durability.
pub(super) fn commit_group(branch: &BranchEntry, group: Vec<Pending>, clock: &dyn Clock) {
    let sync = group.iter().any(|(_, sync, _)| *sync);
    if group.len() == 1 {
        let mut replies = Vec::with_capacity(1);
        let muts = group.into_iter().next().map_or(Vec::new(), |(m, _, r)| {
            replies.push(r);
            m
        });
        commit_merged(branch, muts, sync, replies, clock);
        return;
    }
    let mut replies = Vec::with_capacity(group.len());
    let mut merged: BTreeMap<Vec<u8>, Op> = BTreeMap::new();
    for (muts, _, reply) in group {
        replies.push(reply);
        for m in muts {
            // Later batches compose over earlier ones by the one last-writer-wins rule.
            let op = match merged.remove(&m.key) {
                Some(old) => bough_tree::lww::compose(old, m.op),
                None => m.op,
            };
            merged.insert(m.key, op);
        }
    }
    let run: Vec<Mutation> = merged
        .into_iter()
        .map(|(key, op)| Mutation { key, op })
        .collect();
    commit_merged(branch, run, sync, replies, clock);
}

/// Commits merged batches (durably if `sync`, else acknowledged once the log record is
/// written) and answers each of their waiters.
pub(super) fn commit_merged(
    branch: &BranchEntry,
    muts: Vec<Mutation>,
    sync: bool,
    replies: Vec<oneshot::Sender<Result<()>>>,
    clock: &dyn Clock,
) {
    match commit_now(branch, muts, sync, clock, None) {
        Ok(()) => replies.into_iter().for_each(|r| r.send(Ok(()))),
        Err(e) => replies.into_iter().for_each(|r| r.send(Err(e.duplicate()))),
    }
}

/// Commits one batch (or a merged group) holding the branch head. `closed`: the store's
/// flag, checked once the head is held, for a write on a caller's thread: closing sets it
/// before it seals the heads, so a write that gets the head after the seal is refused
/// rather than appended to a closed log.
pub(super) fn commit_now(
    branch: &BranchEntry,
    muts: Vec<Mutation>,
    sync: bool,
    clock: &dyn Clock,
    closed: Option<&AtomicBool>,
) -> Result<()> {
    let mut head = branch.head.lock();
    if closed.is_some_and(|c| c.load(Ordering::Acquire)) {
        return Err(Error::closed());
    }
    let now = clock.now_ms();
    let committed = head.commit_owned(muts, now, sync);
    let work = head.take_deferred_work();
    drop(head);
    branch_entry::run_deferred(work);
    branch.activity.wrote(now);
    committed
        .map(|_| ())
        .map_err(|e| Error::from(e).at(&branch.label))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_needs_an_idle_shard_and_holds_it_until_dropped() {
        let (queue, rx, in_service) = ShardQueue::new();
        let claim = queue.claim_idle().expect("an idle shard is claimed");
        assert!(
            queue.claim_idle().is_none(),
            "two writers claimed one shard"
        );
        drop(claim);
        assert!(queue.send(Request::Stop));
        assert!(
            queue.claim_idle().is_none(),
            "claimed past a queued request"
        );
        // The shard thread takes the request and answers it: the shard is idle again.
        assert!(matches!(rx.try_recv(), Ok(Request::Stop)));
        assert!(
            queue.claim_idle().is_none(),
            "claimed past a request in service"
        );
        in_service.fetch_sub(1, Ordering::AcqRel);
        assert!(queue.claim_idle().is_some());
        drop(rx);
        assert!(
            !queue.send(Request::Stop),
            "a send to a stopped shard succeeded"
        );
        assert_eq!(in_service.load(Ordering::Acquire), 0);
    }
}
