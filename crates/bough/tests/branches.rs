//! Branch operations end to end through the `Store` API: create, read, write, delete,
//! archives, restore, recovery of interrupted operations, concurrency, and the sharp edges
//! of the design notes (name reuse, sibling file ids, case, fencing, creation cost).
//!
//! Test names follow section 11 of the branch design (seed 000).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bough::io::{MemoryStorage, Storage};
use bough::{
    Backend, Branch, BranchOrigin, ErrorKind, ManualClock, Options, PartitionHandle, ScanOptions,
    Store, StoreBuilder, WriteBatch,
};
use bough_names::{BranchName, DataFileName, FileKind, classify};

/// Small data files so they roll often.
const FILE_SIZE: u64 = 64 * 4096;
const T0: u64 = 1_700_000_000_000;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A store on one backend that can be closed and reopened on the same storage.
struct Env {
    backend: Backend,
    dir: tempfile::TempDir,
    mem: MemoryStorage,
    clock: ManualClock,
    store: Store,
}

impl Env {
    fn new(backend: Backend) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let mem = MemoryStorage::new();
        let clock = ManualClock::new(T0);
        let store = Store::open(Self::opts(backend, dir.path(), &mem, &clock)).unwrap();
        Env {
            backend,
            dir,
            mem,
            clock,
            store,
        }
    }

    fn mem() -> Env {
        Env::new(Backend::Memory)
    }

    fn pread() -> Env {
        Env::new(Backend::Pread)
    }

    fn opts(
        backend: Backend,
        dir: &Path,
        mem: &MemoryStorage,
        clock: &ManualClock,
    ) -> StoreBuilder {
        let o = match backend {
            Backend::Memory => Store::builder(Options::in_memory()).memory(mem.clone()),
            b => Store::builder(Options::new(dir).backend(b)),
        };
        o.clock(Arc::new(clock.clone())).map_settings(|o| {
            // These tests pin what each commit writes to the tree's own files (data files,
            // manifest records): no write buffer. The buffered path: write_buffer.rs, log_files.rs
            // and the buffered variants of the model tests.
            o.maintenance_interval_ms(0)
                .data_file_size(FILE_SIZE)
                .write_buffer_bytes(0)
        })
    }

    fn close(&self) {
        self.store.close().unwrap();
    }

    /// Closes the store, runs `f` while it is closed, and opens it again.
    fn reopen_with(&mut self, f: impl FnOnce(&Env)) {
        self.close();
        f(self);
        self.store = Store::open(Self::opts(
            self.backend,
            self.dir.path(),
            &self.mem,
            &self.clock,
        ))
        .unwrap();
    }

    fn reopen(&mut self) {
        self.reopen_with(|_| {});
    }

    fn part(&self, n: u32) -> PartitionHandle {
        self.store.partition("t", n).unwrap()
    }

    /// The file names of a partition directory, read from the file system (Pread) or the
    /// memory namespace.
    fn list(&self, part: &str) -> Vec<String> {
        let mut names: Vec<String> = match self.backend {
            Backend::Memory => self.mem.list(part).unwrap(),
            _ => match std::fs::read_dir(self.dir.path().join(part)) {
                Ok(rd) => rd
                    .map(|e| e.unwrap().file_name().into_string().unwrap())
                    .collect(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(e) => panic!("{e}"),
            },
        };
        names.sort();
        names
    }

    fn data_files(&self, part: &str) -> Vec<DataFileName> {
        self.list(part)
            .iter()
            .filter_map(|n| match classify(n) {
                FileKind::Data(d) => Some(d),
                _ => None,
            })
            .collect()
    }

    fn path(&self, rel: &str) -> std::path::PathBuf {
        assert_ne!(self.backend, Backend::Memory);
        self.dir.path().join(rel)
    }
}

fn key(prefix: &str, i: usize) -> Vec<u8> {
    format!("{prefix}{i:06}").into_bytes()
}

/// A self-describing value of about 200 bytes (pages fill fast, files roll).
fn val(tag: &str, i: usize) -> Vec<u8> {
    let mut v = format!("{tag}:{i}:").into_bytes();
    v.resize(200, b'.');
    v
}

/// Writes keys `prefix<i>` = `val(tag, i)` for `range`, in batches of `batch`, and records
/// them in `model`.
fn put_range(
    b: &Branch,
    model: &mut Model,
    prefix: &str,
    tag: &str,
    range: std::ops::Range<usize>,
    batch: usize,
) {
    let mut wb = WriteBatch::new();
    for i in range {
        wb.put(key(prefix, i), val(tag, i));
        model.insert(key(prefix, i), val(tag, i));
        if wb.len() >= batch {
            b.write_blocking(std::mem::take(&mut wb)).unwrap();
        }
    }
    if !wb.is_empty() {
        b.write_blocking(wb).unwrap();
    }
}

fn del_range(b: &Branch, model: &mut Model, prefix: &str, range: std::ops::Range<usize>) {
    let mut wb = WriteBatch::new();
    for i in range {
        wb.delete(key(prefix, i));
        model.remove(&key(prefix, i));
    }
    b.write_blocking(wb).unwrap();
}

fn scan_all(b: &Branch) -> Model {
    let page = b.scan_blocking(&ScanOptions::default()).unwrap();
    assert!(page.next.is_none());
    page.entries
        .into_iter()
        .map(|kv| (kv.key, kv.value.value))
        .collect()
}

/// The branch holds exactly `model`: by scan, by point reads and by floor.
#[track_caller]
fn assert_matches(b: &Branch, model: &Model) {
    let got = scan_all(b);
    if got != *model {
        let missing: Vec<_> = model
            .keys()
            .filter(|k| !got.contains_key(*k))
            .take(5)
            .collect();
        let extra: Vec<_> = got
            .keys()
            .filter(|k| !model.contains_key(*k))
            .take(5)
            .collect();
        panic!(
            "{}: scan differs from the model ({} vs {} keys); missing {:?}, extra {:?}",
            b.label(),
            got.len(),
            model.len(),
            missing
                .iter()
                .map(|k| String::from_utf8_lossy(k))
                .collect::<Vec<_>>(),
            extra
                .iter()
                .map(|k| String::from_utf8_lossy(k))
                .collect::<Vec<_>>()
        );
    }
    // Point reads on a sample (every key for small models).
    let step = (model.len() / 200).max(1);
    for (k, v) in model.iter().step_by(step) {
        assert_eq!(
            b.get_blocking(k).unwrap().map(|v| v.value).as_ref(),
            Some(v),
            "{}: get {}",
            b.label(),
            String::from_utf8_lossy(k)
        );
    }
}

fn names(p: &PartitionHandle) -> Vec<String> {
    p.branches().unwrap()
}

fn bn(s: &str) -> BranchName {
    BranchName::new(s).unwrap()
}

// ---------------------------------------------------------------------------------------
// Branch operations
// ---------------------------------------------------------------------------------------

#[test]
fn create_branch_from_main() {
    for backend in [Backend::Memory, Backend::Pread] {
        let mut env = Env::new(backend);
        let p = env.part(0);
        let main = p.branch("main").unwrap();
        let mut m = Model::new();
        put_range(&main, &mut m, "k", "main", 0..500, 100);
        let data_before = env.data_files("t.0");

        let feature = p.create_branch("feature", "main").unwrap();
        assert_eq!(feature.label(), "t.0@feature");
        assert_eq!(names(&p), ["feature", "main"]);
        assert_matches(&feature, &m);
        assert_matches(&main, &m);

        // The branch is one manifest and one CURRENT_TERM; no data file is copied.
        let files = env.list("t.0");
        assert!(
            files.contains(&"manifest_feature_0".to_string()),
            "{files:?}"
        );
        assert!(
            files.contains(&"CURRENT_TERM.feature".to_string()),
            "{files:?}"
        );
        let data_after = env.data_files("t.0");
        assert!(
            data_after.iter().all(|d| d.branch.is_main()),
            "creation wrote data files of the new branch: {data_after:?}"
        );
        // At most the parent's checkpoint added a file; nothing was copied.
        assert!(data_after.len() <= data_before.len() + 1);

        let info = p.describe("feature").unwrap();
        assert_eq!(info.term, 0);
        assert_eq!(info.origin.unwrap().parent, Some((bn("main"), 0)));

        // Both are writable and independent.
        let mut f = m.clone();
        put_range(&feature, &mut f, "f", "feature", 0..50, 50);
        put_range(&main, &mut m, "m", "main", 0..50, 50);
        assert_matches(&feature, &f);
        assert_matches(&main, &m);

        env.reopen();
        let p = env.part(0);
        assert_eq!(names(&p), ["feature", "main"]);
        assert_matches(&p.branch("feature").unwrap(), &f);
        assert_matches(&p.branch("main").unwrap(), &m);
    }
}

#[test]
fn create_branch_from_empty_main() {
    let env = Env::mem();
    let p = env.part(0);
    let feature = p.create_branch("feature", "main").unwrap();
    assert_matches(&feature, &Model::new());
    let mut f = Model::new();
    put_range(&feature, &mut f, "f", "f", 0..100, 100);
    assert_matches(&feature, &f);
    assert_matches(&p.branch("main").unwrap(), &Model::new());
}

