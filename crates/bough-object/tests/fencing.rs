//! Fencing on services without If-Match (numbered claims) and the GC lease, on the
//! in-process store with and without If-Match (atomic by construction), opendal's memory
//! service, and the S3 server (moto, started by `.ci/run`) in both fencing modes. Which
//! services get which fencing, and the validation of their configuration.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

use bough_io::{ErrorKind, OpenOptions, Storage};
use bough_object::envelope::Envelope;
use bough_object::{
    CloudConfig, CloudStorage, Fencing, FencingMode, Guarantees, MemoryObjectStore, MsClock,
    ObjectStore, OpendalStore, Refusal, Service, list_all, select_fencing,
};

const T0: u64 = 1_700_000_000_000;
const LEASE_MS: u64 = 30_000;

/// A hand-moved clock shared by every "process" of a test.
#[derive(Clone)]
struct Clock(Arc<AtomicU64>);

impl Clock {
    fn new() -> Clock {
        Clock(Arc::new(AtomicU64::new(T0)))
    }
    fn ms(&self) -> MsClock {
        let c = self.0.clone();
        Arc::new(move || c.load(Ordering::SeqCst))
    }
    fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

/// One object store shared by several `CloudStorage` instances ("processes"), each with its
/// own cache directory.
struct World {
    name: String,
    store: Arc<dyn ObjectStore>,
    cfg: CloudConfig,
    clock: Clock,
    dirs: parking_lot::Mutex<Vec<tempfile::TempDir>>,
}

impl World {
    fn process(&self) -> CloudStorage {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = CloudStorage::open(
            self.store.clone(),
            dir.path(),
            &self.cfg,
            Some(self.clock.ms()),
        )
        .unwrap_or_else(|e| panic!("{}: open: {e}", self.name));
        self.dirs.lock().push(dir);
        s
    }

