//! `StateCache`: walks that reuse the states of unchanged state files decide exactly what
//! walks that read every file decide, however the files changed in between (appends,
//! checkpoints, sealed rewrites of the same length, forks, archives, deletions); the cache
//! follows the live files; a file that does not replay is never cached, and a cached file
//! that changes is read again. Driven through the catalog on a memory store, whose stamps
//! are exact.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bough_catalog::Partition;
use bough_gc::measure_cached;
use bough_gc::{GcReport, Pins, StateCache, Usage, collect, collect_measured_cached, measure};
use bough_io::{ErrorKind, MemoryStorage, Storage};
use bough_names::{BranchName, FileKind, PartitionDir, TableName, classify};
use bough_tree::btree::{self, Mutation, Op};
use bough_tree::cache::PageCache;
use bough_tree::head::{Head, HeadConfig};
use bough_tree::page::leaf::ValueLoc;

const NOW: u64 = 1_700_000_000_000;
const PAGE: usize = 4096;

fn open(storage: &MemoryStorage) -> Partition {
    let cfg = HeadConfig {
        page_size: PAGE as u32,
        file_pages: 16,
        preallocate: 16 * PAGE as u64,
        ..HeadConfig::default()
    };
    Partition::open(
        Arc::new(storage.clone()) as Arc<dyn Storage>,
        PartitionDir::new(TableName::new("t").unwrap(), 0),
        cfg,
        // A fresh cache per open: reads go to the files.
        Arc::new(PageCache::new(16 << 20)),
        true,
        true,
    )
    .unwrap()
}

fn bn(s: &str) -> BranchName {
    BranchName::new(s).unwrap()
}

fn put(head: &mut Head, prefix: &str, range: std::ops::Range<u32>, tag: &str) {
    let muts: Vec<Mutation> = range
        .map(|i| Mutation {
            key: format!("{prefix}{i:06}").into_bytes(),
            op: Op::Put {
                value: format!("{tag}:{i}:{}", "v".repeat(40)).into_bytes(),
                timestamp: NOW,
                expire_at: 0,
            },
        })
        .collect();
    head.commit(&muts, NOW).unwrap();
}

/// Every live entry of a head as `key=value`.
fn read_all(head: &Head) -> Vec<String> {
    let s = head.snapshot();
    let mut c = btree::Cursor::seek(s.as_ref(), s.root, None).unwrap();
    let mut out = Vec::new();
    while let Some(e) = c.next_entry(s.as_ref()).unwrap() {
        if e.is_tombstone() {
            continue;
        }
        let v = match e.value {
            ValueLoc::Inline(v) => String::from_utf8(v).unwrap(),
            other => panic!("unexpected overflow value {other:?}"),
        };
        out.push(format!(
            "{}={v}",
            String::from_utf8(e.key.to_vec()).unwrap()
        ));
    }
    out
}

fn listing(mem: &MemoryStorage) -> Vec<String> {
    mem.list("t.0").unwrap()
}

fn is_state(n: &str) -> bool {
    matches!(
        classify(n),
        FileKind::Manifest(_) | FileKind::Archive(_) | FileKind::History(_) | FileKind::Tag(_)
    )
}

fn state_names(mem: &MemoryStorage) -> BTreeSet<String> {
    listing(mem).into_iter().filter(|n| is_state(n)).collect()
}

fn data_of(mem: &MemoryStorage, branch: &str) -> BTreeSet<String> {
    listing(mem)
        .into_iter()
        .filter(|n| matches!(classify(n), FileKind::Data(d) if d.branch.as_str() == branch))
        .collect()
}

fn deleted(r: &GcReport) -> BTreeSet<String> {
    r.deleted.iter().map(|(n, _)| n.clone()).collect()
}

fn decisions(r: &GcReport) -> (BTreeSet<String>, BTreeMap<String, String>) {
    (
        deleted(r),
        r.kept
            .iter()
            .map(|(n, why)| (n.clone(), format!("{why:?}")))
            .collect(),
    )
}

