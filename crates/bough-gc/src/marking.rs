//! Marking: which files the partition's manifests, archives, tags, merge bases and pins still
//! reach, refusing to go on when a branch's state cannot be established.

use super::*;
use crate::error::{GcError, GcResult};
use crate::state_cache::DecodedState;
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
            manifests_reused: report.manifests_reused,
            mapping_pages_visited: report.mapping_pages_visited,
            holders,
        }
    }
}

/// Lists the directory and marks everything reachable from every manifest, archive, merge
/// base and (pins taken last) reader snapshot. `track`: also record pages and holders.
/// `cache`: reuse the states of state files unchanged since it stored them, and store the
/// ones read (see [`StateCache`]).
pub(crate) fn mark<'a>(
    files: &'a FileTable,
    pins: impl FnOnce() -> Pins,
    track: bool,
    cache: Option<&StateCache>,
    report: &mut GcReport,
) -> GcResult<Marked<'a>> {
    let storage = files.storage().clone();
    let dir = files.dir().to_string();
    // List first: a file created after this point is not a candidate.
    let names = storage.list(&dir)?;
    let mut data: Vec<DataFileName> = Vec::new();
    let mut logs: Vec<LogFileName> = Vec::new();
    let mut manifests: Vec<String> = Vec::new();
    let mut term_names: Vec<(BranchName, &String)> = Vec::new();
    for n in &names {
        match classify(n) {
            FileKind::Data(d) => data.push(d),
            // A tag is a root like a manifest: it outlives the branch it was taken from.
            // A history point is a root like an archive while the window keeps it.
            FileKind::Manifest(_)
            | FileKind::Archive(_)
            | FileKind::History(_)
            | FileKind::Tag(_) => manifests.push(n.clone()),
            // Read below, all at once.
            FileKind::CurrentTerm(ct) => term_names.push((ct.branch, n)),
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
    if let Some(c) = cache {
        c.begin(
            &dir,
            &term_names.iter().map(|(_, n)| *n).collect::<Vec<_>>(),
        );
    }
    // Read on a few threads; the first failure in listing order is the error, as reading
    // them one by one would give. A record is replaced by rename (another inode), so with a
    // cache one whose stamp is unchanged is the record read before.
    let read = read_terms(&storage, cache, &dir, &term_names)?;
    let terms: HashMap<BranchName, CurrentTerm> = term_names
        .into_iter()
        .map(|(branch, _)| branch)
        .zip(read)
        .collect();
    require_live_manifests(&storage, &dir, &terms, &mut manifests)?;
    if let Some(c) = cache {
        c.keep_only(&manifests);
    }
    // Each state file's stamp, on a few threads (only with a cache: without one every file
    // is read anyway). An error counts where its file comes in the walk below.
    let stamps = match cache {
        Some(_) => bough_io::fan_out::map_parallel(&manifests, |m| {
            Some(storage.cheap_stamp(&format!("{dir}/{m}")))
        }),
        None => manifests.iter().map(|_| None).collect(),
    };
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
    for (m, stamp) in manifests.iter().zip(stamps) {
        let path = format!("{dir}/{m}");
        let stamp = match stamp.transpose() {
            Ok(s) => s.flatten(),
            // Deleted since the listing (a branch deletion): it protects nothing any more.
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(e.into()),
        };
        let cached = match (cache, stamp) {
            (Some(c), Some(s)) => c.get(m, s),
            _ => None,
        };
        let decoded = match cached {
            Some(decoded) => {
                report.manifests_reused += 1;
                decoded
            }
            None => match forget_then_read(cache, m, &storage, &path)? {
                Some(read) => {
                    report.manifests_read += 1;
                    if let Some(c) = cache {
                        remember(c, m, stamp, read)
                    } else {
                        Arc::new(read.decoded)
                    }
                }
                None => continue,
            },
        };
        let state = &decoded.state;
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
        for b in &decoded.bases {
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

/// A state file's bytes' length and the state they replay to; `None` if the file was
/// deleted since the listing (a branch deletion: it protects nothing any more).
fn read_state(storage: &Arc<dyn bough_io::Storage>, path: &str) -> GcResult<Option<ReadState>> {
    let bytes = match storage.read_file(path, MAX_MANIFEST_BYTES) {
        Ok(b) => b,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let state = replay(&bytes)
        .map_err(|e| GcError::Record {
            file: path.to_string(),
            source: e,
        })?
        .state;
    let bases = merge_bases(&state.extensions).map_err(|r| GcError::State {
        file: path.to_string(),
        what: format!("merge bases: {r:?}"),
    })?;
    Ok(Some(ReadState {
        len: bytes.len() as u64,
        decoded: DecodedState { state, bases },
    }))
}

/// The `CURRENT_TERM` records of the files `names` lists, in its order; the first failure
/// in that order is the error. With a cache, each file whose stamp is the one its record
/// was read under gives that record; the others are read (on a few threads) and kept under
/// the stamp taken before the read when the bytes read are as long as it says (as
/// [`remember`] does for states).
fn read_terms(
    storage: &Arc<dyn bough_io::Storage>,
    cache: Option<&StateCache>,
    dir: &str,
    names: &[(BranchName, &String)],
) -> GcResult<Vec<CurrentTerm>> {
    enum Slot {
        Hit(CurrentTerm),
        Miss(Option<bough_io::FileStamp>),
    }
    let path = |n: &str| format!("{dir}/{n}");
    let stamps = match cache {
        Some(_) => bough_io::fan_out::map_parallel(names, |(_, n)| storage.cheap_stamp(&path(n))),
        None => names.iter().map(|_| Ok(None)).collect(),
    };
    // Up to the first file whose stamp cannot be taken: its error comes after the records
    // before it.
    let mut slots = Vec::with_capacity(names.len());
    let mut stamp_error = None;
    for ((_, n), stamp) in names.iter().zip(stamps) {
        match stamp {
            Err(e) => {
                stamp_error = Some(e);
                break;
            }
            Ok(Some(s)) if let Some(rec) = cache.and_then(|c| c.term(n, s)) => {
                slots.push(Slot::Hit(rec));
            }
            Ok(s) => slots.push(Slot::Miss(s)),
        }
    }
    let missed: Vec<(&String, Option<bough_io::FileStamp>)> = names
        .iter()
        .zip(&slots)
        .filter_map(|((_, n), slot)| match slot {
            Slot::Miss(s) => Some((*n, *s)),
            Slot::Hit(_) => None,
        })
        .collect();
    let mut read =
        bough_io::fan_out::map_parallel(&missed, |&(n, stamp)| -> GcResult<CurrentTerm> {
            let p = path(n);
            let bytes = storage.read_file(&p, 4096)?;
            let rec =
                CurrentTerm::decode(&bytes).map_err(|e| GcError::Record { file: p, source: e })?;
            if let Some(c) = cache {
                c.put_term(n, stamp.filter(|s| s.len() == bytes.len() as u64), &rec);
            }
            Ok(rec)
        })
        .into_iter();
    let mut out = Vec::with_capacity(slots.len());
    for slot in slots {
        match slot {
            Slot::Hit(rec) => out.push(rec),
            Slot::Miss(_) => match read.next() {
                Some(rec) => out.push(rec?),
                None => break,
            },
        }
    }
    match stamp_error {
        Some(e) => Err(e.into()),
        None => Ok(out),
    }
}

/// [`read_state`], after dropping what `cache` holds for `name` (another version's state,
/// or none): whatever the read gives — a state, an error, a file gone — the old entry is
/// never used again.
fn forget_then_read(
    cache: Option<&StateCache>,
    name: &str,
    storage: &Arc<dyn bough_io::Storage>,
    path: &str,
) -> GcResult<Option<ReadState>> {
    if let Some(c) = cache {
        c.forget(name);
    }
    read_state(storage, path)
}

struct ReadState {
    len: u64,
    decoded: DecodedState,
}

/// Stores a state just read under the stamp taken before the read, when the bytes read are
/// as long as the stamp says (otherwise the file changed in between: the state read is used
/// this once, and nothing is kept for the name). A file changed in between to other bytes
/// of the same length leaves its newer state under the older stamp, which the file never
/// shows again: the next walk reads it anew.
fn remember(
    cache: &StateCache,
    name: &str,
    stamp: Option<bough_io::FileStamp>,
    read: ReadState,
) -> Arc<DecodedState> {
    let state = Arc::new(read.decoded);
    if let Some(s) = stamp
        && s.len() == read.len
    {
        cache.put(name, s, state.clone());
    }
    state
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
