//! Diff, merge, reset and re-home through the public API, checked against per-branch models.

use std::collections::BTreeMap;

use bough::{
    Backend, ConflictPolicy, DiffChange, MergeOptions, Options, PutOptions, ScanOptions, Store,
    WriteBatch,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Self {
        eprintln!("seed {seed}");
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn store() -> (Store, tempfile::TempDir) {
    reopen(tempfile::tempdir().unwrap())
}

/// Opens (again) the store in `dir`.
fn reopen(dir: tempfile::TempDir) -> (Store, tempfile::TempDir) {
    let s = Store::open(
        Options::new(dir.path())
            // Bytes written per merge are measured: no write buffer in front of the tree.
            .write_buffer_bytes(0)
            .backend(Backend::Pread)
            .data_file_size(64 * 4096)
            .maintenance_interval_ms(0),
    )
    .unwrap();
    (s, dir)
}

fn all(b: &bough::Branch) -> Model {
    b.scan_blocking(&ScanOptions::default())
        .unwrap()
        .entries
        .into_iter()
        .map(|kv| (kv.key, kv.value.value))
        .collect()
}

/// Random writes on keys `key<prefix>NNNN`; `ts` keeps timestamps increasing.
fn scribble(
    b: &bough::Branch,
    m: &mut Model,
    rng: &mut Rng,
    prefix: &str,
    keys: u64,
    n: usize,
    ts: &mut u64,
) {
    let mut batch = WriteBatch::new();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..n {
        let k = format!("key{prefix}{:04}", rng.next() % keys).into_bytes();
        if !seen.insert(k.clone()) {
            continue;
        }
        *ts += 1;
        if rng.next().is_multiple_of(5) {
            batch.delete_at(k.clone(), *ts);
            m.remove(&k);
        } else {
            let len = if rng.next().is_multiple_of(20) {
                6000
            } else {
                10
            };
            let v = vec![(rng.next() % 250) as u8 + 1; len];
            batch.put_with(
                k.clone(),
                v.clone(),
                PutOptions {
                    timestamp: Some(*ts),
                    ..Default::default()
                },
            );
            m.insert(k, v);
        }
    }
    b.write_blocking(batch).unwrap();
}

#[test]
fn fast_forward_adopts_the_source_by_reference() {
    let (s, _d) = store();
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut rng = Rng::new(1);
    let (mut m, mut ts) = (Model::new(), 0);
    scribble(&main, &mut m, &mut rng, "", 2000, 2000, &mut ts);
    let f = p.create_branch("feature", "main").unwrap();
    let mut mf = m.clone();
    for _ in 0..5 {
        scribble(&f, &mut mf, &mut rng, "", 2000, 300, &mut ts);
    }
    let before = s.io_stats();
    let r = p.merge("feature", "main", MergeOptions::default()).unwrap();
    let written = s.io_stats().since(&before).write_bytes;
    assert!(r.fast_forward && r.committed, "{r:?}");
    // A metadata commit: the checkpoint of the source plus one manifest record.
    assert!(written < 256 * 1024, "fast-forward wrote {written} bytes");
    assert_eq!(all(&main), mf);
    // Writes after the fast-forward land in main's own new files; feature is unaffected.
    scribble(&main, &mut mf.clone(), &mut rng, "", 2000, 50, &mut ts);
    assert_eq!(all(&f), mf);
}

#[test]
fn three_way_merges_match_the_model() {
    for seed in 1..=3 {
        let (s, _d) = store();
        let p = s.partition("t", 0).unwrap();
        let main = p.branch("main").unwrap();
        let mut rng = Rng::new(seed);
        let (mut mm, mut ts) = (Model::new(), 0);
        scribble(&main, &mut mm, &mut rng, "", 3000, 3000, &mut ts);
        let f = p.create_branch("feature", "main").unwrap();
        let mut mf = mm.clone();
        let base = mm.clone();
        // Disjoint key spaces after the fork: no conflicts.
        for _ in 0..4 {
            scribble(&main, &mut mm, &mut rng, "a", 500, 200, &mut ts);
            scribble(&f, &mut mf, &mut rng, "b", 500, 200, &mut ts);
        }
        let d = p.diff("main", "feature").unwrap();
        let mut expect_diff = 0;
        for k in mm
            .keys()
            .chain(mf.keys())
            .collect::<std::collections::BTreeSet<_>>()
        {
            if mm.get(k) != mf.get(k) {
                expect_diff += 1;
            }
        }
        assert_eq!(d.len(), expect_diff, "seed {seed}");
        let r = p.merge("feature", "main", MergeOptions::default()).unwrap();
        assert!(
            !r.fast_forward && r.committed && r.conflicts.is_empty(),
            "{r:?}"
        );
        // Expected: base + main's changes + feature's changes.
        let mut want = mm.clone();
        for (k, v) in &mf {
            if base.get(k) != Some(v) {
                want.insert(k.clone(), v.clone());
            }
        }
        for k in base.keys() {
            if !mf.contains_key(k) {
                want.remove(k);
            }
        }
        assert_eq!(all(&main), want, "seed {seed}");
        assert_eq!(all(&f), mf);
        // Repeated merges behave like git: the base moved, so merging again changes only
        // what feature did since.
        scribble(&f, &mut mf, &mut rng, "b", 500, 100, &mut ts);
        let r2 = p.merge("feature", "main", MergeOptions::default()).unwrap();
        assert!(r2.conflicts.is_empty(), "{r2:?}");
        let mut want2 = want.clone();
        for k in mf.keys().chain(want.keys()).cloned().collect::<Vec<_>>() {
            if k.starts_with(b"keyb") {
                match mf.get(&k) {
                    Some(v) => want2.insert(k, v.clone()),
                    None => want2.remove(&k),
                };
            }
        }
        assert_eq!(all(&main), want2, "seed {seed} second merge");
    }
}

#[test]
fn conflicts_follow_the_policy_and_dry_run_changes_nothing() {
    let (s, _d) = store();
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let put = |b: &bough::Branch, k: &str, v: &str, ts: u64| {
        let mut w = WriteBatch::new();
        w.put_with(
            k,
            v,
            PutOptions {
                timestamp: Some(ts),
                ..Default::default()
            },
        );
        b.write_blocking(w).unwrap();
    };
    put(&main, "x", "base", 1);
    put(&main, "y", "base", 1);
    let f = p.create_branch("feature", "main").unwrap();
    put(&main, "x", "ours", 5);
    put(&f, "x", "theirs", 3);
    put(&f, "y", "theirs", 4);
    let dry = p
        .merge(
            "feature",
            "main",
            MergeOptions {
                dry_run: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(dry.conflicts.len(), 1);
    assert!(!dry.committed);
    let failed = p.merge("feature", "main", MergeOptions::default()).unwrap();
    assert_eq!(failed.conflicts.len(), 1);
    assert_eq!(failed.conflicts[0].key, b"x");
    assert!(!failed.committed);
    assert_eq!(main.get_blocking(b"y").unwrap().unwrap().value, b"base");
    let newest = p
        .merge(
            "feature",
            "main",
            MergeOptions {
                policy: ConflictPolicy::NewestTimestamp,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(newest.committed && newest.resolved == 1);
    assert_eq!(main.get_blocking(b"x").unwrap().unwrap().value, b"ours");
    assert_eq!(main.get_blocking(b"y").unwrap().unwrap().value, b"theirs");
    // Theirs on a fresh conflict.
    put(&main, "z", "ours", 10);
    put(&f, "z", "theirs", 9);
    let theirs = p
        .merge(
            "feature",
            "main",
            MergeOptions {
                policy: ConflictPolicy::Theirs,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(theirs.committed, "{theirs:?}");
    assert_eq!(main.get_blocking(b"z").unwrap().unwrap().value, b"theirs");
    let d = p.diff("main", "feature").unwrap();
    assert!(
        d.iter()
            .all(|e| !matches!(e.change, DiffChange::Changed { .. }) || e.key == b"x"),
        "{d:?}"
    );
}

#[test]
fn rehome_then_delete_frees_every_file_of_the_source() {
    let (s, dir) = store();
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut rng = Rng::new(7);
    let (mut m, mut ts) = (Model::new(), 0);
    scribble(&main, &mut m, &mut rng, "", 2000, 2000, &mut ts);
    let feature = p.create_branch("feature", "main").unwrap();
    let mut mf = m.clone();
    scribble(&feature, &mut mf, &mut rng, "", 2000, 500, &mut ts);
    let child = p.create_branch("child", "feature").unwrap();
    let mut mc = mf.clone();
    scribble(&child, &mut mc, &mut rng, "", 2000, 100, &mut ts);
    let r = child.rehome().unwrap();
    assert!(r.files_rehomed > 0 && r.pages_copied > 0, "{r:?}");
    p.delete_branch("feature").unwrap();
    s.gc().unwrap();
    let left: Vec<String> = std::fs::read_dir(dir.path().join("t.0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("data_") && n.contains("_feature_"))
        .collect();
    assert!(left.is_empty(), "feature's files survived: {left:?}");
    assert_eq!(all(&child), mc);
    assert_eq!(all(&main), m);
}

#[test]
fn reset_to_parent_refreshes_a_child() {
    let (s, _d) = store();
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut rng = Rng::new(9);
    let (mut m, mut ts) = (Model::new(), 0);
    scribble(&main, &mut m, &mut rng, "", 500, 500, &mut ts);
    let f = p.create_branch("feature", "main").unwrap();
    scribble(&f, &mut m.clone(), &mut rng, "", 500, 100, &mut ts);
    scribble(&main, &mut m, &mut rng, "", 500, 100, &mut ts);
    p.reset_branch("feature", "main").unwrap();
    assert_eq!(all(&f), m);
    assert!(p.diff("main", "feature").unwrap().is_empty());
}

#[test]
fn diff_against_an_archive() {
    let (s, _d) = store();
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut rng = Rng::new(11);
    let (mut m, mut ts) = (Model::new(), 0);
    scribble(&main, &mut m, &mut rng, "", 1000, 800, &mut ts);
    let archive = main.archive().unwrap();
    let before = m.clone();
    scribble(&main, &mut m, &mut rng, "", 1000, 200, &mut ts);
    let d = p.diff_archive(&archive, "main").unwrap();
    let want: Vec<Vec<u8>> = before
        .keys()
        .chain(m.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| before.get(*k) != m.get(*k))
        .cloned()
        .collect();
    assert_eq!(d.into_iter().map(|e| e.key).collect::<Vec<_>>(), want);
}

#[test]
fn one_validation_path_for_writes_and_direct_commits() {
    // The facade's write and a commit straight on a branch head run the same check.
    let (s, _d) = store();
    let main = s.partition("t", 0).unwrap().branch("main").unwrap();
    let mut b = WriteBatch::new();
    b.put(vec![b'k'; 513], "v");
    let via_write = main.write_blocking(b).unwrap_err().to_string();
    let m = bough_tree::btree::Mutation {
        key: vec![b'k'; 513],
        op: bough_tree::btree::Op::Replace {
            value: b"v".to_vec(),
            timestamp: 1,
            expire_at: 0,
        },
    };
    let via_tree = m.check(4096).unwrap_err();
    assert!(via_write.contains(&via_tree), "{via_write} vs {via_tree}");
}

/// Data files of `branch` in the partition directory.
fn files_of(dir: &std::path::Path, branch: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join("t.0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("data_") && n.contains(&format!("_{branch}_")))
        .collect();
    v.sort();
    v
}

/// A three-way merge records the source's state as `main`'s merge base with `feature`. Once
/// `feature` is deleted nothing can use that base, but while `main`'s manifest records it,
/// GC must keep every page it references — `feature`'s files, forever. Deleting `feature`
/// drops it, so GC frees them; and a new `feature` (same name, other history) merging into
/// `main` must not be diffed against the old branch's state.
#[test]
fn regression_deleting_a_branch_unpins_the_merge_bases_naming_it() {
    let (s, dir) = store();
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut rng = Rng::new(21);
    let (mut mm, mut ts) = (Model::new(), 0);
    scribble(&main, &mut mm, &mut rng, "", 2000, 2000, &mut ts);
    let dev = p.create_branch("dev", "main").unwrap();
    let f = p.create_branch("feature", "main").unwrap();
    let base = mm.clone();
    let mut mf = mm.clone();
    for _ in 0..4 {
        scribble(&f, &mut mf, &mut rng, "f", 800, 400, &mut ts);
    }
    scribble(&main, &mut mm, &mut rng, "m", 100, 50, &mut ts);
    let r = p.merge("feature", "main", MergeOptions::default()).unwrap();
    assert!(r.committed && !r.fast_forward, "{r:?}");
    for (k, v) in &mf {
        if base.get(k) != Some(v) {
            mm.insert(k.clone(), v.clone());
        }
    }
    assert_eq!(all(&main), mm);
    assert!(!files_of(dir.path(), "feature").is_empty());
    drop(f);
    p.delete_branch("feature").unwrap();
    let report = s.gc().unwrap();
    let left = files_of(dir.path(), "feature");
    assert!(
        left.is_empty(),
        "feature's files survived its deletion: {left:?}; {report:?}"
    );
    assert_eq!(all(&main), mm);

    // `feature` again, from `dev`: `main` shares no recorded base with it, only the fork
    // tree (`feature` ← `dev` ← `main`): the merge base is the state of `main` `dev` forked
    // from, which `dev` records — never the old `feature`'s state.
    let mut md = base.clone();
    scribble(&dev, &mut md, &mut rng, "d", 100, 50, &mut ts);
    let f2 = p.create_branch("feature", "dev").unwrap();
    scribble(&f2, &mut md, &mut rng, "n", 100, 50, &mut ts);
    let r = p.merge("feature", "main", MergeOptions::default()).unwrap();
    let used = r.base.clone().expect("a base");
    assert_eq!(
        (used.branch.as_str(), used.holder.as_str()),
        ("main", "dev"),
        "{r:?}"
    );
    let mut want = mm.clone();
    for (k, v) in &md {
        if base.get(k) != Some(v) {
            want.insert(k.clone(), v.clone());
        }
    }
    for k in base.keys() {
        if !md.contains_key(k) {
            want.remove(k);
        }
    }
    assert_eq!(all(&main), want);
}

/// A crash right after the tombstone of `feature` (simulated by deleting through the
/// catalog alone, which drops no merge base) leaves `main`'s base naming it. The first open
/// of `main` drops it, before the name is reused or GC runs.
#[test]
fn regression_a_base_left_by_a_crash_during_deletion_goes_at_the_next_open() {
    let (s, dir) = store();
    {
        let p = s.partition("t", 0).unwrap();
        let main = p.branch("main").unwrap();
        let mut rng = Rng::new(23);
        let (mut m, mut ts) = (Model::new(), 0);
        scribble(&main, &mut m, &mut rng, "", 1000, 1000, &mut ts);
        let f = p.create_branch("feature", "main").unwrap();
        let mut mf = m.clone();
        for _ in 0..3 {
            scribble(&f, &mut mf, &mut rng, "f", 800, 400, &mut ts);
        }
        scribble(&main, &mut m, &mut rng, "m", 100, 20, &mut ts);
        p.merge("feature", "main", MergeOptions::default()).unwrap();
    }
    s.close().unwrap();
    drop(s);
    {
        let storage = bough::io::open_local(dir.path(), bough::io::BackendChoice::Pread).unwrap();
        let part = bough_catalog::Partition::open(
            storage,
            bough_names::PartitionDir::new(bough_names::TableName::new("t").unwrap(), 0),
            bough_tree::head::HeadConfig {
                page_size: 4096,
                file_pages: 64,
                preallocate: 64 * 4096,
                ..bough_tree::head::HeadConfig::default()
            },
            std::sync::Arc::new(bough_tree::cache::PageCache::new(1 << 20)),
            true,
            false,
        )
        .unwrap();
        part.delete_branch(&bough_names::BranchName::new("feature").unwrap())
            .unwrap();
    }
    let (s, _dir) = reopen(dir);
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let before = all(&main);
    s.gc().unwrap();
    let left = files_of(_dir.path(), "feature");
    assert!(left.is_empty(), "feature's files survived: {left:?}");
    assert_eq!(all(&main), before);
    p.create_branch("feature", "main").unwrap();
    let r = p.merge("feature", "main", MergeOptions::default()).unwrap();
    assert!(r.fast_forward && r.applied == 0, "{r:?}");
}

/// Every branch that borrows `feature`'s pages — a child and a grandchild forked from it,
/// and `main`, which adopted it by a fast-forward — is re-homed; then deleting `feature`
/// and collecting frees all of `feature`'s files, and every branch reads as before.
#[test]
fn rehome_every_borrower_then_delete_frees_all_of_features_files() {
    let (s, dir) = store();
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut rng = Rng::new(25);
    let (mut m, mut ts) = (Model::new(), 0);
    scribble(&main, &mut m, &mut rng, "", 1500, 1500, &mut ts);
    let feature = p.create_branch("feature", "main").unwrap();
    let mut mf = m.clone();
    for _ in 0..3 {
        scribble(&feature, &mut mf, &mut rng, "", 1500, 400, &mut ts);
    }
    let child = p.create_branch("child", "feature").unwrap();
    let mut mc = mf.clone();
    scribble(&child, &mut mc, &mut rng, "c", 200, 100, &mut ts);
    let grandchild = p.create_branch("grandchild", "child").unwrap();
    let mut mg = mc.clone();
    scribble(&grandchild, &mut mg, &mut rng, "g", 200, 100, &mut ts);
    let r = p.merge("feature", "main", MergeOptions::default()).unwrap();
    assert!(r.fast_forward, "{r:?}");
    let m = mf.clone();
    // Re-homing the borrowers leaves their contents exactly as they were.
    for (b, want) in [(&main, &m), (&child, &mc), (&grandchild, &mg)] {
        let r = b.rehome().unwrap();
        assert!(r.files_rehomed > 0 && r.pages_copied > 0, "{r:?}");
        assert_eq!(&all(b), want);
    }
    drop(feature);
    p.delete_branch("feature").unwrap();
    let report = s.gc().unwrap();
    let left = files_of(dir.path(), "feature");
    assert!(
        left.is_empty(),
        "feature's files survived: {left:?}; {report:?}"
    );
    for (b, want) in [(&main, &m), (&child, &mc), (&grandchild, &mg)] {
        assert_eq!(&all(b), want, "{}", b.label());
    }
    // And after a reopen, from disk.
    drop((main, child, grandchild, p));
    s.close().unwrap();
    let (s, _dir) = reopen(dir);
    let p = s.partition("t", 0).unwrap();
    for (name, want) in [("main", &m), ("child", &mc), ("grandchild", &mg)] {
        assert_eq!(&all(&p.branch(name).unwrap()), want, "{name} after reopen");
    }
}

/// An entry that has expired is absent in diffs and merges, as in reads, whether or not
/// expiry has deleted it yet. Expiry ran on `main` and not on `feature`: the diff showed
/// the expired key, and a merge of `feature`'s later change to it was a conflict (a delete
/// against a change) although neither side had the key visible at the base's expiry.
#[test]
fn regression_expired_entries_are_absent_in_diffs_and_merges() {
    let dir = tempfile::tempdir().unwrap();
    let clock = bough::ManualClock::new(1_000_000);
    let s = Store::builder(
        Options::new(dir.path())
            .backend(Backend::Pread)
            .maintenance_interval_ms(0),
    )
    .clock(std::sync::Arc::new(clock.clone()))
    .open()
    .unwrap();
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let put = |b: &bough::Branch, k: &str, v: &str, ts: u64, expire_at: Option<u64>| {
        let mut w = WriteBatch::new();
        w.put_with(
            k,
            v,
            PutOptions {
                timestamp: Some(ts),
                expire_at,
                ttl_ms: None,
            },
        );
        b.write_blocking(w).unwrap();
    };
    put(&main, "a", "short-lived", 1, Some(1_000_010));
    put(&main, "b", "base", 1, None);
    let f = p.create_branch("feature", "main").unwrap();
    clock.advance(20);
    main.expire_now().unwrap();
    assert!(p.diff("main", "feature").unwrap().is_empty());
    put(&main, "d", "ours", 2, None);
    put(&f, "a", "again", 3, None);
    put(&f, "c", "gone soon", 4, Some(1_000_025));
    clock.advance(10);
    let d = p.diff("main", "feature").unwrap();
    let keys: Vec<&[u8]> = d.iter().map(|e| e.key.as_slice()).collect();
    assert_eq!(keys, [&b"a"[..], b"d"], "{d:?}");
    let r = p.merge("feature", "main", MergeOptions::default()).unwrap();
    assert!(
        r.committed && r.conflicts.is_empty() && r.applied == 1,
        "{r:?}"
    );
    assert_eq!(main.get_blocking(b"a").unwrap().unwrap().value, b"again");
    assert!(main.get_blocking(b"c").unwrap().is_none());
    assert_eq!(all(&main).len(), 3);
}

/// Both sides setting a key to the same large value (stored in overflow pages, so in
/// different pages on each side) changed it the same way: no conflict.
#[test]
fn regression_the_same_overflow_value_on_both_sides_is_no_conflict() {
    let (s, _d) = store();
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut w = WriteBatch::new();
    w.put_with(
        "x",
        "base",
        PutOptions {
            timestamp: Some(1),
            ..Default::default()
        },
    );
    main.write_blocking(w).unwrap();
    let f = p.create_branch("feature", "main").unwrap();
    // Another large value first on `main`, so the two copies of `x` do not even get the
    // same logical page ids.
    let mut w = WriteBatch::new();
    w.put("a", vec![1u8; 5000]);
    main.write_blocking(w).unwrap();
    let big = vec![7u8; 9000];
    for b in [&main, &f] {
        let mut w = WriteBatch::new();
        w.put_with(
            "x",
            big.clone(),
            PutOptions {
                timestamp: Some(5),
                ..Default::default()
            },
        );
        b.write_blocking(w).unwrap();
    }
    let mut w = WriteBatch::new();
    w.put("y", "ours");
    main.write_blocking(w).unwrap();
    let r = p.merge("feature", "main", MergeOptions::default()).unwrap();
    assert!(
        r.committed && r.conflicts.is_empty() && r.applied == 0,
        "{r:?}"
    );
    assert!(main.get_blocking(b"x").unwrap().unwrap().value == big);
    drop(s);
}

/// Issue 19 ("Messages that mislead"): after a re-home the merge refusal said "neither was
/// forked from or merged with the other", which is false for a fork. It now names the state
/// the merge needed and what released it (issue 18: the re-home of the child holding it).
/// A branch made from an archive of `main` is related to `main`'s children through `main`.
#[test]
fn regression_merge_refusal_after_a_rehome_tells_the_truth() {
    let (s, _d) = store();
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut rng = Rng::new(11);
    let (mut m, mut ts) = (Model::new(), 0);
    scribble(&main, &mut m, &mut rng, "", 300, 300, &mut ts);
    let feature = p.create_branch("feature", "main").unwrap();
    let fork = p.describe("feature").unwrap().origin.unwrap().fork_version;
    scribble(&feature, &mut m.clone(), &mut rng, "", 300, 50, &mut ts);
    scribble(&main, &mut m, &mut rng, "", 300, 50, &mut ts);
    feature.rehome().unwrap();
    let e = p
        .merge("feature", "main", MergeOptions::default())
        .expect_err("the merge base is gone");
    let text = e.to_string();
    assert!(!text.contains("neither was forked"), "{text}");
    assert!(
        text.contains(&format!(
            "the state of `main` at version {fork} where `feature` was forked from `main`"
        )),
        "{text}"
    );
    assert!(text.contains("released by the re-home"), "{text}");
    // Made from an archive of main taken after the fork: the state both contain is still
    // main's at the fork, which only feature held.
    let archive = main.archive().unwrap();
    main.branch_from_archive(&archive, "other").unwrap();
    let e = p
        .merge("other", "feature", MergeOptions::default())
        .expect_err("the fork state is gone");
    let text = e.to_string();
    assert!(
        text.contains(&format!(
            "`main` at version {fork} where `feature` and `other` forked"
        )),
        "{text}"
    );
    assert!(
        text.contains("re-home (or a restore) of `feature`"),
        "{text}"
    );
}