#[test]
fn create_branch_from_another_branch() {
    let mut env = Env::mem();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "a", "main", 0..300, 100);
    let feature = p.create_branch("feature", "main").unwrap();
    let mut f = m.clone();
    put_range(&feature, &mut f, "b", "feature", 0..300, 100);
    del_range(&feature, &mut f, "a", 0..10);

    let hotfix = p.create_branch("hotfix", "feature").unwrap();
    let mut h = f.clone();
    assert_matches(&hotfix, &h);
    // Later writes of the parent and grandparent are not seen.
    put_range(&feature, &mut f, "c", "feature-late", 0..50, 50);
    put_range(&main, &mut m, "c", "main-late", 0..50, 50);
    assert_matches(&hotfix, &h);
    put_range(&hotfix, &mut h, "d", "hotfix", 0..50, 50);
    assert_matches(&hotfix, &h);
    assert_matches(&feature, &f);
    assert_matches(&main, &m);

    let info = p.describe("hotfix").unwrap();
    assert_eq!(info.origin.unwrap().parent, Some((bn("feature"), 0)));
    assert_eq!(names(&p), ["feature", "hotfix", "main"]);

    env.reopen();
    let p = env.part(0);
    assert_matches(&p.branch("hotfix").unwrap(), &h);
    assert_matches(&p.branch("feature").unwrap(), &f);
    assert_matches(&p.branch("main").unwrap(), &m);
}

#[test]
fn write_to_branch_file_id_allocation_is_per_branch() {
    let mut env = Env::pread();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "a", "main", 0..3000, 300);
    let feature = p.create_branch("feature", "main").unwrap();
    let at_fork = env.data_files("t.0");
    assert!(at_fork.iter().all(|d| d.branch.is_main() && d.term == 0));
    assert!(
        at_fork.len() >= 3,
        "main should span several files: {at_fork:?}"
    );
    // The parent's high-water mark at the fork, its open file included.
    let fork_max = at_fork.iter().map(|d| d.file_id).max().unwrap();

    let mut f = m.clone();
    put_range(&feature, &mut f, "b", "feature", 0..3000, 300);
    put_range(&main, &mut m, "c", "main", 0..3000, 300);

    let files = env.data_files("t.0");
    let own = |b: &str| -> Vec<u64> {
        let mut ids: Vec<u64> = files
            .iter()
            .filter(|d| d.branch.as_str() == b)
            .map(|d| d.file_id)
            .collect();
        ids.sort_unstable();
        ids
    };
    let feature_ids = own("feature");
    let main_new: Vec<u64> = own("main").into_iter().filter(|&i| i > fork_max).collect();
    assert!(feature_ids.len() >= 3, "{files:?}");
    // New files are data_<id>_feature_0, ids above everything the parent allocated at the
    // fork and allocated consecutively by the branch's own counter.
    assert!(
        files
            .iter()
            .filter(|d| d.branch.as_str() == "feature")
            .all(|d| d.term == 0)
    );
    assert_eq!(feature_ids[0], fork_max + 1, "{files:?}");
    assert!(
        feature_ids.windows(2).all(|w| w[1] == w[0] + 1),
        "{feature_ids:?}"
    );
    for id in &feature_ids {
        let name = format!("data_{id}_feature_0");
        assert!(env.path(&format!("t.0/{name}")).exists(), "{name}");
    }
    // The parent's counter is independent: it hands out the same ids to its own files.
    assert_eq!(main_new.first(), Some(&(fork_max + 1)), "{files:?}");
    let common: Vec<u64> = feature_ids
        .iter()
        .filter(|i| main_new.contains(i))
        .copied()
        .collect();
    assert!(!common.is_empty());
    for id in common {
        assert!(env.path(&format!("t.0/data_{id}_main_0")).exists());
        assert!(env.path(&format!("t.0/data_{id}_feature_0")).exists());
    }
    assert_matches(&feature, &f);
    assert_matches(&main, &m);
    drop((feature, main));
    env.reopen();
    let p = env.part(0);
    assert_matches(&p.branch("feature").unwrap(), &f);
    assert_matches(&p.branch("main").unwrap(), &m);
}

#[test]
fn read_from_branch_sees_inherited_and_own_data() {
    for backend in [Backend::Memory, Backend::Pread] {
        let mut env = Env::new(backend);
        let p = env.part(0);
        let main = p.branch("main").unwrap();
        let mut m = Model::new();
        put_range(&main, &mut m, "a", "main", 0..1000, 250);
        // An inherited overflow value.
        let big: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
        let mut wb = WriteBatch::new();
        wb.put("big", big.clone());
        main.write_blocking(wb).unwrap();
        m.insert(b"big".to_vec(), big.clone());

        let feature = p.create_branch("feature", "main").unwrap();
        let mut f = m.clone();
        put_range(&feature, &mut f, "b", "feature", 0..500, 250);
        put_range(&feature, &mut f, "a", "overwritten", 0..100, 100);
        del_range(&feature, &mut f, "a", 100..200);
        // The parent moves on; the branch does not see it.
        put_range(&main, &mut m, "a", "main2", 900..1000, 100);
        put_range(&main, &mut m, "c", "main", 0..100, 100);

        assert_matches(&feature, &f);
        assert_matches(&main, &m);
        assert_eq!(feature.get_blocking(b"big").unwrap().unwrap().value, big);
        assert_eq!(
            feature.get_blocking(key("a", 5)).unwrap().unwrap().value,
            val("overwritten", 5)
        );
        assert_eq!(
            main.get_blocking(key("a", 5)).unwrap().unwrap().value,
            val("main", 5)
        );
        assert!(feature.get_blocking(key("a", 150)).unwrap().is_none());
        assert!(main.get_blocking(key("a", 150)).unwrap().is_some());
        // floor walks over inherited and own entries alike.
        let fl = feature.floor_blocking(key("a", 150)).unwrap().unwrap();
        assert_eq!(fl.key, key("a", 99));
        let fl = feature.floor_blocking(b"b000499z").unwrap().unwrap();
        assert_eq!(fl.key, key("b", 499));
        assert!(feature.get_blocking(key("c", 0)).unwrap().is_none());
        // A bounded scan across the inherited / own boundary.
        let page = feature
            .scan_blocking(&ScanOptions {
                begin: std::ops::Bound::Included(key("a", 995)),
                limit: 10,
                ..Default::default()
            })
            .unwrap();
        let keys: Vec<Vec<u8>> = page.entries.iter().map(|e| e.key.clone()).collect();
        let mut want: Vec<Vec<u8>> = (995..1000).map(|i| key("a", i)).collect();
        want.extend((0..5).map(|i| key("b", i)));
        assert_eq!(keys, want);

        drop((feature, main));
        env.reopen();
        let p = env.part(0);
        assert_matches(&p.branch("feature").unwrap(), &f);
        assert_matches(&p.branch("main").unwrap(), &m);
    }
}

