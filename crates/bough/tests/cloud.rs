//! The store in cloud mode (`backend = "object"`): the same API over an object store with a
//! local cache. In-process object stores (atomic conditional writes, fault injection) for
//! the races and faults; a real S3 server (moto, started by `.ci/run`) for the end-to-end
//! runs.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bough::io::Storage as _;
use bough::object::{
    CloudConfig, CloudStorage, Fault, FaultyObjectStore, FencingMode, MemoryObjectStore, ObjOp,
    ObjectStore, OpendalStore, RetryPolicy, Service,
};
use bough::{
    Backend, ErrorKind, ManualClock, Options, ScanOptions, Store, StoreBuilder, WriteBatch,
};

const T0: u64 = 1_700_000_000_000;
const LEASE_MS: u64 = 20_000;

fn cloud_cfg(cache_bytes: u64) -> CloudConfig {
    CloudConfig {
        cache_bytes,
        min_delete_age_ms: 0,
        gc_lease_ms: LEASE_MS,
        retry: RetryPolicy {
            attempts: 6,
            base_delay_ms: 1,
            max_delay_ms: 5,
        },
        ..CloudConfig::default()
    }
}

fn opts(store: &Arc<dyn ObjectStore>, cache: &Path, cache_bytes: u64) -> StoreBuilder {
    opts_with(store, cache, cloud_cfg(cache_bytes), &ManualClock::new(T0))
}

fn opts_with(
    store: &Arc<dyn ObjectStore>,
    cache: &Path,
    cfg: CloudConfig,
    clock: &ManualClock,
) -> StoreBuilder {
    // A small write buffer: commits go through log segments and keep crossing
    // checkpoints (data objects and manifest versions).
    let settings = Options::new(cache)
        .maintenance_interval_ms(0)
        .data_file_size(64 * 4096)
        .write_buffer_bytes(16 << 10)
        .object(cfg);
    Store::builder(settings)
        .object_store(store.clone())
        .clock(Arc::new(clock.clone()))
}

/// The fencing an S3 test runs with: `FencingMode::Auto` (compare-and-swap) or forced
/// numbered claims, through the store's configuration.
fn with_fencing(o: StoreBuilder, fencing: FencingMode) -> StoreBuilder {
    let mut o = o;
    o.settings_mut().object.fencing = fencing;
    o
}

fn put(b: &bough::Branch, k: &str, v: &str) -> bough::Result<()> {
    let mut batch = WriteBatch::new();
    batch.put(k, v);
    b.write_blocking(batch)
}

fn contents(b: &bough::Branch) -> BTreeMap<Vec<u8>, Vec<u8>> {
    b.scan_blocking(&ScanOptions::default())
        .expect("scan")
        .entries
        .into_iter()
        .map(|kv| (kv.key, kv.value.value))
        .collect()
}

fn key(i: usize) -> String {
    format!("key-{i:05}")
}

fn value(i: usize, round: usize) -> String {
    format!("value {i} round {round} {}", "x".repeat(i % 300))
}

/// Writes, branches, deletes, GC; then reads everything back after a restart from an
/// empty cache.
fn branches_gc_and_cold_restart(store: Arc<dyn ObjectStore>, fencing: FencingMode) {
    let opts = |store: &Arc<dyn ObjectStore>, cache: &Path, budget: u64| {
        with_fencing(opts(store, cache, budget), fencing)
    };
    let cache = tempfile::tempdir().expect("tempdir");
    let s = Store::open(opts(&store, cache.path(), 32 << 20)).expect("open");
    assert_eq!(s.backend(), bough::io::BackendKind::Object);
    let p = s.partition("t", 0).expect("partition");
    let main = p.branch("main").expect("main");
    let mut want_main = BTreeMap::new();
    for round in 0..3 {
        for i in (0..300).step_by(round + 1) {
            put(&main, &key(i), &value(i, round)).expect("put");
            want_main.insert(key(i).into_bytes(), value(i, round).into_bytes());
        }
    }
    let feature = p.create_branch("feature", "main").expect("branch");
    let mut want_feature = want_main.clone();
    for i in 0..50 {
        put(&feature, &key(i), "feature").expect("put");
        want_feature.insert(key(i).into_bytes(), b"feature".to_vec());
    }
    let doomed = p.create_branch("doomed", "feature").expect("branch");
    put(&doomed, "only-in-doomed", "x").expect("put");
    drop(doomed);
    p.delete_branch("doomed").expect("delete");
    let archive = main.archive().expect("archive");
    // A tag is one more object, created once, and a root GC keeps.
    p.create_tag("v1", "feature").expect("tag");
    assert_eq!(contents(&main), want_main);
    assert_eq!(contents(&feature), want_feature);
    let report = p.gc().expect("gc");
    assert!(
        !report.deleted.is_empty(),
        "superseded data objects are collected"
    );
    assert_eq!(contents(&main), want_main);
    assert_eq!(contents(&feature), want_feature);
    s.close().expect("close");
    drop((main, feature, p, s));
    // Cold restart: a new cache directory; everything comes from the object store.
    let cold = tempfile::tempdir().expect("tempdir");
    let s = Store::open(opts(&store, cold.path(), 32 << 20)).expect("reopen");
    let p = s.partition("t", 0).expect("partition");
    let mut branches = p.branches().expect("branches");
    branches.sort();
    assert_eq!(branches, vec!["feature", "main"]);
    assert_eq!(contents(&p.branch("main").expect("main")), want_main);
    assert_eq!(
        contents(&p.branch("feature").expect("feature")),
        want_feature
    );
    let tag = p.tag("v1").expect("tag after a cold restart");
    for (k, v) in &want_feature {
        assert_eq!(
            tag.get(k).expect("tag read").map(|v| v.value),
            Some(v.clone())
        );
    }
    let restored = p
        .branch("main")
        .expect("main")
        .branch_from_archive(&archive, "from-archive")
        .expect("from archive");
    assert_eq!(contents(&restored), want_main);
    // Writes continue after the restart (this store took the branches over).
    let main = p.branch("main").expect("main");
    put(&main, "after-restart", "yes").expect("put after restart");
    s.close().expect("close");
    // Warm restart: the cache directory of the last run is reused.
    let s = Store::open(opts(&store, cold.path(), 32 << 20)).expect("reopen warm");
    let main = s
        .partition("t", 0)
        .expect("p")
        .branch("main")
        .expect("main");
    want_main.insert(b"after-restart".to_vec(), b"yes".to_vec());
    assert_eq!(contents(&main), want_main);
    s.close().expect("close");
}

