//! "Newest timestamp wins" means the same in a merge as on the write path: a delete is a
//! write at its tombstone's timestamp (issue 14, §5). Before the fix a merge treated a
//! delete as having no timestamp, so a deleted key came back in both directions.

use bough::io::MemoryStorage;
use bough::{ConflictPolicy, DiffChange, MergeOptions, Options, PutOptions, Store, WriteBatch};

fn store() -> Store {
    Store::builder(Options::in_memory().maintenance_interval_ms(0))
        .memory(MemoryStorage::new())
        .open()
        .expect("open")
}

fn put(b: &bough::Branch, k: &str, v: &str, ts: u64) {
    let mut w = WriteBatch::new();
    w.put_with(
        k.as_bytes(),
        v.as_bytes(),
        PutOptions {
            timestamp: Some(ts),
            ..Default::default()
        },
    );
    b.write_blocking(w).expect("put");
}

fn delete(b: &bough::Branch, k: &str, ts: u64) {
    let mut w = WriteBatch::new();
    w.delete_at(k.as_bytes(), ts);
    b.write_blocking(w).expect("delete");
}

fn newest() -> MergeOptions {
    MergeOptions {
        policy: ConflictPolicy::NewestTimestamp,
        ..Default::default()
    }
}

/// Put at 100; the target deletes at 200; the source updates at 150: the delete is newer,
/// so the key stays deleted — as when the same writes reach one branch in any order.
#[test]
fn newest_timestamp_merge_keeps_a_newer_delete_on_the_target() {
    let s = store();
    let p = s.partition("t", 0).expect("partition");
    let main = p.branch("main").expect("main");
    put(&main, "k", "v100", 100);
    let feature = p.create_branch("feature", "main").expect("branch");
    delete(&main, "k", 200);
    put(&feature, "k", "v150", 150);
    let r = p.merge("feature", "main", newest()).expect("merge");
    assert!(r.committed && !r.fast_forward && r.resolved == 1, "{r:?}");
    assert_eq!(main.get_blocking(b"k").expect("get"), None, "{r:?}");
    // The write path agrees: the update at 150 loses to the delete at 200.
    put(&main, "k", "v150", 150);
    assert_eq!(main.get_blocking(b"k").expect("get"), None);
}

/// The other direction: the source deletes at 200, the target updates at 150: the delete
/// wins and is written as its tombstone, so an older write arriving later still loses.
#[test]
fn newest_timestamp_merge_takes_a_newer_delete_from_the_source() {
    let s = store();
    let p = s.partition("t", 0).expect("partition");
    let main = p.branch("main").expect("main");
    put(&main, "k", "v100", 100);
    let feature = p.create_branch("feature", "main").expect("branch");
    delete(&feature, "k", 200);
    put(&main, "k", "v150", 150);
    let r = p.merge("feature", "main", newest()).expect("merge");
    assert!(r.committed && r.resolved == 1 && r.applied == 1, "{r:?}");
    assert_eq!(main.get_blocking(b"k").expect("get"), None, "{r:?}");
    put(&main, "k", "v180", 180);
    assert_eq!(main.get_blocking(b"k").expect("get"), None);
    put(&main, "k", "v250", 250);
    assert_eq!(
        main.get_blocking(b"k").expect("get").map(|v| v.value),
        Some(b"v250".to_vec())
    );
}

/// A delete older than the other side's update loses, in both directions.
#[test]
fn newest_timestamp_merge_lets_a_newer_update_beat_an_older_delete() {
    for delete_on_target in [true, false] {
        let s = store();
        let p = s.partition("t", 0).expect("partition");
        let main = p.branch("main").expect("main");
        put(&main, "k", "v100", 100);
        let feature = p.create_branch("feature", "main").expect("branch");
        let (deleter, updater) = if delete_on_target {
            (&main, &feature)
        } else {
            (&feature, &main)
        };
        delete(deleter, "k", 150);
        put(updater, "k", "v200", 200);
        let r = p.merge("feature", "main", newest()).expect("merge");
        assert!(r.committed && r.resolved == 1, "{r:?}");
        assert_eq!(
            main.get_blocking(b"k").expect("get").map(|v| v.value),
            Some(b"v200".to_vec()),
            "delete on the target: {delete_on_target}"
        );
    }
}

/// A conflict reports a delete with its tombstone's timestamp, and a diff reports when a
/// removed key was deleted.
#[test]
fn conflicts_and_diffs_carry_the_delete_timestamp() {
    let s = store();
    let p = s.partition("t", 0).expect("partition");
    let main = p.branch("main").expect("main");
    put(&main, "k", "v100", 100);
    put(&main, "gone", "x", 100);
    let feature = p.create_branch("feature", "main").expect("branch");
    delete(&main, "k", 200);
    put(&feature, "k", "v150", 150);
    delete(&feature, "gone", 300);
    let r = p
        .merge("feature", "main", MergeOptions::default())
        .expect("merge");
    assert!(!r.committed, "{r:?}");
    assert_eq!(r.conflicts.len(), 1, "{r:?}");
    let c = &r.conflicts[0];
    let ours = c.ours.as_ref().expect("the target's delete");
    assert!(ours.is_tombstone() && ours.timestamp == 200, "{c:?}");
    let theirs = c.theirs.as_ref().expect("the source's update");
    assert!(!theirs.is_tombstone() && theirs.timestamp == 150, "{c:?}");
    let d = p.diff("main", "feature").expect("diff");
    let gone = d
        .iter()
        .find(|e| e.key == b"gone")
        .expect("gone is in the diff");
    assert!(matches!(gone.change, DiffChange::Removed(_)), "{gone:?}");
    assert_eq!(gone.deleted_at, Some(300), "{gone:?}");
    let k = d.iter().find(|e| e.key == b"k").expect("k is in the diff");
    assert!(
        matches!(k.change, DiffChange::Added(_)) && k.deleted_at.is_none(),
        "{k:?}"
    );
}
