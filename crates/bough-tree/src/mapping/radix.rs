//! The checked descent of an on-disk mapping radix tree: [`Radix`], the rules every step
//! checks (a checksum-valid page can still be hostile), and [`walk_radix`], the one walk
//! that applies them.

use super::*;

/// Where a mapping node sits in the radix tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodePos {
    /// The page.
    pub addr: PageAddr,
    /// Its level: 0 holds slots, `k > 0` holds children of level `k - 1`.
    pub level: u8,
    /// The first chunk (level-0 node number) it covers.
    pub first_chunk: u64,
}

/// The rules every descent of an on-disk mapping radix tree checks (ARCHITECTURE.md,
/// invariant 2). A checksum-valid page can still be hostile — a buggy writer or a crafted
/// file — so nothing a page says is trusted: a child must be exactly one level below its
/// parent (so levels strictly decrease, no walk can revisit an ancestor, and depth is at
/// most the root's level, itself at most [`MAX_MAPPING_LEVEL`]), a child's first chunk is
/// computed with checked arithmetic and must lie in the id space, and a node must hold
/// exactly `fanout` slots. The checks are pure; the caller names the file and offset.
#[derive(Debug, Clone, Copy)]
pub struct Radix {
    pub(super) fanout: u64,
    /// The last chunk a page id (`u32`) can fall in.
    pub(super) last_chunk: u64,
}

/// Deepest level a mapping page may claim (the page decoder refuses deeper).
pub const MAX_MAPPING_LEVEL: u8 = 8;

impl Radix {
    /// The rules for a table of `fanout` slots per page.
    pub fn new(fanout: usize) -> Radix {
        let fanout = (fanout as u64).max(1);
        Radix {
            fanout,
            last_chunk: u64::from(u32::MAX) / fanout,
        }
    }

    /// Checks a node read for position `level` (`None`: a root, whose level the page
    /// gives). Returns the node's level.
    pub fn check(&self, want: Option<u8>, node: &MappingNode) -> Result<u8, String> {
        if node.slots.len() as u64 != self.fanout {
            return Err(format!(
                "mapping node has {} slots, the partition's fanout is {}",
                node.slots.len(),
                self.fanout
            ));
        }
        if node.level > MAX_MAPPING_LEVEL {
            return Err(format!("mapping node level {} is too deep", node.level));
        }
        match want {
            Some(w) if node.level != w => Err(format!(
                "mapping node level {} where its parent needs level {w}",
                node.level
            )),
            _ => Ok(node.level),
        }
    }

    /// Chunks a node at `level` covers, if that fits in a `u64`.
    pub fn span(&self, level: u8) -> Option<u64> {
        self.fanout.checked_pow(u32::from(level))
    }

    /// The position of child `i` of the interior node at `parent` whose slot holds `raw`
    /// (`Ok(None)`: no child there). The child's first chunk must lie in the id space.
    pub fn child(&self, parent: NodePos, i: usize, raw: u64) -> Result<Option<NodePos>, String> {
        if raw == 0 {
            return Ok(None);
        }
        let Some(level) = parent.level.checked_sub(1) else {
            return Err("a level-0 mapping node has no children".into());
        };
        let addr = PageAddr::from_u64(raw)
            .filter(|a| !a.is_none())
            .ok_or_else(|| format!("mapping interior slot {i} holds {raw:#x}, not an address"))?;
        let first_chunk = self
            .span(level)
            .and_then(|span| span.checked_mul(i as u64))
            .and_then(|off| parent.first_chunk.checked_add(off))
            .filter(|&c| c <= self.last_chunk)
            .ok_or_else(|| {
                format!(
                    "mapping interior slot {i} at level {} points past the id space",
                    parent.level
                )
            })?;
        Ok(Some(NodePos {
            addr,
            level,
            first_chunk,
        }))
    }
}

/// The one checked walk of an on-disk mapping radix tree: visits every node under `root`
/// (pre-order, children in slot order, so level-0 nodes come in chunk order) and descends
/// into a node's children when `visit` returns `true`. Every step follows [`Radix`]'s rules
/// and a page reached twice in one tree is refused too, so a hostile page (pointing at
/// itself, an ancestor or a sibling's subtree, with a crafted level, or past the id space)
/// is a `Corruption` naming its file and offset: the walk never loops, never wraps, and
/// reads each page at most once. Memory: a stack of at most `fanout` entries per level.
#[expect(
    clippy::indexing_slicing,
    reason = "`first` is the stack length before this node's children were pushed"
)]
pub fn walk_radix(
    root: PageAddr,
    fanout: usize,
    src: &dyn NodeSource,
    visit: &mut dyn FnMut(NodePos, &MappingNode) -> TreeResult<bool>,
) -> TreeResult<()> {
    if root.is_none() {
        return Ok(());
    }
    let radix = Radix::new(fanout);
    let bad = |addr: PageAddr, why: String| {
        let (file, offset) = src.locate(addr);
        TreeError::corruption(file, offset, why)
    };
    let mut seen: HashSet<u64> = HashSet::new();
    // (position, the level its parent requires; None for the root)
    let mut stack = vec![(
        NodePos {
            addr: root,
            level: 0,
            first_chunk: 0,
        },
        None,
    )];
    while let Some((mut pos, want)) = stack.pop() {
        if !seen.insert(pos.addr.to_u64()) {
            return Err(bad(
                pos.addr,
                "mapping page reached twice in one tree (a cycle or a shared subtree)".into(),
            ));
        }
        let node = src.mapping_node(pos.addr)?;
        pos.level = radix.check(want, &node).map_err(|why| bad(pos.addr, why))?;
        if !visit(pos, &node)? || pos.level == 0 {
            continue;
        }
        let first = stack.len();
        for (i, &raw) in node.slots.iter().enumerate() {
            if let Some(child) = radix.child(pos, i, raw).map_err(|why| bad(pos.addr, why))? {
                stack.push((child, Some(child.level)));
            }
        }
        // Popped in slot order.
        stack[first..].reverse();
    }
    Ok(())
}

/// A `Corruption` naming the file and offset of the page at `addr`.
pub(crate) fn located(src: &dyn NodeSource, addr: PageAddr, why: String) -> TreeError {
    let (file, offset) = src.locate(addr);
    TreeError::corruption(file, offset, why)
}

/// Chunks covered by a node at `level` (level 0 covers one chunk).
pub(crate) fn capacity_chunks(fanout: usize, level: u8) -> u64 {
    (fanout as u64).saturating_pow(u32::from(level))
}
