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
//! - every file a writer is still filling (`writing`), and every file at or above the
//!   durable high-water mark of a live (branch, term) — a commit may be about to reference
//!   it, or the term's next writer continue the newest one (`Head::resume_last_file`)
//!   before GC sees it registered as being written.
//!
//! Mapping pages shared by many branches are visited once (they are identified by physical
//! location), so the cost grows with the distinct mapping pages, not with branches × pages.
//! A crash mid-GC loses nothing: a deletion only ever removes an unreachable file, and the
//! next run finishes what the last one started.
//!
//! The same walk can also *measure* ([`measure`], [`collect_measured`]): per data file, the
//! distinct pages anything references (the union over every referent, each shared page
//! counted once) and which durable referents — branch heads, archives, merge bases — hold
//! it. Compaction uses that to move a branch's pages only out of files it alone holds.

// Library code returns errors, never panics on input (tests may unwrap).
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use bough_io::{ErrorKind, IoError, IoResult};
use bough_manifest::{BranchFileMapping, CurrentTerm, PageAddr, merge_bases, replay};
use bough_names::{BranchName, DataFileName, FileKind, Term, classify};
use bough_tree::cache::CachedPage;
use bough_tree::files::FileTable;
use bough_tree::head::{MAX_MANIFEST_BYTES, TreeSnapshot};
use bough_tree::mapping::{NodePos, Radix, Slot};

mod space;
pub use space::branch_space;

/// Why a file was kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeepReason {
    /// A manifest or archive references it (the first one found is named).
    Referenced { by: String },
    /// A snapshot held by a reader references it.
    PinnedByReader,
    /// A writer is appending to it.
    Writing,
    /// Its id is at or above the durable high-water mark of its live (branch, term): a
    /// commit in flight may reference it, or a writer continue it.
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

/// A state that references pages, as far as compaction cares.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Referent {
    /// The current state of a branch at a term (`manifest_<branch>_<term>`): the head that
    /// moves its pages out when it compacts.
    Head {
        /// The branch.
        branch: BranchName,
        /// Its term.
        term: Term,
    },
    /// A state nothing moves off: an archive, or a merge base recorded in a manifest or an
    /// archive (named by the file and, for a merge base, the other branch).
    Pinned(String),
}

/// Which durable referents (heads, archives, merge bases) reference pages of a file.
/// Reader snapshots are transient and not counted: a file only readers hold besides its
/// head becomes unreachable once they let go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holders {
    /// None: only reader snapshots reference it.
    None,
    /// Exactly one.
    One(Referent),
    /// Two or more.
    Many,
}

/// What the walk found about one data file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileUsage {
    /// Distinct pages of the file that anything references (the union over every manifest,
    /// archive, merge base and reader snapshot; a page shared by many counts once).
    pub live_pages: u64,
    /// `live_pages` × the page size.
    pub live_bytes: u64,
    /// The durable referents that reference a page of it.
    pub holders: Holders,
    /// Whether a reader snapshot references a page of it.
    pub read_by_snapshot: bool,
    /// Every durable referent that references a page of it: indexes into
    /// [`Usage::holders`], in walk order.
    pub held_by: Vec<u32>,
}

/// A durable referent the walk met, and the branches whose deletion removes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The state.
    pub referent: Referent,
    /// The branch whose manifest or archive holds it first; for a merge base, also the
    /// other branch of the pair (deleting either drops the base).
    pub owners: Vec<BranchName>,
}

/// Per data file, what is live and who holds it: the result of [`measure`].
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// Page size of the partition.
    pub page_size: u32,
    /// Every data file something references, by name. A file not listed had no referent
    /// when the walk ran (it is garbage, or was created since).
    pub files: BTreeMap<String, FileUsage>,
    /// Manifests and archives read.
    pub manifests_read: usize,
    /// Distinct mapping pages visited.
    pub mapping_pages_visited: usize,
    /// The durable referents [`FileUsage::held_by`] points into.
    pub holders: Vec<Holder>,
}