#[test]
fn branches_gc_and_cold_restart_in_process() {
    branches_gc_and_cold_restart(Arc::new(MemoryObjectStore::new()), FencingMode::Auto);
}

/// The same on a store without If-Match: terms are fenced with numbered claims.
#[test]
fn branches_gc_and_cold_restart_with_numbered_claims() {
    branches_gc_and_cold_restart(
        Arc::new(MemoryObjectStore::without_if_match(None)),
        FencingMode::Auto,
    );
}

#[test]
fn the_cache_stays_within_budget_under_a_larger_workload() {
    let store: Arc<dyn ObjectStore> = Arc::new(MemoryObjectStore::new());
    let cache = tempfile::tempdir().expect("tempdir");
    let budget = 1 << 20;
    let s = Store::open(opts(&store, cache.path(), budget)).expect("open");
    let main = s
        .partition("t", 0)
        .expect("p")
        .branch("main")
        .expect("main");
    let big = "v".repeat(3000);
    for round in 0..24 {
        let mut batch = WriteBatch::new();
        for i in 0..100 {
            batch.put(key(round * 100 + i), big.clone());
        }
        main.write_blocking(batch).expect("write");
        assert!(dir_bytes(cache.path()) <= budget, "cache over budget");
    }
    let total: u64 = bough::object::list_all(store.as_ref(), "")
        .expect("list")
        .iter()
        .map(|o| o.size)
        .sum();
    assert!(
        total > 3 * budget,
        "the workload ({total} B) outgrows the cache"
    );
    s.close().expect("close");
    let cold = tempfile::tempdir().expect("tempdir");
    let s = Store::open(opts(&store, cold.path(), budget)).expect("reopen");
    let main = s
        .partition("t", 0)
        .expect("p")
        .branch("main")
        .expect("main");
    for i in (0..2400).step_by(7) {
        let v = main
            .get_blocking(key(i).as_bytes())
            .expect("get")
            .expect("present");
        assert_eq!(v.value, big.as_bytes());
        assert!(dir_bytes(cold.path()) <= budget, "cache over budget");
    }
    s.close().expect("close");
}

fn dir_bytes(p: &Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let Ok(m) = e.metadata() else { continue };
            // The store lock file is not cache.
            n += if m.is_dir() {
                dir_bytes(&e.path())
            } else if e.file_name() == "LOCK" {
                0
            } else {
                m.len()
            };
        }
    }
    n
}

