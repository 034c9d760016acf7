//! Truncate commits in bounded pieces (issue 15, "Async that is async"): each piece removes
//! at most `Options::truncate_piece_keys` keys in one durable commit, the branch's other
//! writes are served between pieces, the result is that of removing every key at once, and a
//! crash midway leaves a prefix of the pieces applied.

mod common;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use bough::io::{CrashPolicy, FaultInjector, MemoryStorage};
use bough::{Branch, Options, PutOptions, ScanOptions, Store, WriteBatch};
use parking_lot::{Condvar, Mutex};

/// Keys written: `k00000` …
const KEYS: u32 = 50_000;

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// Every tenth value is overflow-sized, so pieces remove overflow entries too.
fn value(i: u32, round: u32) -> Vec<u8> {
    let len = if i.is_multiple_of(10) { 6000 } else { 16 };
    let mut v = format!("v{i}:{round}:").into_bytes();
    v.resize(len, b'.');
    v
}

/// A memory store whose syncs `faults` can hold.
fn stalling_store(piece: usize) -> (MemoryStorage, FaultInjector, Store) {
    let faults = FaultInjector::new();
    let mem = MemoryStorage::with_faults(faults.clone());
    let store = memory_store(&mem, piece);
    (mem, faults, store)
}

fn memory_store(mem: &MemoryStorage, piece: usize) -> Store {
    let opts = Store::builder(
        Options::in_memory()
            .maintenance_interval_ms(0)
            .truncate_piece_keys(piece),
    )
    .memory(mem.clone());
    common::open("truncate", opts)
}

fn main_of(store: &Store) -> Branch {
    store
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch")
}

/// Writes `KEYS` keys at user timestamp 1000 and deletes every seventh at 2000 (leaving
/// tombstones); returns the model of what is live.
fn fill(branch: &Branch) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(5000) {
        let mut b = WriteBatch::new();
        for &i in chunk {
            let opts = PutOptions {
                timestamp: Some(1000),
                ..PutOptions::default()
            };
            b.put_with(key(i), value(i, 0), opts);
            model.insert(key(i), value(i, 0));
        }
        branch.write_blocking(b).expect("write");
    }
    let mut b = WriteBatch::new();
    for i in (0..KEYS).step_by(7) {
        b.delete_at(key(i), 2000);
        model.remove(&key(i));
    }
    branch.write_blocking(b).expect("delete");
    model
}

/// Asserts two key-value maps are equal, showing only where they differ (they are large).
#[track_caller]
fn assert_same(got: &BTreeMap<Vec<u8>, Vec<u8>>, expect: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) {
    if got == expect {
        return;
    }
    let show = |k: &Vec<u8>| String::from_utf8_lossy(k).into_owned();
    let extra: Vec<String> = got
        .keys()
        .filter(|k| !expect.contains_key(*k))
        .take(5)
        .map(show)
        .collect();
    let missing: Vec<String> = expect
        .keys()
        .filter(|k| !got.contains_key(*k))
        .take(5)
        .map(show)
        .collect();
    let changed: Vec<String> = got
        .iter()
        .filter(|(k, v)| expect.get(*k).is_some_and(|e| e != *v))
        .take(5)
        .map(|(k, _)| show(k))
        .collect();
    panic!(
        "{what}: {} keys, expected {}; unexpected {extra:?}, missing {missing:?}, changed {changed:?}",
        got.len(),
        expect.len()
    );
}

fn contents(branch: &Branch) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let page = branch.scan_blocking(&ScanOptions::default()).expect("scan");
    assert_eq!(page.next, None, "one page holds everything");
    page.entries
        .into_iter()
        .map(|kv| (kv.key, kv.value.value))
        .collect()
}

/// How many of the deleted keys (every seventh) a put at timestamp 1500 — older than their
/// deletes — still loses to a tombstone. A truncate removes tombstones too, so in its range
/// such puts apply again.
fn tombstones_left(branch: &Branch) -> u64 {
    let mut b = WriteBatch::new();
    for i in (0..KEYS).step_by(7) {
        let opts = PutOptions {
            timestamp: Some(1500),
            ..PutOptions::default()
        };
        b.put_with(key(i), b"late", opts);
    }
    branch
        .write_counted_blocking(b)
        .expect("late puts")
        .superseded
}

