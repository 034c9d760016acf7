//! The log writer and recovery: one sync per append, poisoning, power loss at every
//! append under every tear mode, resuming after a torn tail, and rebuilding the buffer.

use crate::error::{TreeError, TreeResult};
use bough_io::{CrashPolicy, FaultInjector, FaultOp, MemoryStorage, RandomCrash, Storage};
use bough_manifest::LOG_BLOCK;
use bough_names::{BranchName, LogFileName};

use super::*;

const DIR: &str = "t.0";
const INCARNATION: u64 = 0x5eed;

fn storage(faults: Option<FaultInjector>) -> MemoryStorage {
    let s = faults.map_or_else(MemoryStorage::new, MemoryStorage::with_faults);
    s.create_dir(DIR).expect("dir");
    s
}

fn name(log_id: u64) -> LogFileName {
    LogFileName::new(log_id, BranchName::main(), 1)
}

fn cfg() -> LogConfig {
    LogConfig {
        file_bytes: 1 << 20,
        layout_bytes: 4 * LOG_BLOCK as u64,
    }
}

/// The batch of commit `version`: a few keys, one of them large enough to span blocks now
/// and then.
fn batch(version: u64) -> Vec<Mutation> {
    let mut muts: Vec<Mutation> = (0..3)
        .map(|i| Mutation {
            key: format!("k{:02}", (version * 3 + i) % 50).into_bytes(),
            op: Op::Put {
                value: vec![version as u8; if version.is_multiple_of(4) { 5000 } else { 10 }],
                timestamp: version,
                expire_at: 0,
            },
        })
        .collect();
    muts.sort_by(|a, b| a.key.cmp(&b.key));
    muts.dedup_by(|a, b| a.key == b.key);
    muts
}

fn reference(w: &LogWriter) -> LogRef {
    w.reference(0, 0)
}

/// The versions a recovery puts in the buffer.
fn recovered_versions(s: &dyn Storage, r: &LogRef) -> TreeResult<Vec<u64>> {
    let replayed = replay_ref(s, DIR, r)?;
    Ok(replayed
        .commits_after(r.covered)
        .map_err(|e| TreeError::manifest("log", e))?
        .iter()
        .map(|c| c.entry.version)
        .collect())
}

#[test]
fn a_durable_append_is_exactly_one_sync() {
    let s = storage(None);
    let mut w = LogWriter::create(&s, DIR, name(1), INCARNATION, cfg()).expect("create");
    for version in 1..=20 {
        let before = s.stats().snapshot();
        w.append(&commit_entry(version, 1000 + version, &batch(version)))
            .expect("append");
        let d = s.stats().snapshot().since(&before);
        // Appends that run past the laid-out space zero the next stretch in the same
        // batch: still one sync, and never a directory sync.
        assert_eq!((d.syncs, d.dir_syncs), (1, 0), "commit {version}: {d:?}");
    }
    assert_eq!(
        recovered_versions(&s, &reference(&w)).expect("replays"),
        (1..=20).collect::<Vec<_>>()
    );
}

#[test]
fn creating_a_log_file_never_overwrites_one() {
    let s = storage(None);
    let mut w = LogWriter::create(&s, DIR, name(1), INCARNATION, cfg()).expect("create");
    w.append(&commit_entry(1, 0, &batch(1))).expect("append");
    let again = LogWriter::create(&s, DIR, name(1), INCARNATION, cfg());
    assert_eq!(
        again.map(|_| ()).map_err(|e| e.kind()),
        Err(bough_io::ErrorKind::AlreadyExists)
    );
    assert_eq!(
        recovered_versions(&s, &reference(&w)).expect("replays"),
        vec![1]
    );
}

#[test]
fn a_failed_log_sync_poisons_the_writer_and_is_never_retried() {
    let faults = FaultInjector::new();
    let s = storage(Some(faults.clone()));
    let mut w = LogWriter::create(&s, DIR, name(1), INCARNATION, cfg()).expect("create");
    w.append(&commit_entry(1, 0, &batch(1))).expect("append");
    faults.fail_next(FaultOp::Sync, 5, 1);
    assert!(w.append(&commit_entry(2, 0, &batch(2))).is_err());
    assert!(w.poisoned().is_some());
    let syncs = s.stats().syncs();
    let e = w
        .append(&commit_entry(2, 0, &batch(2)))
        .expect_err("poisoned");
    assert_eq!(e.kind(), bough_io::ErrorKind::Poisoned);
    assert_eq!(s.stats().syncs(), syncs, "no sync was retried");
}

