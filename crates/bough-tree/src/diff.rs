//! Diff of two snapshots of one partition, visiting only what diverged.
//!
//! Two snapshots share a page when the same logical id maps to the same *physical* page
//! (file identity and index) — comparing index pages would not do, because a rewritten leaf
//! keeps its logical id and its parent is not rewritten (design notes §1). So the diff
//! compares the two mapping tables first, skipping every mapping page both share, which
//! yields the logical ids whose pages differ. Every key that differs lives in a leaf among
//! those ids on at least one side (a key sits in exactly one leaf of a tree, and a leaf that
//! maps to the same page on both sides is reachable on both), so reading those leaves is
//! enough: the cost follows the divergence, not the partition's size.

use crate::error::{TreeError, TreeResult};
use std::collections::{BTreeMap, BTreeSet, HashSet};

use bough_manifest::{PageAddr, PageId};

use crate::head::TreeSnapshot;
use crate::mapping::{NodePos, NodeSource, Radix, Slot};
use crate::page::kind;
use crate::page::leaf::{Entry, LeafView};
use crate::page::mapping::MappingNode;

/// How a key differs between the old (`a`) and the new (`b`) side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Only in `b`.
    Added(Entry),
    /// Only in `a`.
    Removed(Entry),
    /// In both, with different value, timestamp or expiry.
    Changed { old: Entry, new: Entry },
}

/// A key and how it changed.
pub type KeyChange = (Vec<u8>, Change);

/// What a diff read.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DiffStats {
    /// Mapping pages read (both sides).
    pub mapping_pages: u64,
    /// Logical pages whose mapping differs.
    pub changed_pages: u64,
    /// Key-tree leaves read (both sides).
    pub leaves: u64,
}

/// A page's identity as seen from one side: the data file's name and the page index.
type Identity = (String, u32);

fn identity(s: &TreeSnapshot, addr: PageAddr) -> TreeResult<Identity> {
    let name = s.files.resolve(&s.ranges, addr.file_id())?;
    Ok((name.to_string(), addr.page_index()))
}

fn slot_identity(s: &TreeSnapshot, id: PageId, raw: u64) -> TreeResult<Option<Identity>> {
    match Slot::decode(raw) {
        Some(Slot::Page(a)) if !a.is_none() => identity(s, a).map(Some),
        Some(_) => Ok(None),
        None => Err(s
            .mapping
            .bad_slot(id, format!("holds an invalid value {raw:#x}"), s)),
    }
}

#[derive(Clone, Copy)]
enum NodeRef {
    Absent,
    Real(PageAddr),
    /// Above a shallower tree's root: only child 0 exists.
    Virtual,
}

struct Side<'a> {
    snap: &'a TreeSnapshot,
    top: Option<u8>,
    radix: Radix,
    /// Mapping pages read on this side: each at most once (a page reached twice in one
    /// tree is hostile, see [`Radix`]).
    seen: HashSet<u64>,
}

impl Side<'_> {
    fn bad(&self, addr: PageAddr, why: String) -> TreeError {
        let (file, offset) = self.snap.locate(addr);
        TreeError::corruption(file, offset, why)
    }

    /// The node at `addr`, which must be at `level` (checked, see [`Radix`]).
    fn node(
        &mut self,
        addr: PageAddr,
        level: u8,
        stats: &mut DiffStats,
    ) -> TreeResult<std::sync::Arc<MappingNode>> {
        if !self.seen.insert(addr.to_u64()) {
            return Err(self.bad(
                addr,
                "mapping page reached twice in one tree (a cycle or a shared subtree)".into(),
            ));
        }
        stats.mapping_pages += 1;
        let node = self.snap.mapping_node(addr)?;
        self.radix
            .check(Some(level), &node)
            .map_err(|why| self.bad(addr, why))?;
        Ok(node)
    }

    #[expect(
        clippy::indexing_slicing,
        reason = "the child arrays are sized to the fan-out and indexed below it"
    )]
    fn children(
        &mut self,
        level: u8,
        first_chunk: u64,
        n: NodeRef,
        fanout: usize,
        stats: &mut DiffStats,
    ) -> TreeResult<Vec<NodeRef>> {
        let mut out = vec![NodeRef::Absent; fanout];
        match n {
            NodeRef::Absent => {}
            NodeRef::Virtual => {
                out[0] = if self.top == Some(level - 1) {
                    NodeRef::Real(self.snap.mapping.root())
                } else {
                    NodeRef::Virtual
                };
            }
            NodeRef::Real(a) => {
                let node = self.node(a, level, stats)?;
                let pos = NodePos {
                    addr: a,
                    level,
                    first_chunk,
                };
                for (i, &c) in node.slots.iter().enumerate() {
                    if let Some(child) = self
                        .radix
                        .child(pos, i, c)
                        .map_err(|why| self.bad(a, why))?
                    {
                        out[i] = NodeRef::Real(child.addr);
                    }
                }
            }
        }
        Ok(out)
    }
}

