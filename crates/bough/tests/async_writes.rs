//! Async writes and truncates never wait for the writer on the executor thread (issue 15,
//! "Async that is async"): `write` and `truncate` hand their work to the branch's shard
//! thread and await its answer, so while a sync is held the executor runs other tasks.

mod common;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bough::io::FaultInjector;
use bough::{Backend, Branch, Options, Store, WriteBatch};

fn store(dir: &std::path::Path, faults: &FaultInjector) -> bough::Store {
    let opts = Store::builder(
        Options::new(dir)
            .backend(Backend::Pread)
            .maintenance_interval_ms(0)
            .truncate_piece_keys(100),
    )
    .faults(faults.clone());
    common::open("async_writes", opts)
}

fn filled_main(store: &bough::Store) -> Branch {
    let main = store
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    let mut b = WriteBatch::new();
    for i in 0..1000u32 {
        b.put(format!("k{i:05}"), format!("value {i}"));
    }
    main.write_blocking(b).expect("write");
    main
}

/// Holds every sync while `op` runs on a current-thread runtime beside a ticking task. The
/// gate opens once the ticker has run 50 times, or after 5 s (the watchdog, so an `op` that
/// blocked the runtime's only thread fails the assertion instead of hanging). Returns how
/// many times the ticker had run when `op` finished, and `op`'s result.
fn ticks_while<F, T>(faults: &FaultInjector, op: impl FnOnce() -> F) -> (u64, T)
where
    F: Future<Output = T>,
{
    // Closed before `op` starts: a write is queued as soon as it is called.
    faults.stall_sync();
    let op = op();
    let ticks = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let faults = faults.clone();
        let ticks = ticks.clone();
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            while ticks.load(Ordering::SeqCst) < 50 && start.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(1));
            }
            faults.release_sync();
        })
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let (seen, out) = rt.block_on(async {
        let ticker = {
            let (ticks, done) = (ticks.clone(), done.clone());
            tokio::spawn(async move {
                while !done.load(Ordering::SeqCst) {
                    ticks.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
        };
        let out = op.await;
        let seen = ticks.load(Ordering::SeqCst);
        done.store(true, Ordering::SeqCst);
        ticker.await.expect("ticker");
        (seen, out)
    });
    watchdog.join().expect("watchdog");
    (seen, out)
}

#[test]
fn a_truncate_waiting_for_a_sync_does_not_stall_other_tasks_of_a_current_thread_runtime() {
    let dir = tempfile::tempdir().expect("tempdir");
    let faults = FaultInjector::new();
    let store = store(dir.path(), &faults);
    let main = filled_main(&store);
    let (ticks, result) = ticks_while(&faults, || main.truncate(b"k00500"));
    result.expect("truncate");
    assert!(
        ticks >= 50,
        "the other task ran {ticks} times while the truncate waited for its syncs: the \
         truncate blocked the runtime's only thread"
    );
    let page = main
        .scan_blocking(&bough::ScanOptions::default())
        .expect("scan");
    assert_eq!(page.entries.len(), 500, "keys from k00500 on are gone");
    assert_eq!(
        page.entries.last().map(|kv| kv.key.clone()),
        Some(b"k00499".to_vec())
    );
}

#[test]
fn a_write_waiting_for_a_sync_does_not_stall_other_tasks_of_a_current_thread_runtime() {
    let dir = tempfile::tempdir().expect("tempdir");
    let faults = FaultInjector::new();
    let store = store(dir.path(), &faults);
    let main = filled_main(&store);
    let mut b = WriteBatch::new();
    b.put("new", "value");
    let (ticks, result) = ticks_while(&faults, || main.write(b));
    result.expect("write");
    assert!(
        ticks >= 50,
        "the other task ran {ticks} times while the write waited for its sync: the write \
         blocked the runtime's only thread"
    );
    assert_eq!(
        main.get_blocking(b"new").expect("get").map(|v| v.value),
        Some(b"value".to_vec())
    );
}

/// The futures can be spawned on a multi-threaded executor (`tokio::spawn` needs `Send`).
#[test]
fn write_and_truncate_futures_are_send() {
    fn send<T: Send>(t: T) -> T {
        t
    }
    let store = bough::Store::open(Options::in_memory().maintenance_interval_ms(0)).expect("open");
    let main = store
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    let mut b = WriteBatch::new();
    b.put("k", "v");
    common::block_on(send(main.write(b))).expect("write");
    common::block_on(send(main.truncate(b""))).expect("truncate");
    assert_eq!(main.get_blocking(b"k").expect("get"), None);
}