impl Usage {
    /// Whether the head of `branch` at `term` is the only durable referent of `file`: if it
    /// moves its pages out, the file becomes unreachable (once readers let go). True for a
    /// file the walk did not see, which nothing else referenced then.
    pub fn held_only_by(&self, file: &str, branch: &BranchName, term: Term) -> bool {
        match self.files.get(file).map(|u| &u.holders) {
            None | Some(Holders::None) => true,
            Some(Holders::One(Referent::Head { branch: b, term: t })) => b == branch && *t == term,
            Some(_) => false,
        }
    }

    /// Bytes of distinct live pages over every data file.
    pub fn live_bytes(&self) -> u64 {
        self.files.values().map(|u| u.live_bytes).sum()
    }
}

/// Who holds a file, while the walk runs: indexes into [`Track::referents`].
/// Page-level bookkeeping of a measuring walk.
#[derive(Debug, Default)]
struct Track {
    /// Data file name → index into `files`.
    ids: HashMap<String, u32>,
    files: Vec<FileAcc>,
    referents: Vec<Holder>,
    /// The durable referent being walked (`None` while walking reader snapshots).
    current: Option<u32>,
}

#[derive(Debug)]
struct FileAcc {
    name: String,
    /// One bit per page index: referenced by something.
    pages: Vec<u64>,
    live: u64,
    /// Indexes into `referents`, ascending (referents are walked one after the other).
    held: Vec<u32>,
    read: bool,
}

impl Track {
    fn file(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.ids.get(name) {
            return i;
        }
        let i = self.files.len() as u32;
        self.files.push(FileAcc {
            name: name.to_string(),
            pages: Vec::new(),
            live: 0,
            held: Vec::new(),
            read: false,
        });
        self.ids.insert(name.to_string(), i);
        i
    }

    /// Records that the current referent reaches a page of file `f`.
    fn hold(&mut self, f: u32) {
        let acc = &mut self.files[f as usize];
        match self.current {
            None => acc.read = true,
            Some(r) => {
                if acc.held.last() != Some(&r) {
                    acc.held.push(r);
                }
            }
        }
    }

    fn page(&mut self, name: &str, index: u32) -> u32 {
        let f = self.file(name);
        let acc = &mut self.files[f as usize];
        // Page indexes are below 2^24, so a file's bitmap is at most 2 MiB.
        let (word, bit) = ((index / 64) as usize, index % 64);
        if acc.pages.len() <= word {
            acc.pages.resize(word + 1, 0);
        }
        if acc.pages[word] & (1 << bit) == 0 {
            acc.pages[word] |= 1 << bit;
            acc.live += 1;
        }
        self.hold(f);
        f
    }

    fn finish(self, page_size: u32) -> (BTreeMap<String, FileUsage>, Vec<Holder>) {
        let referents = self.referents;
        let files = self
            .files
            .into_iter()
            .map(|acc| {
                let holders = match acc.held.as_slice() {
                    [] => Holders::None,
                    [r] => referents
                        .get(*r as usize)
                        .map_or(Holders::Many, |h| Holders::One(h.referent.clone())),
                    _ => Holders::Many,
                };
                let usage = FileUsage {
                    live_pages: acc.live,
                    live_bytes: acc.live * u64::from(page_size),
                    holders,
                    read_by_snapshot: acc.read,
                    held_by: acc.held,
                };
                (acc.name, usage)
            })
            .collect();
        (files, referents)
    }
}

/// What every node of one state's mapping walk shares.
#[derive(Clone, Copy)]
struct State<'s> {
    ranges: &'s BranchFileMapping,
    shadow: &'s Shadow,
    /// The manifest or archive walked (for error messages).
    by: &'s str,
    why: &'s KeepReason,
    /// Mapping pages of this tree walked so far (each may be reached once).
    seen: &'s std::cell::RefCell<HashSet<u64>>,
}

