//! Page-granular reads of data objects (issue 17): a cold read fetches the aligned range it
//! needs with one ranged GET (neighbours coalesced), ranges are cached within the budget
//! and never survive a reopen, a scan switches to downloading the object whole, and
//! `range_read_bytes = 0` keeps whole-object reads. Requests are counted by a wrapper
//! around the store, not by the tier's own counters.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bough_io::{OpenOptions, Storage};
use bough_object::{
    CloudConfig, CloudStorage, Etag, Fault, FaultyObjectStore, Guarantees, ListPage,
    MemoryObjectStore, ObjOp, ObjResult, ObjectMeta, ObjectStore,
};

const RANGE: u64 = 64 << 10;
/// 64 ranges: reads of a few of them stay sparse (a quarter of an object read in scattered
/// ranges completes it: `reads_of_a_quarter_of_an_object_fetch_the_rest_in_one_request`).
const OBJECT: usize = 4 << 20;

/// Counts the reads that reach the store.
#[derive(Debug, Default)]
struct Reads {
    heads: AtomicU64,
    whole: AtomicU64,
    ranged: AtomicU64,
    bytes: AtomicU64,
}

#[derive(Debug)]
struct Counting {
    inner: Arc<dyn ObjectStore>,
    reads: Arc<Reads>,
    /// How long a GET takes (a slow store lets concurrent readers overlap).
    delay: std::time::Duration,
}

impl ObjectStore for Counting {
    fn service(&self) -> &str {
        self.inner.service()
    }
    fn guarantees(&self) -> Guarantees {
        self.inner.guarantees()
    }
    fn get(&self, key: &str) -> ObjResult<(Vec<u8>, ObjectMeta)> {
        std::thread::sleep(self.delay);
        let r = self.inner.get(key)?;
        self.reads.whole.fetch_add(1, Ordering::Relaxed);
        self.reads
            .bytes
            .fetch_add(r.0.len() as u64, Ordering::Relaxed);
        Ok(r)
    }
    fn get_range(&self, key: &str, offset: u64, len: u64) -> ObjResult<Vec<u8>> {
        std::thread::sleep(self.delay);
        let r = self.inner.get_range(key, offset, len)?;
        self.reads.ranged.fetch_add(1, Ordering::Relaxed);
        self.reads
            .bytes
            .fetch_add(r.len() as u64, Ordering::Relaxed);
        Ok(r)
    }
    fn head(&self, key: &str) -> ObjResult<ObjectMeta> {
        self.reads.heads.fetch_add(1, Ordering::Relaxed);
        self.inner.head(key)
    }
    fn put(&self, key: &str, body: &[u8]) -> ObjResult<Option<Etag>> {
        self.inner.put(key, body)
    }
    fn put_if_absent(&self, key: &str, body: &[u8]) -> ObjResult<Option<Etag>> {
        self.inner.put_if_absent(key, body)
    }
    fn put_if_match(&self, key: &str, body: &[u8], etag: &str) -> ObjResult<Option<Etag>> {
        self.inner.put_if_match(key, body, etag)
    }
    fn list(
        &self,
        prefix: &str,
        delimiter: bool,
        start_after: Option<&str>,
        limit: usize,
    ) -> ObjResult<ListPage> {
        self.inner.list(prefix, delimiter, start_after, limit)
    }
    fn delete(&self, key: &str) -> ObjResult<()> {
        self.inner.delete(key)
    }
}