fn usage_view(u: &Usage) -> BTreeMap<String, (u64, String)> {
    u.files
        .iter()
        .map(|(n, f)| (n.clone(), (f.live_pages, format!("{:?}", f.holders))))
        .collect()
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Rounds of changes to a partition — commits, checkpoints, sealed rewrites (a clean close,
/// which keeps or returns to a length the cache has seen), forks, archives, deletions — each
/// followed by an uncached dry run and a cached collection: they decide the same, measure
/// the same, and the cached one reads exactly the state files that are new or changed.
/// Then everything reads back from a reopened partition.
#[test]
fn cached_walks_decide_what_walks_reading_every_file_decide() {
    let mem = MemoryStorage::new();
    let p = open(&mem);
    let cache = StateCache::new();
    let mut rng = Rng(0x5eed_cafe);
    let mut heads: BTreeMap<String, Head> = BTreeMap::new();
    let mut main = p.open_head(&BranchName::main()).unwrap();
    put(&mut main, "m", 0..300, "main");
    main.checkpoint(NOW).unwrap();
    heads.insert("main".into(), main);
    let mut next_branch = 0;
    let mut stamps_then: BTreeMap<String, bough_io::FileStamp> = BTreeMap::new();
    let mut seen_reuse = false;
    let mut seen_rewrite_same_len = false;
    for round in 0..40 {
        let names: Vec<String> = heads.keys().cloned().collect();
        let name = names[rng.below(names.len())].clone();
        // Some rounds seal main twice in a row: the second seal comes back to the length
        // of the version the first one left, which the walk in between cached.
        let op = if round % 10 >= 8 { 3 } else { rng.below(7) };
        let name = if round % 10 >= 8 {
            "main".to_string()
        } else {
            name
        };
        match op {
            0 | 1 => {
                let h = heads.get_mut(&name).unwrap();
                let start = rng.below(400) as u32;
                put(
                    h,
                    &format!("{name}-"),
                    start..start + 30,
                    &format!("r{round}"),
                );
            }
            2 => heads.get_mut(&name).unwrap().checkpoint(NOW).unwrap(),
            3 => {
                // A commit, then a clean close: the manifest is rewritten as one snapshot
                // record, often as long as the last sealed version.
                let mut h = heads.remove(&name).unwrap();
                // (The same keys each time: the pages the last seal wrote are then held by
                // no state but the one it left.)
                put(
                    &mut h,
                    &format!("{name}-seal"),
                    0..5,
                    &format!("sealed{round}"),
                );
                h.close_clean().unwrap();
                drop(h);
                // Sealed to the length of the version the cache holds, other bytes.
                let file = format!("manifest_{name}_0");
                let sealed = mem.cheap_stamp(&format!("t.0/{file}")).unwrap().unwrap();
                seen_rewrite_same_len |= stamps_then
                    .get(&file)
                    .is_some_and(|s| s.len() == sealed.len() && *s != sealed);
                heads.insert(name.clone(), p.open_head(&bn(&name)).unwrap());
            }
            4 => {
                let child = format!("b{next_branch}");
                next_branch += 1;
                let parent = heads.get_mut(&name).unwrap();
                let mut c = p.create_branch(parent, &bn(&child), NOW).unwrap();
                put(&mut c, &format!("{child}-"), 0..40, &child);
                heads.insert(child, c);
            }
            5 => {
                p.archive(heads.get_mut(&name).unwrap(), NOW + round, NOW + round)
                    .unwrap();
            }
            _ if name != "main" => {
                drop(heads.remove(&name));
                p.delete_branch(&bn(&name)).unwrap();
            }
            _ => {}
        }
        let reads: BTreeMap<String, Vec<String>> = heads
            .iter()
            .map(|(n, h)| (n.clone(), read_all(h)))
            .collect();

        // The reference: every file read.
        let plain = collect(p.files(), &Pins::default(), true).unwrap();
        let plain_usage = measure(p.files(), Pins::default).unwrap();
        let now: BTreeMap<String, bough_io::FileStamp> = state_names(&mem)
            .into_iter()
            .map(|n| {
                let s = mem.cheap_stamp(&format!("t.0/{n}")).unwrap().unwrap();
                (n, s)
            })
            .collect();
        let unchanged = now
            .iter()
            .filter(|(n, s)| stamps_then.get(*n) == Some(*s))
            .count();
        let (r, usage) =
            collect_measured_cached(p.files(), Pins::default, false, Some(&cache)).unwrap();
        assert_eq!(decisions(&r), decisions(&plain), "round {round}");
        assert_eq!(
            usage_view(&usage),
            usage_view(&plain_usage),
            "round {round}"
        );
        assert_eq!(
            (r.manifests_read, r.manifests_reused),
            (now.len() - unchanged, unchanged),
            "round {round}"
        );
        assert_eq!(plain.manifests_read, now.len(), "round {round}");
        seen_reuse |= unchanged > 0 && r.manifests_read > 0;
        // The cache holds the live state files, nothing else.
        assert_eq!(cache.len(), now.len(), "round {round}");
        for n in now.keys() {
            assert!(cache.contains(n), "round {round}: {n}");
        }
        // A measuring walk right after reads nothing, and measures the same.
        let again = measure_cached(p.files(), Pins::default, Some(&cache)).unwrap();
        assert_eq!(
            (again.manifests_read, again.manifests_reused),
            (0, now.len())
        );
        assert_eq!(
            usage_view(&again),
            usage_view(&plain_usage),
            "round {round}"
        );
        stamps_then = now;
        for (n, h) in &heads {
            assert_eq!(read_all(h), reads[n], "round {round}: {n}");
        }
    }
    assert!(seen_reuse, "no round mixed reads and reuse");
    assert!(
        seen_rewrite_same_len,
        "no sealed rewrite kept a cached length: the sequence does not test it"
    );

    // Every branch reads back from the files alone.
    let reads: BTreeMap<String, Vec<String>> = heads
        .iter()
        .map(|(n, h)| (n.clone(), read_all(h)))
        .collect();
    drop(heads);
    drop(p);
    let p = open(&mem);
    for (n, want) in &reads {
        assert_eq!(&read_all(&p.open_head(&bn(n)).unwrap()), want, "{n}");
    }
}

/// A branch deleted between two cached cycles: the next one frees the files only it held
/// (its cached state keeps nothing alive) and its entry leaves the cache.
#[test]
fn a_deleted_branch_frees_its_files_and_leaves_the_cache() {
    let mem = MemoryStorage::new();
    let p = open(&mem);
    let cache = StateCache::new();
    let mut main = p.open_head(&BranchName::main()).unwrap();
    put(&mut main, "m", 0..200, "main");
    let mut feature = p.create_branch(&mut main, &bn("feature"), NOW).unwrap();
    put(&mut feature, "f", 0..600, "feature");
    feature.checkpoint(NOW).unwrap();
    let own = data_of(&mem, "feature");
    assert!(!own.is_empty());
    let (r, _) = collect_measured_cached(p.files(), Pins::default, false, Some(&cache)).unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (2, 0));
    assert!(cache.contains("manifest_feature_0"));
    assert!(deleted(&r).is_disjoint(&own));

    drop(feature);
    p.delete_branch(&bn("feature")).unwrap();
    let (r, _) = collect_measured_cached(p.files(), Pins::default, false, Some(&cache)).unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (0, 1), "{r:?}");
    assert!(own.is_subset(&deleted(&r)), "{own:?} not all in {r:?}");
    assert!(data_of(&mem, "feature").is_empty());
    assert!(!cache.contains("manifest_feature_0"));
    assert_eq!(cache.len(), 1);
    assert!(read_all(&main).len() == 200);
}

