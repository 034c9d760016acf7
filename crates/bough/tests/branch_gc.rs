//! Garbage collection across branches: orphans of deleted branches, cross-branch
//! references, archives (retention and exact protection), reader snapshots, many branches,
//! GC running alongside writers, and the report.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bough::io::{MemoryStorage, Storage};
use bough::{
    Backend, Branch, ErrorKind, GcReport, KeepReason, ManualClock, Options, PartitionHandle,
    ScanOptions, Store, StoreBuilder, WriteBatch,
};
use bough_names::{DataFileName, FileKind, classify};

const FILE_SIZE: u64 = 64 * 4096;
const T0: u64 = 1_700_000_000_000;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

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

    fn reopen(&mut self) {
        self.store.close().unwrap();
        self.store = Store::open(Self::opts(
            self.backend,
            self.dir.path(),
            &self.mem,
            &self.clock,
        ))
        .unwrap();
    }

    fn part(&self) -> PartitionHandle {
        self.store.partition("t", 0).unwrap()
    }

    fn list(&self) -> Vec<String> {
        let mut names: Vec<String> = match self.backend {
            Backend::Memory => self.mem.list("t.0").unwrap(),
            _ => std::fs::read_dir(self.dir.path().join("t.0"))
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect(),
        };
        names.sort();
        names
    }

    fn data_files(&self) -> BTreeSet<String> {
        self.list()
            .into_iter()
            .filter(|n| matches!(classify(n), FileKind::Data(_)))
            .collect()
    }

    fn file_len(&self, name: &str) -> u64 {
        match self.backend {
            Backend::Memory => self.mem.file_len(&format!("t.0/{name}")).unwrap(),
            _ => std::fs::metadata(self.dir.path().join("t.0").join(name))
                .unwrap()
                .len(),
        }
    }
}

fn key(prefix: &str, i: usize) -> Vec<u8> {
    format!("{prefix}{i:06}").into_bytes()
}

fn val(tag: &str, i: usize) -> Vec<u8> {
    let mut v = format!("{tag}:{i}:").into_bytes();
    v.resize(200, b'.');
    v
}

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

fn scan_all(b: &Branch) -> Model {
    b.scan_blocking(&ScanOptions::default())
        .unwrap()
        .entries
        .into_iter()
        .map(|kv| (kv.key, kv.value.value))
        .collect()
}

#[track_caller]
fn assert_matches(b: &Branch, model: &Model) {
    let got = scan_all(b);
    assert!(
        got == *model,
        "{}: {} keys, model has {}; first difference at {:?}",
        b.label(),
        got.len(),
        model.len(),
        got.iter()
            .zip(model.iter())
            .find(|(g, m)| g != m)
            .map(|(g, _)| String::from_utf8_lossy(g.0).into_owned())
    );
}

fn deleted(r: &GcReport) -> BTreeSet<String> {
    r.deleted.iter().map(|(n, _)| n.clone()).collect()
}

fn kept(r: &GcReport) -> BTreeMap<String, KeepReason> {
    r.kept.iter().cloned().collect()
}

fn parse(name: &str) -> DataFileName {
    match classify(name) {
        FileKind::Data(d) => d,
        other => panic!("{name} is not a data file: {other:?}"),
    }
}

fn of_branch(files: &BTreeSet<String>, branch: &str) -> BTreeSet<String> {
    files
        .iter()
        .filter(|n| parse(n).branch.as_str() == branch)
        .cloned()
        .collect()
}

/// A tiny deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn orphaned_data_files_cleaned_after_branch_deletion() {
    for backend in [Backend::Memory, Backend::Pread] {
        let mut env = Env::new(backend);
        let p = env.part();
        let main = p.branch("main").unwrap();
        let mut m = Model::new();
        put_range(&main, &mut m, "a", "main", 0..1000, 250);
        let a = p.create_branch("a", "main").unwrap();
        let mut ma = m.clone();
        put_range(&a, &mut ma, "b", "a", 0..2000, 250);
        let b = p.create_branch("b", "a").unwrap();
        let mut mb = ma.clone();
        put_range(&b, &mut mb, "c", "b", 0..1000, 250);
        let c = p.create_branch("c", "main").unwrap();
        let mut mc = m.clone();
        put_range(&c, &mut mc, "d", "c", 0..2000, 250);
        let main_files = of_branch(&env.data_files(), "main");

        // `c` is deleted while a handle to it is still held: its open file is not protected.
        p.delete_branch("c").unwrap();
        let c_files = of_branch(&env.data_files(), "c");
        assert!(c_files.len() >= 2);
        let r = p.gc().unwrap();
        assert_eq!(deleted(&r), c_files, "{r:?}");
        assert!(of_branch(&env.data_files(), "c").is_empty());
        drop(c);
        // `b` (a leaf child): all its files go, nothing of its parent.
        let b_files = of_branch(&env.data_files(), "b");
        drop(b);
        p.delete_branch("b").unwrap();
        let r = p.gc().unwrap();
        assert_eq!(deleted(&r), b_files, "{r:?}");
        assert_matches(&a, &ma);
        // `a`: nothing references its files any more.
        let a_files = of_branch(&env.data_files(), "a");
        drop(a);
        p.delete_branch("a").unwrap();
        let r = p.gc().unwrap();
        assert_eq!(deleted(&r), a_files, "{r:?}");
        // Only main's files are left, all of them.
        assert_eq!(env.data_files(), main_files);
        assert_matches(&main, &m);
        let r = p.gc().unwrap();
        assert!(r.deleted.is_empty(), "{r:?}");
        drop(main);
        env.reopen();
        assert_matches(&env.part().branch("main").unwrap(), &m);
        let r = env.part().gc().unwrap();
        assert!(r.deleted.is_empty(), "{r:?}");
    }
}

