//! [`LeafCursor`]: one pass over a leaf's bytes, entry by entry, without owning keys or
//! values; get, floor and the leaf merge share it.

use super::*;

/// Where the cursor's current key is: in the page (an entry that shares no prefix with
/// its predecessor), or rebuilt in the cursor's buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) enum KeyAt<'a> {
    Page(&'a [u8]),
    Buf,
}

/// The current entry's fields (its key is in [`KeyAt`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Current<'a> {
    timestamp: u64,
    expire_at: u64,
    value: ValueRef<'a>,
    meta: &'a [u8],
    value_bytes: &'a [u8],
}

/// A byte-level cursor over a leaf's entries, shared by lookups and the leaf merge: it
/// checks what [`LeafView::entries`] checks (restart offsets, prefix lengths, flags, key
/// order, trailing bytes) but decodes into borrowed fields, keeping only the current key
/// (in the page, or rebuilt in one reused buffer) — no owned [`Entry`] per key.
#[derive(Debug, Clone)]
pub struct LeafCursor<'a> {
    view: LeafView<'a>,
    /// Positioned at the next entry.
    r: Reader<'a>,
    /// Index of the next entry.
    pub(super) next: usize,
    key: KeyAt<'a>,
    buf: Vec<u8>,
    pub(super) cur: Option<Current<'a>>,
    /// An entry was taken: the next one must be above its key (carried into a
    /// [`LeafMark`], which has no `cur`).
    taken: bool,
}

/// Where a walk over a leaf stands, owning the current key instead of borrowing the page:
/// a walk that outlives one borrow of the page (a range's front, held between calls)
/// keeps this and reads on with [`LeafView::next_owned`] over the same bytes, so it reads
/// each entry once and only as far as it goes.
#[derive(Debug, Clone, Default)]
pub struct LeafMark {
    /// Offset of the next entry in the payload.
    pub(super) pos: usize,
    /// Index of the next entry.
    pub(super) next: usize,
    /// The key of the entry before it (empty before the first).
    pub(super) key: Vec<u8>,
    /// An entry was read: the next key must be above `key`.
    pub(super) taken: bool,
}

impl<'a> LeafCursor<'a> {
    /// A cursor before entry `next` of `view`, with `r` at that entry (a restart point).
    pub(super) fn at(view: LeafView<'a>, r: Reader<'a>, next: usize) -> Self {
        LeafCursor {
            view,
            r,
            next,
            key: KeyAt::Page(&[]),
            buf: Vec::new(),
            cur: None,
            taken: false,
        }
    }

    /// Where this cursor stands, to read on from with [`LeafView::next_owned`] on the same
    /// page.
    pub fn mark(mut self) -> LeafMark {
        if let KeyAt::Page(k) = self.key {
            self.buf.clear();
            self.buf.extend_from_slice(k);
        }
        LeafMark {
            pos: self.r.pos(),
            next: self.next,
            key: self.buf,
            taken: self.taken,
        }
    }

    /// Moves to the next entry; `false` past the last one (then the leaf is checked to end
    /// where its last entry does).
    pub fn advance(&mut self) -> Result<bool, CodecError> {
        if self.next >= self.view.count {
            self.cur = None;
            if self.r.remaining() != 0 {
                return Err(CodecError("trailing bytes after leaf entries"));
            }
            return Ok(false);
        }
        self.step(None)
    }

    /// The current key (valid after `advance` returned `true`).
    pub fn key(&self) -> &[u8] {
        match self.key {
            KeyAt::Page(k) => k,
            KeyAt::Buf => &self.buf,
        }
    }