    fn keys(&self) -> Vec<String> {
        list_all(self.store.as_ref(), "")
            .expect("list")
            .into_iter()
            .map(|o| o.key)
            .collect()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // The S3 prefixes are unique per run; leave the server clean anyway.
        if self.store.service() == "s3" {
            let _ = bough_object::wipe(self.store.as_ref());
        }
    }
}

fn config(fencing: FencingMode) -> CloudConfig {
    CloudConfig {
        fencing,
        gc_lease_ms: LEASE_MS,
        ..common::test_config(8 << 20)
    }
}

/// The in-process stores with and without If-Match, opendal's memory service, and the
/// S3 server in both modes (when configured).
fn worlds(test: &str) -> Vec<World> {
    let clock = Clock::new();
    let world = |name: &str, store: Arc<dyn ObjectStore>, cfg: CloudConfig| World {
        name: format!("{test}/{name}"),
        store,
        cfg,
        clock: clock.clone(),
        dirs: parking_lot::Mutex::default(),
    };
    let mut out = vec![
        world(
            "memory-cas",
            Arc::new(MemoryObjectStore::with_clock(clock.ms())),
            config(FencingMode::Auto),
        ),
        world(
            "memory-claims",
            Arc::new(MemoryObjectStore::without_if_match(Some(clock.ms()))),
            config(FencingMode::Auto),
        ),
        world(
            "opendal-memory",
            Arc::new(
                OpendalStore::new(&CloudConfig {
                    service: Service::Memory,
                    test_only: true,
                    ..CloudConfig::default()
                })
                .expect("opendal memory"),
            ),
            config(FencingMode::Auto),
        ),
    ];
    if let Some(endpoint) = common::s3_endpoint(test) {
        for (name, fencing) in [
            ("s3-cas", FencingMode::CompareAndSwap),
            ("s3-claims", FencingMode::NumberedClaims),
        ] {
            let cfg = CloudConfig {
                fencing,
                gc_lease_ms: LEASE_MS,
                ..common::s3_config(&endpoint, &format!("{test}-{name}"))
            };
            let store = OpendalStore::new(&cfg).expect("s3 store");
            out.push(world(name, Arc::new(store), cfg));
        }
    }
    out
}

fn kind_of<T: std::fmt::Debug>(r: Result<T, bough_io::IoError>) -> ErrorKind {
    r.expect_err("expected an error").kind()
}

fn write_data(s: &CloudStorage, path: &str, bytes: &[u8]) {
    let f = s
        .open(path, OpenOptions::write_new(0))
        .unwrap_or_else(|e| panic!("create {path}: {e}"));
    f.write_at(0, bytes).expect("write");
    f.sync().expect("upload");
}

fn append(m: &Arc<dyn bough_io::StorageFile>, bytes: &[u8]) {
    let len = m.len().expect("len");
    m.write_at(len, bytes).expect("append locally");
}

/// The newer owner fences the older: its late commits are refused and never visible, and
/// the newer term starts from everything the older one acknowledged.
#[test]
fn a_new_owner_fences_the_old_one_in_every_mode() {
    for w in worlds("a_new_owner_fences_the_old_one_in_every_mode") {
        let a = w.process();
        a.create_dir("p.0").expect("dir");
        a.create_new("p.0/manifest_main_0", b"s0").expect("create");
        let m = a
            .open("p.0/manifest_main_0", OpenOptions::write_create())
            .expect("open");
        for c in 1..=3 {
            append(&m, format!("+c{c}").as_bytes());
            m.sync()
                .unwrap_or_else(|e| panic!("{}: commit {c}: {e}", w.name));
        }
        let b = w.process();
        let seen = b.read_file("p.0/manifest_main_0", 1 << 20).expect("read");
        assert_eq!(seen, b"s0+c1+c2+c3", "{}", w.name);
        b.create_new("p.0/manifest_main_1", &seen)
            .unwrap_or_else(|e| panic!("{}: take over: {e}", w.name));
        append(&m, b"+late");
        assert_eq!(kind_of(m.sync()), ErrorKind::Fenced, "{}", w.name);
        assert_eq!(kind_of(m.sync()), ErrorKind::Fenced, "{}", w.name);
        // What a third process reads of the old term is exactly the acknowledged state.
        let c = w.process();
        assert_eq!(
            c.read_file("p.0/manifest_main_0", 1 << 20).expect("read"),
            b"s0+c1+c2+c3",
            "{}",
            w.name
        );
        assert_eq!(
            c.list("p.0").expect("list"),
            vec!["manifest_main_0", "manifest_main_1"],
            "{}: versions are listed as their objects",
            w.name
        );
        // Manifests are chains of numbered versions in every mode; the seal is a FULL
        // version, so the commits below it were cleaned up: one version per manifest.
        let keys = w.keys();
        assert!(
            keys.iter().all(|k| k.contains(".v")),
            "{}: only numbered versions: {keys:?}",
            w.name
        );
        assert_eq!(keys.len(), 2, "{}: {keys:?}", w.name);
    }
}

/// Racing takeovers of one term: exactly one process wins it.
#[test]
fn racing_takeovers_have_one_winner_in_every_mode() {
    for w in worlds("racing_takeovers_have_one_winner_in_every_mode") {
        let a = w.process();
        a.create_dir("p.0").expect("dir");
        a.create_new("p.0/manifest_main_0", b"s0").expect("create");
        let racers: Vec<CloudStorage> = (0..6).map(|_| w.process()).collect();
        for r in &racers {
            assert_eq!(
                r.read_file("p.0/manifest_main_0", 100).expect("read"),
                b"s0"
            );
        }
        let barrier = Barrier::new(racers.len());
        let results: Vec<Result<(), bough_io::IoError>> = std::thread::scope(|scope| {
            let hs: Vec<_> = racers
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let barrier = &barrier;
                    scope.spawn(move || {
                        barrier.wait();
                        r.create_new("p.0/manifest_main_1", format!("s0 by {i}").as_bytes())
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().expect("racer panicked"))
                .collect()
        });
        let winners: Vec<usize> = results
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_ok())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(winners.len(), 1, "{}: {results:?}", w.name);
        for r in results.iter().filter_map(|r| r.as_ref().err()) {
            assert!(
                matches!(
                    r.kind(),
                    ErrorKind::AlreadyExists | ErrorKind::Fenced | ErrorKind::Busy
                ),
                "{}: {r}",
                w.name
            );
        }
        let reader = w.process();
        assert_eq!(
            reader.read_file("p.0/manifest_main_1", 100).expect("read"),
            format!("s0 by {}", winners[0]).as_bytes(),
            "{}",
            w.name
        );
        let m = a
            .open("p.0/manifest_main_0", OpenOptions::write_create())
            .expect("open");
        append(&m, b"+late");
        assert_eq!(kind_of(m.sync()), ErrorKind::Fenced, "{}", w.name);
    }
}

/// Numbered claims: a version number freed by the clean-up cannot be taken by a writer
/// that read an old version (it would otherwise look like a successful swap).
#[test]
fn a_stale_writer_cannot_fill_a_cleaned_up_version() {
    let clock = Clock::new();
    let store = MemoryObjectStore::without_if_match(Some(clock.ms()));
    let w = World {
        name: "memory-claims".into(),
        store: Arc::new(store.clone()),
        cfg: config(FencingMode::Auto),
        clock,
        dirs: parking_lot::Mutex::default(),
    };
    let a = w.process();
    let b = w.process();
    a.create_dir("p.0").expect("dir");
    a.write_atomic("p.0/CURRENT_TERM.main", b"term 0")
        .expect("create");
    // B reads version 0; A then moves the record twice (versions 0 and 1 are cleaned up).
    assert_eq!(
        b.read_file("p.0/CURRENT_TERM.main", 100).expect("read"),
        b"term 0"
    );
    a.write_atomic("p.0/CURRENT_TERM.main", b"term 1")
        .expect("v1");
    a.write_atomic("p.0/CURRENT_TERM.main", b"term 2")
        .expect("v2");
    assert_eq!(w.keys(), vec!["p.0/CURRENT_TERM.main.v2"]);
    // B's swap creates version 1 (free again), finds version 0 gone and withdraws it.
    assert_eq!(
        kind_of(b.write_atomic("p.0/CURRENT_TERM.main", b"term 9")),
        ErrorKind::Fenced
    );
    assert_eq!(w.keys(), vec!["p.0/CURRENT_TERM.main.v2"]);
    assert_eq!(
        a.read_file("p.0/CURRENT_TERM.main", 100).expect("read"),
        b"term 2"
    );
    assert!(b.counters().fenced.load(Ordering::Relaxed) >= 1);
    // Deleting removes every version; the object is gone for every reader.
    a.delete("p.0/CURRENT_TERM.main").expect("delete");
    assert!(w.keys().is_empty());
    assert_eq!(
        kind_of(b.read_file("p.0/CURRENT_TERM.main", 100)),
        ErrorKind::NotFound
    );
}

/// A prefix written in one fencing mode is refused by an instance of the other mode.
#[test]
fn a_prefix_keeps_its_fencing_mode() {
    let clock = Clock::new();
    let store: Arc<dyn ObjectStore> = Arc::new(MemoryObjectStore::with_clock(clock.ms()));
    let dir = tempfile::tempdir().expect("tempdir");
    let claims = CloudStorage::open(
        store.clone(),
        dir.path(),
        &config(FencingMode::NumberedClaims),
        Some(clock.ms()),
    )
    .expect("open");
    claims.create_dir("p.0").expect("dir");
    claims
        .create_new("p.0/manifest_main_0", b"s0")
        .expect("create");
    // Manifests are version chains in both modes; CURRENT_TERM is not.
    claims
        .write_atomic("p.0/CURRENT_TERM.main", b"term 0")
        .expect("term");
    let dir2 = tempfile::tempdir().expect("tempdir");
    let cas = CloudStorage::open(
        store,
        dir2.path(),
        &config(FencingMode::Auto),
        Some(clock.ms()),
    )
    .expect("open");
    assert_eq!(cas.fencing(), Fencing::CompareAndSwap);
    let e = cas.list("p.0").expect_err("mixed modes");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("fencing"), "{e}");
}

