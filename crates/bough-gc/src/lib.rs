//! Bough: reachability-complete garbage collection of data files.
//!
//! A data file is deleted only when it is proven unreachable from everything that can still
//! read it:
//! - every manifest and every archive of every branch and term in the partition directory,
//!   each resolved through its **own** `BranchFileMapping` (an inherited file keeps the name
//!   of the lineage that wrote it — the seed's pseudo-code, which builds names from the
//!   manifest's own branch and term, would miss those);
//! - every merge base recorded in those manifests (a later three-way merge reads it);
//! - every snapshot a reader still holds (passed in by the caller);
//! - every file a writer is still filling (`writing`), and every file above the durable
//!   high-water mark of a live (branch, term) — a commit may be about to reference it.
//!
//! Mapping pages shared by many branches are visited once (they are identified by physical
//! location), so the cost grows with the distinct mapping pages, not with branches × pages.
//! A crash mid-GC loses nothing: a deletion only ever removes an unreachable file, and the
//! next run finishes what the last one started.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use bough_io::{ErrorKind, IoError, IoResult};
use bough_manifest::{BranchFileMapping, CurrentTerm, PageAddr, merge_bases, replay};
use bough_names::{BranchName, DataFileName, FileKind, Term, classify};
use bough_tree::cache::CachedPage;
use bough_tree::files::FileTable;
use bough_tree::head::{MAX_MANIFEST_BYTES, TreeSnapshot};
use bough_tree::mapping::Slot;

/// Why a file was kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeepReason {
    /// A manifest or archive references it (the first one found is named).
    Referenced { by: String },
    /// A snapshot held by a reader references it.
    PinnedByReader,
    /// A writer is appending to it.
    Writing,
    /// Its id is above the durable high-water mark of its live (branch, term): a commit in
    /// flight may reference it.
    InFlight,
}

/// What a GC run did.
#[derive(Debug, Default, Clone)]
pub struct GcReport {
    /// Deleted data files and their sizes.
    pub deleted: Vec<(String, u64)>,
    /// Data files kept, with the reason.
    pub kept: Vec<(String, KeepReason)>,
    /// Names GC did not recognise (left alone, with a warning).
    pub unknown: Vec<String>,
    /// Bytes freed.
    pub bytes_freed: u64,
    /// Manifests and archives read.
    pub manifests_read: usize,
    /// Distinct mapping pages visited.
    pub mapping_pages_visited: usize,
}

/// What besides the directory's manifests must be protected.
#[derive(Debug, Default)]
pub struct Pins {
    /// Snapshots readers still hold.
    pub snapshots: Vec<Arc<TreeSnapshot>>,
    /// Names of data files writers are appending to.
    pub writing: HashSet<String>,
}

/// Reachability over one partition directory.
struct Walk<'a> {
    files: &'a FileTable,
    fanout: usize,
    visited: HashSet<(String, u32)>,
    referenced: HashMap<String, KeepReason>,
}

