//! Protected branches and branch expiry (TTL), driven by the injected clock: protection
//! refuses delete, reset, restore and non-fast-forward merges until lifted; an expiring
//! parent is deleted as a user would delete it and its children keep working; an expiry on
//! a protected branch or one with tags needs the explicit flag.

use std::sync::Arc;

use bough::io::MemoryStorage;
use bough::{Branch, ErrorKind, ManualClock, MergeOptions, Options, Store, WriteBatch};

const T0: u64 = 1_700_000_000_000;
const HOUR: u64 = 3_600_000;

fn open(mem: &MemoryStorage, clock: &ManualClock) -> Store {
    Store::builder(Options::in_memory().maintenance_interval_ms(0))
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

fn refused_as_protected(e: bough::Error) {
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("is protected"), "{e}");
}

#[test]
fn protected_main_refuses_reset_restore_and_non_ff_merge_until_unprotected() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    put(&main, 0..10, "m");
    let archive = main.archive().unwrap();
    let feat = p.create_branch("feat", "main").unwrap();
    put(&feat, 100..110, "f");
    let policy = p.protect("main").unwrap();
    assert!(policy.protected);
    // A fast-forward only moves main forward: allowed.
    let r = p.merge("feat", "main", MergeOptions::default()).unwrap();
    assert!(r.fast_forward && r.committed, "{r:?}");
    // Now both changed: a three-way merge into main is refused, and nothing changes.
    put(&main, 0..1, "m2-");
    put(&feat, 200..201, "g");
    refused_as_protected(
        p.merge("feat", "main", MergeOptions::default())
            .unwrap_err(),
    );
    assert_eq!(main.get_blocking(key(200)).unwrap(), None);
    refused_as_protected(p.reset_branch("main", "feat").unwrap_err());
    refused_as_protected(main.restore(&archive, "backup").unwrap_err());
    assert!(!p.branches().unwrap().contains(&"backup".to_string()));
    // Durable: still protected after a reopen, and shown by describe.
    drop((main, feat, p));
    store.close().unwrap();
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    assert!(p.describe("main").unwrap().policy.protected);
    refused_as_protected(p.reset_branch("main", "feat").unwrap_err());
    // Unprotected, the same merge goes through.
    assert!(!p.unprotect("main").unwrap().protected);
    let r = p.merge("feat", "main", MergeOptions::default()).unwrap();
    assert!(r.committed && !r.fast_forward, "{r:?}");
}

