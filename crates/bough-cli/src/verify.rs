//! `bough verify`: reads everything a partition holds and reports every problem.
//!
//! Per partition, with the store lock held so no writer changes it meanwhile:
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
}

/// Reads every key (and value) of one tree in order; returns the number of entries
/// (tombstones, remembered deletes, are not entries to a user, so they do not count).
fn walk_tree(t: &TreeSnapshot, root: u32) -> Result<u64, String> {
    if root == NO_PAGE {
        return Ok(0);
    }
    let mut c = Cursor::seek(t, root, None).map_err(|e| e.to_string())?;
    let mut n = 0u64;
    let mut prev: Option<Vec<u8>> = None;
    while let Some(e) = c.next_entry(t).map_err(|e| e.to_string())? {
        if prev.as_ref().is_some_and(|p| *p >= e.key) {
            return Err(format!("keys out of order at {}", output::escape(&e.key)));
        }
        if let ValueLoc::Overflow { first, pages, len } = e.value {
            t.read_overflow(first, pages, len)
                .map_err(|err| format!("value of key {}: {err}", output::escape(&e.key)))?;
        }
        if !matches!(e.value, ValueLoc::Tombstone) {
            n += 1;
        }
        prev = Some(e.key);
    }
    Ok(n)
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
            FileKind::Tmp(_) => r.warn(
                name,
                "leftover temporary file of an interrupted write (the next open removes it)",
            ),
            FileKind::Unknown(_) => r.warn(name, "not a Bough file name; ignored by the store"),
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
    let mut referenced: BTreeMap<String, BTreeMap<u32, String>> = BTreeMap::new();
    for h in &held {
        r.snapshots += 1;
        // "manifest_x: " is already the problem's file; merge bases say which one they are.
        let what = if h.label == h.file {
            String::new()
        } else {
            format!("{}: ", h.label)
        };
        let tree = match pf.tree(&h.snapshot) {
            Ok(t) => t,
            Err(e) => {
                r.error(&h.file, format!("{what}mapping table unreadable: {e}"));
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
            Err(e) => r.error(&h.file, format!("{what}key tree: {e}")),
        }
        if let Err(e) = walk_tree(&tree, tree.ttl_root) {
            r.error(&h.file, format!("{what}TTL index: {e}"));
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
            Err(e) => r.error(&h.file, format!("{what}mapping table: {e}")),
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
                Some(by) => r.error(
                    name,
                    format!("page {idx} (offset {offset}), referenced by {by}: {why}"),
                ),
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

/// `bough verify`; the exit code is 5 when problems were found.
pub fn verify(ctx: &Ctx, a: VerifyArgs) -> CliResult<u8> {
    let root = ctx.require_store()?;
    let _lock = bough_io::lock_dir(&root).map_err(|e| {
        CliError::from(e).hint("another process has the store open; verify when it is done")
    })?;
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
        reports.push(verify_partition(&storage, &root, dir, &mut progress)?);
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
                    "partition": r.dir, "branches": r.branches, "archives": r.archives,
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
            println!(
                "{}: {}, {}, {}, {} in branch heads; {}, {}: {status}",
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
