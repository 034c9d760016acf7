//! GC's state cache through the facade: a partition's GC cycles reuse the decoded states of
//! the state files that did not change since the last cycle (`bough_gc::StateCache`), so a
//! cycle reads what changed — and never reuses a state whose file changed, even when the
//! file kept its length, so nothing a newer state references is deleted.
//!
//! The memory backend is used: its stamps are exact at once. A local backend gives a stamp
//! only once a file's last change is a few seconds old (`bough-io` `local/stamp.rs`), so
//! there the same cycles read more and reuse less; they decide the same.

use std::collections::{BTreeMap, BTreeSet};

use bough::io::{FileStamp, MemoryStorage, Storage};
use bough::{Branch, GcReport, MergeOptions, Options, ScanOptions, Store, WriteBatch};
use bough_names::{FileKind, classify};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn open(mem: &MemoryStorage, max_open_branches: usize) -> Store {
    Store::builder(Options::in_memory())
        .memory(mem.clone())
        .map_settings(|o| {
            // Commits go to the tree's own files (manifest records, data files): no write
            // buffer, no maintenance thread running GC on its own.
            o.maintenance_interval_ms(0)
                .write_buffer_bytes(0)
                .data_file_size(64 * 4096)
                .max_open_branches(max_open_branches)
        })
        .open()
        .unwrap()
}

fn put(b: &Branch, model: &mut Model, prefix: &str, n: usize) {
    let mut wb = WriteBatch::new();
    for i in 0..n {
        let (k, v) = (
            format!("{prefix}{i:05}").into_bytes(),
            format!("{prefix}:{i}:{}", "v".repeat(100)).into_bytes(),
        );
        wb.put(k.clone(), v.clone());
        model.insert(k, v);
    }
    b.write_blocking(wb).unwrap();
}

fn all(b: &Branch) -> Model {
    b.scan_blocking(&ScanOptions::default())
        .unwrap()
        .entries
        .into_iter()
        .map(|kv| (kv.key, kv.value.value))
        .collect()
}

fn listing(mem: &MemoryStorage) -> Vec<String> {
    mem.list("t.0").unwrap()
}

/// The state files (manifests, archives, tags, history points) and their lengths.
fn state_files(mem: &MemoryStorage) -> BTreeMap<String, u64> {
    listing(mem)
        .into_iter()
        .filter(|n| {
            matches!(
                classify(n),
                FileKind::Manifest(_)
                    | FileKind::Archive(_)
                    | FileKind::History(_)
                    | FileKind::Tag(_)
            )
        })
        .map(|n| {
            let len = mem.file_len(&format!("t.0/{n}")).unwrap();
            (n, len)
        })
        .collect()
}

/// The stamp of every state file: what tells GC's cache whether a file changed.
fn stamps(mem: &MemoryStorage) -> BTreeMap<String, FileStamp> {
    state_files(mem)
        .into_keys()
        .map(|n| {
            let s = mem.cheap_stamp(&format!("t.0/{n}")).unwrap().unwrap();
            (n, s)
        })
        .collect()
}

/// (read, reused) a cycle that last cached at `then` should report now: every state file
/// new or changed since is read, every other one reused.
fn expected(
    then: &BTreeMap<String, FileStamp>,
    now: &BTreeMap<String, FileStamp>,
) -> (usize, usize) {
    let reused = now.iter().filter(|(n, s)| then.get(*n) == Some(*s)).count();
    (now.len() - reused, reused)
}

fn data_files(mem: &MemoryStorage) -> BTreeSet<String> {
    listing(mem)
        .into_iter()
        .filter(|n| matches!(classify(n), FileKind::Data(_)))
        .collect()
}

fn of_branch(files: &BTreeSet<String>, branch: &str) -> BTreeSet<String> {
    files
        .iter()
        .filter(|n| matches!(classify(n), FileKind::Data(d) if d.branch.as_str() == branch))
        .cloned()
        .collect()
}

fn deleted(r: &GcReport) -> BTreeSet<String> {
    r.deleted.iter().map(|(n, _)| n.clone()).collect()
}

