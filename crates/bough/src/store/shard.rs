//! Shard threads: each owns the heads of its branches, runs their jobs in order, and commits
//! queued batches in groups.

use super::*;

pub(super) fn shard_of(label: &str, n: usize) -> usize {
    // FNV-1a: stable across runs, so a branch always lands on the same shard.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in label.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    (h % n as u64) as usize
}

pub(super) fn shard_loop(rx: mpsc::Receiver<Job>, clock: Arc<dyn Clock>, max_group: usize) {
    while let Ok(first) = rx.recv() {
        let mut jobs = vec![first];
        while jobs.len() < max_group {
            match rx.try_recv() {
                Ok(j) => jobs.push(j),
                Err(_) => break,
            }
        }
        // Writes of one branch that queued up together become one commit (group commit);
        // any other job of that branch first flushes the group, so order is kept.
        let mut groups: Vec<(Arc<BranchEntry>, Vec<Pending>)> = Vec::new();
        let mut stop = false;
        for job in jobs {
            match job {
                Job::Write {
                    branch,
                    muts,
                    reply,
                } => match groups.iter_mut().find(|(b, _)| Arc::ptr_eq(b, &branch)) {
                    Some((_, g)) => g.push((muts, reply)),
                    None => groups.push((branch, vec![(muts, reply)])),
                },
                Job::Run {
                    branch,
                    task,
                    reply,
                } => {
                    if let Some(pos) = groups.iter().position(|(b, _)| Arc::ptr_eq(b, &branch)) {
                        let (b, g) = groups.remove(pos);
                        commit_group(&b, g, clock.as_ref());
                    }
                    let mut head = branch.head.lock();
                    let r = task(&mut head, clock.now_ms()).map_err(|e| e.at(&branch.label));
                    reply.send(r);
                }
                Job::Stop => stop = true,
            }
        }
        for (b, g) in groups {
            commit_group(&b, g, clock.as_ref());
        }
        if stop {
            return;
        }
    }
}

/// Commits several batches of one branch as one tree update. Batches keep their order:
/// for a key written by two of them, last-writer-wins by timestamp decides
/// (`bough_tree::lww`), and a tie goes to the later batch, exactly as if they had been committed one after the other. (A delete
/// leaves a tombstone, so a delete followed by an older put resolves the same way merged as
/// committed in turn: the delete wins.)
pub(super) fn commit_group(branch: &BranchEntry, group: Vec<Pending>, clock: &dyn Clock) {
    if group.len() == 1 {
        let mut replies = Vec::with_capacity(1);
        let muts = group.into_iter().next().map_or(Vec::new(), |(m, r)| {
            replies.push(r);
            m
        });
        commit_merged(branch, &muts, replies, clock);
        return;
    }
    let mut replies = Vec::with_capacity(group.len());
    let mut merged: BTreeMap<Vec<u8>, Op> = BTreeMap::new();
    for (muts, reply) in group {
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
    commit_merged(branch, &run, replies, clock);
}

/// Commits merged batches and answers each of their waiters.
pub(super) fn commit_merged(
    branch: &BranchEntry,
    muts: &[Mutation],
    replies: Vec<oneshot::Sender<Result<()>>>,
    clock: &dyn Clock,
) {
    let result = branch
        .head
        .lock()
        .commit(muts, clock.now_ms())
        .map(|_| ())
        .map_err(|e| Error::from(e).at(&branch.label));
    match result {
        Ok(()) => replies.into_iter().for_each(|r| r.send(Ok(()))),
        Err(e) => replies.into_iter().for_each(|r| r.send(Err(e.duplicate()))),
    }
}
