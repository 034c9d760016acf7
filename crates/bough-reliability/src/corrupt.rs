//! Bit flips in a built store.
//!
//! The workload builds a store with several families, branches and archives. Each flip
//! copies its durable image, flips one bit — in a data page, a data-file header, a
//! manifest, an archive or a `CURRENT_TERM` file (the class chosen evenly, then a file and a
//! bit) — and reopens it. Then, bounded in time and with panics caught:
//!
//! - every branch is read (a full scan and point lookups): each read returns exactly the
//!   right data or fails with `Corruption`; never other data, never another error kind;
//! - when the flip lies in one branch's manifest or `CURRENT_TERM`, every *other* branch
//!   reads correctly (corruption in one branch never stops the others); a flip in an
//!   archive disturbs no branch;
//! - every archive reads right or fails with `Corruption`;
//! - the integrity checker runs without panicking;
//! - GC runs and either succeeds or refuses with `Corruption`; then the bit is flipped back
//!   and everything must read exactly right: GC never deletes what a damaged manifest
//!   could not vouch for.
//!
//! The store is closed cleanly before the flips, so every manifest is one snapshot record
//! and a flip in it is `Corruption`. One outcome is still allowed that is not "right or
//! `Corruption`", for manifests that were not closed cleanly: a flip inside the *last*
//! record makes that record look torn, and a torn last record is by design the end of the
//! log (an interrupted append looks the same). The branch then shows its state before that
//! record — a real earlier commit, never invented data. Such flips are counted as tail
//! rollbacks.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc;

use bough::io::{MemoryStorage, OpenOptions, Storage};
use bough::{ErrorKind, ManualClock, Store};
use bough_names::{ArchiveName, FileKind, PartitionDir, classify, classify_dir};

use crate::exec::{PAGE_SIZE, execute, read_branch};
use crate::power::{memory_options, schedule};
use crate::report::{Tally, guarded};
use crate::rng::Rng;
use crate::workload::{FamilyModel, State, TABLE, WorkloadConfig, state_diff};

/// How many flips.
#[derive(Debug, Clone, Copy)]
pub struct CorruptConfig {
    /// The workload that builds the store.
    pub workload: WorkloadConfig,
    /// Bit flips.
    pub flips: u64,
    /// Longest a flip's checks may take before it counts as a hang.
    pub timeout_secs: u64,
    /// Worker threads.
    pub threads: usize,
}

impl CorruptConfig {
    /// CI: 3,000 flips.
    pub fn short() -> Self {
        CorruptConfig {
            workload: WorkloadConfig {
                families: 2,
                ops_per_family: 50,
                keys: 40,
                max_branches: 5,
            },
            flips: 3000,
            timeout_secs: 60,
            threads: 2,
        }
    }

    /// Long: 20,000 flips.
    pub fn long() -> Self {
        CorruptConfig {
            flips: 20_000,
            ..Self::short()
        }
    }
}

/// What kind of bytes a flip hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A framed page (index ≥ 1) of a data file.
    DataPage,
    /// Page 0 of a data file.
    DataHeader,
    /// A branch's manifest.
    Manifest,
    /// An archive.
    Archive,
    /// A `CURRENT_TERM` file.
    CurrentTerm,
}

const TARGETS: [Target; 5] = [
    Target::DataPage,
    Target::DataHeader,
    Target::Manifest,
    Target::Archive,
    Target::CurrentTerm,
];

/// One file of the built store.
#[derive(Debug, Clone)]
struct StoreFile {
    path: String,
    family: u32,
    target: Target,
    /// The branch whose manifest, archive or `CURRENT_TERM` it is.
    branch: Option<String>,
    len: u64,
    /// Start of the last manifest record (manifests only).
    last_record: Option<u64>,
}

/// The built store and what it must hold.
struct Built {
    image: MemoryStorage,
    models: Vec<FamilyModel>,
    /// Per family and branch, the distinct states it went through (latest last).
    history: Vec<BTreeMap<String, Vec<State>>>,
    files: Vec<StoreFile>,
    /// Files GC or recovery may delete: data files nothing references, manifests of
    /// superseded terms (a term change's deletion of the old manifest is not synced, so a
    /// power loss can bring it back), archives of deleted branches.
    collectable: std::collections::BTreeSet<String>,
}