/// The GC lease: one holder at a time; the holder renews it while it deletes; after its
/// expiry another process takes it over, and the stale holder deletes nothing more.
#[test]
fn the_gc_lease_is_exclusive_renewed_and_taken_over_after_expiry() {
    for w in worlds("the_gc_lease_is_exclusive_renewed_and_taken_over_after_expiry") {
        let a = w.process();
        a.create_dir("p.0").expect("dir");
        a.create_new("p.0/manifest_main_0", b"s0").expect("own");
        for i in 1..=4 {
            write_data(&a, &format!("p.0/data_{i}_main_0"), &[i as u8; 1000]);
        }
        // No deletion of a data object without the lease.
        assert_eq!(
            kind_of(a.delete("p.0/data_1_main_0")),
            ErrorKind::Busy,
            "{}",
            w.name
        );
        let b = w.process();
        let la = a.acquire_gc_lease("p.0").expect("A takes the lease");
        assert_eq!(
            kind_of(b.acquire_gc_lease("p.0")),
            ErrorKind::Busy,
            "{}",
            w.name
        );
        assert_eq!(
            kind_of(a.acquire_gc_lease("p.0")),
            ErrorKind::Busy,
            "{}: one GC per process too",
            w.name
        );
        a.delete("p.0/data_1_main_0").expect("A deletes");
        // Past half the lease, the next deletion renews it: B still cannot take it, even
        // after the original expiry.
        w.clock.advance(LEASE_MS * 6 / 10);
        a.delete("p.0/data_2_main_0").expect("A deletes and renews");
        assert!(la.record().expires_ms > T0 + LEASE_MS, "{}", w.name);
        w.clock.advance(LEASE_MS * 6 / 10);
        assert_eq!(
            kind_of(b.acquire_gc_lease("p.0")),
            ErrorKind::Busy,
            "{}: renewed",
            w.name
        );
        // A stalls past the expiry; B takes the lease over.
        w.clock.advance(LEASE_MS + 1);
        let lb = b.acquire_gc_lease("p.0").expect("B takes over");
        // A, the stale holder, is refused and deletes nothing.
        assert_eq!(
            kind_of(a.delete("p.0/data_3_main_0")),
            ErrorKind::Fenced,
            "{}",
            w.name
        );
        assert_eq!(kind_of(la.check()), ErrorKind::Fenced, "{}", w.name);
        assert_eq!(
            a.file_len("p.0/data_3_main_0").expect("still there"),
            1000,
            "{}",
            w.name
        );
        b.delete("p.0/data_3_main_0").expect("B deletes");
        drop(la);
        assert_eq!(
            kind_of(a.acquire_gc_lease("p.0")),
            ErrorKind::Busy,
            "{}: B holds it",
            w.name
        );
        // A release hands it over at once, without waiting for the expiry.
        drop(lb);
        let la2 = a
            .acquire_gc_lease("p.0")
            .expect("A again after the release");
        a.delete("p.0/data_4_main_0").expect("A deletes");
        drop(la2);
        assert_eq!(
            b.list("p.0").expect("list"),
            vec!["manifest_main_0"],
            "{}: the lease is not a store file",
            w.name
        );
        assert!(
            w.keys().iter().any(|k| k.contains("GC_LEASE")),
            "{}",
            w.name
        );
    }
}