impl Walk<'_> {
    fn name(&self, ranges: &BranchFileMapping, addr: PageAddr, by: &str) -> IoResult<String> {
        self.files
            .resolve(ranges, addr.file_id())
            .map(|n| n.to_string())
            .map_err(|_| {
                IoError::corruption(
                    format!("{}/{by}", self.files.dir()),
                    addr.to_u64(),
                    format!("page {addr} lies in a file id no branch file range covers"),
                )
            })
    }

    fn mark(&mut self, name: String, why: &KeepReason) {
        self.referenced.entry(name).or_insert_with(|| why.clone());
    }

    fn slot(
        &mut self,
        ranges: &BranchFileMapping,
        raw: u64,
        by: &str,
        why: &KeepReason,
    ) -> IoResult<()> {
        match Slot::decode(raw) {
            Some(Slot::Page(a)) if !a.is_none() => {
                let n = self.name(ranges, a, by)?;
                self.mark(n, why);
                Ok(())
            }
            Some(_) => Ok(()),
            None => Err(IoError::corruption(
                format!("{}/{by}", self.files.dir()),
                raw,
                "invalid mapping slot",
            )),
        }
    }

    /// Marks every page reachable from a mapping root (and the root's pages themselves),
    /// except slots `shadow` says were overwritten since (a manifest's overlay, a reader's
    /// dirty chunks): the page such a slot pointed to is garbage for this state.
    fn radix(
        &mut self,
        ranges: &BranchFileMapping,
        root: PageAddr,
        shadow: &Shadow,
        by: &str,
        why: &KeepReason,
    ) -> IoResult<()> {
        if root.is_none() {
            return Ok(());
        }
        let fanout = self.fanout as u64;
        // (address, first chunk the node covers)
        let mut stack = vec![(root, 0u64)];
        while let Some((addr, first_chunk)) = stack.pop() {
            let name = self.name(ranges, addr, by)?;
            let key = (name.clone(), addr.page_index());
            // A node another state walked in full already had all it reaches marked.
            if self.visited.contains(&key) {
                continue;
            }
            self.mark(name, why);
            let node = match self.files.read(ranges, addr)? {
                CachedPage::Mapping(m) => m,
                CachedPage::Tree(_) => {
                    return Err(IoError::corruption(
                        format!("{}/{by}", self.files.dir()),
                        addr.to_u64(),
                        "a mapping root or child points at a tree page",
                    ));
                }
            };
            let span = fanout.saturating_pow(u32::from(node.level));
            // Only a node nothing shadows counts as walked in full for other states.
            if !shadow.touches(first_chunk, first_chunk.saturating_add(span)) {
                self.visited.insert(key);
            }
            if node.level == 0 {
                for (i, &raw) in node.slots.iter().enumerate() {
                    if raw != 0 && !shadow.hides(first_chunk, i) {
                        self.slot(ranges, raw, by, why)?;
                    }
                }
            } else {
                let child_span = fanout.saturating_pow(u32::from(node.level - 1));
                for (i, &child) in node.slots.iter().enumerate() {
                    if child != 0 {
                        let a = PageAddr::from_u64(child).ok_or_else(|| {
                            IoError::corruption(
                                format!("{}/{by}", self.files.dir()),
                                child,
                                "invalid mapping child address",
                            )
                        })?;
                        stack.push((a, first_chunk + i as u64 * child_span));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Slots of the on-disk mapping that a state has overwritten since its last checkpoint.
#[derive(Debug, Default)]
struct Shadow {
    /// chunk → overwritten slot indexes (`None`: the whole chunk is replaced).
    chunks: BTreeMap<u64, Option<HashSet<usize>>>,
}

impl Shadow {
    fn from_overlay(ids: impl Iterator<Item = u32>, fanout: usize) -> Shadow {
        let mut chunks: BTreeMap<u64, Option<HashSet<usize>>> = BTreeMap::new();
        for id in ids {
            let c = u64::from(id) / fanout as u64;
            if let Some(set) = chunks.entry(c).or_insert_with(|| Some(HashSet::new())) {
                set.insert(id as usize % fanout);
            }
        }
        Shadow { chunks }
    }

    fn whole_chunks(chunks: impl Iterator<Item = u32>) -> Shadow {
        Shadow {
            chunks: chunks.map(|c| (u64::from(c), None)).collect(),
        }
    }

    fn touches(&self, from: u64, to: u64) -> bool {
        self.chunks.range(from..to).next().is_some()
    }

    fn hides(&self, chunk: u64, slot: usize) -> bool {
        match self.chunks.get(&chunk) {
            Some(None) => true,
            Some(Some(set)) => set.contains(&slot),
            None => false,
        }
    }
}

/// Runs GC over one partition directory. `dry_run` reports without deleting.
pub fn collect(files: &FileTable, pins: &Pins, dry_run: bool) -> IoResult<GcReport> {
    let copy = || Pins {
        snapshots: pins.snapshots.clone(),
        writing: pins.writing.clone(),
    };
    collect_with(files, copy, dry_run)
}

/// Like [`collect`], taking the pins only once every manifest has been read. Pins taken
/// before the directory is listed miss a snapshot published in between that references a
/// file created in between, which a later commit (before its manifest is read) stops
/// referencing; taken after the manifests, every snapshot alive then is pinned, and any
/// later one only references pinned pages, files being written or files not listed.
pub fn collect_with(
    files: &FileTable,
    pins: impl FnOnce() -> Pins,
    dry_run: bool,
) -> IoResult<GcReport> {
    let storage = files.storage().clone();
    let dir = files.dir().to_string();
    let mut report = GcReport::default();
    // List first: a file created after this point is not a candidate.
    let names = storage.list(&dir)?;
    let mut data: Vec<DataFileName> = Vec::new();
    let mut manifests: Vec<String> = Vec::new();
    let mut terms: HashMap<BranchName, CurrentTerm> = HashMap::new();
    for n in &names {
        match classify(n) {
            FileKind::Data(d) => data.push(d),
            FileKind::Manifest(_) | FileKind::Archive(_) => manifests.push(n.clone()),
            FileKind::CurrentTerm(ct) => {
                let path = format!("{dir}/{n}");
                let bytes = storage.read_file(&path, 4096)?;
                let rec = CurrentTerm::decode(&bytes)
                    .map_err(|e| IoError::corruption(path, e.offset, e.to_string()))?;
                terms.insert(ct.branch, rec);
            }
            FileKind::Unknown(u) => report.unknown.push(u),
            // The cloud tier's own objects (its GC lease, numbered versions) never reach a
            // listing of the storage layer; were they found, they would be no data file.
            FileKind::Tmp(_) | FileKind::Lock | FileKind::GcLease | FileKind::Version(_) => {}
        }
    }
    let fanout =
        bough_tree::page::mapping::fanout(bough_io::layout::max_payload(files.page_size()));
    let mut walk = Walk {
        files,
        fanout,
        visited: HashSet::new(),
        referenced: HashMap::new(),
    };
    // Durable high-water mark per live (branch, term): the manifest's own range maximum.
    let mut high_water: BTreeMap<(BranchName, Term), u64> = BTreeMap::new();
    for m in &manifests {
        let path = format!("{dir}/{m}");
        let bytes = match storage.read_file(&path, MAX_MANIFEST_BYTES) {
            Ok(b) => b,
            // Deleted since the listing (a branch deletion): it protects nothing any more.
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let state = replay(&bytes)
            .map_err(|e| IoError::corruption(path.clone(), e.offset, e.to_string()))?
            .state;
        report.manifests_read += 1;
        let why = KeepReason::Referenced { by: m.clone() };
        let ranges = &state.meta.branch_file_ranges;
        let shadow = Shadow::from_overlay(state.overlay.keys().copied(), fanout);
        walk.radix(ranges, state.mapping_root, &shadow, m, &why)?;
        for &raw in state.overlay.values() {
            walk.slot(ranges, raw, m, &why)?;
        }
        // Merge bases are states a later three-way merge reads: their pages stay.
        let bases = merge_bases(&state.extensions)
            .map_err(|r| IoError::corruption(path.clone(), 0, format!("merge bases: {r:?}")))?;
        for b in bases {
            let br = &b.state.meta.branch_file_ranges;
            let shadow = Shadow::from_overlay(b.state.overlay.iter().map(|(id, _)| *id), fanout);
            walk.radix(br, b.state.mapping_root, &shadow, m, &why)?;
            for &(_, raw) in &b.state.overlay {
                walk.slot(br, raw, m, &why)?;
            }
        }
        if let FileKind::Manifest(mn) = classify(m) {
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
    for snap in &pins.snapshots {
        let why = KeepReason::PinnedByReader;
        let shadow = Shadow::whole_chunks(snap.mapping.dirty_chunk_numbers().into_iter());
        walk.radix(&snap.ranges, snap.mapping.root(), &shadow, "<reader>", &why)?;
        let mut dirty = Vec::new();
        snap.mapping
            .for_each_dirty_slot(&mut |_, raw| dirty.push(raw));
        for raw in dirty {
            walk.slot(&snap.ranges, raw, "<reader>", &why)?;
        }
    }
    report.mapping_pages_visited = walk.visited.len();
    for d in data {
        let name = d.to_string();
        if let Some(why) = walk.referenced.get(&name) {
            report.kept.push((name, why.clone()));
            continue;
        }
        if pins.writing.contains(&name) {
            report.kept.push((name, KeepReason::Writing));
            continue;
        }
        let live_term = terms
            .get(&d.branch)
            .is_some_and(|ct| !ct.deleted && ct.term == d.term);
        let above = high_water
            .get(&(d.branch.clone(), d.term))
            .is_none_or(|&max| d.file_id > max);
        if live_term && above {
            report.kept.push((name, KeepReason::InFlight));
            continue;
        }
        let path = format!("{dir}/{name}");
        let size = storage.file_len(&path).unwrap_or(0);
        if !dry_run {
            storage.delete(&path)?;
            files.forget(&name);
        }
        tracing::debug!(file = %path, bytes = size, "gc deleted an unreachable data file");
        report.bytes_freed += size;
        report.deleted.push((name, size));
    }
    Ok(report)
}
