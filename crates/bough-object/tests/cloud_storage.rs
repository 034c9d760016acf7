//! `CloudStorage` as a `Storage` backend: the conformance expectations of the local
//! backends where they apply to objects, plus what is particular to the cloud tier —
//! write-once data objects, the bounded cache, ownership and sealing, retries and
//! read-back of ambiguous writes.

mod common;

use std::sync::Arc;

use bough_io::{ErrorKind, OpenOptions, Storage};
use bough_object::{
    CloudStorage, Fault, FaultyObjectStore, Fencing, FencingMode, MemoryObjectStore, ObjOp,
    ObjectStore, check_guarantees,
};

struct Env {
    store: Arc<dyn ObjectStore>,
    cache: tempfile::TempDir,
    budget: u64,
}

impl Env {
    fn new(store: Arc<dyn ObjectStore>, budget: u64) -> Env {
        Env {
            store,
            cache: tempfile::tempdir().expect("tempdir"),
            budget,
        }
    }

    fn memory(budget: u64) -> Env {
        Env::new(Arc::new(MemoryObjectStore::new()), budget)
    }

    /// A CloudStorage over the env's store and cache directory.
    fn open(&self) -> CloudStorage {
        CloudStorage::open(
            self.store.clone(),
            self.cache.path(),
            &common::test_config(self.budget),
            None,
        )
        .expect("open cloud storage")
    }

    /// A second process: same store, its own (empty) cache directory.
    fn other_process(&self) -> (CloudStorage, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = CloudStorage::open(
            self.store.clone(),
            dir.path(),
            &common::test_config(self.budget),
            None,
        )
        .expect("open cloud storage");
        (s, dir)
    }
}

fn kind_of<T: std::fmt::Debug>(r: Result<T, bough_io::IoError>) -> ErrorKind {
    r.expect_err("expected an error").kind()
}

/// Makes `s` the owner of (main, term) in `p.0`.
fn own(s: &CloudStorage, term: u64) {
    s.create_dir("p.0").expect("create_dir");
    s.create_new(&format!("p.0/manifest_main_{term}"), b"manifest")
        .expect("create manifest");
}

/// The versions of a manifest chain in the store, oldest first.
fn chain(store: &dyn ObjectStore, path: &str) -> Vec<bough_object::envelope::Envelope> {
    let mut versions: Vec<(u64, Vec<u8>)> = bough_object::list_all(store, &format!("{path}.v"))
        .expect("list")
        .into_iter()
        .filter_map(|o| {
            let n = o.key.rsplit(".v").next()?.parse().ok()?;
            Some((n, store.get(&o.key).expect("get").0))
        })
        .collect();
    versions.sort();
    versions
        .into_iter()
        .map(|(_, b)| bough_object::envelope::Envelope::decode(&b).expect("envelope"))
        .collect()
}

fn data_bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Writes and syncs a data file of `(main, term)` with `bytes`.
fn write_data(s: &CloudStorage, id: u64, term: u64, bytes: &[u8]) {
    let f = s
        .open(
            &format!("p.0/data_{id}_main_{term}"),
            OpenOptions::write_new(0),
        )
        .expect("create data file");
    f.write_at(0, bytes).expect("write");
    f.sync().expect("upload");
}

#[test]
fn a_store_without_if_match_is_fenced_by_numbered_claims() {
    let od = bough_object::OpendalStore::new(&bough_object::CloudConfig {
        service: bough_object::Service::Memory,
        ..bough_object::CloudConfig::default()
    })
    .expect("opendal memory");
    assert_eq!(check_guarantees(&od), Ok(Fencing::NumberedClaims));
    let od: Arc<dyn ObjectStore> = Arc::new(od);
    let dir = tempfile::tempdir().expect("tempdir");
    let s = CloudStorage::open(od.clone(), dir.path(), &common::test_config(1 << 20), None)
        .expect("accepted with numbered claims");
    assert_eq!(s.fencing(), Fencing::NumberedClaims);
    // Asking for compare-and-swap on it is refused with a typed reason.
    let e = CloudStorage::open(
        od,
        dir.path(),
        &bough_object::CloudConfig {
            fencing: FencingMode::CompareAndSwap,
            ..common::test_config(1 << 20)
        },
        None,
    )
    .expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("compare-and-swap"), "{e}");
}

