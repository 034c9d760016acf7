//! The copy-on-write B+tree: lookups, cursors and batched mutation over logical page ids.
//!
//! Pages are addressed by logical id; [`TreeRead`]/[`TreeWrite`] hide where they live. A
//! rewritten page keeps its logical id and gets a new physical page (the mapping changes),
//! so a parent is rewritten only when its list of children changes — a split, a merge or a
//! removal. Readers holding an older mapping keep seeing the older pages.

use std::sync::Arc;

use bough_manifest::{NO_PAGE, PageId};

pub use crate::bounds::MAX_DEPTH;
use crate::bounds::{KeyRange, Levels, bad_page};
use crate::page::index::IndexNode;
use crate::page::leaf::{self, Entry, LeafCursor, LeafView, Piece, ValueRef};

pub(crate) mod access;
mod apply;
mod cursor;
mod forward;
mod leaf_merge;
pub(crate) mod mutation;
mod node;
mod path;
mod top_nodes;
mod write;

pub use access::{Node, TreeRead, TreeWrite};

pub use apply::apply;
use apply::*;
pub use cursor::{Cursor, get};
pub use forward::ForwardCursor;
pub use leaf_merge::inline_limit;
use leaf_merge::*;
pub use mutation::{
    Applied, MAX_VALUE_LEN, Mutation, Op, check_batch, key_order, key_prefix, max_key_len,
};
pub use top_nodes::{MAX_CHILDREN, MAX_GRANDCHILDREN, TopNodes};
use write::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TreeError;
    use crate::error::TreeResult;
    use crate::page::leaf::ValueLoc;
    use std::collections::{BTreeMap, HashMap};

    /// Pages in a map: enough to test the tree's logic without I/O.
    #[derive(Default)]
    struct MemTree {
        pages: HashMap<PageId, Node>,
        overflow: HashMap<PageId, Vec<u8>>,
        next: PageId,
        freed: Vec<PageId>,
        cap: usize,
        index_writes: usize,
    }

    impl TreeRead for MemTree {
        fn node(&self, id: PageId) -> TreeResult<Node> {
            self.pages
                .get(&id)
                .cloned()
                .ok_or_else(|| TreeError::corruption("mem", u64::from(id), "no such page"))
        }
        fn overflow(&self, first: PageId, _pages: u32, _len: u64) -> TreeResult<Vec<u8>> {
            Ok(self.overflow[&first].clone())
        }
        fn locate_page(&self, id: PageId) -> (String, u64) {
            ("mem".to_string(), u64::from(id))
        }
    }

    impl MemTree {
        fn alloc(&mut self, id: Option<PageId>) -> PageId {
            id.unwrap_or_else(|| {
                self.freed.pop().unwrap_or_else(|| {
                    self.next += 1;
                    self.next
                })
            })
        }
    }

    impl TreeWrite for MemTree {
        fn payload_capacity(&self) -> usize {
            self.cap
        }
        fn put_leaf(&mut self, id: Option<PageId>, payload: Vec<u8>) -> TreeResult<PageId> {
            assert!(
                payload.len() <= self.cap,
                "leaf {} > {}",
                payload.len(),
                self.cap
            );
            // Leaves built from byte ranges are exactly what encoding their entries gives.
            let entries = LeafView::new(&payload)
                .and_then(|v| v.entries())
                .expect("a leaf the tree wrote decodes");
            assert!(
                leaf::encode(&entries) == payload,
                "leaf encoded canonically"
            );
            let id = self.alloc(id);
            self.pages.insert(id, Node::Leaf(payload.into()));
            Ok(id)
        }
        fn put_index(&mut self, id: Option<PageId>, node: IndexNode) -> TreeResult<PageId> {
            assert!(node.encoded_len() <= self.cap);
            self.index_writes += 1;
            let id = self.alloc(id);
            self.pages.insert(id, Node::Index(Arc::new(node)));
            Ok(id)
        }
        fn free(&mut self, id: PageId) -> TreeResult<()> {
            assert!(self.pages.remove(&id).is_some(), "double free {id}");
            self.freed.push(id);
            Ok(())
        }
        fn put_overflow(&mut self, value: &[u8]) -> TreeResult<(PageId, u32)> {
            self.next += 1;
            self.overflow.insert(self.next, value.to_vec());
            Ok((self.next, 1))
        }
        fn free_overflow(&mut self, first: PageId, _pages: u32) -> TreeResult<()> {
            assert!(self.overflow.remove(&first).is_some());
            Ok(())
        }
    }

    fn check(t: &MemTree, root: PageId, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
        let mut c = Cursor::seek(t, root, None).unwrap();
        let mut got = Vec::new();
        while let Some(e) = c.next_entry(t).unwrap() {
            let v = match e.value {
                ValueLoc::Inline(v) => v,
                ValueLoc::Overflow { first, pages, len } => t.overflow(first, pages, len).unwrap(),
                ValueLoc::Tombstone => continue,
            };
            got.push((e.key, v));
        }
        let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(got.len(), want.len());
        assert!(got == want);
        // A forward cursor reading the pages lazily yields exactly what a decoding one
        // does, from the start and from seeks at, between and past the keys.
        let every = model.len() / 4 + 1;
        let starts = std::iter::once(None).chain(model.keys().step_by(every).flat_map(|k| {
            let mut after = k.clone();
            after.push(0);
            let before = k.get(..k.len().saturating_sub(1)).map(<[u8]>::to_vec);
            [Some(k.clone()), Some(after), before]
        }));
        for start in starts.chain([Some(vec![0xff; 64])]) {
            let (mut decoded, mut lazy) = (
                Cursor::seek(t, root, start.as_deref()).unwrap(),
                ForwardCursor::seek(t, root, start.as_deref()).unwrap(),
            );
            loop {
                let (a, b) = (decoded.next_entry(t).unwrap(), lazy.next_entry(t).unwrap());
                assert_eq!(a, b, "from {start:?}");
                if a.is_none() {
                    break;
                }
            }
            // The borrowed walk yields the same entries, and one that stops after n has
            // handed over exactly the first n.
            let mut want = Vec::new();
            let mut c = ForwardCursor::seek(t, root, start.as_deref()).unwrap();
            while let Some(e) = c.next_entry(t).unwrap() {
                want.push(e);
            }
            for stop in [usize::MAX, 0, 1, want.len() / 2] {
                let mut seen = Vec::new();
                ForwardCursor::visit(t, root, start.as_deref(), |e| {
                    seen.push(e.to_entry());
                    Ok(if seen.len() > stop {
                        std::ops::ControlFlow::Break(())
                    } else {
                        std::ops::ControlFlow::Continue(())
                    })
                })
                .unwrap();
                let n = want.len().min(stop.saturating_add(1));
                assert_eq!(seen[..], want[..n], "from {start:?}, stop {stop}");
            }
        }
        // Backward from the end, and from a bound inside the keys (inclusive or not), the
        // keys come in exactly the reverse order.
        let live = |c: &mut Cursor| {
            let mut keys = Vec::new();
            while let Some(e) = c.prev_entry(t).unwrap() {
                if !e.is_tombstone() {
                    keys.push(e.key);
                }
            }
            keys
        };
        let back = live(&mut Cursor::seek_back(t, root, None, false).unwrap());
        assert!(back.iter().eq(model.keys().rev()));
        if let Some(mid) = model.keys().nth(model.len() / 2) {
            for inclusive in [false, true] {
                let back = live(&mut Cursor::seek_back(t, root, Some(mid), inclusive).unwrap());
                let want = model
                    .keys()
                    .rev()
                    .filter(|k| *k < mid || (inclusive && *k == mid));
                assert!(back.iter().eq(want), "from {mid:?} inclusive {inclusive}");
            }
        }
    }

    /// xorshift: deterministic, seedable, no dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn random_batches_match_a_btreemap() {
        for seed in 1..=6u64 {
            eprintln!("seed {seed}");
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut t = MemTree {
                cap: 4080,
                ..Default::default()
            };
            let mut root = NO_PAGE;
            let mut model = BTreeMap::new();
            for round in 0..200 {
                let mut batch = BTreeMap::new();
                let n = 1 + rng.next() % 60;
                let deletes = round % 7 == 3;
                for _ in 0..n {
                    let k = format!("key{:06}", rng.next() % 3000).into_bytes();
                    let op = if deletes || rng.next().is_multiple_of(4) {
                        Op::Delete {
                            timestamp: round,
                            expire_at: 0,
                        }
                    } else {
                        let len = match rng.next() % 20 {
                            0 => 2000,
                            1 => 0,
                            _ => (rng.next() % 100) as usize,
                        };
                        Op::Put {
                            value: vec![b'a' + (round % 26) as u8; len],
                            timestamp: round,
                            expire_at: 0,
                        }
                    };
                    batch.insert(k, op);
                }
                let muts: Vec<Mutation> = batch
                    .into_iter()
                    .map(|(key, op)| {
                        match &op {
                            Op::Put { value, .. } => {
                                model.insert(key.clone(), value.clone());
                            }
                            _ => {
                                model.remove(&key);
                            }
                        }
                        Mutation { key, op }
                    })
                    .collect();
                let mut applied = Applied::default();
                root = apply(&mut t, root, &muts, &mut applied).unwrap();
                check(&t, root, &model);
            }
            for (k, v) in &model {
                let e = get(&t, root, k).unwrap().unwrap();
                assert!(e.is_live_at(0));
                if let ValueLoc::Inline(x) = e.value {
                    assert_eq!(&x, v);
                }
            }
            // Floor of keys between existing ones.
            for probe in 0..300 {
                let k = format!("key{:06}x", probe * 10).into_bytes();
                let want = model
                    .range(..=k.clone())
                    .next_back()
                    .map(|(k, _)| k.clone());
                // The tree's floor sees tombstones too; readers skip them (as the store does).
                let mut got = Cursor::floor(&t, root, &k).unwrap();
                while let Some(e) = got.take_if(|e| e.is_tombstone()) {
                    got = Cursor::before(&t, root, &e.key, false).unwrap();
                }
                assert_eq!(got.map(|e| e.key), want);
            }
            // Remove everything, tombstones included: the tree must shrink to nothing and
            // free every page.
            let mut c = Cursor::seek(&t, root, None).unwrap();
            let mut muts = Vec::new();
            while let Some(e) = c.next_entry(&t).unwrap() {
                muts.push(Mutation {
                    key: e.key,
                    op: Op::ForceDelete,
                });
            }
            root = apply(&mut t, root, &muts, &mut Applied::default()).unwrap();
            assert_eq!(root, NO_PAGE);
            assert!(t.pages.is_empty(), "leaked {} pages", t.pages.len());
            assert!(t.overflow.is_empty());
        }
    }

    /// Average leaf fill in bytes, from the root down.
    fn leaf_fill(t: &MemTree, root: PageId) -> f64 {
        let (mut used, mut leaves) = (0usize, 0usize);
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            match t.node(id).unwrap() {
                Node::Leaf(p) => {
                    used += p.len();
                    leaves += 1;
                }
                Node::Index(n) => stack.extend(n.children.iter().copied()),
            }
        }
        used as f64 / (leaves * t.cap) as f64
    }

    fn put_mut(key: Vec<u8>, len: usize) -> Mutation {
        Mutation {
            key,
            op: Op::Put {
                value: vec![b'v'; len],
                timestamp: 1_700_000_000_000,
                expire_at: 0,
            },
        }
    }

    /// A random key of the tests' key space.
    fn random_key(rng: &mut Rng) -> Vec<u8> {
        format!("key{:016}", rng.next() % 1_000_000_000).into_bytes()
    }

    /// A tree of 4080-byte pages built by `n` single random inserts of `value_len`-byte
    /// values (leaves about 66% full).
    fn random_single_inserts(rng: &mut Rng, n: usize, value_len: usize) -> (MemTree, PageId) {
        let mut t = MemTree {
            cap: 4080,
            ..Default::default()
        };
        let mut root = NO_PAGE;
        for _ in 0..n {
            let m = put_mut(random_key(rng), value_len);
            root = apply(&mut t, root, &[m], &mut Applied::default()).unwrap();
        }
        (t, root)
    }

    /// Leaves are cut by exact size: random inserts leave them about 70% full (a B-tree's
    /// ln 2), ascending inserts leave them full. The old worst-case estimate gave ~36%.
    /// `MemTree` read through kept top nodes, counting the pages it fetches.
    struct KeptTree<'a> {
        tree: &'a MemTree,
        top: TopNodes,
        fetched: std::cell::Cell<usize>,
    }

    impl TreeRead for KeptTree<'_> {
        fn node(&self, id: PageId) -> TreeResult<Node> {
            self.fetched.set(self.fetched.get() + 1);
            self.tree.node(id)
        }
        fn overflow(&self, first: PageId, pages: u32, len: u64) -> TreeResult<Vec<u8>> {
            self.tree.overflow(first, pages, len)
        }
        fn locate_page(&self, id: PageId) -> (String, u64) {
            self.tree.locate_page(id)
        }
        fn top_nodes(&self) -> Option<&TopNodes> {
            Some(&self.top)
        }
    }

    /// The depth of the tree at `root` (1: a single leaf).
    fn depth(t: &MemTree, mut id: PageId) -> usize {
        let mut d = 1;
        while let Node::Index(n) = t.node(id).unwrap() {
            id = n.children[0];
            d += 1;
        }
        d
    }

    /// On a four-level tree a get through kept top nodes fetches only its leaf once the
    /// root, its children and theirs are kept; with the third level bounded, the nodes
    /// past the bound are fetched and every key still reads right.
    #[test]
    fn kept_top_nodes_leave_a_get_one_fetch_on_a_four_level_tree() {
        // Small pages: a few entries a leaf, a few separators an index page.
        let mut t = MemTree {
            cap: 400,
            ..Default::default()
        };
        let mut root = NO_PAGE;
        let mut model = BTreeMap::new();
        for chunk in 0..8u32 {
            let batch: Vec<Mutation> = (chunk * 500..(chunk + 1) * 500)
                .map(|i| {
                    let k = format!("key{i:06}").into_bytes();
                    model.insert(k.clone(), vec![b'v'; 40]);
                    put_mut(k, 40)
                })
                .collect();
            root = apply(&mut t, root, &batch, &mut Applied::default()).unwrap();
        }
        assert_eq!(depth(&t, root), 4, "the test needs a four-level tree");
        for limit in [MAX_GRANDCHILDREN, 3] {
            let kept = KeptTree {
                tree: &t,
                top: TopNodes::with_grandchild_limit(limit),
                fetched: std::cell::Cell::new(0),
            };
            for pass in 0..2 {
                let mut over_one = 0;
                for (k, v) in &model {
                    kept.fetched.set(0);
                    let e = get(&kept, root, k).unwrap().expect("a key of the model");
                    assert_eq!(e.value, ValueLoc::Inline(v.clone()));
                    over_one += usize::from(kept.fetched.get() > 1);
                }
                if pass == 1 && limit == MAX_GRANDCHILDREN {
                    assert_eq!(over_one, 0, "gets fetched more than their leaf");
                }
                if pass == 1 && limit == 3 {
                    assert!(
                        over_one > 0,
                        "past the bound a get fetches the leaf's parent"
                    );
                }
            }
            let grandchildren = kept.top.kept_grandchildren();
            if limit == 3 {
                assert_eq!(grandchildren, 3, "the bound on kept grandchildren");
            } else {
                assert!(grandchildren > 3, "{grandchildren} grandchildren kept");
            }
        }
    }

    #[test]
    fn leaves_fill_by_exact_size() {
        let seed = 0x5eed_u64;
        eprintln!("seed {seed}");
        let (t, root) = random_single_inserts(&mut Rng(seed), 20_000, 100);
        let random = leaf_fill(&t, root);
        eprintln!("random inserts: leaves {random:.2} full");
        assert!(random > 0.6, "random inserts: leaves {random:.2} full");

        let mut t = MemTree {
            cap: 4080,
            ..Default::default()
        };
        let mut root = NO_PAGE;
        for i in 0..20_000u64 {
            let k = format!("key{i:016}").into_bytes();
            root = apply(&mut t, root, &[put_mut(k, 100)], &mut Applied::default()).unwrap();
        }
        let ascending = leaf_fill(&t, root);
        eprintln!("ascending inserts: leaves {ascending:.2} full");
        assert!(
            ascending > 0.9,
            "ascending inserts: leaves {ascending:.2} full"
        );
    }

    #[test]
    fn last_writer_wins_by_timestamp() {
        let mut t = MemTree {
            cap: 4080,
            ..Default::default()
        };
        let put = |v: &str, ts| Mutation {
            key: b"k".to_vec(),
            op: Op::Put {
                value: v.as_bytes().to_vec(),
                timestamp: ts,
                expire_at: 0,
            },
        };
        let mut root = apply(&mut t, NO_PAGE, &[put("new", 10)], &mut Applied::default()).unwrap();
        root = apply(&mut t, root, &[put("old", 5)], &mut Applied::default()).unwrap();
        assert_eq!(
            get(&t, root, b"k").unwrap().unwrap().value,
            ValueLoc::Inline(b"new".to_vec())
        );
        let del = Mutation {
            key: b"k".to_vec(),
            op: Op::Delete {
                timestamp: 9,
                expire_at: 0,
            },
        };
        root = apply(&mut t, root, &[del], &mut Applied::default()).unwrap();
        assert!(get(&t, root, b"k").unwrap().is_some());
        root = apply(&mut t, root, &[put("same", 10)], &mut Applied::default()).unwrap();
        assert_eq!(
            get(&t, root, b"k").unwrap().unwrap().value,
            ValueLoc::Inline(b"same".to_vec())
        );
    }

    /// A delete leaves a tombstone, on a present key and on an absent one, so a put with an
    /// older timestamp arriving later loses; a put at the delete's timestamp or newer wins,
    /// and a forced delete removes the tombstone entirely.
    #[test]
    fn regression_a_delete_leaves_a_tombstone_an_older_put_cannot_beat() {
        let mut t = MemTree {
            cap: 4080,
            ..Default::default()
        };
        let put = |k: &str, ts| Mutation {
            key: k.as_bytes().to_vec(),
            op: Op::Put {
                value: b"v".to_vec(),
                timestamp: ts,
                expire_at: 0,
            },
        };
        let del = |k: &str, ts| Mutation {
            key: k.as_bytes().to_vec(),
            op: Op::Delete {
                timestamp: ts,
                expire_at: 500,
            },
        };
        let mut applied = Applied::default();
        let mut root = apply(&mut t, NO_PAGE, &[put("a", 5)], &mut applied).unwrap();
        // "a" exists, "b" never did.
        let mut applied = Applied::default();
        root = apply(&mut t, root, &[del("a", 10), del("b", 10)], &mut applied).unwrap();
        assert_eq!(applied.removed, 1);
        assert_eq!(
            applied.expiry_added,
            vec![(b"a".to_vec(), 500), (b"b".to_vec(), 500)]
        );
        root = apply(
            &mut t,
            root,
            &[put("a", 9), put("b", 9)],
            &mut Applied::default(),
        )
        .unwrap();
        for k in [b"a", b"b"] {
            let e = get(&t, root, k).unwrap().unwrap();
            assert!(e.is_tombstone() && !e.is_live_at(0), "{e:?}");
            assert_eq!((e.timestamp, e.expire_at), (10, 500));
        }
        root = apply(&mut t, root, &[put("a", 10)], &mut Applied::default()).unwrap();
        assert!(get(&t, root, b"a").unwrap().unwrap().is_live_at(0));
        let mut applied = Applied::default();
        let purge = Mutation {
            key: b"b".to_vec(),
            op: Op::ForceDelete,
        };
        root = apply(&mut t, root, &[purge], &mut applied).unwrap();
        assert_eq!(
            applied.removed, 0,
            "purging a tombstone removes nothing visible"
        );
        assert_eq!(applied.expiry_removed, vec![(b"b".to_vec(), 500)]);
        assert!(get(&t, root, b"b").unwrap().is_none());
    }

    /// Rewriting leaves in place keeps their logical ids, so the index pages above them
    /// hold the same children and separators: they must not be written again (that would
    /// cost a page per level per commit and make every branch sharing them differ).
    #[test]
    fn regression_index_pages_are_rewritten_only_when_their_children_change() {
        let mut t = MemTree {
            cap: 4080,
            ..Default::default()
        };
        let put = |i: u32, tag: &str| Mutation {
            key: format!("key{i:06}").into_bytes(),
            op: Op::Put {
                value: format!("{tag}{i:06}").into_bytes(),
                timestamp: 1,
                expire_at: 0,
            },
        };
        let muts: Vec<Mutation> = (0..100_000).map(|i| put(i, "old")).collect();
        let root = apply(&mut t, NO_PAGE, &muts, &mut Applied::default()).unwrap();
        let mut depth = 1;
        let mut id = root;
        while let Node::Index(n) = t.node(id).unwrap() {
            depth += 1;
            id = n.children[0];
        }
        assert!(depth >= 3, "the tree has {depth} levels");
        // The first pass may merge a small node it touches with a neighbour (the bulk load
        // leaves the last node of each level small), which does change its parent.
        let same_size = |tag: &str| -> Vec<Mutation> {
            (0..20_000).step_by(997).map(|i| put(i, tag)).collect()
        };
        let root = apply(&mut t, root, &same_size("one"), &mut Applied::default()).unwrap();
        let before = t.index_writes;
        let r = apply(&mut t, root, &same_size("two"), &mut Applied::default()).unwrap();
        assert_eq!(r, root);
        assert_eq!(
            t.index_writes, before,
            "no child split, merged or went away"
        );
        // A split does change the parent.
        let grow: Vec<Mutation> = (100_000..101_000).map(|i| put(i, "new")).collect();
        apply(&mut t, root, &grow, &mut Applied::default()).unwrap();
        assert!(t.index_writes > before);
    }

    /// A large batch of random keys touches most leaves; a run of neighbouring leaves that
    /// all get mutations is cut anew across their old bounds, so they end full instead of
    /// each splitting into two part-full leaves (what a checkpoint of a full write buffer
    /// then rewrites). Half-full before (random single inserts), at least 90% after.
    #[test]
    fn large_random_batches_leave_the_leaves_they_touch_full() {
        let seed = 0x0b0e_u64;
        eprintln!("seed {seed}");
        let mut rng = Rng(seed);
        let (mut t, mut root) = random_single_inserts(&mut rng, 10_000, 100);
        let before = leaf_fill(&t, root);
        for _ in 0..4 {
            let mut batch: Vec<Mutation> = (0..10_000)
                .map(|_| put_mut(random_key(&mut rng), 100))
                .collect();
            batch.sort_by(|a, b| a.key.cmp(&b.key));
            batch.dedup_by(|a, b| a.key == b.key);
            root = apply(&mut t, root, &batch, &mut Applied::default()).unwrap();
        }
        let after = leaf_fill(&t, root);
        eprintln!("leaves {before:.2} full before the batches, {after:.2} after");
        assert!(after > 0.9, "leaves {after:.2} full after large batches");
    }

    /// Two neighbouring part-full leaves that each get a same-size update keep their
    /// bounds and ids: cut anew across their bound they would still take two leaves, so
    /// neither the bound nor their parent is rewritten.
    #[test]
    fn regression_neighbouring_leaves_updated_in_place_keep_their_parent() {
        let seed = 0x1eaf_u64;
        eprintln!("seed {seed}");
        let (mut t, root) = random_single_inserts(&mut Rng(seed), 2_000, 60);
        let Node::Index(top) = t.node(root).unwrap() else {
            panic!("2,000 entries fill more than one leaf")
        };
        let size = |id: PageId| match t.node(id).unwrap() {
            Node::Leaf(p) => p.len(),
            Node::Index(_) => panic!("a two-level tree"),
        };
        // Two part-full neighbours that do not fit in one leaf together, the left one the
        // smaller (cut anew, the two would be evened out: the bound would move).
        let i = (0..top.children.len() - 1)
            .find(|&i| {
                let (a, b) = (size(top.children[i]), size(top.children[i + 1]));
                a + 400 < b && a + b > t.cap
            })
            .expect("two such neighbours");
        let Node::Leaf(left) = t.node(top.children[i]).unwrap() else {
            unreachable!()
        };
        // The last key of the left leaf and the first key of the right one.
        let mut c = LeafView::new(&left).unwrap().cursor();
        let mut last = Vec::new();
        while c.advance().unwrap() {
            last = c.key().to_vec();
        }
        let first = top.key(i).unwrap().to_vec();
        let before = t.index_writes;
        let r = apply(
            &mut t,
            root,
            &[put_mut(last, 60), put_mut(first, 60)],
            &mut Applied::default(),
        )
        .unwrap();
        assert_eq!(r, root);
        assert_eq!(t.index_writes, before, "the parent was rewritten");
    }

    /// Lookups in ascending order through one cursor (`Cursor::get_in_leaf`, seeking anew
    /// only past the leaf it is on) find exactly what `get` finds, present keys and absent
    /// ones alike, in a tree of many leaves.
    #[test]
    fn lookups_in_key_order_through_one_cursor_match_get() {
        let mut t = MemTree {
            cap: 512,
            ..Default::default()
        };
        let muts: Vec<Mutation> = (0..3000u32)
            .step_by(2)
            .map(|i| put_mut(format!("k{i:05}").into_bytes(), 20))
            .collect();
        let root = apply(&mut t, NO_PAGE, &muts, &mut Applied::default()).unwrap();
        let mut rng = Rng(0x1ead);
        let mut probes: Vec<Vec<u8>> = (0..400)
            .map(|_| format!("k{:05}", rng.next() % 3100).into_bytes())
            .chain([b"a".to_vec(), b"z".to_vec()])
            .collect();
        probes.sort();
        let (mut cursor, mut seeks): (Option<Cursor>, usize) = (None, 0);
        for k in &probes {
            let got = match cursor.as_mut().and_then(|c| c.get_in_leaf(k)) {
                Some(found) => found,
                None => {
                    seeks += 1;
                    let mut c = Cursor::seek(&t, root, Some(k)).unwrap();
                    let found = c.get_in_leaf(k).flatten();
                    cursor = Some(c);
                    found
                }
            };
            assert_eq!(
                got,
                get(&t, root, k).unwrap(),
                "{}",
                String::from_utf8_lossy(k)
            );
        }
        assert!(
            seeks < probes.len() / 2,
            "{seeks} seeks for {} keys",
            probes.len()
        );
    }
}