fn object_bytes(seed: u8) -> Vec<u8> {
    (0..OBJECT)
        .map(|i| ((i / 7) as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}

const PATH: &str = "p.0/data_1_main_0";

/// Uploads `bytes` as [`PATH`] through a writer instance of its own (its cache is dropped).
fn upload(store: &Arc<dyn ObjectStore>, cfg: &CloudConfig, bytes: &[u8]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let w = CloudStorage::open(store.clone(), dir.path(), cfg, None).expect("open writer");
    w.create_dir("p.0").expect("create_dir");
    w.create_new("p.0/manifest_main_0", b"m")
        .expect("own the term");
    let f = w.open(PATH, OpenOptions::write_new(0)).expect("create");
    f.write_at(0, bytes).expect("write");
    f.sync().expect("upload");
}

struct Reader {
    storage: CloudStorage,
    reads: Arc<Reads>,
    cache: tempfile::TempDir,
}

/// A fresh reader process over `store` (empty cache), its reads counted.
fn reader(store: &Arc<dyn ObjectStore>, cfg: &CloudConfig) -> Reader {
    let cache = tempfile::tempdir().expect("tempdir");
    reader_in(store, cfg, cache)
}

fn reader_in(store: &Arc<dyn ObjectStore>, cfg: &CloudConfig, cache: tempfile::TempDir) -> Reader {
    slow_reader_in(store, cfg, cache, std::time::Duration::ZERO)
}

fn slow_reader_in(
    store: &Arc<dyn ObjectStore>,
    cfg: &CloudConfig,
    cache: tempfile::TempDir,
    delay: std::time::Duration,
) -> Reader {
    let reads = Arc::new(Reads::default());
    let counted: Arc<dyn ObjectStore> = Arc::new(Counting {
        inner: store.clone(),
        reads: reads.clone(),
        delay,
    });
    let storage = CloudStorage::open(counted, cache.path(), cfg, None).expect("open reader");
    Reader {
        storage,
        reads,
        cache,
    }
}

impl Reader {
    fn read(&self, offset: u64, len: usize) -> Vec<u8> {
        let f = self.storage.open(PATH, OpenOptions::read()).expect("open");
        let mut buf = vec![0u8; len];
        f.read_at(offset, &mut buf).expect("read");
        buf
    }
    fn counts(&self) -> (u64, u64, u64) {
        let r = &self.reads;
        (
            r.whole.load(Ordering::Relaxed),
            r.ranged.load(Ordering::Relaxed),
            r.bytes.load(Ordering::Relaxed),
        )
    }
}

/// A memory store holding [`PATH`], and a configuration reading it by ranges of [`RANGE`].
fn memory_setup(cache_bytes: u64) -> (Arc<dyn ObjectStore>, CloudConfig, Vec<u8>) {
    let store: Arc<dyn ObjectStore> = Arc::new(MemoryObjectStore::new());
    let cfg = CloudConfig {
        range_read_bytes: RANGE,
        ..common::test_config(cache_bytes)
    };
    let bytes = object_bytes(5);
    upload(&store, &cfg, &bytes);
    (store, cfg, bytes)
}

fn slice(bytes: &[u8], offset: u64, len: usize) -> &[u8] {
    &bytes[offset as usize..offset as usize + len]
}

#[test]
fn a_cold_page_read_fetches_its_range_not_the_whole_object() {
    let (store, cfg, bytes) = memory_setup(64 << 20);
    assert_eq!(
        common::test_config(1).range_read_bytes,
        256 << 10,
        "the default"
    );
    let r = reader(&store, &cfg);
    let at = 5 * RANGE + 8192;
    assert_eq!(r.read(at, 4096), slice(&bytes, at, 4096));
    assert_eq!(r.counts(), (0, 1, RANGE), "one ranged GET of one range");
    // Another page of the same range: the cached range serves it.
    assert_eq!(r.read(at + 20_000, 4096), slice(&bytes, at + 20_000, 4096));
    assert_eq!(r.counts(), (0, 1, RANGE));
    // A page elsewhere: one more range.
    let far = 12 * RANGE + 100;
    assert_eq!(r.read(far, 4096), slice(&bytes, far, 4096));
    assert_eq!(r.counts(), (0, 2, 2 * RANGE));
    let stats = r.storage.cache_stats();
    assert_eq!(stats.range_gets.load(Ordering::Relaxed), 2);
    assert_eq!(stats.downloads.load(Ordering::Relaxed), 0);
}

#[test]
fn a_read_across_ranges_fetches_the_missing_span_in_one_request() {
    let (store, cfg, bytes) = memory_setup(64 << 20);
    let r = reader(&store, &cfg);
    // Straddles ranges 2 and 3, neither cached: one request for both.
    let at = 3 * RANGE - 100;
    assert_eq!(r.read(at, 8192), slice(&bytes, at, 8192));
    assert_eq!(r.counts(), (0, 1, 2 * RANGE));
    // Ranges 3 (cached) and 4 (not): only range 4 is fetched; the answer joins both.
    let at = 4 * RANGE - 50;
    assert_eq!(r.read(at, 4096), slice(&bytes, at, 4096));
    assert_eq!(r.counts(), (0, 2, 3 * RANGE));
    // The last range is short (the object's tail): fetched exactly.
    let tail = OBJECT as u64 - 10;
    assert_eq!(r.read(tail, 10), slice(&bytes, tail, 10));
    assert_eq!(r.counts(), (0, 3, 4 * RANGE));
    // Past the end is refused before any request.
    let f = r.storage.open(PATH, OpenOptions::read()).expect("open");
    assert!(f.read_at(OBJECT as u64 - 5, &mut [0u8; 10]).is_err());
    assert_eq!(r.counts(), (0, 3, 4 * RANGE));
}

#[test]
fn a_scan_switches_to_one_whole_download() {
    let (store, cfg, bytes) = memory_setup(64 << 20);
    let r = reader(&store, &cfg);
    let mut at = 0u64;
    while at < OBJECT as u64 {
        assert_eq!(r.read(at, 4096), slice(&bytes, at, 4096), "page at {at}");
        at += 4096;
    }
    let (whole, ranged, fetched) = r.counts();
    assert_eq!((whole, ranged), (1, 2), "two ranges, then the object whole");
    assert_eq!(fetched, 2 * RANGE + OBJECT as u64);
    // The whole copy replaced the ranges.
    assert_eq!(r.storage.cache_files(), 1);
    assert_eq!(r.storage.cache_used(), OBJECT as u64);
}

#[test]
fn readers_needing_the_same_range_at_once_send_one_get() {
    let (store, cfg, bytes) = memory_setup(64 << 20);
    let cache = tempfile::tempdir().expect("tempdir");
    let r = slow_reader_in(&store, &cfg, cache, std::time::Duration::from_millis(50));
    let start = std::sync::Barrier::new(8);
    let at = 6 * RANGE + 4096;
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (r, start, bytes) = (&r, &start, &bytes);
            s.spawn(move || {
                start.wait();
                // Pages of one range, or of it and the next (a span claiming both).
                let (off, len) = if t % 2 == 0 {
                    (at + t * 4096, 4096)
                } else {
                    (7 * RANGE - 1000, 3000)
                };
                assert_eq!(r.read(off, len), slice(bytes, off, len), "thread {t}");
            });
        }
    });
    let (whole, ranged, fetched) = r.counts();
    assert_eq!(whole, 0);
    // Range 6 once and range 7 once: together or apart, never twice.
    assert!(ranged <= 2, "{ranged} ranged GETs for two ranges");
    assert_eq!(fetched, 2 * RANGE, "each range fetched once");
}

