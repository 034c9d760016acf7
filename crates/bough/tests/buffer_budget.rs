//! The store-wide bound on write buffers (`Options::write_buffer_total_bytes`): however
//! many branches are written, their buffers together stay below twice the bound plus one
//! commit, the checkpoints it forces are counted, and nothing acknowledged is lost or read
//! wrong — before and after a reopen. Without the bound the same writes hold every
//! branch's buffer (the control: the bound is what keeps memory down).

mod common;

use bough::{Backend, Options, Store, WriteBatch};

const BRANCHES: usize = 8;
const BATCHES: u32 = 9;
const KEYS_PER_BATCH: u32 = 400;
const VALUE: usize = 200;

fn opts(dir: &std::path::Path, total: u64, backend: Backend) -> Options {
    Options::new(dir)
        .backend(backend)
        .maintenance_interval_ms(0)
        // Larger than what one branch writes here: only the store-wide bound checkpoints.
        .write_buffer_bytes(4 << 20)
        .write_buffer_total_bytes(total)
}

fn value(branch: usize, batch: u32, i: u32) -> Vec<u8> {
    let mut v = format!("{branch}:{batch}:{i}:").into_bytes();
    v.resize(VALUE, b'.');
    v
}

/// Writes every branch in turn, one batch each per round; returns the most bytes the
/// store's buffers held after any commit.
fn write_all(store: &Store) -> u64 {
    let p = store.partition("bb", 0).expect("partition");
    for b in 1..BRANCHES {
        p.create_branch(&format!("b{b}"), "main").expect("branch");
    }
    let mut peak = 0;
    for batch in 0..BATCHES {
        for b in 0..BRANCHES {
            let name = if b == 0 {
                "main".to_string()
            } else {
                format!("b{b}")
            };
            let mut w = WriteBatch::new();
            for i in 0..KEYS_PER_BATCH {
                w.put(format!("k{batch:02}{i:04}"), value(b, batch, i));
            }
            p.branch(&name)
                .and_then(|br| br.write_blocking(w))
                .expect("write");
            peak = peak.max(store.write_buffer_usage().bytes);
        }
    }
    peak
}

fn check_all(store: &Store, test: &str) {
    let p = store.partition("bb", 0).expect("partition");
    for b in 0..BRANCHES {
        let name = if b == 0 {
            "main".to_string()
        } else {
            format!("b{b}")
        };
        let br = p.branch(&name).expect("branch");
        for batch in 0..BATCHES {
            for i in (0..KEYS_PER_BATCH).step_by(37) {
                let got = br.get_blocking(format!("k{batch:02}{i:04}")).expect("get");
                assert_eq!(
                    got.map(|v| v.value),
                    Some(value(b, batch, i)),
                    "[{test}] {name} batch {batch} key {i}"
                );
            }
        }
    }
}

#[test]
fn the_store_wide_bound_keeps_every_buffer_together_below_twice_it() {
    let one_batch = u64::from(KEYS_PER_BATCH) * (VALUE as u64 + 7 + 48);
    for backend in [Backend::Pread, Backend::IoUring] {
        let test = format!("buffer_budget_{backend:?}");
        let dir = tempfile::tempdir().expect("tempdir");
        let total: u64 = 1 << 20;
        let store = common::open(&test, opts(dir.path(), total, backend));
        let peak = write_all(&store);
        let usage = store.write_buffer_usage();
        eprintln!("[{test}] peak {peak} B, {usage:?}");
        assert_eq!(usage.limit, Some(total));
        assert!(
            peak <= 2 * total + one_batch,
            "[{test}] buffers held {peak} B together, bound {total} B"
        );
        assert!(usage.forced_checkpoints > 0, "[{test}] {usage:?}");
        check_all(&store, &test);
        store.close().expect("close");
        assert_eq!(
            store.write_buffer_usage().bytes,
            0,
            "closed heads hold nothing"
        );

        let store = common::open(&test, opts(dir.path(), total, backend));
        check_all(&store, &test);
        store.close().expect("close");
    }
}

#[test]
fn without_the_bound_every_branch_keeps_its_buffer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = common::open(
        "buffer_budget_unbounded",
        opts(dir.path(), 0, Backend::Pread),
    );
    let peak = write_all(&store);
    let usage = store.write_buffer_usage();
    eprintln!("[buffer_budget_unbounded] peak {peak} B, {usage:?}");
    assert_eq!(usage.limit, None);
    assert_eq!(usage.forced_checkpoints, 0);
    let written = (BRANCHES as u64) * u64::from(BATCHES * KEYS_PER_BATCH) * VALUE as u64;
    assert!(
        peak >= written,
        "every write is still buffered: {peak} < {written}"
    );
    check_all(&store, "buffer_budget_unbounded");
}