/// A mapping node to walk: its address, the first chunk it covers, the level it must have.
#[derive(Clone, Copy)]
struct NodeAt {
    addr: PageAddr,
    first_chunk: u64,
    level: Option<u8>,
}

fn addr_at(addr: PageAddr, first_chunk: u64, level: Option<u8>) -> NodeAt {
    NodeAt {
        addr,
        first_chunk,
        level,
    }
}

/// Reachability over one partition directory.
struct Walk<'a> {
    files: &'a FileTable,
    fanout: usize,
    /// Mapping nodes walked in full, with (when measuring) the data files their subtree
    /// reaches, so a state that shares the node is credited as a holder of those files
    /// without walking it again.
    visited: HashMap<(String, u32), Box<[u32]>>,
    referenced: HashMap<String, KeepReason>,
    track: Option<Track>,
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

    /// Marks a page referenced; when measuring, returns its file's index.
    fn mark(&mut self, name: &str, index: u32, why: &KeepReason) -> Option<u32> {
        if !self.referenced.contains_key(name) {
            self.referenced.insert(name.to_string(), why.clone());
        }
        self.track.as_mut().map(|t| t.page(name, index))
    }

    /// Starts walking the states of `referent` (`None`: a reader snapshot).
    fn begin(&mut self, referent: Option<Holder>) {
        if let Some(t) = &mut self.track {
            t.current = referent.map(|r| {
                t.referents.push(r);
                (t.referents.len() - 1) as u32
            });
        }
    }

    fn slot(
        &mut self,
        ranges: &BranchFileMapping,
        raw: u64,
        by: &str,
        why: &KeepReason,
    ) -> IoResult<Option<u32>> {
        match Slot::decode(raw) {
            Some(Slot::Page(a)) if !a.is_none() => {
                let n = self.name(ranges, a, by)?;
                Ok(self.mark(&n, a.page_index(), why))
            }
            Some(_) => Ok(None),
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
        let seen = std::cell::RefCell::new(HashSet::new());
        let state = State {
            ranges,
            shadow,
            by,
            why,
            seen: &seen,
        };
        let mut reached = Vec::new();
        self.node(&state, addr_at(root, 0, None), &mut reached)
    }

    /// Walks the mapping node `at.addr`, which covers chunks from `at.first_chunk` and must
    /// be at `at.level` (the root's level is free). Adds the files its subtree reaches to
    /// `reached` when measuring. Every step follows the mapping walk's rules
    /// ([`bough_tree::mapping::Radix`]): levels strictly decrease from at most 8, so the
    /// recursion depth is at most 9; child positions are checked arithmetic within the id
    /// space; a page reached twice in one tree is refused.
    fn node(&mut self, st: &State<'_>, at: NodeAt, reached: &mut Vec<u32>) -> IoResult<()> {
        let State {
            ranges,
            shadow,
            by,
            why,
            seen,
        } = *st;
        let NodeAt {
            addr,
            first_chunk,
            level,
        } = at;
        let files = self.files;
        let bad = |what: String| {
            let (file, offset) = files.locate(ranges, addr);
            IoError::corruption(file, offset, format!("{what} (in the state of {by})"))
        };
        if !seen.borrow_mut().insert(addr.to_u64()) {
            return Err(bad(
                "mapping page reached twice in one tree (a cycle or a shared subtree)".into(),
            ));
        }
        let name = self.name(ranges, addr, by)?;
        let key = (name, addr.page_index());
        // A node another state walked in full already had all it reaches marked; only who
        // holds those files is new.
        if let Some(files) = self.visited.get(&key) {
            if let Some(t) = &mut self.track {
                for &f in files.iter() {
                    t.hold(f);
                }
                reached.extend_from_slice(files);
            }
            return Ok(());
        }
        let node = match self.files.read(ranges, addr)? {
            CachedPage::Mapping(m) => m,
            CachedPage::Tree(_) => {
                return Err(bad(
                    "a mapping root or child points at a tree page".to_string()
                ));
            }
        };
        let radix = Radix::new(self.fanout);
        let level = radix.check(level, &node).map_err(bad)?;
        let mut below: Vec<u32> = Vec::new();
        below.extend(self.mark(&key.0, key.1, why));
        // A span past u64 covers every chunk there is: saturating is exact for the shadow.
        let span = radix.span(level).unwrap_or(u64::MAX);
        if level == 0 {
            for (i, &raw) in node.slots.iter().enumerate() {
                if raw != 0 && !shadow.hides(first_chunk, i) {
                    below.extend(self.slot(ranges, raw, by, why)?);
                }
            }
        } else {
            let pos = NodePos {
                addr,
                level,
                first_chunk,
            };
            for (i, &child) in node.slots.iter().enumerate() {
                if let Some(c) = radix.child(pos, i, child).map_err(bad)? {
                    self.node(
                        st,
                        addr_at(c.addr, c.first_chunk, Some(c.level)),
                        &mut below,
                    )?;
                }
            }
        }
        below.sort_unstable();
        below.dedup();
        // Only a node nothing shadows counts as walked in full for other states.
        if !shadow.touches(first_chunk, first_chunk.saturating_add(span)) {
            self.visited.insert(key, below.clone().into_boxed_slice());
        }
        reached.extend_from_slice(&below);
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
    let mut report = GcReport::default();
    let marked = mark(files, pins, false, &mut report)?;
    sweep(files, &marked, dry_run, &mut report)?;
    Ok(report)
}

/// [`collect_with`] that also returns the [`Usage`] its walk measured (one walk for both).
pub fn collect_measured(
    files: &FileTable,
    pins: impl FnOnce() -> Pins,
    dry_run: bool,
) -> IoResult<(GcReport, Usage)> {
    let mut report = GcReport::default();
    let mut marked = mark(files, pins, true, &mut report)?;
    sweep(files, &marked, dry_run, &mut report)?;
    let usage = marked.usage(files, &report);
    Ok((report, usage))
}

/// Measures a partition without deleting anything: per data file, the distinct live pages
/// over every referent GC protects and which durable referents hold it. The walk is GC's
/// (every manifest, archive, merge base and reader snapshot, each shared mapping page
/// visited once), so it costs what a GC run costs minus the deletions, plus one bit per
/// page of the partition's data files.
pub fn measure(files: &FileTable, pins: impl FnOnce() -> Pins) -> IoResult<Usage> {
    let mut report = GcReport::default();
    let mut marked = mark(files, pins, true, &mut report)?;
    Ok(marked.usage(files, &report))
}

/// What the mark phase found.
struct Marked<'a> {
    walk: Walk<'a>,
    data: Vec<DataFileName>,
    terms: HashMap<BranchName, CurrentTerm>,
    /// Durable high-water mark per live (branch, term): the manifest's own range maximum.
    high_water: BTreeMap<(BranchName, Term), u64>,
    pins: Pins,
}

