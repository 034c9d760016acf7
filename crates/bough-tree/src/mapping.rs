//! The page-mapping table: logical page id → where the page lives now.
//!
//! Durable form: a radix tree of mapping pages (see [`crate::page::mapping`]) whose root
//! address the manifest records at each checkpoint, plus the changes since that checkpoint
//! in the manifest log. In memory: the on-disk root plus a set of *dirty chunks* (level-0
//! nodes changed since the checkpoint), shared copy-on-write with reader snapshots, so a
//! commit copies only the chunks it touches and a reader never sees a later commit.
//!
//! Slot values (`u64`): 0 = unmapped; bit 63 set = a free logical id, low 32 bits = the next
//! free id + 1 (0 = end of the free chain); anything else = a [`PageAddr`].

use crate::error::{TreeError, TreeResult};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use bough_manifest::{NO_PAGE, PageAddr, PageId};

use crate::page::kind;
use crate::page::mapping::MappingNode;

mod kept_chunks;
mod overlay;
mod radix;
mod slot_error;

pub use kept_chunks::{KeptChunks, MAX_KEPT_CHUNKS};
pub use radix::{MAX_MAPPING_LEVEL, NodePos, Radix, walk_radix};
use radix::{capacity_chunks, located};

const FREE_BIT: u64 = bough_manifest::FREE_SLOT_BIT;

/// A decoded mapping slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// Never used, or released without being chained.
    Unmapped,
    /// The page lives at this address.
    Page(PageAddr),
    /// On the free chain; `next` is the next free id.
    Free { next: Option<PageId> },
}

impl Slot {
    /// Decodes a raw slot value.
    pub fn decode(raw: u64) -> Option<Slot> {
        if raw == 0 {
            Some(Slot::Unmapped)
        } else if raw & FREE_BIT != 0 {
            if raw & !FREE_BIT > u64::from(u32::MAX) {
                return None;
            }
            let next = (raw & 0xffff_ffff) as u32;
            Some(Slot::Free {
                next: next.checked_sub(1),
            })
        } else {
            PageAddr::from_u64(raw).map(Slot::Page)
        }
    }

    /// The raw slot value.
    pub fn encode(self) -> u64 {
        match self {
            Slot::Unmapped => 0,
            Slot::Page(a) => a.to_u64(),
            Slot::Free { next } => FREE_BIT | next.map_or(0, |n| u64::from(n) + 1),
        }
    }
}

/// Loads mapping nodes from storage (through the page cache).
pub trait NodeSource {
    /// The decoded mapping node at `addr`.
    fn mapping_node(&self, addr: PageAddr) -> TreeResult<Arc<MappingNode>>;

    /// The file holding the page at `addr` and the page's byte offset in it, for errors.
    fn locate(&self, addr: PageAddr) -> (String, u64);

    /// The chunks kept for the table version read through this source, if any (a
    /// snapshot's; a commit in progress, whose table changes, has none).
    fn kept_chunks(&self) -> Option<&KeptChunks> {
        None
    }
}

/// Accepts new pages for the commit in progress and says where they will live.
pub trait PageSink {
    /// Stages a page of `page_kind` with `payload`; returns its address.
    fn stage(&mut self, page_kind: u8, payload: Vec<u8>) -> TreeResult<PageAddr>;
}

/// An immutable view of the mapping table (what a reader snapshot holds).
#[derive(Debug, Clone)]
pub struct MappingView {
    fanout: usize,
    root: PageAddr,
    dirty: Arc<HashMap<u32, Arc<Vec<u64>>>>,
}

impl MappingView {
    /// The on-disk root of the last checkpoint.
    pub fn root(&self) -> PageAddr {
        self.root
    }

    /// Whether `other` is this same version of the table: the same on-disk root and the
    /// same dirty chunks (shared, not equal: a change copies them first, `Arc::make_mut`,
    /// while a snapshot holds them).
    pub fn same_version(&self, other: &MappingView) -> bool {
        self.root == other.root
            && self.fanout == other.fanout
            && Arc::ptr_eq(&self.dirty, &other.dirty)
    }

