//! Point-in-time branches and restores (issue 18 §5): a branch of any branch — root or
//! child — as it was at any instant inside `history_window_ms`, at commit granularity,
//! with no archive made in advance; GC keeps what the window needs and prunes the rest.
//! Every scenario runs with the write buffer on (commits in the log between checkpoints),
//! with a tiny buffer (a checkpoint every few commits) and with it off (every commit a
//! manifest record), on the injected clock.

use std::collections::BTreeMap;
use std::sync::Arc;

use bough::check::CheckOptions;
use bough::io::MemoryStorage;
use bough::{
    Branch, Clock, ErrorKind, ManualClock, MergeOptions, Options, ScanOptions, Store, WriteBatch,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const T0: u64 = 1_700_000_000_000;
const HOUR: u64 = 3_600_000;

/// The write-buffer settings every scenario runs with: default (64 MiB), tiny, off.
const BUFFERS: [u64; 3] = [64 << 20, 2048, 0];

fn open(mem: &MemoryStorage, clock: &ManualClock, buffer: u64) -> Store {
    Store::builder(
        Options::in_memory()
            .maintenance_interval_ms(0)
            .history_window_ms(HOUR)
            .write_buffer_bytes(buffer),
    )
    .memory(mem.clone())
    .clock(Arc::new(clock.clone()))
    .open()
    .unwrap()
}

fn contents(b: &Branch) -> Model {
    b.scan_blocking(&ScanOptions::default())
        .unwrap()
        .entries
        .into_iter()
        .map(|kv| (kv.key, kv.value.value))
        .collect()
}

/// One commit of `n` keys from `from`, values tagged `tag`; mirrored in `model`.
fn commit(b: &Branch, model: &mut Model, from: usize, n: usize, tag: &str) {
    let mut wb = WriteBatch::new();
    for i in from..from + n {
        let (k, v) = (
            format!("k{i:04}").into_bytes(),
            format!("{tag}-{i}").into_bytes(),
        );
        wb.put(k.clone(), v.clone());
        model.insert(k, v);
    }
    b.write_blocking(wb).unwrap();
}

fn delete(b: &Branch, model: &mut Model, i: usize) {
    let k = format!("k{i:04}").into_bytes();
    let mut wb = WriteBatch::new();
    wb.delete(k.clone());
    b.write_blocking(wb).unwrap();
    model.remove(&k);
}

/// Commits on `b` at distinct instants, each followed by a record of (instant, state): the
/// instant right after the commit, and one just before the next.
fn history_of(b: &Branch, clock: &ManualClock, model: &mut Model, tag: &str) -> Vec<(u64, Model)> {
    let mut states = vec![(clock.now_ms(), model.clone())];
    for step in 0..12 {
        clock.advance(5);
        match step % 4 {
            3 => delete(b, model, step * 3),
            _ => commit(b, model, step * 7, 20, &format!("{tag}{step}")),
        }
        // The instant of the commit itself sees it; the instant before the next does too.
        states.push((clock.now_ms(), model.clone()));
        clock.advance(3);
        states.push((clock.now_ms(), model.clone()));
    }
    states
}

#[test]
fn pitr_on_a_child_branch_reads_every_instant_of_its_history() {
    for buffer in BUFFERS {
        let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
        let store = open(&mem, &clock, buffer);
        let p = store.partition("t", 0).unwrap();
        let main = p.branch("main").unwrap();
        let mut base = Model::new();
        commit(&main, &mut base, 0, 100, "main");
        clock.advance(10);
        let child = p.create_branch("child", "main").unwrap();
        let created = clock.now_ms();
        let mut model = base.clone();
        let states = history_of(&child, &clock, &mut model, "c");
        // The parent moves on meanwhile: none of it shows in the child's past.
        commit(&main, &mut base, 0, 50, "main-later");
        clock.advance(5);
        for (i, (at, want)) in states.iter().enumerate() {
            let name = format!("at-{i}");
            let b = p.branch_at(&name, "child", *at).unwrap();
            assert_eq!(
                contents(&b),
                *want,
                "buffer {buffer}: child at {at} (instant {i})"
            );
            // A point-in-time branch is a branch: it takes writes of its own.
            b.put_blocking("own", "write").unwrap();
            p.delete_branch(&name).unwrap();
        }
        // Before the child existed there is no state of it.
        let e = p.branch_at("too-early", "child", created - 1).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
        // The child itself is untouched.
        assert_eq!(contents(&child), model, "buffer {buffer}");
    }
}

#[test]
fn pitr_on_a_root_branch_survives_reopen_and_checkpoints() {
    for buffer in BUFFERS {
        let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
        let store = open(&mem, &clock, buffer);
        let main = store.partition("t", 0).unwrap().branch("main").unwrap();
        let mut model = Model::new();
        let mut states = history_of(&main, &clock, &mut model, "a");
        // `main` was made empty by the partition's creation, with no history point: its
        // history begins with its first write.
        states.remove(0);
        main.checkpoint_blocking().unwrap();
        store.close().unwrap();
        // After a reopen (the log replayed, or the manifest), history goes on.
        let store = open(&mem, &clock, buffer);
        let p = store.partition("t", 0).unwrap();
        let main = p.branch("main").unwrap();
        clock.advance(7);
        states.extend(history_of(&main, &clock, &mut model, "b"));
        for (i, (at, want)) in states.iter().enumerate() {
            let b = p.branch_at(&format!("r{i}"), "main", *at).unwrap();
            assert_eq!(contents(&b), *want, "buffer {buffer}: main at {at}");
        }
        let check = store.check(&CheckOptions::default()).unwrap();
        assert!(check.is_clean(true), "buffer {buffer}: {check:?}");
        assert!(
            check.partitions.iter().any(|r| r.history_points > 0),
            "{check:?}"
        );
    }
}

#[test]
fn restore_at_puts_a_branch_back_and_keeps_what_it_replaces() {
    for buffer in BUFFERS {
        let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
        let store = open(&mem, &clock, buffer);
        let p = store.partition("t", 0).unwrap();
        let main = p.branch("main").unwrap();
        let mut model = Model::new();
        commit(&main, &mut model, 0, 50, "good");
        clock.advance(10);
        let good_at = clock.now_ms();
        let good = model.clone();
        clock.advance(10);
        commit(&main, &mut model, 0, 30, "bad");
        delete(&main, &mut model, 40);
        clock.advance(10);
        main.restore_at(good_at, "before-restore").unwrap();
        let main = p.branch("main").unwrap();
        assert_eq!(contents(&main), good, "buffer {buffer}");
        assert_eq!(contents(&p.branch("before-restore").unwrap()), model);
        // History goes on across the restore: both sides of it stay reachable.
        clock.advance(10);
        let after = clock.now_ms();
        clock.advance(10);
        let mut next = good.clone();
        commit(&main, &mut next, 60, 5, "next");
        let b = p.branch_at("x1", "main", after).unwrap();
        assert_eq!(
            contents(&b),
            good,
            "buffer {buffer}: right after the restore"
        );
        let b = p.branch_at("x2", "main", good_at + 15).unwrap();
        assert_eq!(contents(&b), model, "buffer {buffer}: before the restore");
        let b = p.branch_at("x3", "main", clock.now_ms()).unwrap();
        assert_eq!(contents(&b), next, "buffer {buffer}: now");
    }
}

#[test]
fn instants_outside_the_window_in_the_future_or_with_no_history_are_refused() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock, 0);
    let p = store.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    main.put_blocking("k", "v").unwrap();
    let now = clock.now_ms();
    let future = p.branch_at("f", "main", now + 1).unwrap_err();
    assert_eq!(future.kind(), ErrorKind::NotFound, "{future}");
    clock.advance(2 * HOUR);
    let old = p.branch_at("o", "main", now).unwrap_err();
    assert_eq!(old.kind(), ErrorKind::NotFound, "{old}");
    assert!(old.to_string().contains("history window"), "{old}");
    let e = main.restore_at(now, "bk").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    // Nothing was created by the refusals.
    assert_eq!(p.branches().unwrap(), vec!["main".to_string()]);
    // A store that keeps no history refuses every instant, and writes no points.
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = Store::builder(Options::in_memory().maintenance_interval_ms(0))
        .memory(mem.clone())
        .clock(Arc::new(clock.clone()))
        .open()
        .unwrap();
    let p = store.partition("t", 0).unwrap();
    p.branch("main").unwrap().put_blocking("k", "v").unwrap();
    let e = p.branch_at("n", "main", clock.now_ms()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(p.history_points("main").unwrap().is_empty());
}

