//! The write buffer against a model: random commits of every op kind, with checkpoints at
//! random points, read through the buffer over the tree and through the tree alone after a
//! checkpoint, must give what an independently written last-writer-wins map gives.

use crate::error::{TreeError, TreeResult};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use bough_manifest::{NO_PAGE, PageId};
use proptest::prelude::*;

use super::*;
use crate::btree::{Applied, Node, TreeWrite};
use crate::page::index::IndexNode;

/// Pages in a map: the tree's logic without I/O.
#[derive(Default)]
struct MemTree {
    pages: HashMap<PageId, Node>,
    overflow: HashMap<PageId, Vec<u8>>,
    next: PageId,
}

impl TreeRead for MemTree {
    fn node(&self, id: PageId) -> TreeResult<Node> {
        self.pages
            .get(&id)
            .cloned()
            .ok_or_else(|| TreeError::corruption("<mem>", u64::from(id), "no page"))
    }
    fn overflow(&self, first: PageId, _pages: u32, _len: u64) -> TreeResult<Vec<u8>> {
        self.overflow
            .get(&first)
            .cloned()
            .ok_or_else(|| TreeError::corruption("<mem>", u64::from(first), "no overflow"))
    }
    fn locate_page(&self, id: PageId) -> (String, u64) {
        ("<mem>".to_string(), u64::from(id))
    }
}

impl MemTree {
    fn alloc(&mut self, id: Option<PageId>) -> PageId {
        id.unwrap_or_else(|| {
            self.next += 1;
            self.next
        })
    }
}

impl TreeWrite for MemTree {
    fn payload_capacity(&self) -> usize {
        1024
    }
    fn put_leaf(&mut self, id: Option<PageId>, payload: Vec<u8>) -> TreeResult<PageId> {
        let id = self.alloc(id);
        self.pages.insert(id, Node::Leaf(payload.into()));
        Ok(id)
    }
    fn put_index(&mut self, id: Option<PageId>, node: IndexNode) -> TreeResult<PageId> {
        let id = self.alloc(id);
        self.pages.insert(id, Node::Index(Arc::new(node)));
        Ok(id)
    }
    fn free(&mut self, id: PageId) -> TreeResult<()> {
        self.pages.remove(&id);
        Ok(())
    }
    fn put_overflow(&mut self, value: &[u8]) -> TreeResult<(PageId, u32)> {
        self.next += 1;
        self.overflow.insert(self.next, value.to_vec());
        Ok((self.next, 1))
    }
    fn free_overflow(&mut self, first: PageId, _pages: u32) -> TreeResult<()> {
        self.overflow.remove(&first);
        Ok(())
    }
}

/// What the model stores per key: (timestamp, expire_at, value or `None` for a tombstone).
type Stored = (u64, u64, Option<Vec<u8>>);

/// Last writer wins, written out again independently of `lww`.
fn model_apply(model: &mut BTreeMap<Vec<u8>, Stored>, key: &[u8], op: &Op) {
    let old_ts = model.get(key).map(|s| s.0);
    let beats = |ts: u64| old_ts.is_none_or(|old| ts >= old);
    match op {
        Op::Put {
            value,
            timestamp,
            expire_at,
        } if beats(*timestamp) => {
            model.insert(key.to_vec(), (*timestamp, *expire_at, Some(value.clone())));
        }
        Op::Delete {
            timestamp,
            expire_at,
        } if beats(*timestamp) => {
            model.insert(key.to_vec(), (*timestamp, *expire_at, None));
        }
        Op::Put { .. } | Op::Delete { .. } => {}
        Op::ForceDelete => {
            model.remove(key);
        }
        Op::Replace {
            value,
            timestamp,
            expire_at,
        } => {
            model.insert(key.to_vec(), (*timestamp, *expire_at, Some(value.clone())));
        }
        Op::ReplaceWithTombstone {
            timestamp,
            expire_at,
        } => {
            model.insert(key.to_vec(), (*timestamp, *expire_at, None));
        }
    }
}

fn stored(tree: &dyn TreeRead, e: &Entry) -> Stored {
    let v = value_of(tree, e).unwrap_or_else(|err| panic!("value of {:?}: {err}", e.key));
    (e.timestamp, e.expire_at, v)
}

