//! Tags: immutable named states of a branch — readable, usable as a merge source, a branch
//! source and a diff side, kept by GC after their branch is deleted, deleted only
//! explicitly, sharing one name space with branches, and whole or absent after a crash
//! during their creation.

use std::sync::Arc;

use bough::io::{CrashPolicy, FaultInjector, FaultOp, MemoryStorage, Storage};
use bough::{Branch, ErrorKind, ManualClock, MergeOptions, Options, Store, WriteBatch};

const T0: u64 = 1_700_000_000_000;

fn open(mem: &MemoryStorage, clock: &ManualClock) -> Store {
    Store::builder(
        Options::in_memory()
            .maintenance_interval_ms(0)
            .data_file_size(64 * 4096),
    )
    .memory(mem.clone())
    .clock(Arc::new(clock.clone()))
    .open()
    .unwrap()
}

fn key(i: usize) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn put(b: &Branch, range: std::ops::Range<usize>, tag: &str) {
    let mut wb = WriteBatch::new();
    for i in range {
        wb.put(key(i), format!("{tag}{i}").into_bytes());
    }
    b.write_blocking(wb).unwrap();
}

fn value(v: Option<bough::Value>) -> Option<String> {
    v.map(|v| String::from_utf8(v.value).unwrap())
}

#[test]
fn a_tag_reads_the_state_it_was_taken_at_while_its_branch_moves_on() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    put(&main, 0..50, "a");
    let before = main.read_view().unwrap().version();
    let info = p.create_tag("v1", "main").unwrap();
    // The tag checkpoints the branch first (a record, so a version) and keeps that state.
    let version = main.read_view().unwrap().version();
    assert!(version >= before);
    assert_eq!(
        (info.branch.as_str(), info.version, info.created_at_ms),
        ("main", version, T0)
    );
    put(&main, 0..60, "b");
    let tag = p.tag("v1").unwrap();
    assert_eq!(tag.version(), version);
    for i in 0..50 {
        assert_eq!(value(tag.get(key(i)).unwrap()), Some(format!("a{i}")));
    }
    assert_eq!(tag.get(key(55)).unwrap(), None);
    // Listed with where it came from; still there after a reopen.
    store.close().unwrap();
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    let tags = p.tags().unwrap();
    assert_eq!(tags.len(), 1);
    assert_eq!(
        (
            tags[0].name.as_str(),
            tags[0].branch.as_str(),
            tags[0].version
        ),
        ("v1", "main", version)
    );
    assert_eq!(
        value(p.tag("v1").unwrap().get(key(3)).unwrap()),
        Some("a3".into())
    );
    // A tag is no branch: it cannot be written to or opened as one.
    assert_eq!(p.branch("v1").unwrap_err().kind(), ErrorKind::NotFound);
    // A diff can name it on either side.
    let d = p.diff("v1", "main").unwrap();
    assert_eq!(d.len(), 60);
    assert!(p.diff("main", "v1").unwrap().len() == 60);
}

#[test]
fn tag_as_merge_source() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    put(&main, 0..10, "m");
    let feat = p.create_branch("feat", "main").unwrap();
    put(&feat, 100..120, "f");
    p.create_tag("feat-v1", "feat").unwrap();
    // feat moves on after the tag; main changes too, so the merge is three-way.
    put(&feat, 120..130, "late");
    put(&main, 0..1, "m2-");
    let r = p.merge("feat-v1", "main", MergeOptions::default()).unwrap();
    assert!(r.committed && !r.fast_forward, "{r:?}");
    assert_eq!(r.applied, 20);
    for i in 100..120 {
        assert_eq!(
            value(main.get_blocking(key(i)).unwrap()),
            Some(format!("f{i}"))
        );
    }
    // What feat wrote after the tag is not in it.
    assert_eq!(main.get_blocking(key(125)).unwrap(), None);
    assert_eq!(
        value(main.get_blocking(key(0)).unwrap()),
        Some("m2-0".into())
    );
}

