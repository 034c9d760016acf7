//! The facade's API surface (issue 15, "An API that reads like the best embedded stores"):
//! one-key writes and reads, chained batches, lazy range / reverse / prefix iterators over
//! snapshots (checked against a `BTreeMap` model over random operations), the table handle
//! over several partitions, settings apart from components, and `gc` / `gc_dry_run`.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bough::io::MemoryStorage;
use bough::{
    Backend, ErrorKind, KeyValue, ManualClock, Options, PutOptions, RangeIter, Store, WriteBatch,
};
use common::Rng;

const T0: u64 = 1_700_000_000_000;

fn memory_store(clock: &ManualClock) -> Store {
    Store::builder(
        Options::in_memory()
            .maintenance_interval_ms(0)
            // Small files and pages so a few hundred keys span many leaves.
            .data_file_size(64 * 4096),
    )
    .clock(Arc::new(clock.clone()))
    .open()
    .expect("open")
}

fn keys(it: RangeIter) -> Vec<Vec<u8>> {
    it.map(|kv| kv.expect("read").key).collect()
}

#[test]
// Borrowed keys and values (`&String`) are part of what is tested.
#[allow(clippy::needless_borrows_for_generic_args)]
fn one_key_put_get_delete_round_trip_blocking_and_async() {
    let clock = ManualClock::new(T0);
    let store = memory_store(&clock);
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    // Keys and values of every byte-ish type.
    main.put_blocking("a", "1").unwrap();
    main.put_blocking(String::from("b"), vec![2u8]).unwrap();
    main.put_blocking(b"c", [3u8]).unwrap();
    main.put_blocking(&b"d"[..], &String::from("4")).unwrap();
    assert_eq!(main.get_blocking("a").unwrap().unwrap().value, b"1");
    assert_eq!(main.get_blocking(b"b").unwrap().unwrap().value, [2]);
    assert_eq!(main.get_blocking(vec![b'c']).unwrap().unwrap().value, [3]);
    assert_eq!(
        main.get_blocking(String::from("d")).unwrap().unwrap().value,
        b"4"
    );
    assert_eq!(main.get_blocking("a").unwrap().unwrap().timestamp, T0);
    main.delete_blocking("a").unwrap();
    assert!(main.get_blocking("a").unwrap().is_none());
    // Deleting an absent key is no error.
    main.delete_blocking("nope").unwrap();
    assert_eq!(main.floor_blocking("bz").unwrap().unwrap().key, b"b");

    // The same as futures.
    common::block_on(async {
        main.put("e", "5").await.unwrap();
        assert_eq!(main.get("e").await.unwrap().unwrap().value, b"5");
        main.delete(b"e").await.unwrap();
        assert!(main.get(b"e").await.unwrap().is_none());
        assert_eq!(main.floor("cz").await.unwrap().unwrap().key, b"c");
        main.write(WriteBatch::new().put("f", "6").delete("b"))
            .await
            .unwrap();
        main.truncate("e").await.unwrap();
    });
    assert_eq!(keys(main.iter()), [b"c".to_vec(), b"d".to_vec()]);

    // A one-key write is checked as a batch is: bad keys are typed errors naming the branch.
    let e = main.put_blocking("", "v").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("t.0@main"), "{e}");

    // Durable: the same memory reopens with what the one-liners wrote.
    store.close().unwrap();
    assert_eq!(
        main.put_blocking("g", "7").unwrap_err().kind(),
        ErrorKind::Closed
    );
}

#[test]
fn one_key_writes_survive_a_reopen() {
    let mem = MemoryStorage::new();
    let open = || {
        Store::builder(Options::in_memory().maintenance_interval_ms(0))
            .memory(mem.clone())
            .open()
            .unwrap()
    };
    let store = open();
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    main.put_blocking("k", "v").unwrap();
    main.put_blocking("gone", "v").unwrap();
    main.delete_blocking("gone").unwrap();
    store.close().unwrap();
    drop(main);
    let store = open();
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    assert_eq!(main.get_blocking("k").unwrap().unwrap().value, b"v");
    assert!(main.get_blocking("gone").unwrap().is_none());
}

