//! Applying a sorted batch: one walk down the tree per batch, splitting, merging and
//! rebalancing the pages it changes, and shrinking the root when it can.

use super::*;
use crate::error::{TreeError, TreeResult};

/// Applies a sorted batch of distinct-key mutations; returns the new root.
#[expect(
    clippy::indexing_slicing,
    reason = "indices into this walk's own slot, end and child vectors, bounded by the loops over them; a decoded index node has keys.len() + 1 children"
)]
pub fn apply(
    t: &mut dyn TreeWrite,
    root: PageId,
    muts: &[Mutation],
    applied: &mut Applied,
) -> TreeResult<PageId> {
    debug_assert!(muts.is_sorted_by(|a, b| a.key < b.key));
    if muts.is_empty() {
        return Ok(root);
    }
    let mut children = if root == NO_PAGE {
        let mut build = LeafBuild::default();
        let empty = LeafView::new(EMPTY_LEAF).map_err(|e| TreeError::InvalidArgument {
            // Always decodes; a failure is a bug here, not bad bytes.
            what: format!("the empty leaf does not decode: {}", e.0),
        })?;
        merge_leaf(t, &mut build, None, empty, muts, applied)?;
        if build.is_empty() {
            return Ok(NO_PAGE);
        }
        // A fresh tree is one long append: fill its leaves.
        write_leaves(t, None, &build, true)?
    } else {
        let mut walk = Walk::default();
        let node = t.node(root)?;
        apply_node(t, (root, node), muts, applied, KeyRange::ALL, 0, &mut walk)?
    };
    // Grow: more than one node at the top becomes a new root level.
    while children.len() > 1 {
        let node = IndexNode::new(
            children
                .iter()
                .skip(1)
                .map(|(k, _)| k.as_deref().unwrap_or_default()),
            children.iter().map(|(_, c)| *c).collect(),
        );
        children = write_index(t, None, node)?;
    }
    let Some((_, mut new_root)) = children.pop() else {
        return Ok(NO_PAGE);
    };
    // Shrink: an index root with one child is replaced by that child (a tree is at most
    // MAX_DEPTH deep: a chain of one-child pages that is deeper is a cycle).
    for _ in 0..=MAX_DEPTH {
        match t.node(new_root)? {
            Node::Index(n) if n.children.len() == 1 => {
                t.free(new_root)?;
                new_root = n.children[0];
            }
            _ => return Ok(new_root),
        }
    }
    Err(bad_page(
        t,
        new_root,
        "a chain of index pages with one child each, deeper than the maximum depth (a cycle?)",
    ))
}

/// What the write path's walk has learned of the tree it changes.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    /// The leaves' depth (see [`crate::bounds`]).
    pub(super) levels: Levels,
}

/// Replacement of one node: (low key, id) pairs; the first low key is `None` (the parent
/// keeps its separator).
pub(crate) type Replacement = Vec<(Option<Vec<u8>>, PageId)>;