/// Two stores over one object store: the newer owner fences the older; the older's late
/// writes never become visible; GC by the newer owner keeps everything reachable.
fn two_owners(store: Arc<dyn ObjectStore>, fencing: FencingMode) {
    let opts = |store: &Arc<dyn ObjectStore>, cache: &Path, budget: u64| {
        with_fencing(opts(store, cache, budget), fencing)
    };
    let (ca, cb) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
    );
    let a = Store::open(opts(&store, ca.path(), 8 << 20)).expect("open A");
    let a_main = a
        .partition("t", 0)
        .expect("p")
        .branch("main")
        .expect("main");
    let mut acked = BTreeMap::new();
    for i in 0..100 {
        put(&a_main, &key(i), "from A").expect("A writes");
        acked.insert(key(i).into_bytes(), b"from A".to_vec());
    }
    // B opens the branch: it takes it over at a new term.
    let b = Store::open(opts(&store, cb.path(), 8 << 20)).expect("open B");
    let b_main = b
        .partition("t", 0)
        .expect("p")
        .branch("main")
        .expect("main");
    assert_eq!(
        contents(&b_main),
        acked,
        "B sees every acknowledged write of A"
    );
    // A's next write is fenced and not acknowledged; later ones fail too.
    let e = put(&a_main, "late", "from A").expect_err("A is fenced");
    assert_eq!(e.kind(), ErrorKind::Fenced, "{e}");
    assert!(put(&a_main, "later", "from A").is_err());
    for i in 100..150 {
        put(&b_main, &key(i), "from B").expect("B writes");
        acked.insert(key(i).into_bytes(), b"from B".to_vec());
    }
    let report = b.partition("t", 0).expect("p").gc().expect("gc by B");
    let _ = report;
    assert_eq!(contents(&b_main), acked);
    assert!(b_main.get_blocking(b"late").expect("get").is_none());
    b.close().expect("close B");
    a.close().expect("close A");
    // A fresh reader sees exactly the acknowledged writes.
    let cc = tempfile::tempdir().expect("c");
    let c = Store::open(opts(&store, cc.path(), 8 << 20)).expect("open C");
    let c_main = c
        .partition("t", 0)
        .expect("p")
        .branch("main")
        .expect("main");
    assert_eq!(contents(&c_main), acked);
    c.close().expect("close C");
}

#[test]
fn a_new_owner_fences_the_old_one_in_process() {
    two_owners(Arc::new(MemoryObjectStore::new()), FencingMode::Auto);
}

/// Fencing with only conditional create: the in-process store without If-Match.
#[test]
fn a_new_owner_fences_the_old_one_with_numbered_claims() {
    two_owners(
        Arc::new(MemoryObjectStore::without_if_match(None)),
        FencingMode::Auto,
    );
}

/// Transient faults on the uploads a commit makes: with the write buffer off, its data
/// object and its manifest version (`commit_key` = "manifest_main"); with it on, its log
/// segment (".seg") and, at checkpoints, data objects and manifest versions.
fn faults_lose_nothing(write_buffer: u64, commit_key: &str) {
    let mem = MemoryObjectStore::new();
    let faulty = FaultyObjectStore::new(Arc::new(mem.clone()));
    let store: Arc<dyn ObjectStore> = Arc::new(faulty.clone());
    let cache = tempfile::tempdir().expect("tempdir");
    let s = Store::open(
        opts(&store, cache.path(), 8 << 20).map_settings(|o| o.write_buffer_bytes(write_buffer)),
    )
    .expect("open");
    let main = s
        .partition("t", 0)
        .expect("p")
        .branch("main")
        .expect("main");
    let mut acked = BTreeMap::new();
    for i in 0..120 {
        match i % 6 {
            0 => faulty.fail_next(ObjOp::PutIfAbsent, Fault::Status(503), 2),
            // A commit is the create-if-absent of a manifest version or a log segment.
            1 => faulty.plan(
                ObjOp::PutIfAbsent,
                Some(commit_key),
                0,
                Fault::TimeoutAfter,
                1,
            ),
            2 => faulty.plan(
                ObjOp::PutIfAbsent,
                Some(commit_key),
                0,
                Fault::Status(429),
                3,
            ),
            3 => faulty.fail_next(ObjOp::PutIfAbsent, Fault::TimeoutAfter, 1),
            _ => {}
        }
        put(&main, &key(i), &value(i, 0)).expect("write survives transient faults");
        acked.insert(key(i).into_bytes(), value(i, 0).into_bytes());
    }
    assert!(faulty.fired() > 50);
    // A storm longer than the retry budget: the commit fails and the writer is poisoned.
    faulty.plan(
        ObjOp::PutIfAbsent,
        Some(commit_key),
        0,
        Fault::Status(500),
        100,
    );
    let e = put(&main, "unacked", "x").expect_err("out of retries");
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    faulty.clear();
    s.close().expect("close");
    // Every acknowledged write is there, once; the failed one is not.
    let cold = tempfile::tempdir().expect("tempdir");
    let s = Store::open(opts(&store, cold.path(), 8 << 20)).expect("reopen");
    let main = s
        .partition("t", 0)
        .expect("p")
        .branch("main")
        .expect("main");
    // Fewer consecutive faults than the retry attempts (6) of one read.
    faulty.fail_next(ObjOp::Get, Fault::ShortRead, 2);
    faulty.fail_next(ObjOp::Get, Fault::Status(503), 2);
    assert_eq!(contents(&main), acked);
    assert!(main.get_blocking(b"unacked").expect("get").is_none());
    s.close().expect("close");
}

#[test]
fn faults_lose_nothing_acknowledged_and_publish_nothing_unacknowledged() {
    faults_lose_nothing(0, "manifest_main");
}

#[test]
fn faults_on_log_segments_lose_nothing_acknowledged_and_publish_nothing_unacknowledged() {
    faults_lose_nothing(16 << 10, ".seg");
}

