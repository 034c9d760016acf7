//! Compaction of a head whose write buffer holds writes: the relocation's manifest record
//! keeps the buffer (the tree at the same `covered` version, the `LOG` in force), reads and
//! recovery see every acknowledged write, and a power loss at any of its syncs loses none.

use std::collections::BTreeMap;
use std::sync::Arc;

use bough_io::memory::{CrashPolicy, MemoryStorage};
use bough_io::{FaultInjector, FaultOp, RandomCrash, Storage};
use bough_names::{BranchName, FileId};
use bough_tree::btree::{Mutation, Op};
use bough_tree::cache::PageCache;
use bough_tree::files::FileTable;
use bough_tree::head::{Head, HeadConfig, TreeSnapshot};
use bough_tree::page::leaf::ValueLoc;
use bough_tree::wal::LogConfig;

fn cfg() -> HeadConfig {
    HeadConfig {
        file_pages: 16,
        preallocate: 16 * 4096,
        checkpoint_chunks: 4,
        manifest_rewrite_bytes: 256 * 1024,
        write_buffer_bytes: 1 << 30,
        log: LogConfig {
            file_bytes: 1 << 20,
            layout_bytes: 16 * 1024,
        },
        ..HeadConfig::default()
    }
}

fn files(storage: &MemoryStorage) -> Arc<FileTable> {
    let s: Arc<dyn Storage> = Arc::new(storage.clone());
    let _ = s.create_dir("t.0");
    Arc::new(FileTable::new(
        s,
        "t.0".into(),
        4096,
        Arc::new(PageCache::new(1 << 20)),
        true,
    ))
}

fn put(k: &[u8], v: &[u8], ts: u64) -> Mutation {
    Mutation {
        key: k.to_vec(),
        op: Op::Put {
            value: v.to_vec(),
            timestamp: ts,
            expire_at: 0,
        },
    }
}

/// Every live entry of a snapshot, the buffer included.
fn read_all(s: &TreeSnapshot) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let r = s.buffered();
    let mut c = r.seek(None).unwrap();
    let mut out = BTreeMap::new();
    while let Some(e) = c.next_entry().unwrap() {
        match e.value {
            ValueLoc::Inline(v) => {
                out.insert(e.key, v);
            }
            ValueLoc::Overflow { first, pages, len } => {
                out.insert(e.key, s.read_overflow(first, pages, len).unwrap());
            }
            ValueLoc::Tombstone => {}
        }
    }
    out
}

fn seed() -> u64 {
    let s = std::env::var("BOUGH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                | 1
        });
    eprintln!("seed {s} (replay with BOUGH_SEED={s})");
    s
}