#[test]
fn a_protected_branch_refuses_a_delete() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    p.create_branch("release", "main").unwrap();
    p.protect("release").unwrap();
    refused_as_protected(p.delete_branch("release").unwrap_err());
    assert!(p.branches().unwrap().contains(&"release".to_string()));
    p.unprotect("release").unwrap();
    p.delete_branch("release").unwrap();
    assert!(!p.branches().unwrap().contains(&"release".to_string()));
    // main is protectable; it cannot be deleted either way.
    p.protect("main").unwrap();
    assert_eq!(
        p.delete_branch("main").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn ttl_expiring_a_parent_whose_children_keep_reading() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    let parent = p.create_branch_with_ttl("parent", "main", HOUR).unwrap();
    put(&parent, 0..300, "p");
    let child = p.create_branch("child", "parent").unwrap();
    put(&child, 1000..1010, "c");
    let grandchild = p.create_branch("grandchild", "child").unwrap();
    let info = p.describe("parent").unwrap();
    assert_eq!(info.policy.expires_at_ms, Some(T0 + HOUR));
    // Not yet.
    clock.advance(HOUR - 1);
    store.run_maintenance().unwrap();
    assert!(p.branches().unwrap().contains(&"parent".to_string()));
    clock.advance(1);
    store.run_maintenance().unwrap();
    assert!(!p.branches().unwrap().contains(&"parent".to_string()));
    assert_eq!(
        parent.get_blocking(key(0)).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    // GC runs after the deletion (run_maintenance collects too); the child still reads
    // every key it inherited and its own, and can be written and merged.
    store.gc().unwrap();
    for i in 0..300 {
        let v = child.get_blocking(key(i)).unwrap().unwrap();
        assert_eq!(v.value, format!("p{i}").into_bytes());
    }
    // (A merge with main, the grandparent, needs a merge base from the lineage: issue 18
    // §1. Merges with the child's own fork relatives work as before.)
    put(&child, 2000..2005, "w");
    put(&grandchild, 3000..3005, "g");
    let r = p
        .merge("grandchild", "child", MergeOptions::default())
        .unwrap();
    assert!(r.committed && !r.fast_forward, "{r:?}");
    assert!(child.get_blocking(key(3004)).unwrap().is_some());
    let r = p
        .merge("child", "grandchild", MergeOptions::default())
        .unwrap();
    assert!(r.committed, "{r:?}");
    assert!(grandchild.get_blocking(key(2004)).unwrap().is_some());
    assert!(grandchild.get_blocking(key(299)).unwrap().is_some());
    let main = p.branch("main").unwrap();
    // And after a reopen.
    drop((child, grandchild, main, parent, p));
    store.close().unwrap();
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    let child = p.branch("child").unwrap();
    assert!(child.get_blocking(key(42)).unwrap().is_some());
}

#[test]
fn an_expiry_that_passed_while_closed_deletes_the_branch_at_open_and_can_be_extended() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    p.create_branch("short", "main").unwrap();
    p.create_branch("extended", "main").unwrap();
    p.set_expiry("short", Some(T0 + HOUR), false).unwrap();
    p.set_expiry("extended", Some(T0 + HOUR), false).unwrap();
    // Extended before it expires.
    p.set_expiry("extended", Some(T0 + 3 * HOUR), false)
        .unwrap();
    store.close().unwrap();
    clock.advance(2 * HOUR);
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    let names = p.branches().unwrap();
    assert!(!names.contains(&"short".to_string()), "{names:?}");
    assert!(names.contains(&"extended".to_string()), "{names:?}");
    // Taken off: never expires.
    p.set_expiry("extended", None, false).unwrap();
    clock.advance(10 * HOUR);
    store.run_maintenance().unwrap();
    assert!(p.branches().unwrap().contains(&"extended".to_string()));
}

#[test]
fn ttl_refused_on_a_protected_branch_or_one_with_tags_without_the_explicit_flag() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    p.create_branch("guarded", "main").unwrap();
    p.protect("guarded").unwrap();
    let e = p.set_expiry("guarded", Some(T0 + HOUR), false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("--force"), "{e}");
    assert_eq!(p.describe("guarded").unwrap().policy.expires_at_ms, None);
    p.create_branch("tagged", "main").unwrap();
    p.create_tag("tagged-v1", "tagged").unwrap();
    let e = p.set_expiry("tagged", Some(T0 + HOUR), false).unwrap_err();
    assert!(e.to_string().contains("tagged-v1"), "{e}");
    // main can never expire.
    assert_eq!(
        p.set_expiry("main", Some(T0 + HOUR), true)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    // Explicitly: accepted, and when it passes the branch goes (protected or not); the tag
    // stays.
    p.set_expiry("guarded", Some(T0 + HOUR), true).unwrap();
    p.set_expiry("tagged", Some(T0 + HOUR), true).unwrap();
    clock.advance(HOUR);
    store.run_maintenance().unwrap();
    let names = p.branches().unwrap();
    assert!(!names.contains(&"guarded".to_string()), "{names:?}");
    assert!(!names.contains(&"tagged".to_string()), "{names:?}");
    assert_eq!(p.tags().unwrap().len(), 1);
}