    /// The current key when it lies whole in the page (the entry shares no prefix with its
    /// predecessor), so it can be borrowed for as long as the page.
    pub fn key_in_page(&self) -> Option<&'a [u8]> {
        match self.key {
            KeyAt::Page(k) => Some(k),
            KeyAt::Buf => None,
        }
    }

    /// The current entry, or `None` before the first `advance` and past the end.
    pub fn current(&self) -> Option<EntryRef<'_, 'a>> {
        self.cur.map(|c| EntryRef {
            key: self.key(),
            timestamp: c.timestamp,
            expire_at: c.expire_at,
            value: c.value,
            meta: c.meta,
            value_bytes: c.value_bytes,
        })
    }

    /// Reads entry `self.next` (which must exist). With `stop_above`, an entry whose key is
    /// above it is checked but not taken: the cursor stays where it was and `false` comes
    /// back.
    pub(super) fn step(&mut self, stop_above: Option<&[u8]>) -> Result<bool, CodecError> {
        Ok(self.step_cmp(stop_above)?.is_some())
    }

    /// [`Self::step`], answering how the entry taken compares with `stop_above` (`Less`
    /// without one; `None` when the entry was above it and not taken).
    pub(super) fn step_cmp(
        &mut self,
        stop_above: Option<&[u8]>,
    ) -> Result<Option<std::cmp::Ordering>, CodecError> {
        self.step_unless(stop_above, std::cmp::Ordering::is_gt)
    }

    /// Reads entry `self.next` (which must exist) and takes it unless `stop(its key
    /// against stop_at)` holds; answers that comparison (`Less` without `stop_at`), or
    /// `None` when the entry was checked and left.
    pub(super) fn step_unless(
        &mut self,
        stop_at: Option<&[u8]>,
        stop: fn(std::cmp::Ordering) -> bool,
    ) -> Result<Option<std::cmp::Ordering>, CodecError> {
        let i = self.next;
        let restart = i.is_multiple_of(self.view.interval);
        if restart && self.view.restart_offset(i / self.view.interval)? != self.r.pos() {
            return Err(CodecError(
                "leaf restart offset does not point at its entry",
            ));
        }
        let mut r = self.r.clone();
        let prev = match self.key {
            KeyAt::Page(k) => k,
            KeyAt::Buf => &self.buf,
        };
        let e = parse_entry(&mut r, prev.len(), restart)?;
        // The key is prev[..shared] ++ suffix: above prev iff the suffix is above the rest
        // of prev. Nothing before the first entry read.
        let (shared, rest) = prev
            .split_at_checked(e.shared)
            .ok_or(CodecError("leaf key prefix too long"))?;
        if self.taken && !crate::key_order::less(rest, e.suffix) {
            return Err(CodecError("leaf keys out of order"));
        }
        let order = match stop_at {
            Some(q) => cmp_joined(shared, e.suffix, q),
            None => std::cmp::Ordering::Less,
        };
        if stop(order) {
            return Ok(None);
        }
        if e.shared == 0 {
            self.key = KeyAt::Page(e.suffix);
        } else {
            if let KeyAt::Page(k) = self.key {
                self.buf.clear();
                self.buf.extend_from_slice(k.get(..e.shared).unwrap_or(k));
            } else {
                self.buf.truncate(e.shared);
            }
            self.buf.extend_from_slice(e.suffix);
            self.key = KeyAt::Buf;
        }
        self.cur = Some(Current {
            timestamp: e.timestamp,
            expire_at: e.expire_at,
            value: e.value,
            meta: e.meta,
            value_bytes: e.value_bytes,
        });
        self.r = r;
        self.next += 1;
        self.taken = true;
        Ok(Some(order))
    }
}

/// Compares the key `head ++ tail` with `q` without building it.
pub(crate) fn cmp_joined(head: &[u8], tail: &[u8], q: &[u8]) -> std::cmp::Ordering {
    let n = head.len().min(q.len());
    let (q_head, q_tail) = q.split_at(n);
    match crate::key_order::cmp(head.get(..n).unwrap_or(head), q_head) {
        std::cmp::Ordering::Equal if head.len() > q.len() => std::cmp::Ordering::Greater,
        std::cmp::Ordering::Equal => crate::key_order::cmp(tail, q_tail),
        o => o,
    }
}
