//! Writing merged entries out as pages: leaves cut by exact encoded size (the last two
//! balanced), and the index pages above them.

use super::*;
use crate::error::TreeResult;

/// Writes the built entries as one or more leaves (the first reusing `id`); see
/// [`plan_leaves`] for where they are cut.
pub(crate) fn write_leaves(
    t: &mut dyn TreeWrite,
    id: Option<PageId>,
    build: &LeafBuild<'_>,
    appended: bool,
) -> TreeResult<Replacement> {
    let pieces = build.pieces();
    let groups = plan_leaves(&pieces, t.payload_capacity(), appended);
    write_groups(t, id.as_slice(), &pieces, &groups)
}

/// Where a run of entries is cut into leaves. By the entries' exact encoded size, so
/// leaves fill to the byte: a worst-case estimate (10-byte varints, no prefix sharing) left
/// leaves about a third full after random overwrites. `appended`: every new key landed
/// after the old entries (a sequential load); the leaves are then left full instead of the
/// last two evened out, which would leave every leaf of an ascending load half empty.
#[expect(
    clippy::indexing_slicing,
    reason = "i >= 1 where pieces[i - 1] is read (g > 0 when i is not a restart point)"
)]
pub(crate) fn plan_leaves(
    pieces: &[Piece<'_>],
    cap: usize,
    appended: bool,
) -> Vec<std::ops::Range<usize>> {
    // Each leaf is a contiguous range of the pieces.
    let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
    let mut start = 0;
    let mut size = leaf::LEAF_OVERHEAD;
    for (i, p) in pieces.iter().enumerate() {
        let g = i - start;
        let prev = (!g.is_multiple_of(leaf::RESTART_INTERVAL)).then(|| pieces[i - 1].key);
        let n = p.len_after(prev);
        if size + n > cap && g > 0 {
            groups.push(start..i);
            start = i;
            size = leaf::LEAF_OVERHEAD + p.len_after(None);
        } else {
            size += n;
        }
    }
    groups.push(start..pieces.len());
    if !appended {
        balance_last(pieces, &mut groups, cap);
    }
    groups
}

/// Writes each group of `pieces` as a leaf, reusing the logical ids of `reuse` in order
/// (a group beyond them gets a new id; an id left over is freed). The first leaf keeps the
/// low key its parent already has for it (`None`).
#[expect(
    clippy::indexing_slicing,
    reason = "the groups come from plan_leaves over these pieces and lie inside them"
)]
pub(crate) fn write_groups(
    t: &mut dyn TreeWrite,
    reuse: &[PageId],
    pieces: &[Piece<'_>],
    groups: &[std::ops::Range<usize>],
) -> TreeResult<Replacement> {
    let mut out = Vec::with_capacity(groups.len());
    let mut ids = reuse.iter().copied();
    for g in groups {
        let group = &pieces[g.clone()];
        let low = match group.first() {
            Some(p) if !out.is_empty() => Some(p.key.to_vec()),
            _ => None,
        };
        let pid = t.put_leaf(ids.next(), leaf::encode_pieces(group))?;
        out.push((low, pid));
    }
    for left_over in ids {
        t.free(left_over)?;
    }
    Ok(out)
}

/// Avoids a tiny last group after a split by evening out the last two by bytes. Entries
/// move only while the last group still fits in `cap` (moving entries shifts restart
/// points, so the fit is checked on the exact encoding).
#[expect(
    clippy::indexing_slicing,
    reason = "the group and piece ranges are built here over `pieces` and cover it exactly; n >= 2 where two groups are read"
)]
pub(crate) fn balance_last(
    pieces: &[Piece<'_>],
    groups: &mut [std::ops::Range<usize>],
    cap: usize,
) {
    let n = groups.len();
    if n < 2 {
        return;
    }
    let (prev, last) = (groups[n - 2].clone(), groups[n - 1].clone());
    let (a, b) = (
        leaf::encoded_len_pieces(&pieces[prev.clone()]),
        leaf::encoded_len_pieces(&pieces[last.clone()]),
    );
    if b * 2 >= a {
        return;
    }
    // Move entries off the end of the second-to-last group until the two are about even.
    let mut moved = 0;
    let mut moved_bytes = 0;
    while moved + 1 < prev.len() {
        let n_bytes = pieces[prev.end - 1 - moved].len_after(None);
        if b + moved_bytes + n_bytes > a.saturating_sub(moved_bytes + n_bytes) {
            break;
        }
        moved_bytes += n_bytes;
        moved += 1;
    }
    while moved > 0 {
        let start = prev.end - moved;
        if leaf::encoded_len_pieces(&pieces[start..last.end]) <= cap {
            groups[n - 2].end = start;
            groups[n - 1].start = start;
            return;
        }
        moved -= 1;
    }
}

/// Writes an index node, splitting it if it does not fit.
#[expect(
    clippy::indexing_slicing,
    reason = "the group and piece ranges are built here over `pieces` and cover it exactly; n >= 2 where two groups are read"
)]
pub(crate) fn write_index(
    t: &mut dyn TreeWrite,
    id: Option<PageId>,
    node: IndexNode,
) -> TreeResult<Replacement> {
    let cap = t.payload_capacity();
    if node.encoded_len() <= cap {
        let pid = t.put_index(id, node)?;
        return Ok(vec![(None, pid)]);
    }
    // Split into pieces of at most half a page each; separators between pieces move up.
    let half = cap / 2;
    let mut out: Replacement = Vec::new();
    let mut reuse = id;
    let mut cur = IndexNode::default();
    cur.children.push(node.children[0]);
    let mut cur_low: Option<Vec<u8>> = None;
    for (k, &c) in node.keys().zip(node.children.iter().skip(1)) {
        if cur.encoded_len() + IndexNode::slot_len(k) > half && cur.children.len() >= 2 {
            let pid = t.put_index(reuse.take(), std::mem::take(&mut cur))?;
            out.push((cur_low.take(), pid));
            cur_low = Some(k.to_vec());
            cur.children = vec![c];
        } else {
            cur.push(k, c);
        }
    }
    let pid = t.put_index(reuse.take(), cur)?;
    out.push((cur_low, pid));
    Ok(out)
}