/// At open, one pass over the state files finds the expiries and the terms every name has
/// used: the expired branch goes, its child (whose files carry the expired term) keeps
/// reading, and a branch created again under the expired name starts above that term.
#[test]
fn a_name_expired_at_open_is_created_again_at_a_term_above_the_expired_one() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    let agent = p.create_branch("agent", "main").unwrap();
    put(&agent, 0..10, "a");
    agent.checkpoint_blocking().unwrap();
    let child = p.create_branch("agent-child", "agent").unwrap();
    put(&child, 10..12, "c");
    let old = p.describe("agent").unwrap().term;
    p.set_expiry("agent", Some(T0 + HOUR), false).unwrap();
    drop((agent, child));
    store.close().unwrap();
    clock.advance(2 * HOUR);
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    assert!(!p.branches().unwrap().contains(&"agent".to_string()));
    let child = p.branch("agent-child").unwrap();
    assert_eq!(child.get_blocking(key(3)).unwrap().unwrap().value, b"a3");
    let again = p.create_branch("agent", "main").unwrap();
    assert!(p.describe("agent").unwrap().term > old);
    assert!(again.get_blocking(key(3)).unwrap().is_none());
    assert_eq!(p.describe("agent").unwrap().policy.expires_at_ms, None);
}

/// The `CURRENT_TERM` record at `branch` of partition `t.0` in `mem`.
fn term_record(mem: &MemoryStorage, branch: &str) -> bough_manifest::CurrentTerm {
    use bough::io::Storage;
    let bytes = mem
        .read_file(&format!("t.0/CURRENT_TERM.{branch}"), 4096)
        .unwrap();
    bough_manifest::CurrentTerm::decode(&bytes).unwrap()
}

/// Rewrites every `CURRENT_TERM` record of `t.0` as version 2 wrote it (40 bytes, no
/// expiry hint): a store written before version 3.
fn downgrade_term_records(mem: &MemoryStorage) -> usize {
    use bough::io::Storage;
    use bough_manifest::checksum::{Domain, checksum};
    let mut n = 0;
    for name in mem.list("t.0").unwrap() {
        if !name.starts_with("CURRENT_TERM.") {
            continue;
        }
        let path = format!("t.0/{name}");
        let v3 = mem.read_file(&path, 4096).unwrap();
        assert_eq!(v3.len(), 48, "{name}");
        let mut v2 = v3[..40].to_vec();
        v2[8..12].copy_from_slice(&2u32.to_le_bytes());
        let flags = u32::from_le_bytes(v2[12..16].try_into().unwrap()) & 1;
        v2[12..16].copy_from_slice(&flags.to_le_bytes());
        let sum = checksum(Domain::CurrentTerm, &v2[8..]);
        v2[0..8].copy_from_slice(&sum.to_le_bytes());
        mem.write_atomic(&path, &v2).unwrap();
        n += 1;
    }
    n
}

/// Partition `t` with `idle` branches that never expire and `short`, expiring at T0 + 1 h;
/// closed.
fn idle_branches_and_one_expiring(idle: usize) -> (MemoryStorage, ManualClock) {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    put(&p.branch("main").unwrap(), 0..10, "m");
    for i in 0..idle {
        drop(p.create_branch(&format!("idle{i}"), "main").unwrap());
    }
    p.create_branch("short", "main").unwrap();
    p.set_expiry("short", Some(T0 + HOUR), false).unwrap();
    store.close().unwrap();
    (mem, clock)
}

/// Opens `t` at T0 + 2 h: the files read by the open (store, partition, expiry at open),
/// and the branches left.
fn reads_of_open_after_expiry(mem: &MemoryStorage, clock: &ManualClock) -> (u64, Vec<String>) {
    clock.set(T0 + 2 * HOUR);
    let store = open(mem, clock);
    let before = store.io_stats();
    // The partition opens at its first use.
    let names = store.partition("t", 0).unwrap().branches().unwrap();
    let reads = store.io_stats().since(&before).reads;
    store.close().unwrap();
    (reads, names)
}