/// A state file that does not replay stops the walk every time (it is never cached), and a
/// cached file that is damaged afterwards — the same length, other bytes — is read again and
/// stops the walk too: the cache never hides a change.
#[test]
fn damage_is_never_cached_nor_hidden_by_the_cache() {
    let mem = MemoryStorage::new();
    let p = open(&mem);
    let cache = StateCache::new();
    let mut main = p.open_head(&BranchName::main()).unwrap();
    put(&mut main, "m", 0..100, "main");
    let archive = p.archive(&mut main, NOW, NOW).unwrap().to_string();
    let path = format!("t.0/{archive}");
    let good = mem.read_file(&path, 1 << 20).unwrap();
    let (r, _) = collect_measured_cached(p.files(), Pins::default, true, Some(&cache)).unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (2, 0));
    assert!(cache.contains(&archive));

    // Damaged after it was cached: as long as before, other bytes.
    mem.write_atomic(&path, &vec![0u8; good.len()]).unwrap();
    for _ in 0..2 {
        let e = collect_measured_cached(p.files(), Pins::default, true, Some(&cache)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
        assert!(e.to_string().contains(&archive), "{e}");
        assert!(!cache.contains(&archive));
        let e = measure_cached(p.files(), Pins::default, Some(&cache)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    }
    // Repaired: read, and cached again.
    mem.write_atomic(&path, &good).unwrap();
    let (r, _) = collect_measured_cached(p.files(), Pins::default, true, Some(&cache)).unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (1, 1));
    assert!(cache.contains(&archive));
}