#[test]
fn reads_of_a_quarter_of_an_object_fetch_the_rest_in_one_request() {
    let (store, cfg, bytes) = memory_setup(64 << 20);
    let r = reader(&store, &cfg);
    let total = OBJECT as u64 / RANGE;
    // Scattered ranges (never two in a row): sparse until they add up to a quarter.
    let mut fetched = 0;
    while (fetched + 1) * 4 < total {
        let at = fetched * 3 * RANGE + 100;
        assert_eq!(r.read(at, 4096), slice(&bytes, at, 4096));
        fetched += 1;
        assert_eq!(r.counts(), (0, fetched, fetched * RANGE), "sparse so far");
    }
    // The read that makes a quarter fetches every missing range with one request (the span
    // from the first missing to the last: the cached ones inside it come again).
    let at = 62 * RANGE;
    assert_eq!(r.read(at, 4096), slice(&bytes, at, 4096));
    let (whole, ranged, bytes_fetched) = r.counts();
    assert_eq!((whole, ranged), (0, fetched + 1));
    assert_eq!(
        bytes_fetched,
        fetched * RANGE + (total - 1) * RANGE,
        "ranges 1..=63"
    );
    // Every later read is local.
    for i in 0..total {
        let at = i * RANGE + 7;
        assert_eq!(r.read(at, 4096), slice(&bytes, at, 4096));
    }
    assert_eq!(r.counts().1, fetched + 1);
    // An object the cache cannot hold stays sparse: the same reads fetch one range each.
    let (store, cfg, bytes) = memory_setup(OBJECT as u64 / 2);
    let r = reader(&store, &cfg);
    for i in 0..20 {
        let at = i * 3 * RANGE + 100;
        assert_eq!(r.read(at, 4096), slice(&bytes, at, 4096));
    }
    assert_eq!(r.counts(), (0, 20, 20 * RANGE));
}