#[test]
fn data_files_are_written_once_and_read_back() {
    let env = Env::memory(8 << 20);
    let s = env.open();
    // Without owning the term, no data file may be created.
    s.create_dir("p.0").expect("create_dir");
    assert_eq!(
        kind_of(s.open("p.0/data_1_main_0", OpenOptions::write_new(0))),
        ErrorKind::Fenced
    );
    own(&s, 0);
    let bytes = data_bytes(1, 20_000);
    let f = s
        .open("p.0/data_1_main_0", OpenOptions::write_new(0))
        .expect("create");
    f.write_at(0, &bytes[..10_000]).expect("write");
    f.write_at(10_000, &bytes[10_000..]).expect("write");
    assert_eq!(f.len().expect("len"), 20_000);
    // Listed (and readable) before the upload: it is being written.
    assert!(
        s.list("p.0")
            .expect("list")
            .contains(&"data_1_main_0".to_string())
    );
    assert!(
        env.store.head("p.0/data_1_main_0").is_err(),
        "not uploaded before sync"
    );
    f.sync().expect("sync uploads");
    assert_eq!(env.store.get("p.0/data_1_main_0").expect("object").0, bytes);
    // Written once: later writes are refused, reads still work.
    assert!(f.write_at(0, b"x").is_err());
    f.sync().expect("a second sync has nothing to do");
    let mut back = vec![0u8; 100];
    f.read_at(19_900, &mut back).expect("read");
    assert_eq!(back, bytes[19_900..]);
    let g = s
        .open("p.0/data_1_main_0", OpenOptions::read())
        .expect("open");
    assert_eq!(g.len().expect("len"), 20_000);
    let mut buf = [0u8; 10];
    let e = g.read_at(19_995, &mut buf).expect_err("past EOF");
    assert!(e.is_unexpected_eof(), "{e}");
    assert_eq!(
        s.read_file("p.0/data_1_main_0", 1 << 20)
            .expect("read_file"),
        bytes
    );
    assert_eq!(
        kind_of(s.read_file("p.0/data_1_main_0", 100)),
        ErrorKind::Corruption
    );
    assert_eq!(s.file_len("p.0/data_1_main_0").expect("len"), 20_000);
    assert_eq!(
        kind_of(s.write_atomic("p.0/data_1_main_0", b"x")),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn envelope_files_behave_like_files() {
    let env = Env::memory(1 << 20);
    let s = env.open();
    assert_eq!(
        kind_of(s.open("f", OpenOptions::read())),
        ErrorKind::NotFound
    );
    let f = s.open("f", OpenOptions::write_create()).expect("create");
    f.write_at(0, b"abc").expect("write");
    let g = s.open("f", OpenOptions::write_create()).expect("reopen");
    assert_eq!(g.len().expect("len"), 3, "create never truncates");
    assert_eq!(
        kind_of(s.open("f", OpenOptions::write_new(0))),
        ErrorKind::AlreadyExists
    );
    assert_eq!(
        kind_of(s.open("nodir/f", OpenOptions::write_create())),
        ErrorKind::NotFound
    );
    f.sync().expect("sync");
    drop((f, g));
    assert_eq!(s.read_file("f", 10).expect("read"), b"abc");
    let r = s.open("f", OpenOptions::read()).expect("open");
    assert!(r.write_at(0, b"x").is_err());
    s.create_dir("p").expect("dir");
    s.write_atomic("p/m", b"first").expect("first");
    s.write_atomic("p/m", b"second, longer").expect("second");
    assert_eq!(s.read_file("p/m", 100).expect("read"), b"second, longer");
    assert_eq!(kind_of(s.read_file("p/m", 3)), ErrorKind::Corruption);
    assert_eq!(kind_of(s.read_file("missing", 10)), ErrorKind::NotFound);
    s.create_new("c", b"one").expect("create_new");
    assert_eq!(kind_of(s.create_new("c", b"two")), ErrorKind::AlreadyExists);
    assert_eq!(s.read_file("c", 100).expect("read"), b"one");
    for bad in ["", "/abs", "a/../b", "a//b", "./a", "a/"] {
        assert_eq!(
            kind_of(s.open(bad, OpenOptions::write_create())),
            ErrorKind::InvalidArgument,
            "{bad:?}"
        );
    }
    // Racing creators: exactly one wins.
    let winners: usize = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..4)
            .map(|i| {
                let s = s.clone();
                scope.spawn(move || s.create_new("race", format!("{i}").as_bytes()).is_ok())
            })
            .collect();
        hs.into_iter()
            .map(|h| usize::from(h.join().unwrap_or(false)))
            .sum()
    });
    assert_eq!(winners, 1);
}

#[test]
fn directories_lists_and_deletes() {
    let env = Env::memory(1 << 20);
    let s = env.open();
    assert!(s.list("").expect("list").is_empty());
    assert!(s.list_dirs().expect("dirs").is_empty());
    s.create_dir("t.1/sub").expect("nested");
    s.create_dir("t.0").expect("create");
    s.create_dir("t.0").expect("again");
    assert_eq!(s.list_dirs().expect("dirs"), vec!["t.0", "t.1"]);
    for n in ["b", "a", "c"] {
        s.write_atomic(&format!("t.0/{n}"), n.as_bytes())
            .expect("write");
    }
    assert_eq!(s.list("t.0").expect("list"), vec!["a", "b", "c"]);
    s.delete("t.0/b").expect("delete");
    s.delete("t.0/b").expect("delete missing");
    assert_eq!(s.list("t.0").expect("list"), vec!["a", "c"]);
    assert!(
        s.delete("t.1").is_err(),
        "delete does not remove directories"
    );
    assert!(s.remove_dir("t.0").is_err(), "not empty");
    s.delete("t.0/a").expect("delete");
    s.delete("t.0/c").expect("delete");
    s.sync_dir("t.0").expect("sync_dir");
    s.remove_dir("t.0").expect("remove_dir");
    assert!(s.remove_dir("t.1").is_err(), "holds sub");
    s.remove_dir("t.1/sub").expect("sub");
    s.remove_dir("t.1").expect("remove");
    assert!(s.list_dirs().expect("dirs").is_empty());
    assert_eq!(kind_of(s.sync_dir("gone")), ErrorKind::NotFound);
    assert_eq!(kind_of(s.file_len("gone")), ErrorKind::NotFound);
    // A directory holding objects exists for another process too.
    s.create_dir("t.5").expect("dir");
    s.write_atomic("t.5/x", b"x").expect("write");
    let (other, _d) = env.other_process();
    assert_eq!(other.list_dirs().expect("dirs"), vec!["t.5"]);
    assert_eq!(other.list("t.5").expect("list"), vec!["x"]);
}