#[test]
fn a_truncate_commits_in_pieces_and_ends_as_removing_every_key_at_once() {
    for from in [key(20_000), Vec::new(), key(49_999), b"z".to_vec()] {
        let mut results = Vec::new();
        for piece in [1000usize, 1 << 20] {
            let mem = MemoryStorage::new();
            let store = memory_store(&mem, piece);
            let main = main_of(&store);
            let mut model = fill(&main);
            let before = main.read_view().expect("view").version();
            main.truncate_blocking(&from).expect("truncate");
            let after = main.read_view().expect("view").version();
            let in_range = (0..KEYS).filter(|i| key(*i) >= from).count();
            model.retain(|k, _| *k < from);
            assert_same(
                &contents(&main),
                &model,
                &format!("from {from:?}, pieces of {piece}"),
            );
            // One commit per piece of `piece` keys (tombstones count as keys): no more, and
            // never one commit for the whole range when it is larger than a piece.
            let pieces = in_range.div_ceil(piece) as u64;
            assert_eq!(
                after - before,
                pieces,
                "from {from:?}: {in_range} keys in pieces of {piece}"
            );
            let late = tombstones_left(&main);
            let deleted_below = (0..KEYS).step_by(7).filter(|i| key(*i) < from).count();
            assert_eq!(
                late, deleted_below as u64,
                "tombstones in range are removed"
            );
            results.push(contents(&main));
            store.close().expect("close");
        }
        assert_same(&results[0], &results[1], "pieces or not, the same state");
    }
}

/// Wakes the test when the future it polls can make progress (a piece answered).
#[derive(Default)]
struct Signal {
    woken: Mutex<bool>,
    cv: Condvar,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        *self.woken.lock() = true;
        self.cv.notify_all();
    }
}

impl Signal {
    fn wait(&self) {
        let mut w = self.woken.lock();
        while !*w {
            self.cv.wait(&mut w);
        }
        *w = false;
    }
}

/// Drives a truncate one piece at a time: `start` queues its first piece; `piece_done`
/// waits until the piece in flight is answered (then the branch's writer is idle and nothing
/// more of the truncate is queued); `poll` queues the following one.
struct Stepper<'a> {
    fut: Pin<&'a mut (dyn Future<Output = bough::Result<()>> + 'a)>,
    signal: Arc<Signal>,
    waker: Waker,
    faults: FaultInjector,
}

impl<'a> Stepper<'a> {
    fn start(
        fut: Pin<&'a mut (dyn Future<Output = bough::Result<()>> + 'a)>,
        faults: &FaultInjector,
    ) -> Self {
        let signal = Arc::new(Signal::default());
        let waker = Waker::from(signal.clone());
        let mut s = Stepper {
            fut,
            signal,
            waker,
            faults: faults.clone(),
        };
        assert!(s.poll().is_pending(), "the truncate is more than one piece");
        s
    }

    /// Polls the truncate once: it queues its next piece and waits for it. Syncs are held
    /// meanwhile, so the piece (whose commit syncs) cannot be answered before the truncate
    /// waits for it — otherwise one poll could run several pieces.
    fn poll(&mut self) -> Poll<bough::Result<()>> {
        let mut cx = Context::from_waker(&self.waker);
        self.faults.stall_sync();
        let r = self.fut.as_mut().poll(&mut cx);
        self.faults.release_sync();
        r
    }

    /// Waits for the piece in flight to be answered.
    fn piece_done(&self) {
        self.signal.wait();
    }
}

/// A write queued while a truncate's piece runs is served before the truncate's next piece
/// (the truncate does not hold the writer for its whole length), and is kept although its
/// keys are in the truncated range — behind the truncate's progress, at it, and ahead.
#[test]
fn a_write_during_a_long_truncate_commits_between_its_pieces_and_is_kept() {
    let (_mem, faults, store) = stalling_store(1000);
    let main = main_of(&store);
    fill(&main);
    let mut truncate = pin!(main.truncate(b""));
    let mut stepper = Stepper::start(truncate.as_mut(), &faults);
    // The first piece (k00000..k00999) is queued; this write queues behind it.
    let mut w = WriteBatch::new();
    w.put(key(5), b"behind");
    w.put(key(30_000), b"ahead");
    w.put(b"k30000x", b"new");
    let write = main.write(w);
    common::block_on(write).expect("the write completes before the truncate goes on");
    stepper.piece_done();
    // Only the first piece has run: the truncate is far from done.
    let view = main.read_view().expect("view");
    assert_eq!(view.get(key(1)).expect("get"), None, "first piece applied");
    assert!(
        view.get(key(49_999)).expect("get").is_some(),
        "the rest is still there"
    );
    assert_eq!(
        view.get(key(5)).expect("get").map(|v| v.value),
        Some(b"behind".to_vec())
    );
    loop {
        if let Poll::Ready(r) = stepper.poll() {
            r.expect("truncate");
            break;
        }
        stepper.piece_done();
    }
    let expect: BTreeMap<Vec<u8>, Vec<u8>> = [
        (key(5), b"behind".to_vec()),
        (key(30_000), b"ahead".to_vec()),
        (b"k30000x".to_vec(), b"new".to_vec()),
    ]
    .into_iter()
    .collect();
    assert_same(
        &contents(&main),
        &expect,
        "the concurrent write is kept, the rest gone",
    );
}