fn build(seed: u64, cfg: &WorkloadConfig) -> Result<Built, String> {
    let mem = MemoryStorage::new();
    let clock = ManualClock::new(1_000_000);
    let store = Store::open(memory_options(mem.clone(), &clock)).map_err(|e| e.to_string())?;
    let mut models: Vec<FamilyModel> = (0..cfg.families).map(FamilyModel::new).collect();
    let mut history: Vec<BTreeMap<String, Vec<State>>> = vec![BTreeMap::new(); models.len()];
    for f in schedule(seed, cfg) {
        let m = &mut models[f as usize];
        let op = m.next_op(seed, cfg);
        clock.advance(1);
        execute(&store, seed, f, m.applied, &op)
            .map_err(|e| format!("building: {} failed: {e}", op.kind()))?;
        m.apply(seed, &op);
        let h = &mut history[f as usize];
        h.retain(|b, _| m.branches.contains_key(b));
        for (b, bm) in &m.branches {
            let states = h.entry(b.clone()).or_default();
            if states.last() != Some(&bm.state) {
                states.push(bm.state.clone());
            }
        }
    }
    store.close().map_err(|e| e.to_string())?;
    let image = mem.clone_durable();
    // What GC may delete once the store is reopened (no writer is filling a file then).
    let mut collectable = std::collections::BTreeSet::new();
    let reopened =
        Store::open(memory_options(image.clone_durable(), &clock)).map_err(|e| e.to_string())?;
    for m in &models {
        let p = reopened
            .partition(TABLE, m.family)
            .map_err(|e| e.to_string())?;
        let report = p.gc_dry_run().map_err(|e| e.to_string())?;
        for (name, _) in report.deleted {
            collectable.insert(format!("{}/{name}", p.dir()));
        }
    }
    reopened.close().map_err(|e| e.to_string())?;
    let mut files = Vec::new();
    for d in image.list_dirs().map_err(|e| e.to_string())? {
        let Some(dir) = classify_dir(&d) else {
            continue;
        };
        for n in image.list(&d).map_err(|e| e.to_string())? {
            let path = format!("{d}/{n}");
            let len = image.file_len(&path).map_err(|e| e.to_string())?;
            let (target, branch) = match classify(&n) {
                FileKind::Data(_) => (Target::DataPage, None),
                FileKind::Manifest(m) => (Target::Manifest, Some(m.branch.to_string())),
                FileKind::Archive(a) => (Target::Archive, Some(a.branch.to_string())),
                FileKind::CurrentTerm(c) => (Target::CurrentTerm, Some(c.branch.to_string())),
                _ => continue,
            };
            let live_term = |branch: &bough_names::BranchName| {
                let ct = format!("{d}/CURRENT_TERM.{branch}");
                image
                    .read_file(&ct, 4096)
                    .ok()
                    .and_then(|b| bough_manifest::CurrentTerm::decode(&b).ok())
            };
            let stale = match classify(&n) {
                FileKind::Manifest(m) => {
                    live_term(&m.branch).is_none_or(|ct| ct.deleted || m.term < ct.term)
                }
                FileKind::Archive(a) => {
                    live_term(&a.branch).is_some_and(|ct| ct.deleted && a.term <= ct.term)
                }
                _ => false,
            };
            if stale {
                collectable.insert(path.clone());
            }
            let last_record = (target == Target::Manifest)
                .then(|| last_record_offset(&image, &path))
                .flatten();
            let file = StoreFile {
                path,
                family: dir.partition,
                target,
                branch,
                len,
                last_record,
            };
            if target == Target::DataPage {
                files.push(StoreFile {
                    target: Target::DataHeader,
                    ..file.clone()
                });
                if len <= u64::from(PAGE_SIZE) {
                    continue;
                }
            }
            files.push(file);
        }
    }
    Ok(Built {
        image,
        models,
        history,
        files,
        collectable,
    })
}