/// Logical ids whose page differs between `a` and `b`.
#[expect(
    clippy::indexing_slicing,
    reason = "the child arrays are sized to the fan-out and indexed below it"
)]
pub fn changed_pages(
    a: &TreeSnapshot,
    b: &TreeSnapshot,
    stats: &mut DiffStats,
) -> TreeResult<BTreeSet<PageId>> {
    let fanout = a.mapping.fanout();
    let mut out = BTreeSet::new();
    let mut dirty: BTreeSet<u32> = a.mapping.dirty_chunk_numbers().into_iter().collect();
    dirty.extend(b.mapping.dirty_chunk_numbers());
    let compare_chunk =
        |chunk: u32, sa: &[u64], sb: &[u64], out: &mut BTreeSet<PageId>| -> TreeResult<()> {
            for i in 0..fanout {
                let (ra, rb) = (
                    sa.get(i).copied().unwrap_or(0),
                    sb.get(i).copied().unwrap_or(0),
                );
                if ra == rb && ra == 0 {
                    continue;
                }
                let id = u64::from(chunk) * fanout as u64 + i as u64;
                let id = u32::try_from(id).map_err(|_| {
                    let last = u32::try_from(id).unwrap_or(u32::MAX);
                    a.mapping
                        .bad_slot(last, "lies beyond the id space".into(), a)
                })?;
                if slot_identity(a, id, ra)? != slot_identity(b, id, rb)? {
                    out.insert(id);
                }
            }
            Ok(())
        };
    for &c in &dirty {
        let sa = a.mapping.chunk_slots(c, a)?;
        let sb = b.mapping.chunk_slots(c, b)?;
        compare_chunk(c, &sa, &sb, &mut out)?;
    }
    let radix = Radix::new(fanout);
    let mut side_a = Side {
        snap: a,
        top: top_level(a, stats)?,
        radix,
        seen: HashSet::new(),
    };
    let mut side_b = Side {
        snap: b,
        top: top_level(b, stats)?,
        radix,
        seen: HashSet::new(),
    };
    let Some(top) = side_a.top.max(side_b.top) else {
        return Ok(out);
    };
    let start = |s: &Side<'_>| match s.top {
        None => NodeRef::Absent,
        Some(t) if t == top => NodeRef::Real(s.snap.mapping.root()),
        Some(_) => NodeRef::Virtual,
    };
    // (level, first chunk covered, node in a, node in b)
    let mut stack = vec![(top, 0u64, start(&side_a), start(&side_b))];
    while let Some((level, first_chunk, na, nb)) = stack.pop() {
        match (na, nb) {
            (NodeRef::Absent, NodeRef::Absent) => continue,
            (NodeRef::Real(x), NodeRef::Real(y)) if identity(a, x)? == identity(b, y)? => continue,
            _ => {}
        }
        if level == 0 {
            let chunk = u32::try_from(first_chunk).map_err(|_| {
                out_of_range(&side_a, na, &side_b, nb, "mapping chunk out of range")
            })?;
            if dirty.contains(&chunk) {
                continue;
            }
            let slots =
                |s: &mut Side<'_>, n: NodeRef, stats: &mut DiffStats| -> TreeResult<Vec<u64>> {
                    match n {
                        NodeRef::Real(addr) => Ok(s.node(addr, 0, stats)?.slots.clone()),
                        _ => Ok(vec![0; fanout]),
                    }
                };
            let sa = slots(&mut side_a, na, stats)?;
            let sb = slots(&mut side_b, nb, stats)?;
            compare_chunk(chunk, &sa, &sb, &mut out)?;
            continue;
        }
        let ca = side_a.children(level, first_chunk, na, fanout, stats)?;
        let cb = side_b.children(level, first_chunk, nb, fanout, stats)?;
        for i in 0..fanout {
            if matches!((ca[i], cb[i]), (NodeRef::Absent, NodeRef::Absent)) {
                continue;
            }
            // In range: a real child passed `Radix::child`, a virtual one is child 0.
            let child_first = radix
                .span(level - 1)
                .and_then(|span| span.checked_mul(i as u64))
                .and_then(|off| first_chunk.checked_add(off))
                .ok_or_else(|| {
                    out_of_range(&side_a, na, &side_b, nb, "mapping chunk out of range")
                })?;
            stack.push((level - 1, child_first, ca[i], cb[i]));
        }
    }
    stats.changed_pages = out.len() as u64;
    Ok(out)
}

