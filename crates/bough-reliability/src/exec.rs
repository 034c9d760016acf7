//! Running workload operations against a [`Store`], and reading back what a family holds.

use std::collections::BTreeMap;
use std::sync::Arc;

use bough::io::Storage;
use bough::{ConflictPolicy, ErrorKind, MergeOptions, Options, ScanOptions, Store, WriteBatch};

use crate::check;
use crate::workload::{BranchView, FamilyView, Op, State, TABLE, key, value};

/// The store settings every harness run uses: small data files (16 pages), the smallest
/// manifest rewrite threshold, the smallest log files (14 records: they fill and are left
/// for the next one with commits still buffered) and frequent mapping checkpoints, so a
/// short workload rolls files, rewrites manifests and checkpoints often; no background
/// maintenance (the workload runs GC and compaction itself); history points on.
pub fn tune(opts: Options) -> Options {
    opts.page_size(PAGE_SIZE)
        .write_buffer_bytes(write_buffer_bytes())
        .data_file_size(16 * u64::from(PAGE_SIZE))
        .manifest_rewrite_bytes(64 * 1024)
        .log_file_bytes(64 * 1024)
        .checkpoint_chunks(2)
        .cache_bytes(1 << 20)
        .maintenance_interval_ms(0)
        .shards(2)
        .history_window_ms(history_window_ms())
}