/// Applies `muts` (keys inside `range`) to page `id`, read as `node` (the caller has read
/// it to tell a leaf from an index page), at `depth`, which its path holds to
/// `range` and to the leaves' depth (see [`crate::bounds`]); the recursion follows only
/// children that get mutations, each with the part of `muts` in its range.
pub(crate) fn apply_node(
    t: &mut dyn TreeWrite,
    (id, node): (PageId, Node),
    muts: &[Mutation],
    applied: &mut Applied,
    range: KeyRange<'_>,
    depth: usize,
    walk: &mut Walk,
) -> TreeResult<Replacement> {
    match node {
        Node::Leaf(p) => {
            walk.levels.leaf(t, id, depth)?;
            let view = LeafView::new(&p).map_err(|e| bad_page(t, id, e.0))?;
            let mut build = LeafBuild::with_capacity(view.len() + muts.len(), p.len());
            let appended = merge_leaf(t, &mut build, Some(id), view, muts, applied)?;
            // The mutations are inside the range: a key outside it came from the page.
            if let Some((first, last)) = build.key_ends(0..build.items.len()) {
                range.check_keys(t, id, first, last)?;
            }
            if build.is_empty() {
                t.free(id)?;
                return Ok(Vec::new());
            }
            write_leaves(t, Some(id), &build, appended)
        }
        Node::Index(n) => {
            walk.levels.index(t, id, depth)?;
            range.check_index(t, id, &n)?;
            // The replacements of the children that got mutations, by child index. Leaves
            // next to each other that all get mutations are merged as one run.
            let mut changed: Vec<(usize, Replacement)> = Vec::new();
            let mut run: Vec<RunLeaf<'_>> = Vec::new();
            let mut rest = muts;
            for (i, &child) in n.children.iter().enumerate() {
                let take = match n.key(i) {
                    Some(upper) => rest.partition_point(|m| m.key.as_slice() < upper),
                    None => rest.len(),
                };
                let (mine, later) = rest.split_at(take);
                rest = later;
                if mine.is_empty() {
                    apply_run(t, &mut run, applied, &mut changed)?;
                    continue;
                }
                let r = range.child(&n, i);
                match t.node(child)? {
                    Node::Leaf(page) => {
                        walk.levels.leaf(t, child, depth + 1)?;
                        run.push(RunLeaf {
                            slot: i,
                            id: child,
                            page,
                            muts: mine,
                            range: r,
                        });
                    }
                    node @ Node::Index(_) => {
                        apply_run(t, &mut run, applied, &mut changed)?;
                        let repl = apply_node(t, (child, node), mine, applied, r, depth + 1, walk)?;
                        changed.push((i, repl));
                    }
                }
            }
            apply_run(t, &mut run, applied, &mut changed)?;
            // Every changed child was rewritten under its own id and is too large for
            // `rebalance` to merge: this page stays exactly as it is, so it is neither
            // rebuilt (no separator copied) nor written.
            if kept_in_place(t, &n, &changed)? {
                return Ok(vec![(None, id)]);
            }
            let mut slots: Vec<(Option<Vec<u8>>, PageId, bool)> =
                Vec::with_capacity(n.children.len() + changed.len());
            let mut changed = changed.into_iter().peekable();
            for (i, &child) in n.children.iter().enumerate() {
                let low = i.checked_sub(1).and_then(|j| n.key(j)).map(<[u8]>::to_vec);
                let Some((_, repl)) = changed.next_if(|(j, _)| *j == i) else {
                    slots.push((low, child, false));
                    continue;
                };
                for (j, (k, c)) in repl.into_iter().enumerate() {
                    let key = if j == 0 { low.clone() } else { k };
                    slots.push((key, c, true));
                }
            }
            if slots.is_empty() {
                t.free(id)?;
                return Ok(Vec::new());
            }
            rebalance(t, &mut slots, range)?;
            let node = IndexNode::new(
                slots
                    .iter()
                    .skip(1)
                    .map(|(k, _, _)| k.as_deref().unwrap_or_default()),
                slots.iter().map(|(_, c, _)| *c).collect(),
            );
            // A rewritten child keeps its logical id (only its mapping slot moves), so when
            // no child split, merged or went away this page holds exactly what it held:
            // writing it again would cost a page per level per commit, and would make it
            // differ physically from every branch sharing it, so diffs would read it too.
            if node == *n {
                return Ok(vec![(None, id)]);
            }
            write_index(t, Some(id), node)
        }
    }
}

/// A leaf that gets mutations, next to the one before it in the run (children of one
/// index page, in order).
pub(crate) struct RunLeaf<'a> {
    slot: usize,
    id: PageId,
    page: Arc<[u8]>,
    muts: &'a [Mutation],
    range: KeyRange<'a>,
}