#[test]
fn tag_as_branch_source() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    put(&main, 0..30, "a");
    let version = p.create_tag("v1", "main").unwrap().version;
    put(&main, 0..40, "b");
    let hot = p.create_branch("hotfix", "v1").unwrap();
    for i in 0..30 {
        assert_eq!(
            value(hot.get_blocking(key(i)).unwrap()),
            Some(format!("a{i}"))
        );
    }
    assert_eq!(hot.get_blocking(key(35)).unwrap(), None);
    // Its parent is the branch the tag was taken from, at the tag's version.
    let info = p.describe("hotfix").unwrap();
    let origin = info.origin.unwrap();
    assert_eq!(origin.parent.unwrap().0.as_str(), "main");
    assert_eq!(origin.fork_version, version);
    // It is a branch like any: written, then merged back (the tag's state is the base).
    put(&hot, 500..505, "h");
    let r = p.merge("hotfix", "main", MergeOptions::default()).unwrap();
    assert!(r.committed, "{r:?}");
    assert_eq!(r.applied, 5);
    assert_eq!(
        value(main.get_blocking(key(501)).unwrap()),
        Some("h501".into())
    );
    assert_eq!(value(main.get_blocking(key(1)).unwrap()), Some("b1".into()));
}

#[test]
fn tag_kept_by_gc_after_its_branch_is_deleted() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    let feat = p.create_branch("feat", "main").unwrap();
    // Enough data for several files of the branch's own.
    for round in 0..4 {
        put(&feat, round * 100..(round + 1) * 100, "f");
    }
    p.create_tag("keep", "feat").unwrap();
    drop(feat);
    p.delete_branch("feat").unwrap();
    store.gc().unwrap();
    store.close().unwrap();
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    store.gc().unwrap();
    let tag = p.tag("keep").unwrap();
    for i in 0..400 {
        assert_eq!(
            value(tag.get(key(i)).unwrap()),
            Some(format!("f{i}")),
            "key {i}"
        );
    }
    let data_files = || {
        mem.list("t.0")
            .unwrap()
            .into_iter()
            .filter(|n| n.starts_with("data_"))
            .count()
    };
    let files_with_tag = data_files();
    // Deleted explicitly, the tag's files go at the next GC (a held view keeps them until
    // it is dropped).
    p.delete_tag("keep").unwrap();
    assert_eq!(value(tag.get(key(7)).unwrap()), Some("f7".into()));
    store.gc().unwrap();
    assert_eq!(value(tag.get(key(399)).unwrap()), Some("f399".into()));
    drop(tag);
    store.gc().unwrap();
    let files_after = data_files();
    assert!(
        files_after < files_with_tag,
        "{files_after} data files after deleting the tag, {files_with_tag} before"
    );
    assert_eq!(p.tag("keep").unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(
        p.delete_tag("keep").unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

#[test]
fn a_tag_and_a_branch_may_not_share_a_name() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    p.create_branch("feat", "main").unwrap();
    // Tag after branch: the same name, and one that differs only by case.
    assert_eq!(
        p.create_tag("feat", "main").unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    let e = p.create_tag("FEAT", "main").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("only by case"), "{e}");
    assert_eq!(
        p.create_tag("main", "main").unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    // Branch after tag: the same both ways.
    p.create_tag("v1", "main").unwrap();
    assert_eq!(
        p.create_branch("v1", "main").unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    let e = p.create_branch("V1", "main").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    // Tag after tag.
    assert_eq!(
        p.create_tag("v1", "feat").unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    assert_eq!(
        p.create_tag("V1", "feat").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    // Names outside the grammar are refused as branch names are.
    assert_eq!(
        p.create_tag("v_1", "main").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    // Once the tag is deleted its name is free for a branch, and the other way round.
    p.delete_tag("v1").unwrap();
    p.create_branch("v1", "main").unwrap();
    p.delete_branch("feat").unwrap();
    p.create_tag("feat", "main").unwrap();
    let names: Vec<String> = p
        .tags()
        .unwrap()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(names, ["feat"]);
}

/// Every sync and the rename of the tag's creation, failing in turn, then power lost with
/// nothing unsynced kept and with everything kept: after reopening, the tag either does not
/// exist (and its name is free) or holds the whole state.
#[test]
fn crash_during_tag_creation_leaves_either_no_tag_or_a_whole_tag() {
    let mut outcomes = (0, 0);
    for op in [
        FaultOp::Sync,
        FaultOp::Rename,
        FaultOp::Create,
        FaultOp::Write,
    ] {
        for skip in 0..6u64 {
            for policy in [CrashPolicy::DropAllUnsynced, CrashPolicy::KeepAllUnsynced] {
                let faults = FaultInjector::new();
                let mem = MemoryStorage::with_faults(faults.clone());
                let clock = ManualClock::new(T0);
                let store = open(&mem, &clock);
                let p = store.partition("t", 0).unwrap();
                let main = p.branch("main").unwrap();
                put(&main, 0..40, "a");
                // Checkpointed now, so the tag's own writes are what the faults hit.
                p.create_tag("warmup", "main").unwrap();
                faults.fail_after(op, skip, 5 /* EIO */, u64::MAX);
                let created = p.create_tag("v1", "main");
                faults.clear();
                drop(main);
                drop(p);
                let _ = store.close();
                drop(store);
                mem.crash(policy);
                let store = open(&mem, &clock);
                let p = store.partition("t", 0).unwrap();
                let listed = p.tags().unwrap().iter().any(|t| t.name.as_str() == "v1");
                let ctx = format!("{op:?} after {skip}, {policy:?}, created: {created:?}");
                if created.is_ok() {
                    assert!(listed, "an acknowledged tag was lost: {ctx}");
                }
                if listed {
                    let tag = p.tag("v1").unwrap_or_else(|e| panic!("{ctx}: {e}"));
                    for i in 0..40 {
                        assert_eq!(
                            value(tag.get(key(i)).unwrap()),
                            Some(format!("a{i}")),
                            "{ctx}"
                        );
                    }
                    outcomes.1 += 1;
                } else {
                    // No tag and no debris: the name can be used.
                    assert!(
                        mem.list("t.0")
                            .unwrap()
                            .iter()
                            .all(|n| !n.starts_with("tag_v1")),
                        "{ctx}: {:?}",
                        mem.list("t.0").unwrap()
                    );
                    p.create_tag("v1", "main").unwrap();
                    outcomes.0 += 1;
                }
                let _ = store.close();
            }
        }
    }
    // Both outcomes occurred: the faults really hit the creation.
    assert!(outcomes.0 > 0 && outcomes.1 > 0, "{outcomes:?}");
}

/// A tag file is hostile input like a manifest: a flipped byte is `Corruption` naming the
/// file, and GC (for which the tag is a root) deletes nothing while it cannot read it.
#[test]
fn a_damaged_tag_is_corruption_and_gc_deletes_nothing() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    let feat = p.create_branch("feat", "main").unwrap();
    put(&feat, 0..200, "f");
    p.create_tag("v1", "feat").unwrap();
    drop(feat);
    p.delete_branch("feat").unwrap();
    let path = "t.0/tag_v1";
    let mut bytes = mem.read_file(path, 1 << 20).unwrap();
    bytes[40] ^= 0x10;
    mem.write_atomic(path, &bytes).unwrap();
    let e = p.tag("v1").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert!(e.to_string().contains("tag_v1"), "{e}");
    let before: Vec<String> = mem.list("t.0").unwrap();
    assert_eq!(p.gc().unwrap_err().kind(), ErrorKind::Corruption);
    assert_eq!(
        mem.list("t.0").unwrap(),
        before,
        "GC deleted files it could not prove unreachable"
    );
    // Two records where one belongs is damage too.
    let mut two = bytes.clone();
    two[40] ^= 0x10;
    let doubled = [two.clone(), two].concat();
    mem.write_atomic(path, &doubled).unwrap();
    let e = p.tag("v1").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
}