#[test]
fn cold_and_warm_caches_read_the_same_bytes() {
    let env = Env::memory(8 << 20);
    let s = env.open();
    own(&s, 0);
    let files: Vec<Vec<u8>> = (1..=5)
        .map(|i| data_bytes(i, 50_000 + i as usize))
        .collect();
    for (i, b) in files.iter().enumerate() {
        write_data(&s, i as u64 + 1, 0, b);
    }
    drop(s);
    // Warm restart: the same cache directory is reused, nothing is downloaded.
    let warm = env.open();
    assert_eq!(warm.cache_files(), 5);
    for (i, b) in files.iter().enumerate() {
        let got = warm
            .read_file(&format!("p.0/data_{}_main_0", i + 1), 1 << 20)
            .expect("read");
        assert_eq!(&got, b);
    }
    assert_eq!(
        warm.cache_stats()
            .downloads
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    // Cold restart: an empty cache downloads and reads identical bytes.
    let (cold, _dir) = env.other_process();
    for (i, b) in files.iter().enumerate() {
        let f = cold
            .open(&format!("p.0/data_{}_main_0", i + 1), OpenOptions::read())
            .expect("open");
        let mut got = vec![0u8; b.len()];
        f.read_at(0, &mut got).expect("read");
        assert_eq!(&got, b);
    }
    assert_eq!(
        cold.cache_stats()
            .downloads
            .load(std::sync::atomic::Ordering::Relaxed),
        5
    );
}

#[test]
fn the_cache_stays_within_its_budget() {
    let budget = 200_000;
    let env = Env::memory(budget);
    let s = env.open();
    own(&s, 0);
    let files: Vec<Vec<u8>> = (0..40u8).map(|i| data_bytes(i, 30_000)).collect();
    for (i, b) in files.iter().enumerate() {
        write_data(&s, i as u64 + 1, 0, b);
        assert!(s.cache_used() <= budget, "{} > {budget}", s.cache_used());
    }
    // A file larger than the whole budget is read by ranges, never cached.
    write_data(&s, 100, 0, &data_bytes(9, 300_000));
    // Random reads over 40 files (1.2 MB) through a 200 KB cache.
    let mut x: u64 = 12345;
    for _ in 0..400 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let i = (x % 40) as usize;
        let off = (x >> 8) % 29_000;
        let f = s
            .open(&format!("p.0/data_{}_main_0", i + 1), OpenOptions::read())
            .expect("open");
        let mut buf = vec![0u8; 1000];
        f.read_at(off, &mut buf).expect("read");
        assert_eq!(buf, files[i][off as usize..off as usize + 1000]);
        assert!(s.cache_used() <= budget, "{} > {budget}", s.cache_used());
    }
    let big = s
        .read_file("p.0/data_100_main_0", 1 << 20)
        .expect("read big");
    assert_eq!(big, data_bytes(9, 300_000));
    let stats = s.cache_stats();
    assert!(stats.peak_bytes.load(std::sync::atomic::Ordering::Relaxed) <= budget);
    assert!(stats.evictions.load(std::sync::atomic::Ordering::Relaxed) > 0);
    // The on-disk size agrees.
    let on_disk: u64 = walk(env.cache.path());
    assert!(on_disk <= budget, "{on_disk} bytes on disk");
}

fn walk(p: &std::path::Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(p).expect("read_dir").flatten() {
        let m = e.metadata().expect("meta");
        n += if m.is_dir() { walk(&e.path()) } else { m.len() };
    }
    n
}

