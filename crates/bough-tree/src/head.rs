//! One branch head of one partition: its manifest, its data files and its tree, and the
//! commit pipeline that moves it forward.
//!
//! Commit order (ARCHITECTURE.md, invariant 3): stage every new page in memory → write the
//! pages and `fdatasync` each data file written (and the directory when a file was created)
//! → append one manifest log record and `fdatasync` the manifest → publish the new snapshot.
//! A failed sync poisons the head: the storage refuses further durable work, and so does
//! the head, until it is reopened.

use std::collections::HashMap;
use std::sync::Arc;

use bough_io::layout::{FRAME_HEADER_LEN, max_payload, page_offset, seal_page};
use bough_io::{ErrorKind, IoError, IoResult, OpenOptions, StorageFile};
use bough_manifest::{
    BranchFileMapping, LogRecord, ManifestMetadata, NO_PAGE, PageAddr, PageId, Snapshot,
    dropped_tail_finding, encode_log, encode_snapshot, replay,
};
use bough_names::{BranchName, DataFileName, FileId, ManifestName, Term};
use parking_lot::RwLock;

use crate::btree::{self, Applied, Mutation, Node, Op, TreeRead, TreeWrite};
use crate::cache::CachedPage;
use crate::files::FileTable;
use crate::mapping::{MappingTable, MappingView, NodeSource, PageSink, Slot, walk_radix};
use crate::page::index::IndexNode;
use crate::page::kind;
use crate::page::mapping::{MappingNode, fanout};

mod read_only;
mod resume;
mod tail;

pub use resume::FOLD_LOG_BYTES;

/// Largest manifest file read back into memory (a guard against hostile lengths).
pub const MAX_MANIFEST_BYTES: u64 = 1 << 32;

/// Tuning of a branch head.
#[derive(Debug, Clone)]
pub struct HeadConfig {
    /// Page size of the partition (persisted in every manifest and data file).
    pub page_size: u32,
    /// Pages per data file, header page included.
    pub file_pages: u32,
    /// Most bytes preallocated ahead of the write position of a data file. A new file starts
    /// with a small reservation that doubles as it fills, so a thousand branches that each
    /// wrote a little do not each hold a whole file's worth of disk (design notes §4d).
    pub preallocate: u64,
    /// Checkpoint the mapping table when this many mapping chunks are dirty.
    pub checkpoint_chunks: usize,
    /// Rewrite the manifest as a fresh snapshot once it is larger than this.
    pub manifest_rewrite_bytes: u64,
    /// Start a new data file for every transaction, so each file is written (and synced)
    /// exactly once: the object-store backend uploads it as one immutable object.
    pub file_per_commit: bool,
}

impl Default for HeadConfig {
    fn default() -> Self {
        HeadConfig {
            page_size: 4096,
            file_pages: 2048,
            preallocate: 8 << 20,
            checkpoint_chunks: 128,
            manifest_rewrite_bytes: 16 << 20,
            file_per_commit: false,
        }
    }
}

/// An immutable view of a branch at one commit. Readers hold it as long as they like.
#[derive(Debug, Clone)]
pub struct TreeSnapshot {
    /// Root of the key tree.
    pub root: PageId,
    /// Root of the TTL index.
    pub ttl_root: PageId,
    /// The mapping table as of this commit.
    pub mapping: MappingView,
    /// Who wrote which file id.
    pub ranges: Arc<BranchFileMapping>,
    /// The partition's files.
    pub files: Arc<FileTable>,
    /// The branch's commit version: grows by one per commit (and per checkpoint or
    /// adoption) and never goes back — it is kept in the manifest apart from the log
    /// sequence, so it survives manifest rewrites and new terms (`bough_manifest::VERSION`).
    pub version: u64,
}

/// Page lookups shared by snapshots and transactions.
struct Fetch<'a> {
    files: &'a FileTable,
    ranges: &'a BranchFileMapping,
    staged: Option<&'a HashMap<PageAddr, CachedPage>>,
}

impl Fetch<'_> {
    fn page(&self, addr: PageAddr) -> IoResult<CachedPage> {
        if let Some(p) = self.staged.and_then(|s| s.get(&addr)) {
            return Ok(p.clone());
        }
        self.files.read(self.ranges, addr)
    }

    fn overflow(
        &self,
        mapping: &MappingView,
        first: PageId,
        pages: u32,
        len: u64,
    ) -> IoResult<Vec<u8>> {
        let cap = max_payload(self.files.page_size()) as u64;
        if len.div_ceil(cap.max(1)) != u64::from(pages) {
            return Err(IoError::corruption(
                self.files.dir(),
                u64::from(first),
                format!("overflow value of {len} bytes cannot span {pages} pages"),
            ));
        }
        let mut out = Vec::with_capacity(len.min(1 << 30) as usize);
        let mut id = first;
        let end = first.checked_add(pages).ok_or_else(|| {
            IoError::corruption(self.files.dir(), u64::from(first), "overflow range wraps")
        })?;
        while id < end {
            let addr = mapping.addr(id, self)?;
            if let Some(CachedPage::Tree(Node::Leaf(p))) = self.staged.and_then(|s| s.get(&addr)) {
                out.extend_from_slice(p);
                id += 1;
                continue;
            }
            // Consecutive ids written together sit in consecutive pages: read them as one run.
            let mut run = 1u32;
            while id + run < end {
                let next = mapping.addr(id + run, self)?;
                if next.file_id() != addr.file_id() || next.page_index() != addr.page_index() + run
                {
                    break;
                }
                run += 1;
            }
            let h = self.files.handle(self.ranges, addr.file_id())?;
            for payload in self.files.read_run(&h, addr.page_index(), run)? {
                out.extend_from_slice(&payload);
            }
            id += run;
        }
        if out.len() as u64 != len {
            return Err(IoError::corruption(
                self.files.dir(),
                u64::from(first),
                format!("overflow value has {} bytes, expected {len}", out.len()),
            ));
        }
        Ok(out)
    }
}

impl NodeSource for Fetch<'_> {
    fn mapping_node(&self, addr: PageAddr) -> IoResult<Arc<MappingNode>> {
        match self.page(addr)? {
            CachedPage::Mapping(m) => Ok(m),
            CachedPage::Tree(_) => {
                let (file, offset) = self.locate(addr);
                Err(IoError::corruption(
                    file,
                    offset,
                    format!("page {addr} is a tree page where a mapping page was expected"),
                ))
            }
        }
    }

    fn locate(&self, addr: PageAddr) -> (String, u64) {
        self.files.locate(self.ranges, addr)
    }
}

fn tree_node(page: CachedPage, files: &FileTable, addr: PageAddr) -> IoResult<Node> {
    match page {
        CachedPage::Tree(n) => Ok(n),
        CachedPage::Mapping(_) => Err(IoError::corruption(
            files.dir(),
            addr.to_u64(),
            format!("page {addr} is a mapping page where a tree page was expected"),
        )),
    }
}

