//! Concurrency: batches are atomic for concurrent readers, and readers never wait for a
//! writer.
//!
//! - `transfers_keep_every_snapshot_balanced_*`: several ledgers of 100 accounts (on
//!   several partitions, each with a `main` and a forked `side` branch, spread over the
//!   writer shards). One writer thread per ledger moves money between accounts in atomic
//!   batches (two accounts, or a rotation over several; some pipelined so they are
//!   group-committed; some values overflow-sized), while reader threads page through full
//!   read views and `get` every account of a view, asserting that every snapshot holds all
//!   100 accounts and the ledger's constant total. Background maintenance (expiry,
//!   compaction, GC) runs every few milliseconds meanwhile, with small data files.
//! - `readers_never_wait_for_a_writer_stalled_in_fsync`: with the sync gate of a
//!   `FaultInjector` closed, a writer blocks inside fsync; gets, floors, scans and read views
//!   of the same branch (and pages read from disk) complete promptly while the writer is
//!   still stalled, and see the state before the write; once released, the write completes.
//! - `a_lone_blocking_write_commits_on_its_own_thread_and_a_busy_shard_queues_the_next`:
//!   a blocking write to a branch whose shard has nothing queued or in service commits on
//!   the caller's thread (no hand-off to the shard thread and back); a write issued while
//!   another is in service queues, commits on the shard thread, and lands after it.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use bough::io::{FaultInjector, MemoryStorage};
use bough::{Backend, Branch, ManualClock, Options, ReadView, ScanOptions, Store, WriteBatch};
use common::Rng;

const ACCOUNTS: usize = 100;
const INITIAL: i64 = 1_000;
const TOTAL: i64 = ACCOUNTS as i64 * INITIAL;

fn account(i: usize) -> Vec<u8> {
    format!("acct{i:03}").into_bytes()
}

/// A balance, then `|` and padding (some values are overflow-sized).
fn encode(balance: i64, pad: usize) -> Vec<u8> {
    let mut v = balance.to_string().into_bytes();
    v.push(b'|');
    v.resize(v.len() + pad, b'.');
    v
}

fn decode(v: &[u8]) -> i64 {
    let end = v
        .iter()
        .position(|&b| b == b'|')
        .unwrap_or_else(|| panic!("value without a separator: {v:?}"));
    std::str::from_utf8(&v[..end])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad balance {:?}", &v[..end]))
}

fn pad(rng: &mut Rng) -> usize {
    match rng.below(20) {
        0 => rng.urange(1100, 6000),
        1..4 => rng.urange(100, 900),
        _ => rng.urange(0, 40),
    }
}

/// Checks one snapshot of a ledger two ways (a paged scan and a get per account); returns
/// a fingerprint of the balances.
fn check_view(label: &str, view: &ReadView, rng: &mut Rng) -> u64 {
    let limit = if rng.chance(0.5) {
        usize::MAX
    } else {
        rng.urange(1, 40)
    };
    let mut opts = ScanOptions {
        limit,
        ..Default::default()
    };
    let mut balances = Vec::with_capacity(ACCOUNTS);
    loop {
        let page = view
            .scan(&opts)
            .unwrap_or_else(|e| panic!("{label}: scan: {e}"));
        for kv in &page.entries {
            balances.push((kv.key.clone(), decode(&kv.value.value)));
        }
        match page.next {
            Some(next) => opts.begin = std::ops::Bound::Included(next),
            None => break,
        }
    }
    let keys: Vec<Vec<u8>> = balances.iter().map(|(k, _)| k.clone()).collect();
    let want: Vec<Vec<u8>> = (0..ACCOUNTS).map(account).collect();
    assert_eq!(keys, want, "{label}: a snapshot lost or gained accounts");
    let sum: i64 = balances.iter().map(|(_, b)| b).sum();
    assert_eq!(
        sum,
        TOTAL,
        "{label}: a snapshot (version {}) shows a partial transfer: total {sum}",
        view.version()
    );
    if rng.chance(0.3) {
        let mut sum = 0;
        for (i, (_, scanned)) in balances.iter().enumerate() {
            let v = view
                .get(account(i))
                .unwrap_or_else(|e| panic!("{label}: get: {e}"))
                .unwrap_or_else(|| panic!("{label}: account {i} missing"));
            assert_eq!(decode(&v.value), *scanned, "{label}: get ≠ scan");
            sum += decode(&v.value);
        }
        assert_eq!(
            sum, TOTAL,
            "{label}: gets of one view show a partial transfer"
        );
    }
    balances.iter().fold(0xcbf2_9ce4_8422_2325, |h, (_, b)| {
        common::mix(h ^ (*b as u64))
    })
}