#[test]
fn cross_branch_references_prevent_deletion() {
    for backend in [Backend::Memory, Backend::Pread] {
        let mut env = Env::new(backend);
        let p = env.part();
        let main = p.branch("main").unwrap();
        let mut m = Model::new();
        put_range(&main, &mut m, "a", "main", 0..500, 250);
        let feature = p.create_branch("feature", "main").unwrap();
        let mut f = m.clone();
        put_range(&feature, &mut f, "f", "feature", 0..3000, 300);
        // hotfix, a child of feature, references feature's files (data_<id>_feature_0).
        let hotfix = p.create_branch("hotfix", "feature").unwrap();
        let mut h = f.clone();
        put_range(&hotfix, &mut h, "h", "hotfix", 0..500, 250);
        let fork_max = of_branch(&env.data_files(), "feature")
            .iter()
            .map(|n| parse(n).file_id)
            .max()
            .unwrap();
        // feature keeps writing after the fork: files hotfix never saw.
        put_range(&feature, &mut f, "g", "feature-late", 0..3000, 300);
        let feature_files = of_branch(&env.data_files(), "feature");
        let late: BTreeSet<String> = feature_files
            .iter()
            .filter(|n| parse(n).file_id > fork_max)
            .cloned()
            .collect();
        assert!(late.len() >= 2, "{feature_files:?}");

        drop(feature);
        p.delete_branch("feature").unwrap();
        let r = p.gc().unwrap();
        // Files only the deleted branch saw are gone; the ones hotfix references stay, kept
        // because hotfix's manifest references them.
        for n in &late {
            assert!(deleted(&r).contains(n), "{n} survived: {r:?}");
        }
        let survivors = of_branch(&env.data_files(), "feature");
        assert!(!survivors.is_empty(), "every file of feature was deleted");
        let k = kept(&r);
        for n in &survivors {
            assert!(parse(n).file_id <= fork_max);
            match &k[n] {
                KeepReason::Referenced { by } => {
                    assert!(by.starts_with("manifest_hotfix_"), "{n} kept by {by}")
                }
                other => panic!("{n} kept for {other:?}"),
            }
        }
        assert!(
            deleted(&r).iter().all(|n| n.ends_with("_feature_0")),
            "{r:?}"
        );
        assert_matches(&hotfix, &h);
        assert_matches(&main, &m);

        // A longer chain: main -> x -> y -> z; delete x and y, z still reads all.
        let x = p.create_branch("x", "hotfix").unwrap();
        let mut mx = h.clone();
        put_range(&x, &mut mx, "x", "x", 0..1500, 300);
        let y = p.create_branch("y", "x").unwrap();
        let mut my = mx.clone();
        put_range(&y, &mut my, "y", "y", 0..1500, 300);
        let z = p.create_branch("z", "y").unwrap();
        let mut mz = my.clone();
        put_range(&z, &mut mz, "x", "z", 0..100, 100);
        drop((x, y));
        p.delete_branch("x").unwrap();
        p.delete_branch("y").unwrap();
        p.gc().unwrap();
        assert_matches(&z, &mz);
        drop((z, hotfix, main));
        env.reopen();
        let p = env.part();
        assert_matches(&p.branch("z").unwrap(), &mz);
        assert_matches(&p.branch("hotfix").unwrap(), &h);
        p.gc().unwrap();
        env.reopen();
        let p = env.part();
        assert_matches(&p.branch("z").unwrap(), &mz);
        assert_matches(&p.branch("hotfix").unwrap(), &h);
        assert_matches(&p.branch("main").unwrap(), &m);
    }
}