/// The error for a walk step outside the id space, naming the mapping page (of either
/// side) it was taken from.
fn out_of_range(a: &Side<'_>, na: NodeRef, b: &Side<'_>, nb: NodeRef, why: &str) -> TreeError {
    match (na, nb) {
        (NodeRef::Real(x), _) => a.bad(x, why.into()),
        (_, NodeRef::Real(y)) => b.bad(y, why.into()),
        // Virtual and absent nodes are never out of range (child 0 of the top).
        _ => TreeError::Slot {
            page: u32::MAX,
            what: why.into(),
            at: None,
        },
    }
}

fn top_level(s: &TreeSnapshot, stats: &mut DiffStats) -> TreeResult<Option<u8>> {
    let root = s.mapping.root();
    if root.is_none() {
        return Ok(None);
    }
    stats.mapping_pages += 1;
    Ok(Some(s.mapping_node(root)?.level))
}

/// The key-tree entries of the changed pages that are leaves on side `s`.
fn changed_entries(
    s: &TreeSnapshot,
    ids: &BTreeSet<PageId>,
    stats: &mut DiffStats,
) -> TreeResult<BTreeMap<Vec<u8>, Entry>> {
    let mut out = BTreeMap::new();
    for &id in ids {
        let raw = s.mapping.raw(id, s)?;
        let Some(Slot::Page(addr)) = Slot::decode(raw) else {
            continue;
        };
        let h = s.files.handle(&s.ranges, addr.file_id())?;
        let (k, payload, offset) = s.files.read_raw(&h, addr.page_index())?;
        if k != kind::LEAF {
            continue;
        }
        stats.leaves += 1;
        let view = LeafView::new(&payload)
            .map_err(|e| TreeError::corruption(h.path.clone(), offset, e.0))?;
        for e in view
            .entries()
            .map_err(|e| TreeError::corruption(h.path.clone(), offset, e.0))?
        {
            out.insert(e.key.clone(), e);
        }
    }
    Ok(out)
}

/// Every key whose entry differs from `a` to `b`, in key order.
pub fn diff(a: &TreeSnapshot, b: &TreeSnapshot) -> TreeResult<(Vec<KeyChange>, DiffStats)> {
    if !std::ptr::eq(a.files.as_ref(), b.files.as_ref()) && a.files.dir() != b.files.dir() {
        return Err(TreeError::InvalidArgument {
            what: "a diff compares two snapshots of the same partition".into(),
        });
    }
    let mut stats = DiffStats::default();
    let ids = changed_pages(a, b, &mut stats)?;
    let ea = changed_entries(a, &ids, &mut stats)?;
    let eb = changed_entries(b, &ids, &mut stats)?;
    let mut out = Vec::new();
    let mut ib = eb.into_iter().peekable();
    for (k, ea) in ea {
        while let Some((kb, nb)) = ib.next_if(|(kb, _)| *kb < k) {
            out.push((kb, Change::Added(nb)));
        }
        match ib.next_if(|(kb, _)| *kb == k) {
            Some((_, nb)) => {
                if !same_entry(a, &ea, b, &nb)? {
                    out.push((k, Change::Changed { old: ea, new: nb }));
                }
            }
            None => out.push((k, Change::Removed(ea))),
        }
    }
    out.extend(ib.map(|(k, e)| (k, Change::Added(e))));
    Ok((out, stats))
}

/// [`diff`] of two snapshots as reads see them, write buffers included: the trees' diff,
/// in which every key either buffer holds is replaced by the two entries reads resolve for
/// it (the buffered ops over that side's tree). So a diff of a branch with buffered writes
/// needs no checkpoint first, and costs the trees' divergence plus a lookup per buffered key.
pub fn diff_buffered(
    a: &TreeSnapshot,
    b: &TreeSnapshot,
) -> TreeResult<(Vec<KeyChange>, DiffStats)> {
    let (tree, stats) = diff(a, b)?;
    let keys = buffered_keys(a, b);
    if keys.is_empty() {
        return Ok((tree, stats));
    }
    let (ra, rb) = (a.buffered(), b.buffered());
    let mut buffered = Vec::new();
    for k in &keys {
        let change = match (ra.get(k)?, rb.get(k)?) {
            (None, None) => continue,
            (Some(old), None) => Change::Removed(old),
            (None, Some(new)) => Change::Added(new),
            (Some(old), Some(new)) => {
                if same_entry(a, &old, b, &new)? {
                    continue;
                }
                Change::Changed { old, new }
            }
        };
        buffered.push((k.clone(), change));
    }
    // Both sorted by key and disjoint: the tree's changes of unbuffered keys, and the rest.
    let mut out = Vec::with_capacity(tree.len() + buffered.len());
    let mut ib = buffered.into_iter().peekable();
    for (k, c) in tree.into_iter().filter(|(k, _)| !keys.contains(k)) {
        while let Some(x) = ib.next_if(|(kb, _)| *kb < k) {
            out.push(x);
        }
        out.push((k, c));
    }
    out.extend(ib);
    Ok((out, stats))
}