#[test]
fn options_load_the_object_table_from_toml() {
    let o = Options::from_toml_str(
        "path = \"/tmp/cache\"\nbackend = \"object\"\n[object]\nservice = \"s3\"\n\
         endpoint = \"http://127.0.0.1:5055\"\nbucket = \"b\"\nroot = \"/prefix\"\n\
         cache_bytes = 1048576\n[object.retry]\nattempts = 3\n",
    )
    .expect("parse");
    assert_eq!(o.backend, Backend::Object);
    assert_eq!(o.object.bucket, "b");
    assert_eq!(o.object.service, Service::S3);
    assert_eq!(o.object.retry.attempts, 3);
    let e = Options::from_toml_str("path = \"/x\"\nbackend = \"object\"\n").expect_err("bucket");
    assert!(e.to_string().contains("object.bucket"), "{e}");
    let e = Options::from_toml_str("path = \"/x\"\n[object]\nsecret = 1\n").expect_err("unknown");
    assert!(e.to_string().contains("secret"), "{e}");
    // The new fields: fencing, prewarm, the GC lease, tests-only services.
    let o = Options::from_toml_str(
        "path = \"/tmp/cache\"\nbackend = \"object\"\n[object]\nbucket = \"b\"\n\
         fencing = \"numbered_claims\"\nprewarm = true\ngc_lease_ms = 30000\n",
    )
    .expect("parse");
    assert_eq!(o.object.fencing, FencingMode::NumberedClaims);
    assert!(o.object.prewarm);
    assert_eq!(o.object.gc_lease_ms, 30_000);
    assert_eq!(
        o.object.range_read_bytes,
        256 << 10,
        "page-granular reads by default"
    );
    let o = Options::from_toml_str(
        "path = \"/tmp/cache\"\nbackend = \"object\"\n[object]\nbucket = \"b\"\n\
         range_read_bytes = 0\n",
    )
    .expect("parse");
    assert_eq!(o.object.range_read_bytes, 0);
    let e = Options::from_toml_str(
        "path = \"/x\"\nbackend = \"object\"\n[object]\nbucket = \"b\"\nrange_read_bytes = 100\n",
    )
    .expect_err("a range below 4 KiB");
    assert!(e.to_string().contains("object.range_read_bytes"), "{e}");
    let e = Options::from_toml_str(
        "path = \"/x\"\nbackend = \"object\"\n[object]\nbucket = \"b\"\nfencing = \"maybe\"\n",
    )
    .expect_err("unknown fencing");
    assert!(e.to_string().contains("fencing"), "{e}");
    // GCS and Azure parse; they need their cargo feature, and Azure an endpoint.
    let gcs = Options::from_toml_str(
        "path = \"/x\"\nbackend = \"object\"\n[object]\nservice = \"gcs\"\nbucket = \"b\"\n",
    );
    let az = Options::from_toml_str(
        "path = \"/x\"\nbackend = \"object\"\n[object]\nservice = \"azblob\"\n\
         bucket = \"c\"\nendpoint = \"https://acct.blob.core.windows.net\"\n",
    );
    for (r, built) in [
        (gcs, Service::Gcs.is_built()),
        (az, Service::Azblob.is_built()),
    ] {
        match r {
            Ok(o) => assert!(built, "{:?} accepted without its feature", o.object.service),
            Err(e) => {
                assert!(!built, "{e}");
                assert!(e.to_string().contains("feature"), "{e}");
            }
        }
    }
    // A service that keeps nothing durable needs `test_only`; then it is fenced with
    // numbered claims (it has no If-Match).
    let cache = tempfile::tempdir().expect("tempdir");
    let mut o = Options::new(cache.path()).backend(Backend::Object);
    o.object = CloudConfig {
        service: Service::Memory,
        ..CloudConfig::default()
    };
    let e = Store::open(o.clone()).expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("test_only"), "{e}");
    o.object.test_only = true;
    let s = Store::open(o).expect("tests-only memory service");
    let main = s
        .partition("t", 0)
        .expect("p")
        .branch("main")
        .expect("main");
    put(&main, "k", "v").expect("put");
    s.close().expect("close");
    // Forcing compare-and-swap on it is refused with the typed reason.
    let cache = tempfile::tempdir().expect("tempdir");
    let mut o = Options::new(cache.path()).backend(Backend::Object);
    o.object = CloudConfig {
        service: Service::Memory,
        test_only: true,
        fencing: FencingMode::CompareAndSwap,
        ..CloudConfig::default()
    };
    let e = Store::open(o).expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("compare-and-swap"), "{e}");
}