struct Ledger {
    label: String,
    branch: Branch,
}

/// Opens the ledgers: `partitions` partitions × {main, side}, each starting with every
/// account at [`INITIAL`] (side is forked from main after main is funded).
fn ledgers(store: &Store, partitions: u32) -> Vec<Ledger> {
    let mut out = Vec::new();
    for p in 0..partitions {
        let handle = store.partition("ledger", p).expect("partition");
        let main = handle.branch("main").expect("main");
        let mut b = WriteBatch::new();
        for i in 0..ACCOUNTS {
            b.put(account(i), encode(INITIAL, i % 7));
        }
        main.write_blocking(b).expect("fund");
        let side = handle.create_branch("side", "main").expect("fork side");
        out.push(Ledger {
            label: main.label().to_string(),
            branch: main,
        });
        out.push(Ledger {
            label: side.label().to_string(),
            branch: side,
        });
    }
    out
}

/// One ledger's writer: `transfers` atomic batches, some pipelined.
fn writer(ledger: &Ledger, seed: u64, transfers: usize, done: &AtomicU64) {
    let mut rng = Rng::new(seed);
    let mut bal = vec![INITIAL; ACCOUNTS];
    let mut n = 0;
    while n < transfers {
        // A few batches in flight at once: each is computed from the state after the
        // previous one, so they must apply in order.
        let inflight = if rng.chance(0.2) { rng.urange(2, 6) } else { 1 };
        let mut futs = Vec::new();
        for _ in 0..inflight {
            let mut b = WriteBatch::new();
            if rng.chance(0.8) {
                let a = rng.urange(0, ACCOUNTS);
                let mut c = rng.urange(0, ACCOUNTS - 1);
                if c >= a {
                    c += 1;
                }
                let x = rng.range(1, 50) as i64;
                bal[a] -= x;
                bal[c] += x;
                b.put(account(a), encode(bal[a], pad(&mut rng)));
                b.put(account(c), encode(bal[c], pad(&mut rng)));
            } else {
                // Rotate an amount around k distinct accounts (net zero).
                let k = rng.urange(3, 20);
                let mut picked = HashSet::new();
                while picked.len() < k {
                    picked.insert(rng.urange(0, ACCOUNTS));
                }
                let picked: Vec<usize> = picked.into_iter().collect();
                let x = rng.range(1, 20) as i64;
                for (j, &a) in picked.iter().enumerate() {
                    bal[a] += if j == 0 { -x * (k as i64 - 1) } else { x };
                    b.put(account(a), encode(bal[a], pad(&mut rng)));
                }
            }
            futs.push(ledger.branch.write(b));
            n += 1;
        }
        for f in futs {
            common::block_on(f).unwrap_or_else(|e| panic!("{}: write: {e}", ledger.label));
        }
        done.fetch_add(inflight as u64, Ordering::Relaxed);
    }
    assert_eq!(bal.iter().sum::<i64>(), TOTAL);
    // The final state is exactly the writer's.
    let all = ledger
        .branch
        .scan_blocking(&ScanOptions::default())
        .expect("final scan");
    let got: Vec<i64> = all.entries.iter().map(|e| decode(&e.value.value)).collect();
    assert_eq!(got, bal, "{}: final balances differ", ledger.label);
}