impl TreeSnapshot {
    fn fetch(&self) -> Fetch<'_> {
        Fetch {
            files: &self.files,
            ranges: &self.ranges,
            staged: None,
        }
    }

    /// Reads an overflow value.
    pub fn read_overflow(&self, first: PageId, pages: u32, len: u64) -> IoResult<Vec<u8>> {
        self.fetch().overflow(&self.mapping, first, pages, len)
    }

    /// Every physical page this snapshot references (tree, overflow and mapping pages), as
    /// (file id, page index) — what GC and compaction need.
    pub fn for_each_page(&self, f: &mut dyn FnMut(PageAddr)) -> IoResult<()> {
        let fetch = self.fetch();
        self.mapping.for_each_node_addr(&fetch, f)?;
        let mut bad = None;
        self.mapping
            .for_each_slot(&fetch, &mut |id, raw| match Slot::decode(raw) {
                Some(Slot::Page(a)) => f(a),
                Some(_) => {}
                None => bad = Some((id, raw)),
            })?;
        if let Some((id, raw)) = bad {
            return Err(IoError::corruption(
                self.files.dir(),
                u64::from(id),
                format!("mapping slot of page {id} holds an invalid value {raw:#x}"),
            ));
        }
        Ok(())
    }
}

impl TreeSnapshot {
    /// A read-only view of a snapshot record (an archive, a merge base, a fork point).
    pub fn from_record(files: Arc<FileTable>, s: &Snapshot) -> IoResult<TreeSnapshot> {
        let cap = max_payload(files.page_size());
        let mut mapping =
            MappingTable::new(fanout(cap), s.mapping_root, s.next_page_id, s.free_head);
        {
            let fetch = Fetch {
                files: &files,
                ranges: &s.meta.branch_file_ranges,
                staged: None,
            };
            for &(id, raw) in &s.overlay {
                mapping.replay_change(id, raw, &fetch)?;
            }
        }
        Ok(TreeSnapshot {
            root: s.meta.root,
            ttl_root: s.meta.ttl_root,
            mapping: mapping.view(),
            ranges: Arc::new(s.meta.branch_file_ranges.clone()),
            files,
            // A malformed payload was refused when the record was decoded.
            version: bough_manifest::commit_version(&s.extensions)
                .ok()
                .flatten()
                .unwrap_or(0),
        })
    }
}

impl NodeSource for TreeSnapshot {
    fn mapping_node(&self, addr: PageAddr) -> IoResult<Arc<MappingNode>> {
        self.fetch().mapping_node(addr)
    }

    fn locate(&self, addr: PageAddr) -> (String, u64) {
        self.files.locate(&self.ranges, addr)
    }
}

impl TreeRead for TreeSnapshot {
    fn node(&self, id: PageId) -> IoResult<Node> {
        let fetch = self.fetch();
        let addr = self.mapping.addr(id, &fetch)?;
        tree_node(fetch.page(addr)?, &self.files, addr)
    }

    fn overflow(&self, first: PageId, pages: u32, len: u64) -> IoResult<Vec<u8>> {
        self.read_overflow(first, pages, len)
    }

    fn locate_page(&self, id: PageId) -> (String, u64) {
        let fetch = self.fetch();
        match self.mapping.addr(id, &fetch) {
            Ok(addr) => fetch.locate(addr),
            Err(_) => (self.files.dir().to_string(), u64::from(id)),
        }
    }
}

/// The current snapshot of a head, readable without the writer, and a record of the older
/// snapshots readers still hold (GC must keep what they reference).
#[derive(Debug)]
pub struct Published {
    current: RwLock<Arc<TreeSnapshot>>,
    handed_out: parking_lot::Mutex<Vec<std::sync::Weak<TreeSnapshot>>>,
}

impl Published {
    fn new(s: Arc<TreeSnapshot>) -> Self {
        Published {
            handed_out: parking_lot::Mutex::new(vec![Arc::downgrade(&s)]),
            current: RwLock::new(s),
        }
    }

    /// The latest committed snapshot.
    pub fn load(&self) -> Arc<TreeSnapshot> {
        self.current.read().clone()
    }

    fn store(&self, s: Arc<TreeSnapshot>) {
        {
            let mut h = self.handed_out.lock();
            if h.len() >= 64 {
                h.retain(|w| w.strong_count() > 0);
            }
            h.push(Arc::downgrade(&s));
        }
        *self.current.write() = s;
    }

    /// The snapshots readers hold (the current one only if a reader holds it too). What a
    /// deleted branch's readers still need: its manifest no longer protects anything.
    pub fn held_by_readers(&self) -> Vec<Arc<TreeSnapshot>> {
        let current = self.load();
        self.handed_out
            .lock()
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .filter(|s| {
                // Our upgrade holds one reference; the current one is also held by this slot
                // and by `current` above.
                let ours = if Arc::ptr_eq(s, &current) { 3 } else { 1 };
                Arc::strong_count(s) > ours
            })
            .collect()
    }

    /// Every snapshot of this head still held by someone (the current one included).
    pub fn live(&self) -> Vec<Arc<TreeSnapshot>> {
        let current = self.load();
        let mut out: Vec<Arc<TreeSnapshot>> = self
            .handed_out
            .lock()
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .collect();
        if !out.iter().any(|s| Arc::ptr_eq(s, &current)) {
            out.push(current);
        }
        out
    }
}

/// The data file a head appends to.
#[derive(Debug, Clone, Copy)]
struct Active {
    file_id: FileId,
    next_index: u32,
}

/// What a transaction may change; cloned at its start (cheaply) so a failed commit leaves
/// the head exactly as it was.
#[derive(Debug, Clone)]
struct HeadState {
    root: PageId,
    ttl_root: PageId,
    mapping: MappingTable,
    ranges: BranchFileMapping,
    max_file_id: FileId,
    active: Option<Active>,
    /// The last file of this (branch, term), to be continued by the first commit that
    /// needs a page (see [`Head::resume_last_file`]): taken into `active` then.
    resume: Option<Active>,
}

/// A page staged for writing.
#[derive(Debug)]
struct StagedPage {
    addr: PageAddr,
    kind: u8,
    payload: Vec<u8>,
}

struct Txn<'a> {
    files: &'a FileTable,
    cfg: &'a HeadConfig,
    branch: &'a BranchName,
    term: Term,
    incarnation: u64,
    st: HeadState,
    pages: Vec<StagedPage>,
    staged: HashMap<PageAddr, CachedPage>,
    new_files: Vec<FileId>,
    /// Whether leaves being written belong to the TTL index.
    ttl_tree: bool,
}

