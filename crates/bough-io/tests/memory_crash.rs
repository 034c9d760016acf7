//! Power-loss simulation of the memory backend: what survives `crash` is exactly what was
//! synced (file contents by `sync`, directory entries by `sync_dir`, `create_new`,
//! `write_atomic` and `create_dir`).

use bough_io::memory::SECTOR_SIZE;
use bough_io::{
    CrashPolicy, ErrorKind, FaultInjector, FaultOp, MemoryStorage, OpenOptions, RandomCrash,
    Storage,
};

fn contents(s: &MemoryStorage, path: &str) -> Option<Vec<u8>> {
    match s.read_file(path, 1 << 20) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(e) => panic!("read_file {path}: {e}"),
    }
}

#[test]
fn unsynced_writes_are_lost_synced_ones_survive() {
    let s = MemoryStorage::new();
    eprintln!("backend: {}", s.kind());
    let f = s.open("f", OpenOptions::write_new(0)).expect("create");
    s.sync_dir("").expect("sync_dir");
    f.write_at(0, b"durable").expect("write");
    f.sync().expect("sync");
    f.write_at(0, b"DURABLE and more").expect("unsynced write");
    f.set_len(3).expect("unsynced truncate");
    s.crash(CrashPolicy::DropAllUnsynced);
    assert_eq!(contents(&s, "f").as_deref(), Some(&b"durable"[..]));
}

#[test]
fn unsynced_directory_entries_are_lost() {
    let s = MemoryStorage::new();
    eprintln!("backend: {}", s.kind());
    // Name synced, contents not: the file comes back empty.
    let g = s
        .open("no_data_sync", OpenOptions::write_new(0))
        .expect("create");
    s.sync_dir("").expect("sync_dir");
    g.write_at(0, b"lost").expect("write");
    // create_new and write_atomic sync the directory themselves.
    s.create_new("created", b"c").expect("create_new");
    s.write_atomic("replaced", b"r").expect("write_atomic");
    // create_dir syncs the parent; files inside still need their own directory sync:
    // contents synced, name not, the file vanishes.
    s.create_dir("p.0").expect("create_dir");
    let h = s
        .open("p.0/unsynced", OpenOptions::write_new(0))
        .expect("create");
    h.write_at(0, b"x").expect("write");
    h.sync().expect("sync");
    s.crash(CrashPolicy::DropAllUnsynced);
    assert_eq!(contents(&s, "no_data_sync").as_deref(), Some(&b""[..]));
    assert_eq!(contents(&s, "created").as_deref(), Some(&b"c"[..]));
    assert_eq!(contents(&s, "replaced").as_deref(), Some(&b"r"[..]));
    assert_eq!(s.list_dirs().expect("list_dirs"), vec!["p.0"]);
    assert!(s.list("p.0").expect("list").is_empty());
}

#[test]
fn unsynced_deletes_and_renames_are_undone() {
    let s = MemoryStorage::new();
    eprintln!("backend: {}", s.kind());
    s.create_new("a", b"a1").expect("create_new");
    s.create_new("b", b"b1").expect("create_new");
    s.delete("a").expect("delete, not synced");
    s.delete("b").expect("delete");
    s.sync_dir("").expect("sync_dir: b's delete is durable");
    s.create_new("b", b"b2").expect("create b again");
    s.write_atomic("b", b"b3").expect("replace b");
    s.crash(CrashPolicy::DropAllUnsynced);
    // `a`'s delete was made durable by the sync_dir too (it syncs every entry).
    assert_eq!(contents(&s, "a"), None);
    assert_eq!(contents(&s, "b").as_deref(), Some(&b"b3"[..]));

    let s = MemoryStorage::new();
    s.create_new("x", b"x").expect("create_new");
    s.delete("x").expect("delete, never synced");
    s.crash(CrashPolicy::DropAllUnsynced);
    assert_eq!(
        contents(&s, "x").as_deref(),
        Some(&b"x"[..]),
        "unsynced delete undone"
    );
}