#[test]
fn gc_keeps_what_the_window_needs_and_prunes_the_rest() {
    for buffer in BUFFERS {
        let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
        let store = open(&mem, &clock, buffer);
        let p = store.partition("t", 0).unwrap();
        let main = p.branch("main").unwrap();
        let mut model = Model::new();
        commit(&main, &mut model, 0, 200, "v1");
        main.checkpoint_blocking().unwrap();
        clock.advance(10);
        let v1_at = clock.now_ms();
        let v1 = model.clone();
        // Every key overwritten, checkpointed and compacted: v1's pages are held only by
        // history points now.
        for round in 0..3 {
            clock.advance(10);
            commit(&main, &mut model, 0, 200, &format!("v{}", round + 2));
            main.checkpoint_blocking().unwrap();
        }
        store.gc().unwrap();
        // The window's cost shows in the branch's space: its points, and v1's pages that
        // only they hold.
        let space = p.describe("main").unwrap().space.unwrap();
        assert!(space.history_points > 0, "buffer {buffer}: {space:?}");
        let point_bytes: u64 = space.history_points * 64;
        assert!(
            space.history_bytes > point_bytes + 4096,
            "buffer {buffer}: the old pages count as the window's cost: {space:?}"
        );
        let b = p.branch_at("v1", "main", v1_at).unwrap();
        assert_eq!(
            contents(&b),
            v1,
            "buffer {buffer}: GC kept v1 inside the window"
        );
        p.delete_branch("v1").unwrap();
        let before = p.history_points("main").unwrap().len();
        // The window moves past v1: its points go, and the newest state before the
        // window's start stays readable from where the window begins.
        clock.advance(HOUR + 1_000);
        let newest = model.clone();
        store.gc().unwrap();
        let after = p.history_points("main").unwrap();
        assert!(
            after.len() < before && !after.is_empty(),
            "buffer {buffer}: {before} points before, {after:?} after"
        );
        let e = p.branch_at("gone", "main", v1_at).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
        let start = clock.now_ms() - HOUR;
        let b = p.branch_at("edge", "main", start).unwrap();
        assert_eq!(
            contents(&b),
            newest,
            "buffer {buffer}: at the window's start"
        );
        let check = store.check(&CheckOptions::default()).unwrap();
        assert!(check.is_clean(true), "buffer {buffer}: {check:?}");
    }
}

