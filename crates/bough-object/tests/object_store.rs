//! The `ObjectStore` contract, checked on every implementation: the in-process CAS store,
//! opendal's memory service (no If-Match), and a real S3 server (moto, started by
//! `.ci/run`).

mod common;

use std::sync::Arc;

use bough_object::{
    CloudConfig, MemoryObjectStore, ObjectError, ObjectStore, OpendalStore, Service, list_all,
};

fn contract(s: &dyn ObjectStore) {
    let g = s.guarantees();
    assert!(matches!(
        s.get("p/missing"),
        Err(ObjectError::NotFound { .. })
    ));
    assert!(matches!(
        s.head("p/missing"),
        Err(ObjectError::NotFound { .. })
    ));
    s.put("p/a", b"hello world").expect("put");
    let (body, meta) = s.get("p/a").expect("get");
    assert_eq!(body, b"hello world");
    assert_eq!(meta.size, 11);
    assert_eq!(s.get_range("p/a", 6, 5).expect("range"), b"world");
    assert_eq!(s.head("p/a").expect("head").size, 11);
    // Create-if-absent: the second create loses, the object keeps the first body.
    s.put_if_absent("p/b", b"one").expect("create");
    assert!(matches!(
        s.put_if_absent("p/b", b"two"),
        Err(ObjectError::PreconditionFailed { .. })
    ));
    assert_eq!(s.get("p/b").expect("get").0, b"one");
    if g.compare_and_swap {
        let etag = s.head("p/b").expect("head").etag.expect("etag");
        let new = s
            .put_if_match("p/b", b"three", &etag)
            .expect("cas")
            .expect("new etag");
        assert_ne!(new, etag);
        assert!(matches!(
            s.put_if_match("p/b", b"four", &etag),
            Err(ObjectError::PreconditionFailed { .. })
        ));
        assert!(
            matches!(
                s.put_if_match("p/none", b"x", &etag),
                Err(ObjectError::PreconditionFailed { .. })
            ),
            "If-Match on a missing object fails"
        );
        assert_eq!(s.get("p/b").expect("get").0, b"three");
    } else {
        assert!(matches!(
            s.put_if_match("p/b", b"x", "\"e\""),
            Err(ObjectError::Unsupported { .. })
        ));
    }
    // Listing: delimiter folds sub-prefixes; pagination visits every key once.
    for i in 0..25 {
        s.put(&format!("p/list/k{i:02}"), b"v").expect("put");
    }
    s.put("p/list/sub/x", b"v").expect("put");
    let page = s.list("p/", true, None, 100).expect("list");
    let keys: Vec<&str> = page.objects.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(keys, vec!["p/a", "p/b"]);
    assert_eq!(page.prefixes, vec!["p/list/".to_string()]);
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = s
            .list("p/list/", false, after.as_deref(), 7)
            .expect("list page");
        assert!(page.objects.len() <= 7);
        seen.extend(page.objects.into_iter().map(|o| o.key));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(seen.len(), 26, "{seen:?}");
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, seen);
    assert_eq!(list_all(s, "p/list/").expect("all").len(), 26);
    // A prefix that is not a "directory" lists the keys starting with it (numbered
    // versions are found this way).
    let keys: Vec<String> = list_all(s, "p/list/k1")
        .expect("prefix")
        .into_iter()
        .map(|o| o.key)
        .collect();
    assert_eq!(keys.len(), 10, "{keys:?}");
    assert!(keys.iter().all(|k| k.starts_with("p/list/k1")), "{keys:?}");
    assert!(list_all(s, "p/list/k9").expect("none").is_empty());
    // Deletes: a missing key is fine; a batch removes all.
    s.delete("p/a").expect("delete");
    s.delete("p/a").expect("delete missing");
    let all: Vec<String> = list_all(s, "p/")
        .expect("all")
        .into_iter()
        .map(|o| o.key)
        .collect();
    s.delete_batch(&all).expect("batch");
    assert!(list_all(s, "p/").expect("all").is_empty());
}

#[test]
fn memory_cas_store_meets_the_contract() {
    contract(&MemoryObjectStore::new());
}

#[test]
fn opendal_memory_service_meets_the_contract_without_cas() {
    let s = OpendalStore::new(&CloudConfig {
        service: Service::Memory,
        ..CloudConfig::default()
    })
    .expect("opendal memory");
    assert!(!s.guarantees().compare_and_swap);
    assert!(s.guarantees().conditional_create);
    contract(&s);
}

#[test]
fn opendal_fs_service_meets_the_contract_without_cas() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = OpendalStore::new(&CloudConfig {
        service: Service::Fs,
        root: dir.path().display().to_string(),
        test_only: true,
        ..CloudConfig::default()
    })
    .expect("opendal fs");
    let g = s.guarantees();
    assert!(g.conditional_create && !g.compare_and_swap && !g.atomic_put && !g.durable);
    contract(&s);
}

#[test]
fn s3_server_meets_the_contract() {
    let Some((s, _)) = common::s3_store("s3_server_meets_the_contract") else {
        return;
    };
    let g = s.guarantees();
    assert!(g.compare_and_swap && g.conditional_create && g.atomic_put && g.durable);
    contract(s.as_ref());
}

/// Racing conditional writes: exactly one creator and one CAS winner per round.
fn races(s: Arc<dyn ObjectStore>) {
    for round in 0..10 {
        let key = format!("race/{round}");
        let winners: usize = std::thread::scope(|scope| {
            let hs: Vec<_> = (0..8)
                .map(|i| {
                    let s = s.clone();
                    let key = key.clone();
                    scope.spawn(move || s.put_if_absent(&key, format!("{i}").as_bytes()).is_ok())
                })
                .collect();
            hs.into_iter()
                .map(|h| usize::from(h.join().unwrap_or(false)))
                .sum()
        });
        assert_eq!(winners, 1, "round {round}: create-if-absent winners");
        let etag = s.head(&key).expect("head").etag.expect("etag");
        let winners: usize = std::thread::scope(|scope| {
            let hs: Vec<_> = (0..8)
                .map(|i| {
                    let s = s.clone();
                    let key = key.clone();
                    let etag = etag.clone();
                    scope.spawn(move || {
                        s.put_if_match(&key, format!("cas{i}").as_bytes(), &etag)
                            .is_ok()
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| usize::from(h.join().unwrap_or(false)))
                .sum()
        });
        assert_eq!(winners, 1, "round {round}: compare-and-swap winners");
    }
}

#[test]
fn conditional_write_races_have_one_winner_in_process() {
    races(Arc::new(MemoryObjectStore::new()));
}

#[test]
fn conditional_write_races_have_one_winner_on_s3() {
    let Some((s, _)) = common::s3_store("conditional_write_races_have_one_winner_on_s3") else {
        return;
    };
    races(s);
}
