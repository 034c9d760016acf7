//! One conformance suite for every `Storage` backend: each test below is a function of an
//! [`Env`], instantiated for the memory, pread and io_uring backends by `conformance!`.
//!
//! If io_uring is unusable here, the io_uring instances say so loudly and run on pread; set
//! `BOUGH_REQUIRE_IO_URING=1` to make that a failure instead.

use std::sync::Arc;
use std::time::Duration;

use bough_io::{
    BackendKind, ErrorKind, FaultInjector, FaultOp, IoError, MemoryStorage, OpenOptions,
    PreadStorage, Storage, UringStorage,
};

struct Env {
    storage: Arc<dyn Storage>,
    faults: FaultInjector,
    _dir: Option<tempfile::TempDir>,
}

impl Env {
    fn announce(self, test: &str) -> Self {
        eprintln!("backend: {} ({test})", self.storage.kind());
        self
    }
}

fn memory_env() -> Env {
    let faults = FaultInjector::new();
    Env {
        storage: Arc::new(MemoryStorage::with_faults(faults.clone())),
        faults,
        _dir: None,
    }
}

fn pread_env() -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    let faults = FaultInjector::new();
    let storage = PreadStorage::with_faults(dir.path(), faults.clone()).expect("pread storage");
    Env {
        storage: Arc::new(storage),
        faults,
        _dir: Some(dir),
    }
}

fn uring_env() -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    let faults = FaultInjector::new();
    match UringStorage::with_faults(dir.path(), faults.clone()) {
        Ok(storage) => {
            assert_eq!(storage.kind(), BackendKind::IoUring);
            Env {
                storage: Arc::new(storage),
                faults,
                _dir: Some(dir),
            }
        }
        Err(e) => {
            assert!(
                std::env::var_os("BOUGH_REQUIRE_IO_URING").is_none(),
                "io_uring required but unavailable: {e}"
            );
            eprintln!(
                "!!!!!!!! io_uring UNAVAILABLE ({e}): the io_uring conformance test is \
                 RUNNING ON THE PREAD BACKEND INSTEAD !!!!!!!!"
            );
            pread_env()
        }
    }
}

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $( #[test] fn $name() { super::$name(super::memory_env().announce(stringify!($name))) } )*
        }
        mod pread {
            $( #[test] fn $name() { super::$name(super::pread_env().announce(stringify!($name))) } )*
        }
        mod io_uring {
            $( #[test] fn $name() { super::$name(super::uring_env().announce(stringify!($name))) } )*
        }
    };
}

conformance!(
    open_create_and_conflicts,
    write_then_read_exact,
    read_past_eof_is_an_error,
    batches,
    preallocate_keeps_the_logical_length,
    set_len_truncates_and_extends,
    read_file_guards_its_length,
    write_atomic_replaces,
    write_atomic_entry_unsynced_syncs_the_bytes_not_the_directory,
    a_staged_replacement_lands_only_when_installed,
    create_new_refuses_existing_and_leaves_nothing_partial,
    lists_deletes_and_directories,
    sync_failure_poisons_but_reads_continue,
    dir_sync_failure_poisons,
    enospc_is_no_space_and_does_not_poison,
    readers_do_not_wait_for_a_stalled_sync,
    counters_are_exact,
    concurrent_readers,
    short_reads_are_continued_or_fail_cleanly,
    cheap_stamp_tells_every_version_apart,
);

fn kind_of<T: std::fmt::Debug>(r: Result<T, IoError>) -> ErrorKind {
    r.expect_err("expected an error").kind()
}

fn assert_no_temp_files(s: &dyn Storage, dir: &str) {
    let names = s.list(dir).expect("list");
    assert!(
        names.iter().all(|n| !n.ends_with(".tmp")),
        "leftover temporary files in {dir:?}: {names:?}"
    );
}