/// Every key the write buffer of `a` or of `b` holds an op for.
fn buffered_keys(a: &TreeSnapshot, b: &TreeSnapshot) -> BTreeSet<Vec<u8>> {
    [a, b]
        .into_iter()
        .flat_map(|s| s.buffer.runs())
        .flat_map(|run| run.mutations())
        .map(|m| m.key.clone())
        .collect()
}

/// A change as reads see it (see [`visible_at`]), with the delete behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisibleChange {
    /// The key.
    pub key: Vec<u8>,
    /// The change between the live entries.
    pub change: Change,
    /// When the key ends absent because it was deleted: the tombstone `b` holds for it,
    /// whose timestamp is when it was deleted. `None` when it ends live, or absent without
    /// a tombstone (expired, truncated, purged).
    pub tombstone: Option<Entry>,
}

/// [`visible_at`], keeping with each change that ends at a delete the tombstone it ends
/// at: a delete is a write with a timestamp, so merges and diffs must not lose it.
pub fn visible_changes_at(changes: Vec<KeyChange>, now_ms: u64) -> Vec<VisibleChange> {
    changes
        .into_iter()
        .filter_map(|(key, c)| {
            let tombstone = match &c {
                Change::Added(e) | Change::Changed { new: e, .. } if e.is_tombstone() => {
                    Some(e.clone())
                }
                _ => None,
            };
            let change = match c {
                Change::Added(e) => e.is_live_at(now_ms).then_some(Change::Added(e))?,
                Change::Removed(e) => e.is_live_at(now_ms).then_some(Change::Removed(e))?,
                Change::Changed { old, new } => {
                    match (old.is_live_at(now_ms), new.is_live_at(now_ms)) {
                        (true, true) => Change::Changed { old, new },
                        (true, false) => Change::Removed(old),
                        (false, true) => Change::Added(new),
                        (false, false) => return None,
                    }
                }
            };
            Some(VisibleChange {
                key,
                change,
                tombstone,
            })
        })
        .collect()
}

/// The changes as they look at `now_ms`, when an entry that has expired — or is a
/// tombstone — counts as absent (the rule reads follow, see [`Entry::is_live_at`]): a
/// change between two absent entries disappears, one from an absent entry to a live one is
/// an addition, and one from a live entry to an absent one (or to nothing) is a removal.
///
/// Expiry deletes expired keys lazily and per branch, so two branches may hold the same
/// logical state with and without the expired entries: without this, a diff would show
/// keys no read returns, and a merge would see conflicts over keys neither side has.
pub fn visible_at(changes: Vec<KeyChange>, now_ms: u64) -> Vec<KeyChange> {
    visible_changes_at(changes, now_ms)
        .into_iter()
        .map(|v| (v.key, v.change))
        .collect()
}

/// Whether two entries hold the same value, timestamp and expiry (overflow values compared
/// by identity first, by content when their pages differ; a buffered value, always inline,
/// against the other side's overflow value by content).
pub fn same_entry(a: &TreeSnapshot, ea: &Entry, b: &TreeSnapshot, eb: &Entry) -> TreeResult<bool> {
    use crate::page::leaf::ValueLoc;
    if ea.timestamp != eb.timestamp || ea.expire_at != eb.expire_at {
        return Ok(false);
    }
    match (&ea.value, &eb.value) {
        (ValueLoc::Inline(x), ValueLoc::Inline(y)) => Ok(x == y),
        (ValueLoc::Tombstone, ValueLoc::Tombstone) => Ok(true),
        (
            ValueLoc::Overflow {
                len: la,
                first: fa,
                pages: pa,
            },
            ValueLoc::Overflow {
                len: lb,
                first: fb,
                pages: pb,
            },
        ) => {
            if la != lb {
                return Ok(false);
            }
            let same_pages = fa == fb && pa == pb && {
                let ia = slot_identity(a, *fa, a.mapping.raw(*fa, a)?)?;
                let ib = slot_identity(b, *fb, b.mapping.raw(*fb, b)?)?;
                ia == ib
            };
            if same_pages {
                return Ok(true);
            }
            Ok(a.read_overflow(*fa, *pa, *la)? == b.read_overflow(*fb, *pb, *lb)?)
        }
        (ValueLoc::Inline(x), ValueLoc::Overflow { len, first, pages }) => {
            Ok(x.len() as u64 == *len && *x == b.read_overflow(*first, *pages, *len)?)
        }
        (ValueLoc::Overflow { len, first, pages }, ValueLoc::Inline(y)) => {
            Ok(y.len() as u64 == *len && *y == a.read_overflow(*first, *pages, *len)?)
        }
        _ => Ok(false),
    }
}
