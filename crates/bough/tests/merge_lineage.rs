//! Issue 18 §1–2 by scenario: merges between any two branches that share history (siblings,
//! a grandchild into its grandparent), what a re-home does to them (refused with the true
//! reason; kept with `keep_merge_bases`), rebase with conflicts, cherry-pick of a range and
//! revert — each checked key by key against what the branches held.

use std::collections::BTreeMap;

use bough::{
    BaseRoute, ConflictPolicy, MergeOptions, Options, PickOptions, RehomeOptions, ScanOptions,
    StateRef, Store, WriteBatch,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn store() -> Store {
    Store::open(
        Options::in_memory()
            .data_file_size(64 * 4096)
            .maintenance_interval_ms(0),
    )
    .unwrap()
}

fn all(b: &bough::Branch) -> Model {
    b.scan_blocking(&ScanOptions::default())
        .unwrap()
        .entries
        .into_iter()
        .map(|kv| (kv.key, kv.value.value))
        .collect()
}

/// Puts `keys` (as `k<i>`) with `value` on `b` and in `m`.
fn put(b: &bough::Branch, m: &mut Model, keys: impl IntoIterator<Item = u32>, value: &str) {
    let mut wb = WriteBatch::new();
    for i in keys {
        let k = format!("k{i:04}").into_bytes();
        wb.put(k.clone(), value);
        m.insert(k, value.as_bytes().to_vec());
    }
    b.write_blocking(wb).unwrap();
}

fn del(b: &bough::Branch, m: &mut Model, keys: impl IntoIterator<Item = u32>) {
    let mut wb = WriteBatch::new();
    for i in keys {
        let k = format!("k{i:04}").into_bytes();
        wb.delete(k.clone());
        m.remove(&k);
    }
    b.write_blocking(wb).unwrap();
}

/// `target` with the changes from `from` to `to` applied.
fn apply(target: &Model, from: &Model, to: &Model) -> Model {
    let mut out = target.clone();
    for k in from.keys().chain(to.keys()) {
        if from.get(k) != to.get(k) {
            match to.get(k) {
                Some(v) => out.insert(k.clone(), v.clone()),
                None => out.remove(k),
            };
        }
    }
    out
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

#[test]
fn siblings_merge_through_their_common_parent() {
    let s = store();
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut mm = Model::new();
    put(&main, &mut mm, 0..400, "base");
    let a = p.create_branch("a", "main").unwrap();
    let at_a = mm.clone();
    put(&main, &mut mm, 400..450, "main-later");
    let b = p.create_branch("b", "main").unwrap();
    let (mut ma, mut mb) = (at_a.clone(), mm.clone());
    put(&a, &mut ma, 0..30, "a");
    del(&a, &mut ma, 30..40);
    put(&b, &mut mb, 100..130, "b");

    // `a` forked first: the state both contain is main's at `a`'s fork, which `a` records.
    let r = p.merge("a", "b", MergeOptions::default()).unwrap();
    assert!(
        r.committed && !r.fast_forward && r.conflicts.is_empty(),
        "{r:?}"
    );
    let base = r.base.clone().expect("base");
    assert_eq!(base.branch.as_str(), "main");
    match &base.route {
        BaseRoute::Lineage { ancestor, via } => {
            assert_eq!((ancestor.as_str(), via.as_str()), ("main", "a"));
        }
        other => panic!("not through the fork tree: {other:?}"),
    }
    assert_eq!(
        base.version,
        Some(p.describe("a").unwrap().origin.unwrap().fork_version)
    );
    let want = apply(&mb, &at_a, &ma);
    assert_eq!(all(&b), want);
    assert_eq!(r.applied, 40);
    // Now the pair has its own record: `b` back into `a` brings `b`'s changes and main's
    // later ones, and nothing `a` already has.
    let r = p.merge("b", "a", MergeOptions::default()).unwrap();
    assert!(r.committed && r.conflicts.is_empty(), "{r:?}");
    assert_eq!(r.base.unwrap().route, BaseRoute::Pair);
    assert_eq!(all(&a), want);

    // Siblings that changed one key differently conflict, under every policy's rule.
    let c = p.create_branch("c", "main").unwrap();
    let d = p.create_branch("d", "main").unwrap();
    let (mut mc, mut md) = (mm.clone(), mm.clone());
    put(&c, &mut mc, [7], "c");
    put(&d, &mut md, [7], "d");
    let r = p.merge("c", "d", MergeOptions::default()).unwrap();
    assert!(!r.committed && r.conflicts.len() == 1, "{r:?}");
    assert_eq!(all(&d), md, "a failed merge changes nothing");
    let r = p
        .merge(
            "c",
            "d",
            MergeOptions {
                policy: ConflictPolicy::Theirs,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(r.committed && r.resolved == 1, "{r:?}");
    assert_eq!(all(&d), mc);
}

#[test]
fn grandchild_into_grandparent_and_back() {
    let s = store();
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut mm = Model::new();
    put(&main, &mut mm, 0..300, "base");
    let b = p.create_branch("b", "main").unwrap();
    let at_b = mm.clone();
    let mut mb = mm.clone();
    put(&b, &mut mb, 0..20, "b");
    let c = p.create_branch("c", "b").unwrap();
    let mut mc = mb.clone();
    put(&c, &mut mc, 20..50, "c");
    del(&c, &mut mc, 50..55);
    put(&main, &mut mm, 200..260, "main");

    // Dry run first: nothing changes, the report is the same.
    let dry = p
        .merge(
            "c",
            "main",
            MergeOptions {
                dry_run: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(!dry.committed && dry.applied == 55, "{dry:?}");
    assert_eq!(all(&main), mm);
    // `c` contains main's state where `b` forked, plus `b`'s changes before `c` forked.
    let r = p.merge("c", "main", MergeOptions::default()).unwrap();
    assert!(
        r.committed && r.applied == 55 && r.conflicts.is_empty(),
        "{r:?}"
    );
    let base = r.base.unwrap();
    assert_eq!((base.branch.as_str(), base.holder.as_str()), ("main", "b"));
    let want = apply(&mm, &at_b, &mc);
    assert_eq!(all(&main), want);

    // And the grandparent into a grandchild that never merged with it: `d`, another child
    // of `b`, gets main's changes (and `c`'s, now in main) on top of its own.
    let d = p.create_branch("d", "b").unwrap();
    let mut md = mb.clone();
    put(&d, &mut md, 280..290, "d");
    let r = p.merge("main", "d", MergeOptions::default()).unwrap();
    assert!(r.committed && r.conflicts.is_empty(), "{r:?}");
    assert_eq!(all(&d), apply(&md, &at_b, &want));
}

/// The state a merge of siblings needs is held by the one that forked first; its re-home
/// releases it. The re-home says so, the merge refuses with that reason, and keeping the
/// merge bases keeps the merge possible (their cost reported).
#[test]
fn merge_after_rehome_is_refused_with_the_true_reason_unless_bases_are_kept() {
    for keep in [false, true] {
        let s = store();
        let p = s.partition("t", 0).unwrap();
        let main = p.branch("main").unwrap();
        let mut mm = Model::new();
        put(&main, &mut mm, 0..600, "base");
        let a = p.create_branch("a", "main").unwrap();
        let at_a = mm.clone();
        let fork_a = p.describe("a").unwrap().origin.unwrap().fork_version;
        put(&main, &mut mm, 0..10, "main-later");
        let b = p.create_branch("b", "main").unwrap();
        let (mut ma, mut mb) = (at_a.clone(), mm.clone());
        put(&a, &mut ma, 100..120, "a");
        put(&b, &mut mb, 300..320, "b");
        let r = a
            .rehome_with(RehomeOptions {
                keep_merge_bases: keep,
            })
            .unwrap();
        assert!(r.pages_copied > 0, "{r:?}");
        // The space-per-branch figures show the cost: kept bases hold main's files with `a`.
        let space = p.describe("a").unwrap().space.expect("measured");
        let with_main = space
            .shared_with
            .iter()
            .find(|(n, _)| n.as_str() == "main")
            .map_or(0, |(_, bytes)| *bytes);
        assert_eq!(with_main > 0, keep, "{space:?}");
        let names: Vec<String> = r
            .merges_lost
            .iter()
            .map(|(x, y)| format!("{x}+{y}"))
            .collect();
        if keep {
            assert!(r.merges_lost.is_empty(), "{r:?}");
            assert_eq!(r.merge_bases_kept, 1);
            assert!(r.kept_bases_bytes >= 4096, "{r:?}");
            let m = p.merge("a", "b", MergeOptions::default()).unwrap();
            assert!(m.committed, "{m:?}");
            s.gc().unwrap();
            assert_eq!(all(&b), apply(&mb, &at_a, &ma));
            let m = p.merge("a", "main", MergeOptions::default()).unwrap();
            assert!(m.committed, "{m:?}");
        } else {
            assert_eq!(names, ["a+b", "a+main"], "{r:?}");
            assert_eq!(r.merge_bases_kept, 0);
            for (src, tgt) in [("a", "b"), ("b", "a"), ("a", "main")] {
                let e = p
                    .merge(src, tgt, MergeOptions::default())
                    .expect_err("the state both contain is gone");
                assert_eq!(e.kind(), bough::ErrorKind::InvalidArgument);
                let text = e.to_string();
                assert!(
                    text.contains(&format!("the state of `main` at version {fork_a}")),
                    "{text}"
                );
                assert!(
                    text.contains("released by the re-home (or a restore) of `a`"),
                    "{text}"
                );
            }
            assert_eq!(all(&b), mb, "a refused merge changes nothing");
            // `b` still merges with main: its own fork state is untouched.
            let m = p.merge("b", "main", MergeOptions::default()).unwrap();
            assert!(m.committed, "{m:?}");
        }
    }
}

#[test]
fn rebase_with_conflicts() {
    let s = store();
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut mm = Model::new();
    put(&main, &mut mm, 0..200, "base");
    let f = p.create_branch("feature", "main").unwrap();
    let at_fork = mm.clone();
    let mut mf = mm.clone();
    put(&f, &mut mf, 0..10, "feature");
    del(&f, &mut mf, 10..12);
    put(&main, &mut mm, 5..8, "main");
    put(&main, &mut mm, 100..110, "main");

    // Keys 5..8 changed on both: a conflict each; nothing changes.
    let r = p
        .rebase("feature", "main", MergeOptions::default())
        .unwrap();
    assert!(!r.committed, "{r:?}");
    let keys: Vec<Vec<u8>> = r.conflicts.iter().map(|c| c.key.clone()).collect();
    assert_eq!(keys, (5..8).map(key).collect::<Vec<_>>());
    // In a rebase, ours is the state replayed on (main), theirs the branch's own change.
    let ours = f.get_blocking(key(5)).unwrap().unwrap();
    assert_eq!(ours.value, b"feature");
    for c in &r.conflicts {
        let (o, t) = (c.ours.as_ref().unwrap(), c.theirs.as_ref().unwrap());
        assert_eq!(
            (o.timestamp, t.timestamp),
            (
                main.get_blocking(&c.key).unwrap().unwrap().timestamp,
                f.get_blocking(&c.key).unwrap().unwrap().timestamp
            )
        );
    }
    assert_eq!(all(&f), mf);
    // A dry run with a policy reports the settled conflicts and changes nothing.
    let theirs = MergeOptions {
        policy: ConflictPolicy::Theirs,
        ..Default::default()
    };
    let dry = p
        .rebase(
            "feature",
            "main",
            MergeOptions {
                dry_run: true,
                ..theirs
            },
        )
        .unwrap();
    assert!(!dry.committed && dry.resolved == 3, "{dry:?}");
    assert_eq!(all(&f), mf);
    // Theirs: the branch keeps its own changes, replayed on main's state.
    let r = p.rebase("feature", "main", theirs).unwrap();
    assert!(r.committed && r.resolved == 3, "{r:?}");
    let want = apply(&mm, &at_fork, &mf);
    assert_eq!(all(&f), want);
    // main is the new base: merging the branch back is a fast-forward to the same state.
    let m = p.merge("feature", "main", MergeOptions::default()).unwrap();
    assert!(m.fast_forward && m.committed, "{m:?}");
    assert_eq!(all(&main), want);

    // Ours keeps main's side of a conflict.
    let g = p.create_branch("g", "main").unwrap();
    let (mut mg, mut mm2) = (want.clone(), want.clone());
    put(&g, &mut mg, [1], "g");
    put(&main, &mut mm2, [1], "main2");
    let r = p
        .rebase(
            "g",
            "main",
            MergeOptions {
                policy: ConflictPolicy::Ours,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(r.committed && r.resolved == 1, "{r:?}");
    assert_eq!(all(&g), mm2);
}

#[test]
fn cherry_pick_of_a_range() {
    let s = store();
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut mm = Model::new();
    put(&main, &mut mm, 0..200, "base");
    let f = p.create_branch("feature", "main").unwrap();
    let mut mf = mm.clone();
    put(&f, &mut mf, 0..5, "one");
    // The range starts after the first commit: an archive retains that state, at the
    // version the branch has once archived (archiving checkpoints: a version of its own).
    let after_one = mf.clone();
    f.archive().unwrap();
    let v1 = f.read_view().unwrap().version();
    put(&f, &mut mf, 10..15, "two");
    del(&f, &mut mf, 20..22);
    put(&f, &mut mf, 3..4, "three");
    let from = StateRef::version("feature", v1);
    let to = StateRef::branch("feature");
    // `g`, from main before the pick, changes a key of the range otherwise.
    let g = p.create_branch("g", "main").unwrap();
    let mut mg = mm.clone();
    put(&g, &mut mg, [12], "g");

    let dry = p
        .cherry_pick(
            &from,
            &to,
            "main",
            PickOptions {
                dry_run: true,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(
        !dry.committed && dry.applied == 7 && dry.conflicts.len() == 1,
        "{dry:?}"
    );
    assert_eq!(all(&main), mm);
    // Key 3 changed in the range from what the first commit wrote, which main never had:
    // a conflict (as in git), so nothing changes.
    let r = p
        .cherry_pick(&from, &to, "main", PickOptions::default())
        .unwrap();
    assert!(!r.committed, "{r:?}");
    assert_eq!(
        r.conflicts
            .iter()
            .map(|c| c.key.clone())
            .collect::<Vec<_>>(),
        [key(3)]
    );
    assert_eq!(all(&main), mm);
    let theirs = PickOptions {
        policy: ConflictPolicy::Theirs,
        ..Default::default()
    };
    let r = p.cherry_pick(&from, &to, "main", theirs).unwrap();
    assert!(r.committed && r.applied == 8 && r.resolved == 1, "{r:?}");
    // The range's changes, not the first commit's (keys 0..3 and 4 stay main's).
    let want = apply(&mm, &after_one, &mf);
    assert_eq!(all(&main), want);
    assert_eq!(main.get_blocking(key(0)).unwrap().unwrap().value, b"base");
    assert_eq!(main.get_blocking(key(3)).unwrap().unwrap().value, b"three");
    // Picking it again changes nothing: every key already holds the range's end.
    let again = p
        .cherry_pick(&from, &to, "main", PickOptions::default())
        .unwrap();
    assert!(again.conflicts.is_empty(), "{again:?}");
    assert!(!again.committed && again.applied == 0, "{again:?}");

    // Onto `g`: conflicts at key 3 (as on main) and 12 (ours: g's entry, theirs: the
    // range's end), so nothing changes; the range's start given as the archive this time.
    let archive = f.archives().unwrap().pop().unwrap();
    let r = p
        .cherry_pick(
            &StateRef::Archive(archive),
            &to,
            "g",
            PickOptions::default(),
        )
        .unwrap();
    assert_eq!(
        r.conflicts
            .iter()
            .map(|c| c.key.clone())
            .collect::<Vec<_>>(),
        [key(3), key(12)]
    );
    let c = &r.conflicts[1];
    assert_eq!(
        c.ours.as_ref().unwrap().timestamp,
        g.get_blocking(key(12)).unwrap().unwrap().timestamp
    );
    assert_eq!(
        c.theirs.as_ref().unwrap().timestamp,
        f.get_blocking(key(12)).unwrap().unwrap().timestamp
    );
    assert!(!r.committed);
    assert_eq!(all(&g), mg);
    let r = p
        .cherry_pick(
            &from,
            &to,
            "g",
            PickOptions {
                policy: ConflictPolicy::Ours,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(r.committed && r.resolved == 2 && r.applied == 6, "{r:?}");
    let mut want_g = apply(&mg, &after_one, &mf);
    want_g.insert(key(3), b"base".to_vec());
    want_g.insert(key(12), b"g".to_vec());
    assert_eq!(all(&g), want_g);

    // A version nothing retains is refused, naming what is.
    let e = p
        .cherry_pick(
            &StateRef::version("feature", v1 + 1),
            &to,
            "main",
            PickOptions::default(),
        )
        .expect_err("not retained");
    assert_eq!(e.kind(), bough::ErrorKind::NotFound, "{e}");
    assert!(
        e.to_string().contains("no archive or merge base retains"),
        "{e}"
    );
}

#[test]
fn revert_undoes_a_range() {
    let s = store();
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut mm = Model::new();
    put(&main, &mut mm, 0..100, "base");
    let before = mm.clone();
    let archive = main.archive().unwrap();
    put(&main, &mut mm, 0..5, "bad");
    put(&main, &mut mm, 200..203, "new");
    del(&main, &mut mm, 50..52);
    // A later change to a reverted key: the revert conflicts there.
    put(&main, &mut mm, [4], "later");
    let range = (StateRef::Archive(archive), StateRef::branch("main"));
    let r = p
        .revert(&range.0, &range.1, "main", PickOptions::default())
        .unwrap();
    // Against the branch's own current state every key is "what the range ends at".
    assert!(
        r.committed && r.conflicts.is_empty() && r.applied == 10,
        "{r:?}"
    );
    assert_eq!(all(&main), before);

    // On another branch that changed a key of the range since: a conflict there.
    let archive2 = main.archive().unwrap();
    let mut mm = before.clone();
    put(&main, &mut mm, 0..3, "bad");
    let f = p.create_branch("f", "main").unwrap();
    let mut mf = mm.clone();
    put(&f, &mut mf, [1], "fixed-on-f");
    let range = (StateRef::Archive(archive2), StateRef::branch("main"));
    let r = p
        .revert(&range.0, &range.1, "f", PickOptions::default())
        .unwrap();
    assert_eq!(
        r.conflicts
            .iter()
            .map(|c| c.key.clone())
            .collect::<Vec<_>>(),
        [key(1)]
    );
    assert!(!r.committed, "{r:?}");
    assert_eq!(all(&f), mf);
    let r = p
        .revert(
            &range.0,
            &range.1,
            "f",
            PickOptions {
                policy: ConflictPolicy::Theirs,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(r.committed && r.resolved == 1 && r.applied == 3, "{r:?}");
    assert_eq!(all(&f), before);
}

/// The README's example of a sibling merge and a cherry-pick, as it is written there.
#[test]
fn readme_sibling_merge_and_cherry_pick() -> bough::Result<()> {
    let store = Store::open(Options::in_memory())?;
    let orders = store.partition("orders", 0)?;
    let put = |b: &bough::Branch, k: &str, v: &str| {
        let mut batch = WriteBatch::new();
        batch.put(k, v);
        b.write_blocking(batch)
    };
    put(&orders.branch("main")?, "order-1", "pending")?;
    let pricing = orders.create_branch("pricing", "main")?;
    let hotfix = orders.create_branch("hotfix", "main")?; // a sibling of pricing
    put(&hotfix, "order-1", "shipped")?;
    let first = hotfix.archive()?; // a state to start a range at
    put(&hotfix, "order-2", "shipped")?;
    put(&pricing, "order-3", "repriced")?;

    // Siblings merge: the base is main's state where they forked.
    orders.merge("hotfix", "pricing", MergeOptions::default())?;
    assert_eq!(pricing.get_blocking(b"order-1")?.unwrap().value, b"shipped");
    // Only hotfix's second change goes to main: a cherry-pick of the range archive..hotfix.
    let r = orders.cherry_pick(
        &StateRef::Archive(first),
        &StateRef::branch("hotfix"),
        "main",
        PickOptions::default(),
    )?;
    assert_eq!((r.applied, r.committed), (1, true));
    let main = orders.branch("main")?;
    assert_eq!(main.get_blocking(b"order-1")?.unwrap().value, b"pending");
    assert_eq!(main.get_blocking(b"order-2")?.unwrap().value, b"shipped");
    Ok(())
}

/// A grandchild forked from `b` before `main` was merged into `b` does not contain that
/// merge, and `b`'s merge base naming `main` has moved on to it: the state the grandchild and
/// `main` share (main where `b` forked) is no longer kept, and the refusal says so. `b`
/// itself, which does contain the merged state, still merges with `main`.
#[test]
fn regression_grandchild_refused_after_a_merge_moved_the_base_on() {
    let s = store();
    let p = s.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut mm = Model::new();
    put(&main, &mut mm, 0..50, "base");
    let b = p.create_branch("b", "main").unwrap();
    let fork_b = p.describe("b").unwrap().origin.unwrap().fork_version;
    let c = p.create_branch("c", "b").unwrap();
    let mut mc = mm.clone();
    put(&c, &mut mc, [1], "c");
    put(&main, &mut mm, [2], "main");
    let r = p.merge("main", "b", MergeOptions::default()).unwrap();
    assert!(r.committed, "{r:?}");
    let moved_to = main.read_view().unwrap().version();
    let e = p
        .merge("c", "main", MergeOptions::default())
        .expect_err("main at b's fork is gone");
    let text = e.to_string();
    assert!(
        text.contains(&format!(
            "the state of `main` at version {fork_b} where `b` was forked from `main` (`c` \
             descends from `b`)"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("moved `b`'s merge base on to version {moved_to}")),
        "{text}"
    );
    let r = p.merge("b", "main", MergeOptions::default()).unwrap();
    assert!(r.committed, "{r:?}");
    drop((b, c));
}