/// opendal's fs service (tests only): refused unless the configuration says so, and then
/// a store works on it with numbered claims.
#[test]
fn the_fs_service_is_for_tests_only() {
    let objects = tempfile::tempdir().expect("tempdir");
    let cache = tempfile::tempdir().expect("tempdir");
    let mut o = Options::new(cache.path())
        .backend(Backend::Object)
        .maintenance_interval_ms(0)
        .data_file_size(64 * 4096);
    o.object = CloudConfig {
        service: Service::Fs,
        root: objects.path().display().to_string(),
        ..cloud_cfg(8 << 20)
    };
    let e = Store::open(o.clone()).expect_err("refused");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("test_only"), "{e}");
    o.object.test_only = true;
    let mut want = BTreeMap::new();
    {
        let s = Store::open(o.clone()).expect("fs store");
        let main = s
            .partition("t", 0)
            .expect("p")
            .branch("main")
            .expect("main");
        for i in 0..40 {
            put(&main, &key(i), &value(i, 0)).expect("put");
            want.insert(key(i).into_bytes(), value(i, 0).into_bytes());
        }
        s.close().expect("close");
    }
    let cold = tempfile::tempdir().expect("tempdir");
    let s = Store::open(o.path(cold.path())).expect("reopen from the objects alone");
    let main = s
        .partition("t", 0)
        .expect("p")
        .branch("main")
        .expect("main");
    assert_eq!(contents(&main), want);
    s.close().expect("close");
}

/// The S3 server, or `None` locally when none is configured (never under `CI=true`).
fn s3(test: &str) -> Option<Arc<dyn ObjectStore>> {
    let endpoint = match std::env::var("BOUGH_S3_ENDPOINT") {
        Ok(e) if !e.is_empty() => e,
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: BOUGH_S3_ENDPOINT is not set under CI=true: .ci/run must start moto"
            );
            eprintln!("{test}: SKIPPED against S3 (BOUGH_S3_ENDPOINT not set)");
            return None;
        }
    };
    let unique = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let cfg = CloudConfig {
        service: Service::S3,
        endpoint,
        bucket: std::env::var("BOUGH_S3_BUCKET").unwrap_or_else(|_| "bough-test".into()),
        root: format!("/{test}-{unique}/"),
        allow_anonymous: true,
        ..cloud_cfg(32 << 20)
    };
    Some(Arc::new(OpendalStore::new(&cfg).expect("s3 store")))
}

#[test]
fn s3_branches_gc_and_cold_restart() {
    if let Some(s) = s3("s3_branches_gc_and_cold_restart") {
        branches_gc_and_cold_restart(s, FencingMode::Auto);
    }
}

#[test]
fn s3_a_new_owner_fences_the_old_one() {
    if let Some(s) = s3("s3_a_new_owner_fences_the_old_one") {
        two_owners(s, FencingMode::Auto);
    }
}

/// Numbered claims against the real server: the fencing of services without If-Match,
/// with moto's conditional create doing the work.
#[test]
fn s3_a_new_owner_fences_the_old_one_with_numbered_claims() {
    if let Some(s) = s3("s3_a_new_owner_fences_the_old_one_with_numbered_claims") {
        two_owners(s, FencingMode::NumberedClaims);
    }
}

/// Keys of the object store's data objects.
fn data_keys(store: &dyn ObjectStore) -> std::collections::BTreeSet<String> {
    bough::object::list_all(store, "")
        .expect("list")
        .into_iter()
        .map(|o| o.key)
        .filter(|k| k.contains("/data_"))
        .collect()
}

/// Overwrites the same keys a few times, checkpointing each time, so earlier data objects
/// become garbage.
fn churn(b: &bough::Branch, rounds: usize, want: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    for round in 0..rounds {
        let mut batch = WriteBatch::new();
        for i in 0..40 {
            batch.put(key(i), value(i, round));
            want.insert(key(i).into_bytes(), value(i, round).into_bytes());
        }
        b.write_blocking(batch).expect("write");
        // Into the tree, so each round supersedes the last round's data object.
        b.checkpoint_blocking().expect("checkpoint");
    }
}