fn open_create_and_conflicts(env: Env) {
    let s = &*env.storage;
    assert_eq!(
        kind_of(s.open("f", OpenOptions::read())),
        ErrorKind::NotFound
    );
    let f = s.open("f", OpenOptions::write_create()).expect("create");
    assert_eq!(f.path(), "f");
    assert_eq!(f.len().expect("len"), 0);
    assert!(f.is_empty().expect("is_empty"));
    f.write_at(0, b"abc").expect("write");
    // `create` never truncates.
    let g = s.open("f", OpenOptions::write_create()).expect("reopen");
    assert_eq!(g.len().expect("len"), 3);
    assert_eq!(
        kind_of(s.open("f", OpenOptions::write_new(0))),
        ErrorKind::AlreadyExists
    );
    // The parent directory must exist.
    assert_eq!(
        kind_of(s.open("nodir/f", OpenOptions::write_create())),
        ErrorKind::NotFound
    );
    s.create_dir("d").expect("create_dir");
    s.open("d/f", OpenOptions::write_new(0))
        .expect("create in dir");
    assert!(
        s.open("d", OpenOptions::read()).is_err(),
        "a directory is not a file"
    );
    for bad in ["", "/abs", "a/../b", "a//b", "./a", "a/"] {
        assert_eq!(
            kind_of(s.open(bad, OpenOptions::write_create())),
            ErrorKind::InvalidArgument,
            "{bad:?}"
        );
    }
    // A read-only handle refuses writes.
    let r = s.open("f", OpenOptions::read()).expect("open read");
    assert!(r.write_at(0, b"x").is_err());
    assert!(r.set_len(0).is_err());
    let mut buf = [0u8; 3];
    r.read_at(0, &mut buf).expect("read");
    assert_eq!(&buf, b"abc");
}

fn write_then_read_exact(env: Env) {
    let s = &*env.storage;
    let f = s.open("f", OpenOptions::write_new(0)).expect("create");
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    f.write_at(0, &data).expect("write");
    f.write_at(20_000, b"tail").expect("write past the end");
    assert_eq!(f.len().expect("len"), 20_004);
    assert_eq!(s.file_len("f").expect("file_len"), 20_004);
    let mut back = vec![0u8; 10_000];
    f.read_at(0, &mut back).expect("read");
    assert_eq!(back, data);
    let mut hole = vec![1u8; 100];
    f.read_at(15_000, &mut hole).expect("read hole");
    assert!(hole.iter().all(|&b| b == 0), "a hole reads as zeros");
    let mut mid = [0u8; 7];
    f.read_at(4_000, &mut mid).expect("read mid");
    assert_eq!(&mid[..], &data[4_000..4_007]);
    f.sync().expect("sync");
    // A second handle sees the same bytes.
    let g = s.open("f", OpenOptions::read()).expect("open");
    let mut t = [0u8; 4];
    g.read_at(20_000, &mut t).expect("read tail");
    assert_eq!(&t, b"tail");
    // A large write and read, bigger than any single chunk a backend might use.
    let big: Vec<u8> = (0..3 << 20)
        .map(|i: u32| (i.wrapping_mul(7) >> 3) as u8)
        .collect();
    f.write_at(1 << 20, &big).expect("big write");
    let mut big_back = vec![0u8; big.len()];
    f.read_at(1 << 20, &mut big_back).expect("big read");
    assert!(big_back == big, "big read differs");
}

fn read_past_eof_is_an_error(env: Env) {
    let s = &*env.storage;
    let f = s.open("f", OpenOptions::write_new(0)).expect("create");
    f.write_at(0, &[9u8; 100]).expect("write");
    let mut empty = [0u8; 0];
    f.read_at(100, &mut empty)
        .expect("an empty read at the end is fine");
    let mut buf = [0u8; 10];
    let e = f.read_at(100, &mut buf).expect_err("at EOF");
    assert!(e.is_unexpected_eof(), "{e}");
    assert_eq!(e.kind(), ErrorKind::Io);
    let e = f.read_at(95, &mut buf).expect_err("across EOF");
    assert!(e.is_unexpected_eof(), "{e}");
    let e = f.read_at(u64::MAX - 3, &mut buf).expect_err("far past EOF");
    assert_eq!(e.kind(), ErrorKind::Io);
}

