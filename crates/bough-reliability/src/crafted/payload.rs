//! Hostile contents under a valid checksum: what each [`Craft`] writes into a page of its
//! role, and the raw page reads and writes a trial uses.

use super::*;

/// The hostile payload for `c`, or `None` when `craft` does not apply to it.
pub(crate) fn craft_payload(c: &Candidate, craft: Craft, r: &mut Rng) -> Option<Vec<u8>> {
    let cap = max_payload(PAGE_SIZE);
    let out = match (&c.role, craft) {
        (
            Role::Mapping {
                addr,
                level,
                parent,
            },
            _,
        ) => {
            let mut n = MappingNode::decode(&c.payload, fanout(cap)).ok()?;
            let last = n.slots.len().checked_sub(1)?;
            let i = r.below(n.slots.len() as u64) as usize;
            match craft {
                Craft::MappingSelf => {
                    n.level = (*level).max(1);
                    n.slots[i] = addr.to_u64();
                }
                Craft::MappingAncestor => {
                    n.level = (*level).max(1);
                    n.slots[i] = parent.unwrap_or(*addr).to_u64();
                }
                Craft::MappingLevel => {
                    n.level = match r.below(3) {
                        0 => level.checked_sub(1).unwrap_or(2),
                        1 => level + 1,
                        _ => 8,
                    };
                }
                Craft::MappingOutOfRange => {
                    if *level == 0 {
                        // A page in a file no range of the manifest names.
                        n.slots[last] = PageAddr::new(0xFF_FFFF, 1)?.to_u64();
                    } else {
                        n.level = 3 + r.below(6) as u8;
                        n.slots[last] = addr.to_u64();
                    }
                }
                Craft::MappingBadSlot => {
                    // A used slot if there is one: bit 63 with more than the 32 bits a
                    // free-chain link has (level 0), or any free link (interior).
                    let used: Vec<usize> =
                        (0..n.slots.len()).filter(|&j| n.slots[j] != 0).collect();
                    let j = *r.pick(&used).unwrap_or(&i);
                    n.slots[j] = 1 << 63 | 1 << 40 | 7;
                }
                _ => return None,
            }
            n.encode()
        }
        (
            Role::Tree { id, parent },
            Craft::IndexSelf | Craft::IndexAncestor | Craft::IndexOutOfRange,
        ) if c.kind == kind::INDEX => {
            let mut n = IndexNode::decode(&c.payload).ok()?;
            let i = r.below(n.children.len() as u64) as usize;
            n.children[i] = match craft {
                Craft::IndexSelf => *id,
                Craft::IndexAncestor => parent.unwrap_or(*id),
                _ => NO_PAGE - 1 - r.below(1000) as u32,
            };
            n.encode()
        }
        (Role::Tree { .. }, Craft::LeafRestart) if c.kind == kind::LEAF => {
            let mut p = c.payload.clone();
            if LeafView::new(&p).ok()?.is_empty() || p.len() < 6 {
                return None;
            }
            let bad = [0xFFFFu16, 0, 3][r.below(3) as usize];
            p[4..6].copy_from_slice(&bad.to_le_bytes());
            p
        }
        (Role::Tree { id, .. }, Craft::LeafOverflowSelf | Craft::LeafOverflowOutOfRange)
            if c.kind == kind::LEAF =>
        {
            let mut entries = LeafView::new(&c.payload).ok()?.entries().ok()?;
            let values: Vec<usize> = (0..entries.len())
                .filter(|&j| !entries[j].is_tombstone())
                .collect();
            let j = *r.pick(&values)?;
            let first = if craft == Craft::LeafOverflowSelf {
                *id
            } else {
                NO_PAGE - 1 - r.below(1000) as u32
            };
            entries[j].value = ValueLoc::Overflow {
                len: 10,
                first,
                pages: 1,
            };
            leaf::encode(&entries)
        }
        _ => return None,
    };
    (out.len() <= cap && out != c.payload).then_some(out)
}

/// Writes `payload` as page `index` of `path`, sealed with a valid checksum.
pub(crate) fn write_page(
    image: &MemoryStorage,
    path: &str,
    index: u32,
    kind: u8,
    salt: FileSalt,
    payload: &[u8],
) -> Result<(), String> {
    let mut page = vec![0u8; PAGE_SIZE as usize];
    page[FRAME_HEADER_LEN..FRAME_HEADER_LEN + payload.len()].copy_from_slice(payload);
    seal_page(&mut page, salt, index, kind, payload.len()).map_err(err)?;
    let f = image.open(path, OpenOptions::write_create()).map_err(err)?;
    f.write_at(u64::from(index) * u64::from(PAGE_SIZE), &page)
        .map_err(err)?;
    f.sync().map_err(err)
}

pub(crate) fn read_page(image: &MemoryStorage, path: &str, index: u32) -> Result<Vec<u8>, String> {
    let f = image.open(path, OpenOptions::read()).map_err(err)?;
    let mut page = vec![0u8; PAGE_SIZE as usize];
    f.read_at(u64::from(index) * u64::from(PAGE_SIZE), &mut page)
        .map_err(err)?;
    Ok(page)
}
