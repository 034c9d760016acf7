//! Table-wide branch operations through the store's branch registry: the records they
//! leave, an interrupted operation finished at open, damage reported, names reserved, and
//! the same in cloud mode.

use std::sync::Arc;

use bough::check::{CheckOptions, Problem};
use bough::object::{CloudConfig, MemoryObjectStore, ObjectStore};
use bough::{ConflictPolicy, ErrorKind, ManualClock, Options, Store};

const T0: u64 = 1_700_000_000_000;

fn local(dir: &std::path::Path) -> Store {
    Store::open(Options::new(dir).maintenance_interval_ms(0)).unwrap()
}

fn three_partitions(store: &Store) {
    let t = store.table("t").unwrap();
    for p in 0..3 {
        t.partition(p)
            .unwrap()
            .branch("main")
            .unwrap()
            .put_blocking("k", format!("v{p}"))
            .unwrap();
    }
}

fn root_names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("tableop_"))
        .collect();
    v.sort();
    v
}

#[test]
fn each_operation_leaves_an_intent_and_an_outcome_and_open_prunes_all_but_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let store = local(dir.path());
    three_partitions(&store);
    let t = store.table("t").unwrap();
    t.create_branch("feature", "main").unwrap();
    t.partition(1)
        .unwrap()
        .branch("feature")
        .unwrap()
        .put_blocking("f", "1")
        .unwrap();
    let reports = t.merge("feature", "main", ConflictPolicy::Fail).unwrap();
    assert_eq!(reports.len(), 3);
    assert!(reports.iter().all(|(_, r)| r.committed || r.applied == 0));
    assert!(
        t.partition(1)
            .unwrap()
            .branch("main")
            .unwrap()
            .get_blocking("f")
            .unwrap()
            .is_some()
    );
    t.archive("feature").unwrap();
    t.delete_branch("feature").unwrap();
    assert_eq!(
        root_names(dir.path()),
        [
            "tableop_0",
            "tableop_0_end",
            "tableop_1",
            "tableop_1_end",
            "tableop_2",
            "tableop_2_end",
            "tableop_3",
            "tableop_3_end"
        ]
    );
    let status = store.table_ops().unwrap();
    assert_eq!((status.recorded, status.unresolved.len()), (4, 0));
    store.close().unwrap();
    let store = local(dir.path());
    assert_eq!(root_names(dir.path()), ["tableop_3", "tableop_3_end"]);
    // The sequence goes on above the kept record.
    store
        .table("t")
        .unwrap()
        .create_branch("again", "main")
        .unwrap();
    assert!(root_names(dir.path()).contains(&"tableop_4_end".to_string()));
    let report = store.check(&CheckOptions::default()).unwrap();
    assert!(report.is_clean(true), "{:?}", report.findings);
}

#[test]
fn an_interrupted_create_is_finished_at_open_on_every_partition() {
    let dir = tempfile::tempdir().unwrap();
    let store = local(dir.path());
    three_partitions(&store);
    // The crash: the intent is durable, partition 0 acted, 1 and 2 did not.
    store
        .partition("t", 0)
        .unwrap()
        .create_branch("feature", "main")
        .unwrap();
    store.close().unwrap();
    let intent = bough_manifest::TableOpIntent {
        kind: bough_manifest::TableOpKind::Create,
        table: "t".into(),
        branch: "feature".into(),
        other: "main".into(),
        timestamp: T0,
        policy: 0,
        partitions: vec![0, 1, 2],
    };
    std::fs::write(dir.path().join("tableop_0"), intent.encode(0)).unwrap();
    let store = local(dir.path());
    for p in 0..3 {
        let b = store.partition("t", p).unwrap().branch("feature").unwrap();
        assert_eq!(
            b.get_blocking("k").unwrap().unwrap().value,
            format!("v{p}").into_bytes(),
            "partition {p}"
        );
    }
    assert!(store.table_ops().unwrap().unresolved.is_empty());
    assert!(dir.path().join("tableop_0_end").exists());
}

#[test]
fn a_damaged_record_is_reported_with_its_offset_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = local(dir.path());
    three_partitions(&store);
    store.close().unwrap();
    std::fs::write(dir.path().join("tableop_0"), [0u8; 64]).unwrap();
    let store = local(dir.path());
    let report = store.check(&CheckOptions::default()).unwrap();
    let why = report
        .findings
        .iter()
        .find_map(|f| match &f.problem {
            Problem::TableOpUnreadable { why } if f.file == "tableop_0" => Some(why.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{:?}", report.findings));
    assert!(why.contains("offset 8"), "{why}");
    assert!(
        report
            .findings
            .iter()
            .any(|f| matches!(f.problem, Problem::TableOpUnresolved { seq: 0 }))
    );
    store.close().unwrap();
    // Never deleted, and the next operation takes the next number.
    let store = local(dir.path());
    assert!(dir.path().join("tableop_0").exists());
    store
        .table("t")
        .unwrap()
        .create_branch("x", "main")
        .unwrap();
    assert!(dir.path().join("tableop_1_end").exists());
}

#[test]
fn the_name_is_checked_once_for_the_table() {
    let store = Store::open(Options::in_memory()).unwrap();
    three_partitions(&store);
    store
        .partition("t", 2)
        .unwrap()
        .create_branch("x", "main")
        .unwrap();
    let e = store
        .table("t")
        .unwrap()
        .create_branch("x", "main")
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::AlreadyExists);
    assert!(e.to_string().contains("t.2@x"), "{e}");
    // Nothing was recorded for a refused create.
    assert_eq!(store.table_ops().unwrap().recorded, 0);
}

#[test]
fn table_wide_operations_work_in_cloud_mode_and_survive_a_cold_restart() {
    let objects: Arc<dyn ObjectStore> = Arc::new(MemoryObjectStore::new());
    let open = |cache: &std::path::Path| {
        let settings = Options::new(cache)
            .maintenance_interval_ms(0)
            .data_file_size(64 * 4096)
            .object(CloudConfig {
                min_delete_age_ms: 0,
                ..CloudConfig::default()
            });
        Store::open(
            Store::builder(settings)
                .object_store(objects.clone())
                .clock(Arc::new(ManualClock::new(T0))),
        )
        .unwrap()
    };
    let cache = tempfile::tempdir().unwrap();
    let store = open(cache.path());
    three_partitions(&store);
    let t = store.table("t").unwrap();
    t.create_branch("feature", "main").unwrap();
    t.archive("feature").unwrap();
    assert_eq!(store.table_ops().unwrap().recorded, 2);
    store.close().unwrap();
    let cache2 = tempfile::tempdir().unwrap();
    let store = open(cache2.path());
    let status = store.table_ops().unwrap();
    assert!(status.unresolved.is_empty(), "{status:?}");
    for p in 0..3 {
        let b = store.partition("t", p).unwrap().branch("feature").unwrap();
        assert_eq!(b.archives().unwrap().len(), 1);
    }
    store.table("t").unwrap().delete_branch("feature").unwrap();
    for p in 0..3 {
        assert_eq!(
            store.partition("t", p).unwrap().branches().unwrap(),
            ["main"]
        );
    }
}