/// A failed write (not a sync) fails only its record: the writer is not poisoned, the next
/// append takes the same position, and replay returns exactly the records that succeeded.
#[test]
fn a_failed_log_write_fails_its_record_only_and_the_next_one_takes_its_place() {
    let faults = FaultInjector::new();
    let s = storage(Some(faults.clone()));
    let mut w = LogWriter::create(&s, DIR, name(1), INCARNATION, cfg()).expect("create");
    w.append(&commit_entry(1, 0, &batch(1))).expect("append");
    let at = w.offset();
    faults.fail_next(FaultOp::Write, 5, 1);
    assert!(w.append(&commit_entry(2, 0, &batch(3))).is_err());
    assert!(w.poisoned().is_none(), "a failed write is no failed sync");
    assert_eq!(w.offset(), at);
    assert_eq!(
        w.append(&commit_entry(2, 0, &batch(2))).expect("append"),
        at
    );
    assert_eq!(
        recovered_versions(&s, &w.reference(0, 0)).expect("replays"),
        vec![1, 2]
    );
}

/// Power loss while the last append is in flight (written, its sync failed so it was never
/// acknowledged), under every tear mode and many seeds: recovery returns every acknowledged
/// commit with its exact batch, maybe the in-flight one in full, nothing else; the writer
/// resumes and later commits replay too.
#[test]
fn power_loss_at_every_append_loses_no_acknowledged_commit() {
    for acked in 0..6u64 {
        for seed in 0..24u64 {
            let faults = FaultInjector::new();
            let s = storage(Some(faults.clone()));
            let mut w = LogWriter::create(&s, DIR, name(1), INCARNATION, cfg()).expect("create");
            for v in 1..=acked {
                w.append(&commit_entry(v, v, &batch(v))).expect("append");
            }
            faults.fail_next(FaultOp::Sync, 5, 1);
            assert!(
                w.append(&commit_entry(acked + 1, 0, &batch(acked + 1)))
                    .is_err()
            );
            let weights = match seed % 4 {
                0 => RandomCrash::new(seed).weights(0, 0, 1, 0),
                1 => RandomCrash::new(seed).weights(0, 0, 0, 1),
                2 => RandomCrash::new(seed).weights(0, 1, 0, 0),
                _ => RandomCrash::new(seed),
            };
            let (image, _) = s.crash_image(CrashPolicy::Random(weights));
            let r = reference(&w);
            let replayed = replay_ref(&image, DIR, &r)
                .unwrap_or_else(|e| panic!("acked {acked} seed {seed}: {e}"));
            let got: Vec<u64> = replayed.records.iter().map(|c| c.entry.version).collect();
            let all: Vec<u64> = (1..=acked + 1).collect();
            assert!(
                got == all[..acked as usize] || got == all,
                "acked {acked} seed {seed}: recovered {got:?}"
            );
            for c in &replayed.records {
                let muts = batch(c.entry.version);
                let want = commit_entry(c.entry.version, c.entry.clock_ms, &muts);
                assert_eq!(
                    c.entry.borrowed().mutations,
                    want.mutations,
                    "wrong values in {}",
                    c.entry.version
                );
            }
            // Resume after whatever survived and keep going.
            let mut w2 = LogWriter::resume(&image, DIR, name(1), INCARNATION, cfg(), &replayed)
                .expect("resume");
            let next = got.last().copied().unwrap_or(0) + 1;
            w2.append(&commit_entry(next, 0, &batch(next)))
                .expect("append after resume");
            let versions = recovered_versions(&image, &r)
                .unwrap_or_else(|e| panic!("acked {acked} seed {seed} after resume: {e}"));
            assert_eq!(
                versions,
                (1..=next).collect::<Vec<_>>(),
                "acked {acked} seed {seed}"
            );
        }
    }
}