#[test]
fn archives_respect_num_retained_archives_per_branch() {
    let mut env = Env::new(Backend::Pread);
    let p = env.part();
    let main = p.branch("main").unwrap();
    let feature = p.create_branch("feature", "main").unwrap();
    // Five archives per branch, each of a different state (every key rewritten, then
    // compacted, so an old state lives only in its archive).
    let mut states: BTreeMap<String, Vec<(bough::ArchiveName, Model)>> = BTreeMap::new();
    for round in 0..5 {
        for b in [&main, &feature] {
            let name = &b.label()[4..];
            let mut model = Model::new();
            put_range(b, &mut model, "k", &format!("{name}{round}"), 0..6000, 600);
            b.compact_now().unwrap();
            env.clock.advance(10);
            let a = b.archive().unwrap();
            states.entry(name.to_string()).or_default().push((a, model));
        }
    }
    assert_eq!(main.archives().unwrap().len(), 5);
    assert_eq!(feature.archives().unwrap().len(), 5);

    let files_before = env.data_files().len();
    let pruned = feature.prune_archives(2).unwrap();
    let fs = &states["feature"];
    assert_eq!(
        pruned,
        fs[..3].iter().map(|(a, _)| a.clone()).collect::<Vec<_>>()
    );
    assert_eq!(
        feature.archives().unwrap(),
        fs[3..].iter().map(|(a, _)| a.clone()).collect::<Vec<_>>()
    );
    // Another branch's archives are not counted against this one.
    assert_eq!(main.archives().unwrap().len(), 5);
    // Each round's leaves fill files of their own; the head may still hold a few pages
    // (index pages no round changed) in the files of the pruned states, which compaction
    // kept out of while archives held them and may move now (as the maintenance tick would).
    let c = feature.compact_now().unwrap();
    let r = p.gc().unwrap();
    assert!(
        !r.deleted.is_empty(),
        "pruned archives freed nothing: {c:?} {r:?}"
    );
    assert!(
        r.deleted.iter().all(|(n, _)| n.ends_with("_feature_0")),
        "{r:?}"
    );
    let pruned_main = main.prune_archives(3).unwrap();
    assert_eq!(pruned_main.len(), 2);
    assert_eq!(main.prune_archives(3).unwrap(), []);
    main.compact_now().unwrap();
    let r = p.gc().unwrap();
    assert!(!r.deleted.is_empty());
    assert!(env.data_files().len() < files_before);

    drop((main, feature));
    env.reopen();
    let p = env.part();
    let main = p.branch("main").unwrap();
    // The retained archives read their state from disk; the pruned ones are gone.
    let mut n = 0;
    for (branch, list) in &states {
        let b = p.branch(branch).unwrap();
        let retained = b.archives().unwrap();
        for (a, model) in list {
            n += 1;
            let name = format!("check{n}");
            if retained.contains(a) {
                assert_matches(&b.branch_from_archive(a, &name).unwrap(), model);
            } else {
                let e = b.branch_from_archive(a, &name).unwrap_err();
                assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
            }
        }
    }
    assert_eq!(main.prune_archives(0).unwrap().len(), 3);
    assert!(main.archives().unwrap().is_empty());
}

/// Archives keep exactly the files they reference: not the garbage older than them (a
/// file-id watermark would keep it), and not less than they need.
#[test]
fn archives_protect_exactly_what_they_reference() {
    let mut env = Env::new(Backend::Pread);
    let p = env.part();
    let main = p.branch("main").unwrap();
    let mut v0 = Model::new();
    put_range(&main, &mut v0, "a", "v0", 0..2000, 250);
    let mut v1 = Model::new();
    put_range(&main, &mut v1, "a", "v1", 0..2000, 250);
    main.compact_now().unwrap();

    // Garbage before the archive: the archive of the current state must not keep it.
    let g1 = deleted(&p.gc_dry_run().unwrap());
    assert!(!g1.is_empty(), "compaction left no garbage");
    let archive = main.archive().unwrap();
    let d1 = deleted(&p.gc().unwrap());
    assert_eq!(d1, g1, "the archive protected garbage");
    let max_id = env
        .data_files()
        .iter()
        .map(|n| parse(n).file_id)
        .max()
        .unwrap();
    assert!(d1.iter().all(|n| parse(n).file_id < max_id));

    // The state moves on: what only the archive references stays, other garbage goes.
    let mut v2 = Model::new();
    put_range(&main, &mut v2, "a", "v2", 0..2000, 250);
    main.compact_now().unwrap();
    let g2 = deleted(&p.gc_dry_run().unwrap());
    let d2 = deleted(&p.gc().unwrap());
    assert_eq!(d2, g2);
    drop(main);
    env.reopen();
    let p = env.part();
    let main = p.branch("main").unwrap();
    assert_matches(&main, &v2);
    let check = main.branch_from_archive(&archive, "check").unwrap();
    assert_matches(&check, &v1);
    drop(check);
    p.delete_branch("check").unwrap();
    assert!(p.gc().unwrap().deleted.is_empty());

    // Without the archive, exactly its own files go.
    main.prune_archives(0).unwrap();
    let g3 = deleted(&p.gc_dry_run().unwrap());
    assert!(!g3.is_empty(), "the archive referenced no file of its own");
    let r3 = p.gc().unwrap();
    assert_eq!(deleted(&r3), g3);
    let files = env.data_files();
    assert!(g3.iter().all(|n| !files.contains(n)));
    drop(main);
    env.reopen();
    assert_matches(&env.part().branch("main").unwrap(), &v2);
}

