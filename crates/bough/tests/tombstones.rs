//! Deletes leave tombstones: last writer wins by user timestamp, and a delete is a write, so
//! a put older than a delete loses whether the key existed or not, until the tombstone's
//! retention window has passed and the expiry sweep purged it. Tombstones are never visible.

mod common;

use std::ops::Bound;
use std::sync::Arc;

use bough::io::MemoryStorage;
use bough::{
    Backend, Branch, DiffChange, ManualClock, MergeOptions, PutOptions, ScanOptions, Store,
    WriteBatch,
};

const START_MS: u64 = 1_700_000_000_000;

fn at(ts: u64) -> PutOptions {
    PutOptions {
        timestamp: Some(ts),
        ..Default::default()
    }
}

fn put_at(b: &Branch, key: &str, value: &str, ts: u64) {
    let mut wb = WriteBatch::new();
    wb.put_with(key, value, at(ts));
    b.write_blocking(wb).expect("put");
}

fn delete_at(b: &Branch, key: &str, ts: u64) {
    let mut wb = WriteBatch::new();
    wb.delete_at(key, ts);
    b.write_blocking(wb).expect("delete");
}

fn get(b: &Branch, key: &str) -> Option<String> {
    b.get_blocking(key.as_bytes())
        .expect("get")
        .map(|v| String::from_utf8(v.value).expect("utf-8"))
}

fn keys(b: &Branch) -> Vec<String> {
    b.scan_blocking(&ScanOptions::default())
        .expect("scan")
        .entries
        .into_iter()
        .map(|kv| String::from_utf8(kv.key).expect("utf-8"))
        .collect()
}

struct Env {
    dir: tempfile::TempDir,
    mem: MemoryStorage,
    clock: ManualClock,
    backend: Backend,
}

impl Env {
    fn new(backend: Backend) -> Env {
        Env {
            dir: tempfile::tempdir().expect("tempdir"),
            mem: MemoryStorage::new(),
            clock: ManualClock::new(START_MS),
            backend,
        }
    }

    fn open(&self, retention_ms: u64) -> Store {
        common::open(
            "tombstones",
            common::options(self.backend, self.dir.path(), &self.mem)
                .clock(Arc::new(self.clock.clone()))
                .map_settings(|o| o.tombstone_retention_ms(retention_ms)),
        )
    }
}

fn main_of(store: &Store) -> Branch {
    store
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch")
}

/// A delete used to remove the entry and leave nothing, so a put with an older user
/// timestamp arriving afterwards found no entry and won: the deleted key came back.
#[test]
fn regression_an_older_put_after_a_delete_does_not_resurrect() {
    for backend in common::ALL_BACKENDS {
        let env = Env::new(backend);
        let store = env.open(24 * 60 * 60 * 1000);
        let main = main_of(&store);
        put_at(&main, "present", "v5", 5);
        // Across commits: a delete of an existing key and of a key that never existed.
        delete_at(&main, "present", 20);
        delete_at(&main, "absent", 20);
        put_at(&main, "present", "v10", 10);
        put_at(&main, "absent", "v10", 10);
        assert_eq!(get(&main, "present"), None, "{backend:?}");
        assert_eq!(get(&main, "absent"), None, "{backend:?}");

        // Queued together (possibly one group commit): delete, then an older put.
        let mut del = WriteBatch::new();
        del.delete_at("queued", 30).delete_at("queued-absent", 30);
        let mut put = WriteBatch::new();
        put.put_with("queued", "old", at(29))
            .put_with("queued-absent", "old", at(29));
        let (f1, f2) = (main.write(del), main.write(put));
        common::block_on(f1).expect("delete");
        common::block_on(f2).expect("put");
        assert_eq!(get(&main, "queued"), None, "{backend:?}");
        assert_eq!(get(&main, "queued-absent"), None, "{backend:?}");

        // After reopen the tombstones are still there.
        drop(main);
        store.close().expect("close");
        drop(store);
        let store = env.open(24 * 60 * 60 * 1000);
        let main = main_of(&store);
        put_at(&main, "present", "v19", 19);
        put_at(&main, "absent", "v19", 19);
        assert_eq!(get(&main, "present"), None, "{backend:?} after reopen");
        assert_eq!(get(&main, "absent"), None, "{backend:?} after reopen");
        assert!(keys(&main).is_empty(), "{backend:?}: {:?}", keys(&main));
        // A put at the delete's timestamp or later wins, as before (ties: the later write).
        put_at(&main, "present", "v20", 20);
        put_at(&main, "absent", "v21", 21);
        assert_eq!(get(&main, "present").as_deref(), Some("v20"));
        assert_eq!(get(&main, "absent").as_deref(), Some("v21"));
        // An older delete loses to a newer entry, and leaves no tombstone over it.
        delete_at(&main, "present", 19);
        assert_eq!(get(&main, "present").as_deref(), Some("v20"));
        store.close().expect("close");
    }
}