#[test]
fn write_batches_chain_and_go_by_value() {
    let store = memory_store(&ManualClock::new(T0));
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    // A chain of calls goes straight into a write.
    main.write_blocking(WriteBatch::new().put("a", "1").put("b", "2").delete("c"))
        .unwrap();
    // A kept batch chains too, and is moved in.
    let mut batch = WriteBatch::new();
    batch
        .put_with(
            "c",
            "3",
            PutOptions {
                timestamp: Some(T0 - 5),
                ..PutOptions::default()
            },
        )
        .delete_at("a", T0 - 1)
        .delete("b");
    assert_eq!(batch.len(), 3);
    let r = main.write_counted_blocking(batch).unwrap();
    // `a` was written at T0, so the delete at T0 - 1 loses; `c` loses to the tombstone the
    // first batch's delete left at T0.
    assert_eq!((r.applied, r.superseded), (1, 2));
    assert_eq!(keys(main.iter()), [b"a".to_vec()]);
    // Taking a batch out of a chain leaves the chain's batch empty.
    let mut kept = WriteBatch::new();
    let taken: WriteBatch = kept.put("x", "y").into();
    assert_eq!((taken.len(), kept.len()), (1, 0));
}

/// One random operation on the model and the branch.
fn step(
    rng: &mut Rng,
    main: &bough::Branch,
    clock: &ManualClock,
    model: &mut BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)>,
) {
    let key = |rng: &mut Rng| format!("k{:03}", rng.below(300)).into_bytes();
    match rng.below(10) {
        0..=4 => {
            let mut batch = WriteBatch::new();
            let mut seen = std::collections::BTreeSet::new();
            for _ in 0..rng.range(1, 40) {
                let k = key(rng);
                if !seen.insert(k.clone()) {
                    continue;
                }
                // Values from empty to overflow-sized.
                let len = match rng.below(20) {
                    0 => 3000,
                    1 => 0,
                    _ => rng.urange(1, 40),
                };
                let v = vec![b'a' + (rng.below(26) as u8); len];
                model.insert(k.clone(), (v.clone(), None));
                batch.put(k, v);
            }
            main.write_blocking(batch).unwrap();
        }
        5 | 6 => {
            let k = key(rng);
            model.remove(&k);
            main.delete_blocking(k).unwrap();
        }
        7 => {
            // A TTL write: it disappears from reads once the clock passes it.
            let k = key(rng);
            let ttl = rng.range(1, 50);
            let now = clock_now(clock);
            model.insert(k.clone(), (b"ttl".to_vec(), Some(now + ttl)));
            let mut batch = WriteBatch::new();
            batch.put_with(
                k,
                "ttl",
                PutOptions {
                    ttl_ms: Some(ttl),
                    ..PutOptions::default()
                },
            );
            main.write_blocking(batch).unwrap();
        }
        8 => clock.advance(rng.range(1, 30)),
        _ => {
            // Truncate a tail now and then.
            if rng.chance(0.2) {
                let k = key(rng);
                model.retain(|m, _| *m < k);
                main.truncate_blocking(k).unwrap();
            }
        }
    }
}

/// Every pair an iterator yields, in its order (panicking on an error, with `ctx`).
fn pairs(ctx: &str, it: impl Iterator<Item = bough::Result<KeyValue>>) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|kv| {
        let KeyValue { key, value } = kv.unwrap_or_else(|e| panic!("{ctx}: {e}"));
        (key, value.value)
    })
    .collect()
}

fn clock_now(clock: &ManualClock) -> u64 {
    use bough::Clock;
    clock.now_ms()
}