#[test]
fn delete_branch_removes_manifests_keeps_data_until_gc() {
    let mut env = Env::pread();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "a", "main", 0..1000, 250);
    let feature = p.create_branch("feature", "main").unwrap();
    let mut f = m.clone();
    put_range(&feature, &mut f, "b", "feature", 0..2000, 250);
    let archive = feature.archive().unwrap();
    let before = env.list("t.0");
    let feature_data: Vec<String> = before
        .iter()
        .filter(|n| n.starts_with("data_") && n.ends_with("_feature_0"))
        .cloned()
        .collect();
    assert!(feature_data.len() >= 2, "{before:?}");
    assert!(before.contains(&archive.to_string()));

    p.delete_branch("feature").unwrap();
    let after = env.list("t.0");
    // Manifests and archives are gone; data files stay for GC.
    assert!(
        !after.iter().any(|n| n.starts_with("manifest_feature_")),
        "{after:?}"
    );
    for d in &feature_data {
        assert!(after.contains(d), "{d} was deleted before GC: {after:?}");
    }
    assert_eq!(names(&p), ["main"]);
    assert_eq!(p.branch("feature").unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(
        p.describe("feature").unwrap_err().kind(),
        ErrorKind::NotFound
    );
    // A handle still held reports NotFound for reads and writes.
    assert_eq!(
        feature.get_blocking(key("b", 0)).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    let mut wb = WriteBatch::new();
    wb.put("x", "y");
    assert_eq!(
        feature.write_blocking(wb).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        p.delete_branch("feature").unwrap_err().kind(),
        ErrorKind::NotFound
    );
    drop(feature);

    let report = p.gc().unwrap();
    let deleted: BTreeSet<String> = report.deleted.iter().map(|(n, _)| n.clone()).collect();
    for d in &feature_data {
        assert!(deleted.contains(d), "{d} not collected: {report:?}");
    }
    assert!(
        deleted.iter().all(|n| n.ends_with("_feature_0")),
        "GC deleted a file of another branch: {deleted:?}"
    );
    let after_gc = env.list("t.0");
    assert!(
        !after_gc.iter().any(|n| n.ends_with("_feature_0")),
        "{after_gc:?}"
    );
    assert_matches(&main, &m);
    drop(main);
    env.reopen();
    let p = env.part(0);
    assert_eq!(p.branch("feature").unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(names(&p), ["main"]);
    assert_matches(&p.branch("main").unwrap(), &m);
}

#[test]
fn delete_branch_while_parent_still_exists() {
    for backend in [Backend::Memory, Backend::Pread] {
        let mut env = Env::new(backend);
        let p = env.part(0);
        let main = p.branch("main").unwrap();
        let mut m = Model::new();
        put_range(&main, &mut m, "a", "main", 0..1500, 300);
        let feature = p.create_branch("feature", "main").unwrap();
        let mut f = m.clone();
        put_range(&feature, &mut f, "a", "feature", 0..1500, 300);
        put_range(&main, &mut m, "b", "main", 0..500, 250);
        drop(feature);
        p.delete_branch("feature").unwrap();
        assert_matches(&main, &m);
        put_range(&main, &mut m, "c", "main", 0..500, 250);
        let report = p.gc().unwrap();
        assert!(!report.deleted.is_empty());
        assert!(
            report
                .deleted
                .iter()
                .all(|(n, _)| n.ends_with("_feature_0")),
            "{report:?}"
        );
        assert_matches(&main, &m);
        // The parent can branch again, also under the deleted name.
        let again = p.create_branch("feature", "main").unwrap();
        assert_matches(&again, &m);
        drop((again, main));
        env.reopen();
        let p = env.part(0);
        assert_matches(&p.branch("main").unwrap(), &m);
        assert_matches(&p.branch("feature").unwrap(), &m);
    }
}

#[test]
fn deleting_a_parent_leaves_children_intact() {
    for backend in [Backend::Memory, Backend::Pread] {
        let mut env = Env::new(backend);
        let p = env.part(0);
        let main = p.branch("main").unwrap();
        let mut m = Model::new();
        put_range(&main, &mut m, "a", "main", 0..1000, 250);
        let feature = p.create_branch("feature", "main").unwrap();
        let mut f = m.clone();
        put_range(&feature, &mut f, "b", "feature", 0..2000, 250);
        let hotfix = p.create_branch("hotfix", "feature").unwrap();
        let mut h = f.clone();
        put_range(&hotfix, &mut h, "c", "hotfix", 0..500, 250);
        put_range(&feature, &mut f, "b", "feature-late", 0..2000, 250);
        drop(feature);

        p.delete_branch("feature").unwrap();
        assert_eq!(names(&p), ["hotfix", "main"]);
        assert_matches(&hotfix, &h);
        p.gc().unwrap();
        assert_matches(&hotfix, &h);
        assert_eq!(
            p.describe("hotfix").unwrap().origin.unwrap().parent,
            Some((bn("feature"), 0))
        );
        put_range(&hotfix, &mut h, "d", "hotfix", 0..500, 250);
        drop((hotfix, main));
        env.reopen();
        let p = env.part(0);
        let hotfix = p.branch("hotfix").unwrap();
        assert_matches(&hotfix, &h);
        assert_matches(&p.branch("main").unwrap(), &m);
        p.gc().unwrap();
        assert_matches(&hotfix, &h);
    }
}

#[test]
fn main_cannot_be_deleted() {
    let env = Env::mem();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "a", "main", 0..100, 100);
    let e = p.delete_branch("main").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("t.0@main"), "{e}");
    assert_eq!(
        env.store
            .table("t")
            .unwrap()
            .delete_branch("main")
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(names(&p), ["main"]);
    assert_matches(&main, &m);
    put_range(&main, &mut m, "b", "main", 0..100, 100);
    assert_matches(&main, &m);
}

#[test]
fn unknown_branch_is_not_found() {
    let env = Env::pread();
    let p = env.part(0);
    p.branch("main").unwrap();
    let before = env.list("t.0");

    let nf = |e: bough::Error| {
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
        assert!(e.to_string().contains("t.0@nosuch"), "{e}");
    };
    nf(p.branch("nosuch").unwrap_err());
    nf(p.describe("nosuch").unwrap_err());
    nf(p.delete_branch("nosuch").unwrap_err());
    nf(p.open_new_term("nosuch").unwrap_err());
    nf(p.create_branch("child", "nosuch").unwrap_err());
    assert_eq!(names(&p), ["main"]);
    assert_eq!(env.list("t.0"), before, "a failed lookup created files");
    // A deleted branch is as unknown as one that never existed.
    p.create_branch("gone", "main").unwrap();
    p.delete_branch("gone").unwrap();
    assert_eq!(p.branch("gone").unwrap_err().kind(), ErrorKind::NotFound);
    assert_eq!(
        p.create_branch("x", "gone").unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(names(&p), ["main"]);
}

/// Opening an unknown branch of a partition that does not exist must not create the
/// partition: a stray directory would become part of every global operation on the table.
#[test]
fn regression_unknown_branch_on_new_partition_creates_nothing() {
    let env = Env::pread();
    env.part(0).branch("main").unwrap();
    let e = env.part(7).branch("nosuch").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(e.to_string().contains("t.7@nosuch"), "{e}");
    assert!(env.list("t.7").is_empty(), "{:?}", env.list("t.7"));
    assert_eq!(env.store.table("t").unwrap().partitions().unwrap(), [0]);
    // So a global create on the table still succeeds.
    env.store
        .table("t")
        .unwrap()
        .create_branch("feature", "main")
        .unwrap();
}

// ---------------------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------------------

#[test]
fn parent_writes_do_not_affect_newly_created_branch() {
    let env = Env::mem();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "a", "v1", 0..1000, 200);
    let feature = p.create_branch("feature", "main").unwrap();
    let f = m.clone();
    let view = feature.read_view().unwrap();
    // Overwrites, deletes, inserts, compaction, truncation of the parent.
    put_range(&main, &mut m, "a", "v2", 0..1000, 200);
    del_range(&main, &mut m, "a", 0..300);
    put_range(&main, &mut m, "b", "v2", 0..1000, 200);
    main.compact_now().unwrap();
    main.truncate_blocking(key("a", 500)).unwrap();
    m.retain(|k, _| k.as_slice() < key("a", 500).as_slice());
    assert_matches(&main, &m);
    assert_matches(&feature, &f);
    assert_eq!(view.get(key("a", 0)).unwrap().unwrap().value, val("v1", 0));
    // ... and the parent's GC takes nothing the branch needs.
    p.gc().unwrap();
    assert_matches(&feature, &f);
    // A new term of the parent does not reach the branch either.
    let main = p.open_new_term("main").unwrap();
    put_range(&main, &mut m, "c", "v3", 0..100, 100);
    assert_matches(&feature, &f);
}

#[test]
fn multiple_branches_write_simultaneously() {
    for backend in [Backend::Memory, Backend::Pread] {
        let mut env = Env::new(backend);
        let p = env.part(0);
        let main = p.branch("main").unwrap();
        let mut base = Model::new();
        put_range(&main, &mut base, "base", "main", 0..500, 250);
        let names_: Vec<String> = (0..4).map(|i| format!("br{i}")).collect();
        let branches: Vec<Branch> = names_
            .iter()
            .map(|n| p.create_branch(n, "main").unwrap())
            .collect();
        let mut writers: Vec<(Branch, String)> = branches
            .iter()
            .cloned()
            .zip(names_.iter().cloned())
            .collect();
        writers.push((main.clone(), "main".to_string()));
        let start = Arc::new(std::sync::Barrier::new(writers.len()));
        let handles: Vec<_> = writers
            .into_iter()
            .map(|(b, name)| {
                let start = start.clone();
                let base = base.clone();
                std::thread::spawn(move || {
                    let mut model = base;
                    start.wait();
                    for round in 0..40 {
                        let mut wb = WriteBatch::new();
                        for j in 0..10 {
                            let i = round * 10 + j;
                            // Shared keys (each branch its own value) and own keys.
                            wb.put(key("shared", i), val(&name, i));
                            model.insert(key("shared", i), val(&name, i));
                            wb.put(key(&name, i), val(&name, i));
                            model.insert(key(&name, i), val(&name, i));
                        }
                        if round % 10 == 9 {
                            wb.delete(key("base", round));
                            model.remove(&key("base", round));
                        }
                        b.write_blocking(wb).unwrap();
                    }
                    (name, model)
                })
            })
            .collect();
        let models: BTreeMap<String, Model> =
            handles.into_iter().map(|h| h.join().unwrap()).collect();
        for (name, model) in &models {
            assert_matches(&p.branch(name).unwrap(), model);
        }
        drop((branches, main));
        env.reopen();
        let p = env.part(0);
        for (name, model) in &models {
            assert_matches(&p.branch(name).unwrap(), model);
        }
    }
}

#[test]
fn branch_deletion_does_not_block_other_branches() {
    let env = Env::mem();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let mut base = Model::new();
    put_range(&main, &mut base, "base", "main", 0..500, 250);
    let victim = p.create_branch("victim", "main").unwrap();
    let mut v = base.clone();
    put_range(&victim, &mut v, "v", "victim", 0..500, 250);
    let child = p.create_branch("child", "victim").unwrap();
    let child_base = v.clone();
    let others: Vec<Branch> = (0..3)
        .map(|i| p.create_branch(&format!("other{i}"), "main").unwrap())
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(AtomicU64::new(0));
    // Writers on the other branches and on the child of the victim, readers on them.
    let mut handles = Vec::new();
    for b in others.iter().cloned().chain([child.clone()]) {
        let stop = stop.clone();
        let progress = progress.clone();
        let start_model = if b.label().ends_with("@child") {
            child_base.clone()
        } else {
            base.clone()
        };
        handles.push(std::thread::spawn(move || {
            let mut model = start_model;
            let mut i = 0;
            while !stop.load(Ordering::Acquire) {
                let mut wb = WriteBatch::new();
                wb.put(key("w", i), val("w", i));
                model.insert(key("w", i), val("w", i));
                b.write_blocking(wb).unwrap();
                assert_eq!(
                    b.get_blocking(key("w", i)).unwrap().unwrap().value,
                    val("w", i)
                );
                assert!(b.get_blocking(key("base", 7)).unwrap().is_some());
                progress.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
            (b, model)
        }));
    }
    // The victim is busy too until it is deleted.
    let victim_writer = {
        let victim = victim.clone();
        std::thread::spawn(move || {
            let mut i = 0;
            loop {
                let mut wb = WriteBatch::new();
                wb.put(key("late", i), val("late", i));
                if let Err(e) = victim.write_blocking(wb) {
                    // A write queued behind the deletion is refused, never applied.
                    assert!(
                        matches!(e.kind(), ErrorKind::NotFound | ErrorKind::Fenced),
                        "{e}"
                    );
                    return i;
                }
                i += 1;
            }
        })
    };
    let wait_progress = |n: u64| {
        let t = Instant::now();
        while progress.load(Ordering::Relaxed) < n {
            assert!(t.elapsed() < Duration::from_secs(20), "writers stalled");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    wait_progress(50);
    let t = Instant::now();
    p.delete_branch("victim").unwrap();
    let took = t.elapsed();
    let at_delete = progress.load(Ordering::Relaxed);
    // Others keep going after the deletion, and during a GC.
    wait_progress(at_delete + 50);
    p.gc().unwrap();
    wait_progress(at_delete + 100);
    stop.store(true, Ordering::Release);
    let late = victim_writer.join().unwrap();
    eprintln!("deletion took {took:?}; the victim wrote {late} batches");
    for h in handles {
        let (b, model) = h.join().unwrap();
        assert_matches(&b, &model);
    }
    assert_eq!(names(&p), ["child", "main", "other0", "other1", "other2"]);
    assert_eq!(
        victim.get_blocking(b"x").unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

/// A deletion stuck in I/O (its `CURRENT_TERM` sync stalls) blocks no reader: other
/// branches, the deleted branch's child, listing and describing all answer meanwhile.
#[test]
fn branch_deletion_stalled_in_io_does_not_block_readers() {
    let faults = bough::io::FaultInjector::new();
    let store = Store::builder(
        Options::in_memory()
            .maintenance_interval_ms(0)
            .data_file_size(FILE_SIZE),
    )
    .memory(MemoryStorage::with_faults(faults.clone()))
    .open()
    .unwrap();
    let p = store.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "a", "main", 0..300, 100);
    let victim = p.create_branch("victim", "main").unwrap();
    let mut v = m.clone();
    put_range(&victim, &mut v, "v", "victim", 0..300, 100);
    let child = p.create_branch("child", "victim").unwrap();
    let other = p.create_branch("other", "main").unwrap();
    drop(victim);

    faults.stall_sync();
    let deletion = {
        let p = p.clone();
        std::thread::spawn(move || p.delete_branch("victim"))
    };
    assert!(
        faults.wait_for_stalled_syncs(1, Duration::from_secs(10)),
        "the deletion never reached a sync"
    );
    let t = Instant::now();
    assert_matches(&other, &m);
    assert_matches(&child, &v);
    assert_matches(&main, &m);
    assert!(p.describe("other").is_ok());
    assert!(p.branches().is_ok());
    let view = other.read_view().unwrap();
    assert_eq!(
        view.get(key("a", 1)).unwrap().unwrap().value,
        val("main", 1)
    );
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "readers waited for the deletion"
    );
    assert!(!deletion.is_finished());
    faults.release_sync();
    deletion.join().unwrap().unwrap();
    assert_eq!(names(&p), ["child", "main", "other"]);
    assert_matches(&child, &v);
}

/// Writers keep writing to the parent from threads while branches are created: each branch
/// holds exactly a prefix of each writer's batches, including every batch acknowledged
/// before `create_branch` was called, and nothing written after it.
#[test]
fn create_branch_while_parent_is_busy() {
    const WRITERS: usize = 3;
    const PER_BATCH: usize = 3;
    let env = Env::mem();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Per writer: batches submitted (incremented before the call) and acknowledged.
    let submitted: Arc<Vec<AtomicU64>> =
        Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (main, stop, submitted, acked) =
                (main.clone(), stop.clone(), submitted.clone(), acked.clone());
            std::thread::spawn(move || {
                let mut seq = 0u64;
                while !stop.load(Ordering::Acquire) {
                    let mut wb = WriteBatch::new();
                    for j in 0..PER_BATCH {
                        let k = format!("w{w}-{seq:08}-{j}");
                        wb.put(k.clone(), k);
                    }
                    submitted[w].store(seq + 1, Ordering::SeqCst);
                    main.write_blocking(wb).unwrap();
                    acked[w].store(seq + 1, Ordering::SeqCst);
                    seq += 1;
                }
            })
        })
        .collect();
    let load =
        |v: &Vec<AtomicU64>| -> Vec<u64> { v.iter().map(|a| a.load(Ordering::SeqCst)).collect() };
    let wait_acked = |n: u64| {
        let t = Instant::now();
        while load(&acked).iter().any(|&a| a < n) {
            assert!(t.elapsed() < Duration::from_secs(20), "writers stalled");
            std::thread::sleep(Duration::from_millis(1));
        }
    };

    // Checks a branch's contents; returns per-writer batch counts.
    let check = |b: &Branch, lower: &[u64], upper: &[u64]| -> Vec<u64> {
        let mut per: Vec<BTreeMap<u64, usize>> = vec![BTreeMap::new(); WRITERS];
        for (k, v) in scan_all(b) {
            assert_eq!(k, v, "{}: value is not self-describing", b.label());
            let s = String::from_utf8(k).unwrap();
            let mut parts = s[1..].split('-');
            let w: usize = parts.next().unwrap().parse().unwrap();
            let seq: u64 = parts.next().unwrap().parse().unwrap();
            *per[w].entry(seq).or_default() += 1;
        }
        let mut counts = Vec::new();
        for (w, seqs) in per.iter().enumerate() {
            let n = seqs.len() as u64;
            // A prefix: batches 0..n, each complete (atomic).
            assert!(
                seqs.keys().copied().eq(0..n),
                "{}: writer {w} batches are not a prefix: {:?}",
                b.label(),
                seqs.keys().collect::<Vec<_>>()
            );
            assert!(
                seqs.values().all(|&c| c == PER_BATCH),
                "{}: torn batch",
                b.label()
            );
            assert!(
                n >= lower[w],
                "{}: writer {w}: {n} batches, but {} were acknowledged before the fork",
                b.label(),
                lower[w]
            );
            assert!(
                n <= upper[w],
                "{}: writer {w}: a batch from the future",
                b.label()
            );
            counts.push(n);
        }
        counts
    };

    wait_acked(20);
    let mut snaps = Vec::new();
    for round in 0..6 {
        let before = load(&acked);
        let name = format!("snap{round}");
        let b = p.create_branch(&name, "main").unwrap();
        let after = load(&submitted);
        let counts = check(&b, &before, &after);
        snaps.push((b, counts));
        let next = before.iter().max().unwrap() + 10;
        wait_acked(next);
    }
    stop.store(true, Ordering::Release);
    for h in handles {
        h.join().unwrap();
    }
    // The snapshots did not move while the parent kept writing.
    for (b, counts) in &snaps {
        assert_eq!(&check(b, counts, counts), counts);
    }
    let total = load(&acked);
    assert_eq!(check(&main, &total, &total), total);
}

// ---------------------------------------------------------------------------------------
// Failure recovery
// ---------------------------------------------------------------------------------------

#[test]
fn partial_branch_creation_manifest_written_current_term_missing() {
    let mut env = Env::pread();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "a", "main", 0..500, 250);
    let feature = p.create_branch("feature", "main").unwrap();
    let mut f = m.clone();
    put_range(&feature, &mut f, "b", "feature", 0..500, 250);
    p.create_branch("fresh", "main").unwrap();
    drop((feature, main));
    // A crash between the manifest and CURRENT_TERM of the creation: the manifest is on
    // disk, CURRENT_TERM is not.
    env.reopen_with(|env| {
        std::fs::remove_file(env.path("t.0/CURRENT_TERM.feature")).unwrap();
        std::fs::remove_file(env.path("t.0/CURRENT_TERM.fresh")).unwrap();
    });
    let p = env.part(0);
    assert_eq!(names(&p), ["feature", "fresh", "main"]);
    assert!(env.path("t.0/CURRENT_TERM.feature").exists());
    let feature = p.branch("feature").unwrap();
    assert_matches(&feature, &f);
    assert_matches(&p.branch("fresh").unwrap(), &m);
    assert_eq!(p.describe("feature").unwrap().term, 0);
    put_range(&feature, &mut f, "c", "feature", 0..100, 100);
    assert_matches(&feature, &f);
    p.gc().unwrap();
    assert_matches(&feature, &f);
    drop(feature);
    env.reopen();
    assert_matches(&env.part(0).branch("feature").unwrap(), &f);
}

/// The same interruption when the name was used before: `CURRENT_TERM` still holds the old
/// incarnation's tombstone while the new manifest is on disk.
#[test]
fn partial_recreation_over_a_tombstone_is_completed() {
    let mut env = Env::pread();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "a", "main", 0..300, 100);
    p.create_branch("feature", "main").unwrap();
    p.delete_branch("feature").unwrap();
    let tombstone = std::fs::read(env.path("t.0/CURRENT_TERM.feature")).unwrap();
    let feature = p.create_branch("feature", "main").unwrap();
    let mut f = m.clone();
    put_range(&feature, &mut f, "b", "feature", 0..300, 100);
    drop((feature, main));
    env.reopen_with(|env| {
        std::fs::write(env.path("t.0/CURRENT_TERM.feature"), &tombstone).unwrap();
    });
    let p = env.part(0);
    assert_eq!(names(&p), ["feature", "main"]);
    assert_eq!(p.describe("feature").unwrap().term, 1);
    assert_matches(&p.branch("feature").unwrap(), &f);
}

