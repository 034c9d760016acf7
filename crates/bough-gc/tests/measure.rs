//! `measure`: per data file, the union of the pages every referent reaches (a shared page
//! counted once) and who holds the file, on a partition driven through the catalog.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bough_catalog::Partition;
use bough_gc::{Holders, Pins, Referent, Usage, collect, collect_measured, measure};
use bough_io::{MemoryStorage, Storage};
use bough_names::{BranchName, PartitionDir, TableName};
use bough_tree::btree::{Mutation, Op};
use bough_tree::cache::PageCache;
use bough_tree::head::{Head, HeadConfig, TreeSnapshot};

const NOW: u64 = 1_700_000_000_000;

fn open(storage: &MemoryStorage) -> Partition {
    let cfg = HeadConfig {
        page_size: 4096,
        file_pages: 32,
        preallocate: 32 * 4096,
        ..HeadConfig::default()
    };
    Partition::open(
        Arc::new(storage.clone()) as Arc<dyn Storage>,
        PartitionDir::new(TableName::new("t").unwrap(), 0),
        cfg,
        Arc::new(PageCache::new(16 << 20)),
        true,
        true,
    )
    .unwrap()
}

fn bn(s: &str) -> BranchName {
    BranchName::new(s).unwrap()
}

fn put(head: &mut Head, keys: impl Iterator<Item = u32>, tag: &str) {
    let muts: Vec<Mutation> = keys
        .map(|i| Mutation {
            key: format!("k{i:06}").into_bytes(),
            op: Op::Put {
                value: format!("{tag}:{i}:{}", "x".repeat(60)).into_bytes(),
                timestamp: NOW,
                expire_at: 0,
            },
        })
        .collect();
    head.commit(&muts, NOW).unwrap();
}

/// (file name, page index) of every page a state reaches.
fn pages(p: &Partition, s: &TreeSnapshot) -> BTreeSet<(String, u32)> {
    let mut out = BTreeSet::new();
    s.for_each_page(&mut |a| {
        let name = p.files().resolve(&s.ranges, a.file_id()).unwrap();
        out.insert((name.to_string(), a.page_index()));
    })
    .unwrap();
    out
}

fn per_file(pages: &BTreeSet<(String, u32)>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (n, _) in pages {
        *out.entry(n.clone()).or_default() += 1;
    }
    out
}

fn live(u: &Usage) -> BTreeMap<String, u64> {
    u.files
        .iter()
        .map(|(n, f)| (n.clone(), f.live_pages))
        .collect()
}

#[test]
fn shared_pages_count_once_and_holders_are_named() {
    let storage = MemoryStorage::new();
    let p = open(&storage);
    let mut main = p.open_head(&bn("main")).unwrap();
    put(&mut main, 0..6000, "v0");
    let mut feature = p.create_branch(&mut main, &bn("feature"), NOW).unwrap();

    // Right after the fork both heads (and feature's merge base) reach the same pages: the
    // union is main's pages, not twice as many, and every file has several holders.
    let u = measure(p.files(), Pins::default).unwrap();
    let at_fork = pages(&p, &main.snapshot());
    assert_eq!(live(&u), per_file(&at_fork));
    assert!(
        u.files.len() >= 3,
        "the load spans several files: {:?}",
        u.files
    );
    for (n, f) in &u.files {
        assert_eq!(f.holders, Holders::Many, "{n}");
        assert!(!u.held_only_by(n, &bn("main"), 0), "{n}");
        assert_eq!(f.live_bytes, f.live_pages * 4096);
    }

    // Both diverge: the union is exactly the pages either head reaches plus the fork state
    // (feature's merge base with main pins it); main's new files are main's alone, the
    // fork-time files stay shared.
    put(&mut main, (0..3000).filter(|i| i % 3 == 0), "main1");
    put(&mut feature, (0..3000).filter(|i| i % 5 == 0), "feat1");
    let old_view = main.snapshot();
    put(&mut main, (0..3000).filter(|i| i % 7 == 0), "main2");
    let mp = pages(&p, &main.snapshot());
    let fp = pages(&p, &feature.snapshot());
    let union: BTreeSet<_> = mp.union(&fp).chain(&at_fork).cloned().collect();
    let u = measure(p.files(), Pins::default).unwrap();
    assert_eq!(live(&u), per_file(&union));
    let main_only: BTreeSet<String> = per_file(&mp)
        .into_keys()
        .filter(|n| !per_file(&fp).contains_key(n) && !per_file(&at_fork).contains_key(n))
        .collect();
    assert!(!main_only.is_empty());
    for n in &main_only {
        assert_eq!(
            u.files[n].holders,
            Holders::One(Referent::Head {
                branch: bn("main"),
                term: 0
            }),
            "{n}"
        );
        assert!(u.held_only_by(n, &bn("main"), 0));
        assert!(!u.held_only_by(n, &bn("feature"), 0));
    }
    for n in per_file(&at_fork).keys() {
        assert!(!u.held_only_by(n, &bn("main"), 0), "{n} is shared");
        assert!(!u.held_only_by(n, &bn("feature"), 0), "{n} is shared");
    }
    // A file the walk did not see had no holder: it is anyone's to compact.
    assert!(u.held_only_by("data_999_main_0", &bn("main"), 0));

    // A reader's old snapshot adds its pages to the union but holds nothing durably.
    let pins = || Pins {
        snapshots: vec![old_view.clone()],
        ..Pins::default()
    };
    let with_reader = measure(p.files(), pins).unwrap();
    let op = pages(&p, &old_view);
    let union: BTreeSet<_> = union.union(&op).cloned().collect();
    assert_eq!(live(&with_reader), per_file(&union));
    for n in &main_only {
        assert!(with_reader.held_only_by(n, &bn("main"), 0), "{n}");
    }
    assert!(with_reader.files.values().any(|f| f.read_by_snapshot));

    // An archive is a durable holder: main's files are no longer main's alone.
    p.archive(&mut main, NOW, NOW).unwrap();
    let archived = measure(p.files(), Pins::default).unwrap();
    for n in per_file(&pages(&p, &main.snapshot())).keys() {
        assert!(!archived.held_only_by(n, &bn("main"), 0), "{n}");
    }

    // Measuring while collecting changes nothing about what GC decides.
    let plain = collect(p.files(), &Pins::default(), true).unwrap();
    let (report, measured) = collect_measured(p.files(), Pins::default, true).unwrap();
    assert_eq!(plain.deleted, report.deleted);
    assert_eq!(plain.kept, report.kept);
    assert_eq!(live(&measured), live(&archived));
    assert_eq!(measured.mapping_pages_visited, report.mapping_pages_visited);
}