/// Builds `n` branches, each created from a random live branch and written with its own
/// keys and some overwrites; deletes about half; GC; checks everything.
fn many_branches(backend: Backend, n: usize, seed: u64) {
    let mut env = Env::new(backend);
    let mut rng = Rng(seed);
    let p = env.part();
    let main = p.branch("main").unwrap();
    let mut models: BTreeMap<String, Model> = BTreeMap::new();
    let mut m = Model::new();
    put_range(&main, &mut m, "base", "main", 0..300, 300);
    models.insert("main".into(), m);
    let mut handles: BTreeMap<String, Branch> = BTreeMap::new();
    handles.insert("main".into(), main);
    let t = Instant::now();
    for i in 0..n {
        let live: Vec<String> = models.keys().cloned().collect();
        let parent = live[rng.below(live.len())].clone();
        let name = format!("br{i}");
        let b = p.create_branch(&name, &parent).unwrap();
        let mut model = models[&parent].clone();
        put_range(&b, &mut model, &format!("{name}-"), &name, 0..20, 20);
        // Overwrite a few inherited keys.
        let mut wb = WriteBatch::new();
        let ks: BTreeSet<usize> = (0..3).map(|_| rng.below(300)).collect();
        for k in ks {
            wb.put(key("base", k), val(&name, k));
            model.insert(key("base", k), val(&name, k));
        }
        b.write_blocking(wb).unwrap();
        models.insert(name.clone(), model);
        handles.insert(name, b);
    }
    eprintln!("{n} branches created and written in {:?}", t.elapsed());

    let before_files = env.data_files();
    let garbage_before = deleted(&p.gc_dry_run().unwrap());
    let mut gone: BTreeSet<String> = BTreeSet::new();
    let names: Vec<String> = models.keys().filter(|n| *n != "main").cloned().collect();
    for name in names {
        if rng.below(2) == 0 {
            handles.remove(&name);
            p.delete_branch(&name).unwrap();
            models.remove(&name);
            gone.insert(name);
        }
    }
    let t = Instant::now();
    let r = p.gc().unwrap();
    eprintln!(
        "GC over {} branches and {} files: {:?}; {} deleted, {} manifests, {} mapping pages",
        models.len(),
        before_files.len(),
        t.elapsed(),
        r.deleted.len(),
        r.manifests_read,
        r.mapping_pages_visited
    );
    // The dry run's walk may have left unchanged states in the partition's cache.
    assert!(r.manifests_read + r.manifests_reused >= models.len());
    // Every deleted file was unreachable: garbage already, or written by a deleted branch
    // and referenced by no live one (the reads below prove the latter).
    for (f, _) in &r.deleted {
        let d = parse(f);
        assert!(
            garbage_before.contains(f) || gone.contains(d.branch.as_str()),
            "{f} of a live branch was deleted"
        );
    }
    // Nothing leaks: a file of a deleted branch that survives is referenced by a live one.
    for (f, why) in &r.kept {
        if gone.contains(parse(f).branch.as_str()) {
            match why {
                KeepReason::Referenced { by } => {
                    let b = match classify(by) {
                        FileKind::Manifest(mn) => mn.branch,
                        FileKind::Archive(a) => a.branch,
                        other => panic!("{by}: {other:?}"),
                    };
                    assert!(!gone.contains(b.as_str()), "{f} kept by deleted {by}");
                }
                other => panic!("{f} of a deleted branch kept for {other:?}"),
            }
        }
    }
    assert!(
        r.deleted.len() >= gone.len() / 2,
        "{} deleted",
        r.deleted.len()
    );
    for (name, model) in &models {
        assert_matches(&handles[name], model);
    }
    drop(handles);
    env.reopen();
    let p = env.part();
    assert_eq!(
        p.branches().unwrap(),
        models.keys().cloned().collect::<Vec<_>>()
    );
    for (name, model) in &models {
        assert_matches(&p.branch(name).unwrap(), model);
    }
    // A second GC has nothing left to do.
    let r = p.gc().unwrap();
    assert!(r.deleted.is_empty(), "{:?}", r.deleted);
    // Delete everything but main: only main's files remain.
    for name in models.keys().filter(|n| *n != "main") {
        p.delete_branch(name).unwrap();
    }
    p.gc().unwrap();
    let left = env.data_files();
    assert!(
        left.iter().all(|f| parse(f).branch.is_main()),
        "{:?}",
        left.iter()
            .filter(|f| !parse(f).branch.is_main())
            .collect::<Vec<_>>()
    );
    assert_matches(&p.branch("main").unwrap(), &models["main"]);
}

#[test]
fn gc_with_100_plus_branches() {
    many_branches(Backend::Memory, 120, 0x5eed_0100);
}

#[test]
fn slow_gc_with_1000_branches() {
    many_branches(Backend::Pread, 1000, 0x5eed_1000);
}

#[test]
fn gc_keeps_files_of_live_reader_snapshots() {
    for backend in [Backend::Memory, Backend::Pread] {
        let env = Env::new(backend);
        let p = env.part();
        let main = p.branch("main").unwrap();
        let mut v1 = Model::new();
        put_range(&main, &mut v1, "a", "v1", 0..2000, 250);
        let big: Vec<u8> = (0..40_000u32).map(|i| (i % 253) as u8).collect();
        let mut wb = WriteBatch::new();
        wb.put("big", big.clone());
        main.write_blocking(wb).unwrap();
        v1.insert(b"big".to_vec(), big.clone());
        let view = main.read_view().unwrap();

        // Rewrite everything and compact: v1's files are referenced by the view only.
        let mut v2 = Model::new();
        put_range(&main, &mut v2, "a", "v2", 0..2000, 250);
        let mut wb = WriteBatch::new();
        wb.delete("big");
        main.write_blocking(wb).unwrap();
        main.compact_now().unwrap();
        main.compact_now().unwrap();
        let r = p.gc().unwrap();
        let pinned: BTreeSet<String> = r
            .kept
            .iter()
            .filter(|(_, why)| *why == KeepReason::PinnedByReader)
            .map(|(n, _)| n.clone())
            .collect();
        assert!(!pinned.is_empty(), "nothing kept for the reader: {r:?}");
        // The view reads its version exactly (GC drops the cached pages and handles of
        // what it deletes, so a wrongly deleted file would fail here).
        let got: Model = view
            .scan(&ScanOptions::default())
            .unwrap()
            .entries
            .into_iter()
            .map(|kv| (kv.key, kv.value.value))
            .collect();
        assert_eq!(got, v1);
        assert_eq!(view.get(b"big").unwrap().unwrap().value, big);
        assert_matches(&main, &v2);

        // A clone of the view pins as well; dropping both frees the files.
        let clone = view.clone();
        drop(view);
        let r = p.gc().unwrap();
        assert!(r.deleted.iter().all(|(n, _)| !pinned.contains(n)), "{r:?}");
        assert_eq!(clone.get(key("a", 7)).unwrap().unwrap().value, val("v1", 7));
        drop(clone);
        let r = p.gc().unwrap();
        let freed = deleted(&r);
        for n in &pinned {
            assert!(freed.contains(n), "{n} still kept: {r:?}");
        }
        assert_matches(&main, &v2);
    }
}