#[test]
fn readers_needing_one_whole_object_at_once_download_it_once() {
    let (store, mut cfg, bytes) = memory_setup(64 << 20);
    cfg.range_read_bytes = 0;
    let cache = tempfile::tempdir().expect("tempdir");
    let r = slow_reader_in(&store, &cfg, cache, std::time::Duration::from_millis(50));
    // The object's length, learned once, so that every thread's open goes straight on.
    let _ = r.storage.file_len(PATH).expect("len");
    let start = std::sync::Barrier::new(8);
    std::thread::scope(|s| {
        for t in 0..8u64 {
            let (r, start, bytes) = (&r, &start, &bytes);
            s.spawn(move || {
                start.wait();
                let off = t * RANGE + 512;
                assert_eq!(r.read(off, 4096), slice(bytes, off, 4096), "thread {t}");
            });
        }
    });
    let (whole, ranged, fetched) = r.counts();
    assert_eq!((whole, ranged), (1, 0), "one download for eight readers");
    assert_eq!(fetched, OBJECT as u64);
    assert_eq!(r.storage.cache_stats().downloads.load(Ordering::Relaxed), 1);
}

#[test]
fn a_data_object_seen_once_is_opened_again_without_a_head() {
    let (store, cfg, bytes) = memory_setup(64 << 20);
    let heads = |r: &Reader| r.reads.heads.load(Ordering::Relaxed);
    // Listed: its length came with the listing.
    let r = reader(&store, &cfg);
    assert_eq!(r.storage.list("p.0").expect("list").len(), 2);
    assert_eq!(r.read(RANGE, 4096), slice(&bytes, RANGE, 4096));
    assert_eq!(heads(&r), 0);
    // Not listed: one HEAD at the first open, none after.
    let r = reader(&store, &cfg);
    r.read(0, 4096);
    r.read(9 * RANGE, 4096);
    assert_eq!(heads(&r), 1);
    // Deleted behind the reader's back after it learned the length: the read fails with
    // NotFound naming the object, never with other bytes.
    store.delete(PATH).expect("delete in the store");
    let f = r.storage.open(PATH, OpenOptions::read()).expect("open");
    let err = f.read_at(3 * RANGE, &mut [0u8; 4096]).expect_err("gone");
    assert_eq!(err.kind(), bough_io::ErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("data_1_main_0"), "{err}");
}

#[test]
fn reading_most_of_an_object_downloads_it_whole() {
    let (store, cfg, bytes) = memory_setup(64 << 20);
    let r = reader(&store, &cfg);
    let got = r.storage.read_file(PATH, 1 << 30).expect("read_file");
    assert_eq!(got, bytes);
    assert_eq!(r.counts(), (1, 0, OBJECT as u64));
}