/// Where the last intact record of a manifest starts.
fn last_record_offset(image: &MemoryStorage, path: &str) -> Option<u64> {
    crate::check::last_record_offset(&image.read_file(path, 1 << 32).ok()?)
}

/// The bit a flip hits: (file index, byte offset, bit).
fn choose(r: &mut Rng, files: &[StoreFile]) -> Option<(usize, u64, u8)> {
    for _ in 0..16 {
        let target = *r.pick(&TARGETS)?;
        let idx: Vec<usize> = (0..files.len())
            .filter(|&i| files[i].target == target && files[i].len > 0)
            .collect();
        let Some(&i) = r.pick(&idx) else {
            continue;
        };
        let f = &files[i];
        let ps = u64::from(PAGE_SIZE);
        let byte = match target {
            Target::DataHeader if r.chance(50) => r.below(64.min(f.len)),
            Target::DataHeader => r.below(ps.min(f.len)),
            Target::DataPage => r.range(ps, f.len),
            _ => r.below(f.len),
        };
        return Some((i, byte, r.below(8) as u8));
    }
    None
}

fn flip(image: &MemoryStorage, path: &str, byte: u64, bit: u8) -> Result<(), String> {
    let file = image
        .open(path, OpenOptions::write_create())
        .map_err(|e| e.to_string())?;
    let mut b = [0u8; 1];
    file.read_at(byte, &mut b).map_err(|e| e.to_string())?;
    b[0] ^= 1 << bit;
    file.write_at(byte, &b).map_err(|e| e.to_string())?;
    file.sync().map_err(|e| e.to_string())
}

/// Runs the bit flips.
pub fn run(seed: u64, cfg: &CorruptConfig) -> Tally {
    guarded("bit flips", || {
        let mut tally = Tally::default();
        let built = match build(seed, &cfg.workload) {
            Ok(b) => Arc::new(b),
            Err(e) => {
                tally.fail(format!("bit flips (seed {seed}): {e}"));
                return tally;
            }
        };
        let size: u64 = built.files.iter().map(|f| f.len).sum();
        eprintln!(
            "bit flips: seed {seed}, store of {} files, {} KiB; {} flips",
            built.files.len(),
            size / 1024,
            cfg.flips
        );
        let threads = cfg.threads.max(1) as u64;
        let (tx, rx) = mpsc::channel::<Tally>();
        let mut workers = Vec::new();
        for w in 0..threads {
            let (built, tx, cfg) = (built.clone(), tx.clone(), *cfg);
            workers.push(std::thread::spawn(move || {
                let mut i = w;
                while i < cfg.flips {
                    let t = guarded(&format!("flip {i}"), || one_flip(seed, i, &built));
                    if tx.send(t).is_err() {
                        return;
                    }
                    i += threads;
                }
            }));
        }
        drop(tx);
        crate::report::gather_trials(tally, &rx, workers, cfg.flips, cfg.timeout_secs, |secs| {
            format!("bit flips (seed {seed}): no flip finished within {secs} s — a read hangs")
        })
    })
}

/// How one read turned out.
enum Read {
    Right,
    Corrupt,
    Rollback,
    Bad(String),
}