/// A read view taken before its branch was deleted keeps reading: GC must keep what it
/// references while it is alive (ARCHITECTURE.md invariant 5: every reader snapshot).
#[test]
fn regression_gc_keeps_files_of_a_deleted_branchs_read_view() {
    let env = Env::new(Backend::Memory);
    let p = env.part();
    let main = p.branch("main").unwrap();
    put_range(&main, &mut Model::new(), "a", "main", 0..100, 100);
    let feature = p.create_branch("feature", "main").unwrap();
    let mut f = Model::new();
    put_range(&feature, &mut f, "f", "feature", 0..2000, 250);
    let view = feature.read_view().unwrap();
    drop(feature);
    p.delete_branch("feature").unwrap();
    p.gc().unwrap();
    let got = view.scan(&ScanOptions::default());
    assert!(got.is_ok(), "{:?}", got.err());
    assert_eq!(
        view.get(key("f", 1999)).unwrap().unwrap().value,
        val("feature", 1999)
    );
    drop(view);
    let r = p.gc().unwrap();
    assert!(!r.deleted.is_empty());
}

#[test]
fn gc_reports_what_it_freed_and_why_it_kept() {
    let env = Env::new(Backend::Pread);
    let p = env.part();
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "a", "v0", 0..2000, 250);
    put_range(&main, &mut m, "a", "v1", 0..2000, 250);
    main.compact_now().unwrap();
    let archive = main.archive().unwrap();
    // Pinned by a reader: a state no manifest or archive holds, then main moves on.
    put_range(&main, &mut m, "a", "v15", 0..2000, 250);
    main.compact_now().unwrap();
    let view = main.read_view().unwrap();
    put_range(&main, &mut m, "a", "v2", 0..2000, 250);
    main.compact_now().unwrap();
    // Being written: a branch whose open file no manifest references (it was truncated).
    let scratch = p.create_branch("scratch", "main").unwrap();
    put_range(&scratch, &mut Model::new(), "s", "s", 0..100, 100);
    scratch.truncate_blocking([]).unwrap();
    // Debris and strangers in the directory.
    let dir = env.dir.path().join("t.0");
    std::fs::write(dir.join("notes.txt"), b"not ours").unwrap();
    std::fs::write(dir.join("data_900_main_0"), vec![7u8; 5000]).unwrap(); // in flight
    std::fs::write(dir.join("data_3_ghost_0"), vec![7u8; 3000]).unwrap(); // no such branch

    let files = env.data_files();
    let sizes: BTreeMap<String, u64> = files.iter().map(|n| (n.clone(), env.file_len(n))).collect();
    let manifests = env
        .list()
        .iter()
        .filter(|n| matches!(classify(n), FileKind::Manifest(_) | FileKind::Archive(_)))
        .count();

    let dry = p.gc_dry_run().unwrap();
    assert_eq!(env.data_files(), files, "a dry run deleted files");
    let r = p.gc().unwrap();
    assert_eq!(deleted(&dry), deleted(&r));
    assert_eq!(kept(&dry), kept(&r));

    // Every data file is accounted for exactly once.
    let mut seen: Vec<&String> = r
        .deleted
        .iter()
        .map(|(n, _)| n)
        .chain(r.kept.iter().map(|(n, _)| n))
        .collect();
    seen.sort();
    assert_eq!(seen, files.iter().collect::<Vec<_>>());
    // Deleted: with their sizes, really gone.
    assert!(r.deleted.iter().any(|(n, _)| n == "data_3_ghost_0"));
    assert!(r.deleted.len() >= 2, "{r:?}");
    for (n, size) in &r.deleted {
        assert_eq!(*size, sizes[n], "{n}");
        assert!(!dir.join(n).exists(), "{n}");
    }
    assert_eq!(r.bytes_freed, r.deleted.iter().map(|(_, s)| s).sum::<u64>());
    // Kept: still there, each with its reason.
    let k = kept(&r);
    for n in k.keys() {
        assert!(dir.join(n).exists(), "{n}");
    }
    assert_eq!(k["data_900_main_0"], KeepReason::InFlight);
    let reasons: BTreeSet<&str> = k
        .values()
        .map(|w| match w {
            KeepReason::Referenced { .. } => "referenced",
            KeepReason::PinnedByReader => "reader",
            KeepReason::Writing => "writing",
            KeepReason::InFlight => "in-flight",
        })
        .collect();
    assert_eq!(
        reasons,
        ["in-flight", "reader", "referenced", "writing"].into()
    );
    let listing = env.list();
    let mut by_archive = false;
    for why in k.values() {
        if let KeepReason::Referenced { by } = why {
            assert!(listing.contains(by), "kept by {by}, which does not exist");
            by_archive |= *by == archive.to_string();
        }
    }
    let _ = by_archive; // which referencing manifest is named first is not specified
    assert!(
        k.iter()
            .filter(|(_, w)| **w == KeepReason::Writing)
            .all(|(n, _)| n.ends_with("_scratch_0")),
        "{k:?}"
    );
    assert_eq!(r.unknown, ["notes.txt"]);
    // Read now, or (unchanged since the dry run) reused from the partition's state cache.
    assert_eq!(r.manifests_read + r.manifests_reused, manifests);
    assert!(r.mapping_pages_visited > 0);

    // Once the reader and the writer are gone, their files go too.
    drop(view);
    drop(scratch);
    p.delete_branch("scratch").unwrap();
    let r2 = p.gc().unwrap();
    for (n, why) in &r.kept {
        if matches!(why, KeepReason::PinnedByReader | KeepReason::Writing) {
            assert!(deleted(&r2).contains(n), "{n} ({why:?}) still kept: {r2:?}");
        }
    }
    assert_matches(&main, &m);
}

