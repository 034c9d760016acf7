//! Corruption on disk is detected, reported with the file it is in, and contained.
//!
//! A partition is built on the positional-I/O backend (one large batch, so every page on
//! disk is live), closed, and bytes are flipped in its files; each check reopens the store so
//! no page comes from the cache:
//! - a flipped byte in a leaf: `get`/`floor`/`scan` touching that leaf fail with
//!   `ErrorKind::Corruption` naming the data file; keys in other leaves still read fine; a
//!   write into the leaf fails the same way and the writer keeps working; restoring the byte
//!   makes everything readable again;
//! - a flipped byte anywhere in any page (random rounds): every read returns either the
//!   right data or `Corruption` — never wrong data, never a panic;
//! - a corrupt manifest (a cleanly closed one is a single snapshot record, so any damage)
//!   and a corrupt `CURRENT_TERM` are `Corruption` errors naming the file when the branch
//!   is opened (torn tails after a crash: tests/tail_safety.rs);
//! - a corrupt data-file header is `Corruption` naming the file.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};

use bough::{Backend, Branch, ErrorKind, Options, ScanOptions, Store, WriteBatch};
use common::Rng;

const PAGE: usize = 4096;
/// Frame header: checksum (8), type (1), version (1), reserved (2), payload length (4).
const FRAME: usize = 16;
const LEAF: u8 = 1;
const KEYS: usize = 3000;

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// A value that names its key (so a leaf's keys can be found in its raw bytes); every
/// 97th is overflow-sized.
fn value(i: usize) -> Vec<u8> {
    let mut v = format!("VAL{i:05}-").into_bytes();
    let len = if i.is_multiple_of(97) {
        6000
    } else {
        100 + i % 50
    };
    v.extend((0..len).map(|j| b'a' + ((i + j) % 26) as u8));
    v
}

fn options(dir: &Path) -> Options {
    // These tests pin what each commit writes to the tree's own files (data files,
    // manifest records): no write buffer. The buffered path: write_buffer.rs, log_files.rs
    // and the buffered variants of the model tests.
    Options::new(dir)
        .write_buffer_bytes(0)
        .backend(Backend::Pread)
        .maintenance_interval_ms(0)
        .data_file_size(16 * 4096 * 4)
        // Mapping pages on disk too.
        .checkpoint_chunks(1)
}

/// Builds the store and returns the partition directory.
fn build(dir: &Path) -> PathBuf {
    let store = common::open("corruption", options(dir));
    let main = branch(&store);
    let mut b = WriteBatch::new();
    for i in 0..KEYS {
        b.put(key(i), value(i));
    }
    main.write_blocking(b).expect("load");
    store.close().expect("close");
    dir.join("c.0")
}

fn branch(store: &Store) -> Branch {
    store
        .partition("c", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch")
}

fn data_files(part: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(part)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("data_"))
        })
        .collect();
    v.sort();
    v
}

fn name(p: &Path) -> String {
    p.file_name()
        .and_then(|n| n.to_str())
        .expect("file name")
        .to_string()
}

fn flip(path: &Path, offset: usize, mask: u8) {
    let mut bytes = std::fs::read(path).expect("read");
    bytes[offset] ^= mask;
    std::fs::write(path, bytes).expect("write");
}

/// Leaf pages of the key tree: (file, page index, keys whose values it holds).
fn leaves(part: &Path) -> Vec<(PathBuf, usize, Vec<usize>)> {
    let mut out = Vec::new();
    for f in data_files(part) {
        let bytes = std::fs::read(&f).expect("read");
        for (idx, page) in bytes.chunks_exact(PAGE).enumerate().skip(1) {
            if page[8] != LEAF {
                continue;
            }
            let mut keys = Vec::new();
            let mut at = 0;
            while let Some(pos) = find(&page[at..], b"VAL") {
                let s = at + pos + 3;
                if let Some(i) = std::str::from_utf8(&page[s..s + 5])
                    .ok()
                    .and_then(|d| d.parse().ok())
                {
                    keys.push(i);
                }
                at = s;
            }
            if !keys.is_empty() {
                out.push((f.clone(), idx, keys));
            }
        }
    }
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn assert_corruption<T: std::fmt::Debug>(what: &str, r: bough::Result<T>, file: &str) {
    match r {
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Corruption, "{what}: {e}");
            assert!(
                e.to_string().contains(file),
                "{what}: the error does not name {file}: {e}"
            );
        }
        Ok(v) => panic!("{what}: read corrupt data without an error: {v:?}"),
    }
}