#[test]
fn a_replacement_with_its_entry_unsynced_is_whole_or_undone() {
    let s = MemoryStorage::new();
    s.write_atomic("r", b"old").expect("write_atomic");
    s.write_atomic_entry_unsynced("r", b"new record")
        .expect("replace");
    s.write_atomic_entry_unsynced("n", b"new name")
        .expect("create");
    let (undone, _) = s.crash_image(CrashPolicy::DropAllUnsynced);
    assert_eq!(contents(&undone, "r").as_deref(), Some(&b"old"[..]));
    assert_eq!(contents(&undone, "n"), None);
    let (kept, _) = s.crash_image(CrashPolicy::KeepAllUnsynced);
    assert_eq!(contents(&kept, "r").as_deref(), Some(&b"new record"[..]));
    assert_eq!(contents(&kept, "n").as_deref(), Some(&b"new name"[..]));
    // Whatever a random power loss keeps, each name holds one whole version.
    for seed in 0..64 {
        let (img, _) = s.crash_image(CrashPolicy::Random(RandomCrash::new(seed)));
        let r = contents(&img, "r");
        assert!(
            matches!(r.as_deref(), Some(b"old" | b"new record")),
            "seed {seed}: {r:?}"
        );
        let n = contents(&img, "n");
        assert!(
            matches!(n.as_deref(), None | Some(b"new name")),
            "seed {seed}: {n:?}"
        );
    }
    // The directory's next sync makes both durable.
    s.sync_dir("").expect("sync_dir");
    let (synced, _) = s.crash_image(CrashPolicy::DropAllUnsynced);
    assert_eq!(contents(&synced, "r").as_deref(), Some(&b"new record"[..]));
    assert_eq!(contents(&synced, "n").as_deref(), Some(&b"new name"[..]));
}

#[test]
fn removed_directories_come_back_until_synced() {
    let s = MemoryStorage::new();
    s.create_dir("d").expect("create_dir");
    s.remove_dir("d").expect("remove_dir");
    s.crash(CrashPolicy::DropAllUnsynced);
    assert_eq!(s.list_dirs().expect("list_dirs"), vec!["d"]);
    s.remove_dir("d").expect("remove_dir");
    s.sync_dir("").expect("sync_dir");
    s.crash(CrashPolicy::DropAllUnsynced);
    assert!(s.list_dirs().expect("list_dirs").is_empty());
}

#[test]
fn clone_durable_leaves_the_original_alone() {
    let s = MemoryStorage::new();
    let f = s.open("f", OpenOptions::write_new(0)).expect("create");
    s.sync_dir("").expect("sync_dir");
    f.write_at(0, b"unsynced").expect("write");
    let image = s.clone_durable();
    assert_eq!(contents(&image, "f").as_deref(), Some(&b""[..]));
    assert_eq!(contents(&s, "f").as_deref(), Some(&b"unsynced"[..]));
    // Independent namespaces.
    image.create_new("only_in_image", b"i").expect("create_new");
    assert_eq!(contents(&s, "only_in_image"), None);
    // Cheap clones share one namespace.
    let c = s.clone();
    c.create_new("shared", b"s").expect("create_new");
    assert_eq!(contents(&s, "shared").as_deref(), Some(&b"s"[..]));
}

#[test]
fn crash_is_a_reboot_poison_clears() {
    let faults = FaultInjector::new();
    let s = MemoryStorage::with_faults(faults.clone());
    s.create_new("a", b"a").expect("create_new");
    let f = s.open("a", OpenOptions::write_create()).expect("open");
    f.write_at(0, b"b").expect("write");
    faults.fail_next(FaultOp::Sync, libc::EIO, 1);
    assert_eq!(f.sync().expect_err("fsync fails").kind(), ErrorKind::Io);
    assert_eq!(
        s.create_new("b", b"b").expect_err("poisoned").kind(),
        ErrorKind::Poisoned
    );
    s.crash(CrashPolicy::DropAllUnsynced);
    // The failed fsync's data is not durable.
    assert_eq!(contents(&s, "a").as_deref(), Some(&b"a"[..]));
    s.create_new("b", b"b").expect("usable after the crash");
}