/// Processes racing for a GC lease: exactly one gets it.
#[test]
fn gc_lease_races_have_one_winner() {
    for w in worlds("gc_lease_races_have_one_winner") {
        let procs: Vec<CloudStorage> = (0..6).map(|_| w.process()).collect();
        procs[0].create_dir("p.0").expect("dir");
        procs[0]
            .create_new("p.0/manifest_main_0", b"s0")
            .expect("own");
        for round in 0..3 {
            let barrier = Barrier::new(procs.len());
            let leases: Vec<_> = std::thread::scope(|scope| {
                let hs: Vec<_> = procs
                    .iter()
                    .map(|p| {
                        let barrier = &barrier;
                        scope.spawn(move || {
                            barrier.wait();
                            p.acquire_gc_lease("p.0")
                        })
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| h.join().expect("racer panicked"))
                    .collect()
            });
            let won = leases.iter().filter(|l| l.is_ok()).count();
            assert_eq!(won, 1, "{} round {round}: {leases:?}", w.name);
            for l in leases.iter().filter_map(|l| l.as_ref().err()) {
                assert_eq!(l.kind(), ErrorKind::Busy, "{}: {l}", w.name);
            }
            // Dropping the winner releases the lease for the next round.
        }
    }
}

/// Prewarm loads the newest data objects within the budget; reads of them need no GET.
#[test]
fn prewarm_loads_the_newest_objects_within_the_budget() {
    let clock = Clock::new();
    let mem = MemoryObjectStore::with_clock(clock.ms());
    let store: Arc<dyn ObjectStore> = Arc::new(mem.clone());
    let dir = tempfile::tempdir().expect("tempdir");
    let w = CloudStorage::open(
        store.clone(),
        dir.path(),
        &config(FencingMode::Auto),
        Some(clock.ms()),
    )
    .expect("open");
    w.create_dir("p.0").expect("dir");
    w.create_new("p.0/manifest_main_0", b"s0").expect("own");
    for i in 1..=10u8 {
        clock.advance(1000);
        write_data(&w, &format!("p.0/data_{i}_main_0"), &vec![i; 10_000]);
    }
    // A budget for four of the ten objects.
    let cold = tempfile::tempdir().expect("tempdir");
    let cfg = CloudConfig {
        cache_bytes: 45_000,
        ..config(FencingMode::Auto)
    };
    let s = CloudStorage::open(store.clone(), cold.path(), &cfg, Some(clock.ms())).expect("open");
    let report = s.prewarm().expect("prewarm");
    assert_eq!((report.files, report.bytes), (4, 40_000), "{report:?}");
    assert_eq!(report.skipped, 6);
    assert!(s.cache_used() <= 45_000);
    let before = mem.gets_of("/data_");
    for i in 7..=10u8 {
        assert_eq!(
            s.read_file(&format!("p.0/data_{i}_main_0"), 1 << 20)
                .expect("read"),
            vec![i; 10_000]
        );
    }
    assert_eq!(
        mem.gets_of("/data_"),
        before,
        "the newest four were prewarmed"
    );
    s.read_file("p.0/data_1_main_0", 1 << 20).expect("read");
    assert_eq!(mem.gets_of("/data_"), before + 1, "an old one was not");
    // A second prewarm over a warm cache keeps what is there.
    drop(s);
    let s = CloudStorage::open(store, cold.path(), &cfg, Some(clock.ms())).expect("reopen");
    let report = s.prewarm().expect("prewarm");
    assert_eq!(report.files, 0, "{report:?}");
    assert_eq!(report.already_cached, 4, "{report:?}");
    assert!(s.cache_used() <= 45_000);
}

/// The guarantees each service is declared to have select its fencing mode.
#[test]
fn declared_guarantees_select_the_fencing_mode() {
    let pick = |s: Service, mode: FencingMode, test_only: bool| {
        select_fencing(s.name(), &s.declared_guarantees(), mode, test_only)
    };
    for s in [Service::S3, Service::Gcs, Service::Azblob] {
        assert_eq!(
            pick(s, FencingMode::Auto, false),
            Ok(Fencing::CompareAndSwap),
            "{s}"
        );
        assert_eq!(
            pick(s, FencingMode::NumberedClaims, false),
            Ok(Fencing::NumberedClaims),
            "{s}"
        );
        assert!(s.declared_guarantees().durable, "{s}");
    }
    assert_eq!(
        pick(Service::Memory, FencingMode::Auto, false),
        Ok(Fencing::NumberedClaims)
    );
    assert_eq!(
        pick(Service::Memory, FencingMode::CompareAndSwap, false),
        Err(Refusal::NoCompareAndSwap {
            service: "memory".into()
        })
    );
    // fs: PUTs are not atomic, so it is refused unless the configuration says tests only.
    assert_eq!(
        pick(Service::Fs, FencingMode::Auto, false),
        Err(Refusal::NoAtomicPut {
            service: "fs".into()
        })
    );
    assert_eq!(
        pick(Service::Fs, FencingMode::Auto, true),
        Ok(Fencing::NumberedClaims)
    );
    // Without an atomic conditional create nothing can be fenced.
    let none = Guarantees {
        conditional_create: false,
        ..Service::S3.declared_guarantees()
    };
    assert_eq!(
        select_fencing("x", &none, FencingMode::Auto, true),
        Err(Refusal::NoConditionalCreate {
            service: "x".into()
        })
    );
    let store = MemoryObjectStore::with_options(None, none);
    let dir = tempfile::tempdir().expect("tempdir");
    let e = CloudStorage::open(
        Arc::new(store),
        dir.path(),
        &common::test_config(1 << 20),
        None,
    )
    .expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("conditional create"), "{e}");
}