fn transfers(test: &'static str, backend: Backend, partitions: u32, per_writer: usize) {
    let seed = common::seeds(test, 1)[0];
    let dir = tempfile::tempdir().expect("tempdir");
    let mem = MemoryStorage::new();
    let store = common::open(
        test,
        common::options(backend, dir.path(), &mem)
            // Timestamps all tie: the later write wins, whatever the wall clock does.
            .clock(Arc::new(ManualClock::new(1_700_000_000_000)))
            .map_settings(|o| {
                o.shards(2)
                    .data_file_size(16 * 4096 * 2)
                    .checkpoint_chunks(2)
                    .manifest_rewrite_bytes(64 * 1024)
                    .cache_bytes(1 << 20)
                    .cache_data_pages(false)
                    // Compaction and GC run in the background while readers hold snapshots.
                    .maintenance_interval_ms(5)
                    .compaction_garbage_ratio(0.3)
            }),
    );
    let ledgers = Arc::new(ledgers(&store, partitions));
    let stop = Arc::new(AtomicBool::new(false));
    let committed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let readers: Vec<_> = (0..3u64)
        .map(|r| {
            let (ledgers, stop) = (ledgers.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut rng = Rng::new(common::mix(seed ^ (r + 100)));
                let mut checked = 0u64;
                let mut seen = HashSet::new();
                while !stop.load(Ordering::Acquire) {
                    let l = &ledgers[rng.urange(0, ledgers.len())];
                    let view = l.branch.read_view().expect("read_view");
                    seen.insert(check_view(&l.label, &view, &mut rng));
                    // A one-call scan is one snapshot too.
                    let all = l
                        .branch
                        .scan_blocking(&ScanOptions::default())
                        .expect("scan");
                    let sum: i64 = all.entries.iter().map(|e| decode(&e.value.value)).sum();
                    assert_eq!(sum, TOTAL, "{}: one-call scan is not atomic", l.label);
                    assert_eq!(all.entries.len(), ACCOUNTS);
                    checked += 2;
                }
                (checked, seen.len())
            })
        })
        .collect();
    let writers: Vec<_> = (0..ledgers.len())
        .map(|i| {
            let (ledgers, committed) = (ledgers.clone(), committed.clone());
            std::thread::spawn(move || {
                writer(
                    &ledgers[i],
                    common::mix(seed ^ i as u64),
                    per_writer,
                    &committed,
                )
            })
        })
        .collect();
    for w in writers {
        w.join().expect("writer panicked");
    }
    stop.store(true, Ordering::Release);
    let mut snapshots = 0;
    let mut distinct = 0;
    for r in readers {
        let (c, d) = r.join().expect("reader panicked");
        snapshots += c;
        distinct += d;
    }
    eprintln!(
        "[{test}] seed {seed} on {}: {} ledgers, {} batches committed, {snapshots} snapshots \
         checked ({distinct} distinct states seen by readers) in {:.1?}",
        store.backend(),
        ledgers.len(),
        committed.load(Ordering::Relaxed),
        started.elapsed()
    );
    assert!(
        snapshots >= 20,
        "the readers hardly ran ({snapshots} snapshots)"
    );
    assert!(
        distinct >= 3,
        "the readers never saw the ledgers change ({distinct} states)"
    );
    // And after a reopen.
    drop(ledgers);
    store.close().expect("close");
    drop(store);
    let store = common::open(test, common::options(backend, dir.path(), &mem));
    let mut rng = Rng::new(seed);
    for p in 0..partitions {
        for b in ["main", "side"] {
            let br = store
                .partition("ledger", p)
                .and_then(|h| h.branch(b))
                .expect("branch");
            check_view(br.label(), &br.read_view().expect("view"), &mut rng);
        }
    }
    store.close().expect("close");
}

#[test]
fn transfers_keep_every_snapshot_balanced_memory() {
    transfers(
        "transfers_keep_every_snapshot_balanced_memory",
        Backend::Memory,
        3,
        1500,
    );
}

#[test]
fn transfers_keep_every_snapshot_balanced_pread() {
    transfers(
        "transfers_keep_every_snapshot_balanced_pread",
        Backend::Pread,
        2,
        120,
    );
}

#[test]
fn transfers_keep_every_snapshot_balanced_io_uring() {
    transfers(
        "transfers_keep_every_snapshot_balanced_io_uring",
        Backend::IoUring,
        2,
        120,
    );
}

#[test]
fn slow_transfers_keep_every_snapshot_balanced() {
    for backend in common::ALL_BACKENDS {
        transfers(
            "slow_transfers_keep_every_snapshot_balanced",
            backend,
            4,
            if backend == Backend::Memory {
                20_000
            } else {
                1500
            },
        );
    }
}

/// Releases the sync gate when dropped, so a failing assertion cannot leave threads
/// blocked in fsync forever.
struct Release(FaultInjector);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.release_sync();
    }
}

/// Runs `f` on another thread and fails if it does not finish within `limit`.
fn within<T: Send + 'static>(
    what: &str,
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> (T, Duration) {
    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    std::thread::spawn(move || {
        let out = f();
        let _ = tx.send(out);
    });
    match rx.recv_timeout(limit) {
        Ok(v) => (v, started.elapsed()),
        Err(_) => panic!("{what} did not finish within {limit:?}: blocked behind the writer?"),
    }
}