#[test]
fn flipped_byte_in_a_leaf_is_reported_and_contained() {
    let dir = tempfile::tempdir().expect("tempdir");
    let part = build(dir.path());
    let leaves = leaves(&part);
    assert!(
        leaves.len() > 10,
        "expected many leaves, found {}",
        leaves.len()
    );
    assert!(data_files(&part).len() >= 2, "expected several data files");
    // A leaf in the middle of the key range, in every way we can damage it.
    let (file, idx, keys) = leaves[leaves.len() / 2].clone();
    let fname = name(&file);
    let lo = *keys.iter().min().expect("keys");
    let hi = *keys.iter().max().expect("keys");
    eprintln!(
        "leaf {fname} page {idx} holds keys {lo}..={hi}; {} leaves",
        leaves.len()
    );
    let payload_len = {
        let bytes = std::fs::read(&file).expect("read");
        let p = &bytes[idx * PAGE..];
        u32::from_le_bytes([p[12], p[13], p[14], p[15]]) as usize
    };
    for (what, offset) in [
        ("payload byte", idx * PAGE + FRAME + payload_len / 2),
        ("checksum byte", idx * PAGE + 3),
        ("type byte", idx * PAGE + 8),
        ("length byte", idx * PAGE + 12),
        ("padding byte", idx * PAGE + PAGE - 1),
    ] {
        flip(&file, offset, 0x40);
        let store = common::open("corruption", options(dir.path()));
        let main = branch(&store);
        for k in [lo, (lo + hi) / 2, hi] {
            assert_corruption(
                &format!("{what}: get key {k}"),
                main.get_blocking(key(k)),
                &fname,
            );
        }
        assert_corruption(
            &format!("{what}: floor"),
            main.floor_blocking(key(hi)),
            &fname,
        );
        assert_corruption(
            &format!("{what}: full scan"),
            main.scan_blocking(&ScanOptions::default()),
            &fname,
        );
        assert_corruption(
            &format!("{what}: scan from the leaf"),
            main.scan_blocking(&ScanOptions {
                begin: Bound::Included(key(lo)),
                limit: 3,
                ..Default::default()
            }),
            &fname,
        );
        // Other leaves read fine, point reads and range reads.
        for k in [0, lo.saturating_sub(40), hi + 40, KEYS - 1] {
            let v = main
                .get_blocking(key(k))
                .unwrap_or_else(|e| panic!("{what}: key {k} outside the leaf: {e}"))
                .expect("present");
            assert_eq!(v.value, value(k), "{what}: key {k}");
        }
        let page = main
            .scan_blocking(&ScanOptions {
                end: Bound::Excluded(key(lo.saturating_sub(40))),
                ..Default::default()
            })
            .unwrap_or_else(|e| panic!("{what}: scan below the leaf: {e}"));
        assert_eq!(page.entries.len(), lo.saturating_sub(40));
        assert!(page.entries.iter().all(|kv| {
            kv.value.value
                == value(
                    std::str::from_utf8(&kv.key[3..])
                        .expect("utf8")
                        .parse()
                        .expect("num"),
                )
        }));
        // A write into the damaged leaf fails, the writer survives.
        let mut b = WriteBatch::new();
        b.put(key(lo), "new");
        assert_corruption(
            &format!("{what}: write into the leaf"),
            main.write_blocking(b),
            &fname,
        );
        let mut b = WriteBatch::new();
        b.put(key(0), value(0));
        main.write_blocking(b)
            .unwrap_or_else(|e| panic!("{what}: the writer died: {e}"));
        store.close().expect("close");
        flip(&file, offset, 0x40);
    }
    // Restored: everything reads.
    let store = common::open("corruption", options(dir.path()));
    let main = branch(&store);
    let all = main
        .scan_blocking(&ScanOptions::default())
        .expect("scan after repair");
    assert_eq!(all.entries.len(), KEYS);
    store.close().expect("close");
}

/// Reads everything; each answer must be the right data or `Corruption`.
fn read_all_checked(main: &Branch, rng: &mut Rng, round: usize) -> (usize, usize) {
    let (mut ok, mut corrupt) = (0, 0);
    let mut tally = |r: Result<(), bough::Error>| match r {
        Ok(()) => ok += 1,
        Err(e) => {
            assert_eq!(
                e.kind(),
                ErrorKind::Corruption,
                "round {round}: unexpected error {e}"
            );
            corrupt += 1;
        }
    };
    for i in 0..KEYS {
        tally(main.get_blocking(key(i)).map(|v| {
            let v = v.unwrap_or_else(|| panic!("round {round}: key {i} vanished"));
            assert_eq!(v.value, value(i), "round {round}: wrong value for key {i}");
        }));
    }
    for _ in 0..30 {
        let i = rng.urange(0, KEYS);
        let mut probe = key(i);
        probe.push(b'~');
        tally(main.floor_blocking(&probe).map(|f| {
            let f = f.unwrap_or_else(|| panic!("round {round}: floor of key {i} vanished"));
            assert_eq!(f.key, key(i), "round {round}: wrong floor");
            assert_eq!(f.value.value, value(i), "round {round}: wrong floor value");
        }));
    }
    for _ in 0..5 {
        let i = rng.urange(0, KEYS);
        tally(
            main.scan_blocking(&ScanOptions {
                begin: Bound::Included(key(i)),
                limit: 200,
                ..Default::default()
            })
            .map(|page| {
                for (j, kv) in page.entries.iter().enumerate() {
                    assert_eq!(kv.key, key(i + j), "round {round}: scan skipped a key");
                    assert_eq!(kv.value.value, value(i + j), "round {round}: wrong value");
                }
                assert_eq!(page.entries.len(), 200.min(KEYS - i));
            }),
        );
    }
    (ok, corrupt)
}