/// Configuration rules per service (no live GCS or Azure: only what can be checked
/// without one).
#[test]
fn service_configurations_are_validated() {
    let ok = |c: CloudConfig| c.validate().map_err(|e| e.to_string());
    let field = |c: CloudConfig| c.validate().map(|_| ()).map_err(|e| e.field);
    let base = |service| CloudConfig {
        service,
        bucket: "b".into(),
        ..CloudConfig::default()
    };
    assert_eq!(ok(base(Service::S3)), Ok(()));
    assert_eq!(
        field(CloudConfig {
            bucket: String::new(),
            ..base(Service::S3)
        }),
        Err("bucket")
    );
    assert_eq!(
        field(CloudConfig {
            endpoint: "127.0.0.1:5055".into(),
            ..base(Service::S3)
        }),
        Err("endpoint")
    );
    for (s, feature) in [
        (Service::Gcs, cfg!(feature = "gcs")),
        (Service::Azblob, cfg!(feature = "azblob")),
    ] {
        let c = CloudConfig {
            endpoint: "https://acct.blob.core.windows.net".into(),
            ..base(s)
        };
        if feature {
            assert_eq!(ok(c.clone()), Ok(()), "{s}");
            assert_eq!(
                field(CloudConfig {
                    bucket: String::new(),
                    ..c
                }),
                Err("bucket"),
                "{s}"
            );
        } else {
            let e = ok(c).expect_err("not built");
            assert!(e.contains("feature"), "{s}: {e}");
        }
    }
    if cfg!(feature = "azblob") {
        assert_eq!(field(base(Service::Azblob)), Err("endpoint"));
    }
    // Tests-only services need `test_only`; fs needs a real directory.
    assert_eq!(field(base(Service::Memory)), Err("service"));
    assert_eq!(
        ok(CloudConfig {
            test_only: true,
            ..base(Service::Memory)
        }),
        Ok(())
    );
    assert_eq!(
        field(CloudConfig {
            test_only: true,
            root: "/".into(),
            ..base(Service::Fs)
        }),
        Err("root")
    );
    assert_eq!(
        ok(CloudConfig {
            test_only: true,
            root: "/tmp/bough-fs".into(),
            ..base(Service::Fs)
        }),
        Ok(())
    );
    assert_eq!(
        field(CloudConfig {
            gc_lease_ms: 10,
            ..base(Service::S3)
        }),
        Err("gc_lease_ms")
    );
}

