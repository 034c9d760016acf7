//! One run of the check over one partition directory.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use bough_gc::{KeepReason, Pins};
use bough_io::{IoResult, Storage};
use bough_manifest::CurrentTerm;
use bough_names::{BranchName, DataFileName, FileKind, ManifestName};

use super::data_file::check_data_file;
use super::files::{Held, PartitionFiles, pages_of_tree};
use super::findings::{Finding, Problem, Referent, SnapshotPart};
use super::tree::{Walk, WalkError};
use super::{CheckOptions, CheckProgress, FileClasses, PartitionReport};

struct Run<'a> {
    r: PartitionReport,
    opts: &'a CheckOptions,
    progress: CheckProgress,
}

impl Run<'_> {
    fn add(&mut self, file: impl Into<String>, problem: Problem) {
        self.r.findings.push(Finding {
            file: file.into(),
            problem,
        });
    }
    fn tick(&self) {
        if let Some(p) = &self.opts.progress {
            p(&self.progress);
        }
    }
}

/// Checks partition `dir` once.
pub(super) fn run(
    storage: &Arc<dyn Storage>,
    dir: &str,
    opts: &CheckOptions,
) -> IoResult<PartitionReport> {
    let pf = PartitionFiles::open(storage, dir)?;
    let mut run = Run {
        r: PartitionReport {
            dir: dir.to_string(),
            ..PartitionReport::default()
        },
        opts,
        progress: CheckProgress {
            dir: dir.to_string(),
            ..CheckProgress::default()
        },
    };
    names(&mut run, storage.as_ref(), &pf);
    // Manifests and archives.
    for (name, res) in &pf.manifests {
        match res {
            Err(e) => run.add(
                name,
                Problem::ManifestUnreadable {
                    offset: e.offset,
                    why: e.message.clone(),
                },
            ),
            Ok(r) => {
                if let Some(offset) = r.dropped_tail {
                    run.add(name, Problem::DroppedTail { offset });
                }
                match bough_names::classify(name) {
                    FileKind::Manifest(m)
                        if r.state.meta.branch != m.branch || r.state.meta.term != m.term =>
                    {
                        run.add(
                            name,
                            Problem::ManifestIdentity {
                                branch: r.state.meta.branch.to_string(),
                                term: r.state.meta.term,
                            },
                        );
                    }
                    FileKind::Archive(_) | FileKind::History(_) if r.records != 1 => {
                        run.add(name, Problem::ArchiveRecords { records: r.records })
                    }
                    FileKind::Tag(_) if r.records != 1 || !r.state.overlay.is_empty() => {
                        run.add(name, Problem::TagRecords { records: r.records })
                    }
                    _ => {}
                }
            }
        }
    }
    logs(&mut run, storage.as_ref(), &pf);
    let (held, errors) = pf.held();
    for (file, why) in errors {
        run.add(file, Problem::MergeBasesUnreadable { why });
    }
    run.r.merge_bases = held
        .iter()
        .filter(|h| matches!(h.referent, Referent::MergeBase { .. }))
        .count();
    let data: Vec<(String, DataFileName)> = pf
        .names
        .iter()
        .filter_map(|(n, k)| match k {
            FileKind::Data(d) => Some((n.clone(), d.clone())),
            _ => None,
        })
        .collect();
    run.progress.snapshots_total = held.len();
    run.progress.data_files_total = data.len();
    let (referenced, mut hits) = snapshots(&mut run, &pf, &held);
    data_files(
        &mut run,
        storage.as_ref(),
        &pf,
        &held,
        &data,
        &referenced,
        &mut hits,
    );
    if opts.gc {
        gc(&mut run, &pf);
    }
    Ok(run.r)
}

