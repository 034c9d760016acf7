//! The Store API end to end on every backend: writes, reads, scans, floor, truncate,
//! expiry, reopen, value sizes, bad input.

use std::ops::Bound;
use std::sync::Arc;

use bough::{Backend, ErrorKind, ManualClock, Options, PutOptions, ScanOptions, Store, WriteBatch};

fn backends() -> Vec<Backend> {
    vec![Backend::Memory, Backend::Pread, Backend::IoUring]
}

fn open(backend: Backend, dir: &std::path::Path, mem: &bough::io::MemoryStorage) -> Store {
    let opts = match backend {
        Backend::Memory => Store::builder(Options::in_memory()).memory(mem.clone()),
        b => Store::builder(Options::new(dir).backend(b)),
    };
    let store = opts
        .map_settings(|o| o.maintenance_interval_ms(0))
        .open()
        .unwrap();
    eprintln!("backend: {}", store.backend());
    store
}

#[test]
fn write_read_scan_floor_truncate_reopen() {
    for backend in backends() {
        let dir = tempfile::tempdir().unwrap();
        let mem = bough::io::MemoryStorage::new();
        let store = open(backend, dir.path(), &mem);
        let main = store
            .partition("orders", 3)
            .unwrap()
            .branch("main")
            .unwrap();
        let mut b = WriteBatch::new();
        for i in 0..1000u32 {
            b.put(format!("k{i:04}"), format!("v{i}"));
        }
        main.write_blocking(b).unwrap();
        assert_eq!(main.get_blocking(b"k0042").unwrap().unwrap().value, b"v42");
        assert!(main.get_blocking(b"nope").unwrap().is_none());
        let f = main.floor_blocking(b"k0042x").unwrap().unwrap();
        assert_eq!(f.key, b"k0042");
        assert!(main.floor_blocking(b"a").unwrap().is_none());
        let page = main
            .scan_blocking(&ScanOptions {
                begin: Bound::Excluded(b"k0010".to_vec()),
                end: Bound::Excluded(b"k0020".to_vec()),
                limit: 5,
                ..Default::default()
            })
            .unwrap();
        let keys: Vec<_> = page.entries.iter().map(|e| e.key.clone()).collect();
        assert_eq!(
            keys,
            (11..16)
                .map(|i| format!("k{i:04}").into_bytes())
                .collect::<Vec<_>>()
        );
        assert_eq!(page.next, Some(b"k0016".to_vec()));
        // A zero limit would page forever (its continuation is its own start): refused.
        let zero = main
            .scan_blocking(&ScanOptions {
                limit: 0,
                ..Default::default()
            })
            .unwrap_err();
        assert_eq!(zero.kind(), ErrorKind::InvalidArgument);
        main.truncate_blocking(b"k0500").unwrap();
        assert!(main.get_blocking(b"k0500").unwrap().is_none());
        assert!(main.get_blocking(b"k0499").unwrap().is_some());
        store.close().unwrap();
        assert_eq!(
            main.get_blocking(b"k0001").unwrap_err().kind(),
            ErrorKind::Closed
        );
        drop(main);
        drop(store);
        let store = open(backend, dir.path(), &mem);
        let main = store
            .partition("orders", 3)
            .unwrap()
            .branch("main")
            .unwrap();
        assert_eq!(main.get_blocking(b"k0499").unwrap().unwrap().value, b"v499");
        let all = main.scan_blocking(&ScanOptions::default()).unwrap();
        assert_eq!(all.entries.len(), 500);
        store.table("orders").unwrap().truncate().unwrap();
        assert!(
            main.scan_blocking(&ScanOptions::default())
                .unwrap()
                .entries
                .is_empty()
        );
    }
}