#[test]
fn deleting_a_branch_deletes_its_history_and_a_reused_name_starts_afresh() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock, 2048);
    let p = store.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    main.put_blocking("k", "main").unwrap();
    clock.advance(5);
    let f = p.create_branch("f", "main").unwrap();
    f.put_blocking("k", "first life").unwrap();
    clock.advance(5);
    let first_life = clock.now_ms();
    p.delete_branch("f").unwrap();
    assert!(p.history_points("f").unwrap().is_empty());
    clock.advance(5);
    let f = p.create_branch("f", "main").unwrap();
    f.put_blocking("k2", "second life").unwrap();
    // The first life's instant is before the name's new life: no state of it.
    let e = p.branch_at("old", "f", first_life).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
}

/// Found while building: a restore's new term took a point stamp the old term's head had
/// already moved past in the same millisecond, and a read ordered by stamp alone picked the
/// old term's point — the state before the restore — for instants after it.
#[test]
fn regression_a_restore_in_a_busy_millisecond_is_the_newest_state() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock, 2048);
    let p = store.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut model = Model::new();
    commit(&main, &mut model, 0, 10, "good");
    clock.advance(10);
    let good_at = clock.now_ms();
    let good = model.clone();
    clock.advance(10);
    // Several records in one millisecond: the old term's stamps move past it.
    for round in 0..4 {
        commit(&main, &mut model, 0, 10, &format!("bad{round}"));
        main.checkpoint_blocking().unwrap();
    }
    main.restore_at(good_at, "bk").unwrap();
    clock.advance(10);
    let b = p.branch_at("after", "main", clock.now_ms()).unwrap();
    assert_eq!(contents(&b), good);
}

