//! What readers see: [`TreeSnapshot`], an immutable committed state of a branch, and
//! [`Published`], the slot that hands the current one out and remembers the older ones
//! readers still hold (GC must keep what they reference).

use super::*;
use crate::error::{TreeError, TreeResult};

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
    /// The acknowledged writes above the tree not yet checkpointed into it (empty for a
    /// head without a write buffer): every read of this snapshot goes through
    /// [`TreeSnapshot::buffered`], which sees them.
    pub buffer: crate::buffer::WriteBuffer,
    /// The decoded top index nodes of this tree version, shared by every snapshot of the
    /// same (root, mapping, ranges) (`Head::publish`), so lookups skip the first two
    /// levels' page fetches.
    pub(crate) top: Arc<crate::btree::TopNodes>,
}

/// Page lookups shared by snapshots and transactions.
pub(crate) struct Fetch<'a> {
    pub(super) files: &'a FileTable,
    pub(super) ranges: &'a BranchFileMapping,
    pub(super) staged: Option<&'a HashMap<PageAddr, CachedPage>>,
    /// The mapping chunks kept for this version (a snapshot's fetches only).
    pub(super) kept: Option<&'a crate::mapping::KeptChunks>,
}

impl Fetch<'_> {
    pub(super) fn page(&self, addr: PageAddr) -> TreeResult<CachedPage> {
        if let Some(p) = self.staged.and_then(|s| s.get(&addr)) {
            return Ok(p.clone());
        }
        self.files.read(self.ranges, addr)
    }

    pub(super) fn overflow(
        &self,
        mapping: &MappingView,
        first: PageId,
        pages: u32,
        len: u64,
    ) -> TreeResult<Vec<u8>> {
        // An error about the value names its first page (or why that page has no place).
        let bad = |what: String| match mapping.addr(first, self) {
            Ok(a) => {
                let (file, offset) = self.locate(a);
                TreeError::corruption(file, offset, format!("overflow page {first}: {what}"))
            }
            Err(e) => e,
        };
        let cap = max_payload(self.files.page_size()) as u64;
        if len.div_ceil(cap.max(1)) != u64::from(pages) {
            return Err(bad(format!(
                "overflow value of {len} bytes cannot span {pages} pages"
            )));
        }
        let mut out = Vec::with_capacity(len.min(1 << 30) as usize);
        let mut id = first;
        let end = first
            .checked_add(pages)
            .ok_or_else(|| bad("overflow range wraps".into()))?;
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
            return Err(bad(format!(
                "overflow value has {} bytes, expected {len}",
                out.len()
            )));
        }
        Ok(out)
    }
}

impl NodeSource for Fetch<'_> {
    fn mapping_node(&self, addr: PageAddr) -> TreeResult<Arc<MappingNode>> {
        match self.page(addr)? {
            CachedPage::Mapping(m) => Ok(m),
            CachedPage::Tree(_) => {
                let (file, offset) = self.locate(addr);
                Err(TreeError::corruption(
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

    fn kept_chunks(&self) -> Option<&crate::mapping::KeptChunks> {
        self.kept
    }
}

pub(crate) fn tree_node(page: CachedPage, fetch: &Fetch<'_>, addr: PageAddr) -> TreeResult<Node> {
    match page {
        CachedPage::Tree(n) => Ok(n),
        CachedPage::Mapping(_) => {
            let (file, offset) = fetch.locate(addr);
            Err(TreeError::corruption(
                file,
                offset,
                format!("page {addr} is a mapping page where a tree page was expected"),
            ))
        }
    }
}

impl TreeSnapshot {
    pub(super) fn fetch(&self) -> Fetch<'_> {
        Fetch {
            files: &self.files,
            ranges: &self.ranges,
            staged: None,
            kept: Some(self.top.kept_chunks()),
        }
    }

    /// Reads of this snapshot: the buffer's runs over the tree (just the tree when nothing
    /// is buffered).
    pub fn buffered(&self) -> crate::buffer::BufferedRead<'_> {
        self.buffer.over(self, self.root)
    }

    /// Whether writes are buffered above the tree (then a reader of the tree alone, such as
    /// diff, must have the head checkpoint first).
    pub fn has_buffered(&self) -> bool {
        !self.buffer.is_empty()
    }

    /// Reads an overflow value.
    pub fn read_overflow(&self, first: PageId, pages: u32, len: u64) -> TreeResult<Vec<u8>> {
        self.fetch().overflow(&self.mapping, first, pages, len)
    }

    /// Every physical page this snapshot references (tree, overflow and mapping pages), as
    /// (file id, page index) — what GC and compaction need.
    pub fn for_each_page(&self, f: &mut dyn FnMut(PageAddr)) -> TreeResult<()> {
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
            return Err(self.mapping.bad_slot(
                id,
                format!("holds an invalid value {raw:#x}"),
                &fetch,
            ));
        }
        Ok(())
    }

    /// A read-only view of a snapshot record (an archive, a merge base, a fork point).
    pub fn from_record(files: Arc<FileTable>, s: &Snapshot) -> TreeResult<TreeSnapshot> {
        let mapping = mapping_of_record(&files, s, s.next_page_id)?;
        let buffer = inherited_buffer(&files, s)?;
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
            buffer,
            top: Arc::default(),
        })
    }
}