#[test]
fn readers_never_wait_for_a_writer_stalled_in_fsync() {
    for backend in [Backend::Pread, Backend::IoUring] {
        let dir = tempfile::tempdir().expect("tempdir");
        let faults = FaultInjector::new();
        let store = common::open(
            "readers_never_wait_for_a_writer_stalled_in_fsync",
            Store::builder(
                Options::new(dir.path())
                    .backend(backend)
                    .maintenance_interval_ms(0)
                    // Reads of leaves go to the disk, not the cache.
                    .cache_data_pages(false),
            )
            .faults(faults.clone()),
        );
        let main = store
            .partition("t", 0)
            .and_then(|p| p.branch("main"))
            .expect("branch");
        let mut b = WriteBatch::new();
        for i in 0..3000u32 {
            let v = if i % 100 == 0 {
                vec![b'o'; 5000]
            } else {
                format!("old{i}").into_bytes()
            };
            b.put(format!("k{i:05}"), v);
        }
        main.write_blocking(b).expect("load");

        faults.stall_sync();
        let _release = Release(faults.clone());
        let w = main.clone();
        let writer = std::thread::spawn(move || {
            let mut b = WriteBatch::new();
            for i in 0..3000u32 {
                b.put(format!("k{i:05}"), format!("new{i}"));
            }
            b.put("added", "x");
            w.write_blocking(b)
        });
        assert!(
            faults.wait_for_stalled_syncs(1, Duration::from_secs(20)),
            "the writer never reached fsync"
        );
        // A second write queues behind the stalled one.
        let w2 = main.clone();
        let second = std::thread::spawn(move || {
            let mut b = WriteBatch::new();
            b.put("second", "y");
            w2.write_blocking(b)
        });

        let r = main.clone();
        let (reads, took) = within("reads during a stalled fsync", Duration::from_secs(10), {
            move || {
                let mut n = 0;
                for i in (0..3000u32).step_by(7) {
                    let v = r
                        .get_blocking(format!("k{i:05}").as_bytes())
                        .expect("get")
                        .expect("present");
                    let want = if i % 100 == 0 {
                        vec![b'o'; 5000]
                    } else {
                        format!("old{i}").into_bytes()
                    };
                    assert_eq!(v.value, want, "a read saw the unacknowledged write");
                    n += 1;
                }
                assert!(r.get_blocking(b"added").expect("get").is_none());
                let f = r.floor_blocking(b"k00050x").expect("floor").expect("floor");
                assert_eq!(f.key, b"k00050");
                let all = r.scan_blocking(&ScanOptions::default()).expect("scan");
                assert_eq!(all.entries.len(), 3000);
                let view = r.read_view().expect("view");
                let page = view
                    .scan(&ScanOptions {
                        limit: 10,
                        ..Default::default()
                    })
                    .expect("scan");
                assert_eq!(page.entries.len(), 10);
                n + 4
            }
        });
        assert!(
            faults.stalled_syncs() >= 1,
            "the sync is no longer stalled: the reads proved nothing"
        );
        assert!(!writer.is_finished(), "the stalled write completed");
        assert!(!second.is_finished(), "the queued write completed");
        eprintln!(
            "{}: {reads} reads took {took:.1?} while the writer was stalled in fsync",
            store.backend()
        );

        faults.release_sync();
        writer
            .join()
            .expect("writer panicked")
            .expect("stalled write");
        second
            .join()
            .expect("writer panicked")
            .expect("queued write");
        assert_eq!(
            main.get_blocking(b"k00042").expect("get").expect("v").value,
            b"new42"
        );
        assert!(main.get_blocking(b"second").expect("get").is_some());
        store.close().expect("close");
    }
}

/// A clock that notes which thread asks it the time.
#[derive(Debug, Default)]
struct ThreadClock {
    asked_by: parking_lot::Mutex<Vec<String>>,
}

impl bough::Clock for ThreadClock {
    fn now_ms(&self) -> u64 {
        let name = std::thread::current().name().unwrap_or("?").to_string();
        self.asked_by.lock().push(name);
        bough::SystemClock.now_ms()
    }
}

impl ThreadClock {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.asked_by.lock())
    }
}