/// A file `f` whose name and first 4 KiB of zeros are durable, then 4 KiB of `0xAA`
/// written over it and 512 bytes appended, none of it synced.
fn file_with_unsynced_writes() -> MemoryStorage {
    let s = MemoryStorage::new();
    let f = s.open("f", OpenOptions::write_new(0)).expect("create");
    f.write_at(0, &[0u8; 4096]).expect("write");
    f.sync().expect("sync");
    s.sync_dir("").expect("sync_dir");
    f.write_at(0, &[0xAA; 4096]).expect("unsynced overwrite");
    f.write_at(4096, &[0xBB; 512]).expect("unsynced append");
    s
}

#[test]
fn keep_all_unsynced_keeps_writes_and_directory_changes() {
    let s = file_with_unsynced_writes();
    s.create_dir("d").expect("create_dir");
    let g = s.open("d/new", OpenOptions::write_new(0)).expect("create");
    g.write_at(0, b"never synced").expect("write");
    let report = s.crash(CrashPolicy::KeepAllUnsynced);
    let f = contents(&s, "f").expect("f survives");
    assert_eq!(f.len(), 4608);
    assert!(f[..4096].iter().all(|&b| b == 0xAA));
    assert!(f[4096..].iter().all(|&b| b == 0xBB));
    assert_eq!(contents(&s, "d/new").as_deref(), Some(&b"never synced"[..]));
    assert_eq!(report.writes_kept, 3);
    assert_eq!(report.dir_changes_kept, 1);
    assert_eq!(
        report.writes_dropped + report.writes_torn + report.writes_garbled,
        0
    );
}

#[test]
fn drop_all_reports_what_it_dropped() {
    let s = file_with_unsynced_writes();
    let report = s.crash(CrashPolicy::DropAllUnsynced);
    assert_eq!(contents(&s, "f").expect("f"), vec![0u8; 4096]);
    assert_eq!(report.writes_dropped, 2);
    assert_eq!(report.unsynced_writes(), 2);
}

#[test]
fn torn_writes_are_torn_at_sector_boundaries() {
    let (mut saw_old, mut saw_new) = (false, false);
    for seed in 0..32 {
        let s = file_with_unsynced_writes();
        let policy = CrashPolicy::Random(RandomCrash::new(seed).weights(0, 0, 1, 0));
        let report = s.crash(policy);
        assert_eq!(report.writes_torn, 2, "seed {seed}");
        let f = contents(&s, "f").expect("f");
        assert!(f.len() == 4608, "seed {seed}: len {}", f.len());
        for (i, sector) in f.chunks(SECTOR_SIZE as usize).enumerate() {
            let new = if i < 8 { 0xAA } else { 0xBB };
            let all_new = sector.iter().all(|&b| b == new);
            let all_old = sector.iter().all(|&b| b == 0);
            assert!(all_new || all_old, "seed {seed}: sector {i} is mixed");
            saw_new |= all_new;
            saw_old |= all_old;
        }
    }
    assert!(
        saw_old && saw_new,
        "tearing keeps some sectors and loses others"
    );
}

#[test]
fn garbled_writes_hold_random_bytes() {
    let s = file_with_unsynced_writes();
    let report = s.crash(CrashPolicy::Random(RandomCrash::new(7).weights(0, 0, 0, 1)));
    assert_eq!(report.writes_garbled, 2);
    let f = contents(&s, "f").expect("f");
    assert_eq!(f.len(), 4608);
    assert!(f[..4096].iter().any(|&b| b != 0xAA && b != 0));
}

