//! The integrity checker: reads a store at rest below the facade and proves it well-formed.
//!
//! For every partition: every live branch's `CURRENT_TERM` decodes and names a manifest that
//! replays; every archive replays to exactly one snapshot; every merge base those manifests
//! record is a state too. For each of these states, every physical page the mapping table
//! references (tree, overflow and mapping pages) is read and verified (checksum, frame,
//! decode), the key tree and the TTL tree are walked from their roots (depth-bounded, no
//! page visited twice, all leaves at one depth, keys strictly increasing within each leaf
//! and within the bounds their parents' separators give, overflow values of the recorded
//! length), and every mapped logical page id must be reachable from a root. Finally a dry-run
//! GC must succeed and sort every data file into referenced, in flight or collectable.
//!
//! Damage is reported as problems, never as a panic; only failing to list the store is an
//! error.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

use bough_gc::{KeepReason, Pins};
use bough_io::{IoError, IoResult, Storage};
use bough_manifest::{CurrentTerm, NO_PAGE, PageId, Snapshot, merge_bases, replay};
use bough_names::{ArchiveName, FileKind, ManifestName, PartitionDir, classify, classify_dir};
use bough_tree::btree::{MAX_DEPTH, Node, TreeRead};
use bough_tree::cache::PageCache;
use bough_tree::files::FileTable;
use bough_tree::head::{MAX_MANIFEST_BYTES, TreeSnapshot};
use bough_tree::mapping::Slot;
use bough_tree::page::leaf::{LeafView, ValueLoc};

use crate::workload::State;

/// Bytes of page cache the checker reads through (small: it should read from storage).
const CHECK_CACHE_BYTES: usize = 1 << 20;

/// What the checker found.
#[derive(Debug, Default, Clone)]
pub struct CheckReport {
    /// Partitions checked.
    pub partitions: usize,
    /// Live branches checked.
    pub branches: usize,
    /// Archives checked.
    pub archives: usize,
    /// Merge bases checked.
    pub merge_bases: usize,
    /// Distinct physical pages read and verified.
    pub pages: u64,
    /// Entries (key tree and TTL tree) walked, counted once per state.
    pub entries: u64,
    /// Data files in the store.
    pub data_files: usize,
    /// Data files a manifest, archive or merge base references.
    pub files_referenced: usize,
    /// Data files above a live writer's durable high-water mark (a crashed commit's
    /// leftovers; the next commit of that writer replaces them).
    pub files_in_flight: usize,
    /// Data files GC would delete.
    pub files_collectable: usize,
    /// What is wrong, one line each.
    pub problems: Vec<String>,
}

impl CheckReport {
    /// Whether nothing is wrong.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }

    fn problem(&mut self, what: impl Into<String>) {
        self.problems.push(what.into());
    }
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} partitions, {} branches, {} archives, {} merge bases, {} pages, {} entries, \
             {} data files ({} referenced, {} in flight, {} collectable), {} problems",
            self.partitions,
            self.branches,
            self.archives,
            self.merge_bases,
            self.pages,
            self.entries,
            self.data_files,
            self.files_referenced,
            self.files_in_flight,
            self.files_collectable,
            self.problems.len()
        )?;
        for p in self.problems.iter().take(8) {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

/// Checks every partition of the store `storage` holds (page size `page_size`).
pub fn check_storage(storage: Arc<dyn Storage>, page_size: u32) -> IoResult<CheckReport> {
    let mut report = CheckReport::default();
    let mut seen_pages = HashSet::new();
    for d in storage.list_dirs()? {
        match classify_dir(&d) {
            Some(dir) => {
                report.partitions += 1;
                check_partition(&storage, &dir, page_size, &mut report, &mut seen_pages)?;
            }
            None => report.problem(format!("unrecognised directory {d}")),
        }
    }
    Ok(report)
}

fn file_table(storage: &Arc<dyn Storage>, dir: &PartitionDir, page_size: u32) -> Arc<FileTable> {
    Arc::new(FileTable::new(
        storage.clone(),
        dir.to_string(),
        page_size,
        Arc::new(PageCache::new(CHECK_CACHE_BYTES)),
        false,
    ))
}

fn replay_file(storage: &Arc<dyn Storage>, path: &str) -> IoResult<bough_manifest::Replayed> {
    let bytes = storage.read_file(path, MAX_MANIFEST_BYTES)?;
    replay(&bytes).map_err(|e| IoError::corruption(path, e.offset, e.to_string()))
}

fn check_partition(
    storage: &Arc<dyn Storage>,
    dir: &PartitionDir,
    page_size: u32,
    report: &mut CheckReport,
    seen_pages: &mut HashSet<(String, u32)>,
) -> IoResult<()> {
    let files = file_table(storage, dir, page_size);
    let names = storage.list(&dir.to_string())?;
    let mut states: Vec<(String, Snapshot)> = Vec::new();
    for n in &names {
        let path = files.path_of(n);
        match classify(n) {
            FileKind::CurrentTerm(ct) => {
                let rec = match storage.read_file(&path, 4096).and_then(|b| {
                    CurrentTerm::decode(&b)
                        .map_err(|e| IoError::corruption(&path, e.offset, e.to_string()))
                }) {
                    Ok(r) => r,
                    Err(e) => {
                        report.problem(format!("{path}: {e}"));
                        continue;
                    }
                };
                if rec.deleted {
                    continue;
                }
                report.branches += 1;
                let m = ManifestName::new(ct.branch.clone(), rec.term).to_string();
                let mpath = files.path_of(&m);
                let r = match replay_file(storage, &mpath) {
                    Ok(r) => r,
                    Err(e) => {
                        report.problem(format!("{dir}@{}: {e}", ct.branch));
                        continue;
                    }
                };
                if r.state.meta.branch != ct.branch || r.state.meta.term != rec.term {
                    report.problem(format!(
                        "{mpath}: names branch {} term {}",
                        r.state.meta.branch, r.state.meta.term
                    ));
                    continue;
                }
                match merge_bases(&r.state.extensions) {
                    Ok(bases) => {
                        for b in bases {
                            report.merge_bases += 1;
                            states
                                .push((format!("{mpath} (merge base with {})", b.branch), b.state));
                        }
                    }
                    Err(e) => report.problem(format!("{mpath}: merge bases: {e:?}")),
                }
                states.push((mpath, r.state.to_snapshot()));
            }
            FileKind::Archive(_) => {
                report.archives += 1;
                match replay_file(storage, &path) {
                    Ok(r) if r.records == 1 => states.push((path, r.state.to_snapshot())),
                    Ok(r) => report.problem(format!(
                        "{path}: an archive holds {} records, not one",
                        r.records
                    )),
                    Err(e) => report.problem(format!("{e}")),
                }
            }
            // A tag is a state like an archive: one snapshot record, every page readable.
            FileKind::Tag(_) => match replay_file(storage, &path) {
                Ok(r) if r.records == 1 => states.push((path, r.state.to_snapshot())),
                Ok(r) => report.problem(format!(
                    "{path}: a tag holds {} records, not one",
                    r.records
                )),
                Err(e) => report.problem(format!("{e}")),
            },
            FileKind::Data(_) => report.data_files += 1,
            FileKind::Unknown(u) => report.problem(format!("{dir}/{u}: unrecognised file")),
            // The cloud tier's own objects never reach a storage listing; the harness
            // runs on local storage anyway.
            // A kept-aside torn tail is what a crash during an append leaves: evidence for
            // the operator, not damage. Write-ahead log files are read through the manifests
            // that name them.
            FileKind::Manifest(_)
            | FileKind::Log(_)
            | FileKind::Tmp(_)
            | FileKind::Lock
            | FileKind::GcLease
            | FileKind::Version(_)
            | FileKind::TornTail(_) => {}
        }
    }
    for (label, s) in &states {
        if let Err(e) = check_state(&files, label, s, report, seen_pages) {
            report.problem(format!("{label}: {e}"));
        }
    }
    match bough_gc::collect(&files, &Pins::default(), true) {
        Ok(gc) => {
            report.files_collectable += gc.deleted.len();
            for (_, why) in &gc.kept {
                match why {
                    KeepReason::InFlight => report.files_in_flight += 1,
                    _ => report.files_referenced += 1,
                }
            }
            for u in gc.unknown {
                report.problem(format!("{dir}/{u}: GC does not recognise it"));
            }
        }
        Err(e) => report.problem(format!("{dir}: dry-run GC failed: {e}")),
    }
    Ok(())
}

/// Walks one state (a manifest's, an archive's or a merge base's).
fn check_state(
    files: &Arc<FileTable>,
    label: &str,
    s: &Snapshot,
    report: &mut CheckReport,
    seen_pages: &mut HashSet<(String, u32)>,
) -> IoResult<()> {
    let snap = TreeSnapshot::from_record(files.clone(), s)?;
    let mut addrs = Vec::new();
    snap.for_each_page(&mut |a| addrs.push(a))?;
    for a in addrs {
        let name = files.resolve(&snap.ranges, a.file_id())?;
        if seen_pages.insert((format!("{}/{name}", files.dir()), a.page_index())) {
            // Checksum, frame and (for all but overflow slices) the payload's layout.
            let h = files.handle(&snap.ranges, a.file_id())?;
            let (kind, payload, offset) = files.read_raw(&h, a.page_index())?;
            if kind != bough_tree::page::kind::OVERFLOW {
                files.decode(&h.path, offset, kind, payload)?;
            }
            report.pages += 1;
        }
    }
    let mut walk = Walk {
        snap: &snap,
        reached: HashSet::new(),
        leaf_depth: None,
        entries: 0,
    };
    walk.node(s.meta.root, None, None, 0)?;
    walk.leaf_depth = None;
    walk.node(s.meta.ttl_root, None, None, 0)?;
    report.entries += walk.entries;
    let mut mapped: Vec<PageId> = Vec::new();
    let mut bad = None;
    snap.mapping
        .for_each_slot(&snap, &mut |id, raw| match Slot::decode(raw) {
            Some(Slot::Page(_)) => mapped.push(id),
            Some(_) => {}
            None => bad = Some((id, raw)),
        })?;
    if let Some((id, raw)) = bad {
        return Err(IoError::corruption(
            label,
            u64::from(id),
            format!("mapping slot of page {id} holds {raw:#x}"),
        ));
    }
    let leaked: Vec<PageId> = mapped
        .into_iter()
        .filter(|id| !walk.reached.contains(id))
        .collect();
    if !leaked.is_empty() {
        report.problem(format!(
            "{label}: {} logical pages are mapped but unreachable from the roots (first {:?})",
            leaked.len(),
            &leaked[..leaked.len().min(4)]
        ));
    }
    Ok(())
}

struct Walk<'a> {
    snap: &'a TreeSnapshot,
    reached: HashSet<PageId>,
    leaf_depth: Option<usize>,
    entries: u64,
}