/// Branch `main` of partition `t`, after one write (its log file exists, so the next
/// write's only sync is its record's).
fn warm_main(store: &Store) -> Branch {
    let main = store
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    main.put_blocking("warm", "up").expect("first write");
    main
}

#[test]
fn a_lone_blocking_write_commits_on_its_own_thread_and_a_busy_shard_queues_the_next() {
    let test = "a_lone_blocking_write_commits_on_its_own_thread_and_a_busy_shard_queues_the_next";
    for backend in [Backend::Pread, Backend::IoUring] {
        let dir = tempfile::tempdir().expect("tempdir");
        let faults = FaultInjector::new();
        let clock = Arc::new(ThreadClock::default());
        let store = common::open(
            test,
            Store::builder(
                Options::new(dir.path())
                    .backend(backend)
                    .maintenance_interval_ms(0),
            )
            .faults(faults.clone())
            .clock(clock.clone()),
        );
        let main = warm_main(&store);

        // Alone: the commit (which reads the clock holding the head) runs on this thread.
        clock.take();
        main.put_blocking("k", "lone").expect("lone write");
        let asked = clock.take();
        assert!(!asked.is_empty(), "the write never read the clock");
        assert!(
            asked.iter().all(|t| !t.starts_with("bough-shard")),
            "a lone write was handed to a shard thread: {asked:?}"
        );

        // Busy: a write stalls in its log sync; the next one must queue behind it.
        faults.stall_sync();
        let release = Release(faults.clone());
        let w = main.clone();
        let first = std::thread::Builder::new()
            .name("first-writer".into())
            .spawn(move || w.put_blocking("k", "first"))
            .expect("spawn");
        assert!(
            faults.wait_for_stalled_syncs(1, Duration::from_secs(20)),
            "the first write never reached its sync"
        );
        clock.take();
        let w = main.clone();
        let second = std::thread::Builder::new()
            .name("second-writer".into())
            .spawn(move || w.put_blocking("k", "second"))
            .expect("spawn");
        // The second write has built its batch (it read the clock); give it time to queue.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !clock.take().iter().any(|t| t == "second-writer") {
            assert!(Instant::now() < deadline, "the second write never started");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(300));
        drop(release);
        first.join().expect("first").expect("first write");
        second.join().expect("second").expect("second write");
        let asked = clock.take();
        assert!(
            asked.iter().any(|t| t.starts_with("bough-shard")),
            "a write issued while another was in service did not queue: {asked:?}"
        );
        let got = main.get_blocking("k").expect("get").expect("k");
        assert_eq!(
            got.value, b"second",
            "the queued write landed before the one in service"
        );
        store.close().expect("close");
    }
}

/// Closing waits for a write committing on its caller's thread, as it waits for the shard
/// thread's: a write stalled in its log sync holds the close back past the second it
/// would give a busy head, completes once released, and is there after reopening.
#[test]
fn close_waits_for_a_write_committing_on_its_callers_thread() {
    let test = "close_waits_for_a_write_committing_on_its_callers_thread";
    let dir = tempfile::tempdir().expect("tempdir");
    let faults = FaultInjector::new();
    let store = common::open(
        test,
        Store::builder(Options::new(dir.path()).maintenance_interval_ms(0)).faults(faults.clone()),
    );
    let main = warm_main(&store);
    faults.stall_sync();
    let release = Release(faults.clone());
    let w = main.clone();
    let writer = std::thread::spawn(move || w.put_blocking("k", "stalled"));
    assert!(
        faults.wait_for_stalled_syncs(1, Duration::from_secs(20)),
        "the write never reached its sync"
    );
    drop(main);
    let (closed_tx, closed_rx) = mpsc::channel();
    let closer = std::thread::spawn(move || {
        let r = store.close();
        let _ = closed_tx.send(());
        r
    });
    assert!(
        closed_rx.recv_timeout(Duration::from_millis(1500)).is_err(),
        "close returned while a write was committing"
    );
    drop(release);
    writer.join().expect("writer").expect("the stalled write");
    closer.join().expect("closer").expect("close");
    let store = common::open(test, Options::new(dir.path()).maintenance_interval_ms(0));
    let got = store
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .and_then(|b| b.get_blocking("k"))
        .expect("get")
        .expect("the acknowledged write");
    assert_eq!(got.value, b"stalled");
    store.close().expect("close");
}