#[test]
fn recover_continues_across_files_and_starts_after_the_checkpoint() {
    let s = storage(None);
    let mut a = LogWriter::create(&s, DIR, name(1), INCARNATION, cfg()).expect("create");
    for v in 1..=5 {
        a.append(&commit_entry(v, v, &batch(v))).expect("append");
    }
    let mut b = LogWriter::create(&s, DIR, name(2), INCARNATION, cfg()).expect("create");
    for v in 6..=8 {
        b.append(&commit_entry(v, v, &batch(v))).expect("append");
    }
    // The checkpoint covers version 3: 4..=8 come back, as runs of the buffer.
    let refs = [a.reference(0, 3), b.reference(0, 5)];
    let (buf, replays) = recover(&s, DIR, &refs).expect("recovers");
    assert_eq!(replays.len(), 2);
    assert_eq!(buf.last_version(), Some(8));
    let mut versions: Vec<(u64, u64)> = buf.runs().iter().map(|r| r.versions()).collect();
    versions.sort_unstable();
    assert_eq!(versions.first().map(|v| v.0), Some(4));
    // A fork's inherited prefix stops at `until`.
    let mut upto = a.reference(0, 3);
    upto.until = 4;
    let (buf, _) = recover(&s, DIR, &[upto]).expect("recovers");
    assert_eq!(buf.last_version(), Some(4));
    // A second file that does not continue the first is corruption, not a silent gap:
    // b's commits above 6 start at 7, but a ends at 5.
    let e = recover(&s, DIR, &[a.reference(0, 3), b.reference(0, 6)]).expect_err("gap");
    assert_eq!(e.kind(), bough_io::ErrorKind::Corruption, "{e}");
    let (buf, _) = recover(&s, DIR, &[a.reference(0, 1), b.reference(0, 5)]).expect("continues");
    assert_eq!(buf.last_version(), Some(8));
    let mut short = a.reference(0, 1);
    short.until = 2;
    let e = recover(&s, DIR, &[short, b.reference(0, 5)]).expect_err("versions 3..=5 missing");
    assert_eq!(e.kind(), bough_io::ErrorKind::Corruption, "{e}");
    // A log that ends before the version the manifest says it covers is corruption.
    let e = recover(&s, DIR, &[b.reference(0, 9)]).expect_err("covers more than it holds");
    assert_eq!(e.kind(), bough_io::ErrorKind::Corruption, "{e}");
}

#[test]
fn unsynced_appends_sync_nothing_until_one_sync_covers_them() {
    let s = storage(None);
    let mut w = LogWriter::create(&s, DIR, name(1), INCARNATION, cfg()).expect("create");
    for version in 1..=20 {
        let before = s.stats().snapshot();
        w.append_unsynced(&commit_entry(version, version, &batch(version)))
            .expect("append");
        let d = s.stats().snapshot().since(&before);
        assert_eq!((d.syncs, d.dir_syncs), (0, 0), "commit {version}: {d:?}");
        assert!(w.unsynced());
    }
    let before = s.stats().snapshot();
    w.sync().expect("sync");
    w.sync().expect("nothing to sync");
    assert_eq!(s.stats().snapshot().since(&before).syncs, 1);
    assert!(!w.unsynced());
    assert_eq!(
        recovered_versions(&s.clone_durable(), &reference(&w)).expect("replays"),
        (1..=20).collect::<Vec<_>>()
    );
}

#[test]
fn a_failed_sync_of_unsynced_appends_poisons_and_is_never_retried() {
    let faults = FaultInjector::new();
    let s = storage(Some(faults.clone()));
    let mut w = LogWriter::create(&s, DIR, name(1), INCARNATION, cfg()).expect("create");
    w.append_unsynced(&commit_entry(1, 0, &batch(1)))
        .expect("append");
    faults.fail_next(FaultOp::Sync, 5, 1);
    assert!(w.sync().is_err());
    let syncs = s.stats().syncs();
    assert_eq!(
        w.sync().map_err(|e| e.kind()),
        Err(bough_io::ErrorKind::Poisoned)
    );
    assert!(w.append(&commit_entry(2, 0, &batch(2))).is_err());
    assert_eq!(s.stats().syncs(), syncs, "no sync was retried");
}

