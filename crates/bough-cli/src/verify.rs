//! `bough verify`: reads everything a partition holds and reports every problem.
//!
//! Per partition, without the store lock (a writer may run beside it; see
//! [`verify_settled`]):
//! 1. every `CURRENT_TERM` record decodes, and every live branch has its current manifest;
//! 2. every manifest and archive replays (checksums, sequence, decoding);
//! 3. from every snapshot they hold — each branch head, each archive, each recorded merge
//!    base — every key of the key tree and of the TTL index is read in order, with every
//!    overflow value, and every page the snapshot references (tree, overflow and mapping
//!    pages) is collected;
//! 4. every data file is read page by page: header and identity, each page's checksum and
//!    layout; a referenced page that is missing, past the end of its file or bad is an
//!    error; a bad page nothing references (left by an interrupted or superseded write) is a
//!    warning;
//! 5. unknown and leftover temporary files are warnings; so is a manifest tail that replay
//!    drops (a torn last append or a damaged last record: the commit it held, if any, is
//!    not applied) and a torn tail the engine kept aside before appending over it.
//!
//! The exit code is 0 only when no error was found (with `--strict`, no warning either).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use bough_io::Storage;
use bough_manifest::{CurrentTerm, NO_PAGE};
use bough_names::{FileKind, ManifestName};
use bough_tree::btree::Cursor;
use bough_tree::head::TreeSnapshot;
use bough_tree::page::leaf::ValueLoc;
use clap::Args;
use serde_json::json;

use crate::ctx::{Ctx, partitions_in};
use crate::error::{CliError, CliResult, code};
use crate::output::{self, Progress, plural};
use crate::target::{self, Scope};
use crate::walk::{self, PartitionFiles, check_data_file};

/// `bough verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// TABLE.PART or TABLE (default: the whole store).
    #[arg(value_name = "TABLE[.PART]")]
    scope: Option<String>,
    /// Warnings (unreferenced bad pages, stray files) fail the check too.
    #[arg(long)]
    strict: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Severity {
    Error,
    Warning,
}

#[derive(Debug)]
struct Problem {
    severity: Severity,
    file: String,
    detail: String,
}

#[derive(Debug, Default)]
struct PartReport {
    dir: String,
    branches: usize,
    archives: usize,
    tags: usize,
    snapshots: usize,
    keys: u64,
    data_files: usize,
    pages: u64,
    problems: Vec<Problem>,
}

impl PartReport {
    fn error(&mut self, file: impl Into<String>, detail: impl Into<String>) {
        self.problems.push(Problem {
            severity: Severity::Error,
            file: file.into(),
            detail: detail.into(),
        });
    }
    fn warn(&mut self, file: impl Into<String>, detail: impl Into<String>) {
        self.problems.push(Problem {
            severity: Severity::Warning,
            file: file.into(),
            detail: detail.into(),
        });
    }
    fn count(&self, s: Severity) -> usize {
        self.problems.iter().filter(|p| p.severity == s).count()
    }
    /// What was found, to compare two runs.
    fn findings(&self) -> Vec<(Severity, &str, &str)> {
        self.problems
            .iter()
            .map(|p| (p.severity, p.file.as_str(), p.detail.as_str()))
            .collect()
    }
}

/// Why a tree could not be read: an I/O error (which may name a page of a data file), or
/// keys out of order.
#[derive(Debug)]
enum WalkError {
    Io(bough_io::IoError),
    Value(String, bough_io::IoError),
    Order(String),
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::Io(e) => write!(f, "{e}"),
            WalkError::Value(key, e) => write!(f, "value of key {key}: {e}"),
            WalkError::Order(key) => write!(f, "keys out of order at {key}"),
        }
    }
}

impl WalkError {
    /// The data file of partition `dir` and the page the error is about, if it is a
    /// corruption inside one.
    fn page(&self, dir: &str, page_size: u64) -> Option<(String, u32)> {
        let (WalkError::Io(bough_io::IoError::Corruption { path, offset, .. })
        | WalkError::Value(_, bough_io::IoError::Corruption { path, offset, .. })) = self
        else {
            return None;
        };
        let name = path.strip_prefix(dir)?.strip_prefix('/')?;
        if !matches!(bough_names::classify(name), FileKind::Data(_)) || page_size == 0 {
            return None;
        }
        Some((name.to_string(), u32::try_from(offset / page_size).ok()?))
    }
}