#[test]
fn a_new_owner_seals_the_old_term_and_fences_its_writer() {
    let env = Env::memory(1 << 20);
    let a = env.open();
    a.create_dir("p.0").expect("dir");
    a.create_new("p.0/manifest_main_0", b"state 0")
        .expect("create");
    let m = a
        .open("p.0/manifest_main_0", OpenOptions::write_create())
        .expect("open");
    m.write_at(7, b" + commit 1").expect("append");
    m.sync().expect("A commits");
    // B reads the manifest (A's latest state) and takes the branch over at term 1.
    let (b, _d) = env.other_process();
    let seen = b.read_file("p.0/manifest_main_0", 1 << 20).expect("read");
    assert_eq!(seen, b"state 0 + commit 1");
    b.create_new("p.0/manifest_main_1", &seen)
        .expect("take over");
    // A's next commit is refused: the old manifest was sealed.
    m.write_at(18, b" + commit 2").expect("append locally");
    assert_eq!(kind_of(m.sync()), ErrorKind::Fenced);
    let versions = chain(env.store.as_ref(), "p.0/manifest_main_0");
    assert_eq!(
        versions.len(),
        1,
        "the seal replaced A's chain: {versions:?}"
    );
    let env0 = &versions[0];
    assert!(env0.sealed() && !env0.appended());
    assert_eq!(
        env0.payload, b"state 0 + commit 1",
        "A's unacknowledged commit is not there"
    );
    // A cannot create data files of its old term either... (it still owns nothing newer)
    assert_eq!(kind_of(m.sync()), ErrorKind::Fenced);
    // B never wrote manifest_main_0 itself and cannot.
    let bm = b
        .open("p.0/manifest_main_0", OpenOptions::write_create())
        .expect("open");
    bm.write_at(0, b"x").expect("local");
    assert_eq!(kind_of(bm.sync()), ErrorKind::Fenced);
}

#[test]
fn a_takeover_racing_a_commit_must_start_over() {
    let env = Env::memory(1 << 20);
    let a = env.open();
    a.create_dir("p.0").expect("dir");
    a.create_new("p.0/manifest_main_0", b"s0").expect("create");
    let (b, _d) = env.other_process();
    b.read_file("p.0/manifest_main_0", 100).expect("B reads");
    // A commits after B read: B's view is stale, its seal must fail.
    let m = a
        .open("p.0/manifest_main_0", OpenOptions::write_create())
        .expect("open");
    m.write_at(2, b"+c1").expect("append");
    m.sync().expect("A commits");
    let e = b
        .create_new("p.0/manifest_main_1", b"s0")
        .expect_err("stale takeover");
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    assert!(
        env.store.head("p.0/manifest_main_1").is_err(),
        "nothing created"
    );
    // Reading again and retrying succeeds, starting from A's last commit.
    let seen = b.read_file("p.0/manifest_main_0", 100).expect("B reads");
    assert_eq!(seen, b"s0+c1");
    b.create_new("p.0/manifest_main_1", &seen)
        .expect("take over");
    m.write_at(5, b"+c2").expect("append");
    assert_eq!(kind_of(m.sync()), ErrorKind::Fenced);
}

#[test]
fn current_term_moves_only_by_compare_and_swap() {
    let env = Env::memory(1 << 20);
    let a = env.open();
    a.create_dir("p.0").expect("dir");
    a.write_atomic("p.0/CURRENT_TERM.main", b"term 0")
        .expect("first write creates");
    let (b, _d) = env.other_process();
    // B never read it: its blind create loses.
    assert_eq!(
        kind_of(b.write_atomic("p.0/CURRENT_TERM.main", b"term 5")),
        ErrorKind::Fenced
    );
    assert_eq!(
        b.read_file("p.0/CURRENT_TERM.main", 100).expect("read"),
        b"term 0"
    );
    b.write_atomic("p.0/CURRENT_TERM.main", b"term 1")
        .expect("B moves it");
    // A's view is stale: its update loses, unless it writes exactly what is there.
    assert_eq!(
        kind_of(a.write_atomic("p.0/CURRENT_TERM.main", b"term 2")),
        ErrorKind::Fenced
    );
    a.write_atomic("p.0/CURRENT_TERM.main", b"term 1")
        .expect("the same record is no conflict");
}