    /// Slots per mapping page.
    pub fn fanout(&self) -> usize {
        self.fanout
    }

    /// Number of chunks changed since the last checkpoint.
    pub fn dirty_chunks(&self) -> usize {
        self.dirty.len()
    }

    /// The raw slot of `id`.
    #[expect(
        clippy::indexing_slicing,
        reason = "slot = id % fanout, and every dirty chunk and decoded mapping node holds exactly fanout slots"
    )]
    pub fn raw(&self, id: PageId, src: &dyn NodeSource) -> TreeResult<u64> {
        let chunk = id / self.fanout as u32;
        let slot = id as usize % self.fanout;
        if let Some(c) = self.dirty.get(&chunk) {
            return Ok(c[slot]);
        }
        if let Some(kept) = src.kept_chunks()
            && let Some(raw) = kept.slot(self.root, chunk, slot, || self.disk_chunk(chunk, src))?
        {
            return Ok(raw);
        }
        Ok(self
            .disk_chunk(chunk, src)?
            .map_or(0, |node| node.slots[slot]))
    }

    /// Where page `id` lives; `Corruption` if it is not mapped to a page.
    pub fn addr(&self, id: PageId, src: &dyn NodeSource) -> TreeResult<PageAddr> {
        match Slot::decode(self.raw(id, src)?) {
            Some(Slot::Page(a)) => Ok(a),
            other => Err(self.bad_slot(id, format!("is {other:?}"), src)),
        }
    }

    /// The effective slots of chunk `chunk` (dirty or on disk; zeros where absent).
    pub fn chunk_slots(&self, chunk: u32, src: &dyn NodeSource) -> TreeResult<Vec<u64>> {
        if let Some(c) = self.dirty.get(&chunk) {
            return Ok(c.as_ref().clone());
        }
        Ok(self
            .disk_chunk(chunk, src)?
            .map_or_else(|| vec![0; self.fanout], |n| n.slots.clone()))
    }

    /// Chunk numbers changed since the last checkpoint.
    pub fn dirty_chunk_numbers(&self) -> Vec<u32> {
        self.dirty.keys().copied().collect()
    }

    /// The on-disk level-0 node holding `chunk`, if the radix tree has one.
    fn disk_chunk(&self, chunk: u32, src: &dyn NodeSource) -> TreeResult<Option<Arc<MappingNode>>> {
        Ok(self.disk_chunk_at(chunk, src)?.map(|(_, node)| node))
    }

    /// [`Self::disk_chunk`] with the node's address.
    fn disk_chunk_at(
        &self,
        chunk: u32,
        src: &dyn NodeSource,
    ) -> TreeResult<Option<(PageAddr, Arc<MappingNode>)>> {
        if self.root.is_none() {
            return Ok(None);
        }
        let node = src.mapping_node(self.root)?;
        let top = Radix::new(self.fanout)
            .check(None, &node)
            .map_err(|why| located(src, self.root, why))?;
        if capacity_chunks(self.fanout, top) <= u64::from(chunk) {
            return Ok(None);
        }
        self.descend(self.root, node, top, 0, u64::from(chunk), src)
    }

    /// From `node` (at `addr`, level `at`), down to the node of level `level` whose number
    /// at that level is `idx`, through checked steps ([`Radix`]). `None`: absent.
    fn descend(
        &self,
        addr: PageAddr,
        mut node: Arc<MappingNode>,
        at: u8,
        level: u8,
        idx: u64,
        src: &dyn NodeSource,
    ) -> TreeResult<Option<(PageAddr, Arc<MappingNode>)>> {
        let radix = Radix::new(self.fanout);
        let mut pos = NodePos {
            addr,
            level: at,
            first_chunk: 0,
        };
        while pos.level > level {
            let span = capacity_chunks(self.fanout, pos.level - 1 - level);
            let slot = ((idx / span) % self.fanout as u64) as usize;
            let raw = node.slots.get(slot).copied().unwrap_or(0);
            let Some(child) = radix
                .child(pos, slot, raw)
                .map_err(|why| located(src, pos.addr, why))?
            else {
                return Ok(None);
            };
            let next = src.mapping_node(child.addr)?;
            radix
                .check(Some(child.level), &next)
                .map_err(|why| located(src, child.addr, why))?;
            node = next;
            pos = child;
        }
        Ok(Some((pos.addr, node)))
    }

    /// Every non-zero slot of the chunks changed since the last checkpoint.
    pub fn for_each_dirty_slot(&self, f: &mut dyn FnMut(PageId, u64)) {
        for (c, slots) in self.dirty.iter() {
            for (i, &raw) in slots.iter().enumerate() {
                if raw != 0 {
                    f(c * self.fanout as u32 + i as u32, raw);
                }
            }
        }
    }

    /// Every non-zero slot of the table, dirty chunks included (they replace the on-disk
    /// chunk of the same number), in id order. Used by compaction and GC to find every page
    /// the table references. The on-disk tree is read by [`walk_radix`], so a hostile
    /// mapping page is a `Corruption`, never a loop.
    pub fn for_each_slot(
        &self,
        src: &dyn NodeSource,
        f: &mut dyn FnMut(PageId, u64),
    ) -> TreeResult<()> {
        let mut dirty: Vec<(u32, &Arc<Vec<u64>>)> =
            self.dirty.iter().map(|(c, s)| (*c, s)).collect();
        dirty.sort_unstable_by_key(|(c, _)| *c);
        let mut pending = dirty.into_iter().peekable();
        let fanout = self.fanout;
        let emit = |chunk: u32, slots: &[u64], f: &mut dyn FnMut(PageId, u64)| -> Result<(), ()> {
            for (i, &raw) in slots.iter().enumerate() {
                if raw != 0 {
                    let id = u64::from(chunk) * fanout as u64 + i as u64;
                    f(u32::try_from(id).map_err(|_| ())?, raw);
                }
            }
            Ok(())
        };
        walk_radix(self.root, fanout, src, &mut |pos, node| {
            if pos.level > 0 {
                return Ok(true);
            }
            let beyond = || located(src, pos.addr, "mapping slot beyond the id space".into());
            // `walk_radix` bounds chunk numbers to the id space.
            let chunk = u32::try_from(pos.first_chunk).map_err(|_| beyond())?;
            while let Some((c, slots)) = pending.next_if(|(c, _)| *c < chunk) {
                emit(c, slots, f).map_err(|()| beyond())?;
            }
            match pending.next_if(|(c, _)| *c == chunk) {
                Some((c, slots)) => emit(c, slots, f),
                None => emit(chunk, &node.slots, f),
            }
            .map_err(|()| beyond())?;
            Ok(false)
        })?;
        for (c, slots) in pending {
            // Unreachable for slots set through `PageId`s; refused rather than wrapped.
            emit(c, slots, f).map_err(|()| TreeError::Slot {
                page: c.saturating_mul(fanout as u32),
                what: "is in a changed chunk beyond the id space".into(),
                at: None,
            })?;
        }
        Ok(())
    }

    /// Every mapping page of the on-disk radix tree (checked, see [`walk_radix`]).
    pub fn for_each_node_addr(
        &self,
        src: &dyn NodeSource,
        f: &mut dyn FnMut(PageAddr),
    ) -> TreeResult<()> {
        walk_radix(self.root, self.fanout, src, &mut |pos, _| {
            f(pos.addr);
            Ok(true)
        })
    }
}