/// Every write-ahead log a manifest names replays, and its versions continue the manifest's
/// (the replay an open does, without opening): a branch whose acknowledged commits are in a
/// log it cannot read is an error, named by the log file.
fn logs(run: &mut Run<'_>, storage: &dyn Storage, pf: &PartitionFiles) {
    let next_points = next_history_points(pf);
    for (name, res) in &pf.manifests {
        let Ok(r) = res else { continue };
        let refs = match bough_manifest::log_refs(&r.state.extensions) {
            Ok(Some(refs)) if !refs.is_empty() => refs,
            Ok(_) => continue,
            Err(e) => {
                run.add(
                    name,
                    Problem::LogUnreadable {
                        manifest: name.clone(),
                        why: format!("its LOG extension does not decode: {e:?}"),
                    },
                );
                continue;
            }
        };
        // A history point's log is read up to where the branch's next point left it, as
        // point-in-time reads do: past it, the log skips the version the next point's
        // record took. A version skipped before it is a point whose write failed (reads
        // refuse the instants it leaves open), not damage.
        let read = match next_points.get(name.as_str()) {
            Some(end) => bough_tree::wal::read_span(
                storage,
                &pf.dir,
                &refs,
                u64::MAX,
                end.as_ref().map(|r| (&r.file, r.start)),
            )
            .map(|_| ()),
            None => bough_tree::wal::recover(storage, &pf.dir, &refs).map(|_| ()),
        };
        if let Err(e) = read {
            let file = refs.last().map_or(name.clone(), |r| r.file.to_string());
            run.add(
                file,
                Problem::LogUnreadable {
                    manifest: name.clone(),
                    why: e.to_string(),
                },
            );
        }
    }
}

/// For each history point, the last log reference of its branch's next point (`None`
/// for the newest, or a next point that does not read): where that point's own appends
/// start (a point that left a full log file names it before the new one).
fn next_history_points(pf: &PartitionFiles) -> HashMap<&str, Option<bough_manifest::LogRef>> {
    // (term, stamp): the order the points were written in.
    let mut by_branch: HashMap<&BranchName, Vec<(u64, u64, &str)>> = HashMap::new();
    for (name, kind) in &pf.names {
        if let FileKind::History(h) = kind {
            by_branch
                .entry(&h.branch)
                .or_default()
                .push((h.term, h.stamp, name.as_str()));
        }
    }
    let replayed: HashMap<&str, _> = pf
        .manifests
        .iter()
        .filter_map(|(n, r)| Some((n.as_str(), r.as_ref().ok()?)))
        .collect();
    let last_ref = |name: &str| {
        replayed
            .get(name)
            .and_then(|r| bough_manifest::log_refs(&r.state.extensions).ok().flatten())
            .and_then(|refs| refs.into_iter().last())
    };
    let mut out = HashMap::new();
    for (_, mut points) in by_branch {
        points.sort_unstable();
        for (i, (_, _, name)) in points.iter().enumerate() {
            let next = points.get(i + 1).and_then(|(_, _, n)| last_ref(n));
            out.insert(*name, next);
        }
    }
    out
}

/// The directory listing: `CURRENT_TERM` records, live branches' manifests, stray files.
fn names(run: &mut Run<'_>, storage: &dyn Storage, pf: &PartitionFiles) {
    let dir = pf.dir.as_str();
    let mut live: Vec<(BranchName, u64)> = Vec::new();
    let present: BTreeSet<&str> = pf.names.iter().map(|(n, _)| n.as_str()).collect();
    for (name, kind) in &pf.names {
        let problem = match kind {
            FileKind::CurrentTerm(ct) => {
                let read = storage
                    .read_file(&format!("{dir}/{name}"), 4096)
                    .map_err(|e| e.to_string())
                    .and_then(|b| {
                        CurrentTerm::decode(&b).map_err(|e| {
                            format!("does not decode at offset {}: {}", e.offset, e.reason)
                        })
                    });
                match read {
                    Ok(c) if !c.deleted => {
                        live.push((ct.branch.clone(), c.term));
                        continue;
                    }
                    Ok(_) => continue,
                    Err(why) => Problem::CurrentTermUnreadable { why },
                }
            }
            FileKind::Archive(_) => {
                run.r.archives += 1;
                continue;
            }
            FileKind::Tag(_) => {
                run.r.tags += 1;
                continue;
            }
            FileKind::History(_) => {
                run.r.history_points += 1;
                continue;
            }
            FileKind::Tmp(_) => Problem::TempFile,
            FileKind::Unknown(_) => Problem::UnknownFile,
            // Checked through the manifests that name them (`logs`); GC removes the others.
            FileKind::Log(_) => continue,
            FileKind::Lock => Problem::LockFile,
            FileKind::TableOp(_) => Problem::TableOpInPartition,
            FileKind::GcLease | FileKind::Version(_) => Problem::ObjectStoreObject,
            FileKind::TornTail(t) => Problem::TornTailKept {
                manifest: t.manifest.to_string(),
                offset: t.offset,
            },
            FileKind::Manifest(_) | FileKind::Data(_) => continue,
        };
        run.add(name, problem);
    }
    run.r.branches = live.len();
    for (b, term) in live {
        let m = ManifestName::new(b.clone(), term).to_string();
        if !present.contains(m.as_str()) {
            run.add(
                format!("CURRENT_TERM.{b}"),
                Problem::MissingManifest {
                    branch: b.to_string(),
                    term,
                    manifest: m.clone(),
                },
            );
        }
        let staged = pf.state(&m).and_then(|st| {
            bough_manifest::staging_purpose(&st.extensions)
                .ok()
                .flatten()
        });
        if let Some(purpose) = staged {
            run.add(
                &m,
                Problem::StagingBranch {
                    branch: b.to_string(),
                    purpose,
                    dir: dir.to_string(),
                },
            );
        }
    }
}