fn batches(env: Env) {
    let s = &*env.storage;
    let f = s.open("f", OpenOptions::write_new(0)).expect("create");
    // More requests than an io_uring ring holds at once.
    let pages: Vec<Vec<u8>> = (0..300u32).map(|i| vec![(i % 256) as u8; 512]).collect();
    let writes: Vec<(u64, &[u8])> = pages
        .iter()
        .enumerate()
        .map(|(i, p)| ((i * 512) as u64, &p[..]))
        .collect();
    f.write_batch(&writes).expect("write batch");
    assert_eq!(f.len().expect("len"), 300 * 512);
    let mut bufs = vec![vec![0u8; 512]; 300];
    let mut reads: Vec<(u64, &mut [u8])> = bufs
        .iter_mut()
        .enumerate()
        .rev()
        .map(|(i, b)| ((i * 512) as u64, &mut b[..]))
        .collect();
    f.read_batch(&mut reads).expect("read batch");
    assert_eq!(bufs, pages);
    // One request of a batch past the end fails the batch.
    let (mut a, mut b) = ([0u8; 16], [0u8; 16]);
    let mut reqs: Vec<(u64, &mut [u8])> = vec![(0, &mut a[..]), (300 * 512, &mut b[..])];
    let e = f.read_batch(&mut reqs).expect_err("past EOF");
    assert!(e.is_unexpected_eof(), "{e}");
    // Empty batches and empty buffers are fine.
    f.read_batch(&mut []).expect("empty read batch");
    f.write_batch(&[]).expect("empty write batch");
    f.write_batch(&[(5, &[][..])]).expect("empty buffer");
}

fn preallocate_keeps_the_logical_length(env: Env) {
    let s = &*env.storage;
    let f = s
        .open("f", OpenOptions::write_new(1 << 20))
        .expect("create");
    assert_eq!(f.len().expect("len"), 0, "preallocation is not length");
    f.preallocate(1 << 20, 1 << 20).expect("preallocate more");
    assert_eq!(f.len().expect("len"), 0);
    f.write_at(4096, &[1u8; 4096])
        .expect("write into reserved space");
    assert_eq!(f.len().expect("len"), 8192);
    assert_eq!(s.file_len("f").expect("file_len"), 8192);
    f.preallocate(0, 0).expect("empty preallocation");
    // Sealing: truncate to the logical length.
    f.set_len(8192).expect("seal");
    assert_eq!(f.len().expect("len"), 8192);
    let r = s.open("f", OpenOptions::read()).expect("open");
    assert!(r.preallocate(0, 4096).is_err(), "read-only handle");
}

fn set_len_truncates_and_extends(env: Env) {
    let s = &*env.storage;
    let f = s.open("f", OpenOptions::write_new(0)).expect("create");
    f.write_at(0, &[7u8; 100]).expect("write");
    f.set_len(10).expect("truncate");
    assert_eq!(f.len().expect("len"), 10);
    let mut buf = [0u8; 11];
    assert!(f.read_at(0, &mut buf).is_err());
    f.set_len(50).expect("extend");
    let mut buf = [1u8; 50];
    f.read_at(0, &mut buf).expect("read");
    assert!(buf[..10].iter().all(|&b| b == 7));
    assert!(buf[10..].iter().all(|&b| b == 0));
}