/// The writer's mapping table: a view plus allocation state and the changes of the commit
/// in progress.
#[derive(Debug, Clone)]
pub struct MappingTable {
    view: MappingView,
    next_page_id: PageId,
    free_head: Option<PageId>,
    /// Changes since the last `take_changes` (for the manifest log record).
    changes: BTreeMap<PageId, u64>,
}

impl MappingTable {
    /// A table restored from a checkpoint root and the allocation state.
    pub fn new(
        fanout: usize,
        root: PageAddr,
        next_page_id: PageId,
        free_head: Option<PageId>,
    ) -> Self {
        MappingTable {
            view: MappingView {
                fanout,
                root,
                dirty: Arc::new(HashMap::new()),
            },
            next_page_id,
            free_head,
            changes: BTreeMap::new(),
        }
    }

    /// A snapshot for readers (cheap: shares every chunk).
    pub fn view(&self) -> MappingView {
        self.view.clone()
    }

    /// Read access without cloning.
    pub fn current(&self) -> &MappingView {
        &self.view
    }

    /// The logical-id high-water mark.
    pub fn next_page_id(&self) -> PageId {
        self.next_page_id
    }

    /// Head of the free-id chain.
    pub fn free_head(&self) -> Option<PageId> {
        self.free_head
    }

    /// Sets a slot (recorded for the next log record).
    #[expect(
        clippy::indexing_slicing,
        reason = "slot = id % fanout, and every dirty chunk and decoded mapping node holds exactly fanout slots"
    )]
    pub fn set_raw(&mut self, id: PageId, raw: u64, src: &dyn NodeSource) -> TreeResult<()> {
        let fanout = self.view.fanout;
        let chunk_no = id / fanout as u32;
        let dirty = Arc::make_mut(&mut self.view.dirty);
        if !dirty.contains_key(&chunk_no) {
            let base = self
                .view_without_dirty()
                .disk_chunk(chunk_no, src)?
                .map_or_else(|| vec![0; fanout], |n| n.slots.clone());
            Arc::make_mut(&mut self.view.dirty).insert(chunk_no, Arc::new(base));
        }
        let dirty = Arc::make_mut(&mut self.view.dirty);
        if let Some(chunk) = dirty.get_mut(&chunk_no) {
            Arc::make_mut(chunk)[id as usize % fanout] = raw;
        }
        self.changes.insert(id, raw);
        Ok(())
    }

    fn view_without_dirty(&self) -> MappingView {
        MappingView {
            fanout: self.view.fanout,
            root: self.view.root,
            dirty: Arc::new(HashMap::new()),
        }
    }

    /// Maps `id` to `addr`.
    pub fn map(&mut self, id: PageId, addr: PageAddr, src: &dyn NodeSource) -> TreeResult<()> {
        self.set_raw(id, Slot::Page(addr).encode(), src)
    }

    /// A fresh logical id (reusing a freed one when there is one).
    pub fn alloc(&mut self, src: &dyn NodeSource) -> TreeResult<PageId> {
        if let Some(id) = self.free_head {
            let next = match Slot::decode(self.view.raw(id, src)?) {
                Some(Slot::Free { next }) => next,
                other => {
                    return Err(self.view.bad_slot(
                        id,
                        format!("is {other:?}, yet the free chain points at it"),
                        src,
                    ));
                }
            };
            self.free_head = next;
            // Claimed: unmapped until the caller maps it.
            self.set_raw(id, 0, src)?;
            return Ok(id);
        }
        self.alloc_run(1)
    }

    /// `n` consecutive fresh ids (for the pages of one overflow value).
    pub fn alloc_run(&mut self, n: u32) -> TreeResult<PageId> {
        let first = self.next_page_id;
        let end = first
            .checked_add(n)
            .filter(|&e| e < NO_PAGE)
            .ok_or_else(|| TreeError::InvalidArgument {
                what: "logical page ids exhausted".into(),
            })?;
        self.next_page_id = end;
        Ok(first)
    }

    /// Releases `id` onto the free chain.
    pub fn free(&mut self, id: PageId, src: &dyn NodeSource) -> TreeResult<()> {
        let raw = Slot::Free {
            next: self.free_head,
        }
        .encode();
        self.set_raw(id, raw, src)?;
        self.free_head = Some(id);
        Ok(())
    }

    /// Changes since the last call (sorted by id), for the manifest log.
    pub fn take_changes(&mut self) -> Vec<(PageId, u64)> {
        std::mem::take(&mut self.changes).into_iter().collect()
    }

    /// Applies a replayed change (no change record is kept).
    pub fn replay_change(&mut self, id: PageId, raw: u64, src: &dyn NodeSource) -> TreeResult<()> {
        self.set_raw(id, raw, src)?;
        self.changes.remove(&id);
        Ok(())
    }

    /// Restores allocation state from a replayed record.
    pub fn set_alloc_state(&mut self, next_page_id: PageId, free_head: Option<PageId>) {
        self.next_page_id = next_page_id;
        self.free_head = free_head;
    }

    /// Replaces the on-disk root and drops the dirty chunks (replay of a checkpoint record).
    pub fn reset_to_checkpoint(&mut self, root: PageAddr) {
        self.view.root = root;
        self.view.dirty = Arc::new(HashMap::new());
    }

    /// Writes every dirty chunk (and the interior nodes above them) as new mapping pages and
    /// makes the result the new root. Returns the new root.
    #[expect(
        clippy::indexing_slicing,
        reason = "slot = id % fanout, and every dirty chunk and decoded mapping node holds exactly fanout slots"
    )]
    pub fn checkpoint(
        &mut self,
        src: &dyn NodeSource,
        sink: &mut dyn PageSink,
    ) -> TreeResult<PageAddr> {
        let fanout = self.view.fanout;
        if self.view.dirty.is_empty() {
            return Ok(self.view.root);
        }
        let old_root = self.view.root;
        let old_top = if old_root.is_none() {
            None
        } else {
            Some(src.mapping_node(old_root)?.level)
        };
        let max_chunk = self.view.dirty.keys().copied().max().unwrap_or(0);
        let mut top = old_top.unwrap_or(0);
        while capacity_chunks(fanout, top) <= u64::from(max_chunk) {
            top += 1;
        }
        // Level 0: the dirty chunks themselves.
        let mut level_nodes: BTreeMap<u64, PageAddr> = BTreeMap::new();
        let mut chunks: Vec<_> = self.view.dirty.iter().collect();
        chunks.sort_by_key(|(c, _)| **c);
        for (c, slots) in chunks {
            let node = MappingNode {
                level: 0,
                slots: slots.as_ref().clone(),
            };
            let addr = sink.stage(kind::MAPPING, node.encode())?;
            level_nodes.insert(u64::from(*c), addr);
        }
        // Interior levels: rewrite each parent of a changed node.
        let old_view = self.view_without_dirty();
        for level in 1..=top {
            // The tree grew: the old root becomes the first node of its level under the new top.
            if old_top.is_some_and(|t| t + 1 == level) {
                level_nodes.entry(0).or_insert(old_root);
            }
            let mut parents: BTreeMap<u64, MappingNode> = BTreeMap::new();
            for (&idx, &addr) in &level_nodes {
                let parent_idx = idx / fanout as u64;
                if let std::collections::btree_map::Entry::Vacant(slot) = parents.entry(parent_idx)
                {
                    let old = old_view.disk_node(level, parent_idx, old_top, src)?;
                    slot.insert(
                        old.map_or_else(|| MappingNode::empty(level, fanout), |n| (*n).clone()),
                    );
                }
                if let Some(p) = parents.get_mut(&parent_idx) {
                    p.slots[(idx % fanout as u64) as usize] = addr.to_u64();
                }
            }
            level_nodes.clear();
            for (idx, node) in parents {
                level_nodes.insert(idx, sink.stage(kind::MAPPING, node.encode())?);
            }
        }
        let root = level_nodes.get(&0).copied().unwrap_or(PageAddr::NONE);
        self.view.root = root;
        self.view.dirty = Arc::new(HashMap::new());
        Ok(root)
    }
}