/// Pages referenced per data file (page → the label of the first snapshot reaching it).
type Referenced = BTreeMap<String, BTreeMap<u32, String>>;
/// Bad pages a snapshot walk failed at: (file, page) → (why, who reads it).
type Hits = BTreeMap<(String, u32), (String, BTreeSet<Referent>)>;

/// Walks every snapshot: keys, values, TTL index, referenced pages.
fn snapshots(run: &mut Run<'_>, pf: &PartitionFiles, held: &[Held]) -> (Referenced, Hits) {
    let dir = pf.dir.as_str();
    let page_size = u64::from(pf.files.page_size());
    let mut referenced = Referenced::new();
    // A bad page breaks the read of every snapshot that reaches it: one finding per page,
    // naming them all, instead of one per snapshot.
    let mut hits = Hits::new();
    for h in held {
        run.r.snapshots += 1;
        let mut report =
            |run: &mut Run<'_>, part: SnapshotPart, e: WalkError| match e.page(dir, page_size) {
                Some(at) => {
                    hits.entry(at)
                        .or_insert_with(|| (e.to_string(), BTreeSet::new()))
                        .1
                        .insert(h.referent.clone());
                }
                None => run.add(
                    h.file(),
                    Problem::SnapshotUnreadable {
                        referent: h.referent.clone(),
                        part,
                        why: e.to_string(),
                    },
                ),
            };
        let tree = match pf.tree(&h.snapshot) {
            Ok(t) => t,
            Err(e) => {
                report(run, SnapshotPart::Mapping, WalkError::Io(e));
                continue;
            }
        };
        let mut walk = Walk::new(&tree);
        let keys = walk.tree(tree.root);
        let ttl = walk.tree(tree.ttl_root);
        let whole = keys.is_ok() && ttl.is_ok();
        match keys {
            Ok(n) if h.referent.is_head() => run.r.keys += n,
            Ok(_) => {}
            Err(e) => report(run, SnapshotPart::KeyTree, e),
        }
        if let Err(e) = ttl {
            report(run, SnapshotPart::TtlIndex, e);
        }
        run.r.entries += walk.entries;
        // Pages mapped but unreachable can only be told once both trees were walked whole.
        if whole {
            match walk.unreachable() {
                Ok((0, _)) => {}
                Ok((count, first)) => run.add(
                    h.file(),
                    Problem::UnreachablePages {
                        referent: h.referent.clone(),
                        count,
                        first,
                    },
                ),
                Err(e) => report(run, SnapshotPart::MappingPages, e),
            }
        }
        match pages_of_tree(&tree, &h.snapshot) {
            Ok(pages) => {
                for (file, idx) in pages {
                    let slot = referenced.entry(file).or_default();
                    for i in idx {
                        slot.entry(i).or_insert_with(|| h.label.clone());
                    }
                }
            }
            Err(e) => report(run, SnapshotPart::MappingPages, WalkError::Io(e)),
        }
        run.progress.snapshots_done += 1;
        run.tick();
    }
    (referenced, hits)
}

