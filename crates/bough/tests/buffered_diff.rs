//! A diff, and the range of a cherry-pick or revert, read through the write buffers of both
//! sides (issue 16, "everything else sees buffered writes"): a diff checkpoints nothing and
//! syncs nothing, and it is the diff the same two branches give once both are checkpointed,
//! and the diff of a model of them.
//!
//! Randomized over seeds; `BOUGH_DIFF_SEED=N` replays one.

use std::collections::BTreeMap;

use bough::{DiffChange, DiffEntry, Options, PartitionHandle, Store};

fn store() -> Store {
    Store::open(
        Options::in_memory()
            .maintenance_interval_ms(0)
            .write_buffer_bytes(64 << 20),
    )
    .expect("open")
}

/// xorshift64*: enough to pick keys and operations, replayable from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A value unique to write number `n`: two separate writes never hold the same value, so
/// two sides hold the same entry exactly when they share the write. Every fifth is larger
/// than a page (an overflow value once checkpointed; inline while buffered).
fn value(n: u64) -> Vec<u8> {
    let len = if n.is_multiple_of(5) { 9_000 } else { 20 };
    let mut v = format!("w{n:08}-").into_bytes();
    v.resize(len, b'a' + (n % 26) as u8);
    v
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// `(key, kind, old value, new value)` of a diff, without timestamps.
type Shape = (Vec<u8>, &'static str, Option<Vec<u8>>, Option<Vec<u8>>);

fn shape(d: &[DiffEntry]) -> Vec<Shape> {
    d.iter()
        .map(|e| match &e.change {
            DiffChange::Added(v) => (e.key.clone(), "added", None, Some(v.value.clone())),
            DiffChange::Removed(v) => (e.key.clone(), "removed", Some(v.value.clone()), None),
            DiffChange::Changed { old, new } => (
                e.key.clone(),
                "changed",
                Some(old.value.clone()),
                Some(new.value.clone()),
            ),
        })
        .collect()
}

fn model_diff(a: &Model, b: &Model) -> Vec<Shape> {
    let mut keys: Vec<&Vec<u8>> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| match (a.get(k), b.get(k)) {
            (Some(x), None) => Some((k.clone(), "removed", Some(x.clone()), None)),
            (None, Some(y)) => Some((k.clone(), "added", None, Some(y.clone()))),
            (Some(x), Some(y)) if x != y => {
                Some((k.clone(), "changed", Some(x.clone()), Some(y.clone())))
            }
            _ => None,
        })
        .collect()
}

/// Random puts and deletes on `main` and `dev` (forked from a checkpointed `main`), with a
/// checkpoint of either now and then, so each side has a tree that diverged and a buffer.
fn scenario(seed: u64) -> (Store, PartitionHandle, Model, Model) {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let store = store();
    let part = store.partition("t", 0).expect("partition");
    let main = part.branch("main").expect("main");
    let mut writes = 0u64;
    let mut models = [Model::new(), Model::new()];
    for i in 0..400u64 {
        let k = format!("k{:04}", rng.below(600)).into_bytes();
        let v = value(writes);
        writes += 1;
        main.put_blocking(&k, &v).expect("put");
        models[0].insert(k, v);
        if i.is_multiple_of(97) {
            main.checkpoint_blocking().expect("checkpoint");
        }
    }
    let dev = part.create_branch("dev", "main").expect("fork");
    models[1] = models[0].clone();
    let branches = [main, dev];
    for _ in 0..300 {
        let side = rng.below(2) as usize;
        let k = format!("k{:04}", rng.below(700)).into_bytes();
        match rng.below(10) {
            0..=6 => {
                let v = value(writes);
                writes += 1;
                branches[side].put_blocking(&k, &v).expect("put");
                models[side].insert(k, v);
            }
            7 | 8 => {
                branches[side].delete_blocking(&k).expect("delete");
                models[side].remove(&k);
            }
            _ => branches[side].checkpoint_blocking().expect("checkpoint"),
        }
    }
    // The last writes of both sides stay buffered.
    for (side, b) in branches.iter().enumerate() {
        let k = format!("tail{side}").into_bytes();
        let v = value(writes);
        writes += 1;
        b.put_blocking(&k, &v).expect("put");
        models[side].insert(k, v);
    }
    let [m, d] = models;
    (store, part, m, d)
}

fn seeds() -> Vec<u64> {
    match std::env::var("BOUGH_DIFF_SEED") {
        Ok(s) => vec![s.parse().expect("BOUGH_DIFF_SEED is a number")],
        Err(_) => (1..=12).collect(),
    }
}

#[test]
fn a_diff_of_buffered_branches_checkpoints_nothing_and_is_the_checkpointed_diff() {
    for seed in seeds() {
        eprintln!("seed {seed} (replay: BOUGH_DIFF_SEED={seed})");
        let (store, part, main_model, dev_model) = scenario(seed);
        let buffered = store.write_buffer_usage().bytes;
        assert!(
            buffered > 0,
            "seed {seed}: both sides end with buffered writes"
        );
        let before = store.io_stats();
        let diff = part.diff("main", "dev").expect("diff");
        let io = store.io_stats().since(&before);
        assert_eq!(
            store.write_buffer_usage().bytes,
            buffered,
            "seed {seed}: the diff checkpointed a buffer"
        );
        assert_eq!(io.syncs + io.dir_syncs, 0, "seed {seed}: the diff synced");
        assert_eq!(
            shape(&diff),
            model_diff(&main_model, &dev_model),
            "seed {seed}: the diff is the model's"
        );
        let back = part.diff("dev", "main").expect("diff back");
        assert_eq!(
            shape(&back),
            model_diff(&dev_model, &main_model),
            "seed {seed}"
        );

        for b in ["main", "dev"] {
            part.branch(b)
                .expect("branch")
                .checkpoint_blocking()
                .expect("checkpoint");
        }
        assert_eq!(store.write_buffer_usage().bytes, 0, "seed {seed}");
        let tree_diff = part.diff("main", "dev").expect("diff of the trees");
        assert_eq!(
            diff, tree_diff,
            "seed {seed}: the same diff, timestamps and deletes included, once both are checkpointed"
        );
    }
}

#[test]
fn a_buffered_write_of_a_key_the_tree_holds_as_an_overflow_value_differs_only_when_it_changed() {
    let store = store();
    let part = store.partition("t", 0).expect("partition");
    let main = part.branch("main").expect("main");
    let big = value(0);
    main.put_blocking("big", &big).expect("put");
    main.put_blocking("small", "s").expect("put");
    main.checkpoint_blocking().expect("checkpoint");
    let dev = part.create_branch("dev", "main").expect("fork");
    // Buffered on dev only: the overflow value on main's side is read and compared.
    dev.put_blocking("big", value(5)).expect("put");
    dev.delete_blocking("small").expect("delete");
    let diff = part.diff("main", "dev").expect("diff");
    assert_eq!(diff.len(), 2, "{diff:?}");
    assert!(matches!(&diff[0].change, DiffChange::Changed { old, new }
        if old.value == big && new.value == value(5)));
    assert!(matches!(&diff[1].change, DiffChange::Removed(v) if v.value == b"s"));
    assert!(
        diff[1].deleted_at.is_some(),
        "a delete keeps its tombstone's time"
    );
    // An archive of the buffered state, diffed against the branch: nothing changed.
    let archive = dev.archive().expect("archive");
    assert!(part.diff_archive(&archive, "dev").expect("diff").is_empty());
    dev.put_blocking("later", "x").expect("put");
    let since = part.diff_archive(&archive, "dev").expect("diff");
    assert_eq!(since.len(), 1, "{since:?}");
    assert_eq!(since[0].key, b"later");
}

#[test]
fn a_cherry_pick_and_a_revert_read_a_buffered_branch_through_its_buffer() {
    use bough::{PickOptions, StateRef};
    let store = store();
    let part = store.partition("t", 0).expect("partition");
    let main = part.branch("main").expect("main");
    main.put_blocking("base", "1").expect("put");
    let dev = part.create_branch("dev", "main").expect("fork");
    let start = dev.archive().expect("archive");
    for k in ["a", "b", "c"] {
        dev.put_blocking(k, format!("dev-{k}")).expect("put");
    }
    dev.put_blocking("big", value(0)).expect("put");
    dev.delete_blocking("base").expect("delete");
    // Only dev buffers anything now (the fork and the archive checkpointed the rest).
    let dev_buffered = store.write_buffer_usage().bytes;
    assert!(dev_buffered > 0);
    let dev_state = StateRef::Branch("dev".into());
    let report = part
        .cherry_pick(
            &StateRef::Archive(start.clone()),
            &dev_state,
            "main",
            PickOptions::default(),
        )
        .expect("cherry-pick");
    assert!(
        report.committed && report.conflicts.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.applied, 5);
    assert!(
        store.write_buffer_usage().bytes > dev_buffered,
        "dev's buffer was left alone (main now buffers the picked commit beside it)"
    );
    for k in ["a", "b", "c"] {
        assert_eq!(
            main.get_blocking(k).expect("get").expect(k).value,
            format!("dev-{k}").into_bytes()
        );
    }
    assert_eq!(
        main.get_blocking("big").expect("get").expect("big").value,
        value(0)
    );
    assert!(main.get_blocking("base").expect("get").is_none());
    assert!(part.diff("main", "dev").expect("diff").is_empty());
    // And back: the revert of the same range on main restores what the archive held.
    let report = part
        .revert(
            &StateRef::Archive(start),
            &dev_state,
            "main",
            PickOptions::default(),
        )
        .expect("revert");
    assert!(
        report.committed && report.conflicts.is_empty(),
        "{report:?}"
    );
    assert_eq!(
        main.get_blocking("base").expect("get").expect("base").value,
        b"1"
    );
    for k in ["a", "b", "c", "big"] {
        assert!(main.get_blocking(k).expect("get").is_none(), "{k} reverted");
    }
}