#[test]
fn expired_entries_are_never_returned_and_get_removed() {
    let clock = ManualClock::new(1_000_000);
    let store = Store::builder(Options::in_memory().maintenance_interval_ms(0))
        .clock(Arc::new(clock.clone()))
        .open()
        .unwrap();
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    let mut b = WriteBatch::new();
    b.put_with(
        "short",
        "x",
        PutOptions {
            ttl_ms: Some(10),
            ..Default::default()
        },
    );
    b.put_with(
        "long",
        "y",
        PutOptions {
            ttl_ms: Some(1000),
            ..Default::default()
        },
    );
    b.put("forever", "z");
    main.write_blocking(b).unwrap();
    assert!(main.get_blocking(b"short").unwrap().is_some());
    clock.advance(11);
    assert!(main.get_blocking(b"short").unwrap().is_none());
    assert_eq!(
        main.floor_blocking(b"shortz").unwrap().unwrap().key,
        b"long"
    );
    let all = main.scan_blocking(&ScanOptions::default()).unwrap();
    assert_eq!(all.entries.len(), 2);
    main.expire_now().unwrap();
    // The expired key is physically gone: even a clock moved back cannot see it.
    clock.set(0);
    assert!(main.get_blocking(b"short").unwrap().is_none());
    assert!(main.get_blocking(b"long").unwrap().is_some());
}

#[test]
fn last_writer_wins_by_user_timestamp() {
    let store = Store::open(Options::in_memory().maintenance_interval_ms(0)).unwrap();
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    let put = |v: &str, ts| {
        let mut b = WriteBatch::new();
        b.put_with(
            "k",
            v,
            PutOptions {
                timestamp: Some(ts),
                ..Default::default()
            },
        );
        b
    };
    main.write_blocking(put("new", 20)).unwrap();
    main.write_blocking(put("old", 10)).unwrap();
    assert_eq!(main.get_blocking(b"k").unwrap().unwrap().value, b"new");
    let mut d = WriteBatch::new();
    d.delete_at("k", 15);
    main.write_blocking(d).unwrap();
    assert!(main.get_blocking(b"k").unwrap().is_some());
}