/// One flip and its checks.
fn one_flip(seed: u64, i: u64, built: &Built) -> Tally {
    let mut tally = Tally::default();
    let mut r = Rng::derive(seed, &[0x464C, i]);
    let Some((fi, byte, bit)) = choose(&mut r, &built.files) else {
        return tally;
    };
    let file = &built.files[fi];
    let ctx = format!(
        "seed {seed} flip {i}: bit {bit} of byte {byte} of {} ({:?})",
        file.path, file.target
    );
    let image = built.image.clone_durable();
    if let Err(e) = flip(&image, &file.path, byte, bit) {
        tally.fail(format!("{ctx}: cannot flip: {e}"));
        return tally;
    }
    tally.bit_flips += 1;
    let in_last_record = file.last_record.is_some_and(|s| byte >= s);
    let clock = ManualClock::new(10_000_000);
    let store = match Store::open(memory_options(image.clone(), &clock)) {
        Ok(s) => s,
        Err(e) => {
            tally.fail(format!("{ctx}: open failed: {e}"));
            return tally;
        }
    };
    let (mut corrupt, mut rollback) = (false, false);
    for m in &built.models {
        let part = match store.partition(TABLE, m.family) {
            Ok(p) => p,
            Err(e) => {
                tally.fail(format!("{ctx}: partition handle: {e}"));
                continue;
            }
        };
        for (name, bm) in &m.branches {
            // Is this branch allowed to fail because of this flip?
            let own = file.family == m.family && file.branch.as_deref() == Some(name.as_str());
            let may_fail = match file.target {
                Target::DataPage | Target::DataHeader => true,
                Target::Manifest | Target::CurrentTerm => own,
                Target::Archive => false,
            };
            let may_roll_back = own && file.target == Target::Manifest && in_last_record;
            let history = built.history[m.family as usize].get(name);
            let verdict = read_whole_branch(&part, name, &bm.state, history, may_roll_back);
            match verdict {
                Read::Right => {}
                Read::Rollback => rollback = true,
                Read::Corrupt if may_fail => corrupt = true,
                Read::Corrupt => tally.fail(format!(
                    "{ctx}: branch {name} of family {} failed with Corruption, but the flip is not in anything it reads",
                    m.family
                )),
                Read::Bad(what) => {
                    if what.starts_with("wrong") {
                        tally.wrong += 1;
                    }
                    tally.fail(format!("{ctx}: family {} branch {name}: {what}", m.family));
                }
            }
            // Archives: right or Corruption.
            let dir = part.dir().clone();
            let archives = list_archives(&image, &dir, name);
            if archives.len() != bm.archives.len() {
                tally.fail(format!(
                    "{ctx}: family {} branch {name}: {} archives listed, {} expected",
                    m.family,
                    archives.len(),
                    bm.archives.len()
                ));
                continue;
            }
            for (a, want) in archives.iter().zip(&bm.archives) {
                let storage: Arc<dyn Storage> = Arc::new(image.clone());
                match crate::check::read_archive(storage, &dir, a, PAGE_SIZE) {
                    Ok(s) if s == *want => {}
                    Ok(s) => {
                        tally.wrong += 1;
                        tally.fail(format!(
                            "{ctx}: archive {a} read wrong data: {}",
                            state_diff(want, &s)
                        ));
                    }
                    Err(e) if e.kind() == ErrorKind::Corruption => corrupt = true,
                    Err(e) => tally.fail(format!(
                        "{ctx}: archive {a} failed with {:?}, not Corruption: {e}",
                        e.kind()
                    )),
                }
            }
        }
    }
    // The checker must survive it (and usually notices).
    tally.integrity_checks += 1;
    match crate::check::check_storage(Arc::new(image.clone())) {
        Ok(rep) if !rep.is_ok() => corrupt = true,
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::Corruption => corrupt = true,
        Err(e) => tally.fail(format!("{ctx}: the checker failed with {e}")),
    }
    // GC on damaged metadata must refuse, not delete.
    for m in &built.models {
        if let Ok(p) = store.partition(TABLE, m.family) {
            match p.gc() {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Corruption => corrupt = true,
                Err(e) => tally.fail(format!(
                    "{ctx}: GC of family {} failed with {:?}, not Corruption: {e}",
                    m.family,
                    e.kind()
                )),
            }
        }
    }
    let _ = store.close();
    // A write over the branch (e.g. pruning a stale merge base when it opened) kept a damaged
    // last record aside (`<manifest>.torn.<offset>.<n>`) and cut it off its manifest (a
    // torn append looks the same): that record is gone from the manifest, and the branch
    // read as its earlier state (or the record changed no key).
    let kept_aside = file.path.rsplit_once('/').is_some_and(|(dir, name)| {
        image.list(dir).is_ok_and(|names| {
            names.iter().any(
                |n| matches!(classify(n), FileKind::TornTail(t) if t.manifest.to_string() == name),
            )
        })
    });
    let cut_off = kept_aside || image.file_len(&file.path).is_ok_and(|len| len <= byte);
    if cut_off && !in_last_record {
        tally.fail(format!(
            "{ctx}: the manifest was cut at the damaged record, which was not its last"
        ));
    }
    rollback |= cut_off;
    if rollback {
        tally.flips_tail_rollback += 1;
    } else if corrupt {
        tally.flips_detected += 1;
    } else {
        tally.flips_unnoticed += 1;
    }
    // Heal the bit: everything must be there, exactly (unless a rollback let a later
    // commit overwrite the damaged record — then the rolled-back state is what is left).
    if rollback {
        return tally;
    }
    if image.file_len(&file.path).is_err() {
        // GC deleted the flipped file: fine only if nothing referenced it anyway.
        if !built.collectable.contains(&file.path) {
            tally.lost += 1;
            tally.fail(format!(
                "{ctx}: {} was deleted, but it is live (referenced, or a live manifest)",
                file.path
            ));
        }
        return tally;
    }
    if let Err(e) = flip(&image, &file.path, byte, bit) {
        tally.fail(format!("{ctx}: cannot flip back: {e}"));
        return tally;
    }
    let store = match Store::open(memory_options(image.clone(), &clock)) {
        Ok(s) => s,
        Err(e) => {
            tally.fail(format!("{ctx}: reopen after healing failed: {e}"));
            return tally;
        }
    };
    for m in &built.models {
        let Ok(part) = store.partition(TABLE, m.family) else {
            continue;
        };
        for (name, bm) in &m.branches {
            match read_whole_branch(&part, name, &bm.state, None, false) {
                Read::Right => {}
                Read::Corrupt | Read::Rollback => {
                    tally.lost += 1;
                    tally.fail(format!(
                        "{ctx}: after healing the bit (and a GC), family {} branch {name} is damaged: data was deleted",
                        m.family
                    ));
                }
                Read::Bad(what) => tally.fail(format!(
                    "{ctx}: after healing, family {} branch {name}: {what}",
                    m.family
                )),
            }
        }
    }
    let _ = store.close();
    tally
}

