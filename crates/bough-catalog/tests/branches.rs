//! The catalog on its own: terms and fencing, tombstones, recovery of interrupted branch
//! operations (driven file by file on a memory store), archives.

use std::sync::Arc;

use bough_catalog::Partition;
use bough_io::{ErrorKind, FaultInjector, FaultOp, MemoryStorage, Storage};
use bough_names::{BranchName, PartitionDir, TableName};
use bough_tree::btree::{self, Mutation, Op};
use bough_tree::cache::PageCache;
use bough_tree::head::{Head, HeadConfig};
use bough_tree::page::leaf::ValueLoc;

const NOW: u64 = 1_700_000_000_000;

fn cfg() -> HeadConfig {
    HeadConfig {
        page_size: 4096,
        file_pages: 64,
        preallocate: 64 * 4096,
        checkpoint_chunks: 128,
        manifest_rewrite_bytes: 16 << 20,
        ..HeadConfig::default()
    }
}

fn dir() -> PartitionDir {
    PartitionDir::new(TableName::new("t").unwrap(), 0)
}

fn open(storage: &MemoryStorage) -> Partition {
    Partition::open(
        Arc::new(storage.clone()) as Arc<dyn Storage>,
        dir(),
        cfg(),
        Arc::new(PageCache::new(16 << 20)),
        true,
        true,
    )
    .unwrap()
}

fn bn(s: &str) -> BranchName {
    BranchName::new(s).unwrap()
}

fn put(head: &mut Head, prefix: &str, range: std::ops::Range<u32>, tag: &str) {
    let muts: Vec<Mutation> = range
        .map(|i| Mutation {
            key: format!("{prefix}{i:06}").into_bytes(),
            op: Op::Put {
                value: format!("{tag}:{i}").into_bytes(),
                timestamp: NOW,
                expire_at: 0,
            },
        })
        .collect();
    head.commit(&muts, NOW).unwrap();
}

fn get(head: &Head, key: &str) -> Option<String> {
    let s = head.snapshot();
    btree::get(s.as_ref(), s.root, key.as_bytes())
        .unwrap()
        .filter(|e| !e.is_tombstone())
        .map(|e| match e.value {
            ValueLoc::Inline(v) => String::from_utf8(v).unwrap(),
            other => panic!("unexpected overflow value {other:?}"),
        })
}

fn count(head: &Head) -> usize {
    let s = head.snapshot();
    let mut c = btree::Cursor::seek(s.as_ref(), s.root, None).unwrap();
    let mut n = 0;
    while let Some(e) = c.next_entry(s.as_ref()).unwrap() {
        n += usize::from(!e.is_tombstone());
    }
    n
}

fn files(storage: &MemoryStorage) -> Vec<String> {
    let mut v = storage.list("t.0").unwrap();
    v.sort();
    v
}

#[test]
fn stale_term_is_fenced() {
    let mem = MemoryStorage::new();
    let p = open(&mem);
    let mut main = p.open_head(&BranchName::main()).unwrap();
    put(&mut main, "k", 0..100, "main");
    let feature = bn("feature");
    drop(p.create_branch(&mut main, &feature, NOW).unwrap());

    // Two heads of `feature` at term 0 (opened one after the other, as two owners would);
    // the second hands the branch to term 1.
    let mut stale = p.open_head(&feature).unwrap();
    assert_eq!(stale.term(), 0);
    put(&mut stale, "s", 0..10, "before");
    let mut owner = p.open_head(&feature).unwrap();
    let mut next = p.open_new_term(&mut owner, NOW).unwrap();
    assert_eq!(next.term(), 1);
    assert_eq!(p.live_term(&feature).unwrap(), 1);

    let muts = [Mutation {
        key: b"s000000".to_vec(),
        op: Op::Put {
            value: b"stale".to_vec(),
            timestamp: NOW + 1,
            expire_at: 0,
        },
    }];
    for head in [&mut stale, &mut owner] {
        let e = head.commit(&muts, NOW).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Fenced, "{e}");
        assert!(e.to_string().contains("t.0@feature"), "{e}");
        // Checkpoints (archives, forks) are refused too once there is something to write.
        let e = head.checkpoint(NOW).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Fenced, "{e}");
    }
    // The new term sees everything the old one committed, and writes.
    assert_eq!(get(&next, "s000000").as_deref(), Some("before:0"));
    put(&mut next, "n", 0..10, "next");
    assert_eq!(count(&next), 120);
    // The old term's manifest is gone; a fresh open (another process) finds term 1.
    assert!(!files(&mem).contains(&"manifest_feature_0".to_string()));
    drop((stale, owner, next, main));
    let p2 = open(&mem);
    let reopened = p2.open_head(&feature).unwrap();
    assert_eq!(reopened.term(), 1);
    assert_eq!(count(&reopened), 120);
    assert_eq!(get(&reopened, "s000000").as_deref(), Some("before:0"));
}