fn read_file_guards_its_length(env: Env) {
    let s = &*env.storage;
    s.write_atomic("small", &[5u8; 1000]).expect("write_atomic");
    assert_eq!(s.read_file("small", 1000).expect("read").len(), 1000);
    assert_eq!(s.read_file("small", u64::MAX).expect("read").len(), 1000);
    let e = s.read_file("small", 999).expect_err("too long");
    assert_eq!(e.kind(), ErrorKind::Corruption, "{e}");
    assert_eq!(kind_of(s.read_file("missing", 10)), ErrorKind::NotFound);
    s.write_atomic("empty", b"").expect("write empty");
    assert!(s.read_file("empty", 0).expect("read empty").is_empty());
}

fn write_atomic_replaces(env: Env) {
    let s = &*env.storage;
    s.create_dir("p").expect("create_dir");
    s.write_atomic("p/m", b"first").expect("first");
    s.write_atomic("p/m", b"second, longer").expect("second");
    assert_eq!(s.read_file("p/m", 100).expect("read"), b"second, longer");
    assert_eq!(s.list("p").expect("list"), vec!["m".to_string()]);
    // A failed rename leaves the old contents and no temporary file.
    env.faults.fail_next(FaultOp::Rename, libc::EIO, 1);
    assert_eq!(kind_of(s.write_atomic("p/m", b"third")), ErrorKind::Io);
    assert_eq!(s.read_file("p/m", 100).expect("read"), b"second, longer");
    assert_no_temp_files(s, "p");
    assert_eq!(
        kind_of(s.write_atomic("nodir/m", b"x")),
        ErrorKind::NotFound
    );
}

fn write_atomic_entry_unsynced_syncs_the_bytes_not_the_directory(env: Env) {
    let s = &*env.storage;
    s.create_dir("p").expect("create_dir");
    s.write_atomic("p/r", b"first").expect("first");
    let before = s.stats().snapshot();
    s.write_atomic_entry_unsynced("p/r", b"second")
        .expect("second");
    let d = s.stats().snapshot().since(&before);
    assert_eq!((d.writes, d.syncs, d.dir_syncs), (1, 1, 0));
    assert_eq!(s.read_file("p/r", 100).expect("read"), b"second");
    assert_no_temp_files(s, "p");
    // A failed rename leaves the old contents and no temporary file.
    env.faults.fail_next(FaultOp::Rename, libc::EIO, 1);
    assert_eq!(
        kind_of(s.write_atomic_entry_unsynced("p/r", b"third")),
        ErrorKind::Io
    );
    assert_eq!(s.read_file("p/r", 100).expect("read"), b"second");
    assert_no_temp_files(s, "p");
}

fn a_staged_replacement_lands_only_when_installed(env: Env) {
    let s = &*env.storage;
    s.create_dir("p").expect("create_dir");
    s.write_atomic("p/r", b"first").expect("first");
    let staged = s.stage_atomic("p/r", b"second").expect("stage");
    assert_eq!(s.read_file("p/r", 100).expect("read"), b"first");
    let before = s.stats().snapshot();
    s.install_staged(staged).expect("install");
    assert_eq!(s.stats().snapshot().since(&before).dir_syncs, 0);
    assert_eq!(s.read_file("p/r", 100).expect("read"), b"second");
    assert_no_temp_files(s, "p");
    let dropped = s.stage_atomic("p/r", b"third").expect("stage");
    s.discard_staged(dropped);
    assert_eq!(s.read_file("p/r", 100).expect("read"), b"second");
    assert_no_temp_files(s, "p");
}

