//! Diff against a model: random divergent histories on two heads forked from one state.

use std::collections::BTreeMap;
use std::sync::Arc;

use bough_io::{MemoryStorage, Storage};
use bough_names::BranchName;
use bough_tree::btree::{Mutation, Op};
use bough_tree::cache::PageCache;
use bough_tree::diff::{Change, diff, visible_at};
use bough_tree::files::FileTable;
use bough_tree::head::{Head, HeadConfig};
use bough_tree::page::leaf::ValueLoc;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn cfg() -> HeadConfig {
    HeadConfig {
        page_size: 4096,
        file_pages: 64,
        preallocate: 0,
        checkpoint_chunks: 3,
        manifest_rewrite_bytes: 1 << 20,
        file_per_commit: false,
        ..HeadConfig::default()
    }
}

type Model = BTreeMap<Vec<u8>, (Vec<u8>, u64)>;

fn random_batch(rng: &mut Rng, round: u64, keys: u64, model: &mut Model) -> Vec<Mutation> {
    let mut batch = BTreeMap::new();
    for _ in 0..(1 + rng.next() % 30) {
        let k = format!("key{:05}", rng.next() % keys).into_bytes();
        let op = if rng.next().is_multiple_of(4) {
            Op::Delete {
                timestamp: round,
                expire_at: 0,
            }
        } else {
            let len = if rng.next().is_multiple_of(25) {
                5000
            } else {
                (rng.next() % 40) as usize
            };
            Op::Put {
                value: vec![(round % 251) as u8; len],
                timestamp: round,
                expire_at: 0,
            }
        };
        batch.insert(k, op);
    }
    batch
        .into_iter()
        .map(|(key, op)| {
            match &op {
                Op::Put {
                    value, timestamp, ..
                } => {
                    model.insert(key.clone(), (value.clone(), *timestamp));
                }
                _ => {
                    model.remove(&key);
                }
            }
            Mutation { key, op }
        })
        .collect()
}

fn model_diff(a: &Model, b: &Model) -> Vec<(Vec<u8>, &'static str)> {
    let mut out = Vec::new();
    for (k, v) in a {
        match b.get(k) {
            None => out.push((k.clone(), "removed")),
            Some(w) if w != v => out.push((k.clone(), "changed")),
            _ => {}
        }
    }
    for k in b.keys() {
        if !a.contains_key(k) {
            out.push((k.clone(), "added"));
        }
    }
    out.sort();
    out
}

#[test]
fn diff_matches_a_model_over_random_histories() {
    for seed in 1..=4u64 {
        eprintln!("seed {seed}");
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mem = MemoryStorage::new();
        let storage: Arc<dyn Storage> = Arc::new(mem);
        storage.create_dir("t.0").unwrap();
        let files = Arc::new(FileTable::new(
            storage,
            "t.0".into(),
            4096,
            Arc::new(PageCache::new(1 << 22)),
            true,
        ));
        let main = BranchName::main();
        let mut a = Head::create(files.clone(), cfg(), main.clone(), 0, None, Vec::new()).unwrap();
        let mut ma = Model::new();
        for round in 1..40 {
            let m = random_batch(&mut rng, round, 3000, &mut ma);
            a.commit(&m, round).unwrap();
        }
        let fork = a.fork_point(0).unwrap();
        let fb = BranchName::new("feature").unwrap();
        let mut b = Head::create(files.clone(), cfg(), fb, 0, Some(&fork), Vec::new()).unwrap();
        let mut mb = ma.clone();
        for round in 40..60 {
            let m = random_batch(&mut rng, round, 3000, &mut ma);
            a.commit(&m, round).unwrap();
            let m = random_batch(&mut rng, round + 1000, 3000, &mut mb);
            b.commit(&m, round + 1000).unwrap();
        }
        let (changes, stats) = diff(&a.snapshot(), &b.snapshot()).unwrap();
        // Deletes leave tombstones, which differ physically but are absent to readers.
        let changes = visible_at(changes, 0);
        let got: Vec<(Vec<u8>, &str)> = changes
            .iter()
            .map(|(k, c)| {
                (
                    k.clone(),
                    match c {
                        Change::Added(_) => "added",
                        Change::Removed(_) => "removed",
                        Change::Changed { .. } => "changed",
                    },
                )
            })
            .collect();
        assert_eq!(got, model_diff(&ma, &mb), "seed {seed}");
        for (k, c) in &changes {
            if let Change::Changed { new, .. } | Change::Added(new) = c {
                let v = match &new.value {
                    ValueLoc::Inline(v) => v.clone(),
                    ValueLoc::Overflow { first, pages, len } => {
                        b.snapshot().read_overflow(*first, *pages, *len).unwrap()
                    }
                    ValueLoc::Tombstone => panic!("visible_at left a tombstone at {k:?}"),
                };
                assert_eq!(v, mb[k].0);
            }
        }
        eprintln!("seed {seed}: {} changes, {stats:?}", changes.len());
        // A snapshot against itself has no differences and reads nothing but the roots.
        let (none, s) = diff(&b.snapshot(), &b.snapshot()).unwrap();
        assert!(none.is_empty());
        assert_eq!(s.leaves, 0);
    }
}