fn list_archives(image: &MemoryStorage, dir: &PartitionDir, branch: &str) -> Vec<ArchiveName> {
    let mut out: Vec<ArchiveName> = image
        .list(&dir.to_string())
        .unwrap_or_default()
        .iter()
        .filter_map(|n| match classify(n) {
            FileKind::Archive(a) if a.branch.as_str() == branch => Some(a),
            _ => None,
        })
        .collect();
    out.sort_by_key(|a| (a.timestamp, a.term));
    out
}

/// Reads a branch by a full scan and by point lookups of every key it should hold.
fn read_whole_branch(
    part: &bough::PartitionHandle,
    name: &str,
    want: &State,
    history: Option<&Vec<State>>,
    may_roll_back: bool,
) -> Read {
    let branch = match part.branch(name) {
        Ok(b) => b,
        Err(e) if e.kind() == ErrorKind::Corruption => return Read::Corrupt,
        Err(e) => return Read::Bad(format!("opening it failed with {:?}: {e}", e.kind())),
    };
    let earlier =
        |s: &State| may_roll_back && history.is_some_and(|h| h.len() >= 2 && h[h.len() - 2] == *s);
    match read_branch(&branch) {
        Ok(s) if s == *want => {}
        Ok(s) if earlier(&s) => return Read::Rollback,
        Ok(s) => return Read::Bad(format!("wrong data from a scan: {}", state_diff(want, &s))),
        Err(e) if e.kind() == ErrorKind::Corruption => return Read::Corrupt,
        Err(e) => return Read::Bad(format!("a scan failed with {:?}: {e}", e.kind())),
    }
    for (k, v) in want.iter() {
        match branch.get_blocking(k) {
            Ok(Some(got)) if *got.value == **v => {}
            Ok(got) => {
                return Read::Bad(format!(
                    "wrong value from get({}): {} bytes",
                    String::from_utf8_lossy(k),
                    got.map_or(0, |g| g.value.len())
                ));
            }
            Err(e) if e.kind() == ErrorKind::Corruption => return Read::Corrupt,
            Err(e) => return Read::Bad(format!("get failed with {:?}: {e}", e.kind())),
        }
    }
    Read::Right
}
