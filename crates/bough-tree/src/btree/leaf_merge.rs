//! Merging a batch into one leaf: the kept entries are copied as byte ranges of the old
//! leaf (never decoded into owned entries), new ones are encoded once, and superseded values
//! are released.

use super::*;
use crate::error::{TreeError, TreeResult};

/// The payload of a leaf without entries.
pub(crate) const EMPTY_LEAF: &[u8] = &[0, 0, 0, 0];

/// Where the bytes of a piece of a leaf being built are: borrowed (from an older page or
/// from a mutation), or in the build's scratch buffer, which only grows while the build
/// runs and is read once it is done.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Part<'a> {
    Borrowed(&'a [u8]),
    Scratch(usize, usize),
}

/// One entry of a leaf being built ([`Piece`] once the scratch buffer is done).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Staged<'a> {
    pub(super) key: Part<'a>,
    pub(super) meta: Part<'a>,
    pub(super) value: Part<'a>,
    pub(super) value_tail: &'a [u8],
}

/// The entries of the leaves a merge writes, kept as byte ranges: an entry kept from an
/// older page is copied from it as it is (its flags, timestamp, expiry and value bytes),
/// and only keys rebuilt from prefix compression and the headers of new entries are
/// written, into one scratch buffer for the whole build.
#[derive(Debug, Default)]
pub(crate) struct LeafBuild<'a> {
    pub(super) scratch: Vec<u8>,
    pub(super) items: Vec<Staged<'a>>,
}

impl<'a> LeafBuild<'a> {
    pub(super) fn with_capacity(entries: usize, scratch: usize) -> Self {
        LeafBuild {
            scratch: Vec::with_capacity(scratch),
            items: Vec::with_capacity(entries),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub(super) fn scratch(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> Part<'a> {
        let start = self.scratch.len();
        write(&mut self.scratch);
        Part::Scratch(start, self.scratch.len())
    }

    /// Keeps the cursor's current entry, copied from its page.
    pub(super) fn push_old(&mut self, c: &LeafCursor<'a>) {
        let Some(e) = c.current() else {
            return;
        };
        let (meta, value) = (e.meta_bytes(), e.value_bytes());
        let key = match c.key_in_page() {
            Some(k) => Part::Borrowed(k),
            None => self.scratch(|s| s.extend_from_slice(c.key())),
        };
        self.items.push(Staged {
            key,
            meta: Part::Borrowed(meta),
            value: Part::Borrowed(value),
            value_tail: &[],
        });
    }

    /// Adds a new entry; an inline value stays borrowed from the mutation.
    pub(super) fn push_new(
        &mut self,
        key: &'a [u8],
        timestamp: u64,
        expire_at: u64,
        value: ValueRef<'a>,
    ) {
        let meta = self.scratch(|s| leaf::encode_meta(s, timestamp, expire_at, value));
        let head = self.scratch(|s| leaf::encode_value_head(s, value));
        self.items.push(Staged {
            key: Part::Borrowed(key),
            meta,
            value: head,
            value_tail: leaf::inline_bytes(value),
        });
    }

    /// The first and the last key of the items in `part` (`None` when it is empty).
    pub(super) fn key_ends(&self, part: std::ops::Range<usize>) -> Option<(&[u8], &[u8])> {
        let key = |p: Part<'a>| -> &[u8] {
            match p {
                Part::Borrowed(b) => b,
                Part::Scratch(s, e) => &self.scratch[s..e],
            }
        };
        let items = self.items.get(part)?;
        Some((key(items.first()?.key), key(items.last()?.key)))
    }

    pub(super) fn pieces(&self) -> Vec<Piece<'_>> {
        let part = |p: Part<'a>| -> &[u8] {
            match p {
                Part::Borrowed(b) => b,
                Part::Scratch(s, e) => &self.scratch[s..e],
            }
        };
        self.items
            .iter()
            .map(|i| Piece {
                key: part(i.key),
                meta: part(i.meta),
                value: part(i.value),
                value_tail: i.value_tail,
            })
            .collect()
    }
}

/// What a merge needs of the entry a mutation meets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Existing<'a> {
    pub(super) timestamp: u64,
    pub(super) expire_at: u64,
    pub(super) value: ValueRef<'a>,
}