#[test]
fn transient_failures_are_retried_and_ambiguous_writes_read_back() {
    let mem = MemoryObjectStore::new();
    let faulty = FaultyObjectStore::new(Arc::new(mem.clone()));
    let env = Env::new(Arc::new(faulty.clone()), 8 << 20);
    let s = env.open();
    own(&s, 0);
    // A 5xx/429 storm on data uploads.
    faulty.fail_next(ObjOp::PutIfAbsent, Fault::Status(503), 3);
    faulty.fail_next(ObjOp::PutIfAbsent, Fault::Status(429), 1);
    write_data(&s, 1, 0, &data_bytes(1, 10_000));
    assert_eq!(
        mem.get("p.0/data_1_main_0").expect("uploaded").0,
        data_bytes(1, 10_000)
    );
    // A data upload that timed out after it was applied: the retry's 412 is ours.
    faulty.fail_next(ObjOp::PutIfAbsent, Fault::TimeoutAfter, 1);
    write_data(&s, 2, 0, &data_bytes(2, 10_000));
    // A manifest commit that timed out after it was applied: resolved by read-back.
    let m = s
        .open("p.0/manifest_main_0", OpenOptions::write_create())
        .expect("open");
    // (A manifest commit is the create-if-absent of the chain's next version.)
    m.write_at(8, b" c1").expect("append");
    faulty.fail_next(ObjOp::PutIfAbsent, Fault::TimeoutAfter, 1);
    m.sync().expect("commit despite the lost answer");
    m.write_at(11, b" c2").expect("append");
    m.sync()
        .expect("the next commit builds on the right version");
    let fresh = || {
        let (reader, _d) = env.other_process();
        reader
            .read_file("p.0/manifest_main_0", 1 << 20)
            .expect("read")
    };
    assert_eq!(
        fresh(),
        b"manifest c1 c2",
        "no lost and no duplicated commit"
    );
    // Each commit uploaded only what it appended.
    let versions = chain(&mem, "p.0/manifest_main_0");
    assert_eq!(versions.len(), 3, "{versions:?}");
    assert!(!versions[0].appended() && versions[1].appended() && versions[2].appended());
    let appended = bough_object::envelope::AppendPayload::decode(&versions[2].payload)
        .expect("append payload");
    assert_eq!((appended.offset, appended.bytes), (11, &b" c2"[..]));
    // Every attempt timing out after applying: retries run out, the read-back still knows.
    m.write_at(14, b" c3").expect("append");
    faulty.fail_next(ObjOp::PutIfAbsent, Fault::TimeoutAfter, 10);
    m.sync().expect("resolved by reading back");
    faulty.clear();
    // A storm longer than the retry budget is an error, and nothing was published.
    m.write_at(17, b" c4").expect("append");
    faulty.fail_next(ObjOp::PutIfAbsent, Fault::Status(500), 10);
    let e = m.sync().expect_err("out of retries");
    assert_eq!(e.kind(), ErrorKind::Io);
    faulty.clear();
    assert_eq!(fresh(), b"manifest c1 c2 c3");
    // Cut-off bodies are retried, never taken for data.
    let (cold, _d) = env.other_process();
    faulty.fail_next(ObjOp::Get, Fault::ShortRead, 2);
    assert_eq!(
        cold.read_file("p.0/data_2_main_0", 1 << 20).expect("read"),
        data_bytes(2, 10_000)
    );
    assert!(faulty.fired() >= 2);
}

#[test]
fn young_unreferenced_data_objects_are_kept() {
    let clock_ms = Arc::new(std::sync::atomic::AtomicU64::new(1_000_000));
    let c = clock_ms.clone();
    let mem = MemoryObjectStore::with_clock(Arc::new(move || {
        c.load(std::sync::atomic::Ordering::Relaxed)
    }));
    let dir = tempfile::tempdir().expect("tempdir");
    let c = clock_ms.clone();
    let cfg = bough_object::CloudConfig {
        min_delete_age_ms: 60_000,
        ..common::test_config(1 << 20)
    };
    let s = CloudStorage::open(
        Arc::new(mem.clone()),
        dir.path(),
        &cfg,
        Some(Arc::new(move || {
            c.load(std::sync::atomic::Ordering::Relaxed)
        })),
    )
    .expect("open");
    own(&s, 0);
    write_data(&s, 1, 0, b"young");
    let _lease = s.acquire_gc_lease("p.0").expect("GC lease");
    s.delete("p.0/data_1_main_0").expect("delete (deferred)");
    assert!(mem.head("p.0/data_1_main_0").is_ok(), "too young to delete");
    clock_ms.fetch_add(61_000, std::sync::atomic::Ordering::Relaxed);
    s.delete("p.0/data_1_main_0").expect("delete");
    assert!(mem.head("p.0/data_1_main_0").is_err());
}

#[test]
fn cloud_storage_over_s3() {
    let Some((store, cfg)) = common::s3_store("cloud_storage_over_s3") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let s = CloudStorage::open(store.clone(), dir.path(), &cfg, None).expect("open");
    own(&s, 0);
    let bytes = data_bytes(3, 100_000);
    write_data(&s, 1, 0, &bytes);
    let m = s
        .open("p.0/manifest_main_0", OpenOptions::write_create())
        .expect("open");
    m.write_at(8, b" c1").expect("append");
    m.sync().expect("commit");
    // Another process takes over; the first is fenced.
    let dir2 = tempfile::tempdir().expect("tempdir");
    let b = CloudStorage::open(store.clone(), dir2.path(), &cfg, None).expect("open");
    let seen = b.read_file("p.0/manifest_main_0", 1 << 20).expect("read");
    assert_eq!(seen, b"manifest c1");
    b.create_new("p.0/manifest_main_1", &seen)
        .expect("take over");
    m.write_at(11, b" c2").expect("append");
    assert_eq!(kind_of(m.sync()), ErrorKind::Fenced);
    assert_eq!(
        b.read_file("p.0/data_1_main_0", 1 << 20).expect("read"),
        bytes
    );
    assert_eq!(
        b.list("p.0").expect("list"),
        vec!["data_1_main_0", "manifest_main_0", "manifest_main_1"]
    );
    bough_object::wipe(store.as_ref()).expect("wipe");
}