impl Txn<'_> {
    fn fetch(&self) -> Fetch<'_> {
        Fetch {
            files: self.files,
            ranges: &self.st.ranges,
            staged: Some(&self.staged),
        }
    }

    fn next_addr(&mut self) -> IoResult<PageAddr> {
        let need_new = self
            .st
            .active
            .is_none_or(|a| a.next_index >= self.cfg.file_pages)
            || (self.cfg.file_per_commit && self.new_files.is_empty());
        if need_new && !self.cfg.file_per_commit && self.st.resume.is_some() {
            self.st.active = self.st.resume.take();
        } else if need_new {
            let id = self.st.max_file_id + 1;
            self.st
                .ranges
                .extend_own(self.branch, self.term, self.incarnation, id)
                .map_err(|e| IoError::InvalidArgument {
                    what: format!("cannot allocate file id {id}: {e}"),
                })?;
            self.st.max_file_id = id;
            self.st.active = Some(Active {
                file_id: id,
                next_index: 1,
            });
            self.new_files.push(id);
        }
        let a = self
            .st
            .active
            .as_mut()
            .ok_or_else(|| IoError::InvalidArgument {
                what: "no active data file".into(),
            })?;
        let addr =
            PageAddr::new(a.file_id, a.next_index).ok_or_else(|| IoError::InvalidArgument {
                what: format!(
                    "page address out of range: file {} page {}",
                    a.file_id, a.next_index
                ),
            })?;
        a.next_index += 1;
        Ok(addr)
    }

    fn stage_page(
        &mut self,
        page_kind: u8,
        payload: Vec<u8>,
        cached: CachedPage,
    ) -> IoResult<PageAddr> {
        let addr = self.next_addr()?;
        self.staged.insert(addr, cached);
        self.pages.push(StagedPage {
            addr,
            kind: page_kind,
            payload,
        });
        Ok(addr)
    }

    fn map(&mut self, id: PageId, addr: PageAddr) -> IoResult<()> {
        let src = Fetch {
            files: self.files,
            ranges: &self.st.ranges,
            staged: Some(&self.staged),
        };
        self.st.mapping.map(id, addr, &src)
    }

    fn alloc(&mut self) -> IoResult<PageId> {
        let src = Fetch {
            files: self.files,
            ranges: &self.st.ranges,
            staged: Some(&self.staged),
        };
        self.st.mapping.alloc(&src)
    }
}

impl PageSink for Txn<'_> {
    fn stage(&mut self, page_kind: u8, payload: Vec<u8>) -> IoResult<PageAddr> {
        let cap = max_payload(self.files.page_size());
        let cached = match page_kind {
            kind::MAPPING => CachedPage::Mapping(Arc::new(
                MappingNode::decode(&payload, fanout(cap))
                    .map_err(|e| IoError::InvalidArgument { what: e.0.into() })?,
            )),
            _ => CachedPage::Tree(Node::Leaf(payload.clone().into())),
        };
        self.stage_page(page_kind, payload, cached)
    }
}

impl TreeRead for Txn<'_> {
    fn node(&self, id: PageId) -> IoResult<Node> {
        let fetch = self.fetch();
        let addr = self.st.mapping.current().addr(id, &fetch)?;
        tree_node(fetch.page(addr)?, self.files, addr)
    }

    fn overflow(&self, first: PageId, pages: u32, len: u64) -> IoResult<Vec<u8>> {
        self.fetch()
            .overflow(self.st.mapping.current(), first, pages, len)
    }

    fn locate_page(&self, id: PageId) -> (String, u64) {
        let fetch = self.fetch();
        match self.st.mapping.current().addr(id, &fetch) {
            Ok(addr) => fetch.locate(addr),
            Err(_) => (self.files.dir().to_string(), u64::from(id)),
        }
    }
}

impl TreeWrite for Txn<'_> {
    fn payload_capacity(&self) -> usize {
        max_payload(self.files.page_size())
    }

    fn put_leaf(&mut self, id: Option<PageId>, payload: Vec<u8>) -> IoResult<PageId> {
        let id = match id {
            Some(id) => id,
            None => self.alloc()?,
        };
        let cached = CachedPage::Tree(Node::Leaf(payload.clone().into()));
        let leaf_kind = if self.ttl_tree {
            kind::TTL_LEAF
        } else {
            kind::LEAF
        };
        let addr = self.stage_page(leaf_kind, payload, cached)?;
        self.map(id, addr)?;
        Ok(id)
    }

    fn put_index(&mut self, id: Option<PageId>, node: IndexNode) -> IoResult<PageId> {
        let id = match id {
            Some(id) => id,
            None => self.alloc()?,
        };
        let payload = node.encode();
        let addr = self.stage_page(
            kind::INDEX,
            payload,
            CachedPage::Tree(Node::Index(Arc::new(node))),
        )?;
        self.map(id, addr)?;
        Ok(id)
    }

    fn free(&mut self, id: PageId) -> IoResult<()> {
        let src = Fetch {
            files: self.files,
            ranges: &self.st.ranges,
            staged: Some(&self.staged),
        };
        self.st.mapping.free(id, &src)
    }

    fn put_overflow(&mut self, value: &[u8]) -> IoResult<(PageId, u32)> {
        let cap = self.payload_capacity();
        let pages = u32::try_from(value.len().div_ceil(cap).max(1)).map_err(|_| {
            IoError::InvalidArgument {
                what: "value too large".into(),
            }
        })?;
        let first = self.st.mapping.alloc_run(pages)?;
        for (i, chunk) in value.chunks(cap).enumerate() {
            let cached = CachedPage::Tree(Node::Leaf(chunk.to_vec().into()));
            let addr = self.stage_page(kind::OVERFLOW, chunk.to_vec(), cached)?;
            self.map(first + i as u32, addr)?;
        }
        Ok((first, pages))
    }

    fn free_overflow(&mut self, first: PageId, pages: u32) -> IoResult<()> {
        for i in 0..pages {
            self.free(first + i)?;
        }
        Ok(())
    }
}

/// The addresses of the leaves (key tree and TTL index) among staged pages, when data
/// pages are cached at all.
fn leaf_addrs(pages: &[StagedPage], cache_data_pages: bool) -> std::collections::HashSet<PageAddr> {
    pages
        .iter()
        .filter(|p| cache_data_pages && matches!(p.kind, kind::LEAF | kind::TTL_LEAF))
        .map(|p| p.addr)
        .collect()
}

/// Key of a TTL-index entry: expiry (big-endian, so entries sort by time) then the key.
pub fn ttl_key(expire_at: u64, key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + key.len());
    k.extend_from_slice(&expire_at.to_be_bytes());
    k.extend_from_slice(key);
    k
}

/// A branch head: the single writer of one (partition, branch, term).
#[derive(Debug)]
pub struct Head {
    cfg: HeadConfig,
    files: Arc<FileTable>,
    branch: BranchName,
    term: Term,
    /// The branch's incarnation (`INCARNATION` extension; 0 if the manifest has none): in
    /// the ranges and headers of the files it creates, and so in their page checksums.
    incarnation: u64,
    manifest_path: String,
    manifest: Arc<dyn StorageFile>,
    manifest_end: u64,
    /// Sequence number of the manifest's last log record (0 right after a snapshot).
    seq: u64,
    /// The commit version of the manifest's snapshot record: the branch's version is
    /// `version_base + seq` (see [`Head::version`]).
    version_base: u64,
    dict: Vec<u8>,
    extensions: bough_manifest::ext::Extensions,
    state: HeadState,
    published: Arc<Published>,
    poisoned: Option<String>,
    /// The branch's current term as the catalog knows it; a head whose term is older is
    /// fenced and refuses to commit.
    fence: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// Extension values to write with the next commit.
    pending_ext: bough_manifest::ext::Extensions,
    /// (file id, end of the reserved space) of the file being appended to.
    reserved: (FileId, u64),
    /// Where this head's reservation of that file began: 0 for a file it created, the
    /// file's length for one it continues (see [`Head::resume_last_file`]).
    reserve_base: u64,
    /// After the last rewrite that dropped unreferenced branch file ranges: how many ranges
    /// were left, at which version.
    ranges_pruned: Option<(usize, u64)>,
    /// A tail replay dropped (its offset and bytes), still in the manifest: it is kept aside
    /// in a file of its own before the first write replaces it, so opening never destroys
    /// it (see [`Head::keep_tail_aside`]).
    dropped_tail: Option<(u64, Vec<u8>)>,
    /// A log record was appended since the head opened or last sealed its manifest: a clean
    /// close seals it then, and only then (see [`Head::close_clean`]).
    appended: bool,
}