fn flip_bytes(path: &Path, at: u64, n: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    for b in &mut bytes[at as usize..at as usize + n] {
        *b ^= 0xA5;
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn corrupted_manifest_in_one_branch_does_not_affect_others() {
    let mut env = Env::pread();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "a", "main", 0..500, 250);
    let mut models = BTreeMap::new();
    for name in ["bad", "good"] {
        let b = p.create_branch(name, "main").unwrap();
        let mut model = m.clone();
        put_range(&b, &mut model, name, name, 0..500, 250);
        models.insert(name, model);
    }
    drop(main);
    env.reopen_with(|env| flip_bytes(&env.path("t.0/manifest_bad_0"), 16, 8));
    let p = env.part(0);
    let e = p.branch("bad").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert!(e.to_string().contains("manifest_bad_0"), "{e}");
    assert!(e.to_string().contains("t.0@bad"), "{e}");
    let e = p.describe("bad").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    // Everything else works: reads, writes, new branches, reopen.
    let main = p.branch("main").unwrap();
    let good = p.branch("good").unwrap();
    assert_matches(&main, &m);
    let g = models.get_mut("good").unwrap();
    assert_matches(&good, g);
    put_range(&good, g, "more", "good", 0..100, 100);
    put_range(&main, &mut m, "more", "main", 0..100, 100);
    let c = p.create_branch("fresh", "good").unwrap();
    assert_matches(&c, g);
    assert_eq!(names(&p), ["bad", "fresh", "good", "main"]);
    // GC cannot prove what the damaged manifest references: it refuses and deletes nothing.
    let files = env.list("t.0");
    let e = p.gc().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert!(e.to_string().contains("manifest_bad_0"), "{e}");
    assert_eq!(env.list("t.0"), files);
    assert_matches(&good, g);
    assert_matches(&main, &m);
}

/// A branch whose manifest is damaged can still be deleted (its head cannot be opened, so
/// no writer runs); afterwards GC works again for the partition.
#[test]
fn regression_corrupted_branch_can_be_deleted() {
    let mut env = Env::pread();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "a", "main", 0..500, 250);
    let bad = p.create_branch("bad", "main").unwrap();
    put_range(&bad, &mut Model::new(), "b", "bad", 0..1000, 250);
    drop((bad, main));
    env.reopen_with(|env| flip_bytes(&env.path("t.0/manifest_bad_0"), 16, 8));
    let p = env.part(0);
    assert_eq!(p.branch("bad").unwrap_err().kind(), ErrorKind::Corruption);
    p.delete_branch("bad").unwrap();
    assert_eq!(names(&p), ["main"]);
    let report = p.gc().unwrap();
    assert!(report.deleted.iter().all(|(n, _)| n.ends_with("_bad_0")));
    assert!(!env.list("t.0").iter().any(|n| n.ends_with("_bad_0")));
    assert_matches(&p.branch("main").unwrap(), &m);
}