/// Each branch's `CURRENT_TERM` record says when it can expire at the earliest, so opening
/// a partition finds the branches whose expiry passed while it was closed from the records
/// recovery reads anyway: no manifest of an idle branch is read for it. A store whose
/// records are version 2 (no hint) still expires its branches at open, reading every
/// branch's manifest to find out.
#[test]
fn open_finds_expired_branches_in_the_term_records_and_in_version_2_stores() {
    const IDLE: usize = 40;
    let (mem, clock) = idle_branches_and_one_expiring(IDLE);
    assert_eq!(
        term_record(&mem, "short").expiry,
        bough_manifest::ExpiryHint::NotBefore(T0 + HOUR)
    );
    assert_eq!(
        term_record(&mem, "idle0").expiry,
        bough_manifest::ExpiryHint::Never
    );
    let old = mem.clone_durable();
    let (hinted_reads, names) = reads_of_open_after_expiry(&mem, &clock);
    assert!(!names.contains(&"short".to_string()), "{names:?}");
    assert_eq!(names.len(), IDLE + 1, "{names:?}");
    assert!(
        hinted_reads < (IDLE as u64) * 2 + 20,
        "open read {hinted_reads} files for {IDLE} idle branches"
    );
    // The same store as version 2 wrote it.
    assert_eq!(downgrade_term_records(&old), IDLE + 2);
    let (v2_reads, names) = reads_of_open_after_expiry(&old, &clock);
    assert!(!names.contains(&"short".to_string()), "{names:?}");
    assert_eq!(names.len(), IDLE + 1, "{names:?}");
    assert!(
        v2_reads >= hinted_reads + IDLE as u64,
        "version-2 open read {v2_reads} files, hinted {hinted_reads}: the hints saved no reads"
    );
    // Records written from then on carry the hint again.
    let store = open(&old, &clock);
    let p = store.partition("t", 0).unwrap();
    p.set_expiry("idle1", Some(T0 + 5 * HOUR), false).unwrap();
    store.close().unwrap();
    assert_eq!(
        term_record(&old, "idle1").expiry,
        bough_manifest::ExpiryHint::NotBefore(T0 + 5 * HOUR)
    );
}

/// An operator restores a `CURRENT_TERM` record saved before the branch's expiry was
/// extended: its hint is earlier than the manifest's expiry. Open takes the hint only as a
/// reason to look, reads the manifest and keeps the branch until the expiry it records.
#[test]
fn a_restored_term_record_with_an_earlier_hint_deletes_nothing_before_its_time() {
    use bough::io::Storage;
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    let b = p.create_branch("extended", "main").unwrap();
    put(&b, 0..5, "e");
    p.set_expiry("extended", Some(T0 + HOUR), false).unwrap();
    let saved = mem.read_file("t.0/CURRENT_TERM.extended", 4096).unwrap();
    p.set_expiry("extended", Some(T0 + 3 * HOUR), false)
        .unwrap();
    drop(b);
    store.close().unwrap();
    mem.write_atomic("t.0/CURRENT_TERM.extended", &saved)
        .unwrap();
    clock.set(T0 + 2 * HOUR);
    let store = open(&mem, &clock);
    let p = store.partition("t", 0).unwrap();
    assert!(p.branches().unwrap().contains(&"extended".to_string()));
    assert_eq!(
        p.describe("extended").unwrap().policy.expires_at_ms,
        Some(T0 + 3 * HOUR)
    );
    let b = p.branch("extended").unwrap();
    assert_eq!(b.get_blocking(key(3)).unwrap().unwrap().value, b"e3");
    drop(b);
    store.run_maintenance().unwrap();
    assert!(p.branches().unwrap().contains(&"extended".to_string()));
    clock.set(T0 + 4 * HOUR);
    store.run_maintenance().unwrap();
    assert!(!p.branches().unwrap().contains(&"extended".to_string()));
}