/// A manifest upload whose outcome stays unknown ends this instance's ownership of the
/// term: it writes neither that manifest nor data objects of that term again (a reopen
/// must take the branch over at a new term), and it forgets the version it knew.
#[test]
fn an_unresolved_manifest_upload_gives_the_term_up() {
    let mem = MemoryObjectStore::new();
    let faulty = FaultyObjectStore::new(Arc::new(mem.clone()));
    let env = Env::new(Arc::new(faulty.clone()), 8 << 20);
    let s = env.open();
    own(&s, 0);
    write_data(&s, 1, 0, &data_bytes(1, 1000));
    let m = s
        .open("p.0/manifest_main_0", OpenOptions::write_create())
        .expect("open");
    m.write_at(8, b" c1").expect("append");
    faulty.fail_next(ObjOp::PutIfAbsent, Fault::TimeoutAfter, 100);
    faulty.fail_next(ObjOp::Get, Fault::Status(503), 100);
    assert_eq!(kind_of(m.sync()), ErrorKind::Io, "outcome unknown");
    faulty.clear();
    assert_eq!(
        s.counters()
            .burnt_terms
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    // The commit did land; this instance no longer writes the term.
    assert_eq!(
        s.read_file("p.0/manifest_main_0", 100).expect("read"),
        b"manifest c1"
    );
    m.write_at(11, b" c2").expect("append");
    assert_eq!(kind_of(m.sync()), ErrorKind::Fenced);
    assert_eq!(
        kind_of(s.open("p.0/data_2_main_0", OpenOptions::write_new(0))),
        ErrorKind::Fenced
    );
    // The next term is open to it like to anyone.
    let seen = s.read_file("p.0/manifest_main_0", 100).expect("read");
    s.create_new("p.0/manifest_main_1", &seen)
        .expect("new term");
    write_data(&s, 2, 1, &data_bytes(2, 1000));
}

/// A process of `env` owning `manifest_main_0` (holding `b"manifest"`), and the manifest
/// open for appending.
fn owned_manifest(env: &Env) -> (CloudStorage, Arc<dyn bough_io::StorageFile>) {
    let s = env.open();
    own(&s, 0);
    let m = s
        .open("p.0/manifest_main_0", OpenOptions::write_create())
        .expect("open");
    (s, m)
}

/// A manifest commit uploads only what it appended (its zero padding left out), the chain
/// stays bounded (a FULL version every `MAX_CHAIN` appends, and at every rewrite), and a
/// cold reader assembles exactly the file the writer holds.
#[test]
fn manifest_commits_upload_only_their_own_records() {
    let env = Env::memory(1 << 20);
    let (s, m) = owned_manifest(&env);
    let mut expect = b"manifest".to_vec();
    let before = s
        .counters()
        .upload_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    for c in 0..40u32 {
        // A log record padded to a 4 KiB block, as the head writes it.
        let mut record = format!("record {c}").into_bytes();
        record.resize(4096, 0);
        m.write_at(expect.len() as u64, &record).expect("append");
        expect.extend_from_slice(&record);
        m.sync().expect("commit");
    }
    let uploaded = s
        .counters()
        .upload_bytes
        .load(std::sync::atomic::Ordering::Relaxed)
        - before;
    let versions = chain(env.store.as_ref(), "p.0/manifest_main_0");
    let fulls = versions.iter().filter(|v| !v.appended()).count();
    assert_eq!(fulls, 1, "one FULL version at the bottom of the chain");
    assert!(versions.len() <= 33, "bounded chain: {}", versions.len());
    // 40 commits of 4 KiB records: one FULL rewrite of ~130 KiB when the chain filled up,
    // the rest a few dozen bytes each.
    assert!(uploaded < 200_000, "uploaded {uploaded} bytes");
    let (cold, _d) = env.other_process();
    assert_eq!(
        cold.read_file("p.0/manifest_main_0", 1 << 20)
            .expect("read"),
        expect
    );
    assert_eq!(
        cold.file_len("p.0/manifest_main_0").expect("len"),
        expect.len() as u64
    );
    // A rewrite (the head's snapshot) is a FULL version: the chain below it goes away.
    s.write_atomic("p.0/manifest_main_0", b"snapshot")
        .expect("rewrite");
    let versions = chain(env.store.as_ref(), "p.0/manifest_main_0");
    assert_eq!(versions.len(), 1, "{versions:?}");
    assert_eq!(versions[0].payload, b"snapshot");
    let m = s
        .open("p.0/manifest_main_0", OpenOptions::write_create())
        .expect("reopen");
    m.write_at(8, b"+c").expect("append");
    m.sync().expect("commit");
    assert_eq!(
        cold.read_file("p.0/manifest_main_0", 1 << 20)
            .expect("read"),
        b"snapshot+c"
    );
}

/// Versions above a gap are a stale writer's hole fill: a reader ignores them, and a
/// writer that filled a hole withdraws its version and is fenced.
#[test]
fn an_append_into_a_hole_is_ignored_and_withdrawn() {
    use bough_object::envelope::{AppendPayload, Envelope, FLAG_APPEND};
    let env = Env::memory(1 << 20);
    let (_s, m) = owned_manifest(&env);
    m.write_at(8, b"+c1").expect("append");
    m.sync().expect("commit");
    // A stale writer's APPEND two versions up, above a gap at v2.
    let stale = Envelope {
        flags: FLAG_APPEND,
        token: 99,
        payload: AppendPayload::encode(11, b"+stale"),
    };
    env.store
        .put_if_absent("p.0/manifest_main_0.v3", &stale.encode())
        .expect("stale version");
    let (cold, _d) = env.other_process();
    assert_eq!(
        cold.read_file("p.0/manifest_main_0", 1 << 20)
            .expect("read"),
        b"manifest+c1",
        "the version above the gap is ignored"
    );
    // An APPEND whose predecessor was cleaned up (the chain moved on to a FULL version
    // and deleted what lay below) fills a hole: withdrawn, and the writer is fenced.
    env.store
        .delete("p.0/manifest_main_0.v3")
        .expect("delete stale");
    env.store
        .delete("p.0/manifest_main_0.v0")
        .expect("delete v0");
    env.store
        .delete("p.0/manifest_main_0.v1")
        .expect("delete v1");
    let b = env.store.clone();
    let full = Envelope {
        flags: 0,
        token: 7,
        payload: b"someone else".to_vec(),
    };
    b.put_if_absent("p.0/manifest_main_0.v5", &full.encode())
        .expect("a newer FULL version");
    m.write_at(11, b"+c2").expect("append");
    assert_eq!(kind_of(m.sync()), ErrorKind::Fenced);
    assert!(
        env.store.head("p.0/manifest_main_0.v2").is_err(),
        "the hole fill was withdrawn"
    );
}

/// A damaged envelope is refused with `Corruption` naming the object's key and the byte
/// the failed check read (it said "at offset 0" for every cause before envelopes had
/// typed errors).
#[test]
fn a_damaged_envelope_names_its_key_and_offset() {
    let env = Env::memory(1 << 20);
    let s = env.open();
    s.create_dir("p").expect("dir");
    s.write_atomic("p/m", b"manifest bytes").expect("write");
    drop(s);
    let (mut bytes, _) = env.store.get("p/m").expect("object");
    bytes[9] ^= 0x01; // the magic, checked before the checksum
    env.store.put("p/m", &bytes).expect("damage");
    let e = env.open().read_file("p/m", 1 << 10).expect_err("damaged");
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    let bough_io::IoError::Corruption { path, offset, .. } = &e else {
        panic!("{e:?}");
    };
    assert_eq!((path.as_str(), *offset), ("p/m", 8), "{e}");
    assert_eq!(
        e.to_string(),
        "corruption in p/m at offset 8: bad envelope magic"
    );
}

/// The segment objects of log file `path`, by number, with their bytes.
fn segments(store: &dyn ObjectStore, path: &str) -> Vec<(u32, Vec<u8>)> {
    let mut out: Vec<(u32, Vec<u8>)> = bough_object::list_all(store, &format!("{path}.seg"))
        .expect("list")
        .into_iter()
        .filter_map(|o| {
            let n = o.key.rsplit(".seg").next()?.parse().ok()?;
            Some((n, store.get(&o.key).expect("get").0))
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_log_file_is_one_segment_per_sync_and_reads_back_whole() {
    let env = Env::memory(1 << 20);
    let a = env.open();
    own(&a, 0);
    let path = "p.0/wal_1_main_0";
    let log = a.open(path, OpenOptions::write_new(0)).expect("create");
    assert_eq!(
        kind_of(a.open(path, OpenOptions::write_new(0))),
        ErrorKind::AlreadyExists
    );
    assert_eq!(
        segments(env.store.as_ref(), path),
        vec![(0, Vec::new())],
        "created: an empty first segment"
    );
    log.sync().expect("nothing to upload");
    assert_eq!(
        segments(env.store.as_ref(), path).len(),
        1,
        "no PUT for nothing"
    );
    log.write_at(0, b"record one").expect("write");
    log.sync().expect("sync");
    log.write_at(10, b"+two").expect("write");
    log.write_at(14, b"+three").expect("write");
    log.sync().expect("sync");
    log.sync().expect("a sync with nothing new uploads nothing");
    let segs = segments(env.store.as_ref(), path);
    assert_eq!(
        segs,
        vec![
            (0, Vec::new()),
            (1, b"record one".to_vec()),
            (2, b"+two+three".to_vec())
        ]
    );
    // Bytes in a segment are immutable; the tail is not.
    assert_eq!(kind_of(log.write_at(3, b"x")), ErrorKind::InvalidArgument);
    log.write_at(20, b"tail").expect("write");
    log.set_len(20).expect("drop the unsynced tail");
    assert_eq!(kind_of(log.set_len(5)), ErrorKind::InvalidArgument);
    // Listed once, with the segments' total size; read back whole by another process.
    let (b, _d) = env.other_process();
    assert_eq!(
        b.list("p.0").expect("list"),
        vec!["manifest_main_0".to_string(), "wal_1_main_0".to_string()]
    );
    assert_eq!(b.file_len(path).expect("len"), 20);
    assert_eq!(
        b.read_file(path, 1 << 20).expect("read"),
        b"record one+two+three"
    );
    assert_eq!(kind_of(b.read_file(path, 10)), ErrorKind::Corruption);
    // Another process does not own the term: it cannot write the log.
    assert_eq!(
        kind_of(b.open(path, OpenOptions::write_create())),
        ErrorKind::Fenced
    );
    // Deleting removes every segment.
    drop(log);
    a.delete(path).expect("delete");
    assert!(segments(env.store.as_ref(), path).is_empty());
    assert_eq!(kind_of(b.read_file(path, 1 << 20)), ErrorKind::NotFound);
}

#[test]
fn a_gap_in_a_logs_segments_is_corruption_naming_the_missing_one() {
    let env = Env::memory(1 << 20);
    let a = env.open();
    own(&a, 0);
    let path = "p.0/wal_1_main_0";
    env.store.put(&format!("{path}.seg0"), b"").expect("put");
    env.store.put(&format!("{path}.seg2"), b"two").expect("put");
    let e = a.read_file(path, 1 << 20).expect_err("gap");
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert!(e.to_string().contains("wal_1_main_0.seg1"), "{e}");
    // A delete still removes what is there, highest first.
    a.delete(path).expect("delete");
    assert!(segments(env.store.as_ref(), path).is_empty());
}

/// The zombie race on a log: B takes the branch over after reading A's log; A logs one
/// more commit before B fences. B's fence finds the number taken, so the takeover starts
/// over and replays that commit; after the fence, A can acknowledge nothing more.
#[test]
fn a_takeover_fences_the_old_terms_log_and_starts_over_if_it_raced_a_commit() {
    let env = Env::memory(1 << 20);
    let a = env.open();
    own(&a, 0);
    let path = "p.0/wal_1_main_0";
    let log = a.open(path, OpenOptions::write_new(0)).expect("create");
    log.write_at(0, b"c1").expect("write");
    log.sync().expect("A commits c1");
    let (b, _d) = env.other_process();
    b.read_file("p.0/manifest_main_0", 100)
        .expect("B reads the manifest");
    assert_eq!(b.read_file(path, 100).expect("B replays"), b"c1");
    log.write_at(2, b"c2").expect("write");
    log.sync().expect("A commits c2 after B read the log");
    let e = b
        .create_new("p.0/manifest_main_1", b"manifest")
        .expect_err("the fence finds segment 2 taken");
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    assert!(
        env.store.head("p.0/manifest_main_1").is_err(),
        "nothing created"
    );
    // B starts over: it replays c2 too, and its fence lands after it.
    assert_eq!(b.read_file(path, 100).expect("B replays"), b"c1c2");
    b.create_new("p.0/manifest_main_1", b"manifest")
        .expect("take over");
    assert_eq!(
        segments(env.store.as_ref(), path),
        vec![
            (0, Vec::new()),
            (1, b"c1".to_vec()),
            (2, b"c2".to_vec()),
            (3, b"BOUGH-LOG-FENCE\n".to_vec())
        ],
        "a fence segment follows the last one B replayed"
    );
    log.write_at(4, b"c3").expect("write locally");
    assert_eq!(
        kind_of(log.sync()),
        ErrorKind::Fenced,
        "A acknowledges nothing more"
    );
    assert_eq!(kind_of(log.sync()), ErrorKind::Fenced);
    // The fenced log reads as what B replayed.
    assert_eq!(b.read_file(path, 100).expect("read"), b"c1c2");
    assert_eq!(b.file_len(path).expect("len"), 4);
}

/// A segment upload that timed out after landing is resolved by reading it back (the
/// commit is acknowledged); one whose outcome stays unknown fails the sync.
#[test]
fn an_ambiguous_segment_upload_is_read_back() {
    let mem = MemoryObjectStore::new();
    let faulty = FaultyObjectStore::new(Arc::new(mem.clone()));
    let env = Env::new(Arc::new(faulty.clone()), 1 << 20);
    let a = env.open();
    own(&a, 0);
    let path = "p.0/wal_1_main_0";
    let log = a.open(path, OpenOptions::write_new(0)).expect("create");
    log.write_at(0, b"c1").expect("write");
    faulty.plan(
        ObjOp::PutIfAbsent,
        Some(".seg1"),
        0,
        Fault::TimeoutAfter,
        10,
    );
    log.sync().expect("landed: read back and acknowledged");
    faulty.clear();
    log.write_at(2, b"c2").expect("write");
    faulty.plan(
        ObjOp::PutIfAbsent,
        Some(".seg2"),
        0,
        Fault::TimeoutBefore,
        10,
    );
    faulty.plan(ObjOp::Get, Some(".seg2"), 0, Fault::Status(503), 100);
    assert!(log.sync().is_err(), "outcome unknown: not acknowledged");
    faulty.clear();
    assert_eq!(
        segments(&mem, path),
        vec![(0, Vec::new()), (1, b"c1".to_vec())]
    );
}