/// One process at a time collects garbage in a partition: GC runs under the partition's
/// lease (conditional writes of `GC_LEASE`, with the injected clock). While another process
/// holds it, GC is `Busy` and deletes nothing; after its expiry GC takes it over, and the
/// stale holder deletes nothing more. Two stores racing GC never both delete an object.
fn gc_lease_between_processes(store: Arc<dyn ObjectStore>, fencing: FencingMode) {
    let clock = ManualClock::new(T0);
    let cfg = CloudConfig {
        fencing,
        ..cloud_cfg(8 << 20)
    };
    let (ca, cb, cc) = (
        tempfile::tempdir().expect("a"),
        tempfile::tempdir().expect("b"),
        tempfile::tempdir().expect("c"),
    );
    let a = Store::open(opts_with(&store, ca.path(), cfg.clone(), &clock)).expect("open A");
    let pa = a.partition("t", 0).expect("p");
    let main = pa.branch("main").expect("main");
    let mut want = BTreeMap::new();
    churn(&main, 6, &mut want);
    // A third process, mid-GC: it holds the lease of `t.0`.
    let c_clock = clock.clone();
    let c = CloudStorage::open(
        store.clone(),
        cc.path(),
        &cfg,
        Some(Arc::new(move || bough::Clock::now_ms(&c_clock))),
    )
    .expect("open C");
    let lease_c = c.acquire_gc_lease("t.0").expect("C takes the lease");
    let before = data_keys(store.as_ref());
    let e = pa.gc().expect_err("A must wait for C's lease");
    assert_eq!(e.kind(), ErrorKind::Busy, "{e}");
    assert_eq!(data_keys(store.as_ref()), before, "A deleted nothing");
    // The store-wide GC (what maintenance runs) skips the partition.
    let all = a.gc().expect("store-wide GC");
    assert!(all.iter().all(|(dir, _)| dir != "t.0"), "{all:?}");
    assert_eq!(data_keys(store.as_ref()), before, "A deleted nothing");
    // A dry run deletes nothing and needs no lease.
    let dry = pa.gc_dry_run().expect("dry run");
    assert!(!dry.deleted.is_empty(), "there is garbage to collect");
    // C stalls past its lease: A takes the lease over and collects.
    clock.advance(LEASE_MS + 1);
    let report = pa.gc().expect("A collects after C's lease expired");
    assert!(!report.deleted.is_empty());
    let after = data_keys(store.as_ref());
    assert!(after.len() < before.len());
    // C, the stale holder, is refused: it deletes nothing more.
    let victim = after.iter().next().expect("a live data object").clone();
    assert_eq!(
        c.delete(&victim).expect_err("stale holder").kind(),
        bough::io::ErrorKind::Fenced
    );
    assert_eq!(
        lease_c.check().expect_err("lost").kind(),
        bough::io::ErrorKind::Fenced
    );
    assert!(data_keys(store.as_ref()).contains(&victim));
    drop(lease_c);
    assert_eq!(contents(&main), want);
    // Two stores racing GC of the same partition: each run holds the lease or is `Busy`,
    // and no object is reported deleted twice.
    churn(&main, 6, &mut want);
    let b = Store::open(opts_with(&store, cb.path(), cfg, &clock)).expect("open B");
    let pb = b.partition("t", 0).expect("p");
    let barrier = std::sync::Barrier::new(2);
    let (ra, rb) = std::thread::scope(|scope| {
        let ha = scope.spawn(|| {
            barrier.wait();
            pa.gc()
        });
        let hb = scope.spawn(|| {
            barrier.wait();
            pb.gc()
        });
        (ha.join().expect("A"), hb.join().expect("B"))
    });
    let mut deleted = Vec::new();
    for r in [ra, rb] {
        match r {
            Ok(rep) => deleted.extend(rep.deleted.into_iter().map(|(n, _)| n)),
            Err(e) => assert_eq!(e.kind(), ErrorKind::Busy, "{e}"),
        }
    }
    assert!(!deleted.is_empty(), "one of them collected");
    let n = deleted.len();
    deleted.sort();
    deleted.dedup();
    assert_eq!(deleted.len(), n, "an object was deleted by both");
    assert_eq!(contents(&main), want);
    b.close().expect("close B");
    a.close().expect("close A");
}

#[test]
fn gc_runs_under_a_lease_one_process_at_a_time() {
    let clock = ManualClock::new(T0);
    let c = clock.clone();
    gc_lease_between_processes(
        Arc::new(MemoryObjectStore::with_clock(Arc::new(move || {
            bough::Clock::now_ms(&c)
        }))),
        FencingMode::Auto,
    );
    gc_lease_between_processes(
        Arc::new(MemoryObjectStore::without_if_match(None)),
        FencingMode::Auto,
    );
}

#[test]
fn s3_gc_runs_under_a_lease_one_process_at_a_time() {
    if let Some(s) = s3("s3_gc_runs_under_a_lease_one_process_at_a_time") {
        gc_lease_between_processes(s, FencingMode::Auto);
    }
    if let Some(s) = s3("s3_gc_runs_under_a_lease_with_numbered_claims") {
        gc_lease_between_processes(s, FencingMode::NumberedClaims);
    }
}

/// Every branch of every partition, read in full.
fn everything(s: &Store) -> BTreeMap<(u32, String), BTreeMap<Vec<u8>, Vec<u8>>> {
    let mut out = BTreeMap::new();
    for p in s.table("t").unwrap().partitions().expect("partitions") {
        let part = s.partition("t", p).expect("p");
        for b in part.branches().expect("branches") {
            out.insert((p, b.clone()), contents(&part.branch(&b).expect("branch")));
        }
    }
    out
}