impl MappingView {
    /// The old on-disk node at `level` with index `idx` (nodes of one level numbered from 0).
    fn disk_node(
        &self,
        level: u8,
        idx: u64,
        old_top: Option<u8>,
        src: &dyn NodeSource,
    ) -> TreeResult<Option<Arc<MappingNode>>> {
        let Some(old_top) = old_top else {
            return Ok(None);
        };
        if level > old_top {
            // Above the old root: only node 0 on the path exists, and it is new.
            return Ok(None);
        }
        // Nodes at `level` under the old root: fanout^(old_top - level).
        if idx >= capacity_chunks(self.fanout, old_top - level) {
            return Ok(None);
        }
        let node = src.mapping_node(self.root)?;
        Radix::new(self.fanout)
            .check(Some(old_top), &node)
            .map_err(|why| located(src, self.root, why))?;
        Ok(self
            .descend(self.root, node, old_top, level, idx, src)?
            .map(|(_, node)| node))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    #[derive(Default)]
    struct MemPages {
        pages: Mutex<HashMap<u64, Arc<MappingNode>>>,
        next: Mutex<u32>,
    }

    impl NodeSource for MemPages {
        fn mapping_node(&self, addr: PageAddr) -> TreeResult<Arc<MappingNode>> {
            self.pages
                .lock()
                .get(&addr.to_u64())
                .cloned()
                .ok_or_else(|| TreeError::corruption("mem", addr.to_u64(), "missing"))
        }
        fn locate(&self, addr: PageAddr) -> (String, u64) {
            ("mem".to_string(), addr.to_u64())
        }
    }

    struct Sink<'a>(&'a MemPages, usize);
    impl PageSink for Sink<'_> {
        fn stage(&mut self, _kind: u8, payload: Vec<u8>) -> TreeResult<PageAddr> {
            let mut n = self.0.next.lock();
            *n += 1;
            let addr = PageAddr::new(1, *n).unwrap();
            let node = MappingNode::decode(&payload, self.1).unwrap();
            self.0.pages.lock().insert(addr.to_u64(), Arc::new(node));
            Ok(addr)
        }
    }

    #[test]
    fn map_checkpoint_and_grow() {
        let src = MemPages::default();
        let fanout = 4;
        let mut t = MappingTable::new(fanout, PageAddr::NONE, 0, None);
        let mut expect = HashMap::new();
        for round in 0..5u32 {
            for i in 0..(20 * (round + 1)) {
                let id = (i * 7 + round) % 150;
                let addr = PageAddr::new(2, 1 + i + round * 1000).unwrap();
                t.map(id, addr, &src).unwrap();
                expect.insert(id, addr);
            }
            let before = t.view();
            t.checkpoint(&src, &mut Sink(&src, fanout)).unwrap();
            for (&id, &addr) in &expect {
                assert_eq!(t.current().addr(id, &src).unwrap(), addr);
                assert_eq!(before.addr(id, &src).unwrap(), addr);
            }
        }
        let mut seen = 0;
        t.current()
            .for_each_slot(&src, &mut |_, _| seen += 1)
            .unwrap();
        assert_eq!(seen, expect.len());
    }

    #[test]
    fn free_chain_reuses_ids() {
        let src = MemPages::default();
        let mut t = MappingTable::new(8, PageAddr::NONE, 0, None);
        let a = t.alloc(&src).unwrap();
        let b = t.alloc(&src).unwrap();
        assert_eq!((a, b), (0, 1));
        t.free(a, &src).unwrap();
        t.free(b, &src).unwrap();
        assert_eq!(t.alloc(&src).unwrap(), b);
        assert_eq!(t.alloc(&src).unwrap(), a);
        assert_eq!(t.alloc(&src).unwrap(), 2);
        assert_eq!(t.alloc_run(3).unwrap(), 3);
        assert_eq!(t.next_page_id(), 6);
    }

    #[test]
    fn snapshots_are_isolated() {
        let src = MemPages::default();
        let mut t = MappingTable::new(8, PageAddr::NONE, 0, None);
        let a1 = PageAddr::new(1, 1).unwrap();
        let a2 = PageAddr::new(1, 2).unwrap();
        t.map(3, a1, &src).unwrap();
        let snap = t.view();
        t.map(3, a2, &src).unwrap();
        assert_eq!(snap.addr(3, &src).unwrap(), a1);
        assert_eq!(t.current().addr(3, &src).unwrap(), a2);
    }

    /// Mapping pages for the crafted-page tests: each read counts against a budget, so a
    /// walk that loops fails the test (a panic) instead of hanging it.
    struct Crafted {
        pages: HashMap<u64, Arc<MappingNode>>,
        reads: Mutex<u64>,
    }

    impl Crafted {
        fn new(pages: &[(PageAddr, MappingNode)]) -> Crafted {
            Crafted {
                pages: pages
                    .iter()
                    .map(|(a, n)| (a.to_u64(), Arc::new(n.clone())))
                    .collect(),
                reads: Mutex::new(0),
            }
        }
    }

    impl NodeSource for Crafted {
        fn mapping_node(&self, addr: PageAddr) -> TreeResult<Arc<MappingNode>> {
            let mut reads = self.reads.lock();
            *reads += 1;
            assert!(*reads <= 10_000, "the walk read {reads} pages: it loops");
            self.pages
                .get(&addr.to_u64())
                .cloned()
                .ok_or_else(|| TreeError::corruption("missing", addr.to_u64(), "no such page"))
        }

        fn locate(&self, addr: PageAddr) -> (String, u64) {
            (
                format!("data_{}", addr.file_id()),
                u64::from(addr.page_index()) * 4096,
            )
        }
    }

    fn node(level: u8, fanout: usize, slots: &[(usize, u64)]) -> MappingNode {
        let mut n = MappingNode::empty(level, fanout);
        for &(i, v) in slots {
            n.slots[i] = v;
        }
        n
    }

    /// Runs every walk of the table over `pages` with root `root` and checks each ends in
    /// a `Corruption` naming `file` (and reads a bounded number of pages).
    fn every_walk_refuses(
        fanout: usize,
        root: PageAddr,
        pages: &[(PageAddr, MappingNode)],
        file: &str,
    ) {
        let view = MappingTable::new(fanout, root, 0, None).view();
        let want = |what: &str, r: TreeResult<()>| match r {
            Err(TreeError::Page { file: path, .. }) => {
                assert_eq!(path, file, "{what}: the error names the wrong file")
            }
            other => panic!("{what}: {other:?}, not a Corruption"),
        };
        let src = Crafted::new(pages);
        want("for_each_slot", view.for_each_slot(&src, &mut |_, _| {}));
        let src = Crafted::new(pages);
        want(
            "for_each_node_addr",
            view.for_each_node_addr(&src, &mut |_| {}),
        );
        let src = Crafted::new(pages);
        want(
            "walk_radix",
            walk_radix(root, fanout, &src, &mut |_, _| Ok(true)),
        );
    }

    #[test]
    fn crafted_mapping_page_pointing_at_itself_is_corruption() {
        // Before the checked walk, `for_each_node_addr` looped here forever, its stack
        // growing until the process ran out of memory.
        let fanout = 8;
        let root = PageAddr::new(3, 1).unwrap();
        let pages = [(
            root,
            node(1, fanout, &[(0, root.to_u64()), (1, root.to_u64())]),
        )];
        every_walk_refuses(fanout, root, &pages, "data_3");
        // Also at the level the child would need: reached twice.
        let leafish = PageAddr::new(3, 2).unwrap();
        let pages = [(leafish, node(0, fanout, &[(0, 5 << 24 | 7)]))];
        let view = MappingTable::new(fanout, leafish, 0, None).view();
        let mut seen = 0;
        view.for_each_slot(&Crafted::new(&pages), &mut |_, _| seen += 1)
            .unwrap();
        assert_eq!(seen, 1, "a level-0 slot is a page address, not a child");
    }

    #[test]
    fn crafted_mapping_page_pointing_at_an_ancestor_is_corruption() {
        let fanout = 8;
        let root = PageAddr::new(4, 1).unwrap();
        let mid = PageAddr::new(4, 2).unwrap();
        let pages = [
            (root, node(2, fanout, &[(0, mid.to_u64())])),
            (mid, node(1, fanout, &[(3, root.to_u64())])),
        ];
        every_walk_refuses(fanout, root, &pages, "data_4");
        // Reads of one id descend the same path.
        let view = MappingTable::new(fanout, root, 0, None).view();
        let r = view.raw(3 * fanout as u32, &Crafted::new(&pages));
        assert!(matches!(r, Err(TreeError::Page { .. })), "{r:?}");
    }

    #[test]
    fn crafted_mapping_levels_do_not_overflow() {
        // Level 8 at the real fan-out: the old walk's `i * span` overflowed u64 (a panic in
        // debug builds, a wrapped chunk number in release).
        let fanout = crate::page::mapping::fanout(4080);
        let root = PageAddr::new(6, 1).unwrap();
        let child = PageAddr::new(6, 2).unwrap();
        let pages = [
            (root, node(8, fanout, &[(fanout - 1, child.to_u64())])),
            (child, node(7, fanout, &[])),
        ];
        every_walk_refuses(fanout, root, &pages, "data_6");
        // A level-3 node whose slots reach past the id space.
        let pages = [
            (root, node(3, fanout, &[(fanout - 1, child.to_u64())])),
            (child, node(2, fanout, &[])),
        ];
        every_walk_refuses(fanout, root, &pages, "data_6");
        // A child that claims another level than its parent needs.
        let pages = [
            (root, node(3, fanout, &[(0, child.to_u64())])),
            (child, node(3, fanout, &[])),
        ];
        every_walk_refuses(fanout, root, &pages, "data_6");
    }

    #[test]
    fn crafted_mapping_shared_subtree_is_corruption() {
        // Every slot of every level pointing at one node: a DAG whose walk would visit
        // fanout^depth nodes. A page reached twice in one tree is refused.
        let fanout = 8;
        let root = PageAddr::new(2, 1).unwrap();
        let mid = PageAddr::new(2, 2).unwrap();
        let leaf = PageAddr::new(2, 3).unwrap();
        let all = |a: PageAddr| (0..fanout).map(|i| (i, a.to_u64())).collect::<Vec<_>>();
        let pages = [
            (root, node(2, fanout, &all(mid))),
            (mid, node(1, fanout, &all(leaf))),
            (leaf, node(0, fanout, &[(0, 9 << 24 | 1)])),
        ];
        every_walk_refuses(fanout, root, &pages, "data_2");
    }

    #[test]
    fn crafted_mapping_bad_interior_slot_is_corruption() {
        let fanout = 8;
        let root = PageAddr::new(7, 1).unwrap();
        // Bit 63 (a free-chain value) where a child address belongs.
        let pages = [(root, node(1, fanout, &[(2, 1 << 63 | 5)]))];
        every_walk_refuses(fanout, root, &pages, "data_7");
    }

    #[test]
    fn checked_walk_visits_a_real_tree_in_chunk_order() {
        let src = MemPages::default();
        let fanout = 4;
        let mut t = MappingTable::new(fanout, PageAddr::NONE, 0, None);
        for id in (0..200u32).step_by(3) {
            t.map(id, PageAddr::new(9, id + 1).unwrap(), &src).unwrap();
        }
        t.checkpoint(&src, &mut Sink(&src, fanout)).unwrap();
        // Dirty chunks replace their on-disk versions, in order.
        t.map(4, PageAddr::new(9, 999).unwrap(), &src).unwrap();
        t.map(400, PageAddr::new(9, 1000).unwrap(), &src).unwrap();
        let mut ids = Vec::new();
        t.current()
            .for_each_slot(&src, &mut |id, raw| ids.push((id, raw)))
            .unwrap();
        let mut want: Vec<(u32, u64)> = (0..200u32)
            .step_by(3)
            .map(|id| (id, PageAddr::new(9, id + 1).unwrap().to_u64()))
            .collect();
        want.push((4, PageAddr::new(9, 999).unwrap().to_u64()));
        want.push((400, PageAddr::new(9, 1000).unwrap().to_u64()));
        want.sort_unstable();
        assert_eq!(ids, want);
        let mut nodes = 0;
        t.current()
            .for_each_node_addr(&src, &mut |_| nodes += 1)
            .unwrap();
        // 200 ids at 4 per chunk: 50 chunks, 13 + 4 + 1 interior nodes above them.
        assert_eq!(nodes, 50 + 13 + 4 + 1);
    }

    #[test]
    fn slot_encoding() {
        for s in [
            Slot::Unmapped,
            Slot::Free { next: None },
            Slot::Free { next: Some(0) },
            Slot::Free {
                next: Some(u32::MAX - 1),
            },
            Slot::Page(PageAddr::new(5, 9).unwrap()),
        ] {
            assert_eq!(Slot::decode(s.encode()), Some(s));
        }
        assert_eq!(Slot::decode(5 << 24), None);
    }
}