/// `synced` appends, then unsynced ones (a synced append among them now and then), then a
/// power loss under every tear mode and many seeds: recovery returns every commit up to
/// the last sync and a prefix of the rest, never corruption; after resuming (which zeroes
/// what was dropped) later commits replay right after that prefix.
#[test]
fn power_loss_among_unsynced_appends_loses_only_unsynced_commits() {
    for seed in 0..96u64 {
        let synced = seed % 4;
        let s = storage(None);
        let mut w = LogWriter::create(&s, DIR, name(1), INCARNATION, cfg()).expect("create");
        let mut durable = 0;
        for v in 1..=synced + 8 {
            let muts = batch(v);
            let entry = commit_entry(v, v, &muts);
            if v <= synced || (seed % 5 == 0 && v == synced + 4) {
                w.append(&entry).expect("append");
                durable = v;
            } else {
                w.append_unsynced(&entry).expect("append");
            }
        }
        let weights = match seed % 5 {
            0 => RandomCrash::new(seed).weights(0, 0, 1, 0),
            1 => RandomCrash::new(seed).weights(0, 0, 0, 1),
            2 => RandomCrash::new(seed).weights(1, 1, 0, 0),
            3 => RandomCrash::new(seed).weights(2, 1, 1, 1),
            _ => RandomCrash::new(seed),
        };
        let (image, _) = s.crash_image(CrashPolicy::Random(weights));
        let r = reference(&w);
        let replayed = replay_ref(&image, DIR, &r)
            .unwrap_or_else(|e| panic!("seed {seed}: unsynced loss read as damage: {e}"));
        let got: Vec<u64> = replayed.records.iter().map(|c| c.entry.version).collect();
        assert!(
            got.len() as u64 >= durable,
            "seed {seed}: lost a synced commit: {got:?}"
        );
        assert_eq!(
            got,
            (1..=got.len() as u64).collect::<Vec<_>>(),
            "seed {seed}"
        );
        for c in &replayed.records {
            let muts = batch(c.entry.version);
            let want = commit_entry(c.entry.version, c.entry.clock_ms, &muts);
            assert_eq!(c.entry.borrowed().mutations, want.mutations, "seed {seed}");
        }
        let mut w2 =
            LogWriter::resume(&image, DIR, name(1), INCARNATION, cfg(), &replayed).expect("resume");
        let next = got.len() as u64 + 1;
        w2.append_unsynced(&commit_entry(next, 0, &batch(next)))
            .expect("append after resume");
        w2.sync().expect("sync");
        let versions = recovered_versions(&image.clone_durable(), &r)
            .unwrap_or_else(|e| panic!("seed {seed} after resume: {e}"));
        assert_eq!(versions, (1..=next).collect::<Vec<_>>(), "seed {seed}");
    }
}

/// A synced record damaged with a record written after its sync intact: corruption, as
/// before version 2.
#[test]
fn damage_to_a_synced_record_before_a_later_one_is_corruption() {
    let s = storage(None);
    let mut w = LogWriter::create(&s, DIR, name(1), INCARNATION, cfg()).expect("create");
    w.append_unsynced(&commit_entry(1, 0, &batch(1)))
        .expect("append");
    w.sync().expect("sync");
    w.append_unsynced(&commit_entry(2, 0, &batch(2)))
        .expect("append");
    let image = s.crash_image(CrashPolicy::KeepAllUnsynced).0;
    let path = format!("{DIR}/{}", name(1));
    let f = image
        .open(
            &path,
            bough_io::OpenOptions {
                write: true,
                ..bough_io::OpenOptions::default()
            },
        )
        .expect("open");
    f.write_at(30, &[0xee]).expect("damage");
    let e = replay_ref(&image, DIR, &reference(&w)).expect_err("synced record damaged");
    assert_eq!(e.kind(), bough_io::ErrorKind::Corruption, "{e}");
}