/// GC runs again and again while writers rewrite and compact, branches come and go, and
/// readers check that every view they take is complete and consistent.
fn gc_alongside_writers(backend: Backend, run_for: Duration) {
    const GROUP: usize = 40;
    let env = Env::new(backend);
    let p = env.part();
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "g", "0", 0..GROUP, GROUP);
    let branches: Vec<Branch> = (0..2)
        .map(|i| p.create_branch(&format!("w{i}"), "main").unwrap())
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for b in branches.iter().cloned().chain([main.clone()]) {
        // Writer: every batch sets the whole group to one version; compacts now and then.
        let (stop, rounds) = (stop.clone(), rounds.clone());
        threads.push(std::thread::spawn(move || {
            let mut v = 1usize;
            while !stop.load(Ordering::Acquire) {
                let mut wb = WriteBatch::new();
                for i in 0..GROUP {
                    let mut value = format!("{v}:").into_bytes();
                    value.resize(300, b'x');
                    wb.put(key("g", i), value);
                }
                b.write_blocking(wb).unwrap();
                if v.is_multiple_of(7) {
                    b.compact_now().unwrap();
                }
                v += 1;
                rounds.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for b in branches.iter().cloned().chain([main.clone()]) {
        // Reader: a view shows one version for the whole group, and reads never fail.
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                let view = b.read_view().unwrap();
                let entries = view.scan(&ScanOptions::default()).unwrap().entries;
                assert_eq!(entries.len(), GROUP, "{}", b.label());
                let version = |v: &[u8]| v.split(|&c| c == b':').next().unwrap().to_vec();
                let first = version(&entries[0].value.value);
                for e in &entries {
                    assert_eq!(version(&e.value.value), first, "{}: torn view", b.label());
                }
                std::thread::yield_now();
            }
        }));
    }
    {
        // Branch churn: create from a busy branch, read, delete.
        let (stop, p) = (stop.clone(), p.clone());
        threads.push(std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Acquire) {
                let name = format!("tmp{i}");
                let b = p.create_branch(&name, "w0").unwrap();
                assert_eq!(scan_all(&b).len(), GROUP);
                drop(b);
                p.delete_branch(&name).unwrap();
                i += 1;
            }
        }));
    }
    let start = Instant::now();
    let mut gcs = 0;
    let mut freed = 0;
    while start.elapsed() < run_for {
        let r = p.gc().unwrap();
        freed += r.deleted.len();
        gcs += 1;
    }
    stop.store(true, Ordering::Release);
    for t in threads {
        t.join().unwrap();
    }
    eprintln!(
        "{gcs} GC runs freed {freed} files during {} write rounds",
        rounds.load(Ordering::Relaxed)
    );
    assert!(freed > 0);
    for b in branches.iter().chain([&main]) {
        assert_eq!(scan_all(b).len(), GROUP);
    }
}

#[test]
fn gc_alongside_writers_readers_and_branch_churn() {
    gc_alongside_writers(Backend::Memory, Duration::from_secs(2));
}

#[test]
fn slow_gc_alongside_writers_readers_and_branch_churn() {
    gc_alongside_writers(Backend::Memory, Duration::from_secs(30));
    gc_alongside_writers(Backend::Pread, Duration::from_secs(30));
}