/// The history window of harness stores: on, so every manifest record is followed by a
/// history point and every crash point lands before, in or after one, unless
/// `BOUGH_HARNESS_HISTORY_MS` sets it (0: no history points). Longer than any clock the
/// harness sets (its stores reopen at clocks millions of ms apart): pruning would make
/// files GC's dry run called live before the jump collectable after it, and pruning is
/// tested where the clock is the subject (`crates/bough/tests/point_in_time.rs`).
fn history_window_ms() -> u64 {
    std::env::var("BOUGH_HARNESS_HISTORY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 40)
}

/// The write buffer of harness stores: small, so the workloads' commits keep crossing
/// checkpoints (every crash point then lands before, in or after one), unless
/// `BOUGH_HARNESS_WRITE_BUFFER` sets it (0: no log, each commit writes its pages).
fn write_buffer_bytes() -> u64 {
    std::env::var("BOUGH_HARNESS_WRITE_BUFFER")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(HARNESS_WRITE_BUFFER)
}

/// Default of [`write_buffer_bytes`].
pub const HARNESS_WRITE_BUFFER: u64 = 16 << 10;

/// Page size of harness stores.
pub const PAGE_SIZE: u32 = 4096;

/// Runs operation number `index` of `family` on the store. `Ok` means acknowledged.
pub fn execute(store: &Store, seed: u64, family: u32, index: usize, op: &Op) -> bough::Result<()> {
    let part = store.partition(TABLE, family)?;
    match op {
        Op::Write {
            branch,
            puts,
            deletes,
        } => {
            let mut batch = WriteBatch::new();
            for &k in puts {
                batch.put(key(k), value(seed, family, index, branch, k));
            }
            for &k in deletes {
                batch.delete(key(k));
            }
            part.branch(branch)?.write_blocking(batch)
        }
        Op::CreateBranch { name, from } => part.create_branch(name, from).map(|_| ()),
        Op::DeleteBranch { name } => part.delete_branch(name),
        Op::Archive { branch } => part.branch(branch)?.archive().map(|_| ()),
        Op::PruneArchives { branch, keep } => {
            part.branch(branch)?.prune_archives(*keep).map(|_| ())
        }
        Op::BranchFromArchive { branch, name } => {
            let b = part.branch(branch)?;
            let latest = latest_archive(&b)?;
            b.branch_from_archive(&latest, name).map(|_| ())
        }
        Op::Merge { source, target } => {
            let opts = MergeOptions {
                policy: ConflictPolicy::Theirs,
                dry_run: false,
                fast_forward: true,
                count_fast_forward: false,
            };
            let report = part.merge(source, target, opts)?;
            if !report.conflicts.is_empty() {
                return Err(harness_error(format!(
                    "merge {source} -> {target} reported {} conflicts with the Theirs policy",
                    report.conflicts.len()
                )));
            }
            Ok(())
        }
        Op::NewTerm { branch } => part.open_new_term(branch).map(|_| ()),
        Op::Restore { branch, backup } => {
            let b = part.branch(branch)?;
            let latest = latest_archive(&b)?;
            b.restore(&latest, backup)
        }
        Op::Compact { branch } => part.branch(branch)?.compact_now().map(|_| ()),
        Op::Rehome { branch } => part.branch(branch)?.rehome().map(|_| ()),
        Op::Gc => part.gc().map(|_| ()),
    }
}

fn latest_archive(b: &bough::Branch) -> bough::Result<bough::ArchiveName> {
    b.archives()?
        .pop()
        .ok_or_else(|| harness_error(format!("{} has no archive", b.label())))
}

/// An error the harness raises itself (an expectation the store broke); `InvalidArgument`,
/// so it never passes for an injected I/O error.
fn harness_error(what: String) -> bough::Error {
    bough::Error::from(bough::io::IoError::InvalidArgument { what })
}

/// Reads a whole branch through the public API.
pub fn read_branch(b: &bough::Branch) -> bough::Result<State> {
    let mut out = BTreeMap::new();
    let mut opts = ScanOptions {
        limit: 64,
        ..Default::default()
    };
    loop {
        let page = b.scan_blocking(&opts)?;
        for kv in page.entries {
            out.insert(kv.key, Arc::from(kv.value.value));
        }
        match page.next {
            Some(next) => opts.begin = std::ops::Bound::Included(next),
            None => break,
        }
    }
    Ok(Arc::new(out))
}

/// What a family holds now: its live branches (read through the store) and each branch's
/// archives (read from `storage` with the checker's reader).
pub fn observe(
    store: &Store,
    storage: &Arc<dyn Storage>,
    family: u32,
    page_size: u32,
) -> bough::Result<FamilyView> {
    let part = store.partition(TABLE, family)?;
    let mut view = FamilyView::new();
    for name in part.branches()? {
        let b = match part.branch(&name) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let state = read_branch(&b)?;
        let mut archives = Vec::new();
        for a in b.archives()? {
            let entries = check::read_archive(storage.clone(), part.dir(), &a, page_size)
                .map_err(bough::Error::from)?;
            archives.push(entries);
        }
        let bases = check::read_merge_bases(storage.clone(), part.dir(), &name, page_size)
            .map_err(bough::Error::from)?;
        view.insert(
            name,
            BranchView {
                state,
                archives,
                bases,
            },
        );
    }
    Ok(view)
}

/// How a family's observed state compares with the states it may be in.
#[derive(Debug)]
pub enum Verdict {
    /// It is candidate number `n`.
    Match(usize),
    /// It is none of them.
    Mismatch {
        /// How it differs from the first candidate (the acknowledged state).
        detail: String,
        /// Acknowledged changes missing (keys, branches, archives).
        lost: u64,
        /// Values no candidate holds and no write of the workload wrote.
        wrong: u64,
    },
    /// Reading it failed.
    Error(bough::Error),
}

/// Whether `v` is a value the workload really wrote (a stale one, maybe), as opposed to
/// bytes nobody wrote.
pub fn genuine(seed: u64, v: &[u8]) -> bool {
    let Some(bar) = v.iter().position(|&b| b == b'|') else {
        return false;
    };
    let head = String::from_utf8_lossy(&v[..bar]);
    let parts: Vec<&str> = head.split('/').collect();
    let [family, branch, op, k] = parts.as_slice() else {
        return false;
    };
    let (Ok(family), Ok(op), Some(Ok(k))) = (
        family.parse::<u32>(),
        op.parse::<usize>(),
        k.strip_prefix('k').map(str::parse::<u32>),
    ) else {
        return false;
    };
    value(seed, family, op, branch, k) == v
}

/// Reads family `family` and compares it with `candidates` (allowed states, the
/// acknowledged one first).
pub fn verify_family(
    store: &Store,
    storage: &Arc<dyn Storage>,
    seed: u64,
    family: u32,
    candidates: &[crate::workload::FamilyModel],
) -> Verdict {
    verify_family_with(store, storage, seed, family, candidates, true)
}

/// [`verify_family`], optionally ignoring merge bases. They are read from the manifest
/// bytes in storage, so right after a failed commit (before a reopen) they may show an
/// appended but unsynced record the store never published: only a reopened store's
/// bases must match.
pub fn verify_family_with(
    store: &Store,
    storage: &Arc<dyn Storage>,
    seed: u64,
    family: u32,
    candidates: &[crate::workload::FamilyModel],
    bases: bool,
) -> Verdict {
    let strip = |mut v: FamilyView| {
        if !bases {
            v.values_mut().for_each(|b| b.bases.clear());
        }
        v
    };
    let seen = match observe(store, storage, family, PAGE_SIZE) {
        Ok(v) => strip(v),
        Err(e) => return Verdict::Error(e),
    };
    let views: Vec<FamilyView> = candidates.iter().map(|c| strip(c.view())).collect();
    if let Some(n) = views.iter().position(|v| *v == seen) {
        return Verdict::Match(n);
    }
    let (mut lost, mut wrong) = (0u64, 0u64);
    let names: std::collections::BTreeSet<&String> = views
        .iter()
        .flat_map(|v| v.keys())
        .chain(seen.keys())
        .collect();
    for name in names {
        let allowed: Vec<&BranchView> = views.iter().filter_map(|v| v.get(name)).collect();
        let may_be_absent = allowed.len() < views.len();
        match seen.get(name) {
            None if !may_be_absent => lost += 1,
            None => {}
            Some(_) if allowed.is_empty() => lost += 1,
            Some(BranchView {
                state,
                archives,
                bases,
            }) => {
                let states: Vec<&State> = allowed.iter().map(|v| &v.state).collect();
                let m = crate::workload::classify(&states, None, state);
                // A value the workload wrote but that is not allowed here is stale: an
                // acknowledged change was lost. Bytes nobody wrote are wrong.
                let mut keys: std::collections::BTreeSet<&Vec<u8>> = state.keys().collect();
                for s in &states {
                    keys.extend(s.keys());
                }
                let mut bogus = 0;
                for k in keys {
                    let v = state.get(k);
                    if states.iter().any(|s| s.get(k) == v) {
                        continue;
                    }
                    if let Some(v) = v
                        && !genuine(seed, v)
                    {
                        bogus += 1;
                    }
                }
                wrong += bogus;
                lost += (m.lost + m.wrong_values).saturating_sub(bogus);
                if !allowed.iter().any(|v| v.bases == *bases) {
                    lost += 1;
                }
                if !allowed.iter().any(|v| v.archives == *archives) {
                    let bad_archive = archives
                        .iter()
                        .flat_map(|a| a.values())
                        .filter(|v| !genuine(seed, v))
                        .count() as u64;
                    wrong += bad_archive;
                    lost += 1;
                }
            }
        }
    }
    let detail = views
        .iter()
        .enumerate()
        .map(|(i, v)| {
            format!(
                "[vs candidate {i}: {}]",
                crate::workload::describe_diff(v, &seen).unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join(" ");
    Verdict::Mismatch {
        detail,
        lost: lost.max(u64::from(wrong == 0)),
        wrong,
    }
}