fn bad(what: String) -> IoError {
    IoError::corruption("<tree walk>", 0, what)
}

impl Walk<'_> {
    fn node(
        &mut self,
        id: PageId,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        depth: usize,
    ) -> IoResult<()> {
        if id == NO_PAGE {
            return Ok(());
        }
        if depth > MAX_DEPTH {
            return Err(bad(format!("page {id}: tree deeper than {MAX_DEPTH}")));
        }
        if !self.reached.insert(id) {
            return Err(bad(format!(
                "page {id} is reached twice (a cycle or shared child)"
            )));
        }
        match self.snap.node(id)? {
            Node::Index(n) => {
                if n.children.len() != n.keys.len() + 1 {
                    return Err(bad(format!(
                        "index page {id}: {} children for {} separators",
                        n.children.len(),
                        n.keys.len()
                    )));
                }
                for i in 0..n.children.len() {
                    let clo = if i == 0 {
                        lo
                    } else {
                        Some(n.keys[i - 1].as_slice())
                    };
                    let chi = if i == n.keys.len() {
                        hi
                    } else {
                        Some(n.keys[i].as_slice())
                    };
                    if let (Some(a), Some(b)) = (clo, chi)
                        && a >= b
                    {
                        return Err(bad(format!(
                            "index page {id}: separators out of order at child {i}"
                        )));
                    }
                    self.node(n.children[i], clo, chi, depth + 1)?;
                }
            }
            Node::Leaf(p) => {
                match self.leaf_depth {
                    None => self.leaf_depth = Some(depth),
                    Some(d) if d != depth => {
                        return Err(bad(format!(
                            "leaf {id} at depth {depth}, other leaves at {d}"
                        )));
                    }
                    Some(_) => {}
                }
                let view = LeafView::new(&p).map_err(|e| bad(format!("leaf {id}: {}", e.0)))?;
                let entries = view
                    .entries()
                    .map_err(|e| bad(format!("leaf {id}: {}", e.0)))?;
                let mut prev: Option<&[u8]> = None;
                for e in &entries {
                    let k = e.key.as_slice();
                    if prev.is_some_and(|p| p >= k) {
                        return Err(bad(format!("leaf {id}: keys out of order")));
                    }
                    if lo.is_some_and(|l| k < l) || hi.is_some_and(|h| k >= h) {
                        return Err(bad(format!(
                            "leaf {id}: key {} outside its parent's bounds",
                            bough::show_key(k)
                        )));
                    }
                    prev = Some(k);
                    if let ValueLoc::Overflow { first, pages, len } = &e.value {
                        let v = self.snap.read_overflow(*first, *pages, *len)?;
                        if v.len() as u64 != *len {
                            return Err(bad(format!("leaf {id}: overflow value of wrong length")));
                        }
                        for i in 0..*pages {
                            if !self.reached.insert(first + i) {
                                return Err(bad(format!(
                                    "overflow page {} is reached twice",
                                    first + i
                                )));
                            }
                        }
                    }
                    // A tombstone is a remembered delete, not an entry anyone can read.
                    if !e.is_tombstone() {
                        self.entries += 1;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The entries of a state, values included (overflow values read); tombstones are absent.
pub fn read_entries(snap: &TreeSnapshot, root: PageId) -> IoResult<State> {
    let mut out = BTreeMap::new();
    let mut c = bough_tree::btree::Cursor::seek(snap, root, None)?;
    while let Some(e) = c.next_entry(snap)? {
        let v = match e.value {
            ValueLoc::Inline(v) => v,
            ValueLoc::Overflow { first, pages, len } => snap.read_overflow(first, pages, len)?,
            ValueLoc::Tombstone => continue,
        };
        out.insert(e.key, Arc::from(v));
    }
    Ok(Arc::new(out))
}

/// The keys and values an archive recorded.
pub fn read_archive(
    storage: Arc<dyn Storage>,
    dir: &PartitionDir,
    archive: &ArchiveName,
    page_size: u32,
) -> IoResult<State> {
    let files = file_table(&storage, dir, page_size);
    let path = files.path_of(&archive.to_string());
    let r = replay_file(&storage, &path)?;
    if r.records != 1 {
        return Err(IoError::corruption(
            path,
            0,
            "an archive holds exactly one snapshot record",
        ));
    }
    let s = r.state.to_snapshot();
    let snap = TreeSnapshot::from_record(files, &s)?;
    read_entries(&snap, s.meta.root)
}

/// Where the last intact record of a manifest file starts (records are padded to 4 KiB
/// blocks; the payload length sits at bytes 20..24 of each record header).
pub fn last_record_offset(bytes: &[u8]) -> Option<u64> {
    let r = replay(bytes).ok()?;
    let mut last = None;
    let mut off = 0u64;
    while off < r.end_offset {
        last = Some(off);
        let at = usize::try_from(off).ok()?;
        let hdr = bytes.get(at + 20..at + 24)?;
        let payload = u64::from(u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]));
        off += (24 + payload).div_ceil(4096) * 4096;
    }
    last
}

/// The merge bases the live manifest of `branch` records that a merge can still use: other
/// branch → common state.
///
/// A base naming a deleted branch, or recorded with an earlier branch of the same name (its
/// state's term is below that name's `first_term`), is dead: no merge uses it, and the store
/// drops it when that branch is deleted — or, when that failed or a crash cut it short, at
/// the next open of the head holding it. Until then it is invisible to every operation, so
/// it is not part of what a family shows. (The facade's tests check that it does go.)
pub fn read_merge_bases(
    storage: Arc<dyn Storage>,
    dir: &PartitionDir,
    branch: &str,
    page_size: u32,
) -> IoResult<BTreeMap<String, State>> {
    let files = file_table(&storage, dir, page_size);
    let ct_path = files.path_of(&format!("CURRENT_TERM.{branch}"));
    let ct = CurrentTerm::decode(&storage.read_file(&ct_path, 4096)?)
        .map_err(|e| IoError::corruption(&ct_path, e.offset, e.to_string()))?;
    let bname = bough_names::BranchName::new(branch).map_err(|e| IoError::InvalidArgument {
        what: e.to_string(),
    })?;
    let path = files.path_of(&ManifestName::new(bname, ct.term).to_string());
    let r = replay_file(&storage, &path)?;
    let bases = merge_bases(&r.state.extensions)
        .map_err(|e| IoError::corruption(&path, 0, format!("merge bases: {e:?}")))?;
    let mut out = BTreeMap::new();
    for b in bases {
        let other = files.path_of(&format!("CURRENT_TERM.{}", b.branch));
        let current = match storage.read_file(&other, 4096) {
            Ok(bytes) => CurrentTerm::decode(&bytes)
                .map_err(|e| IoError::corruption(&other, e.offset, e.to_string()))?,
            Err(e) if e.kind() == bough_io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if current.deleted || b.state.meta.term < current.first_term {
            continue;
        }
        let snap = TreeSnapshot::from_record(files.clone(), &b.state)?;
        out.insert(
            b.branch.to_string(),
            read_entries(&snap, b.state.meta.root)?,
        );
    }
    Ok(out)
}