/// Views taken while a GC runs must be protected as well as those taken before it. GC took
/// its reader pins before listing the directory and reading the manifests: a file created
/// in between, referenced by a view taken in between and overwritten before GC read the
/// manifest, was referenced by nothing GC looked at, and the view lost it ("data_N: not
/// found"). Pins must be taken after the manifests are read.
fn views_taken_during_gc(run_for: Duration) -> (usize, usize) {
    const GROUP: usize = 150;
    let env = Env::new(Backend::Memory);
    let p = env.part();
    let main = p.branch("main").unwrap();
    let mut m = Model::new();
    put_range(&main, &mut m, "g", "0", 0..GROUP, GROUP);
    // Many manifests make every GC run long.
    for i in 0..400 {
        p.create_branch(&format!("idle{i}"), "main").unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, main) = (stop.clone(), main.clone());
        std::thread::spawn(move || {
            let mut v = 1usize;
            while !stop.load(Ordering::Acquire) {
                let mut wb = WriteBatch::new();
                for i in 0..GROUP {
                    let mut value = format!("{v}:").into_bytes();
                    value.resize(300, b'x');
                    wb.put(key("g", i), value);
                }
                main.write_blocking(wb).unwrap();
                v += 1;
            }
        })
    };
    let reader = {
        let (stop, main) = (stop.clone(), main.clone());
        std::thread::spawn(move || {
            let mut held: std::collections::VecDeque<bough::ReadView> = Default::default();
            let (mut checks, mut failures) = (0, 0);
            while !stop.load(Ordering::Acquire) {
                held.push_back(main.read_view().unwrap());
                if held.len() > 16 {
                    let old = held.pop_front().unwrap();
                    checks += 1;
                    match old.scan(&ScanOptions::default()) {
                        Ok(page) => assert_eq!(page.entries.len(), GROUP),
                        Err(e) => {
                            eprintln!("a held view lost its data: {e}");
                            failures += 1;
                        }
                    }
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            (checks, failures)
        })
    };
    // Busy threads preempt the GC thread at random points, widening every window between
    // its steps (as a loaded machine does).
    let hogs: Vec<_> = (0..3)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    std::hint::black_box(x);
                }
            })
        })
        .collect();
    let start = Instant::now();
    let (mut runs, mut freed) = (0, 0);
    while start.elapsed() < run_for {
        freed += p.gc().unwrap().deleted.len();
        runs += 1;
    }
    stop.store(true, Ordering::Release);
    writer.join().unwrap();
    for h in hogs {
        h.join().unwrap();
    }
    eprintln!(
        "{runs} GC runs of {:?} each freed {freed} files",
        run_for / runs.max(1)
    );
    reader.join().unwrap()
}

#[test]
fn regression_gc_keeps_views_taken_while_it_runs() {
    let (checks, failures) = views_taken_during_gc(Duration::from_secs(3));
    eprintln!("{checks} held views checked, {failures} failed");
    assert_eq!(failures, 0);
}

/// The writer shard a branch lands on (the store's FNV-1a of `table.partition@branch`).
fn shard_of(label: &str, shards: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in label.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h % shards
}

/// `reset_branch` (and `merge`) take the source's state in the source's queue, then adopt it
/// in the target's queue. If the source moves on and GC runs in between, GC must still keep
/// the files of the state being adopted, or the target's manifest would name deleted files.
/// (Found failing by this test; the store now pins the state until it is adopted.)
#[test]
fn regression_gc_between_snapshot_and_adoption_keeps_the_adopted_state() {
    // The interleaving depends on thread timing: retry until one run hit it.
    for attempt in 0..5 {
        if reset_during_gc() {
            return;
        }
        eprintln!("attempt {attempt} missed the window; again");
    }
    eprintln!("no attempt hit the window (a very loaded machine); the state was checked anyway");
}

/// One try; returns whether the reset was in flight while GC ran (what the test is about).
/// The target is checked whatever happened.
fn reset_during_gc() -> bool {
    let env = Env::new(Backend::Memory);
    let p = env.part();
    // Source and target on different writer shards, so the source can move on while the
    // target's queue is busy.
    let (src, dst) = ("src", "dst");
    assert_ne!(shard_of("t.0@src", 2), shard_of("t.0@dst", 2));
    let source = p.create_branch(src, "main").unwrap();
    let target = p.create_branch(dst, "main").unwrap();
    let mut v1 = Model::new();
    put_range(&source, &mut v1, "a", "v1", 0..3000, 500);
    // Keep the target's queue busy with a large write.
    let mut big = WriteBatch::new();
    for i in 0..60_000 {
        big.put(format!("zz{i:08}"), vec![1u8; 600]);
    }
    let busy = {
        let target = target.clone();
        std::thread::spawn(move || target.write_blocking(big).unwrap())
    };
    std::thread::sleep(Duration::from_millis(100));
    let reset = {
        let p = p.clone();
        std::thread::spawn(move || p.reset_branch(dst, src).unwrap())
    };
    std::thread::sleep(Duration::from_millis(30));
    // The source moves on and GC runs while the reset waits in the target's queue.
    let mut v2 = Model::new();
    put_range(&source, &mut v2, "a", "v2", 0..3000, 500);
    source.compact_now().unwrap();
    let r = p.gc().unwrap();
    let still_busy = !busy.is_finished();
    busy.join().unwrap();
    reset.join().unwrap();
    let got = target.scan_blocking(&ScanOptions::default());
    assert!(
        got.is_ok(),
        "the target lost the adopted state: {:?}",
        got.err()
    );
    // The reset adopted the source's state as it was when the reset took it: v1 if it was
    // taken before the source moved on (the case this test is after), v2 otherwise.
    let state = scan_all(&target);
    assert!(state == v1 || state == v2, "the target holds neither state");
    let hit = still_busy && state == v1;
    if hit {
        // The state being adopted was pinned meanwhile: the files that hold it stayed.
        assert!(
            r.kept.iter().any(|(_, w)| *w == KeepReason::PinnedByReader),
            "{r:?}"
        );
    }
    hit
}