#[test]
fn ranges_stay_within_the_budget_and_are_dropped_when_the_cache_reopens() {
    let budget = 4 * RANGE;
    let (store, cfg, bytes) = memory_setup(budget);
    let r = reader(&store, &cfg);
    let mut x: u64 = 0x9e37_79b9;
    for _ in 0..200 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Even ranges only: never three in a row, so no whole download.
        let at = ((x % 8) * 2) * RANGE + (x >> 20) % (RANGE - 4096);
        assert_eq!(r.read(at, 4096), slice(&bytes, at, 4096));
        assert!(r.storage.cache_used() <= budget);
    }
    let (whole, ranged, _) = r.counts();
    assert_eq!(whole, 0);
    assert!(
        ranged > 8,
        "ranges were evicted and fetched again: {ranged}"
    );
    assert!(r.storage.cache_stats().evictions.load(Ordering::Relaxed) > 0);
    assert_eq!(r.storage.cache_files(), 4);
    let Reader { storage, cache, .. } = r;
    drop(storage);
    // Ranges were written without a sync: a reopened cache keeps none of them.
    let again = reader_in(&store, &cfg, cache);
    assert_eq!(again.storage.cache_files(), 0);
    assert_eq!(again.read(RANGE, 4096), slice(&bytes, RANGE, 4096));
    assert_eq!(again.counts().1, 1);
}

#[test]
fn deleting_an_object_drops_its_cached_ranges() {
    let (store, cfg, _) = memory_setup(64 << 20);
    let r = reader(&store, &cfg);
    r.read(0, 4096);
    r.read(10 * RANGE, 4096);
    assert_eq!(r.storage.cache_files(), 2);
    let _lease = r.storage.acquire_gc_lease("p.0").expect("GC lease");
    r.storage.delete(PATH).expect("delete");
    assert_eq!(r.storage.cache_files(), 0);
    assert_eq!(r.storage.cache_used(), 0);
}

#[test]
fn range_read_bytes_zero_reads_whole_objects() {
    let (store, mut cfg, bytes) = memory_setup(64 << 20);
    cfg.range_read_bytes = 0;
    let r = reader(&store, &cfg);
    assert_eq!(r.read(7 * RANGE, 4096), slice(&bytes, 7 * RANGE, 4096));
    assert_eq!(r.counts(), (1, 0, OBJECT as u64));
    let bad = CloudConfig {
        range_read_bytes: 100,
        ..common::test_config(1 << 20)
    };
    let err = bad.validate_tier().expect_err("below 4 KiB");
    assert_eq!(err.field, "range_read_bytes");
}

#[test]
fn a_cut_off_range_is_fetched_again_never_returned() {
    let (store, cfg, bytes) = memory_setup(64 << 20);
    let faulty = FaultyObjectStore::new(store.clone());
    faulty.plan(ObjOp::Get, Some("data_"), 0, Fault::ShortRead, 2);
    let faulty: Arc<dyn ObjectStore> = Arc::new(faulty);
    let r = reader(&faulty, &cfg);
    let at = 9 * RANGE + 1;
    assert_eq!(r.read(at, 4096), slice(&bytes, at, 4096));
    // The cut-off bodies came back as successes and were refused: the good one is counted
    // three times as bytes (two halves and a whole), but only one range is cached.
    assert_eq!(r.storage.cache_files(), 1);
    assert_eq!(r.storage.cache_used(), RANGE);
}

#[test]
fn range_reads_over_s3() {
    let Some((store, mut cfg)) = common::s3_store("range_reads_over_s3") else {
        return;
    };
    cfg.range_read_bytes = RANGE;
    let bytes = object_bytes(11);
    upload(&store, &cfg, &bytes);
    let r = reader(&store, &cfg);
    for (i, at) in [3 * RANGE + 17, 14 * RANGE - 2000, 0, OBJECT as u64 - 4096]
        .into_iter()
        .enumerate()
    {
        assert_eq!(
            r.read(at, 4096),
            slice(&bytes, at, 4096),
            "read {i} at {at}"
        );
    }
    let (whole, ranged, fetched) = r.counts();
    assert_eq!(whole, 0);
    assert_eq!(ranged, 4);
    assert_eq!(
        fetched,
        5 * RANGE,
        "one range each, two for the read across ranges 13 and 14"
    );
    bough_object::wipe(store.as_ref()).expect("wipe");
}