#[test]
fn random_flips_never_return_wrong_data() {
    let seed = common::seeds("random_flips_never_return_wrong_data", 1)[0];
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let part = build(dir.path());
    let files = data_files(&part);
    let mut kinds: BTreeMap<u8, usize> = BTreeMap::new();
    let (mut detected, mut harmless) = (0, 0);
    let rounds = 40;
    for round in 0..rounds {
        let file = rng.pick(&files).clone();
        let len = std::fs::metadata(&file).expect("metadata").len() as usize;
        let idx = rng.urange(1, len / PAGE);
        let offset = idx * PAGE + rng.urange(0, PAGE);
        let kind = std::fs::read(&file).expect("read")[idx * PAGE + 8];
        *kinds.entry(kind).or_default() += 1;
        let mask = 1u8 << rng.below(8);
        flip(&file, offset, mask);
        let store = common::open("corruption", options(dir.path()));
        let main = branch(&store);
        let (ok, corrupt) = read_all_checked(&main, &mut rng, round);
        eprintln!(
            "round {round}: {} page {idx} (type {kind}) byte {}: {ok} reads ok, {corrupt} \
             corruption errors",
            name(&file),
            offset % PAGE
        );
        if corrupt > 0 {
            detected += 1;
        } else {
            harmless += 1;
        }
        store.close().expect("close");
        flip(&file, offset, mask);
    }
    eprintln!(
        "seed {seed}: {detected} flips detected by some read, {harmless} not touched by the \
         reads; page types hit {kinds:?}"
    );
    assert!(detected > 0, "no flip was ever detected");
    assert!(
        harmless * 4 < rounds,
        "too many flips ({harmless} of {rounds}) went unnoticed by reads of every key"
    );
}

fn manifest(part: &Path) -> PathBuf {
    part.join("manifest_main_0")
}

/// Writes `n` more small commits (each a manifest log record) and closes.
fn commits(dir: &Path, n: usize, tag: &str) {
    let store = common::open("corruption", options(dir));
    let main = branch(&store);
    for i in 0..n {
        let mut b = WriteBatch::new();
        b.put(format!("{tag}{i}"), "x");
        main.write_blocking(b).expect("commit");
    }
    store.close().expect("close");
}

fn open_branch(dir: &Path) -> (Store, bough::Result<Branch>) {
    let store = common::open("corruption", options(dir));
    let b = store.partition("c", 0).and_then(|p| p.branch("main"));
    (store, b)
}

#[test]
fn corrupt_manifest_is_reported_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let part = build(dir.path());
    commits(dir.path(), 3, "extra");
    let m = manifest(&part);
    // A clean close leaves the manifest as one snapshot record: its last record is the
    // snapshot, so no damage to it can pass for a torn append. (Damaged log records of a
    // manifest that was not closed cleanly: tests/tail_safety.rs.)
    let len = std::fs::metadata(&m).expect("manifest").len() as usize;
    for at in [40, len / 2, len - 1] {
        flip(&m, at, 0x01);
        let (store, b) = open_branch(dir.path());
        assert_corruption(
            &format!("corrupt manifest at byte {at}"),
            b,
            "manifest_main_0",
        );
        store.close().expect("close");
        flip(&m, at, 0x01);
    }
    let (store, b) = open_branch(dir.path());
    let main = b.expect("healed");
    assert_eq!(
        main.get_blocking(b"extra2").expect("get").expect("v").value,
        b"x"
    );
    let all = main.scan_blocking(&ScanOptions::default()).expect("scan");
    assert_eq!(all.entries.len(), KEYS + 3);
    store.close().expect("close");
}

#[test]
fn corrupt_current_term_is_reported_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let part = build(dir.path());
    let ct = part.join("CURRENT_TERM.main");
    assert!(ct.exists(), "no {}", ct.display());
    flip(&ct, 9, 0x01);
    let (store, b) = open_branch(dir.path());
    assert_corruption("corrupt CURRENT_TERM", b, "CURRENT_TERM.main");
    store.close().expect("close");
}

#[test]
fn corrupt_data_file_header_is_reported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let part = build(dir.path());
    let leaves = leaves(&part);
    let (file, _, keys) = leaves[leaves.len() / 2].clone();
    let fname = name(&file);
    // The page-size field, then a byte of the branch name: both covered by the checksum.
    for offset in [17, 49] {
        flip(&file, offset, 0x01);
        let store = common::open("corruption", options(dir.path()));
        let main = branch(&store);
        assert_corruption(
            &format!("header byte {offset}: get"),
            main.get_blocking(key(keys[0])),
            &fname,
        );
        assert_corruption(
            &format!("header byte {offset}: scan"),
            main.scan_blocking(&ScanOptions::default()),
            &fname,
        );
        store.close().expect("close");
        flip(&file, offset, 0x01);
    }
}