/// Reads every key (and value) of one tree in order; returns the number of entries
/// (tombstones, remembered deletes, are not entries to a user, so they do not count).
fn walk_tree(t: &TreeSnapshot, root: u32) -> Result<u64, WalkError> {
    if root == NO_PAGE {
        return Ok(0);
    }
    let mut c = Cursor::seek(t, root, None).map_err(WalkError::Io)?;
    let mut n = 0u64;
    let mut prev: Option<Vec<u8>> = None;
    while let Some(e) = c.next_entry(t).map_err(WalkError::Io)? {
        if prev.as_ref().is_some_and(|p| *p >= e.key) {
            return Err(WalkError::Order(output::escape(&e.key)));
        }
        if let ValueLoc::Overflow { first, pages, len } = e.value {
            t.read_overflow(first, pages, len)
                .map_err(|err| WalkError::Value(output::escape(&e.key), err))?;
        }
        if !matches!(e.value, ValueLoc::Tombstone) {
            n += 1;
        }
        prev = Some(e.key);
    }
    Ok(n)
}

/// What holds a snapshot, as a user names it: `branch main`, `archive of main taken …`,
/// `merge base of main with feature`.
fn referent(h: &walk::Held) -> String {
    match bough_names::classify(&h.file) {
        FileKind::Manifest(m) if h.label == h.file => format!("branch {}", m.branch),
        FileKind::Manifest(m) => match h.label.rsplit_once("(merge base with ") {
            Some((_, other)) => format!(
                "merge base of branch {} with {}",
                m.branch,
                other.trim_end_matches(')')
            ),
            None => format!("branch {} ({})", m.branch, h.label),
        },
        FileKind::Archive(a) => format!(
            "archive {} of {} (taken {})",
            a.timestamp,
            a.branch,
            output::time(a.timestamp)
        ),
        FileKind::Tag(t) if h.label == h.file => format!("tag {}", t.tag),
        FileKind::Tag(t) => format!("merge base kept by tag {}", t.tag),
        _ => h.label.clone(),
    }
}