#[test]
fn missing_current_term_file_handling() {
    let mut env = Env::pread();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "a", "main", 0..500, 250);
    let lost = p.create_branch("lost", "main").unwrap();
    put_range(&lost, &mut Model::new(), "l", "lost", 0..500, 250);
    drop((lost, main));
    env.reopen_with(|env| {
        // main loses CURRENT_TERM (its manifest is there): recovered from the manifest.
        std::fs::remove_file(env.path("t.0/CURRENT_TERM.main")).unwrap();
        // `lost` loses both: it does not exist any more.
        std::fs::remove_file(env.path("t.0/CURRENT_TERM.lost")).unwrap();
        std::fs::remove_file(env.path("t.0/manifest_lost_0")).unwrap();
    });
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    assert_matches(&main, &m);
    assert!(env.path("t.0/CURRENT_TERM.main").exists());
    assert_eq!(p.describe("main").unwrap().term, 0);
    let e = p.branch("lost").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert_eq!(names(&p), ["main"]);
    assert_eq!(p.branch("ghost").unwrap_err().kind(), ErrorKind::NotFound);
    // Its data files are orphans now.
    let report = p.gc().unwrap();
    assert!(report.deleted.iter().any(|(n, _)| n.ends_with("_lost_0")));
    assert!(report.deleted.iter().all(|(n, _)| n.ends_with("_lost_0")));
    put_range(&main, &mut m, "b", "main", 0..100, 100);
    drop(main);
    env.reopen();
    assert_matches(&env.part(0).branch("main").unwrap(), &m);
    assert_eq!(
        env.part(0).branch("lost").unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

// ---------------------------------------------------------------------------------------
// Gaps of the seed design
// ---------------------------------------------------------------------------------------

#[test]
fn name_reuse_aba() {
    for backend in [Backend::Memory, Backend::Pread] {
        let mut env = Env::new(backend);
        let p = env.part(0);
        let main = p.branch("main").unwrap();
        let mut m = Model::new();
        put_range(&main, &mut m, "a", "main", 0..300, 100);
        let feature = p.create_branch("feature", "main").unwrap();
        let mut f = m.clone();
        put_range(&feature, &mut f, "f", "old-feature", 0..3000, 300);
        let child = p.create_branch("child", "feature").unwrap();
        let mut c = f.clone();
        put_range(&child, &mut c, "c", "child", 0..300, 100);
        let old_term = p.describe("feature").unwrap().term;
        let old_files: BTreeSet<String> = env
            .data_files("t.0")
            .iter()
            .filter(|d| d.branch.as_str() == "feature")
            .map(|d| d.to_string())
            .collect();
        assert!(old_files.len() >= 3);
        drop(feature);
        p.delete_branch("feature").unwrap();
        p.gc().unwrap();
        // The child still needs the old feature's files.
        let kept: BTreeSet<String> = env
            .data_files("t.0")
            .iter()
            .map(|d| d.to_string())
            .collect();
        assert!(old_files.iter().any(|n| kept.contains(n)));

        let feature = p.create_branch("feature", "main").unwrap();
        let new_term = p.describe("feature").unwrap().term;
        assert!(new_term > old_term, "{new_term} <= {old_term}");
        let mut f2 = m.clone();
        // Enough to allocate many files: every id the old feature used comes round again.
        put_range(&feature, &mut f2, "f", "new-feature", 0..6000, 300);
        let new_files: Vec<DataFileName> = env
            .data_files("t.0")
            .into_iter()
            .filter(|d| d.branch.as_str() == "feature" && d.term == new_term)
            .collect();
        assert!(new_files.len() > old_files.len(), "{new_files:?}");
        for n in &old_files {
            if kept.contains(n) {
                assert!(
                    env.list("t.0").contains(n),
                    "{n}, still needed by child, was replaced or removed"
                );
            }
        }
        assert_matches(&child, &c);
        assert_matches(&feature, &f2);
        p.gc().unwrap();
        assert_matches(&child, &c);
        drop((child, feature, main));
        env.reopen();
        let p = env.part(0);
        assert_matches(&p.branch("child").unwrap(), &c);
        assert_matches(&p.branch("feature").unwrap(), &f2);
        assert_eq!(p.describe("feature").unwrap().term, new_term);
        p.gc().unwrap();
        assert_matches(&p.branch("child").unwrap(), &c);
    }
}

/// A name deleted and created again in the same process must be writable: the deleted
/// incarnation's fence (which holds every term of it off) must not hold off the new term.
/// Covers the three ways a name is (re)created: create, branch from archive, restore backup.
#[test]
fn regression_recreated_branch_is_not_fenced() {
    let env = Env::mem();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "a", "main", 0..10, 10);
    let archive = main.archive().unwrap();
    for name in ["feature", "pit", "backup"] {
        p.create_branch(name, "main").unwrap();
        p.delete_branch(name).unwrap();
    }
    let feature = p.create_branch("feature", "main").unwrap();
    let pit = main.branch_from_archive(&archive, "pit").unwrap();
    main.restore(&archive, "backup").unwrap();
    let backup = p.branch("backup").unwrap();
    for b in [&feature, &pit, &backup] {
        let mut model = m.clone();
        put_range(b, &mut model, "b", "again", 0..10, 10);
        assert_matches(b, &model);
        assert_eq!(
            p.describe(&b.label()[4..]).unwrap().term,
            1,
            "{}",
            b.label()
        );
    }
}