/// A rewrite looks for branch file ranges no page references (a walk over every page)
/// only when the ranges grew since the last look, or this many commits after it: in cloud
/// mode the manifest is rewritten every few commits, and the walk costs O(pages).
const PRUNE_RANGES_EVERY: u64 = 1024;

/// First reservation of a new data file.
const FIRST_RESERVATION: u64 = 256 << 10;

/// The file-id high-water a head at `term` continues from: `durable` (the manifest's), or
/// the highest id of a file of `(branch, term)` already in the directory if that is higher —
/// orphans of commits that crashed before their manifest record. One existence check when
/// there are none; a listing when there are.
fn skip_orphans(
    files: &FileTable,
    branch: &BranchName,
    term: Term,
    durable: FileId,
) -> IoResult<FileId> {
    let next = DataFileName::new(durable.saturating_add(1), branch.clone(), term);
    match files.storage().file_len(&files.path_of(&next.to_string())) {
        Err(e) if e.kind() == bough_io::ErrorKind::NotFound => return Ok(durable),
        Err(e) => return Err(e),
        Ok(_) => {}
    }
    let mut max = durable;
    for name in files.storage().list(files.dir())? {
        if let bough_names::FileKind::Data(d) = bough_names::classify(&name)
            && d.branch == *branch
            && d.term == term
        {
            max = max.max(d.file_id);
        }
    }
    tracing::warn!(
        branch = %branch,
        term,
        durable,
        skipped_to = max,
        "data files above the manifest's high-water mark (a crashed commit's): new files start above them"
    );
    Ok(max)
}

/// Everything a new branch needs from its parent to start at the parent's current commit.
#[derive(Debug, Clone)]
pub struct ForkPoint {
    /// The parent's durable snapshot, checkpointed (no overlay).
    pub snapshot: Snapshot,
}

impl Head {
    /// Creates the first manifest of `branch` at `term` in an empty state, or at `fork` (a
    /// parent's checkpointed snapshot). Fails with `AlreadyExists` if the manifest exists.
    pub fn create(
        files: Arc<FileTable>,
        cfg: HeadConfig,
        branch: BranchName,
        term: Term,
        fork: Option<&ForkPoint>,
        extensions: bough_manifest::ext::Extensions,
    ) -> IoResult<Head> {
        let mut snap = match fork {
            Some(f) => f.snapshot.clone(),
            None => Snapshot::empty(branch.clone(), term, cfg.page_size),
        };
        snap.meta.branch = branch.clone();
        snap.meta.term = term;
        snap.extensions = extensions;
        let path = files.path_of(&ManifestName::new(branch.clone(), term).to_string());
        let bytes = encode_snapshot(&snap).map_err(|e| IoError::InvalidArgument {
            what: format!("cannot encode the snapshot of {path}: {e}"),
        })?;
        files.storage().create_new(&path, &bytes)?;
        // Nothing names the new manifest yet: if it cannot be opened, remove it again —
        // durably, or recovery would finish the failed operation after a power loss — so a
        // retry can create it (best effort; a failed sync poisons the storage anyway).
        Head::open(files.clone(), cfg, branch, term).inspect_err(|_| {
            let _ = files
                .storage()
                .delete(&path)
                .and_then(|()| files.storage().sync_dir(files.dir()));
        })
    }

    /// Opens an existing manifest and replays it.
    pub fn open(
        files: Arc<FileTable>,
        cfg: HeadConfig,
        branch: BranchName,
        term: Term,
    ) -> IoResult<Head> {
        let path = files.path_of(&ManifestName::new(branch.clone(), term).to_string());
        let bytes = files.storage().read_file(&path, MAX_MANIFEST_BYTES)?;
        let replayed = replay(&bytes)
            .map_err(|e| IoError::corruption(path.clone(), e.offset, e.to_string()))?;
        if let Some(off) = replayed.dropped_tail {
            tracing::warn!(
                manifest = %path,
                offset = off,
                "{}",
                dropped_tail_finding(off)
            );
        }
        // Opening writes nothing: the dropped tail stays in the file until the first append
        // or rewrite, which first keeps it aside.
        let dropped_tail = replayed
            .dropped_tail
            .and_then(|off| Some((off, bytes.get(usize::try_from(off).ok()?..)?.to_vec())));
        let st = replayed.state;
        let version_base = bough_manifest::commit_version(&st.extensions)
            .map_err(|e| IoError::corruption(path.clone(), 0, format!("version extension: {e}")))?
            .unwrap_or(0);
        let incarnation = bough_manifest::incarnation(&st.extensions)
            .map_err(|e| {
                IoError::corruption(path.clone(), 0, format!("incarnation extension: {e}"))
            })?
            .unwrap_or(0);
        if st.meta.branch != branch || st.meta.term != term {
            return Err(IoError::corruption(
                path,
                0,
                format!(
                    "manifest names branch {} term {}, expected {branch} term {term}",
                    st.meta.branch, st.meta.term
                ),
            ));
        }
        if st.page_size != cfg.page_size {
            return Err(IoError::corruption(
                path,
                0,
                format!(
                    "manifest page size {} differs from the configured {}",
                    st.page_size, cfg.page_size
                ),
            ));
        }
        let cap = max_payload(cfg.page_size);
        let mut mapping =
            MappingTable::new(fanout(cap), st.mapping_root, st.next_page_id, st.free_head);
        {
            let fetch = Fetch {
                files: &files,
                ranges: &st.meta.branch_file_ranges,
                staged: None,
            };
            for (&id, &raw) in &st.overlay {
                mapping.replay_change(id, raw, &fetch)?;
            }
        }
        // The manifest exists (it was just read): open it for appending, never create it.
        let manifest = files.storage().open(
            &path,
            OpenOptions {
                write: true,
                ..OpenOptions::default()
            },
        )?;
        // A crash can leave data files of this term above the durable high-water mark
        // (a commit that wrote them never reached the manifest). They are never overwritten:
        // new files start above them.
        let max_file_id = skip_orphans(&files, &branch, term, st.max_file_id)?;
        let state = HeadState {
            root: st.meta.root,
            ttl_root: st.meta.ttl_root,
            mapping,
            ranges: st.meta.branch_file_ranges.clone(),
            max_file_id,
            // No file is continued here: the writing open may continue the last one, past
            // every byte it holds (`resume_last_file`).
            active: None,
            resume: None,
        };
        let snapshot = Arc::new(TreeSnapshot {
            root: state.root,
            ttl_root: state.ttl_root,
            mapping: state.mapping.view(),
            ranges: Arc::new(state.ranges.clone()),
            files: files.clone(),
            version: version_base.saturating_add(st.last_seq),
        });
        Ok(Head {
            cfg,
            files,
            branch,
            term,
            incarnation,
            manifest_path: path,
            manifest,
            manifest_end: replayed.end_offset,
            seq: st.last_seq,
            version_base,
            dict: st.dict,
            extensions: st.extensions,
            state,
            published: Arc::new(Published::new(snapshot)),
            poisoned: None,
            fence: None,
            pending_ext: Vec::new(),
            reserved: (0, 0),
            reserve_base: 0,
            ranges_pruned: None,
            dropped_tail,
            appended: false,
        })
    }