/// `a, b and c`.
fn join_referents(whos: &BTreeSet<String>) -> String {
    let v: Vec<&str> = whos.iter().map(String::as_str).collect();
    match v.as_slice() {
        [] => "nothing that could be read".into(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// What to do about a bad page the referents `whos` reach: each affected branch goes back
/// to its newest archive that does not reach the page (what changed since is lost), or,
/// without one, keeps what still reads.
fn remedy(dir: &str, whos: &BTreeSet<String>, held: &[walk::Held]) -> String {
    let mut steps = Vec::new();
    for who in whos {
        let Some(branch) = who.strip_prefix("branch ") else {
            continue;
        };
        let intact = held
            .iter()
            .filter_map(|h| match bough_names::classify(&h.file) {
                FileKind::Archive(a) if a.branch.as_str() == branch => Some((a, referent(h))),
                _ => None,
            })
            .filter(|(_, w)| !whos.contains(w))
            .map(|(a, _)| a)
            .max_by_key(|a| a.timestamp);
        steps.push(match intact {
            Some(a) => format!(
                "`bough archive restore {dir}@{branch} {}` brings {branch} back to its newest \
                 intact archive (the changes since {} are lost)",
                a.timestamp,
                output::time(a.timestamp)
            ),
            None => format!(
                "{branch} has no intact archive: `bough export` or `bough scan` it to keep \
                 what still reads"
            ),
        });
    }
    if steps.is_empty() {
        "Remedy: only archives or merge bases reach it; restore nothing from them".into()
    } else {
        format!("Remedy: {}", steps.join("; "))
    }
}

fn verify_partition(
    storage: &Arc<dyn Storage>,
    root: &Path,
    dir: &str,
    progress: &mut Progress,
) -> CliResult<PartReport> {
    let mut r = PartReport {
        dir: dir.to_string(),
        ..PartReport::default()
    };
    let pf = PartitionFiles::open(storage, dir)?;
    // 1. Names and CURRENT_TERM records.
    let mut live: Vec<(String, u64)> = Vec::new();
    let present: BTreeSet<&str> = pf.names.iter().map(|(n, _)| n.as_str()).collect();
    for (name, kind) in &pf.names {
        match kind {
            FileKind::CurrentTerm(ct) => {
                match storage
                    .read_file(&format!("{dir}/{name}"), 4096)
                    .map_err(|e| e.to_string())
                    .and_then(|b| {
                        CurrentTerm::decode(&b).map_err(|e| {
                            format!("does not decode at offset {}: {}", e.offset, e.reason)
                        })
                    }) {
                    Ok(c) if !c.deleted => live.push((ct.branch.to_string(), c.term)),
                    Ok(_) => {}
                    Err(e) => r.error(name, e),
                }
            }
            FileKind::Archive(_) => r.archives += 1,
            FileKind::Tag(_) => r.tags += 1,
            FileKind::Tmp(_) => r.warn(
                name,
                "leftover temporary file of an interrupted write (the next open removes it)",
            ),
            FileKind::Unknown(_) => r.warn(name, "not a Bough file name; ignored by the store"),
            FileKind::Log(_) => r.warn(
                name,
                "a write-ahead log file; this version does not write or read log files (kept)",
            ),
            FileKind::Lock => r.warn(name, "a LOCK file inside a partition directory"),
            FileKind::GcLease | FileKind::Version(_) => r.warn(
                name,
                "an object-store object (GC lease or numbered version) in a local directory",
            ),
            FileKind::TornTail(t) => r.warn(
                name,
                format!(
                    "kept aside from {}: {}; delete this file once it has been looked at",
                    t.manifest,
                    bough_manifest::dropped_tail_finding(t.offset)
                ),
            ),
            FileKind::Manifest(_) | FileKind::Data(_) => {}
        }
    }
    r.branches = live.len();
    for (b, term) in &live {
        let Ok(bn) = bough_names::BranchName::new(b) else {
            continue;
        };
        let m = ManifestName::new(bn, *term).to_string();
        if !present.contains(m.as_str()) {
            r.error(
                format!("CURRENT_TERM.{b}"),
                format!("branch {b} is at term {term} but {m} is missing"),
            );
        }
        let staged = pf
            .manifests
            .iter()
            .find(|(n, _)| *n == m)
            .and_then(|(_, st)| st.as_ref().ok())
            .and_then(|st| {
                bough_manifest::staging_purpose(&st.extensions)
                    .ok()
                    .flatten()
            });
        if let Some(purpose) = staged {
            r.warn(
                &m,
                format!(
                    "branch {b} is the staging branch of an interrupted `{purpose}`; the next \
                     command that writes to {dir} (or `bough gc`) removes it"
                ),
            );
        }
    }
    // 2. Manifests and archives.
    for (name, res) in &pf.manifests {
        if let Err(e) = res {
            r.error(name, e.clone());
        }
    }
    for (name, off) in &pf.dropped_tails {
        r.warn(name, bough_manifest::dropped_tail_finding(*off));
    }
    // 3. Every snapshot: keys, values, TTL index, referenced pages.
    let (held, errors) = pf.held();
    for (file, e) in errors {
        r.error(file, e);
    }
    let page_size = u64::from(pf.files.page_size());
    let mut referenced: BTreeMap<String, BTreeMap<u32, String>> = BTreeMap::new();
    // A bad page breaks the read of every snapshot that reaches it: one finding per page,
    // naming them all, instead of one per snapshot.
    let mut hits: BTreeMap<(String, u32), (String, BTreeSet<String>)> = BTreeMap::new();
    for h in &held {
        r.snapshots += 1;
        let who = referent(h);
        let mut report = |r: &mut PartReport, part: &str, e: WalkError| match e.page(dir, page_size)
        {
            Some(at) => {
                hits.entry(at)
                    .or_insert_with(|| (e.to_string(), BTreeSet::new()))
                    .1
                    .insert(who.clone());
            }
            None => r.error(&h.file, format!("{who}: {part}: {e}")),
        };
        let tree = match pf.tree(&h.snapshot) {
            Ok(t) => t,
            Err(e) => {
                report(&mut r, "mapping table unreadable", WalkError::Io(e));
                continue;
            }
        };
        match walk_tree(&tree, tree.root) {
            Ok(n) => {
                if h.label == h.file
                    && matches!(bough_names::classify(&h.file), FileKind::Manifest(_))
                {
                    r.keys += n;
                }
            }
            Err(e) => report(&mut r, "key tree", e),
        }
        if let Err(e) = walk_tree(&tree, tree.ttl_root) {
            report(&mut r, "TTL index", e);
        }
        match pf.pages_of(&h.snapshot) {
            Ok(pages) => {
                for (file, idx) in pages {
                    let slot = referenced.entry(file).or_default();
                    for i in idx {
                        slot.entry(i).or_insert_with(|| h.label.clone());
                    }
                }
            }
            Err(e) => report(&mut r, "mapping table", WalkError::Io(e)),
        }
        progress.tick(r.snapshots as u64, 0);
    }
    // 4. Data files page by page.
    let data: Vec<(String, bough_names::DataFileName)> = pf
        .names
        .iter()
        .filter_map(|(n, k)| match k {
            FileKind::Data(d) => Some((n.clone(), d.clone())),
            _ => None,
        })
        .collect();
    let mut pages_in: BTreeMap<String, u64> = BTreeMap::new();
    let mut bad_referenced: Vec<(String, u32, u64, String)> = Vec::new();
    for (name, d) in &data {
        r.data_files += 1;
        let check = check_data_file(&root.join(dir).join(name), d);
        if let Some(Err(e)) = &check.header {
            r.error(name, format!("header: {e}"));
            continue;
        }
        r.pages += check.pages;
        pages_in.insert(name.clone(), check.pages);
        let refs = referenced.get(name);
        for (idx, offset, why) in &check.bad {
            match refs.and_then(|m| m.get(idx)) {
                Some(_) => bad_referenced.push((name.clone(), *idx, *offset, why.clone())),
                None => r.warn(
                    name,
                    format!("page {idx} (offset {offset}), referenced by nothing: {why}"),
                ),
            }
        }
        if check.partial_tail > 0 {
            r.warn(
                name,
                format!("{} bytes past the last whole page", check.partial_tail),
            );
        }
        progress.tick(r.snapshots as u64, r.pages);
    }
    // One line per bad page: every branch, archive and merge base that references it (the
    // page walk again, for the snapshots only: it runs only when a page is bad), and what
    // to do about it.
    if !bad_referenced.is_empty() {
        let bad: BTreeSet<(String, u32)> = bad_referenced
            .iter()
            .map(|(f, i, _, _)| (f.clone(), *i))
            .collect();
        for h in &held {
            let Ok(pages) = pf.pages_of(&h.snapshot) else {
                continue;
            };
            for (file, idx) in pages {
                for i in idx {
                    if bad.contains(&(file.clone(), i)) {
                        hits.entry((file.clone(), i))
                            .or_insert_with(|| (String::new(), BTreeSet::new()))
                            .1
                            .insert(referent(h));
                    }
                }
            }
        }
    }
    for (name, idx, offset, why) in &bad_referenced {
        let whos = hits
            .remove(&(name.clone(), *idx))
            .map(|(_, w)| w)
            .unwrap_or_default();
        r.error(
            name,
            format!(
                "page {idx} (offset {offset}): {why}; referenced by {}. {}",
                join_referents(&whos),
                remedy(dir, &whos, &held)
            ),
        );
    }
    for ((name, idx), (detail, whos)) in &hits {
        r.error(
            name,
            format!(
                "page {idx}: {detail}; read by {}. {}",
                join_referents(whos),
                remedy(dir, whos, &held)
            ),
        );
    }
    // Referenced pages must exist.
    for (file, pages) in &referenced {
        match pages_in.get(file) {
            Some(&n) => {
                if let Some((idx, by)) = pages.iter().find(|(i, _)| u64::from(**i) > n) {
                    r.error(file, format!("page {idx}, referenced by {by}, lies past the end of the file ({n} pages)"));
                }
            }
            None if present.contains(file.as_str()) => {} // header unreadable: reported above
            None => {
                let by = pages.values().next().cloned().unwrap_or_default();
                r.error(
                    file,
                    format!(
                        "missing, but {} of its pages are referenced (first by {by})",
                        pages.len()
                    ),
                );
            }
        }
    }
    Ok(r)
}

/// Most runs of one partition's check while a writer beside it keeps changing what it
/// finds.
const VERIFY_RUNS: usize = 3;

/// Verifies a partition without the store lock, so a writer in another process may be
/// running (verify reads only; it never makes the writer wait). A writer's progress during
/// a run — a manifest handed to a new term, a file collected after the state naming it was
/// superseded — can look like damage, so a run that finds problems is repeated until two
/// runs agree (or [`VERIFY_RUNS`] ran): damage stays, a writer's progress does not.
fn verify_settled(
    storage: &Arc<dyn Storage>,
    root: &Path,
    dir: &str,
    progress: &mut Progress,
) -> CliResult<PartReport> {
    let mut report = verify_partition(storage, root, dir, progress)?;
    for _ in 1..VERIFY_RUNS {
        if report.count(Severity::Error) == 0 {
            break;
        }
        let again = verify_partition(storage, root, dir, progress)?;
        let same = again.findings() == report.findings();
        report = again;
        if same {
            break;
        }
    }
    Ok(report)
}

/// `bough verify`; the exit code is 5 when problems were found.
pub fn verify(ctx: &Ctx, a: VerifyArgs) -> CliResult<u8> {
    let root = ctx.require_store()?;
    let all = partitions_in(&root)?;
    let parts: Vec<String> = match a.scope.as_deref().map(target::scope).transpose()? {
        None => all.iter().map(ToString::to_string).collect(),
        Some(Scope::Partition(p)) => {
            if !all.contains(&p) {
                return Err(CliError::not_found(format!(
                    "partition {p} does not exist in {}",
                    root.display()
                ))
                .hint("run `bough ls` to see the partitions"));
            }
            vec![p.to_string()]
        }
        Some(Scope::Table(t)) => {
            let v: Vec<String> = all
                .iter()
                .filter(|p| p.table.as_str() == t)
                .map(ToString::to_string)
                .collect();
            if v.is_empty() {
                return Err(CliError::not_found(format!(
                    "table `{t}` has no partitions in {}",
                    root.display()
                )));
            }
            v
        }
    };
    let storage = walk::storage(&root)?;
    let mut reports = Vec::new();
    for dir in &parts {
        let mut progress = Progress::new(format!("verify {dir}"), ctx.progress, None);
        reports.push(verify_settled(&storage, &root, dir, &mut progress)?);
        progress.finish();
    }
    let errors: usize = reports.iter().map(|r| r.count(Severity::Error)).sum();
    let warnings: usize = reports.iter().map(|r| r.count(Severity::Warning)).sum();
    let failed = errors > 0 || (a.strict && warnings > 0);
    if ctx.json {
        let docs: Vec<_> = reports
            .iter()
            .map(|r| {
                json!({
                    "partition": r.dir, "branches": r.branches, "archives": r.archives, "tags": r.tags,
                    "snapshots": r.snapshots, "keys": r.keys, "data_files": r.data_files, "pages": r.pages,
                    "problems": r.problems.iter().map(|p| json!({
                        "severity": if p.severity == Severity::Error { "error" } else { "warning" },
                        "file": p.file, "detail": p.detail,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        output::print_json(
            &json!({"clean": !failed, "errors": errors, "warnings": warnings, "partitions": docs}),
        )?;
    } else {
        for r in &reports {
            let (e, w) = (r.count(Severity::Error), r.count(Severity::Warning));
            let status = match (e, w) {
                (0, 0) => "clean".to_string(),
                _ => format!(
                    "{}, {}",
                    plural(e as u64, "error", "errors"),
                    plural(w as u64, "warning", "warnings")
                ),
            };
            // Tags are named only where there are some (the line is unchanged otherwise).
            let tags = if r.tags > 0 {
                format!(", {}", plural(r.tags as u64, "tag", "tags"))
            } else {
                String::new()
            };
            println!(
                "{}: {}, {}{tags}, {}, {} in branch heads; {}, {}: {status}",
                r.dir,
                plural(r.branches as u64, "branch", "branches"),
                plural(r.archives as u64, "archive", "archives"),
                plural(r.snapshots as u64, "snapshot", "snapshots"),
                plural(r.keys, "key", "keys"),
                plural(r.data_files as u64, "data file", "data files"),
                plural(r.pages, "page", "pages"),
            );
            for p in &r.problems {
                let s = if p.severity == Severity::Error {
                    "error  "
                } else {
                    "warning"
                };
                println!("  {s}  {}: {}", p.file, p.detail);
            }
        }
        let n = plural(parts.len() as u64, "partition", "partitions");
        if parts.is_empty() {
            println!("no partitions in {}", root.display());
        } else if failed {
            println!(
                "verified {n}: {}, {}",
                plural(errors as u64, "error", "errors"),
                plural(warnings as u64, "warning", "warnings")
            );
        } else if warnings > 0 {
            println!(
                "verified {n}: clean ({})",
                plural(warnings as u64, "warning", "warnings")
            );
        } else {
            println!("verified {n}: clean");
        }
    }
    Ok(if failed { code::CORRUPT } else { code::OK })
}