/// A global create that fails the same way on every partition reports that kind (an
/// invalid name is `InvalidArgument`, a taken name `AlreadyExists`), not a generic `Io`
/// (which callers may treat as transient), and an invalid name is refused even on a table
/// without partitions.
#[test]
fn regression_global_create_error_keeps_kind() {
    let env = Env::mem();
    assert_eq!(
        env.store
            .table("t")
            .unwrap()
            .create_branch("bad name", "main")
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    for n in 0..2 {
        env.part(n).create_branch("feature", "main").unwrap();
    }
    let e = env
        .store
        .table("t")
        .unwrap()
        .create_branch("feature", "main")
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{e}");
    let e = env
        .store
        .table("t")
        .unwrap()
        .create_branch("x", "nosuch")
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    let e = env
        .store
        .table("t")
        .unwrap()
        .create_branch("Main", "main")
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

#[test]
fn sibling_file_ids_do_not_collide() {
    let mut env = Env::pread();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "a", "main", 0..1000, 250);
    let a = p.create_branch("left", "main").unwrap();
    let b = p.create_branch("right", "main").unwrap();
    let (mut ma, mut mb) = (m.clone(), m.clone());
    put_range(&a, &mut ma, "x", "left", 0..2000, 250);
    put_range(&b, &mut mb, "x", "right", 0..2000, 250);
    let files = env.data_files("t.0");
    let ids = |name: &str| -> BTreeSet<u64> {
        files
            .iter()
            .filter(|d| d.branch.as_str() == name)
            .map(|d| d.file_id)
            .collect()
    };
    let common: Vec<u64> = ids("left").intersection(&ids("right")).copied().collect();
    assert!(common.len() >= 2, "siblings should reuse ids: {files:?}");
    for id in &common {
        let l = std::fs::read(env.path(&format!("t.0/data_{id}_left_0"))).unwrap();
        let r = std::fs::read(env.path(&format!("t.0/data_{id}_right_0"))).unwrap();
        assert_ne!(l, r, "two files of id {id} hold the same bytes");
    }
    assert_matches(&a, &ma);
    assert_matches(&b, &mb);
    p.gc().unwrap();
    drop((a, b, main));
    env.reopen();
    let p = env.part(0);
    assert_matches(&p.branch("left").unwrap(), &ma);
    assert_matches(&p.branch("right").unwrap(), &mb);
    assert_matches(&p.branch("main").unwrap(), &m);
}

#[test]
fn branch_name_differing_only_by_case_is_refused() {
    let env = Env::mem();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let feature = p.create_branch("feature", "main").unwrap();
    let archive = main.archive().unwrap();
    for name in ["Feature", "FEATURE", "feaTure"] {
        let e = p.create_branch(name, "main").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{name}: {e}");
        assert!(e.to_string().contains("t.0@"), "{e}");
        let e = main.branch_from_archive(&archive, name).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{name}: {e}");
        let e = main.restore(&archive, name).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{name}: {e}");
    }
    // Exact duplicates are AlreadyExists.
    assert_eq!(
        p.create_branch("feature", "main").unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    assert_eq!(names(&p), ["feature", "main"]);
    // Once the original is deleted the other spelling is free.
    drop(feature);
    p.delete_branch("feature").unwrap();
    p.create_branch("Feature", "main").unwrap();
    assert_eq!(names(&p), ["Feature", "main"]);
    assert_eq!(
        p.create_branch("feature", "main").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn main_spelled_differently_is_invalid() {
    let env = Env::mem();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let archive = main.archive().unwrap();
    for name in ["Main", "MAIN", "mAiN"] {
        let kind = |r: bough::Result<Branch>| r.unwrap_err().kind();
        assert_eq!(kind(p.branch(name)), ErrorKind::InvalidArgument, "{name}");
        assert_eq!(
            kind(p.create_branch(name, "main")),
            ErrorKind::InvalidArgument
        );
        assert_eq!(kind(p.create_branch("x", name)), ErrorKind::InvalidArgument);
        assert_eq!(
            kind(main.branch_from_archive(&archive, name)),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            p.delete_branch(name).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            p.describe(name).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        assert_eq!(
            env.store
                .table("t")
                .unwrap()
                .create_branch(name, "main")
                .unwrap_err()
                .kind(),
            ErrorKind::InvalidArgument
        );
    }
    assert_eq!(names(&p), ["main"]);
}

#[test]
fn errors_name_partition_and_branch() {
    let env = Env::mem();
    let p = env.part(3);
    let main = p.branch("main").unwrap();
    let feature = p.create_branch("feature", "main").unwrap();
    let archive = feature.archive_at(T0).unwrap();
    let has = |e: bough::Error, label: &str, kind: ErrorKind| {
        assert_eq!(e.kind(), kind, "{e}");
        assert!(e.to_string().contains(label), "{label} missing in: {e}");
        assert!(
            e.target().is_some_and(|t| t.contains("t.3")),
            "target of {e}: {:?}",
            e.target()
        );
    };
    has(
        p.create_branch("feature", "main").unwrap_err(),
        "t.3@feature",
        ErrorKind::AlreadyExists,
    );
    has(
        p.create_branch("x", "nosuch").unwrap_err(),
        "t.3@nosuch",
        ErrorKind::NotFound,
    );
    has(
        p.create_branch("bad name", "main").unwrap_err(),
        "t.3@bad name",
        ErrorKind::InvalidArgument,
    );
    has(
        p.create_branch("Feature", "main").unwrap_err(),
        "t.3@Feature",
        ErrorKind::InvalidArgument,
    );
    has(
        p.delete_branch("nosuch").unwrap_err(),
        "t.3@nosuch",
        ErrorKind::NotFound,
    );
    has(
        p.delete_branch("main").unwrap_err(),
        "t.3@main",
        ErrorKind::InvalidArgument,
    );
    has(
        p.describe("nosuch").unwrap_err(),
        "t.3@nosuch",
        ErrorKind::NotFound,
    );
    has(
        p.open_new_term("nosuch").unwrap_err(),
        "t.3@nosuch",
        ErrorKind::NotFound,
    );
    has(
        feature.archive_at(T0).unwrap_err(),
        "t.3@feature",
        ErrorKind::AlreadyExists,
    );
    has(
        feature.branch_from_archive(&archive, "main").unwrap_err(),
        "t.3@main",
        ErrorKind::AlreadyExists,
    );
    has(
        feature.restore(&archive, "main").unwrap_err(),
        "t.3@feature",
        ErrorKind::AlreadyExists,
    );
    let foreign = main.archive().unwrap();
    has(
        feature.restore(&foreign, "backup").unwrap_err(),
        "t.3@feature",
        ErrorKind::InvalidArgument,
    );
    p.delete_branch("feature").unwrap();
    has(
        feature.get_blocking(b"k").unwrap_err(),
        "t.3@feature",
        ErrorKind::NotFound,
    );
    let mut wb = WriteBatch::new();
    wb.put("k", "v");
    has(
        feature.write_blocking(wb).unwrap_err(),
        "t.3@feature",
        ErrorKind::NotFound,
    );
    has(
        feature.archive().unwrap_err(),
        "t.3@feature",
        ErrorKind::NotFound,
    );
}

#[test]
fn restore_keeps_replaced_head_as_backup() {
    for backend in [Backend::Memory, Backend::Pread] {
        let mut env = Env::new(backend);
        let p = env.part(0);
        let main = p.branch("main").unwrap();
        let mut v1 = Model::new();
        put_range(&main, &mut v1, "a", "v1", 0..1000, 250);
        let archive = main.archive().unwrap();
        let mut v2 = v1.clone();
        put_range(&main, &mut v2, "a", "v2", 0..1000, 250);
        put_range(&main, &mut v2, "b", "v2", 0..500, 250);
        main.compact_now().unwrap();
        let term_before = p.describe("main").unwrap().term;
        let view_v2 = main.read_view().unwrap();

        main.restore(&archive, "backup").unwrap();
        assert_matches(&main, &v1);
        let backup = p.branch("backup").unwrap();
        assert_matches(&backup, &v2);
        assert_eq!(names(&p), ["backup", "main"]);
        assert!(p.describe("main").unwrap().term > term_before);
        assert_eq!(
            p.describe("backup").unwrap().origin.unwrap().parent,
            Some((bn("main"), term_before))
        );
        // A view taken before the restore still reads the replaced state.
        assert_eq!(
            view_v2.get(key("a", 1)).unwrap().unwrap().value,
            val("v2", 1)
        );
        // Handles opened before the restore follow the branch.
        assert_eq!(
            p.branch("main")
                .unwrap()
                .get_blocking(key("a", 1))
                .unwrap()
                .unwrap()
                .value,
            val("v1", 1)
        );
        // Both are writable and independent; GC keeps what each needs.
        let mut r = v1.clone();
        put_range(&main, &mut r, "c", "restored", 0..500, 250);
        let mut bk = v2.clone();
        put_range(&backup, &mut bk, "d", "backup", 0..500, 250);
        p.gc().unwrap();
        assert_matches(&main, &r);
        assert_matches(&backup, &bk);
        // The archive is still there and can be restored again (the backup name is taken).
        assert_eq!(main.archives().unwrap(), std::slice::from_ref(&archive));
        assert_eq!(
            main.restore(&archive, "backup").unwrap_err().kind(),
            ErrorKind::AlreadyExists
        );
        assert_matches(&main, &r);
        drop((main, backup, view_v2));
        env.reopen();
        let p = env.part(0);
        assert_matches(&p.branch("main").unwrap(), &r);
        assert_matches(&p.branch("backup").unwrap(), &bk);
        p.gc().unwrap();
        assert_matches(&p.branch("main").unwrap(), &r);
        assert_matches(&p.branch("backup").unwrap(), &bk);
    }
}

#[test]
fn branch_from_archive_is_point_in_time() {
    for backend in [Backend::Memory, Backend::Pread] {
        let mut env = Env::new(backend);
        let p = env.part(0);
        let main = p.branch("main").unwrap();
        let mut v1 = Model::new();
        put_range(&main, &mut v1, "a", "v1", 0..1000, 250);
        let a1 = main.archive().unwrap();
        let mut v2 = v1.clone();
        put_range(&main, &mut v2, "a", "v2", 0..1000, 250);
        del_range(&main, &mut v2, "a", 0..100);
        let a2 = main.archive().unwrap();
        assert_ne!(a1, a2);
        let mut v3 = v2.clone();
        put_range(&main, &mut v3, "b", "v3", 0..500, 250);
        main.compact_now().unwrap();

        let pit1 = main.branch_from_archive(&a1, "pit1").unwrap();
        let pit2 = main.branch_from_archive(&a2, "pit2").unwrap();
        assert_matches(&pit1, &v1);
        assert_matches(&pit2, &v2);
        assert_matches(&main, &v3);
        let info = p.describe("pit1").unwrap();
        assert_eq!(info.origin.unwrap().parent, Some((bn("main"), a1.term)));
        // Independent of main and of each other.
        let mut w1 = v1.clone();
        put_range(&pit1, &mut w1, "a", "pit1", 0..100, 100);
        put_range(&main, &mut v3, "a", "v4", 0..100, 100);
        assert_matches(&pit1, &w1);
        assert_matches(&pit2, &v2);
        // The branches hold on to their data once the archives are gone.
        main.prune_archives(0).unwrap();
        assert!(main.archives().unwrap().is_empty());
        p.gc().unwrap();
        assert_matches(&pit1, &w1);
        assert_matches(&pit2, &v2);
        assert_matches(&main, &v3);
        drop((pit1, pit2, main));
        env.reopen();
        let p = env.part(0);
        assert_matches(&p.branch("pit1").unwrap(), &w1);
        assert_matches(&p.branch("pit2").unwrap(), &v2);
        assert_matches(&p.branch("main").unwrap(), &v3);
    }
}

#[test]
fn two_archives_with_the_same_timestamp_never_overwrite() {
    let env = Env::mem();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    let mut v1 = Model::new();
    put_range(&main, &mut v1, "a", "v1", 0..200, 100);
    let ts = T0 + 5;
    let first = main.archive_at(ts).unwrap();
    assert_eq!(first.timestamp, ts);
    let mut v2 = v1.clone();
    put_range(&main, &mut v2, "a", "v2", 0..200, 100);
    let e = main.archive_at(ts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{e}");
    assert_eq!(main.archives().unwrap(), std::slice::from_ref(&first));
    // The first archive still holds the first state.
    assert_matches(&main.branch_from_archive(&first, "check1").unwrap(), &v1);
    // archive() at the same clock time moves past the taken timestamp.
    env.clock.set(ts);
    let second = main.archive().unwrap();
    assert_eq!(second.timestamp, ts + 1);
    let third = main.archive().unwrap();
    assert_eq!(third.timestamp, ts + 2);
    assert_eq!(main.archives().unwrap(), [first, second.clone(), third]);
    assert_matches(&main.branch_from_archive(&second, "check2").unwrap(), &v2);
}

#[test]
fn global_create_is_all_or_nothing() {
    let env = Env::mem();
    let mut models = Vec::new();
    for n in 0..4 {
        let main = env.part(n).branch("main").unwrap();
        let mut m = Model::new();
        put_range(&main, &mut m, "a", &format!("p{n}"), 0..100, 100);
        models.push(m);
    }
    // Partition 2 already has a `feature`, with data of its own.
    let pre = env.part(2).create_branch("feature", "main").unwrap();
    let mut pre_model = models[2].clone();
    put_range(&pre, &mut pre_model, "own", "pre", 0..50, 50);

    let e = env
        .store
        .table("t")
        .unwrap()
        .create_branch("feature", "main")
        .unwrap_err();
    assert!(e.to_string().contains("t.2@feature"), "{e}");
    assert!(!e.to_string().contains("t.0@feature"), "{e}");
    for n in [0, 1, 3] {
        assert_eq!(
            names(&env.part(n)),
            ["main"],
            "partition {n} kept the branch"
        );
        assert_eq!(
            env.part(n).branch("feature").unwrap_err().kind(),
            ErrorKind::NotFound
        );
    }
    // The pre-existing branch is untouched by the rollback.
    assert_eq!(names(&env.part(2)), ["feature", "main"]);
    assert_matches(&pre, &pre_model);

    // A missing parent on one partition fails the same way.
    env.part(1).create_branch("dev", "main").unwrap();
    let e = env
        .store
        .table("t")
        .unwrap()
        .create_branch("x", "dev")
        .unwrap_err();
    for n in [0, 2, 3] {
        assert!(e.to_string().contains(&format!("t.{n}@dev")), "{e}");
    }
    assert_eq!(names(&env.part(1)), ["dev", "main"]);

    // A name free everywhere succeeds everywhere, reusing the rolled-back name too.
    drop(pre);
    env.part(2).delete_branch("feature").unwrap();
    env.store
        .table("t")
        .unwrap()
        .create_branch("feature", "main")
        .unwrap();
    for (n, m) in models.iter().enumerate() {
        assert_matches(&env.part(n as u32).branch("feature").unwrap(), m);
    }
    env.store
        .table("t")
        .unwrap()
        .delete_branch("feature")
        .unwrap();
    for n in 0..4 {
        assert!(!names(&env.part(n)).contains(&"feature".to_string()));
    }
}

#[test]
fn global_archive_shares_one_timestamp() {
    let env = Env::mem();
    let mut models = Vec::new();
    for n in 0..3 {
        let main = env.part(n).branch("main").unwrap();
        let mut m = Model::new();
        put_range(&main, &mut m, "a", &format!("p{n}"), 0..100, 100);
        models.push(m);
    }
    env.store
        .table("t")
        .unwrap()
        .create_branch("feature", "main")
        .unwrap();
    env.clock.advance(17);
    let ts = env.store.table("t").unwrap().archive("feature").unwrap();
    assert_eq!(ts, T0 + 17);
    let ts_main = env.store.table("t").unwrap().archive("main").unwrap();
    for n in 0..3u32 {
        let f = env.part(n).branch("feature").unwrap();
        let archives = f.archives().unwrap();
        assert_eq!(archives.len(), 1);
        assert_eq!(archives[0].timestamp, ts);
        assert_eq!(archives[0].branch.as_str(), "feature");
        let main_archives = env.part(n).branch("main").unwrap().archives().unwrap();
        assert_eq!(main_archives.len(), 1);
        assert_eq!(main_archives[0].timestamp, ts_main);
        let pit = f.branch_from_archive(&archives[0], "pit").unwrap();
        assert_matches(&pit, &models[n as usize]);
    }
}

#[test]
fn describe_reports_parent_term_and_archives() {
    let env = Env::mem();
    let p = env.part(0);
    let main = p.branch("main").unwrap();
    put_range(&main, &mut Model::new(), "a", "v", 0..100, 100);
    let info = p.describe("main").unwrap();
    assert_eq!(info.name, bn("main"));
    assert_eq!(info.term, 0);
    assert!(
        info.origin.as_ref().is_none_or(|o| o.parent.is_none()),
        "{info:?}"
    );
    assert!(info.archives.is_empty());

    env.clock.advance(1000);
    let version_before = main.read_view().unwrap().version();
    let feature = p.create_branch("feature", "main").unwrap();
    let version_at_fork = main.read_view().unwrap().version();
    let info = p.describe("feature").unwrap();
    assert_eq!(info.name, bn("feature"));
    assert_eq!(info.term, 0);
    let origin = info.origin.clone().unwrap();
    assert_eq!(
        origin,
        BranchOrigin {
            parent: Some((bn("main"), 0)),
            fork_version: version_at_fork,
            created_at_ms: T0 + 1000,
        }
    );
    assert!(origin.fork_version >= version_before);
    assert!(info.archives.is_empty());

    let a1 = feature.archive_at(T0 + 2000).unwrap();
    let a2 = feature.archive_at(T0 + 3000).unwrap();
    assert_eq!(
        p.describe("feature").unwrap().archives,
        [a1.clone(), a2.clone()]
    );
    assert!(p.describe("main").unwrap().archives.is_empty());

    // A new term: the term moves, the origin and the archives stay.
    let feature = p.open_new_term("feature").unwrap();
    let info = p.describe("feature").unwrap();
    assert_eq!(info.term, 1);
    assert_eq!(info.origin, Some(origin.clone()));
    assert_eq!(info.archives, [a1.clone(), a2.clone()]);
    let a3 = feature.archive_at(T0 + 4000).unwrap();
    assert_eq!(a3.term, 1);
    assert_eq!(p.describe("feature").unwrap().archives, [a1, a2, a3]);

    // A child of the branch names the branch and its current term.
    let child = p.create_branch("child", "feature").unwrap();
    let info = p.describe("child").unwrap();
    assert_eq!(info.origin.unwrap().parent, Some((bn("feature"), 1)));
    drop(child);
    // After a restore, the origin of the archive's state is kept.
    let a = feature.archives().unwrap()[0].clone();
    feature.restore(&a, "before-restore").unwrap();
    let info = p.describe("feature").unwrap();
    assert_eq!(info.term, 2);
    assert_eq!(info.origin, Some(origin));
}

// ---------------------------------------------------------------------------------------
// Creation cost
// ---------------------------------------------------------------------------------------

/// Fills partition `n` with about `bytes` of data and returns the bytes written by a
/// `create_branch` on it. What is counted: every byte the storage backend writes during the
/// call — the parent's checkpoint of its pending mapping changes (mapping pages and one
/// manifest log block), the new branch's manifest snapshot and its `CURRENT_TERM`. The
/// data itself is never copied.
fn creation_cost(env: &Env, n: u32, bytes: usize) -> u64 {
    let p = env.part(n);
    let main = p.branch("main").unwrap();
    let per = 1000;
    let keys = bytes / per;
    let mut wb = WriteBatch::new();
    for i in 0..keys {
        wb.put(key("k", i), vec![(i % 251) as u8; per]);
        if wb.len() == 1000 {
            main.write_blocking(std::mem::take(&mut wb)).unwrap();
        }
    }
    if !wb.is_empty() {
        main.write_blocking(wb).unwrap();
    }
    // Warm-up: the first creation after the bulk load also checkpoints the mapping chunks
    // the load dirtied (at most `checkpoint_chunks` of them, whatever the data size); that
    // is the load's cost, not the creation's.
    p.create_branch("warmup", "main").unwrap();
    let mut total = Vec::new();
    for round in 0..3 {
        // Something small right before the measurement, as a busy parent would have.
        let mut wb = WriteBatch::new();
        wb.put(key("k", (round * 7919) % keys.max(1)), "fresh");
        wb.put(format!("z{round}"), "fresh");
        main.write_blocking(wb).unwrap();
        let before = env.store.io_stats();
        p.create_branch(&format!("b{round}"), "main").unwrap();
        let cost = env.store.io_stats().since(&before).write_bytes;
        total.push(cost);
    }
    eprintln!("partition of {bytes} bytes: creation wrote {total:?} bytes");
    *total.iter().max().unwrap()
}

fn check_creation_costs(sizes: &[usize]) {
    let env = Env::mem();
    let costs: Vec<u64> = sizes
        .iter()
        .enumerate()
        .map(|(n, &s)| creation_cost(&env, n as u32, s))
        .collect();
    let lo = *costs.iter().min().unwrap();
    let hi = *costs.iter().max().unwrap();
    assert!(
        hi <= 2 * lo,
        "creation cost grows with data: {costs:?} for sizes {sizes:?}"
    );
}

#[test]
fn branch_creation_cost_does_not_grow_with_data() {
    check_creation_costs(&[1 << 20, 16 << 20]);
}

#[test]
fn slow_branch_creation_cost_does_not_grow_with_data() {
    check_creation_costs(&[1 << 20, 16 << 20, 128 << 20]);
}

// ---------------------------------------------------------------------------------------
// Durability
// ---------------------------------------------------------------------------------------

/// After every acknowledged branch operation, a power loss (only synced bytes and synced
/// directory entries survive) keeps exactly the acknowledged state.
#[test]
fn branch_operations_survive_power_loss() {
    let env = Env::mem();
    let p = env.part(0);
    let mut models: BTreeMap<String, Model> = BTreeMap::new();
    let check = |models: &BTreeMap<String, Model>, step: &str| {
        let durable = env.mem.clone_durable();
        let store = Store::builder(
            Options::in_memory()
                .maintenance_interval_ms(0)
                .data_file_size(FILE_SIZE),
        )
        .memory(durable)
        .open()
        .unwrap();
        let p = store.partition("t", 0).unwrap();
        assert_eq!(
            p.branches().unwrap(),
            models.keys().cloned().collect::<Vec<_>>(),
            "after {step}"
        );
        for (name, m) in models {
            let b = p.branch(name).unwrap();
            assert_eq!(&scan_all(&b), m, "{name} after {step}");
        }
        store.close().unwrap();
    };
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "a", "main", 0..500, 250);
    models.insert("main".into(), m.clone());
    check(&models, "main writes");

    let feature = p.create_branch("feature", "main").unwrap();
    models.insert("feature".into(), m.clone());
    check(&models, "create");

    let mut f = m.clone();
    put_range(&feature, &mut f, "f", "feature", 0..500, 250);
    models.insert("feature".into(), f.clone());
    check(&models, "branch writes");

    let archive = feature.archive().unwrap();
    let at_archive = f.clone();
    let mut f2 = f.clone();
    put_range(&feature, &mut f2, "f", "feature2", 0..500, 250);
    feature.restore(&archive, "backup").unwrap();
    models.insert("feature".into(), f.clone());
    models.insert("backup".into(), f2.clone());
    check(&models, "restore");

    p.open_new_term("feature").unwrap();
    put_range(&feature, &mut f, "g", "term2", 0..100, 100);
    models.insert("feature".into(), f.clone());
    check(&models, "new term");

    main.branch_from_archive(&archive, "pit").unwrap();
    models.insert("pit".into(), at_archive);
    check(&models, "branch from archive");

    p.delete_branch("backup").unwrap();
    models.remove("backup");
    check(&models, "delete");

    p.create_branch("backup", "pit").unwrap();
    models.insert("backup".into(), models["pit"].clone());
    check(&models, "re-create a deleted name");

    p.gc().unwrap();
    check(&models, "gc");
}

/// Found by the bench (GC with 10,000 branches failed with EMFILE): heads of created
/// branches never counted against `max_open_branches`, so every created branch kept its
/// manifest and its data file open. Created heads are closed like opened ones.
#[test]
fn regression_created_branches_count_against_max_open_branches() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = bough::Store::open(
        bough::Options::new(dir.path())
            .max_open_branches(8)
            .maintenance_interval_ms(0),
    )
    .expect("open");
    let part = store.partition("t", 0).expect("partition");
    let main = part.branch("main").expect("main");
    let mut w = bough::WriteBatch::new();
    w.put("k", "main");
    main.write_blocking(w).expect("write");
    for i in 0..40 {
        let b = part
            .create_branch(&format!("b{i}"), "main")
            .expect("create");
        let mut w = bough::WriteBatch::new();
        w.put("k", format!("b{i}"));
        b.write_blocking(w).expect("write");
        drop(b);
        assert!(
            store.open_branch_count() <= 9,
            "{} heads open after {} branches",
            store.open_branch_count(),
            i + 1
        );
    }
    for i in [0, 17, 39] {
        let b = part.branch(&format!("b{i}")).expect("reopen");
        assert_eq!(
            b.get_blocking(b"k").expect("get").expect("present").value,
            format!("b{i}").into_bytes()
        );
    }
}