/// Tombstones are absent to every reader: get, floor, scan and its continuation, diff,
/// merge.
#[test]
fn tombstones_are_invisible() {
    let env = Env::new(Backend::Memory);
    let store = env.open(24 * 60 * 60 * 1000);
    let p = store.partition("t", 0).expect("partition");
    let main = p.branch("main").expect("main");
    let mut wb = WriteBatch::new();
    for k in ["a", "b", "c", "d", "e"] {
        wb.put_with(k, k, at(1));
    }
    main.write_blocking(wb).expect("write");
    let feature = p.create_branch("feature", "main").expect("branch");

    let mut wb = WriteBatch::new();
    wb.delete_at("b", 2).delete_at("d", 2).delete_at("never", 2);
    main.write_blocking(wb).expect("delete");
    assert_eq!(get(&main, "b"), None);
    assert_eq!(get(&main, "never"), None);
    // Floor skips a tombstone to the live key below it.
    let f = main.floor_blocking(b"b").expect("floor").expect("a");
    assert_eq!(f.key, b"a");
    let f = main.floor_blocking(b"dz").expect("floor").expect("c");
    assert_eq!(f.key, b"c");
    let f = main.floor_blocking(b"nz").expect("floor").expect("e");
    assert_eq!(f.key, b"e");
    assert_eq!(keys(&main), ["a", "c", "e"]);
    // Paging one entry at a time: the continuation never lands on a tombstone.
    let mut got = Vec::new();
    let mut begin = Bound::Unbounded;
    loop {
        let page = main
            .scan_blocking(&ScanOptions {
                begin: begin.clone(),
                limit: 1,
                ..Default::default()
            })
            .expect("scan");
        got.extend(page.entries.into_iter().map(|kv| kv.key));
        match page.next {
            Some(k) => begin = Bound::Included(k),
            None => break,
        }
    }
    assert_eq!(got, [b"a".to_vec(), b"c".to_vec(), b"e".to_vec()]);

    // Diff: deleted keys are removals, a tombstone on a key the other side lacks is no
    // difference.
    let d = p.diff("feature", "main").expect("diff");
    let removed: Vec<&[u8]> = d
        .iter()
        .map(|e| {
            assert!(matches!(e.change, DiffChange::Removed(_)), "{e:?}");
            e.key.as_slice()
        })
        .collect();
    assert_eq!(removed, [b"b".as_slice(), b"d"]);
    let mut wb = WriteBatch::new();
    wb.delete_at("never", 3);
    feature.write_blocking(wb).expect("delete");
    let mut wb = WriteBatch::new();
    wb.delete_at("b", 3).delete_at("d", 3);
    feature.write_blocking(wb).expect("delete");
    assert!(p.diff("feature", "main").expect("diff").is_empty());

    // A three-way merge carries the source's delete as a tombstone with its timestamp:
    // "c" deleted on the source at 4 stays deleted against a later put at 3 on the target.
    let mut wb = WriteBatch::new();
    wb.delete_at("c", 4);
    feature.write_blocking(wb).expect("delete");
    put_at(&main, "z", "z", 4); // the target changed too: no fast-forward
    let r = p
        .merge("feature", "main", MergeOptions::default())
        .expect("merge");
    assert!(r.conflicts.is_empty(), "{r:?}");
    assert!(!r.fast_forward);
    assert_eq!(
        r.applied, 1,
        "only the delete of c; tombstones vs absent are no change"
    );
    assert_eq!(get(&main, "c"), None);
    put_at(&main, "c", "resurrected", 3);
    assert_eq!(get(&main, "c"), None, "the merged delete was forgotten");
    assert_eq!(keys(&main), ["a", "e", "z"]);
    store.close().expect("close");
}

/// A tombstone lives for the retention window, then the expiry sweep purges it: an older
/// put is refused before, and applies after.
#[test]
fn tombstones_are_purged_after_the_retention_window() {
    for backend in common::ALL_BACKENDS {
        let env = Env::new(backend);
        let store = env.open(1_000);
        let main = main_of(&store);
        put_at(&main, "k", "v", 5);
        delete_at(&main, "k", 100);
        env.clock.advance(999);
        store.run_maintenance().expect("maintenance");
        put_at(&main, "k", "early", 50);
        assert_eq!(get(&main, "k"), None, "{backend:?}: purged too early");
        env.clock.advance(1);
        store.run_maintenance().expect("maintenance");
        put_at(&main, "k", "late", 50);
        assert_eq!(get(&main, "k").as_deref(), Some("late"), "{backend:?}");
        // A put over a tombstone drops the tombstone's expiry: the sweep does not purge it.
        delete_at(&main, "j", 100);
        put_at(&main, "j", "kept", 200);
        env.clock.advance(10_000);
        store.run_maintenance().expect("maintenance");
        assert_eq!(get(&main, "j").as_deref(), Some("kept"), "{backend:?}");
        store.close().expect("close");
    }
}

/// The retention comes from the options and is validated.
#[test]
fn tombstone_retention_is_validated() {
    let e = Store::open(bough::Options::in_memory().tombstone_retention_ms(0)).unwrap_err();
    assert!(e.to_string().contains("tombstone_retention_ms"), "{e}");
}