#[test]
fn stale_term_of_main_is_fenced() {
    let mem = MemoryStorage::new();
    let p = open(&mem);
    let mut a = p.open_head(&BranchName::main()).unwrap();
    let mut b = p.open_head(&BranchName::main()).unwrap();
    put(&mut a, "k", 0..10, "a");
    let mut c = p.open_new_term(&mut b, NOW).unwrap();
    assert_eq!(c.term(), 1);
    let muts = [Mutation {
        key: b"x".to_vec(),
        op: Op::Delete {
            timestamp: NOW,
            expire_at: 0,
        },
    }];
    assert_eq!(a.commit(&muts, NOW).unwrap_err().kind(), ErrorKind::Fenced);
    put(&mut c, "k", 0..10, "c");
    // A third term fences the second.
    let mut d = p.open_new_term(&mut c, NOW).unwrap();
    assert_eq!(c.commit(&muts, NOW).unwrap_err().kind(), ErrorKind::Fenced);
    put(&mut d, "k", 10..20, "d");
    assert_eq!(count(&d), 20);
}

#[test]
fn deleted_branch_head_is_fenced_and_name_is_gone() {
    let mem = MemoryStorage::new();
    let p = open(&mem);
    let mut main = p.open_head(&BranchName::main()).unwrap();
    put(&mut main, "k", 0..10, "main");
    let mut feature = p.create_branch(&mut main, &bn("feature"), NOW).unwrap();
    put(&mut feature, "f", 0..10, "feature");
    p.delete_branch(&bn("feature")).unwrap();
    let muts = [Mutation {
        key: b"x".to_vec(),
        op: Op::Delete {
            timestamp: NOW,
            expire_at: 0,
        },
    }];
    assert_eq!(
        feature.commit(&muts, NOW).unwrap_err().kind(),
        ErrorKind::Fenced
    );
    assert_eq!(
        p.open_head(&bn("feature")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        p.delete_branch(&bn("feature")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        p.delete_branch(&BranchName::main()).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(p.branches().unwrap(), [BranchName::main()]);
    // A tombstone remembers the last term; no manifest is left.
    let ct = p.current_term(&bn("feature")).unwrap().unwrap();
    assert!(ct.deleted);
    assert_eq!(ct.term, 0);
    assert!(
        !files(&mem)
            .iter()
            .any(|n| n.starts_with("manifest_feature"))
    );
}

/// A name deleted and created again in the same process gets a term above the old one and
/// a head that can commit; heads of the deleted incarnation stay fenced.
#[test]
fn regression_recreated_branch_is_not_fenced() {
    let mem = MemoryStorage::new();
    let p = open(&mem);
    let mut main = p.open_head(&BranchName::main()).unwrap();
    put(&mut main, "k", 0..10, "main");
    let mut old = p.create_branch(&mut main, &bn("feature"), NOW).unwrap();
    p.delete_branch(&bn("feature")).unwrap();
    let mut new = p.create_branch(&mut main, &bn("feature"), NOW).unwrap();
    assert_eq!(new.term(), 1);
    put(&mut new, "f", 0..10, "new");
    assert_eq!(count(&new), 20);
    let muts = [Mutation {
        key: b"x".to_vec(),
        op: Op::Delete {
            timestamp: NOW,
            expire_at: 0,
        },
    }];
    assert_eq!(
        old.commit(&muts, NOW).unwrap_err().kind(),
        ErrorKind::Fenced
    );
    // The same through an archive.
    let archive = p.archive(&mut main, NOW, NOW).unwrap();
    drop(p.branch_from_archive(&archive, &bn("pit"), NOW).unwrap());
    p.delete_branch(&bn("pit")).unwrap();
    let mut pit = p.branch_from_archive(&archive, &bn("pit"), NOW).unwrap();
    assert_eq!(pit.term(), 1);
    put(&mut pit, "p", 0..10, "pit");
    assert_eq!(count(&pit), 20);
}

#[test]
fn recovery_completes_a_creation_missing_current_term() {
    let mem = MemoryStorage::new();
    {
        let p = open(&mem);
        let mut main = p.open_head(&BranchName::main()).unwrap();
        put(&mut main, "k", 0..50, "main");
        let mut f = p.create_branch(&mut main, &bn("feature"), NOW).unwrap();
        put(&mut f, "f", 0..50, "feature");
    }
    mem.delete("t.0/CURRENT_TERM.feature").unwrap();
    let p = open(&mem);
    let ct = p.current_term(&bn("feature")).unwrap().unwrap();
    assert!(!ct.deleted);
    assert_eq!(ct.term, 0);
    let f = p.open_head(&bn("feature")).unwrap();
    assert_eq!(count(&f), 100);
    assert_eq!(get(&f, "f000049").as_deref(), Some("feature:49"));
}

#[test]
fn recovery_finishes_an_interrupted_deletion() {
    let mem = MemoryStorage::new();
    let tombstone_written;
    {
        let p = open(&mem);
        let mut main = p.open_head(&BranchName::main()).unwrap();
        put(&mut main, "k", 0..50, "main");
        let mut f = p.create_branch(&mut main, &bn("feature"), NOW).unwrap();
        put(&mut f, "f", 0..50, "feature");
        p.archive(&mut f, NOW, NOW).unwrap();
        // The deletion's first step only: the tombstone.
        p.write_current_term(&bn("feature"), 0, true).unwrap();
        tombstone_written = files(&mem);
    }
    assert!(tombstone_written.contains(&"manifest_feature_0".to_string()));
    let p = open(&mem);
    let after = files(&mem);
    assert!(
        !after.iter().any(|n| n.starts_with("manifest_feature")),
        "{after:?}"
    );
    assert_eq!(
        p.open_head(&bn("feature")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(p.branches().unwrap(), [BranchName::main()]);
    // The name can be used again, above the deleted term.
    let mut main = p.open_head(&BranchName::main()).unwrap();
    let f = p.create_branch(&mut main, &bn("feature"), NOW).unwrap();
    assert_eq!(f.term(), 1);
}

#[test]
fn recovery_settles_an_interrupted_term_change() {
    // Crash after the new term's manifest, before CURRENT_TERM: the new term wins.
    let mem = MemoryStorage::new();
    {
        let p = open(&mem);
        let mut main = p.open_head(&BranchName::main()).unwrap();
        put(&mut main, "k", 0..50, "main");
        let mut next = p.open_new_term(&mut main, NOW).unwrap();
        put(&mut next, "n", 0..50, "next");
        // Roll CURRENT_TERM back to the old term, and the old manifest back into place.
        p.write_current_term(&BranchName::main(), 0, false).unwrap();
    }
    let p = open(&mem);
    assert_eq!(p.live_term(&BranchName::main()).unwrap(), 1);
    let main = p.open_head(&BranchName::main()).unwrap();
    assert_eq!(main.term(), 1);
    assert_eq!(count(&main), 100);

    // Crash after CURRENT_TERM, before the old manifest was removed: it is removed now.
    let mem = MemoryStorage::new();
    let old_manifest;
    {
        let p = open(&mem);
        let mut main = p.open_head(&BranchName::main()).unwrap();
        put(&mut main, "k", 0..50, "main");
        old_manifest = mem.read_file("t.0/manifest_main_0", 1 << 30).unwrap();
        let _next = p.open_new_term(&mut main, NOW).unwrap();
    }
    mem.create_new("t.0/manifest_main_0", &old_manifest)
        .unwrap();
    let p = open(&mem);
    assert!(!files(&mem).contains(&"manifest_main_0".to_string()));
    let main = p.open_head(&BranchName::main()).unwrap();
    assert_eq!(main.term(), 1);
    assert_eq!(count(&main), 50);
}

/// A failure between the two steps of a creation (the manifest is written, `CURRENT_TERM`
/// is not): the caller sees the error and nothing is left behind — no manifest, no branch
/// after a reopen — so a retry creates the branch anew.
#[test]
fn failed_current_term_write_leaves_nothing_behind() {
    let faults = FaultInjector::new();
    let mem = MemoryStorage::with_faults(faults.clone());
    let p = open(&mem);
    let mut main = p.open_head(&BranchName::main()).unwrap();
    put(&mut main, "k", 0..50, "main");
    // Checkpoint now so the creation writes exactly: manifest (create_new), CURRENT_TERM
    // (write_atomic: its rename is the first Rename after the manifest's).
    main.checkpoint(NOW).unwrap();
    faults.fail_after(FaultOp::Rename, 1, 5, 1);
    let e = p.create_branch(&mut main, &bn("feature"), NOW).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(
        !files(&mem).iter().any(|n| n.contains("feature")),
        "{:?}",
        files(&mem)
    );
    assert!(p.current_term(&bn("feature")).unwrap().is_none());
    assert_eq!(p.branches().unwrap(), [BranchName::main()]);
    drop(main);
    drop(p);
    let p = open(&mem);
    assert_eq!(p.branches().unwrap(), [BranchName::main()]);
    let mut main = p.open_head(&BranchName::main()).unwrap();
    let f = p.create_branch(&mut main, &bn("feature"), NOW).unwrap();
    assert_eq!(f.term(), 0);
    assert_eq!(count(&f), 50);
}

/// The same failure when removing the new manifest fails too: the manifest stays, and the
/// next open finishes the creation (as after a crash between the two steps).
#[test]
fn failed_creation_whose_cleanup_fails_is_finished_by_recovery() {
    let faults = FaultInjector::new();
    let mem = MemoryStorage::with_faults(faults.clone());
    let p = open(&mem);
    let mut main = p.open_head(&BranchName::main()).unwrap();
    put(&mut main, "k", 0..50, "main");
    main.checkpoint(NOW).unwrap();
    faults.fail_after(FaultOp::Rename, 1, 5, 1);
    faults.fail_next(FaultOp::Delete, 5, 1);
    let e = p.create_branch(&mut main, &bn("feature"), NOW).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(files(&mem).contains(&"manifest_feature_0".to_string()));
    drop(main);
    drop(p);
    let p = open(&mem);
    assert_eq!(p.branches().unwrap(), [bn("feature"), BranchName::main()]);
    let f = p.open_head(&bn("feature")).unwrap();
    assert_eq!(count(&f), 50);
}

#[test]
fn names_are_checked_on_creation() {
    let mem = MemoryStorage::new();
    let p = open(&mem);
    let mut main = p.open_head(&BranchName::main()).unwrap();
    drop(p.create_branch(&mut main, &bn("feature"), NOW).unwrap());
    let e = p.create_branch(&mut main, &bn("feature"), NOW).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AlreadyExists);
    assert!(e.to_string().contains("t.0@feature"), "{e}");
    let e = p.create_branch(&mut main, &bn("FeaTure"), NOW).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let e = p
        .create_branch(&mut main, &BranchName::main(), NOW)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AlreadyExists);
    assert!(BranchName::new("Main").is_err());
    assert!(BranchName::new("MAIN").is_err());
    assert_eq!(p.branches().unwrap(), [bn("feature"), BranchName::main()]);
}

#[test]
fn describe_and_archives() {
    let mem = MemoryStorage::new();
    let p = open(&mem);
    let mut main = p.open_head(&BranchName::main()).unwrap();
    put(&mut main, "k", 0..10, "main");
    let mut f = p.create_branch(&mut main, &bn("feature"), NOW + 5).unwrap();
    let a2 = p.archive(&mut f, NOW + 20, NOW).unwrap();
    let a1 = p.archive(&mut f, NOW + 10, NOW).unwrap();
    assert_eq!(
        p.archive(&mut f, NOW + 10, NOW).unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    let info = p.describe(&bn("feature")).unwrap();
    assert_eq!(info.term, 0);
    let origin = info.origin.unwrap();
    assert_eq!(origin.parent, Some((BranchName::main(), 0)));
    assert_eq!(origin.created_at_ms, NOW + 5);
    assert_eq!(origin.fork_version, main.version());
    // Oldest first.
    assert_eq!(info.archives, [a1.clone(), a2.clone()]);
    assert_eq!(p.prune_archives(&bn("feature"), 1).unwrap(), [a1]);
    assert_eq!(p.archives(&bn("feature")).unwrap(), [a2]);
    assert!(p.archives(&BranchName::main()).unwrap().is_empty());
    assert_eq!(
        p.describe(&bn("nosuch")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

/// A merge base names the other branch; after that branch is deleted and its name reused,
/// the base describes a branch that no longer exists. Deleting through the catalog alone
/// (as a crash right after the tombstone leaves it) keeps the base in `main`'s manifest:
/// the merge must still ignore it — using it would treat everything the new `feature` lacks
/// from the old one as deletions — and pruning must drop it, keeping current bases.
#[test]
fn regression_a_recreated_branch_never_uses_its_predecessors_merge_base() {
    let mem = MemoryStorage::new();
    let p = open(&mem);
    let mut main = p.open_head(&BranchName::main()).unwrap();
    put(&mut main, "k", 0..50, "main");
    let (feature, dev) = (bn("feature"), bn("dev"));
    let mut dev_head = p.create_branch(&mut main, &dev, NOW).unwrap();
    let mut old = p.create_branch(&mut main, &feature, NOW).unwrap();
    put(&mut old, "f", 0..20, "old");
    let snap = old.fork_point(NOW).unwrap().snapshot;
    let r = p
        .merge(&mut main, &feature, &snap, Default::default(), NOW + 1)
        .unwrap();
    assert!(r.committed && r.fast_forward, "{r:?}");
    assert_eq!(count(&main), 70);
    let old_term = old.term();
    drop(old);
    p.delete_branch(&feature).unwrap();

    // `feature` again, from `dev`: it shares no history with `main` beyond `dev`'s fork,
    // and `main` recorded no merge with it (only with the old `feature`).
    put(&mut dev_head, "d", 0..5, "dev");
    let mut new = p.create_branch(&mut dev_head, &feature, NOW + 2).unwrap();
    assert!(new.term() > old_term);
    let ct = p.current_term(&feature).unwrap().unwrap();
    assert_eq!((ct.term, ct.first_term), (new.term(), new.term()));
    put(&mut new, "n", 0..5, "new");
    let snap = new.fork_point(NOW + 2).unwrap().snapshot;
    let stale = bough_manifest::merge_bases(main.extensions()).unwrap();
    assert_eq!(stale.len(), 1, "the old base is still recorded");
    assert!(!p.base_is_current(&stale[0]));
    // The stale base is ignored: the merge base is the fork tree's (`feature` ← `dev` ←
    // `main`: main's state where `dev` forked), which brings exactly the new branch's keys.
    let dry = bough_catalog::MergeOptions {
        dry_run: true,
        ..Default::default()
    };
    let r = p.merge(&mut main, &feature, &snap, dry, NOW + 3).unwrap();
    let base = r.base.clone().expect("a base");
    assert_eq!(
        (base.branch.as_str(), base.holder.as_str(), r.applied),
        ("main", "dev", 10),
        "{r:?}"
    );
    assert_eq!(count(&main), 70, "main unchanged");

    // `dev`'s fork base is current and stays; the stale one goes.
    assert_eq!(p.prune_merge_bases(&mut dev_head, NOW + 4).unwrap(), 0);
    assert_eq!(p.prune_merge_bases(&mut main, NOW + 4).unwrap(), 1);
    assert!(
        bough_manifest::merge_bases(main.extensions())
            .unwrap()
            .is_empty()
    );
    let reopened = p.open_head(&BranchName::main()).unwrap();
    assert!(
        bough_manifest::merge_bases(reopened.extensions())
            .unwrap()
            .is_empty(),
        "the pruning is durable"
    );
    // The new incarnation merges with its own parent as usual.
    let r = p
        .merge(&mut dev_head, &feature, &snap, Default::default(), NOW + 5)
        .unwrap();
    assert!(r.committed, "{r:?}");
    assert_eq!(get(&dev_head, "n000004").as_deref(), Some("new:4"));
}

/// New terms and restores keep a branch's first term; a tombstone keeps it too, and the
/// name's next creation starts a new one.
#[test]
fn current_term_records_where_each_incarnation_began() {
    let mem = MemoryStorage::new();
    let p = open(&mem);
    let mut main = p.open_head(&BranchName::main()).unwrap();
    put(&mut main, "k", 0..10, "main");
    let feature = bn("feature");
    let mut f = p.create_branch(&mut main, &feature, NOW).unwrap();
    let first = |p: &Partition| {
        let ct = p.current_term(&feature).unwrap().unwrap();
        (ct.term, ct.first_term, ct.deleted)
    };
    assert_eq!(first(&p), (0, 0, false));
    let mut f = p.open_new_term(&mut f, NOW).unwrap();
    let _f = p.open_new_term(&mut f, NOW).unwrap();
    assert_eq!(first(&p), (2, 0, false));
    p.delete_branch(&feature).unwrap();
    assert_eq!(first(&p), (2, 0, true));
    let mut f = p.create_branch(&mut main, &feature, NOW).unwrap();
    assert_eq!(first(&p), (3, 3, false));
    drop(p.open_new_term(&mut f, NOW).unwrap());
    assert_eq!(first(&p), (4, 3, false));
    // A fresh reader of the directory sees the same.
    let again = open(&mem);
    assert_eq!(first(&again), (4, 3, false));
}

/// Issue 18 §7: the name index answers like a pass over every branch would, through
/// creates, deletes and re-creates, and is rebuilt from storage at open — so a branch an
/// operator put back between two opens holds its name again.
#[test]
fn name_index_follows_creates_deletes_and_what_storage_holds_at_open() {
    use bough_catalog::NameHolder;
    let storage = MemoryStorage::new();
    let p = open(&storage);
    let mut main = p.open_head(&bn("main")).unwrap();
    for n in ["Feat", "other"] {
        p.create_branch(&mut main, &bn(n), NOW).unwrap();
    }
    assert_eq!(
        p.name_holder(&bn("feat")).unwrap(),
        Some(NameHolder::Branch(bn("Feat")))
    );
    assert_eq!(
        p.name_holder(&bn("Feat")).unwrap(),
        Some(NameHolder::Branch(bn("Feat")))
    );
    let e = p.create_branch(&mut main, &bn("FEAT"), NOW).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert_eq!(
        p.create_branch(&mut main, &bn("Feat"), NOW)
            .unwrap_err()
            .kind(),
        ErrorKind::AlreadyExists
    );
    // Deleted, the name and its case folds are free.
    let old_term = p.live_term(&bn("Feat")).unwrap();
    let old = storage
        .read_file(&format!("{}/manifest_Feat_{old_term}", dir()), 1 << 20)
        .unwrap();
    let old_ct = storage
        .read_file(&format!("{}/CURRENT_TERM.Feat", dir()), 4096)
        .unwrap();
    p.delete_branch(&bn("Feat")).unwrap();
    assert_eq!(p.name_holder(&bn("feat")).unwrap(), None);
    p.create_branch(&mut main, &bn("feat"), NOW).unwrap();
    assert_eq!(
        p.name_holder(&bn("FEAT")).unwrap(),
        Some(NameHolder::Branch(bn("feat")))
    );
    p.delete_branch(&bn("feat")).unwrap();
    drop(main);
    drop(p);
    // A hostile operator restores the deleted `Feat` from a backup between two opens: the
    // index is built from storage at open, so `Feat` holds its name again and `feat` is
    // refused as its case fold.
    storage
        .write_atomic(&format!("{}/manifest_Feat_{old_term}", dir()), &old)
        .unwrap();
    storage
        .write_atomic(&format!("{}/CURRENT_TERM.Feat", dir()), &old_ct)
        .unwrap();
    let p = open(&storage);
    assert_eq!(
        p.name_holder(&bn("feat")).unwrap(),
        Some(NameHolder::Branch(bn("Feat")))
    );
    let mut main = p.open_head(&bn("main")).unwrap();
    let e = p.create_branch(&mut main, &bn("feat"), NOW).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert_eq!(
        p.name_holder(&bn("other")).unwrap(),
        Some(NameHolder::Branch(bn("other")))
    );
}