/// Found while building: a history point's log was read to its end, across the version a
/// later mapping checkpoint took with no log record, which read as a version gap
/// (`Corruption`). The log is read up to where the next point left it.
#[test]
fn regression_a_point_before_a_mapping_checkpoint_reads_its_log_up_to_the_next_point() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock, 64 << 20);
    let p = store.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut model = Model::new();
    commit(&main, &mut model, 0, 50, "a");
    main.checkpoint_blocking().unwrap();
    clock.advance(10);
    let mut states = vec![(clock.now_ms(), model.clone())];
    for round in 0..3 {
        clock.advance(10);
        commit(&main, &mut model, 0, 50, &format!("r{round}"));
        states.push((clock.now_ms(), model.clone()));
        // A checkpoint of the buffer and of the mapping: the second takes a version.
        main.checkpoint_blocking().unwrap();
    }
    for (i, (at, want)) in states.iter().enumerate() {
        let b = p.branch_at(&format!("s{i}"), "main", *at).unwrap();
        assert_eq!(contents(&b), *want, "instant {i}");
    }
    let check = store.check(&CheckOptions::default()).unwrap();
    assert!(check.is_clean(true), "{check:?}");
}

/// A history point whose write fails leaves its state without a point (the commit is
/// durable but reported failed). A read must then refuse the instants it cannot account
/// for — never answer them with the state before the unrecorded commit — and read every
/// instant after the next point again.
#[test]
fn a_failed_point_write_leaves_instants_refused_never_answered_with_an_older_state() {
    use bough::io::{FaultInjector, FaultOp};
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let faults = FaultInjector::new();
    let store = Store::builder(
        Options::new(dir.path())
            .backend(bough::Backend::Pread)
            .maintenance_interval_ms(0)
            .history_window_ms(HOUR)
            .write_buffer_bytes(0),
    )
    .clock(Arc::new(clock.clone()))
    .faults(faults.clone())
    .open()
    .unwrap();
    let p = store.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut model = Model::new();
    commit(&main, &mut model, 0, 10, "zero");
    let zero = model.clone();
    clock.advance(10);
    let at_zero = clock.now_ms() - 5;
    commit(&main, &mut model, 0, 10, "one");
    clock.advance(10);
    let before_two = clock.now_ms();
    clock.advance(10);
    // The commit's point is written through create_new's rename: fail it.
    faults.fail_next(FaultOp::Rename, 28, 1);
    let mut wb = WriteBatch::new();
    wb.put("k0000", "two");
    assert!(main.write_blocking(wb).is_err(), "the point's write failed");
    faults.clear();
    model.insert(b"k0000".to_vec(), b"two".to_vec());
    // The commit is durable all the same.
    assert_eq!(contents(&main), model);
    clock.advance(10);
    let after_two = clock.now_ms();
    clock.advance(10);
    commit(&main, &mut model, 20, 5, "three");
    let three = model.clone();
    // Between the last point before the failure and the next one, nothing can be told.
    for at in [before_two, after_two] {
        let e = p.branch_at("x", "main", at).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
        assert!(e.to_string().contains("no history point"), "{e}");
    }
    // Without a log nothing says when between its neighbours' points the unrecorded
    // commit happened: every instant from the point before it on is refused (above, and at
    // that point itself); before that point and after the next one, states read as ever.
    let e = p.branch_at("x", "main", before_two - 10).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    let b = p.branch_at("at-zero", "main", at_zero).unwrap();
    assert_eq!(contents(&b), zero);
    let b = p.branch_at("at-three", "main", clock.now_ms()).unwrap();
    assert_eq!(contents(&b), three);
}