/// After a checkpoint, a manifest holds the mapping as radix pages plus the slot changes
/// since (its overlay). A slot the overlay changed no longer points where the radix page
/// says, so the page it pointed to is garbage and GC must not count it (it once walked the
/// radix slots and the overlay both, keeping such files until the branch's next checkpoint;
/// compaction cannot help, as the file has no live page to move).
#[test]
fn regression_gc_frees_pages_shadowed_since_the_last_checkpoint() {
    let env = Env::new(Backend::Memory);
    let p = env.part();
    let main = p.branch("main").unwrap();
    let mut v1 = Model::new();
    put_range(&main, &mut v1, "a", "v1", 0..3000, 500);
    let v1_files = env.data_files();
    // Anything that checkpoints: a branch creation, an archive, a fork for merge.
    main.archive().unwrap();
    main.prune_archives(0).unwrap();
    let mut v2 = Model::new();
    put_range(&main, &mut v2, "a", "v2", 0..3000, 500);
    main.compact_now().unwrap();
    let r = p.gc().unwrap();
    let freed = deleted(&r);
    // The last v1 file also holds the checkpoint's mapping pages (still live); the others
    // hold only v1 leaves, every one of them rewritten.
    let stale: Vec<&String> = v1_files.iter().take(v1_files.len() - 1).collect();
    assert!(stale.len() >= 2);
    for f in stale {
        assert!(freed.contains(f), "{f} kept as {:?}", kept(&r).get(f));
    }
    assert_matches(&main, &v2);
}

/// An archive of a child keeps the files it inherited from a parent that was deleted.
#[test]
fn archive_of_a_child_keeps_a_deleted_parents_files() {
    let mut env = Env::new(Backend::Pread);
    let p = env.part();
    let main = p.branch("main").unwrap();
    let parent = p.create_branch("parent", "main").unwrap();
    let mut pm = Model::new();
    put_range(&parent, &mut pm, "p", "parent", 0..2000, 250);
    let child = p.create_branch("child", "parent").unwrap();
    let archive = child.archive().unwrap();
    // The child moves away from everything it inherited.
    let mut cm = Model::new();
    put_range(&child, &mut cm, "c", "child", 0..500, 250);
    child.truncate_blocking(b"d").unwrap();
    child.truncate_blocking([]).unwrap();
    drop(parent);
    p.delete_branch("parent").unwrap();
    let r = p.gc().unwrap();
    let survivors = of_branch(&env.data_files(), "parent");
    assert!(!survivors.is_empty(), "{r:?}");
    for n in &survivors {
        match &kept(&r)[n] {
            KeepReason::Referenced { by } => {
                assert!(by.starts_with("manifest_child_"), "{n} kept by {by}")
            }
            other => panic!("{n} kept for {other:?}"),
        }
    }
    drop((child, main));
    env.reopen();
    let p = env.part();
    let child = p.branch("child").unwrap();
    assert_matches(&child.branch_from_archive(&archive, "again").unwrap(), &pm);
    // Without the archive (and the child's merge base, dropped by re-homing) they go.
    p.delete_branch("again").unwrap();
    child.prune_archives(0).unwrap();
    child.rehome().unwrap();
    let r = p.gc().unwrap();
    assert!(of_branch(&env.data_files(), "parent").is_empty(), "{r:?}");
    assert!(scan_all(&child).is_empty());
}

/// A read view outlives its branch handle. When the store closes idle branch heads (beyond
/// `max_open_branches`), a head whose only reader holds its current snapshot must stay
/// pinned: once the branch is reopened and moves on, GC would otherwise free the view's
/// files.
#[test]
fn regression_evicted_branch_keeps_its_readers_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        Options::new(dir.path())
            .backend(Backend::Pread)
            .maintenance_interval_ms(0)
            .data_file_size(FILE_SIZE)
            .max_open_branches(1),
    )
    .unwrap();
    let p = store.partition("t", 0).unwrap();
    p.branch("main").unwrap();
    let mut v1 = Model::new();
    {
        let feature = p.create_branch("feature", "main").unwrap();
        put_range(&feature, &mut v1, "a", "v1", 0..2000, 250);
    }
    for i in 0..3 {
        drop(p.create_branch(&format!("other{i}"), "main").unwrap());
    }
    store.close().unwrap();
    let store = Store::open(
        Options::new(dir.path())
            .backend(Backend::Pread)
            .maintenance_interval_ms(0)
            .data_file_size(FILE_SIZE)
            .max_open_branches(1),
    )
    .unwrap();
    let p = store.partition("t", 0).unwrap();
    let view = p.branch("feature").unwrap().read_view().unwrap();
    // Opening other branches closes the idle `feature` head (its handle is gone; only the
    // view holds its current snapshot).
    for i in 0..3 {
        let o = p.branch(&format!("other{i}")).unwrap();
        assert!(scan_all(&o).is_empty());
    }
    {
        let feature = p.branch("feature").unwrap();
        put_range(&feature, &mut Model::new(), "a", "v2", 0..2000, 250);
        feature.compact_now().unwrap();
    }
    p.gc().unwrap();
    let got = view.scan(&ScanOptions::default());
    assert!(got.is_ok(), "the view lost its data: {:?}", got.err());
    let got: Model = got
        .unwrap()
        .entries
        .into_iter()
        .map(|kv| (kv.key, kv.value.value))
        .collect();
    assert_eq!(got, v1);
}