impl Marked<'_> {
    fn usage(&mut self, files: &FileTable, report: &GcReport) -> Usage {
        let (files_used, holders) = self
            .walk
            .track
            .take()
            .map(|t| t.finish(files.page_size()))
            .unwrap_or_default();
        Usage {
            page_size: files.page_size(),
            files: files_used,
            manifests_read: report.manifests_read,
            mapping_pages_visited: report.mapping_pages_visited,
            holders,
        }
    }
}

/// Lists the directory and marks everything reachable from every manifest, archive, merge
/// base and (pins taken last) reader snapshot. `track`: also record pages and holders.
fn mark<'a>(
    files: &'a FileTable,
    pins: impl FnOnce() -> Pins,
    track: bool,
    report: &mut GcReport,
) -> IoResult<Marked<'a>> {
    let storage = files.storage().clone();
    let dir = files.dir().to_string();
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
            // Write-ahead log files are kept: manifests name the ones they need in the `LOG`
            // extension, and until GC walks those references nothing proves a log file
            // unreachable (ARCHITECTURE.md, "Write path").
            FileKind::Log(_) => {}
            // The cloud tier's own objects (its GC lease, numbered versions) never reach a
            // listing of the storage layer; were they found, they would be no data file.
            FileKind::Tmp(_) | FileKind::Lock | FileKind::GcLease | FileKind::Version(_) => {}
            // Evidence kept for the operator (`bough verify` reports it): no data file, and
            // not GC's to delete.
            FileKind::TornTail(_) => {}
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
        let kind = classify(m);
        let owner = match &kind {
            FileKind::Manifest(mn) => Some(mn.branch.clone()),
            FileKind::Archive(a) => Some(a.branch.clone()),
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
            walk.begin(Some(Holder {
                referent: Referent::Pinned(format!("{m} (merge base with {})", b.branch)),
                owners: owner.iter().chain([&b.branch]).cloned().collect(),
            }));
            let br = &b.state.meta.branch_file_ranges;
            let shadow = Shadow::from_overlay(b.state.overlay.iter().map(|(id, _)| *id), fanout);
            walk.radix(br, b.state.mapping_root, &shadow, m, &why)?;
            for &(_, raw) in &b.state.overlay {
                walk.slot(br, raw, m, &why)?;
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
        walk.radix(&snap.ranges, snap.mapping.root(), &shadow, "<reader>", &why)?;
        let mut dirty = Vec::new();
        snap.mapping
            .for_each_dirty_slot(&mut |_, raw| dirty.push(raw));
        for raw in dirty {
            walk.slot(&snap.ranges, raw, "<reader>", &why)?;
        }
    }
    report.mapping_pages_visited = walk.visited.len();
    Ok(Marked {
        walk,
        data,
        terms,
        high_water,
        pins,
    })
}