fn create_new_refuses_existing_and_leaves_nothing_partial(env: Env) {
    let s = &*env.storage;
    s.create_new("c", b"one").expect("create_new");
    assert_eq!(kind_of(s.create_new("c", b"two")), ErrorKind::AlreadyExists);
    assert_eq!(s.read_file("c", 100).expect("read"), b"one");
    assert_no_temp_files(s, "");
    // A failed payload write leaves no file under the final name, and no temp file.
    env.faults.fail_next(FaultOp::Write, libc::EIO, 1);
    assert_eq!(kind_of(s.create_new("d", b"data")), ErrorKind::Io);
    assert_eq!(kind_of(s.file_len("d")), ErrorKind::NotFound);
    env.faults.fail_next(FaultOp::Rename, libc::EIO, 1);
    assert_eq!(kind_of(s.create_new("d", b"data")), ErrorKind::Io);
    assert_eq!(kind_of(s.file_len("d")), ErrorKind::NotFound);
    assert_no_temp_files(s, "");
    s.create_new("d", b"data").expect("now it works");
    assert_eq!(
        s.list("").expect("list"),
        vec!["c".to_string(), "d".to_string()]
    );
    // Racing creators: exactly one wins.
    let winners: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let st = env.storage.clone();
                scope.spawn(move || st.create_new("race", format!("{i}").as_bytes()).is_ok())
            })
            .collect();
        handles
            .into_iter()
            .map(|h| usize::from(h.join().unwrap_or(false)))
            .sum()
    });
    assert_eq!(winners, 1);
    assert_no_temp_files(s, "");
}

fn lists_deletes_and_directories(env: Env) {
    let s = &*env.storage;
    assert!(s.list("").expect("list root").is_empty());
    assert!(s.list("missing").expect("list missing").is_empty());
    assert!(s.list_dirs().expect("list_dirs").is_empty());
    s.create_dir("t.1/sub").expect("create nested");
    s.create_dir("t.0").expect("create");
    s.create_dir("t.0").expect("create again is fine");
    assert_eq!(
        s.list_dirs().expect("list_dirs"),
        vec!["t.0".to_string(), "t.1".to_string()]
    );
    assert!(
        s.list("t.1").expect("list").is_empty(),
        "directories are not files"
    );
    for name in ["b", "a", "c"] {
        s.write_atomic(&format!("t.0/{name}"), name.as_bytes())
            .expect("write");
    }
    assert_eq!(s.list("t.0").expect("list"), vec!["a", "b", "c"]);
    s.delete("t.0/b").expect("delete");
    s.delete("t.0/b").expect("delete missing is fine");
    s.delete("nodir/x")
        .expect("delete in a missing dir is fine");
    assert_eq!(s.list("t.0").expect("list"), vec!["a", "c"]);
    assert!(
        s.delete("t.1").is_err(),
        "delete does not remove directories"
    );
    assert!(s.remove_dir("t.0").is_err(), "not empty");
    s.delete("t.0/a").expect("delete");
    s.delete("t.0/c").expect("delete");
    s.sync_dir("t.0").expect("sync_dir");
    s.remove_dir("t.0").expect("remove_dir");
    s.remove_dir("t.0").expect("removing a missing dir is fine");
    assert!(s.remove_dir("t.1").is_err(), "holds sub");
    s.remove_dir("t.1/sub").expect("remove sub");
    s.remove_dir("t.1").expect("remove");
    assert!(s.list_dirs().expect("list_dirs").is_empty());
    assert!(s.remove_dir("").is_err());
    assert_eq!(kind_of(s.sync_dir("gone")), ErrorKind::NotFound);
    assert_eq!(kind_of(s.file_len("gone")), ErrorKind::NotFound);
    s.sync_dir("").expect("sync root");
}

