//! Marking: which files the partition's manifests, archives, tags, merge bases and pins still
//! reach, refusing to go on when a branch's state cannot be established.

use super::*;
use crate::error::{GcError, GcResult};
use crate::walk::READER;

/// What the mark phase found.
pub(crate) struct Marked<'a> {
    pub(crate) walk: Walk<'a>,
    pub(crate) data: Vec<DataFileName>,
    pub(crate) terms: HashMap<BranchName, CurrentTerm>,
    /// Durable high-water mark per live (branch, term): the manifest's own range maximum.
    pub(crate) high_water: BTreeMap<(BranchName, Term), u64>,
    pub(crate) pins: Pins,
    /// Write-ahead log files listed.
    pub(crate) logs: Vec<LogFileName>,
    /// Log files a `LOG` reference names, with the first state found naming each.
    pub(crate) logs_named: HashMap<String, KeepReason>,
    /// Highest log id a live (branch, term)'s own manifest names.
    pub(crate) log_high_water: BTreeMap<(BranchName, Term), u64>,
}

impl Marked<'_> {
    pub(crate) fn usage(&mut self, files: &FileTable, report: &GcReport) -> Usage {
        let (files_used, logs, holders) = self
            .walk
            .track
            .take()
            .map(|t| t.finish(files.page_size()))
            .unwrap_or_default();
        Usage {
            page_size: files.page_size(),
            files: files_used,
            logs,
            manifests_read: report.manifests_read,
            mapping_pages_visited: report.mapping_pages_visited,
            holders,
        }
    }
}

/// Lists the directory and marks everything reachable from every manifest, archive, merge
/// base and (pins taken last) reader snapshot. `track`: also record pages and holders.
pub(crate) fn mark<'a>(
    files: &'a FileTable,
    pins: impl FnOnce() -> Pins,
    track: bool,
    report: &mut GcReport,
) -> GcResult<Marked<'a>> {
    let storage = files.storage().clone();
    let dir = files.dir().to_string();
    // List first: a file created after this point is not a candidate.
    let names = storage.list(&dir)?;
    let mut data: Vec<DataFileName> = Vec::new();
    let mut logs: Vec<LogFileName> = Vec::new();
    let mut manifests: Vec<String> = Vec::new();
    let mut terms: HashMap<BranchName, CurrentTerm> = HashMap::new();
    for n in &names {
        match classify(n) {
            FileKind::Data(d) => data.push(d),
            // A tag is a root like a manifest: it outlives the branch it was taken from.
            // A history point is a root like an archive while the window keeps it.
            FileKind::Manifest(_)
            | FileKind::Archive(_)
            | FileKind::History(_)
            | FileKind::Tag(_) => manifests.push(n.clone()),
            FileKind::CurrentTerm(ct) => {
                let path = format!("{dir}/{n}");
                let bytes = storage.read_file(&path, 4096)?;
                let rec = CurrentTerm::decode(&bytes).map_err(|e| GcError::Record {
                    file: path,
                    source: e,
                })?;
                terms.insert(ct.branch, rec);
            }
            FileKind::Unknown(u) => report.unknown.push(u),
            // Write-ahead log files are referents like data files: kept while a `LOG`
            // reference of a state GC reads names them, or while their writer may be about
            // to name them (ARCHITECTURE.md, "Write path", GC).
            FileKind::Log(l) => logs.push(l),
            // The cloud tier's own objects (its GC lease, numbered versions) never reach a
            // listing of the storage layer; were they found, they would be no data file.
            FileKind::Tmp(_) | FileKind::Lock | FileKind::GcLease | FileKind::Version(_) => {}
            // Evidence kept for the operator (`bough verify` reports it): no data file, and
            // not GC's to delete.
            FileKind::TornTail(_) => {}
            // The store's branch registry lives in the store root, never in a partition;
            // the registry (not GC) removes its records, and only once resolved.
            FileKind::TableOp(_) => {}
        }
    }
    require_live_manifests(&storage, &dir, &terms, &mut manifests)?;
    let fanout =
        bough_tree::page::mapping::fanout(bough_io::layout::max_payload(files.page_size()));
    let mut walk = Walk {
        files,
        fanout,
        visited: HashMap::new(),
        referenced: HashMap::new(),
        track: track.then(Track::default),
    };
    let mut high_water: BTreeMap<(BranchName, Term), u64> = BTreeMap::new();
    let mut named = NamedLogs::default();
    for m in &manifests {
        let path = format!("{dir}/{m}");
        let bytes = match storage.read_file(&path, MAX_MANIFEST_BYTES) {
            Ok(b) => b,
            // Deleted since the listing (a branch deletion): it protects nothing any more.
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(e.into()),
        };
        let state = replay(&bytes)
            .map_err(|e| GcError::Record {
                file: path.clone(),
                source: e,
            })?
            .state;
        report.manifests_read += 1;
        let why = KeepReason::Referenced { by: m.clone() };
        let kind = classify(m);
        let own = match &kind {
            FileKind::Manifest(mn) => Some((&mn.branch, mn.term)),
            _ => None,
        };
        // A tag has no owner: deleting the branch it was taken from leaves it (and so every
        // file it holds stays shared, never exclusive to that branch).
        let owner = match &kind {
            FileKind::Manifest(mn) => Some(mn.branch.clone()),
            FileKind::Archive(a) => Some(a.branch.clone()),
            FileKind::History(h) => Some(h.branch.clone()),
            _ => None,
        };
        walk.begin(Some(Holder {
            referent: match &kind {
                FileKind::Manifest(mn) => Referent::Head {
                    branch: mn.branch.clone(),
                    term: mn.term,
                },
                _ => Referent::Pinned(m.clone()),
            },
            owners: owner.iter().cloned().collect(),
        }));
        let logs = named.add(&state.extensions, own, &path, &why)?;
        walk.hold_logs(&logs);
        let ranges = &state.meta.branch_file_ranges;
        let shadow = Shadow::from_overlay(state.overlay.keys().copied(), fanout);
        walk.radix(ranges, state.mapping_root, &shadow, m, &why)?;
        for &raw in state.overlay.values() {
            walk.slot(ranges, raw, None, m, &why)?;
        }
        // Merge bases are states a later three-way merge reads: their pages stay.
        let bases = merge_bases(&state.extensions).map_err(|r| GcError::State {
            file: path.clone(),
            what: format!("merge bases: {r:?}"),
        })?;
        for b in bases {
            walk.begin(Some(Holder {
                referent: Referent::Pinned(format!("{m} (merge base with {})", b.branch)),
                owners: owner.iter().chain([&b.branch]).cloned().collect(),
            }));
            let logs = named.add(&b.state.extensions, None, &path, &why)?;
            walk.hold_logs(&logs);
            let br = &b.state.meta.branch_file_ranges;
            let shadow = Shadow::from_overlay(b.state.overlay.iter().map(|(id, _)| *id), fanout);
            walk.radix(br, b.state.mapping_root, &shadow, m, &why)?;
            for &(_, raw) in &b.state.overlay {
                walk.slot(br, raw, None, m, &why)?;
            }
        }
        if let FileKind::Manifest(mn) = kind {
            let own = ranges
                .iter()
                .filter(|r| r.branch == mn.branch && r.term == mn.term)
                .map(|r| r.max_file_id)
                .max()
                .unwrap_or(0);
            let e = high_water.entry((mn.branch, mn.term)).or_insert(0);
            *e = (*e).max(own);
        }
    }
    let pins = pins();
    walk.begin(None);
    for snap in &pins.snapshots {
        let why = KeepReason::PinnedByReader;
        let shadow = Shadow::whole_chunks(snap.mapping.dirty_chunk_numbers().into_iter());
        walk.radix(&snap.ranges, snap.mapping.root(), &shadow, READER, &why)?;
        let mut dirty = Vec::new();
        snap.mapping
            .for_each_dirty_slot(&mut |_, raw| dirty.push(raw));
        for raw in dirty {
            walk.slot(&snap.ranges, raw, None, READER, &why)?;
        }
    }
    report.mapping_pages_visited = walk.visited.len();
    Ok(Marked {
        walk,
        data,
        terms,
        high_water,
        pins,
        logs,
        logs_named: named.by_name,
        log_high_water: named.high_water,
    })
}