/// GC never frees data of a branch whose state it could not establish: every live
/// `CURRENT_TERM` must name a manifest GC walks. One created after the listing (a new term
/// another process claimed meanwhile) is walked too; one that does not exist at all (the
/// record was restored from elsewhere, or the manifest lost) means the branch's state is
/// unknown, and GC deletes nothing (`Corruption` naming the record).
fn require_live_manifests(
    storage: &Arc<dyn bough_io::Storage>,
    dir: &str,
    terms: &HashMap<BranchName, CurrentTerm>,
    manifests: &mut Vec<String>,
) -> IoResult<()> {
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
                return Err(IoError::corruption(
                    format!(
                        "{dir}/{}",
                        bough_names::CurrentTermName::new(branch.clone())
                    ),
                    0,
                    format!(
                        "CURRENT_TERM names term {} but {name} does not exist: the branch's \
                         state is unknown, so GC deletes nothing (reopen the store to repair it)",
                        ct.term
                    ),
                ));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Deletes (unless `dry_run`) every listed data file nothing reaches, and reports why the
/// others stay.
fn sweep(
    files: &FileTable,
    marked: &Marked<'_>,
    dry_run: bool,
    report: &mut GcReport,
) -> IoResult<()> {
    let storage = files.storage();
    let dir = files.dir();
    for d in &marked.data {
        let name = d.to_string();
        if let Some(why) = marked.walk.referenced.get(&name) {
            report.kept.push((name, why.clone()));
            continue;
        }
        if marked.pins.writing.contains(&name) {
            report.kept.push((name, KeepReason::Writing));
            continue;
        }
        let live_term = marked
            .terms
            .get(&d.branch)
            .is_some_and(|ct| !ct.deleted && ct.term == d.term);
        let above = marked
            .high_water
            .get(&(d.branch.clone(), d.term))
            .is_none_or(|&max| d.file_id >= max);
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
    Ok(())
}