fn key(i: u8) -> Vec<u8> {
    format!("k{:03}", i % 40).into_bytes()
}

fn op_strategy() -> impl Strategy<Value = Op> {
    // Few timestamps, so ties (the later write wins) are common; some values long enough
    // for overflow pages; expiries now and then.
    let ts = 0..6u64;
    let value = prop_oneof![3 => prop::collection::vec(any::<u8>(), 0..8), 1 => prop::collection::vec(any::<u8>(), 500..700)];
    let exp = prop_oneof![3 => Just(0u64), 1 => 1..100u64];
    prop_oneof![
        6 => (value.clone(), ts.clone(), exp.clone()).prop_map(|(value, timestamp, expire_at)| Op::Put { value, timestamp, expire_at }),
        3 => (ts.clone(), exp.clone()).prop_map(|(timestamp, expire_at)| Op::Delete { timestamp, expire_at }),
        1 => Just(Op::ForceDelete),
        1 => (value, ts.clone(), exp.clone()).prop_map(|(value, timestamp, expire_at)| Op::Replace { value, timestamp, expire_at }),
        1 => (ts, exp).prop_map(|(timestamp, expire_at)| Op::ReplaceWithTombstone { timestamp, expire_at }),
    ]
}

#[derive(Debug, Clone)]
enum Step {
    /// A commit: (key index, op) pairs, deduplicated by key (the last one kept).
    Commit(Vec<(u8, Op)>),
    Checkpoint,
}

fn step_strategy() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => prop::collection::vec((any::<u8>(), op_strategy()), 1..12).prop_map(Step::Commit),
        // Keys of a narrow window: runs that often do not overlap, so merges concatenate
        // segments, and sometimes do, so segmented runs are also merged op by op.
        4 => (0..40u8).prop_flat_map(|base| {
            prop::collection::vec((base..base.saturating_add(4), op_strategy()), 1..4)
        }).prop_map(Step::Commit),
        1 => Just(Step::Checkpoint),
    ]
}

fn batch(ops: &[(u8, Op)]) -> Vec<Mutation> {
    let mut by_key: BTreeMap<Vec<u8>, Op> = BTreeMap::new();
    for (k, op) in ops {
        by_key.insert(key(*k), op.clone());
    }
    by_key
        .into_iter()
        .map(|(key, op)| Mutation { key, op })
        .collect()
}