/// The mapping table of snapshot record `s` (its overlay replayed over its mapping root),
/// allocating page ids from `next_page_id`.
pub(super) fn mapping_of_record(
    files: &Arc<FileTable>,
    s: &Snapshot,
    next_page_id: PageId,
) -> TreeResult<MappingTable> {
    let cap = max_payload(files.page_size());
    let mut mapping = MappingTable::new(fanout(cap), s.mapping_root, next_page_id, s.free_head);
    let fetch = Fetch {
        files,
        ranges: &s.meta.branch_file_ranges,
        staged: None,
        kept: None,
    };
    for &(id, raw) in &s.overlay {
        mapping.replay_change(id, raw, &fetch)?;
    }
    Ok(mapping)
}

/// The buffered commits of a record whose `LOG` references are all bounded (`until`): the
/// log a branch forked by reference inherited, as its merge base names it (ARCHITECTURE.md,
/// "Forks"). A record whose `LOG` names a head's own log, which that head may still append
/// to, is read as its tree alone.
fn inherited_buffer(files: &FileTable, s: &Snapshot) -> TreeResult<crate::buffer::WriteBuffer> {
    let refs = match bough_manifest::log_refs(&s.extensions) {
        Ok(Some(refs)) if bough_manifest::inherited_only(&refs) => refs,
        _ => return Ok(crate::buffer::WriteBuffer::new()),
    };
    Ok(crate::wal::recover(files.storage().as_ref(), files.dir(), &refs)?.0)
}

impl NodeSource for TreeSnapshot {
    fn mapping_node(&self, addr: PageAddr) -> TreeResult<Arc<MappingNode>> {
        self.fetch().mapping_node(addr)
    }

    fn locate(&self, addr: PageAddr) -> (String, u64) {
        self.files.locate(&self.ranges, addr)
    }

    fn kept_chunks(&self) -> Option<&crate::mapping::KeptChunks> {
        Some(self.top.kept_chunks())
    }
}

impl TreeRead for TreeSnapshot {
    fn node(&self, id: PageId) -> TreeResult<Node> {
        let fetch = self.fetch();
        let addr = self.mapping.addr(id, &fetch)?;
        tree_node(fetch.page(addr)?, &fetch, addr)
    }

    fn overflow(&self, first: PageId, pages: u32, len: u64) -> TreeResult<Vec<u8>> {
        self.read_overflow(first, pages, len)
    }

    fn top_nodes(&self) -> Option<&crate::btree::TopNodes> {
        Some(&self.top)
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
    pub(super) current: arc_swap::ArcSwap<TreeSnapshot>,
    pub(super) handed_out: parking_lot::Mutex<Vec<std::sync::Weak<TreeSnapshot>>>,
}

impl Published {
    pub(super) fn new(s: Arc<TreeSnapshot>) -> Self {
        Published {
            handed_out: parking_lot::Mutex::new(vec![Arc::downgrade(&s)]),
            current: arc_swap::ArcSwap::new(s),
        }
    }

    /// The latest committed snapshot.
    pub fn load(&self) -> Arc<TreeSnapshot> {
        self.current.load_full()
    }

    /// `read` of the latest committed snapshot, which stays alive until `read` returns
    /// (a reader racing the writer keeps the one it started on). Unlike [`Self::load`] it
    /// writes nothing every reader shares: no reference count, no lock word.
    pub fn with_current<T>(&self, read: impl FnOnce(&TreeSnapshot) -> T) -> T {
        read(&self.current.load())
    }

    /// Makes `s` the current snapshot; returns the one it replaces (its last reference,
    /// unless a reader holds it: the caller chooses where it is freed).
    pub(super) fn store(&self, s: Arc<TreeSnapshot>) -> Arc<TreeSnapshot> {
        self.register(&s);
        self.current.swap(s)
    }

    /// Counts `s` among the snapshots handed out, so GC keeps what it reaches while
    /// someone holds it.
    pub(super) fn register(&self, s: &Arc<TreeSnapshot>) {
        let mut h = self.handed_out.lock();
        if h.len() >= 64 {
            h.retain(|w| w.strong_count() > 0);
        }
        h.push(Arc::downgrade(s));
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