fn sync_failure_poisons_but_reads_continue(env: Env) {
    let s = &*env.storage;
    s.create_new("keep", b"kept").expect("create_new");
    let f = s.open("f", OpenOptions::write_new(0)).expect("create");
    f.write_at(0, b"before").expect("write");
    env.faults.fail_next(FaultOp::Sync, libc::EIO, 1);
    let e = f.sync().expect_err("injected fsync failure");
    assert_eq!(
        e.kind(),
        ErrorKind::Io,
        "the failing call reports the I/O error: {e}"
    );
    // Never retried: everything durable is refused from now on, on every handle.
    let poisoned = |r: Result<(), IoError>, what: &str| {
        let e = r.expect_err(what);
        assert_eq!(e.kind(), ErrorKind::Poisoned, "{what}: {e}");
    };
    poisoned(f.sync(), "sync again");
    poisoned(f.write_at(0, b"x"), "write");
    poisoned(f.write_batch(&[(0, &b"x"[..])]), "write_batch");
    poisoned(f.set_len(0), "set_len");
    poisoned(s.create_new("n", b"x"), "create_new");
    poisoned(s.write_atomic("keep", b"x"), "write_atomic");
    poisoned(s.delete("keep"), "delete");
    poisoned(s.create_dir("d"), "create_dir");
    poisoned(s.remove_dir("d"), "remove_dir");
    poisoned(s.sync_dir(""), "sync_dir");
    poisoned(
        s.open("g", OpenOptions::write_create()).map(drop),
        "open for writing",
    );
    // Reads go on.
    let mut buf = [0u8; 6];
    f.read_at(0, &mut buf).expect("read after poisoning");
    assert_eq!(&buf, b"before");
    assert_eq!(s.read_file("keep", 10).expect("read_file"), b"kept");
    assert_eq!(s.list("").expect("list"), vec!["f", "keep"]);
    s.open("keep", OpenOptions::read())
        .expect("open for reading");
}

fn dir_sync_failure_poisons(env: Env) {
    let s = &*env.storage;
    env.faults.fail_next(FaultOp::Sync, libc::EIO, 1);
    assert_eq!(kind_of(s.sync_dir("")), ErrorKind::Io);
    assert_eq!(kind_of(s.create_new("x", b"x")), ErrorKind::Poisoned);
}

fn enospc_is_no_space_and_does_not_poison(env: Env) {
    let s = &*env.storage;
    let f = s.open("f", OpenOptions::write_new(0)).expect("create");
    env.faults.fail_next(FaultOp::Write, libc::ENOSPC, 1);
    let e = f.write_at(0, b"x").expect_err("ENOSPC");
    assert_eq!(e.kind(), ErrorKind::NoSpace, "{e}");
    assert!(e.kind().is_retryable());
    f.write_at(0, b"x").expect("writes resume");
    env.faults.fail_next(FaultOp::Write, libc::ENOSPC, 1);
    assert_eq!(kind_of(f.preallocate(0, 1 << 20)), ErrorKind::NoSpace);
    env.faults.fail_next(FaultOp::Create, libc::ENOSPC, 1);
    assert_eq!(kind_of(s.create_new("n", b"x")), ErrorKind::NoSpace);
    env.faults.fail_next(FaultOp::Write, libc::EDQUOT, 1);
    assert_eq!(kind_of(s.write_atomic("n", b"x")), ErrorKind::NoSpace);
    assert_no_temp_files(s, "");
    env.faults.fail_next(FaultOp::Read, libc::EIO, 1);
    let mut buf = [0u8; 1];
    assert_eq!(kind_of(f.read_at(0, &mut buf)), ErrorKind::Io);
    env.faults.fail_next(FaultOp::Delete, libc::EIO, 1);
    assert_eq!(kind_of(s.delete("f")), ErrorKind::Io);
    f.sync().expect("not poisoned");
    s.create_new("n", b"x").expect("creates resume");
    assert!(env.faults.fired() >= 6);
}