/// A store over `opts` with a 16 KiB write buffer and no maintenance timer, and its
/// branch `main` of partition `bb`.
fn open_16k(opts: Options) -> (Store, bough::Branch) {
    let store =
        Store::open(opts.maintenance_interval_ms(0).write_buffer_bytes(16 << 10)).expect("open");
    let main = store
        .partition("bb", 0)
        .and_then(|p| p.branch("main"))
        .expect("main");
    (store, main)
}

/// 8 batches of ~8 KiB: into a 16 KiB buffer, every other commit fills it.
fn write_eight_batches(main: &bough::Branch) {
    for batch in 0..8u32 {
        let mut w = WriteBatch::new();
        for i in 0..40u32 {
            w.put(format!("k{batch}{i:03}"), value(0, batch, i));
        }
        main.write_blocking(w).expect("write");
    }
}

/// A commit that fills its branch's buffer checkpoints it before it is acknowledged, and
/// the store counts those waits (the back-pressure a writer sees); a checkpoint asked for
/// on demand is not one of them.
#[test]
fn checkpoints_inside_commits_are_counted_with_their_wait() {
    let dir = tempfile::tempdir().expect("dir");
    let (store, main) = open_16k(Options::new(dir.path()).background_checkpoints(false));
    let mut w = WriteBatch::new();
    w.put("k", "v");
    main.write_blocking(w).expect("write");
    main.checkpoint_blocking().expect("checkpoint");
    let quiet = store.write_buffer_usage();
    assert_eq!(
        quiet.commit_checkpoints, 0,
        "an on-demand checkpoint is no commit's wait"
    );
    write_eight_batches(&main);
    let usage = store.write_buffer_usage();
    assert!(
        (3..=8).contains(&usage.commit_checkpoints),
        "{} checkpoints inside commits",
        usage.commit_checkpoints
    );
    assert!(usage.commit_checkpoint_wait > std::time::Duration::ZERO);
    assert!(usage.bytes < 16 << 10, "the last fill was checkpointed");
    assert_eq!(usage.background_checkpoints, 0);
}

/// With checkpoints in the background, the commit that fills its buffer starts one and
/// returns; the store counts them apart from the checkpoints commits waited for, and every
/// write reads back before and after the next checkpoint installs them.
#[test]
fn background_checkpoints_are_counted_apart_from_the_waits_of_commits() {
    let dir = tempfile::tempdir().expect("dir");
    let (store, main) = open_16k(Options::new(dir.path()));
    write_eight_batches(&main);
    let usage = store.write_buffer_usage();
    assert!(
        usage.background_checkpoints >= 2,
        "{} background checkpoints",
        usage.background_checkpoints
    );
    let read = |main: &bough::Branch| {
        for batch in 0..8u32 {
            for i in 0..40u32 {
                let got = main.get_blocking(format!("k{batch}{i:03}")).expect("get");
                assert_eq!(got.map(|v| v.value), Some(value(0, batch, i)));
            }
        }
    };
    read(&main);
    main.checkpoint_blocking().expect("checkpoint");
    assert_eq!(store.write_buffer_usage().bytes, 0);
    read(&main);
}

/// A background checkpoint's result is installed as soon as it is ready, with no further
/// operation on the branch: the buffer drains by itself (reads would otherwise probe the
/// frozen runs until the next write or maintenance pass).
#[test]
fn a_finished_background_checkpoint_is_installed_without_another_operation() {
    let dir = tempfile::tempdir().expect("dir");
    let (store, main) = open_16k(Options::new(dir.path()));
    write_eight_batches(&main);
    assert!(store.write_buffer_usage().background_checkpoints > 0);
    // Bounded: a checkpoint of 16 KiB takes milliseconds; the bound only keeps a broken
    // build from hanging.
    let mut waited = 0;
    while store.write_buffer_usage().bytes > 16 << 10 && waited < 30_000 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        waited += 10;
    }
    assert!(
        store.write_buffer_usage().bytes <= 16 << 10,
        "still {} bytes buffered after {waited} ms",
        store.write_buffer_usage().bytes
    );
}