    /// The branch this head writes.
    pub fn branch(&self) -> &BranchName {
        &self.branch
    }

    /// The term this head writes at.
    pub fn term(&self) -> Term {
        self.term
    }

    /// The branch's incarnation (0: none recorded).
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The partition's files.
    pub fn files(&self) -> &Arc<FileTable> {
        &self.files
    }

    /// The latest committed snapshot.
    pub fn snapshot(&self) -> Arc<TreeSnapshot> {
        self.published.load()
    }

    /// A handle readers keep to load snapshots without the writer.
    pub fn published(&self) -> Arc<Published> {
        self.published.clone()
    }

    /// The file-id high-water mark.
    pub fn max_file_id(&self) -> FileId {
        self.state.max_file_id
    }

    /// The manifest's extensions (branch metadata kept by upper layers).
    pub fn extensions(&self) -> &bough_manifest::ext::Extensions {
        &self.extensions
    }

    /// Whether an earlier failure poisoned this head.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// Makes this head refuse to commit once `fence` holds a newer term than its own.
    pub fn set_fence(&mut self, fence: Arc<std::sync::atomic::AtomicU64>) {
        self.fence = Some(fence);
    }

    fn writer_id(&self) -> String {
        format!("{}@{}", self.branch, self.term)
    }

    /// Sets an extension value; it is written with the next commit (atomically with it). If
    /// that commit fails, the value is dropped with it.
    pub fn stage_extension(&mut self, tag: u64, value: Vec<u8>) {
        bough_manifest::ext::set(&mut self.pending_ext, tag, value);
    }

    /// Makes `src` (a checkpointed snapshot of another branch of this partition) this
    /// branch's state, by reference: one log record, no data copied. File ids continue above
    /// everything either side allocated, so ranges stay disjoint (design notes §4, §7).
    pub fn adopt(&mut self, src: &Snapshot, now_ms: u64) -> IoResult<()> {
        // Staged extensions belong to this commit: if it fails, they go with it.
        let staged_ext = std::mem::take(&mut self.pending_ext);
        self.check_poisoned()?;
        if !src.overlay.is_empty() {
            return Err(IoError::InvalidArgument {
                what: "an adopted snapshot must be checkpointed (no overlay)".into(),
            });
        }
        let cap = max_payload(self.cfg.page_size);
        let next_page_id = src.next_page_id.max(self.state.mapping.next_page_id());
        let st = HeadState {
            root: src.meta.root,
            ttl_root: src.meta.ttl_root,
            mapping: MappingTable::new(fanout(cap), src.mapping_root, next_page_id, src.free_head),
            ranges: src.meta.branch_file_ranges.clone(),
            max_file_id: src.max_file_id.max(self.state.max_file_id),
            active: None,
            resume: None,
        };
        let log = LogRecord {
            seq: self.seq + 1,
            root: st.root,
            ttl_root: st.ttl_root,
            max_file_id: st.max_file_id,
            branch_file_ranges: st.ranges.clone(),
            checkpoint: Some(src.mapping_root),
            next_page_id,
            free_head: src.free_head,
            changes: Vec::new(),
            extensions: staged_ext.clone(),
        };
        let bytes = encode_log(&log).map_err(|e| IoError::InvalidArgument {
            what: format!(
                "cannot encode an adoption record of {}: {e}",
                self.manifest_path
            ),
        })?;
        let _ = now_ms;
        self.append_manifest(&bytes)?;
        self.seq += 1;
        self.state = st;
        for (tag, v) in staged_ext {
            bough_manifest::ext::set(&mut self.extensions, tag, v);
        }
        self.files.set_writing(&self.writer_id(), None);
        self.publish();
        Ok(())
    }

    /// Stops writing: the head's open file is no longer protected as "being written" (its
    /// branch was deleted or handed to a new term).
    pub fn retire(&mut self) {
        self.release_reservation();
        self.files.set_writing(&self.writer_id(), None);
        self.state.active = None;
        self.state.resume = None;
        self.poisoned = Some("the branch was deleted".into());
    }

    /// Hands this head the snapshot slot readers of the branch already hold (used when a
    /// new head replaces an old one of the same branch, e.g. at a new term).
    pub fn share_published(&mut self, p: Arc<Published>) {
        p.store(self.published.load());
        self.published = p;
    }

    /// The branch's commit version: one more with every record the head appends, carried
    /// across manifest rewrites, new terms and forks (see `bough_manifest::VERSION`).
    pub fn version(&self) -> u64 {
        self.version_base.saturating_add(self.seq)
    }

    /// The manifest file this head appends to.
    pub fn manifest_path(&self) -> &str {
        &self.manifest_path
    }