/// Merges a run of neighbouring leaves that all get mutations, and empties `run`. The
/// merged entries are cut into leaves across the old leaves' bounds when that takes fewer
/// leaves than cutting each on its own: after a large checkpoint's random writes each leaf
/// would otherwise split into two part-full ones, and leaves filled to the byte are
/// fewer bytes for every later checkpoint to rewrite. Otherwise each leaf is cut on its
/// own, so a small commit changes no bound it does not have to (and its parent stays).
#[expect(
    clippy::indexing_slicing,
    reason = "ends and appended have one element per leaf of the run; the ranges lie inside pieces"
)]
pub(crate) fn apply_run(
    t: &mut dyn TreeWrite,
    run: &mut Vec<RunLeaf<'_>>,
    applied: &mut Applied,
    changed: &mut Vec<(usize, Replacement)>,
) -> TreeResult<()> {
    if run.is_empty() {
        return Ok(());
    }
    let leaves = std::mem::take(run);
    let entries: usize = leaves.iter().map(|l| l.muts.len()).sum();
    let bytes: usize = leaves.iter().map(|l| l.page.len()).sum();
    let mut build = LeafBuild::with_capacity(entries, bytes);
    let mut ends = Vec::with_capacity(leaves.len());
    let mut appended = Vec::with_capacity(leaves.len());
    for l in &leaves {
        let start = build.items.len();
        let view = LeafView::new(&l.page).map_err(|e| bad_page(t, l.id, e.0))?;
        appended.push(merge_leaf(
            t,
            &mut build,
            Some(l.id),
            view,
            l.muts,
            applied,
        )?);
        // The mutations are inside the range: a key outside it came from the page.
        if let Some((first, last)) = build.key_ends(start..build.items.len()) {
            l.range.check_keys(t, l.id, first, last)?;
        }
        ends.push(build.items.len());
    }
    let pieces = build.pieces();
    let cap = t.payload_capacity();
    let mut alone = Vec::with_capacity(leaves.len());
    let mut start = 0;
    for (k, &end) in ends.iter().enumerate() {
        alone.push((start != end).then(|| plan_leaves(&pieces[start..end], cap, appended[k])));
        start = end;
    }
    if leaves.len() > 1 {
        let alone_count: usize = alone.iter().flatten().map(Vec::len).sum();
        let last_appended = appended.last().copied().unwrap_or(false);
        let whole = plan_leaves(&pieces, cap, last_appended);
        // Fewer leaves than alone means some entries are left, so the run is not empty.
        if whole.len() < alone_count {
            let ids: Vec<PageId> = leaves.iter().map(|l| l.id).collect();
            let repl = write_groups(t, &ids, &pieces, &whole)?;
            let mut slots = leaves.iter().map(|l| l.slot);
            if let Some(first) = slots.next() {
                changed.push((first, repl));
            }
            changed.extend(slots.map(|s| (s, Vec::new())));
            return Ok(());
        }
    }
    let mut start = 0;
    for ((l, end), plan) in leaves.iter().zip(ends).zip(alone) {
        let repl = match plan {
            None => {
                t.free(l.id)?;
                Vec::new()
            }
            Some(groups) => write_groups(t, &[l.id], &pieces[start..end], &groups)?,
        };
        changed.push((l.slot, repl));
        start = end;
    }
    Ok(())
}

/// Whether an index page keeps every child as it was: each changed child came back as
/// itself alone (rewritten under its logical id) and is at least the size below which
/// [`rebalance`] would try to merge it.
pub(crate) fn kept_in_place(
    t: &dyn TreeWrite,
    n: &IndexNode,
    changed: &[(usize, Replacement)],
) -> TreeResult<bool> {
    let small = t.payload_capacity() / 4;
    for (i, repl) in changed {
        match repl.as_slice() {
            [(None, c)] if n.children.get(*i) == Some(c) && node_size(t, *c)? >= small => {}
            _ => return Ok(false),
        }
    }
    Ok(true)
}