/// With the service built in, opendal's capabilities agree with the declared guarantees
/// (GCS compares generations instead of ETags) and select compare-and-swap. Building the
/// operator touches no network.
#[cfg(any(feature = "gcs", feature = "azblob"))]
#[test]
fn built_in_cloud_services_have_their_declared_guarantees() {
    let mut services = Vec::new();
    if cfg!(feature = "gcs") {
        services.push(CloudConfig {
            service: Service::Gcs,
            bucket: "b".into(),
            allow_anonymous: true,
            ..CloudConfig::default()
        });
    }
    if cfg!(feature = "azblob") {
        services.push(CloudConfig {
            service: Service::Azblob,
            bucket: "c".into(),
            endpoint: "https://acct.blob.core.windows.net".into(),
            allow_anonymous: true,
            ..CloudConfig::default()
        });
    }
    for cfg in services {
        let store = OpendalStore::new(&cfg).unwrap_or_else(|e| panic!("{}: {e}", cfg.service));
        assert_eq!(
            store.guarantees(),
            cfg.service.declared_guarantees(),
            "{}",
            cfg.service
        );
        assert_eq!(
            bough_object::check_guarantees(&store),
            Ok(Fencing::CompareAndSwap),
            "{}",
            cfg.service
        );
    }
}

/// A lease object is an envelope around a lease record (the bytes of docs/format.md).
#[test]
fn the_lease_object_is_an_enveloped_record() {
    let clock = Clock::new();
    let mem = MemoryObjectStore::with_clock(clock.ms());
    let dir = tempfile::tempdir().expect("tempdir");
    let s = CloudStorage::open(
        Arc::new(mem.clone()),
        dir.path(),
        &config(FencingMode::Auto),
        Some(clock.ms()),
    )
    .expect("open");
    s.create_dir("p.0").expect("dir");
    let lease = s.acquire_gc_lease("p.0").expect("lease");
    let (bytes, _) = mem.get("p.0/GC_LEASE").expect("lease object");
    let env = Envelope::decode(&bytes).expect("envelope");
    let rec = bough_object::LeaseRecord::decode(&env.payload).expect("record");
    assert_eq!(rec, lease.record());
    assert_eq!(
        (rec.acquired_ms, rec.expires_ms, rec.released),
        (T0, T0 + LEASE_MS, false)
    );
    drop(lease);
    let (bytes, _) = mem.get("p.0/GC_LEASE").expect("lease object");
    let rec = bough_object::LeaseRecord::decode(&Envelope::decode(&bytes).expect("env").payload)
        .expect("record");
    assert!(rec.released, "dropping the lease releases it");
}
