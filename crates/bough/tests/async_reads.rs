//! Async reads never wait for storage on the executor thread (issue 15, "Async that is async"):
//! a read whose pages are cached is answered there, one that needs storage moves to the
//! store's reader threads while the executor runs other tasks.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bough::io::FaultInjector;
use bough::{Backend, Options, ScanOptions, WriteBatch};

/// A store whose leaves are never cached, so a get of a freshly opened store reads its leaf.
fn cold_store(dir: &std::path::Path, faults: &FaultInjector) -> bough::Store {
    let opts = bough::Store::builder(
        Options::new(dir)
            .backend(Backend::Pread)
            .maintenance_interval_ms(0)
            .cache_data_pages(false),
    )
    .faults(faults.clone());
    common::open("async_reads", opts)
}

/// Holds the device: while the read gate is closed, every storage read waits. On a runtime
/// with one thread, a get that blocked its thread would stop the ticking task until the gate
/// opens; the test opens it only after the ticker has run 50 times or after 5 s (the
/// watchdog, so a blocking get fails the assertions instead of hanging).
#[test]
fn a_get_waiting_for_storage_does_not_stall_other_tasks_of_a_current_thread_runtime() {
    let dir = tempfile::tempdir().expect("tempdir");
    let faults = FaultInjector::new();
    {
        let store = cold_store(dir.path(), &faults);
        let main = store
            .partition("t", 0)
            .and_then(|p| p.branch("main"))
            .expect("branch");
        let mut b = WriteBatch::new();
        for i in 0..2000u32 {
            b.put(format!("k{i:05}"), format!("value {i}"));
        }
        main.write_blocking(b).expect("write");
        store.close().expect("close");
    }
    let store = cold_store(dir.path(), &faults);
    let main = store
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    faults.stall_reads();

    let ticks = Arc::new(AtomicU64::new(0));
    let get_done = Arc::new(AtomicBool::new(false));
    let ticks_when_get_done = Arc::new(AtomicU64::new(u64::MAX));
    let watchdog = {
        let faults = faults.clone();
        let ticks = ticks.clone();
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            while ticks.load(Ordering::SeqCst) < 50 && start.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(1));
            }
            faults.release_reads();
        })
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let value = rt.block_on(async {
        let ticker = {
            let (ticks, get_done) = (ticks.clone(), get_done.clone());
            tokio::spawn(async move {
                while !get_done.load(Ordering::SeqCst) {
                    ticks.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            })
        };
        let got = main.get(b"k01234").await;
        ticks_when_get_done.store(ticks.load(Ordering::SeqCst), Ordering::SeqCst);
        get_done.store(true, Ordering::SeqCst);
        ticker.await.expect("ticker");
        got
    });
    watchdog.join().expect("watchdog");
    let value = value.expect("get").expect("the key is there");
    assert_eq!(value.value, b"value 1234".to_vec());
    let ticks_seen = ticks_when_get_done.load(Ordering::SeqCst);
    assert!(
        ticks_seen >= 50,
        "the other task ran {ticks_seen} times while the get waited for storage: the get \
         blocked the runtime's only thread"
    );
}

/// Async get, floor and scan give the answers of their blocking twins, cold (through the
/// reader threads) and warm (from the cache, on the caller's thread).
#[test]
fn async_reads_agree_with_the_blocking_ones_cold_and_warm() {
    for cache_leaves in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = Options::new(dir.path())
            .backend(Backend::Pread)
            .maintenance_interval_ms(0)
            .cache_data_pages(cache_leaves);
        let store = common::open("async_reads_agree", opts);
        let main = store
            .partition("t", 0)
            .and_then(|p| p.branch("main"))
            .expect("branch");
        let mut b = WriteBatch::new();
        for i in 0..500u32 {
            b.put(format!("k{i:05}"), format!("value {i}"));
        }
        main.write_blocking(b).expect("write");
        let opts = ScanOptions {
            limit: 7,
            ..ScanOptions::default()
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let get = main.get(b"k00042").await.expect("get");
            assert_eq!(get, main.get_blocking(b"k00042").expect("get"));
            assert!(get.is_some());
            let floor = main.floor(b"k00042x").await.expect("floor");
            assert_eq!(floor, main.floor_blocking(b"k00042x").expect("floor"));
            let page = main.scan(&opts).await.expect("scan");
            assert_eq!(page, main.scan_blocking(&opts).expect("scan"));
            assert_eq!(page.entries.len(), 7);
            assert_eq!(main.get(b"absent").await.expect("get"), None);
        });
    }
}