/// Merges a changed child that became small with a neighbour when the two fit in one
/// page, so deletes do not leave a tree of nearly empty pages.
#[expect(
    clippy::indexing_slicing,
    reason = "indices into this walk's own slot, end and child vectors, bounded by the loops over them; a decoded index node has keys.len() + 1 children"
)]
pub(crate) fn rebalance(
    t: &mut dyn TreeWrite,
    slots: &mut Vec<(Option<Vec<u8>>, PageId, bool)>,
    range: KeyRange<'_>,
) -> TreeResult<()> {
    let cap = t.payload_capacity();
    let mut i = 0;
    while i < slots.len() && slots.len() > 1 {
        if !slots[i].2 || node_size(t, slots[i].1)? >= cap / 4 {
            i += 1;
            continue;
        }
        // Merge with the right neighbour, or the left one for the last child.
        let (l, r) = if i + 1 < slots.len() {
            (i, i + 1)
        } else {
            (i - 1, i)
        };
        // Only when the pair fits in one page: evening out a small node with a full
        // neighbour would undo what an ascending load just filled (every leaf would end
        // half empty), and the pair's average fill is at least half a page anyway.
        if node_size(t, slots[l].1)? + node_size(t, slots[r].1)? > cap {
            i += 1;
            continue;
        }
        let (lid, rid) = (slots[l].1, slots[r].1);
        if lid == rid {
            return Err(bad_page(
                t,
                rid,
                "node reached twice: one index page names it as two children",
            ));
        }
        // The neighbour was not walked: hold both to the ranges their slots give them
        // before their contents move into one page.
        let (lr, rr) = (slot_range(slots, l, range), slot_range(slots, r, range));
        let (left, right) = (t.node(lid)?, t.node(rid)?);
        let repl = match (left, right) {
            (Node::Leaf(a), Node::Leaf(b)) => {
                let mut build = LeafBuild::with_capacity(0, a.len() + b.len());
                let mut ends = [0; 2];
                for (k, (page, id)) in [(&a, lid), (&b, rid)].into_iter().enumerate() {
                    let bad = |e: crate::page::CodecError| bad_page(t, id, e.0);
                    let mut c = LeafView::new(page).map_err(bad)?.cursor();
                    while c.advance().map_err(bad)? {
                        build.push_old(&c);
                    }
                    ends[k] = build.items.len();
                }
                for (id, part, r) in [(lid, 0..ends[0], lr), (rid, ends[0]..ends[1], rr)] {
                    if let Some((first, last)) = build.key_ends(part) {
                        r.check_keys(t, id, first, last)?;
                    }
                }
                t.free(rid)?;
                write_leaves(t, Some(lid), &build, false)?
            }
            (Node::Index(a), Node::Index(b)) => {
                lr.check_index(t, lid, &a)?;
                rr.check_index(t, rid, &b)?;
                let sep = slots[r].0.clone().unwrap_or_default();
                let mut node = (*a).clone();
                node.append(&sep, &b);
                t.free(rid)?;
                write_index(t, Some(lid), node)?
            }
            _ => {
                return Err(bad_page(
                    t,
                    rid,
                    "child level mismatch: siblings of different kinds",
                ));
            }
        };
        let low = slots[l].0.clone();
        let new: Vec<_> = repl
            .into_iter()
            .enumerate()
            .map(|(j, (k, c))| (if j == 0 { low.clone() } else { k }, c, false))
            .collect();
        slots.splice(l..=r, new);
        i = l + 1;
    }
    Ok(())
}

/// The key range of slot `j` of an index page being rebuilt whose own range is `parent`.
#[expect(
    clippy::indexing_slicing,
    reason = "indices into this walk's own slot, end and child vectors, bounded by the loops over them; a decoded index node has keys.len() + 1 children"
)]
pub(crate) fn slot_range<'a>(
    slots: &'a [(Option<Vec<u8>>, PageId, bool)],
    j: usize,
    parent: KeyRange<'a>,
) -> KeyRange<'a> {
    KeyRange {
        lo: if j == 0 {
            parent.lo
        } else {
            slots[j].0.as_deref()
        },
        hi: slots.get(j + 1).and_then(|s| s.0.as_deref()).or(parent.hi),
    }
}

pub(crate) fn node_size(t: &dyn TreeRead, id: PageId) -> TreeResult<usize> {
    Ok(match t.node(id)? {
        Node::Leaf(p) => p.len(),
        Node::Index(n) => n.encoded_len(),
    })
}