#[test]
fn random_crashes_replay_from_their_seed_and_leave_the_original_alone() {
    let s = file_with_unsynced_writes();
    for i in 0..8 {
        let g = s
            .open(&format!("g{i}"), OpenOptions::write_new(0))
            .expect("create");
        g.write_at(0, &[i as u8; 1000]).expect("write");
    }
    let policy = CrashPolicy::Random(RandomCrash::new(42));
    let (a, ra) = s.crash_image(policy);
    let (b, rb) = s.crash_image(policy);
    assert_eq!(ra, rb);
    assert_eq!(a.list("").expect("list"), b.list("").expect("list"));
    for name in a.list("").expect("list") {
        assert_eq!(contents(&a, &name), contents(&b, &name), "{name}");
    }
    assert_eq!(ra.dir_changes_kept + ra.dir_changes_dropped, 8);
    // The original still holds every unsynced write.
    assert_eq!(s.list("").expect("list").len(), 9);
    assert_eq!(contents(&s, "g3").expect("g3"), vec![3u8; 1000]);
    // All directory changes kept, or none.
    let keep = CrashPolicy::Random(RandomCrash::new(1).dir_keep_percent(100));
    assert_eq!(s.crash_image(keep).0.list("").expect("list").len(), 9);
    let drop = CrashPolicy::Random(RandomCrash::new(1).dir_keep_percent(0));
    assert_eq!(s.crash_image(drop).0.list("").expect("list"), vec!["f"]);
}

#[test]
fn short_writes_land_a_prefix_and_fail_with_eio() {
    let faults = FaultInjector::new();
    let s = MemoryStorage::with_faults(faults.clone());
    let f = s.open("f", OpenOptions::write_new(0)).expect("create");
    s.sync_dir("").expect("sync_dir");
    faults.short_writes_next(1);
    let e = f.write_at(0, &[7u8; 3000]).expect_err("cut short");
    assert_eq!(e.kind(), ErrorKind::Io);
    assert_eq!(faults.fired(), 1);
    // Half the buffer, rounded down to whole 512-byte sectors, landed.
    assert_eq!(contents(&s, "f").expect("f"), vec![7u8; 1024]);
    // Nothing is poisoned: the next write goes through in full.
    f.write_at(0, &[8u8; 3000]).expect("write");
    assert_eq!(contents(&s, "f").expect("f"), vec![8u8; 3000]);
    // The landed prefix is an unsynced write like any other.
    f.sync().expect("sync");
    faults.short_writes_next(1);
    f.write_at(0, &[9u8; 2048]).expect_err("cut short");
    s.crash(CrashPolicy::DropAllUnsynced);
    assert_eq!(contents(&s, "f").expect("f"), vec![8u8; 3000]);
}

/// Regression (found by `branch_model_buffered` once checkpoints ran on their own
/// thread): a crash image taken while another thread syncs held a data file as it was
/// before its sync and the manifest, imaged later in the walk, as it was after the record
/// naming that data was synced. A power loss is an instant: `b` is only ever synced after
/// `a` holds the same number, so no image may hold a `b` ahead of its `a`.
#[test]
fn regression_a_crash_image_is_one_instant_while_another_thread_syncs() {
    let mem = MemoryStorage::new();
    mem.create_dir("d").unwrap();
    let a = mem.open("d/a", OpenOptions::write_new(0)).unwrap();
    let b = mem.open("d/b", OpenOptions::write_new(0)).unwrap();
    mem.sync_dir("d").unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && n < 200_000 {
                n += 1;
                a.write_at(0, &n.to_le_bytes()).unwrap();
                a.sync().unwrap();
                b.write_at(0, &n.to_le_bytes()).unwrap();
                b.sync().unwrap();
            }
        })
    };
    let read = |m: &MemoryStorage, p: &str| {
        let bytes = m.read_file(p, 8).unwrap();
        let mut v = [0u8; 8];
        v[..bytes.len()].copy_from_slice(&bytes);
        u64::from_le_bytes(v)
    };
    for i in 0..2_000 {
        let (image, _) = mem.crash_image(CrashPolicy::DropAllUnsynced);
        let (va, vb) = (read(&image, "d/a"), read(&image, "d/b"));
        assert!(vb <= va, "image {i}: b holds {vb}, a only {va}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
}