/// Prewarm fills an empty cache at open with the newest data objects, within the budget;
/// reads then hit the cache (no data GETs). A restart with the warm cache reuses it (no
/// data GETs either); a restart from an empty cache downloads and reads identical data.
#[test]
fn prewarm_then_warm_and_cold_restarts_read_the_same() {
    let mem = MemoryObjectStore::new();
    let store: Arc<dyn ObjectStore> = Arc::new(mem.clone());
    let first = tempfile::tempdir().expect("tempdir");
    let s = Store::open(opts(&store, first.path(), 32 << 20)).expect("open");
    for p in 0..3 {
        let part = s.partition("t", p).expect("p");
        let main = part.branch("main").expect("main");
        let mut want = BTreeMap::new();
        churn(&main, 3, &mut want);
        let side = part.create_branch("side", "main").expect("branch");
        put(&side, "only-on-side", &format!("p{p}")).expect("put");
    }
    let want = everything(&s);
    s.close().expect("close");
    let data_gets = || mem.gets_of("/data_");

    // Prewarm into an empty cache, then read everything: every data page comes from it.
    let cache = tempfile::tempdir().expect("tempdir");
    let prewarm = |dir: &Path, on: bool, budget: u64| {
        let mut o = opts(&store, dir, budget);
        o.settings_mut().object.prewarm = on;
        Store::open(o).expect("open")
    };
    let before = data_gets();
    let s = prewarm(cache.path(), true, 32 << 20);
    let downloaded = data_gets() - before;
    assert!(downloaded > 0, "prewarm downloaded the data objects");
    let before = data_gets();
    assert_eq!(everything(&s), want);
    assert_eq!(
        data_gets(),
        before,
        "after prewarm every read hits the cache"
    );
    s.close().expect("close");

    // Restart with the warm cache: reused as it is.
    let before = data_gets();
    let s = prewarm(cache.path(), false, 32 << 20);
    assert_eq!(everything(&s), want);
    assert_eq!(data_gets(), before, "a warm restart downloads nothing");
    s.close().expect("close");

    // Restart from an empty cache: downloads, and reads the same.
    let cold = tempfile::tempdir().expect("tempdir");
    let before = data_gets();
    let s = prewarm(cold.path(), false, 32 << 20);
    assert_eq!(everything(&s), want);
    assert!(data_gets() > before, "a cold restart downloads");
    s.close().expect("close");

    // Prewarm never goes over the budget, even when the objects outgrow it.
    let small = tempfile::tempdir().expect("tempdir");
    let total: u64 = bough::object::list_all(store.as_ref(), "")
        .expect("list")
        .iter()
        .filter(|o| o.key.contains("/data_"))
        .map(|o| o.size)
        .sum();
    let budget = total / 3;
    let s = prewarm(small.path(), true, budget);
    assert!(
        dir_bytes(small.path()) <= budget,
        "prewarm went over budget"
    );
    assert!(dir_bytes(small.path()) > 0, "prewarm loaded something");
    assert_eq!(everything(&s), want);
    s.close().expect("close");
}