/// One cache used for two partitions keeps no state of the first for the second.
#[test]
fn a_cache_moved_to_another_directory_starts_afresh() {
    let mem = MemoryStorage::new();
    let cache = StateCache::new();
    let p = open(&mem);
    let mut main = p.open_head(&BranchName::main()).unwrap();
    put(&mut main, "m", 0..50, "main");
    let (r, _) = collect_measured_cached(p.files(), Pins::default, true, Some(&cache)).unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (1, 0));
    let other = Partition::open(
        Arc::new(mem.clone()) as Arc<dyn Storage>,
        PartitionDir::new(TableName::new("u").unwrap(), 0),
        HeadConfig {
            page_size: PAGE as u32,
            file_pages: 16,
            preallocate: 16 * PAGE as u64,
            ..HeadConfig::default()
        },
        Arc::new(PageCache::new(16 << 20)),
        true,
        true,
    )
    .unwrap();
    let mut m2 = other.open_head(&BranchName::main()).unwrap();
    put(&mut m2, "m", 0..50, "main");
    let (r, _) = collect_measured_cached(other.files(), Pins::default, true, Some(&cache)).unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (1, 0));
    let (r, _) = collect_measured_cached(p.files(), Pins::default, true, Some(&cache)).unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (1, 0));
}

/// `CURRENT_TERM` records are kept like states: an unchanged record is not read again, a
/// damaged one (as long as before, other bytes) is read and stops the walk every time, and
/// one a new term replaced is followed — the walk protects the new term's manifest and data
/// and decides what a walk reading every file decides.
#[test]
fn term_records_are_kept_and_a_change_is_never_hidden() {
    let mem = MemoryStorage::new();
    let p = open(&mem);
    let cache = StateCache::new();
    let mut main = p.open_head(&BranchName::main()).unwrap();
    put(&mut main, "m", 0..100, "main");
    let mut feature = p.create_branch(&mut main, &bn("feature"), NOW).unwrap();
    put(&mut feature, "f", 0..300, "feature");
    collect_measured_cached(p.files(), Pins::default, true, Some(&cache)).unwrap();
    assert_eq!(cache.terms_len(), 2);
    let before = mem.stats().snapshot();
    let (r, _) = collect_measured_cached(p.files(), Pins::default, true, Some(&cache)).unwrap();
    assert_eq!((r.manifests_read, r.manifests_reused), (0, 2));
    let files_read = mem.stats().snapshot().since(&before).reads;
    assert_eq!(files_read, 0, "an unchanged partition was read again");

    let path = "t.0/CURRENT_TERM.feature";
    let good = mem.read_file(path, 4096).unwrap();
    mem.write_atomic(path, &vec![0u8; good.len()]).unwrap();
    for _ in 0..2 {
        let e = collect_measured_cached(p.files(), Pins::default, true, Some(&cache)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
        assert!(e.to_string().contains("CURRENT_TERM.feature"), "{e}");
    }
    mem.write_atomic(path, &good).unwrap();

    // A new term: the record now names manifest_feature_1, and the new term's files are
    // its own.
    let mut next = p.open_new_term(&mut feature, NOW).unwrap();
    drop(feature);
    put(&mut next, "g", 0..300, "next");
    next.checkpoint(NOW).unwrap();
    let uncached = collect(p.files(), &Pins::default(), true).unwrap();
    let (r, _) = collect_measured_cached(p.files(), Pins::default, false, Some(&cache)).unwrap();
    assert_eq!(decisions(&r), decisions(&uncached));
    assert_eq!(cache.terms_len(), 2);
    assert_eq!(read_all(&next).len(), 100 + 300 + 300);
    drop(next);
    let p = open(&mem);
    let next = p.open_head(&bn("feature")).unwrap();
    assert_eq!(next.term(), 1);
    assert_eq!(read_all(&next).len(), 700);
}