/// Merges mutations into a leaf's entries (last writer wins by timestamp), reading the
/// leaf with the byte-level cursor and keeping its entries as byte ranges. Returns whether
/// the leaf had entries and every new key landed after them (a sequential append). `leaf`
/// is the page `old` was read from (`None`: the empty leaf of a new tree), for errors.
pub(crate) fn merge_leaf<'a>(
    t: &mut dyn TreeWrite,
    build: &mut LeafBuild<'a>,
    leaf: Option<PageId>,
    old: LeafView<'a>,
    muts: &'a [Mutation],
    applied: &mut Applied,
) -> TreeResult<bool> {
    let inline_max = inline_limit(t.payload_capacity());
    let mut c = old.cursor();
    let mut has = c.advance().map_err(|e| bad_leaf(&*t, leaf, e))?;
    let had_entries = has;
    let mut appended = None;
    for m in muts {
        while has && c.key() < m.key.as_slice() {
            build.push_old(&c);
            has = c.advance().map_err(|e| bad_leaf(&*t, leaf, e))?;
        }
        appended.get_or_insert(had_entries && !has);
        let existing = c
            .current()
            .filter(|e| has && e.key == m.key.as_slice())
            .map(|e| Existing {
                timestamp: e.timestamp,
                expire_at: e.expire_at,
                value: e.value,
            });
        let wins = match (&existing, &m.op) {
            (None, _) => true,
            (Some(e), Op::Put { timestamp, .. }) | (Some(e), Op::Delete { timestamp, .. }) => {
                crate::lww::wins(*timestamp, e.timestamp)
            }
            (Some(_), Op::ForceDelete | Op::Replace { .. } | Op::ReplaceWithTombstone { .. }) => {
                true
            }
        };
        if existing.is_some() {
            if !wins {
                build.push_old(&c);
            }
            has = c.advance().map_err(|e| bad_leaf(&*t, leaf, e))?;
        }
        if !wins {
            applied.superseded += 1;
            continue;
        }
        if let Some(e) = &existing {
            release(t, &m.key, e, applied)?;
        }
        let was_live = existing.is_some_and(|e| !matches!(e.value, ValueRef::Tombstone));
        match &m.op {
            Op::Put {
                value,
                timestamp,
                expire_at,
            }
            | Op::Replace {
                value,
                timestamp,
                expire_at,
            } => {
                let loc = if m.key.len() + value.len() <= inline_max {
                    ValueRef::Inline(value)
                } else {
                    let (first, pages) = t.put_overflow(value)?;
                    ValueRef::Overflow {
                        len: value.len() as u64,
                        first,
                        pages,
                    }
                };
                if *expire_at != 0 {
                    applied.expiry_added.push((m.key.clone(), *expire_at));
                }
                applied.written += 1;
                build.push_new(&m.key, *timestamp, *expire_at, loc);
            }
            Op::Delete {
                timestamp,
                expire_at,
            }
            | Op::ReplaceWithTombstone {
                timestamp,
                expire_at,
            } => {
                if was_live {
                    applied.removed += 1;
                }
                // The tombstone's expiry goes into the TTL index like any other, so the
                // expiry sweep purges it after the retention window.
                if *expire_at != 0 {
                    applied.expiry_added.push((m.key.clone(), *expire_at));
                }
                build.push_new(&m.key, *timestamp, *expire_at, ValueRef::Tombstone);
            }
            Op::ForceDelete => {
                if was_live {
                    applied.removed += 1;
                }
            }
        }
    }
    while has {
        build.push_old(&c);
        has = c.advance().map_err(|e| bad_leaf(&*t, leaf, e))?;
    }
    Ok(appended.unwrap_or(false))
}

/// Frees what a replaced or removed entry owns and notes its expiry for the TTL index.
pub(crate) fn release(
    t: &mut dyn TreeWrite,
    key: &[u8],
    e: &Existing<'_>,
    applied: &mut Applied,
) -> TreeResult<()> {
    if let ValueRef::Overflow { first, pages, .. } = e.value {
        t.free_overflow(first, pages)?;
    }
    if e.expire_at != 0 {
        applied.expiry_removed.push((key.to_vec(), e.expire_at));
    }
    Ok(())
}

/// The largest key + value kept inline: just under half a page, so a leaf always holds
/// at least two entries and a split always succeeds. Smaller values would waste most of an
/// overflow page each (a 1 KiB value would take a whole 4 KiB page).
pub fn inline_limit(payload_capacity: usize) -> usize {
    payload_capacity / 2 - 64
}

/// The error for a leaf whose entries do not decode, naming its page when it has one.
fn bad_leaf(t: &dyn TreeWrite, leaf: Option<PageId>, e: crate::page::CodecError) -> TreeError {
    match leaf {
        Some(id) => bad_page(t, id, e.0),
        // The built-in empty leaf always decodes; a failure is a bug here, not bad bytes.
        None => TreeError::InvalidArgument {
            what: format!("the empty leaf does not decode: {}", e.0),
        },
    }
}