fn readers_do_not_wait_for_a_stalled_sync(env: Env) {
    let s = &*env.storage;
    let f = s.open("f", OpenOptions::write_new(0)).expect("create");
    f.write_at(0, &[3u8; 8192]).expect("write");
    env.faults.stall_sync();
    let writer = {
        let f = f.clone();
        std::thread::spawn(move || f.sync())
    };
    assert!(
        env.faults
            .wait_for_stalled_syncs(1, Duration::from_secs(10)),
        "the writer never reached fsync"
    );
    // The writer is stuck "inside fsync"; readers, on the same file and others, are not.
    for i in 0..50u64 {
        let mut buf = [0u8; 4096];
        f.read_at((i % 2) * 4096, &mut buf)
            .expect("read during a stalled sync");
        assert!(buf.iter().all(|&b| b == 3));
    }
    let r = s
        .open("f", OpenOptions::read())
        .expect("open during a stalled sync");
    let mut bufs = [[0u8; 16]; 2];
    let [a, b] = &mut bufs;
    r.read_batch(&mut [(0, &mut a[..]), (4096, &mut b[..])])
        .expect("batch during a stalled sync");
    assert_eq!(s.list("").expect("list"), vec!["f"]);
    assert_eq!(env.faults.stalled_syncs(), 1, "still stalled");
    env.faults.release_sync();
    writer
        .join()
        .expect("writer thread")
        .expect("sync after release");
}

fn counters_are_exact(env: Env) {
    let s = &*env.storage;
    let f = s.open("f", OpenOptions::write_new(0)).expect("create");
    let before = s.stats().snapshot();
    f.write_at(0, &[1u8; 4096]).expect("write");
    let mut page = [0u8; 4096];
    f.read_at(0, &mut page).expect("read");
    f.sync().expect("sync");
    let d = s.stats().snapshot().since(&before);
    assert_eq!(
        (
            d.reads,
            d.read_bytes,
            d.writes,
            d.write_bytes,
            d.syncs,
            d.dir_syncs
        ),
        (1, 4096, 1, 4096, 1, 0)
    );
    let before = s.stats().snapshot();
    let (mut a, mut b, mut c) = ([0u8; 10], [0u8; 20], [0u8; 30]);
    f.read_batch(&mut [(0, &mut a[..]), (100, &mut b[..]), (200, &mut c[..])])
        .expect("batch");
    s.write_atomic("m", &[0u8; 100]).expect("write_atomic");
    s.sync_dir("").expect("sync_dir");
    let d = s.stats().snapshot().since(&before);
    assert_eq!(
        (
            d.reads,
            d.read_bytes,
            d.writes,
            d.write_bytes,
            d.syncs,
            d.dir_syncs
        ),
        (3, 60, 1, 100, 1, 2)
    );
    // Failed operations are not counted.
    let before = s.stats().snapshot();
    let mut far = [0u8; 8];
    assert!(f.read_at(1 << 30, &mut far).is_err());
    assert_eq!(s.stats().snapshot().since(&before).reads, 0);
    assert_eq!(s.stats().reads(), s.stats().snapshot().reads);
}

fn concurrent_readers(env: Env) {
    let s = &*env.storage;
    let f = s.open("f", OpenOptions::write_new(0)).expect("create");
    let pages: Vec<(u64, Vec<u8>)> = (0..64u64)
        .map(|i| (i * 4096, vec![(i * 3) as u8; 4096]))
        .collect();
    let reqs: Vec<(u64, &[u8])> = pages.iter().map(|(o, p)| (*o, &p[..])).collect();
    f.write_batch(&reqs).expect("write");
    std::thread::scope(|scope| {
        for t in 0..4u64 {
            let f = f.clone();
            scope.spawn(move || {
                for k in 0..200u64 {
                    let i = (k * 7 + t) % 64;
                    let mut buf = [0u8; 4096];
                    f.read_at(i * 4096, &mut buf).expect("read");
                    assert!(buf.iter().all(|&b| b == (i * 3) as u8), "page {i}");
                }
            });
        }
    });
}