/// 60 bytes that do not compress.
fn noise(mut x: u64) -> Vec<u8> {
    x = x.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..60)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A head whose first files are mostly garbage (every key overwritten and checkpointed
/// once) and whose buffer holds acknowledged writes no checkpoint applied; the model of
/// what it holds, and the sealed files at least half garbage.
fn garbage_behind_a_buffer(mem: &MemoryStorage) -> (Head, BTreeMap<Vec<u8>, Vec<u8>>, Vec<FileId>) {
    let mut head =
        Head::create(files(mem), cfg(), BranchName::main(), 0, None, Vec::new()).unwrap();
    let mut model = BTreeMap::new();
    let key = |i: u64| format!("key{i:04}").into_bytes();
    for round in 0..2u64 {
        // The second round leaves a third of the key ranges (a few leaves per file) alone.
        let batch: Vec<Mutation> = (0..3000u64)
            .filter(|i| round == 0 || (i / 300) % 3 != 0)
            .map(|i| put(&key(i), &noise(round * 10_000 + i), round + 1))
            .collect();
        for m in &batch {
            if let Op::Put { value, .. } = &m.op {
                model.insert(m.key.clone(), value.clone());
            }
        }
        head.commit(&batch, round + 1).unwrap();
        head.checkpoint_buffer(round + 1).unwrap();
    }
    // A few leaves of the second round get a third value, and they stay in the buffer.
    for i in (0..3000u64).step_by(300) {
        let v = format!("buffered{i}").into_bytes();
        head.commit(&[put(&key(i), &v, 10 + i)], 10 + i).unwrap();
        model.insert(key(i), v);
    }
    assert!(head.buffered_bytes() > 0);
    let active = head.active_file();
    let per_file = f64::from(cfg().file_pages - 1);
    let victims: Vec<FileId> = head
        .live_pages_per_file()
        .unwrap()
        .into_iter()
        .filter(|(f, n)| Some(*f) != active && (*n as f64) <= per_file / 2.0)
        .map(|(f, _)| f)
        .collect();
    assert!(
        !victims.is_empty(),
        "the first round left garbage: {:?} active {active:?}",
        head.live_pages_per_file().unwrap()
    );
    (head, model, victims)
}

#[test]
fn a_relocation_keeps_the_write_buffer_and_recovery_replays_it_on_the_moved_tree() {
    let mem = MemoryStorage::new();
    let (mut head, model, victims) = garbage_behind_a_buffer(&mem);
    let buffered = head.buffered_bytes();
    let version = head.version();
    let moved = head.relocate_files(&victims, 500).unwrap();
    assert!(moved > 0);
    assert_eq!(
        head.buffered_bytes(),
        buffered,
        "the buffer was not checkpointed"
    );
    assert_eq!(head.version(), version, "moving pages is no version");
    assert_eq!(read_all(&head.snapshot()), model);
    let live = head.live_pages_per_file().unwrap();
    for v in &victims {
        assert!(!live.contains_key(v), "file {v} still holds live pages");
    }
    // Power loss right after: the record is durable, the buffer is the log's to replay.
    let (image, _) = mem.crash_image(CrashPolicy::DropAllUnsynced);
    drop(head);
    let mut again = Head::open(files(&image), cfg(), BranchName::main(), 0).unwrap();
    assert_eq!(again.version(), version);
    assert_eq!(read_all(&again.snapshot()), model);
    let live = again.live_pages_per_file().unwrap();
    for v in &victims {
        assert!(
            !live.contains_key(v),
            "file {v} live again after the reopen"
        );
    }
    // And it goes on: a checkpoint applies the replayed buffer to the moved tree.
    again.checkpoint_buffer(600).unwrap();
    assert_eq!(again.buffered_bytes(), 0);
    assert_eq!(read_all(&again.snapshot()), model);
    drop(again);
    let last = Head::open(files(&image), cfg(), BranchName::main(), 0).unwrap();
    assert_eq!(read_all(&last.snapshot()), model);
}

/// A power loss at each sync of a relocation that keeps the buffer (the moved pages, the
/// manifest record), with unsynced writes dropped, kept or landing at random: the reopened
/// head holds every acknowledged write, whether or not the relocation's record survived.
#[test]
fn a_power_loss_at_each_sync_of_a_relocation_keeps_every_acknowledged_write() {
    let seed = seed();
    let mut failed = 0;
    for fail_at in 0..16u64 {
        let faults = FaultInjector::new();
        let mem = MemoryStorage::with_faults(faults.clone());
        let (mut head, model, victims) = garbage_behind_a_buffer(&mem);
        let version = head.version();
        faults.fail_after(FaultOp::Sync, fail_at, 5, 1);
        // Its syncs: the moved pages (in each file they went to), the directory naming a
        // new file, the record; the log was synced by its commits.
        let relocated = head.relocate_files(&victims, 500);
        failed += u64::from(relocated.is_err());
        if relocated.is_ok() {
            assert_eq!(read_all(&head.snapshot()), model, "sync {fail_at}");
        }
        for (p, policy) in [
            CrashPolicy::DropAllUnsynced,
            CrashPolicy::KeepAllUnsynced,
            CrashPolicy::Random(RandomCrash::new(seed ^ fail_at)),
        ]
        .into_iter()
        .enumerate()
        {
            let what = format!("sync {fail_at} failed ({relocated:?}), crash {p}");
            let (image, _) = mem.crash_image(policy);
            let mut reopened = Head::open(files(&image), cfg(), BranchName::main(), 0)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(reopened.version(), version, "{what}");
            assert_eq!(read_all(&reopened.snapshot()), model, "{what}");
            reopened.commit(&[put(b"next", b"1", 900)], 900).unwrap();
            reopened.checkpoint_buffer(900).unwrap();
            let mut with_next = model.clone();
            with_next.insert(b"next".to_vec(), b"1".to_vec());
            assert_eq!(read_all(&reopened.snapshot()), with_next, "{what}");
        }
        if relocated.is_ok() {
            assert!(
                failed >= 3,
                "only {failed} syncs of the relocation were failed"
            );
            return;
        }
    }
    panic!("the relocation failed at every sync");
}

/// A head with nothing buffered relocates in an ordinary record (no `LOG` kept aside):
/// the same moves, the same reads.
#[test]
fn a_relocation_with_an_empty_buffer_is_an_ordinary_record() {
    let mem = MemoryStorage::new();
    let (mut head, model, victims) = garbage_behind_a_buffer(&mem);
    head.checkpoint_buffer(400).unwrap();
    let version = head.version();
    assert!(head.relocate_files(&victims, 500).unwrap() > 0);
    assert_eq!(head.buffered_bytes(), 0);
    assert_eq!(head.version(), version + 1);
    assert_eq!(read_all(&head.snapshot()), model);
    drop(head);
    let again = Head::open(files(&mem), cfg(), BranchName::main(), 0).unwrap();
    assert_eq!(read_all(&again.snapshot()), model);
}