/// Whether `k` lies between the bounds (the model's side of a range).
fn in_range(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>, k: &[u8]) -> bool {
    let above = match lo {
        Bound::Included(b) => k >= b.as_slice(),
        Bound::Excluded(b) => k > b.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(b) => k <= b.as_slice(),
        Bound::Excluded(b) => k < b.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

fn bound(rng: &mut Rng) -> Bound<Vec<u8>> {
    let k = format!("k{:03}", rng.below(320)).into_bytes();
    match rng.below(3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(k),
        _ => Bound::Excluded(k),
    }
}

/// Range, reverse range, prefix and a double-ended walk that meets in the middle, against a
/// `BTreeMap` model, over random puts, deletes (tombstones), TTL writes that expire as the
/// clock moves, and truncates. Seeded: `BOUGH_SEED=<seed>` replays one run.
#[test]
fn ranges_reverse_ranges_and_prefixes_agree_with_a_btreemap() {
    let test = "ranges_reverse_ranges_and_prefixes_agree_with_a_btreemap";
    for seed in common::seeds(test, 3) {
        let mut rng = Rng::new(seed);
        let clock = ManualClock::new(T0);
        let store = memory_store(&clock);
        let main = store.partition("t", 0).unwrap().branch("main").unwrap();
        let mut model = BTreeMap::new();
        for round in 0..150 {
            step(&mut rng, &main, &clock, &mut model);
            if round % 5 != 0 {
                continue;
            }
            let now = clock_now(&clock);
            let live: BTreeMap<Vec<u8>, Vec<u8>> = model
                .iter()
                .filter(|(_, (_, exp))| exp.is_none_or(|at| at > now))
                .map(|(k, (v, _))| (k.clone(), v.clone()))
                .collect();
            let ctx = format!("seed {seed} round {round}");
            let (lo, hi) = (bound(&mut rng), bound(&mut rng));
            let want: Vec<(Vec<u8>, Vec<u8>)> = live
                .iter()
                .filter(|(k, _)| in_range(&lo, &hi, k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            assert_eq!(
                pairs(&ctx, main.range((lo.clone(), hi.clone()))),
                want,
                "{ctx}: range {lo:?}..{hi:?}"
            );
            let mut rev = want.clone();
            rev.reverse();
            assert_eq!(
                pairs(&ctx, main.range((lo.clone(), hi.clone())).rev()),
                rev,
                "{ctx}: reverse range {lo:?}..{hi:?}"
            );
            // Both ends at once: alternate at random; together they yield each entry once.
            let mut it = main.range((lo.clone(), hi.clone()));
            let (mut front, mut back) = (Vec::new(), Vec::new());
            loop {
                let from_front = rng.chance(0.5);
                let next = if from_front {
                    it.next()
                } else {
                    it.next_back()
                };
                let Some(kv) = next else { break };
                let key = kv.unwrap_or_else(|e| panic!("{ctx}: {e}")).key;
                if from_front {
                    front.push(key);
                } else {
                    back.push(key);
                }
            }
            back.reverse();
            front.extend(back);
            let want_keys: Vec<Vec<u8>> = want.iter().map(|(k, _)| k.clone()).collect();
            assert_eq!(front, want_keys, "{ctx}: both ends of {lo:?}..{hi:?}");
            assert!(
                it.next().is_none() && it.next_back().is_none(),
                "{ctx}: fused"
            );

            let prefix = format!("k{}", rng.below(4)).into_bytes();
            let want: Vec<(Vec<u8>, Vec<u8>)> = live
                .iter()
                .filter(|(k, _)| k.starts_with(&prefix))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            assert_eq!(
                pairs(&ctx, main.prefix(&prefix)),
                want,
                "{ctx}: prefix {prefix:?}"
            );
            let view = main.read_view().unwrap();
            let mut rev = want;
            rev.reverse();
            assert_eq!(
                pairs(&ctx, view.prefix(&prefix).rev()),
                rev,
                "{ctx}: reverse prefix"
            );
            let all: Vec<_> = live.into_iter().collect();
            assert_eq!(pairs(&ctx, view.iter()), all, "{ctx}: everything");
        }
    }
}

#[test]
fn an_iterator_reads_the_snapshot_it_was_made_on() {
    let clock = ManualClock::new(T0);
    let store = memory_store(&clock);
    let main = store.partition("t", 0).unwrap().branch("main").unwrap();
    let mut batch = WriteBatch::new();
    for i in 0..500 {
        batch.put(format!("k{i:04}"), format!("v{i}"));
    }
    main.write_blocking(batch).unwrap();
    let mut forward = main.range("k0100".."k0400");
    let mut backward = main.iter().rev();
    let prefix = main.prefix("k02");
    // Read a little, then change everything the iterators have still to read.
    assert_eq!(forward.next().unwrap().unwrap().key, b"k0100");
    assert_eq!(backward.next().unwrap().unwrap().key, b"k0499");
    main.truncate_blocking("k0200").unwrap();
    main.put_blocking("k0150", "changed").unwrap();
    main.put_blocking("k0150x", "new").unwrap();
    main.delete_blocking("k0101").unwrap();
    // Expiry is judged at the snapshot's time too: advancing the clock changes nothing.
    clock.advance(1_000_000);
    let rest: Vec<KeyValue> = forward.map(Result::unwrap).collect();
    assert_eq!(rest.len(), 299);
    assert_eq!(rest[0].key, b"k0101");
    assert_eq!(rest[49].value.value, b"v150");
    assert!(rest.iter().all(|kv| kv.key != b"k0150x"));
    assert_eq!(backward.count(), 499);
    assert_eq!(prefix.count(), 100);
    // A new iterator sees the writes.
    assert_eq!(main.range("k0100".."k0400").count(), 100);
    assert_eq!(main.prefix("k02").count(), 0);
}

#[test]
fn an_iterator_of_an_unusable_branch_yields_the_error_once() {
    let store = memory_store(&ManualClock::new(T0));
    let p = store.partition("t", 0).unwrap();
    p.branch("main").unwrap().put_blocking("k", "v").unwrap();
    let dev = p.create_branch("dev", "main").unwrap();
    p.delete_branch("dev").unwrap();
    let mut it = dev.range::<&str>(..);
    assert_eq!(it.next().unwrap().unwrap_err().kind(), ErrorKind::NotFound);
    assert!(it.next().is_none());
    let main = p.branch("main").unwrap();
    store.close().unwrap();
    let mut it = main.prefix("k").rev();
    assert_eq!(it.next().unwrap().unwrap_err().kind(), ErrorKind::Closed);
    assert!(it.next().is_none());
}

#[test]
fn a_table_handle_spans_its_partitions() {
    let store = memory_store(&ManualClock::new(T0));
    let orders = store.table("orders").unwrap();
    assert_eq!(orders.name(), "orders");
    assert!(orders.partitions().unwrap().is_empty());
    for p in [0, 1, 2] {
        let main = orders.partition(p).unwrap().branch("main").unwrap();
        main.put_blocking("k", format!("main{p}")).unwrap();
    }
    // Another table is not part of it.
    store
        .partition("other", 0)
        .unwrap()
        .branch("main")
        .unwrap()
        .put_blocking("k", "x")
        .unwrap();
    assert_eq!(orders.partitions().unwrap(), [0, 1, 2]);

    orders.create_branch("feature", "main").unwrap();
    for p in [0, 1, 2] {
        let part = orders.partition(p).unwrap();
        assert_eq!(
            part.branches().unwrap(),
            ["feature", "main"],
            "partition {p}"
        );
        let f = part.branch("feature").unwrap();
        assert_eq!(
            f.get_blocking("k").unwrap().unwrap().value,
            format!("main{p}").as_bytes()
        );
        f.put_blocking("k", format!("feature{p}")).unwrap();
    }
    // All or nothing: a name that exists on one partition fails everywhere and leaves none.
    orders
        .partition(1)
        .unwrap()
        .create_branch("taken", "main")
        .unwrap();
    let e = orders.create_branch("taken", "main").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{e}");
    for p in [0, 2] {
        assert_eq!(
            orders.partition(p).unwrap().branches().unwrap(),
            ["feature", "main"],
            "partition {p} rolled back"
        );
    }

    let ts = orders.archive("feature").unwrap();
    for p in [0, 1, 2] {
        let archives = orders.partition(p).unwrap().archives("feature").unwrap();
        assert_eq!(archives.len(), 1, "partition {p}");
        assert!(
            archives[0].to_string().ends_with(&format!("_{ts}")),
            "{}",
            archives[0]
        );
    }

    orders.truncate_branch("feature").unwrap();
    for p in [0, 1, 2] {
        let part = orders.partition(p).unwrap();
        assert!(
            part.branch("feature")
                .unwrap()
                .get_blocking("k")
                .unwrap()
                .is_none()
        );
        assert!(
            part.branch("main")
                .unwrap()
                .get_blocking("k")
                .unwrap()
                .is_some()
        );
    }
    orders.delete_branch("feature").unwrap();
    orders.delete_branch("taken").unwrap();
    for p in [0, 1, 2] {
        assert_eq!(orders.partition(p).unwrap().branches().unwrap(), ["main"]);
    }
    orders.truncate().unwrap();
    for p in [0, 1, 2] {
        let main = orders.partition(p).unwrap().branch("main").unwrap();
        assert!(main.get_blocking("k").unwrap().is_none());
    }
    let other = store.partition("other", 0).unwrap().branch("main").unwrap();
    assert!(
        other.get_blocking("k").unwrap().is_some(),
        "another table kept its keys"
    );
    assert_eq!(
        store.table("../x").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn settings_are_plain_data_and_components_go_through_the_builder() {
    let o = Options::new("/var/lib/app")
        .page_size(8192)
        .shards(3)
        .tombstone_retention_ms(60_000);
    let text = o.to_toml_string().unwrap();
    assert_eq!(Options::from_toml_str(&text).unwrap(), o, "{text}");
    // No component is a setting: none can be set in TOML.
    for hook in ["clock", "faults", "memory", "object_store"] {
        let e = Options::from_toml_str(&format!("path = \"/x\"\n{hook} = 1\n")).unwrap_err();
        assert!(e.to_string().contains(hook), "{e}");
    }
    // A builder's settings are checked on open.
    let e = Store::builder(Options::in_memory().shards(0))
        .open()
        .unwrap_err();
    assert!(e.to_string().contains("shards"), "{e}");
    // A memory component makes the store a memory store.
    let mem = MemoryStorage::new();
    let b = Store::builder(Options::new("/nonexistent/never-created")).memory(mem.clone());
    assert_eq!(b.settings().backend, Backend::Memory);
    let store = b.open().unwrap();
    store
        .partition("t", 0)
        .unwrap()
        .branch("main")
        .unwrap()
        .put_blocking("k", "v")
        .unwrap();
    store.close().unwrap();
    let reader = Store::builder(Options::in_memory())
        .memory(mem)
        .open_read_only()
        .unwrap();
    let main = reader.partition("t", 0).unwrap().branch("main").unwrap();
    assert_eq!(main.get_blocking("k").unwrap().unwrap().value, b"v");
}

#[test]
fn gc_and_its_dry_run() {
    let store = memory_store(&ManualClock::new(T0));
    let p = store.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    for i in 0..200 {
        main.put_blocking(format!("k{i:03}"), vec![b'x'; 1000])
            .unwrap();
    }
    let dev = p.create_branch("dev", "main").unwrap();
    for i in 0..200 {
        dev.put_blocking(format!("k{i:03}"), vec![b'y'; 1000])
            .unwrap();
    }
    drop(dev);
    p.delete_branch("dev").unwrap();
    // With the write buffer on (the default) dev's writes were only ever in its log file.
    let garbage = |r: &bough::GcReport| {
        let mut v: Vec<String> = r
            .deleted
            .iter()
            .chain(&r.deleted_logs)
            .map(|(n, _)| n.clone())
            .collect();
        v.sort();
        v
    };
    let dry = p.gc_dry_run().unwrap();
    assert!(
        garbage(&dry).iter().any(|n| n.contains("_dev_")),
        "the deleted branch's files are garbage: {dry:?}"
    );
    // A dry run deletes nothing: the real run finds the same garbage.
    let again = p.gc_dry_run().unwrap();
    assert_eq!(garbage(&again), garbage(&dry));
    let real = p.gc().unwrap();
    assert_eq!(garbage(&real), garbage(&dry));
    assert!(garbage(&p.gc_dry_run().unwrap()).is_empty());
    assert_eq!(main.iter().count(), 200);
}