/// Every read of `read` agrees with `model`: get of every key, floors around every key,
/// and a full scan plus scans from every key.
fn check_reads(
    tree: &dyn TreeRead,
    read: &BufferedRead<'_>,
    model: &BTreeMap<Vec<u8>, Stored>,
) -> Result<(), TestCaseError> {
    for i in 0..42u8 {
        let k = format!("k{i:03}").into_bytes();
        let got = read
            .get(&k)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(
            got.map(|e| stored(tree, &e)),
            model.get(&k).cloned(),
            "get {:?}",
            k
        );
        for inclusive in [true, false] {
            let got = read
                .before(&k, inclusive)
                .map_err(|e| TestCaseError::fail(e.to_string()))?
                .map(|e| (e.key.clone(), stored(tree, &e)));
            let want = model
                .range::<Vec<u8>, _>(..=k.clone())
                .rev()
                .find(|(mk, _)| inclusive || **mk != k)
                .map(|(mk, s)| (mk.clone(), s.clone()));
            prop_assert_eq!(got, want, "before {:?} inclusive {}", k, inclusive);
        }
        if i % 7 == 0 {
            let mut c = read
                .seek(Some(&k))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            let mut got = Vec::new();
            while let Some(e) = c
                .next_entry()
                .map_err(|e| TestCaseError::fail(e.to_string()))?
            {
                got.push((e.key.clone(), stored(tree, &e)));
            }
            let want: Vec<_> = model
                .range(k.clone()..)
                .map(|(k, s)| (k.clone(), s.clone()))
                .collect();
            prop_assert_eq!(got, want, "scan from {:?}", k);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Reads over (runs + tree) equal the model after every step, and a checkpoint (the
    /// frozen runs applied to the tree as one batch) changes no read.
    #[test]
    fn buffer_over_tree_matches_the_model(steps in prop::collection::vec(step_strategy(), 1..40)) {
        let mut tree = MemTree::default();
        let mut root = NO_PAGE;
        let mut buf = WriteBuffer::new();
        let mut model: BTreeMap<Vec<u8>, Stored> = BTreeMap::new();
        let mut version = 0;
        for step in steps {
            match step {
                Step::Commit(ops) => {
                    let muts = batch(&ops);
                    for m in &muts {
                        model_apply(&mut model, &m.key, &m.op);
                    }
                    version += 1;
                    buf.push(version, muts);
                    // Merging in base F keeps at most F - 1 runs per level, and there are
                    // at most log_F(commits) + 1 levels.
                    let (mut levels, mut c) = (1, version);
                    while c >= super::MERGE_FAN_IN as u64 {
                        c /= super::MERGE_FAN_IN as u64;
                        levels += 1;
                    }
                    let bound = (super::MERGE_FAN_IN - 1) * levels;
                    prop_assert!(buf.runs().len() <= bound, "{} runs after {} commits", buf.runs().len(), version);
                }
                Step::Checkpoint => {
                    if let Some((upto, muts)) = buf.frozen_batch() {
                        root = btree::apply(&mut tree, root, &muts, &mut Applied::default())
                            .map_err(|e| TestCaseError::fail(e.to_string()))?;
                        buf.release(upto);
                        prop_assert!(buf.is_empty());
                        prop_assert_eq!(buf.bytes(), 0);
                    }
                }
            }
            check_reads(&tree, &buf.over(&tree, root), &model)?;
        }
        // Finally everything checkpointed: the tree alone reads as the model.
        if let Some((upto, muts)) = buf.frozen_batch() {
            root = btree::apply(&mut tree, root, &muts, &mut Applied::default())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            buf.release(upto);
        }
        check_reads(&tree, &WriteBuffer::new().over(&tree, root), &model)?;
    }
}

/// A commit arriving while a checkpoint is in progress stays in its own run: releasing the
/// checkpoint drops only what it froze.
#[test]
fn runs_pushed_during_a_checkpoint_survive_its_release() {
    let put = |v: u8, ts| Op::Put {
        value: vec![v],
        timestamp: ts,
        expire_at: 0,
    };
    let mut buf = WriteBuffer::new();
    buf.push(
        1,
        vec![Mutation {
            key: b"a".to_vec(),
            op: put(1, 1),
        }],
    );
    let (upto, frozen) = buf.frozen_batch().expect("a run");
    assert_eq!((upto, frozen.len()), (1, 1));
    // Runs of the frozen run's level: four of them would merge without the freeze.
    for (v, k) in [(2, b"b"), (3, b"c"), (4, b"d")] {
        buf.push(
            v,
            vec![Mutation {
                key: k.to_vec(),
                op: put(v as u8, 1),
            }],
        );
    }
    assert_eq!(buf.runs().len(), 4);
    buf.release(upto);
    let versions: Vec<_> = buf.runs().iter().map(|r| r.versions()).collect();
    assert_eq!(versions, [(4, 4), (3, 3), (2, 2)]);
    assert_eq!(buf.last_version(), Some(4));
    // The next commit merges the four unfrozen runs.
    buf.push(
        5,
        vec![Mutation {
            key: b"e".to_vec(),
            op: put(5, 1),
        }],
    );
    assert_eq!(buf.runs().len(), 1);
    assert_eq!(buf.runs()[0].versions(), (2, 5));
}

fn puts(keys: std::ops::Range<u32>, version: u64) -> Vec<Mutation> {
    keys.map(|i| Mutation {
        key: format!("s{i:06}").into_bytes(),
        op: Op::Put {
            value: version.to_be_bytes().to_vec(),
            timestamp: version,
            expire_at: 0,
        },
    })
    .collect()
}

/// A sequential load (each commit's keys above the last one's) merges runs by sharing
/// their segments: the ops of the first commit are never copied, whatever the merges.
#[test]
fn runs_of_a_sequential_load_are_merged_without_copying() {
    let mut buf = WriteBuffer::new();
    buf.push(1, puts(0..10, 1));
    let first = Arc::clone(&buf.runs()[0]);
    for v in 2..=64u64 {
        let lo = (v as u32 - 1) * 10;
        buf.push(v, puts(lo..lo + 10, v));
    }
    // 64 commits of 10 keys: a few runs, 640 ops in 64 segments, each a commit's own.
    let runs = buf.runs();
    assert!(runs.len() < 5, "{} runs", runs.len());
    assert_eq!(runs.iter().map(|r| r.len()).sum::<usize>(), 640);
    assert_eq!(runs.iter().map(|r| r.segment_count()).sum::<usize>(), 64);
    let oldest = runs.last().expect("a run");
    assert!(oldest.segment_count() > 32);
    assert!(first.shares_segment(0, oldest));
    assert_eq!(buf.bytes(), runs.iter().map(|r| r.bytes).sum::<usize>());
    let tree = MemTree::default();
    let read = buf.over(&tree, NO_PAGE);
    for i in [0u32, 9, 10, 333, 639] {
        let e = read
            .get(format!("s{i:06}").as_bytes())
            .expect("get")
            .expect("found");
        assert_eq!(e.timestamp, u64::from(i / 10 + 1));
    }
    assert!(read.get(b"s000640").expect("get").is_none());
    let mut c = read.seek(Some(b"s000095")).expect("seek");
    let mut n = 0;
    while c.next_entry().expect("next").is_some() {
        n += 1;
    }
    assert_eq!(n, 640 - 95);
    let floor = read
        .before(b"s000100", false)
        .expect("before")
        .expect("found");
    assert_eq!(floor.key, b"s000099");
}

/// Runs whose key ranges are disjoint merge by sharing their segments, put in key order
/// whatever their commit order; runs that overlap merge op by op into one segment, a key in
/// several taking their ops composed in commit order.
#[test]
fn overlapping_runs_merge_into_one_segment_and_disjoint_ones_share_theirs() {
    let mut buf = WriteBuffer::new();
    buf.push(1, puts(100..110, 1));
    buf.push(2, puts(110..120, 2));
    buf.push(3, puts(90..95, 3));
    assert_eq!(buf.runs().len(), 3);
    buf.push(4, puts(80..85, 4));
    assert_eq!(buf.runs().len(), 1);
    assert_eq!(buf.runs()[0].segment_count(), 4);
    assert!(buf.runs()[0].mutations().map(|m| &m.key).is_sorted());
    buf.push(5, puts(105..125, 5));
    buf.push(6, puts(115..130, 6));
    buf.push(7, puts(300..305, 7));
    buf.push(8, puts(50..60, 8));
    assert_eq!(buf.runs().len(), 2);
    let run = &buf.runs()[0];
    // 105..130, 300..305 and 50..60: 25 + 5 + 10 ops.
    assert_eq!((run.len(), run.segment_count()), (40, 1));
    assert!(run.mutations().map(|m| &m.key).is_sorted());
    assert_eq!(
        buf.bytes(),
        buf.runs().iter().map(|r| r.bytes).sum::<usize>()
    );
    let tree = MemTree::default();
    let ts = |buf: &WriteBuffer, i: u32| {
        buf.over(&tree, NO_PAGE)
            .get(format!("s{i:06}").as_bytes())
            .expect("get")
            .map(|e| e.timestamp)
    };
    let ts_all =
        |buf: &WriteBuffer, keys: &[u32]| keys.iter().map(|&i| ts(buf, i)).collect::<Vec<_>>();
    assert_eq!(
        ts_all(
            &buf,
            &[50, 80, 90, 100, 104, 105, 114, 115, 124, 129, 302, 130]
        ),
        [
            Some(8),
            Some(4),
            Some(3),
            Some(1),
            Some(1),
            Some(5),
            Some(5),
            Some(6),
            Some(6),
            Some(6),
            Some(7),
            None
        ]
    );
    let before = ts_all(&buf, &(40..140).collect::<Vec<_>>());
    // Four more level-0 runs make a second level-1 run; four level-1 runs, one level-2.
    for v in 9..=16u64 {
        let lo = 1000 + (v as u32) * 10;
        buf.push(v, puts(lo..lo + 10, v));
    }
    assert_eq!(buf.runs().len(), 1);
    assert_eq!(buf.runs()[0].level(), 2);
    // 30 + 40 + 80 ops, less the 15 keys (105..120) the two first level-1 runs share.
    assert_eq!(buf.runs()[0].len(), 30 + 40 + 80 - 15);
    assert_eq!(ts_all(&buf, &(40..140).collect::<Vec<_>>()), before);
}
