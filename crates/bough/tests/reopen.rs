//! Dropping every handle of a store releases its directory before the drop returns, so the
//! next open succeeds at once — also when a background maintenance tick is running at that
//! moment. The tick holds the store alive; before the fix the store shut down (and its
//! `LOCK` was released) only when the tick ended, on the maintenance thread, and an open
//! right after the drop failed with "the store is open elsewhere" (the side-by-side
//! benchmark's cold rounds hit it). `close()` also waits for a running tick, so no GC of
//! this instance deletes files after another process may have opened the directory.

use bough::{Options, Store};

/// A store whose maintenance runs every millisecond over enough branches that a tick takes
/// a while: a drop lands inside a tick in most rounds.
fn busy(dir: &std::path::Path) -> Options {
    Options::new(dir).maintenance_interval_ms(1)
}

fn fill(store: &Store) {
    let part = store.partition("t", 0).expect("partition");
    let main = part.branch("main").expect("main");
    for i in 0..200u32 {
        main.put_blocking(format!("k{i:04}"), vec![7u8; 512])
            .expect("put");
    }
    for b in 0..40u32 {
        part.create_branch(&format!("b{b}"), "main")
            .expect("branch");
    }
}

#[test]
fn dropping_every_handle_releases_the_directory_even_during_a_maintenance_tick() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(&Store::open(busy(dir.path())).expect("first open"));
    for round in 0..60u32 {
        let store = Store::open(busy(dir.path()))
            .unwrap_or_else(|e| panic!("round {round}: reopen right after a drop: {e}"));
        let main = store
            .partition("t", 0)
            .expect("partition")
            .branch("main")
            .expect("main");
        main.put_blocking(format!("round{round:03}"), "v")
            .expect("put");
        // Let ticks start, then drop in the middle of one (most rounds).
        std::thread::sleep(std::time::Duration::from_millis(u64::from(round % 4)));
        drop(main);
        drop(store);
    }
    let store = Store::open(Options::new(dir.path())).expect("final open");
    let main = store
        .partition("t", 0)
        .expect("partition")
        .branch("main")
        .expect("main");
    for round in 0..60u32 {
        assert!(
            main.get_blocking(format!("round{round:03}"))
                .expect("get")
                .is_some(),
            "round {round}'s acknowledged write is missing"
        );
    }
    store.close().expect("close");
}

#[test]
fn close_frees_the_directory_during_ticks_while_a_handle_is_still_held() {
    let dir = tempfile::tempdir().expect("tempdir");
    fill(&Store::open(busy(dir.path())).expect("first open"));
    for round in 0..40u32 {
        let store = Store::open(busy(dir.path()))
            .unwrap_or_else(|e| panic!("round {round}: reopen right after close: {e}"));
        std::thread::sleep(std::time::Duration::from_millis(u64::from(round % 3)));
        // A handle outlives the close: the directory must be free anyway.
        let kept = store.clone();
        store.close().expect("close");
        let again = Store::open(Options::new(dir.path()).maintenance_interval_ms(0))
            .unwrap_or_else(|e| panic!("round {round}: open after close: {e}"));
        again.close().expect("close");
        drop(kept);
    }
}