/// Reads every data file page by page, and checks what the snapshots reference against it.
fn data_files(
    run: &mut Run<'_>,
    storage: &dyn Storage,
    pf: &PartitionFiles,
    held: &[Held],
    data: &[(String, DataFileName)],
    referenced: &Referenced,
    hits: &mut Hits,
) {
    let present: BTreeSet<&str> = pf.names.iter().map(|(n, _)| n.as_str()).collect();
    let mut pages_in: BTreeMap<&str, u64> = BTreeMap::new();
    let mut bad_referenced: Vec<(&str, u32, u64, String)> = Vec::new();
    for (name, d) in data {
        run.r.data_files += 1;
        let check = check_data_file(storage, &pf.dir, d);
        let refs = referenced.get(name);
        if let Some(Err(why)) = check.header {
            let referenced = refs.is_some_and(|m| !m.is_empty());
            run.add(name, Problem::DataFileHeader { why, referenced });
        } else {
            run.r.pages += check.pages;
            pages_in.insert(name, check.pages);
            for (page, offset, why) in check.bad {
                if refs.is_some_and(|m| m.contains_key(&page)) {
                    bad_referenced.push((name, page, offset, why));
                } else {
                    run.add(name, Problem::UnreferencedBadPage { page, offset, why });
                }
            }
            if check.partial_tail > 0 {
                run.add(
                    name,
                    Problem::PartialTail {
                        bytes: check.partial_tail,
                    },
                );
            }
        }
        run.progress.data_files_done += 1;
        run.progress.pages += check.pages;
        run.tick();
    }
    // Every branch, archive and merge base that references a bad page (the page walk
    // again, for the snapshots only: it runs only when a page is bad).
    if !bad_referenced.is_empty() {
        let bad: BTreeSet<(&str, u32)> =
            bad_referenced.iter().map(|(f, i, _, _)| (*f, *i)).collect();
        for h in held {
            let Ok(pages) = pf.pages_of(&h.snapshot) else {
                continue;
            };
            for (file, idx) in pages {
                for i in idx {
                    if bad.contains(&(file.as_str(), i)) {
                        hits.entry((file.clone(), i))
                            .or_insert_with(|| (String::new(), BTreeSet::new()))
                            .1
                            .insert(h.referent.clone());
                    }
                }
            }
        }
    }
    for (name, page, offset, why) in bad_referenced {
        let referents = hits
            .remove(&(name.to_string(), page))
            .map(|(_, w)| w.into_iter().collect())
            .unwrap_or_default();
        run.add(
            name,
            Problem::BadPage {
                page,
                offset,
                why,
                referents,
            },
        );
    }
    // A file that is not there: one finding for it, however many pages and walks it broke.
    let mut missing: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for ((name, page), (why, whos)) in std::mem::take(hits) {
        if !present.contains(name.as_str()) {
            let first = whos.iter().next().map(|r| r.file().to_string());
            let m = missing
                .entry(name)
                .or_insert_with(|| (0, first.unwrap_or_default()));
            m.0 += 1;
            continue;
        }
        run.add(
            name,
            Problem::BadPageRead {
                page,
                why,
                referents: whos.into_iter().collect(),
            },
        );
    }
    // Referenced pages must exist.
    for (file, pages) in referenced {
        match pages_in.get(file.as_str()) {
            Some(&n) => {
                if let Some((idx, by)) = pages.iter().find(|(i, _)| u64::from(**i) > n) {
                    run.add(
                        file,
                        Problem::PagePastEnd {
                            page: *idx,
                            by: by.clone(),
                            pages: n,
                        },
                    );
                }
            }
            None if present.contains(file.as_str()) => {} // header unreadable: reported above
            None => {
                let first_by = pages.values().next().cloned().unwrap_or_default();
                let m = missing.entry(file.clone()).or_insert((0, first_by));
                m.0 = m.0.max(pages.len());
            }
        }
    }
    for (file, (pages, first_by)) in missing {
        run.add(file, Problem::MissingDataFile { pages, first_by });
    }
}

/// GC's dry run: every data file sorted into referenced, in flight or collectable.
fn gc(run: &mut Run<'_>, pf: &PartitionFiles) {
    match bough_gc::collect(&pf.files, &Pins::default(), true) {
        Ok(gc) => {
            let mut classes = FileClasses {
                collectable: gc.deleted.len(),
                ..FileClasses::default()
            };
            for (_, why) in &gc.kept {
                match why {
                    KeepReason::InFlight => classes.in_flight += 1,
                    _ => classes.referenced += 1,
                }
            }
            run.r.files = Some(classes);
            for u in gc.unknown {
                run.add(u, Problem::GcUnknown);
            }
        }
        Err(e) => run.add(pf.dir.clone(), Problem::GcFailed { why: e.to_string() }),
    }
}