/// Each piece is a durable commit and the pieces go in key order, so a power loss after `n`
/// of them leaves exactly the keys of the first `n` pieces removed and every other key as it
/// was; truncating again finishes the work.
#[test]
fn a_crash_midway_through_a_truncate_leaves_a_prefix_of_its_pieces() {
    const PIECE: usize = 2000;
    let (mem, faults, store) = stalling_store(PIECE);
    let main = main_of(&store);
    let model = fill(&main);
    let from = key(10_000);
    // Every key at or after `from`, tombstones included, in the order pieces take them.
    let range: Vec<Vec<u8>> = (10_000..KEYS).map(key).collect();
    let mut truncate = pin!(main.truncate(&from));
    let mut stepper = Stepper::start(truncate.as_mut(), &faults);
    let mut crashed_at = Vec::new();
    for n in 1usize.. {
        stepper.piece_done();
        if n == 1 || n.is_multiple_of(7) {
            // The truncate is between pieces `n` and `n + 1`: crash now.
            let (image, _) = mem.crash_image(CrashPolicy::DropAllUnsynced);
            let reopened = memory_store(&image, PIECE);
            let got = contents(&main_of(&reopened));
            let removed_to = range.get(n * PIECE).cloned();
            let mut expect = model.clone();
            expect.retain(|k, _| *k < from || removed_to.as_ref().is_some_and(|end| k >= end));
            assert_same(&got, &expect, &format!("crash after {n} pieces"));
            // Truncating again completes it.
            main_of(&reopened).truncate_blocking(&from).expect("again");
            let mut done = model.clone();
            done.retain(|k, _| *k < from);
            assert_same(
                &contents(&main_of(&reopened)),
                &done,
                "finished after the crash",
            );
            reopened.close().expect("close");
            crashed_at.push(n);
        }
        if let Poll::Ready(r) = stepper.poll() {
            r.expect("truncate");
            break;
        }
    }
    assert_eq!(
        crashed_at,
        vec![1, 7, 14],
        "crashed between pieces, not after the last"
    );
}

/// `drop_table` empties `main` on every partition of the table, each in pieces; other
/// branches and tables keep their keys.
#[test]
fn drop_table_empties_every_partition_in_pieces() {
    let mem = MemoryStorage::new();
    let store = memory_store(&mem, 500);
    let mut before = Vec::new();
    for p in 0..3u32 {
        let part = store.partition("t", p).expect("partition");
        let main = part.branch("main").expect("main");
        let mut b = WriteBatch::new();
        for i in 0..2000u32 {
            b.put(key(i), value(i, p));
        }
        main.write_blocking(b).expect("write");
        part.create_branch("keep", "main").expect("branch");
        before.push(main.read_view().expect("view").version());
    }
    let other = store
        .partition("u", 0)
        .and_then(|p| p.branch("main"))
        .expect("other table");
    let mut b = WriteBatch::new();
    b.put(b"x", b"y");
    other.write_blocking(b).expect("write");
    store.table("t").and_then(|t| t.truncate()).expect("drop");
    for (p, v0) in (0..3u32).zip(before) {
        let part = store.partition("t", p).expect("partition");
        let main = part.branch("main").expect("main");
        assert!(contents(&main).is_empty(), "partition {p} emptied");
        let commits = main.read_view().expect("view").version() - v0;
        assert_eq!(commits, 4, "2000 keys in pieces of 500 on partition {p}");
        assert_eq!(contents(&part.branch("keep").expect("keep")).len(), 2000);
    }
    assert_eq!(contents(&other).len(), 1, "another table is untouched");
}

#[test]
fn a_truncate_piece_limit_of_zero_is_refused() {
    let err = Store::open(Options::in_memory().truncate_piece_keys(0)).expect_err("refused");
    assert!(err.to_string().contains("truncate_piece_keys"), "{err}");
}