/// A read cut short (the first transfer delivers half) is continued until the buffer is
/// full; one whose rest fails returns that error, never a partly filled buffer as success.
fn short_reads_are_continued_or_fail_cleanly(env: Env) {
    let s = &*env.storage;
    let f = s.open("f", OpenOptions::write_new(0)).expect("create");
    let data: Vec<u8> = (0..40_000u32).map(|i| (i % 253) as u8).collect();
    f.write_at(0, &data).expect("write");
    f.sync().expect("sync");
    // Continued: reads, batches and whole-file reads all come back exact.
    env.faults.short_reads_next(4);
    let mut buf = vec![0u8; 10_000];
    f.read_at(5_000, &mut buf)
        .expect("a short read is continued");
    assert!(buf == data[5_000..15_000], "continued read differs");
    let (mut a, mut b) = (vec![0u8; 4096], vec![0u8; 3]);
    f.read_batch(&mut [(0, &mut a[..]), (39_997, &mut b[..])])
        .expect("short reads in a batch are continued");
    assert!(a == data[..4096] && b == data[39_997..], "batch differs");
    assert!(s.read_file("f", 1 << 20).expect("read_file") == data);
    assert_eq!(env.faults.short_reads_pending(), 0);
    assert_eq!(env.faults.fired(), 4);
    // Failed: the device gives up after the first transfer.
    env.faults.short_reads_after(1, 2, Some(libc::EIO));
    let mut ok = vec![0u8; 100];
    f.read_at(0, &mut ok).expect("skipped");
    let mut buf = vec![0u8; 8_192];
    let e = f.read_at(0, &mut buf).expect_err("the rest failed");
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    let e = s.read_file("f", 1 << 20).expect_err("the rest failed");
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    // Nothing is poisoned by a failed read: the next ones (and writes) work.
    f.read_at(0, &mut buf).expect("read after a failed read");
    assert!(buf == data[..8_192]);
    f.write_at(0, b"still writable")
        .expect("write after a failed read");
}

/// `cheap_stamp`: `NotFound` for a missing file, an error for a directory; a stamp, when
/// the backend gives one, carries the length, stays while nothing changes, and differs
/// after any change — an append, a write in place of the same length, a truncation, a
/// replacement with bytes of the same length. The memory backend always knows; a local
/// backend gives none for a file changed within the last seconds (its timestamps could not
/// tell that version from the next; `local/stamp.rs` tests settled files).
fn cheap_stamp_tells_every_version_apart(env: Env) {
    let s = &*env.storage;
    assert_eq!(kind_of(s.cheap_stamp("missing")), ErrorKind::NotFound);
    assert_eq!(kind_of(s.cheap_stamp("nodir/missing")), ErrorKind::NotFound);
    s.create_dir("d").expect("create_dir");
    assert!(s.cheap_stamp("d").is_err());
    let exact = s.kind() == BackendKind::Memory;
    let mut seen = Vec::new();
    let mut look = |what: &str| {
        let len = s.file_len("f").expect("file_len");
        let stamp = s.cheap_stamp("f").expect("cheap_stamp");
        assert_eq!(stamp.is_some(), exact, "{what}: {stamp:?}");
        if let Some(st) = stamp {
            assert_eq!(st.len(), len, "{what}");
            assert_eq!(
                s.cheap_stamp("f").expect("again"),
                Some(st),
                "{what}: unchanged"
            );
            assert!(!seen.contains(&st), "{what}: a stamp seen before");
            seen.push(st);
        }
    };
    s.create_new("f", b"abcd").expect("create_new");
    look("created");
    let f = s.open("f", OpenOptions::write_create()).expect("open");
    f.write_at(4, b"ef").expect("append");
    look("appended");
    f.write_at(0, b"AB").expect("write in place");
    look("written in place");
    f.set_len(4).expect("truncate");
    look("truncated");
    f.write_at(4, b"ef").expect("append again");
    look("appended to the old length");
    s.write_atomic("f", b"123456").expect("write_atomic");
    look("replaced");
    assert_eq!(kind_of(s.cheap_stamp("gone")), ErrorKind::NotFound);
    s.delete("f").expect("delete");
    assert_eq!(kind_of(s.cheap_stamp("f")), ErrorKind::NotFound);
}