#[test]
fn a_cycle_reads_only_the_state_files_that_changed() {
    let mem = MemoryStorage::new();
    let store = open(&mem, 1000);
    let p = store.partition("t", 0).unwrap();
    let main = p.branch("main").unwrap();
    let mut base = Model::new();
    put(&main, &mut base, "m", 300);
    main.checkpoint_blocking().unwrap();
    let mut agents: Vec<(Branch, Model)> = (0..20)
        .map(|i| {
            (
                p.create_branch(&format!("agent{i}"), "main").unwrap(),
                base.clone(),
            )
        })
        .collect();
    let states = state_files(&mem);
    assert_eq!(states.len(), 21, "{states:?}");

    let r = p.gc().unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (21, 0));
    let mut cached = stamps(&mem);
    // Nothing changed: nothing is read.
    let r = p.gc().unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (0, 21));
    assert!(r.deleted.is_empty(), "{r:?}");
    // A dry run uses the same cache.
    let r = p.gc_dry_run().unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (0, 21));

    // One branch commits: its manifest grows, and it alone is read.
    let (a7, m7) = &mut agents[7];
    put(a7, m7, "a7-", 50);
    let changed: Vec<String> = state_files(&mem)
        .into_iter()
        .filter(|(n, len)| states.get(n) != Some(len))
        .map(|(n, _)| n)
        .collect();
    assert_eq!(changed, ["manifest_agent7_0"]);
    let now = stamps(&mem);
    let r = p.gc().unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (1, 20));
    assert_eq!(
        (r.manifests_read, r.manifests_reused),
        expected(&cached, &now)
    );
    cached = now;
    let r = p.gc().unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (0, 21));

    // Two more commit, one archives (a new state file; archiving leaves the manifest as it
    // is): those three files are read.
    for i in [3, 11] {
        let (b, m) = &mut agents[i];
        put(b, m, &format!("a{i}-"), 10);
    }
    let archive = agents[15].0.archive().unwrap();
    let now = stamps(&mem);
    assert!(now.contains_key(&archive.to_string()));
    assert_eq!(now["manifest_agent15_0"], cached["manifest_agent15_0"]);
    let r = p.gc().unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (3, 19));
    assert_eq!(
        (r.manifests_read, r.manifests_reused),
        expected(&cached, &now)
    );

    // A deleted branch's manifest leaves the walk: one state fewer, none read.
    let (gone, _) = agents.remove(5);
    drop(gone);
    p.delete_branch("agent5").unwrap();
    let r = p.gc().unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (0, 21));

    for (b, m) in &agents {
        assert_eq!(&all(b), m);
    }
}

/// The safety case: a cached state must never stand for a newer version of its file. A
/// manifest is not append-only: closing an idle head seals it (rewrites it as one snapshot
/// record, as long as the last one when the state is no bigger). Here branch `a`'s sealed
/// manifest is cached; then `a` fast-forwards to its child `b` (from then on its state
/// references `b`'s files), `b` is deleted, and `a` is closed idle again: its manifest is a
/// new snapshot of exactly the cached length. The files `b` wrote are held by that state
/// alone. A cache keyed on (name, length) walks `a`'s old state and deletes them (reads of
/// the merged keys then fail); the stamped cache reads the new state.
#[test]
fn a_rewritten_manifest_of_the_same_length_is_read_again() {
    let mem = MemoryStorage::new();
    // One open branch at most: opening another closes (and seals) the idle ones.
    let store = open(&mem, 1);
    let p = store.partition("t", 0).unwrap();
    let mut models: BTreeMap<&str, Model> = BTreeMap::new();
    {
        let main = p.branch("main").unwrap();
        put(&main, models.entry("main").or_default(), "m", 300);
        main.checkpoint_blocking().unwrap();
    }
    models.insert("a", models["main"].clone());
    {
        let a = p.create_branch("a", "main").unwrap();
        put(&a, models.get_mut("a").unwrap(), "a-", 20);
    }
    // Creating c closes a, idle: sealed.
    drop(p.create_branch("c", "main").unwrap());
    models.insert("c", models["main"].clone());
    let sealed = state_files(&mem)["manifest_a_0"];
    let cached = stamps(&mem);
    let r = p.gc().unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (3, 0));
    let r = p.gc().unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (0, 3));

    // b forks from a and writes files of its own; a fast-forwards to it; b goes.
    models.insert("b", models["a"].clone());
    {
        let b = p.create_branch("b", "a").unwrap();
        put(&b, models.get_mut("b").unwrap(), "b-", 400);
        b.checkpoint_blocking().unwrap();
    }
    let b_files = of_branch(&data_files(&mem), "b");
    assert!(!b_files.is_empty());
    let report = p.merge("b", "a", MergeOptions::default()).unwrap();
    assert!(report.committed && report.fast_forward, "{report:?}");
    models.insert("a", models["b"].clone());
    p.delete_branch("b").unwrap();
    models.remove("b");
    // Creating d closes a, idle: sealed again, as long as before.
    drop(p.create_branch("d", "main").unwrap());
    models.insert("d", models["main"].clone());
    let now = stamps(&mem);
    assert_eq!(
        now["manifest_a_0"].len(),
        sealed,
        "the test needs a sealed manifest as long"
    );
    assert_ne!(now["manifest_a_0"], cached["manifest_a_0"]);

    let r = p.gc().unwrap();
    // a's manifest is read, as are main's (sealed again) and d's (new); c's is reused.
    assert_eq!(
        (r.manifests_read, r.manifests_reused),
        expected(&cached, &now)
    );
    let gone = deleted(&r);
    assert!(gone.is_disjoint(&b_files), "{gone:?} of {b_files:?}");
    assert_eq!(all(&p.branch("a").unwrap()), models["a"]);

    // What a reopened store reads comes from the files alone (no page cache).
    store.close().unwrap();
    let store = open(&mem, 1000);
    let p = store.partition("t", 0).unwrap();
    for (name, model) in &models {
        assert_eq!(&all(&p.branch(name).unwrap()), model, "{name}");
    }
}