/// A manifest upload whose outcome stays unknown poisons the writer: every attempt times
/// out (after the store applied it, or before) and the read-back fails too. The term is
/// given up: whether the branch is reopened in the same store (an idle head closed and
/// opened again) or by a new store, it continues at a new term, and no (branch, term)
/// pair — so no data object name — is used twice. (Reopened at the old term, a head that
/// did not see the failed commit would allocate the file id of the data object that commit
/// uploaded, and collide with it.)
fn unresolved_manifest_upload(applied: bool) {
    let mem = MemoryObjectStore::new();
    let faulty = FaultyObjectStore::new(Arc::new(mem.clone()));
    let store: Arc<dyn ObjectStore> = Arc::new(faulty.clone());
    let cache = tempfile::tempdir().expect("tempdir");
    // Manifest uploads per commit: the write buffer off (`unresolved_log_segment` is the
    // same with it on).
    let s = Store::open(
        opts(&store, cache.path(), 8 << 20)
            .map_settings(|o| o.max_open_branches(1).write_buffer_bytes(0)),
    )
    .expect("open");
    let p = s.partition("t", 0).expect("p");
    let main = p.branch("main").expect("main");
    let mut acked = BTreeMap::new();
    for i in 0..30 {
        put(&main, &key(i), "before").expect("put");
        acked.insert(key(i).into_bytes(), b"before".to_vec());
    }
    let term = p.describe("main").expect("describe").term;
    let data_before = data_keys(&mem);
    let fault = if applied {
        Fault::TimeoutAfter
    } else {
        Fault::TimeoutBefore
    };
    faulty.plan(ObjOp::PutIfAbsent, Some("manifest_main"), 0, fault, 1000);
    faulty.plan(
        ObjOp::Get,
        Some("manifest_main"),
        0,
        Fault::Status(503),
        1000,
    );
    let e = put(&main, "ambiguous", "x").expect_err("outcome unknown");
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    faulty.clear();
    assert!(
        data_keys(&mem).len() > data_before.len(),
        "the failed commit uploaded its data object"
    );
    let e = put(&main, "after", "x").expect_err("poisoned");
    assert_eq!(e.kind(), ErrorKind::Poisoned, "{e}");
    let old_term_objects: std::collections::BTreeSet<String> = data_keys(&mem)
        .into_iter()
        .filter(|k| k.ends_with(&format!("_main_{term}")))
        .collect();
    // Reopen in the same store: the idle head is closed (one open head at most) and opened
    // again. The writer thread lets go of the branch just after answering: open other
    // partitions until the head of `t.0` was closed.
    drop(main);
    for i in 1..50 {
        let other = s
            .partition("t", i)
            .expect("p")
            .branch("main")
            .expect("other");
        drop(other);
        if s.open_branch_count() == 1 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(s.open_branch_count(), 1, "the poisoned head was closed");
    let main = p.branch("main").expect("reopened");
    let term2 = p.describe("main").expect("describe").term;
    assert!(
        term2 > term,
        "reopened at term {term2}, the failed term was {term}"
    );
    // A commit that landed is there (it was reported as an error whose outcome is
    // unknown); one that did not is not.
    if applied {
        acked.insert(b"ambiguous".to_vec(), b"x".to_vec());
    }
    for i in 0..10 {
        put(&main, &key(i), "after reopen").expect("put at the new term");
        acked.insert(key(i).into_bytes(), b"after reopen".to_vec());
    }
    assert_eq!(contents(&main), acked);
    s.close().expect("close");
    drop(main);
    // A new store takes it over once more.
    let cold = tempfile::tempdir().expect("tempdir");
    let s = Store::open(opts(&store, cold.path(), 8 << 20)).expect("reopen");
    let p = s.partition("t", 0).expect("p");
    let main = p.branch("main").expect("main");
    assert!(p.describe("main").expect("describe").term > term2);
    put(&main, "last", "x").expect("put");
    acked.insert(b"last".to_vec(), b"x".to_vec());
    assert_eq!(contents(&main), acked);
    s.close().expect("close");
    // Nothing of the failed term was written after the failure, and no object name was
    // ever written twice.
    let now: std::collections::BTreeSet<String> = data_keys(&mem)
        .into_iter()
        .filter(|k| k.ends_with(&format!("_main_{term}")))
        .collect();
    assert!(
        now.is_subset(&old_term_objects),
        "{now:?} vs {old_term_objects:?}"
    );
    assert_eq!(
        mem.max_puts_per_key("/data_"),
        1,
        "a data object was written twice"
    );
}

#[test]
fn a_manifest_upload_applied_but_unconfirmed_gives_the_term_up() {
    unresolved_manifest_upload(true);
}

#[test]
fn a_manifest_upload_lost_in_timeouts_gives_the_term_up() {
    unresolved_manifest_upload(false);
}

/// A log segment upload whose outcome stays unknown (every attempt times out, after the
/// store applied it or before, and the read-back fails): the commit is an error, the head
/// is poisoned, and whoever opens the branch next finds the commit exactly when it landed.
fn unresolved_log_segment(applied: bool) {
    let mem = MemoryObjectStore::new();
    let faulty = FaultyObjectStore::new(Arc::new(mem.clone()));
    let store: Arc<dyn ObjectStore> = Arc::new(faulty.clone());
    let cache = tempfile::tempdir().expect("tempdir");
    let s = Store::open(opts(&store, cache.path(), 8 << 20)).expect("open");
    let p = s.partition("t", 0).expect("p");
    let main = p.branch("main").expect("main");
    let mut acked = BTreeMap::new();
    for i in 0..30 {
        put(&main, &key(i), "before").expect("put");
        acked.insert(key(i).into_bytes(), b"before".to_vec());
    }
    let fault = if applied {
        Fault::TimeoutAfter
    } else {
        Fault::TimeoutBefore
    };
    faulty.plan(ObjOp::PutIfAbsent, Some(".seg"), 0, fault, 1000);
    faulty.plan(ObjOp::Get, Some(".seg"), 0, Fault::Status(503), 1000);
    let e = put(&main, "ambiguous", "x").expect_err("outcome unknown");
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    faulty.clear();
    let e = put(&main, "after", "x").expect_err("poisoned");
    assert_eq!(e.kind(), ErrorKind::Poisoned, "{e}");
    drop(main);
    drop(s);
    if applied {
        acked.insert(b"ambiguous".to_vec(), b"x".to_vec());
    }
    let cold = tempfile::tempdir().expect("tempdir");
    let s = Store::open(opts(&store, cold.path(), 8 << 20)).expect("reopen");
    let main = s
        .partition("t", 0)
        .expect("p")
        .branch("main")
        .expect("main");
    assert_eq!(contents(&main), acked);
    put(&main, "last", "x").expect("put at the new term");
    acked.insert(b"last".to_vec(), b"x".to_vec());
    assert_eq!(contents(&main), acked);
    s.close().expect("close");
}

#[test]
fn a_log_segment_upload_applied_but_unconfirmed_is_found_by_the_next_owner() {
    unresolved_log_segment(true);
}

#[test]
fn a_log_segment_upload_lost_in_timeouts_is_not_found_by_the_next_owner() {
    unresolved_log_segment(false);
}