/// `put --ts u64::MAX` made a key that no later write could replace. A user timestamp more
/// than `max_timestamp_skew_ms` ahead of the store clock is refused (`InvalidArgument`) and
/// the batch changes nothing; one within the skew is stored.
#[test]
fn regression_user_timestamps_beyond_the_clock_and_skew_are_refused() {
    let clock = ManualClock::new(1_000_000);
    let store = Store::builder(
        Options::in_memory()
            .maintenance_interval_ms(0)
            .max_timestamp_skew_ms(60_000),
    )
    .clock(Arc::new(clock.clone()))
    .open()
    .unwrap();
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    let at = |k: &str, ts: u64| {
        let mut b = WriteBatch::new();
        b.put("other", "x").put_with(
            k,
            "v",
            PutOptions {
                timestamp: Some(ts),
                ..Default::default()
            },
        );
        b
    };
    for ts in [1_060_001, u64::MAX] {
        let e = main.write_blocking(at("k", ts)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains("max_timestamp_skew_ms"), "{e}");
        let mut d = WriteBatch::new();
        d.delete_at("k", ts);
        assert_eq!(
            main.write_counted_blocking(d).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
    assert!(
        main.get_blocking(b"other").unwrap().is_none(),
        "a refused batch changes nothing"
    );
    main.write_blocking(at("k", 1_060_000)).unwrap();
    assert_eq!(
        main.get_blocking(b"k").unwrap().unwrap().timestamp,
        1_060_000
    );
    // As the clock moves on, what was too far ahead becomes acceptable.
    clock.advance(10_000);
    main.write_blocking(at("k", 1_070_000)).unwrap();
}

/// A write of entries older than the stored ones changes nothing; the counted write says so
/// (applied vs superseded) instead of reporting them as written.
#[test]
fn counted_writes_tell_applied_from_superseded() {
    let store = Store::open(Options::in_memory().maintenance_interval_ms(0)).unwrap();
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    let batch = |ts: u64, keys: &[&str]| {
        let mut b = WriteBatch::new();
        for k in keys {
            b.put_with(
                *k,
                format!("v{ts}"),
                PutOptions {
                    timestamp: Some(ts),
                    ..Default::default()
                },
            );
        }
        b
    };
    let r = main.write_counted_blocking(batch(20, &["a", "b"])).unwrap();
    assert_eq!((r.applied, r.superseded), (2, 0));
    let r = main
        .write_counted_blocking(batch(10, &["a", "b", "c"]))
        .unwrap();
    assert_eq!((r.applied, r.superseded), (1, 2));
    assert_eq!(main.get_blocking(b"a").unwrap().unwrap().value, b"v20");
    let mut d = WriteBatch::new();
    d.delete_at("a", 5).delete_at("b", 30);
    let r = main.write_counted_blocking(d).unwrap();
    assert_eq!((r.applied, r.superseded), (1, 1));
    assert!(main.get_blocking(b"b").unwrap().is_none());
    // A tombstone supersedes an older put too.
    let r = main.write_counted_blocking(batch(25, &["b"])).unwrap();
    assert_eq!((r.applied, r.superseded), (0, 1));
}

#[test]
fn value_sizes_round_trip() {
    for backend in backends() {
        let dir = tempfile::tempdir().unwrap();
        let mem = bough::io::MemoryStorage::new();
        let store = open(backend, dir.path(), &mem);
        let main = store.partition("big", 1).unwrap().branch("main").unwrap();
        let sizes = [0usize, 1, 4095, 4096, 4097, 1 << 20, 64 << 20];
        for (i, &n) in sizes.iter().enumerate() {
            let v: Vec<u8> = (0..n).map(|j| (j * 31 + i) as u8).collect();
            let mut b = WriteBatch::new();
            b.put(format!("v{i}"), v);
            main.write_blocking(b).unwrap();
        }
        for (i, &n) in sizes.iter().enumerate() {
            let got = main
                .get_blocking(format!("v{i}").as_bytes())
                .unwrap()
                .unwrap()
                .value;
            assert_eq!(got.len(), n);
            assert!(
                got.iter()
                    .enumerate()
                    .all(|(j, &b)| b == (j * 31 + i) as u8)
            );
        }
    }
}

#[test]
fn bad_input_is_a_typed_error() {
    let store = Store::open(Options::in_memory().maintenance_interval_ms(0)).unwrap();
    assert_eq!(
        store.partition("../x", 0).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let p = store.partition("t", 0).unwrap();
    assert_eq!(
        p.branch("Main").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(p.branch("nosuch").unwrap_err().kind(), ErrorKind::NotFound);
    let main = p.branch("main").unwrap();
    let mut b = WriteBatch::new();
    b.put(vec![b'k'; 513], "v");
    let e = main.write_blocking(b).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("t.0@main"), "{e}");
    let mut b = WriteBatch::new();
    b.put("", "v");
    assert_eq!(
        main.write_blocking(b).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn a_second_open_of_the_same_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = Store::open(Options::new(dir.path()).maintenance_interval_ms(0)).unwrap();
    let e = Store::open(Options::new(dir.path())).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Busy);
    assert!(e.to_string().contains("locked"), "{e}");
    a.close().unwrap();
    Store::open(Options::new(dir.path())).unwrap();
}

#[test]
fn open_branch_heads_stay_bounded_and_reopen_lazily() {
    let store = Store::open(
        Options::in_memory()
            .max_open_branches(4)
            .maintenance_interval_ms(0),
    )
    .unwrap();
    for p in 0..20u32 {
        let main = store.partition("t", p).unwrap().branch("main").unwrap();
        let mut b = WriteBatch::new();
        b.put("k", format!("v{p}"));
        main.write_blocking(b).unwrap();
    }
    // Every partition's head was closed or kept; all read back (replayed on demand).
    for p in 0..20u32 {
        let main = store.partition("t", p).unwrap().branch("main").unwrap();
        assert_eq!(
            main.get_blocking(b"k").unwrap().unwrap().value,
            format!("v{p}").as_bytes()
        );
    }
    assert!(
        store.open_branch_count() <= 5,
        "{}",
        store.open_branch_count()
    );
}