    fn check_poisoned(&self) -> IoResult<()> {
        if let Some(f) = &self.fence {
            let current = f.load(std::sync::atomic::Ordering::Acquire);
            if current != self.term {
                return Err(IoError::Fenced {
                    what: format!(
                        "{}@{} is at term {current}; this writer holds term {}",
                        self.files.dir(),
                        self.branch,
                        self.term
                    ),
                });
            }
        }
        match &self.poisoned {
            Some(cause) => Err(IoError::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Commits a sorted batch of distinct-key mutations atomically.
    pub fn commit(&mut self, muts: &[Mutation], now_ms: u64) -> IoResult<Applied> {
        btree::check_batch(muts, self.cfg.page_size).map_err(|what| IoError::InvalidArgument {
            what: format!("{}@{}: {what}", self.files.dir(), self.branch),
        })?;
        let applied = self.commit_inner(muts, false, now_ms, |_, _| Ok(()))?;
        if self.manifest_end > self.cfg.manifest_rewrite_bytes {
            self.rewrite_manifest(now_ms)?;
        }
        Ok(applied)
    }

    fn commit_inner(
        &mut self,
        muts: &[Mutation],
        force_checkpoint: bool,
        now_ms: u64,
        extra: impl FnOnce(&mut Txn<'_>, &mut Applied) -> IoResult<()>,
    ) -> IoResult<Applied> {
        // Staged extensions belong to this commit: if it fails, they go with it (the
        // operation that staged them failed too), never riding along with a later commit.
        let staged_ext = std::mem::take(&mut self.pending_ext);
        self.check_poisoned()?;
        let mut txn = Txn {
            files: &self.files,
            cfg: &self.cfg,
            branch: &self.branch,
            term: self.term,
            incarnation: self.incarnation,
            st: self.state.clone(),
            pages: Vec::new(),
            staged: HashMap::new(),
            new_files: Vec::new(),
            ttl_tree: false,
        };
        let mut applied = Applied::default();
        let root = txn.st.root;
        txn.st.root = btree::apply(&mut txn, root, muts, &mut applied)?;
        extra(&mut txn, &mut applied)?;
        // Keep the TTL index exact: drop the expiries of replaced entries, add the new ones.
        if !applied.expiry_removed.is_empty() || !applied.expiry_added.is_empty() {
            let mut ttl: std::collections::BTreeMap<Vec<u8>, Op> =
                std::collections::BTreeMap::new();
            for (k, e) in &applied.expiry_removed {
                ttl.insert(ttl_key(*e, k), Op::ForceDelete);
            }
            for (k, e) in &applied.expiry_added {
                ttl.insert(
                    ttl_key(*e, k),
                    Op::Put {
                        value: Vec::new(),
                        timestamp: 0,
                        expire_at: 0,
                    },
                );
            }
            let ttl_muts: Vec<Mutation> = ttl
                .into_iter()
                .map(|(key, op)| Mutation { key, op })
                .collect();
            let ttl_root = txn.st.ttl_root;
            txn.ttl_tree = true;
            txn.st.ttl_root = btree::apply(&mut txn, ttl_root, &ttl_muts, &mut Applied::default())?;
            txn.ttl_tree = false;
        }
        let checkpoint = if force_checkpoint
            || txn.st.mapping.current().dirty_chunks() >= self.cfg.checkpoint_chunks
        {
            // The checkpoint stages pages through the transaction while reading old nodes;
            // it reads through a copy of what was staged before it started.
            let staged = std::mem::take(&mut txn.staged);
            let ranges = txn.st.ranges.clone();
            let mut mapping = txn.st.mapping.clone();
            let root = {
                let fetch = Fetch {
                    files: &self.files,
                    ranges: &ranges,
                    staged: Some(&staged),
                };
                mapping.checkpoint(&fetch, &mut txn)?
            };
            txn.staged.extend(staged);
            // The checkpoint covers every change so far; the record carries none.
            mapping.take_changes();
            txn.st.mapping = mapping;
            Some(root)
        } else {
            None
        };
        let changes = txn.st.mapping.take_changes();
        let Txn {
            st,
            pages,
            new_files,
            staged,
            ..
        } = txn;
        if let Err(e) = self.write_pages(&st, &pages, &new_files, now_ms) {
            self.skip_file_ids(&new_files);
            return Err(e);
        }
        let log = LogRecord {
            seq: self.seq + 1,
            root: st.root,
            ttl_root: st.ttl_root,
            max_file_id: st.max_file_id,
            branch_file_ranges: st.ranges.clone(),
            checkpoint,
            next_page_id: st.mapping.next_page_id(),
            free_head: st.mapping.free_head(),
            changes,
            extensions: staged_ext.clone(),
        };
        let bytes = encode_log(&log).map_err(|e| IoError::InvalidArgument {
            what: format!("cannot encode a log record of {}: {e}", self.manifest_path),
        })?;
        if let Err(e) = self.append_manifest(&bytes) {
            self.skip_file_ids(&new_files);
            return Err(e);
        }
        self.seq += 1;
        self.state = st;
        for (tag, v) in staged_ext {
            bough_manifest::ext::set(&mut self.extensions, tag, v);
        }
        // Pages of index and mapping nodes just written are likely read next, and so are
        // the leaves (the next commit to the same keys would otherwise read them back from
        // the file). Overflow pages are read in runs past the cache: not kept.
        let leaves = leaf_addrs(&pages, self.files.caches_data_pages());
        for (addr, page) in staged {
            let keep = match page {
                CachedPage::Mapping(_) | CachedPage::Tree(Node::Index(_)) => true,
                CachedPage::Tree(Node::Leaf(_)) => leaves.contains(&addr),
            };
            if keep && let Ok(h) = self.files.handle(&self.state.ranges, addr.file_id()) {
                self.files.cache().insert(
                    crate::cache::PageCache::key(h.cache_id, addr.page_index()),
                    page,
                );
            }
        }
        self.publish();
        Ok(applied)
    }

    fn publish(&self) {
        self.published.store(Arc::new(TreeSnapshot {
            root: self.state.root,
            ttl_root: self.state.ttl_root,
            mapping: self.state.mapping.view(),
            ranges: Arc::new(self.state.ranges.clone()),
            files: self.files.clone(),
            version: self.version(),
        }));
    }

    /// Writes staged pages and makes them durable. A failed write leaves the head as it was
    /// (pages past the durable frontier are simply overwritten by the next commit); a failed
    /// sync poisons it.
    fn write_pages(
        &mut self,
        st: &HeadState,
        pages: &[StagedPage],
        new_files: &[FileId],
        now_ms: u64,
    ) -> IoResult<()> {
        if pages.is_empty() {
            return Ok(());
        }
        let ps = self.cfg.page_size as usize;
        // A new file seals the one appended to so far (once this commit's pages are in it).
        let sealed = (!new_files.is_empty()).then_some(self.reserved);
        for &id in new_files {
            let first = FIRST_RESERVATION.min(self.cfg.preallocate);
            let f =
                self.files
                    .create(id, &self.branch, self.term, self.incarnation, first, now_ms)?;
            self.reserved = (id, first);
            self.reserve_base = 0;
            // Registered before any manifest names it, so GC keeps it from now on.
            self.files
                .set_writing(&self.writer_id(), Some(f.name.to_string()));
        }
        let mut touched: Vec<FileId> = Vec::new();
        let mut i = 0;
        while i < pages.len() {
            // A run of consecutive pages of one file becomes one write.
            let file_id = pages[i].addr.file_id();
            let mut j = i + 1;
            while j < pages.len()
                && pages[j].addr.file_id() == file_id
                && pages[j].addr.page_index() == pages[j - 1].addr.page_index() + 1
            {
                j += 1;
            }
            let h = self.files.handle(&st.ranges, file_id)?;
            let end = page_offset(pages[j - 1].addr.page_index() + 1, self.cfg.page_size);
            if self.reserved.0 == file_id && end > self.reserved.1 && self.cfg.preallocate > 0 {
                // Double the reservation (bounded): appends stay inside reserved space.
                let grow = (self.reserved.1 - self.reserve_base.min(self.reserved.1))
                    .max(FIRST_RESERVATION.min(self.cfg.preallocate))
                    .max(end - self.reserved.1)
                    .min(self.cfg.preallocate.max(end - self.reserved.1));
                h.file.preallocate(self.reserved.1, grow)?;
                self.reserved.1 += grow;
            }
            let mut buf = vec![0u8; ps * (j - i)];
            for (k, p) in pages[i..j].iter().enumerate() {
                let page = &mut buf[k * ps..(k + 1) * ps];
                page[FRAME_HEADER_LEN..FRAME_HEADER_LEN + p.payload.len()]
                    .copy_from_slice(&p.payload);
                seal_page(page, h.salt, p.addr.page_index(), p.kind, p.payload.len())?;
            }
            h.file.write_at(
                page_offset(pages[i].addr.page_index(), self.cfg.page_size),
                &buf,
            )?;
            if !touched.contains(&file_id) {
                touched.push(file_id);
            }
            i = j;
        }
        for file_id in touched {
            let h = self.files.handle(&st.ranges, file_id)?;
            if let Err(e) = h.file.sync() {
                self.poisoned = Some(format!("fdatasync of {} failed: {e}", h.path));
                return Err(e);
            }
        }
        if !new_files.is_empty()
            && let Err(e) = self.files.storage().sync_dir(self.files.dir())
        {
            self.poisoned = Some(format!(
                "directory sync of {} failed: {e}",
                self.files.dir()
            ));
            return Err(e);
        }
        if let Some(old) = sealed {
            self.release(old);
        }
        Ok(())
    }

    /// Gives back the space preallocated past the written end of the file this head
    /// appends to, which it will not append to again: called when the head stops (close,
    /// eviction, new term, deletion). Without it every short-lived writer would leave its
    /// whole first reservation allocated on disk.
    pub fn release_reservation(&mut self) {
        if self.poisoned.is_none() {
            let r = std::mem::take(&mut self.reserved);
            self.release(r);
        }
    }

    /// Gives back the preallocation of the last file this (branch, term) wrote before the
    /// head opened, when it is not continued: a writer that was killed never released it.
    /// For the writing open only (it changes the file's allocation, never its bytes). Best
    /// effort, as every release.
    fn release_previous_file(&self) {
        let id = self.state.max_file_id;
        let own = self
            .state
            .ranges
            .resolve(id)
            .is_some_and(|r| r.branch == self.branch && r.term == self.term);
        if self.cfg.preallocate == 0 || !own {
            return;
        }
        let name = bough_names::DataFileName::new(id, self.branch.clone(), self.term);
        let path = self.files.path_of(&name.to_string());
        let write = OpenOptions {
            write: true,
            ..OpenOptions::default()
        };
        let released = self
            .files
            .storage()
            .open(&path, write)
            .and_then(|f| f.set_len(f.len()?));
        if let Err(e) = released {
            tracing::debug!(file = %name, error = %e, "preallocation not released");
        }
    }

    /// Releases the blocks reserved past the length of file `id` (`reserved` bytes from
    /// offset 0): truncating to the file's own length keeps every byte written — nothing
    /// is overwritten or cut, and no durability order changes (a crash before the size
    /// change reaches the disk only leaves the reservation in place). Best effort: a
    /// failure costs space, never data.
    fn release(&self, (id, reserved): (FileId, u64)) {
        if reserved == 0 || self.cfg.preallocate == 0 {
            return;
        }
        let name = bough_names::DataFileName::new(id, self.branch.clone(), self.term);
        let released = self.files.open(&name, self.incarnation).and_then(|h| {
            let len = h.file.len()?;
            if len < reserved {
                h.file.set_len(len)?;
            }
            Ok(())
        });
        if let Err(e) = released {
            tracing::debug!(file = %name, error = %e, "preallocation not released");
        }
    }

    /// After a failed commit: the data files it may have created stay on storage (a file
    /// is never replaced), so the next commit allocates above them.
    fn skip_file_ids(&mut self, created: &[FileId]) {
        if let Some(&top) = created.iter().max() {
            self.state.max_file_id = self.state.max_file_id.max(top);
        }
    }

    fn append_manifest(&mut self, bytes: &[u8]) -> IoResult<()> {
        self.keep_tail_aside()?;
        self.manifest.write_at(self.manifest_end, bytes)?;
        if let Err(e) = self.manifest.sync() {
            self.poisoned = Some(format!("fdatasync of {} failed: {e}", self.manifest_path));
            return Err(e);
        }
        self.manifest_end += bytes.len() as u64;
        self.appended = true;
        Ok(())
    }

    /// Mapping chunks changed since the last checkpoint.
    pub fn dirty_chunks(&self) -> usize {
        self.state.mapping.current().dirty_chunks()
    }

    /// Writes the mapping's dirty chunks into mapping pages and records the new root.
    pub fn checkpoint(&mut self, now_ms: u64) -> IoResult<()> {
        self.commit_inner(&[], true, now_ms, |_, _| Ok(()))
            .map(|_| ())
    }

    /// The durable state as a snapshot record (after a checkpoint, so it has no overlay).
    pub fn fork_point(&mut self, now_ms: u64) -> IoResult<ForkPoint> {
        // A new term's manifest replaces this one, which is then deleted: keep the evidence.
        self.keep_tail_aside()?;
        if self.state.mapping.current().dirty_chunks() > 0 {
            self.checkpoint(now_ms)?;
        }
        Ok(ForkPoint {
            snapshot: self.durable_snapshot(),
        })
    }

    fn durable_snapshot(&self) -> Snapshot {
        let mut extensions = self.extensions.clone();
        bough_manifest::set_commit_version(&mut extensions, self.version());
        Snapshot {
            meta: ManifestMetadata {
                branch: self.branch.clone(),
                term: self.term,
                root: self.state.root,
                ttl_root: self.state.ttl_root,
                branch_file_ranges: self.state.ranges.clone(),
            },
            max_file_id: self.state.max_file_id,
            page_size: self.cfg.page_size,
            dict: self.dict.clone(),
            mapping_root: self.state.mapping.current().root(),
            next_page_id: self.state.mapping.next_page_id(),
            free_head: self.state.mapping.free_head(),
            overlay: Vec::new(),
            extensions,
        }
    }

    /// Replaces the manifest with one snapshot record (tmp + fsync + rename + dir fsync),
    /// dropping branch file ranges no page references any more (looked for when the ranges
    /// grew since the last look, or [`PRUNE_RANGES_EVERY`] commits after it).
    pub fn rewrite_manifest(&mut self, now_ms: u64) -> IoResult<()> {
        self.keep_tail_aside()?;
        self.checkpoint(now_ms)?;
        let ranges = self.state.ranges.len();
        let prune = ranges > 1
            && self.ranges_pruned.is_none_or(|(left, at)| {
                ranges > left || self.version().saturating_sub(at) >= PRUNE_RANGES_EVERY
            });
        if prune {
            let snap = self.snapshot();
            let mut referenced = Vec::new();
            snap.for_each_page(&mut |a| referenced.push(a.file_id()))?;
            for a in [self.state.active, self.state.resume].into_iter().flatten() {
                referenced.push(a.file_id);
            }
            self.state
                .ranges
                .retain_referenced(referenced.into_iter(), (&self.branch, self.term));
            self.ranges_pruned = Some((self.state.ranges.len(), self.version()));
        }
        let bytes =
            encode_snapshot(&self.durable_snapshot()).map_err(|e| IoError::InvalidArgument {
                what: format!("cannot encode the snapshot of {}: {e}", self.manifest_path),
            })?;
        self.install_snapshot(&bytes)
    }

    /// Replaces the manifest with `bytes`, one snapshot record of the durable state, and goes
    /// on from the version it carries.
    fn install_snapshot(&mut self, bytes: &[u8]) -> IoResult<()> {
        self.replace_manifest(bytes)?;
        // The new snapshot carries the version: it continues from there, not from 0.
        self.version_base = self.version();
        self.seq = 0;
        self.publish();
        Ok(())
    }

    /// Replaces the manifest with `bytes` (one snapshot record: tmp + fsync + rename + dir
    /// fsync) and reopens it for appending; `manifest_end` follows. The caller sets the
    /// version and sequence the snapshot carries.
    fn replace_manifest(&mut self, bytes: &[u8]) -> IoResult<()> {
        if let Err(e) = self
            .files
            .storage()
            .write_atomic(&self.manifest_path, bytes)
        {
            // Creating or writing the temporary file failed (ENOSPC, EIO): the manifest was
            // not touched and this head goes on appending to it, like after any failed
            // write. A failure at the rename or a sync may have replaced it (and a failed
            // sync poisoned the storage): then this head must stop.
            let untouched =
                matches!(&e, IoError::Os { op, .. } if matches!(*op, "create" | "write"));
            if e.kind() == ErrorKind::Poisoned || (e.raw_os_error().is_some() && !untouched) {
                self.poisoned = Some(format!("rewrite of {} failed: {e}", self.manifest_path));
            }
            return Err(e);
        }
        // The manifest was replaced: appends go to the new file from now on (opened, never
        // created: it exists). If it cannot be opened, this head must stop — its handle is
        // on the replaced file, and commits appended there would be lost at the next open.
        let reopened = self.files.storage().open(
            &self.manifest_path,
            OpenOptions {
                write: true,
                ..OpenOptions::default()
            },
        );
        self.manifest = match reopened {
            Ok(m) => m,
            Err(e) => {
                self.poisoned = Some(format!(
                    "reopening {} after its rewrite failed: {e}",
                    self.manifest_path
                ));
                return Err(e);
            }
        };
        self.manifest_end = bytes.len() as u64;
        Ok(())
    }

    /// Keys whose expiry is at or before `now_ms`, oldest first, at most `limit`.
    pub fn expired_keys(&self, now_ms: u64, limit: usize) -> IoResult<Vec<Vec<u8>>> {
        let snap = self.snapshot();
        let mut c = btree::Cursor::seek(snap.as_ref(), snap.ttl_root, None)?;
        let mut out = Vec::new();
        while out.len() < limit {
            let Some(e) = c.next_entry(snap.as_ref())? else {
                break;
            };
            if e.key.len() < 8 {
                return Err(IoError::corruption(
                    self.files.dir(),
                    0,
                    "TTL index key shorter than 8 bytes",
                ));
            }
            let mut at = [0u8; 8];
            at.copy_from_slice(&e.key[..8]);
            if u64::from_be_bytes(at) > now_ms {
                break;
            }
            out.push(e.key[8..].to_vec());
        }
        Ok(out)
    }

    /// Rewrites every live page of the given files into the active file (same logical ids,
    /// new addresses), so those files stop being referenced by this head.
    pub fn relocate_files(&mut self, victims: &[FileId], now_ms: u64) -> IoResult<u64> {
        if victims.is_empty() {
            return Ok(0);
        }
        self.give_up_resume_of(victims);
        let snap = self.snapshot();
        let fetch = snap.fetch();
        // Tree and overflow pages: found through the mapping slots.
        let mut moves: Vec<(PageId, PageAddr)> = Vec::new();
        snap.mapping.for_each_slot(&fetch, &mut |id, raw| {
            if let Some(Slot::Page(a)) = Slot::decode(raw)
                && victims.contains(&a.file_id())
            {
                moves.push((id, a));
            }
        })?;
        // Mapping pages: touching one slot under a node forces the checkpoint to rewrite
        // every node on that path.
        let mut touch: Vec<PageId> = Vec::new();
        let fan = snap.mapping.fanout() as u64;
        collect_mapping_touches(&snap.mapping, &fetch, victims, fan, &mut touch)?;
        let moved = moves.len() as u64;
        let files = self.files.clone();
        let ranges = snap.ranges.clone();
        self.commit_inner(&[], true, now_ms, move |txn, _| {
            for (id, addr) in moves {
                let h = files.handle(&ranges, addr.file_id())?;
                let (k, payload, offset) = files.read_raw(&h, addr.page_index())?;
                let cached = if k == kind::OVERFLOW {
                    CachedPage::Tree(Node::Leaf(payload.clone().into()))
                } else {
                    files.decode(&h.path, offset, k, payload.clone())?
                };
                let new = txn.stage_page(k, payload, cached)?;
                txn.map(id, new)?;
            }
            for id in touch {
                let src = Fetch {
                    files: txn.files,
                    ranges: &txn.st.ranges,
                    staged: Some(&txn.staged),
                };
                let raw = txn.st.mapping.current().raw(id, &src)?;
                txn.st.mapping.set_raw(id, raw, &src)?;
            }
            Ok(())
        })?;
        Ok(moved)
    }

    /// Live pages per file id of this head (tree, overflow and mapping pages).
    pub fn live_pages_per_file(&self) -> IoResult<HashMap<FileId, u64>> {
        let mut live: HashMap<FileId, u64> = HashMap::new();
        self.snapshot()
            .for_each_page(&mut |a| *live.entry(a.file_id()).or_default() += 1)?;
        Ok(live)
    }

    /// The file this head is appending to, if any.
    pub fn active_file(&self) -> Option<FileId> {
        self.state.active.map(|a| a.file_id)
    }

    /// Pages written to a data file before it rolls over.
    pub fn file_pages(&self) -> u32 {
        self.cfg.file_pages
    }

    /// Whether the head has no tree.
    pub fn is_empty(&self) -> bool {
        self.state.root == NO_PAGE
    }
}

impl Drop for Head {
    fn drop(&mut self) {
        self.release_reservation();
        self.files.set_writing(&self.writer_id(), None);
    }
}

/// Finds, for each mapping node stored in a victim file, one logical id below it (the
/// checked walk: a hostile mapping page is a `Corruption`, never a loop or a wrapped id).
fn collect_mapping_touches(
    mapping: &MappingView,
    src: &dyn NodeSource,
    victims: &[FileId],
    fanout: u64,
    out: &mut Vec<PageId>,
) -> IoResult<()> {
    walk_radix(mapping.root(), mapping.fanout(), src, &mut |pos, _| {
        if victims.contains(&pos.addr.file_id()) {
            let id = pos
                .first_chunk
                .checked_mul(fanout)
                .and_then(|id| u32::try_from(id).ok())
                .ok_or_else(|| {
                    let (file, offset) = src.locate(pos.addr);
                    IoError::corruption(file, offset, "mapping node beyond the id space")
                })?;
            out.push(id);
        }
        Ok(true)
    })
}