/// The log files the states read so far name.
#[derive(Default)]
struct NamedLogs {
    by_name: HashMap<String, KeepReason>,
    high_water: BTreeMap<(BranchName, Term), u64>,
}

impl NamedLogs {
    /// Records the `LOG` references of one state, returning the log files they name.
    /// `own`: the (branch, term) of the head whose manifest holds it, if it is one; its
    /// references to its own logs raise that head's log high-water mark.
    fn add(
        &mut self,
        exts: &bough_manifest::ext::Extensions,
        own: Option<(&BranchName, Term)>,
        file: &str,
        why: &KeepReason,
    ) -> GcResult<Vec<String>> {
        let mut names = Vec::new();
        let refs = log_refs(exts).map_err(|r| GcError::State {
            file: file.to_string(),
            what: format!("LOG extension: {r:?}"),
        })?;
        for r in refs.unwrap_or_default() {
            if let Some((branch, term)) = own
                && *branch == r.file.branch
                && term == r.file.term
            {
                let e = self.high_water.entry((branch.clone(), term)).or_insert(0);
                *e = (*e).max(r.file.log_id);
            }
            let name = r.file.to_string();
            self.by_name
                .entry(name.clone())
                .or_insert_with(|| why.clone());
            names.push(name);
        }
        Ok(names)
    }
}

/// GC never frees data of a branch whose state it could not establish: every live
/// `CURRENT_TERM` must name a manifest GC walks. One created after the listing (a new term
/// another process claimed meanwhile) is walked too; one that does not exist at all (the
/// record was restored from elsewhere, or the manifest lost) means the branch's state is
/// unknown, and GC deletes nothing (`Corruption` naming the record).
pub(crate) fn require_live_manifests(
    storage: &Arc<dyn bough_io::Storage>,
    dir: &str,
    terms: &HashMap<BranchName, CurrentTerm>,
    manifests: &mut Vec<String>,
) -> GcResult<()> {
    let listed: HashSet<String> = manifests.iter().cloned().collect();
    let mut live: Vec<(&BranchName, &CurrentTerm)> =
        terms.iter().filter(|(_, ct)| !ct.deleted).collect();
    live.sort_by(|a, b| a.0.cmp(b.0));
    for (branch, ct) in live {
        let name = bough_names::ManifestName::new(branch.clone(), ct.term).to_string();
        if listed.contains(&name) {
            continue;
        }
        match storage.read_file(&format!("{dir}/{name}"), MAX_MANIFEST_BYTES) {
            Ok(_) => manifests.push(name),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(GcError::State {
                    file: format!(
                        "{dir}/{}",
                        bough_names::CurrentTermName::new(branch.clone())
                    ),
                    what: format!(
                        "CURRENT_TERM names term {} but {name} does not exist: the branch's \
                         state is unknown, so GC deletes nothing (reopen the store to repair it)",
                        ct.term
                    ),
                });
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
