//! Power-loss simulation of the memory backend: what survives `crash` is exactly what was
//! synced (file contents by `sync`, directory entries by `sync_dir`, `create_new`,
//! `write_atomic` and `create_dir`).

use bough_io::{
    CrashPolicy, ErrorKind, FaultInjector, FaultOp, MemoryStorage, OpenOptions, Storage,
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