/// Full log files left for the next one with their commits still buffered (small files,
/// a large buffer): each rotation is a history point naming both files, and every instant
/// reads back across them — before a reopen, after it, after GC — and the check finds
/// nothing. Fails if a point's log is read only up to the first file its successor names.
#[test]
fn pitr_reads_every_instant_across_log_files_left_with_their_commits_buffered() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let open = || {
        Store::builder(
            Options::in_memory()
                .maintenance_interval_ms(0)
                .history_window_ms(HOUR)
                .log_file_bytes(64 << 10),
        )
        .memory(mem.clone())
        .clock(Arc::new(clock.clone()))
        .open()
        .unwrap()
    };
    let store = open();
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    let mut model = Model::new();
    let mut states = Vec::new();
    // 14 records fill a 64 KiB file: 60 commits leave four of them, never checkpointed.
    for step in 0..60 {
        clock.advance(5);
        commit(&main, &mut model, step * 3, 4, &format!("s{step}"));
        states.push((clock.now_ms(), model.clone()));
        clock.advance(2);
        states.push((clock.now_ms(), model.clone()));
    }
    let logs = bough::io::Storage::list(&mem, "t.0")
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("wal_"))
        .count();
    assert!(logs >= 5, "{logs} log files");
    let read_all = |store: &Store, round: &str| {
        let p = store.partition("t", 0).unwrap();
        for (i, (at, want)) in states.iter().enumerate() {
            let name = format!("{round}-{i}");
            let b = p.branch_at(&name, "main", *at).unwrap();
            assert_eq!(contents(&b), *want, "{round}: main at {at} (instant {i})");
            p.delete_branch(&name).unwrap();
        }
        let check = store.check(&CheckOptions::default()).unwrap();
        assert!(check.is_clean(true), "{round}: {check:?}");
    };
    read_all(&store, "open");
    store.gc().unwrap();
    read_all(&store, "gc");
    drop(main);
    store.close().unwrap();
    let store = open();
    read_all(&store, "reopened");
    assert_eq!(
        contents(&store.partition("t", 0).unwrap().branch("main").unwrap()),
        model
    );
}

/// Regression (branch model seed 0xe46cfdd35bf384ff): a fork by reference's first point
/// names its parent's log up to the fork. The parent then took a version with no log
/// record (a merge into it is a manifest record of its own) and went on committing to the
/// same log, which so skips a version past the fork; a point-in-time read of the fork
/// refused every instant after its creation as "changed with no history point". A gap past
/// the fork is the parent's business.
#[test]
fn regression_a_fork_reads_its_past_when_its_parent_skips_a_log_version_after_the_fork() {
    let (mem, clock) = (MemoryStorage::new(), ManualClock::new(T0));
    let store = open(&mem, &clock, 64 << 20);
    let p = store.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut model = Model::new();
    commit(&main, &mut model, 0, 50, "main");
    let side = p.create_branch("side", "main").unwrap();
    commit(&side, &mut Model::new(), 200, 5, "side");
    commit(&main, &mut model, 50, 5, "main");
    clock.advance(5);
    let child = p.create_branch("child", "main").unwrap();
    let created = clock.now_ms();
    clock.advance(5);
    p.merge("side", "main", MergeOptions::default()).unwrap();
    commit(&main, &mut Model::new(), 100, 5, "later");
    clock.advance(5);
    child.put_blocking("own", "write").unwrap();
    clock.advance(5);
    for at in [created, created + 3, created + 7] {
        let b = p.branch_at(&format!("at-{at}"), "child", at).unwrap();
        assert_eq!(contents(&b), model, "child at {at}");
    }
}
