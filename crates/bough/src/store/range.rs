//! [`RangeIter`]: a lazy iterator over a range of keys of one snapshot, both ways.
//!
//! It holds the snapshot it was created on (so a later write is not seen, and GC keeps the
//! snapshot's files while it lives) and reads the tree one leaf at a time through the tree's
//! cursors, forward from the low end and backward from the high end; the two ends stop where
//! they meet. Tombstones and entries expired at the snapshot's time are skipped. The first
//! error is yielded and ends the iteration.

use super::*;

/// Lazily yields the live entries of a key range of one snapshot, in key order (or in
/// reverse: it is a [`DoubleEndedIterator`], so `.rev()` works).
///
/// Made by [`Branch::range`], [`Branch::prefix`], [`Branch::iter`] and the same methods of
/// [`ReadView`]. The snapshot is the branch's latest commit when the iterator is made: writes
/// after that are not seen. Each step reads on the calling thread (a leaf at a time, from
/// the page cache or storage); from async code, prefer [`Branch::scan`] pages or a blocking
/// task for long ranges.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let main = store.partition("orders", 0)?.branch("main")?;
/// for k in ["a", "b1", "b2", "c"] {
///     main.put_blocking(k, "v")?;
/// }
/// let keys = |it: bough::RangeIter| -> bough::Result<Vec<Vec<u8>>> {
///     it.map(|kv| kv.map(|kv| kv.key)).collect()
/// };
/// assert_eq!(keys(main.range("b".."c"))?, [b"b1", b"b2"]);
/// assert_eq!(keys(main.prefix("b"))?, [b"b1", b"b2"]);
/// let newest_first: Vec<_> = main.iter().rev().map(|kv| kv.map(|kv| kv.key)).collect::<bough::Result<_>>()?;
/// assert_eq!(newest_first, [&b"c"[..], b"b2", b"b1", b"a"]);
/// # Ok::<(), bough::Error>(())
/// ```
#[derive(Debug)]
pub struct RangeIter {
    /// The snapshot, or the error that made one unavailable (yielded once).
    view: std::result::Result<ReadView, Option<Error>>,
    /// What the front may still yield: above this (moves up as the front yields).
    lo: Bound<Vec<u8>>,
    /// What the back may still yield: below this (moves down as the back yields).
    hi: Bound<Vec<u8>>,
    front: Option<btree::ForwardCursor>,
    back: Option<btree::Cursor>,
    /// The front over a snapshot with buffered writes: the buffer's runs merged with the
    /// tree (the back then steps with `BufferedRead::before` from its bound).
    buffered_front: Option<bough_tree::buffer::BufferedPosition>,
    done: bool,
}

impl RangeIter {
    pub(super) fn new(view: ReadView, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> RangeIter {
        RangeIter {
            view: Ok(view),
            lo,
            hi,
            front: None,
            back: None,
            buffered_front: None,
            done: false,
        }
    }

    /// An iterator that yields `e` and ends (the branch could not give a snapshot).
    pub(super) fn failed(e: Error) -> RangeIter {
        RangeIter {
            view: Err(Some(e)),
            lo: Bound::Unbounded,
            hi: Bound::Unbounded,
            front: None,
            back: None,
            buffered_front: None,
            done: false,
        }
    }

    /// The next live entry from the front, its value not read yet.
    pub(super) fn next_entry(&mut self) -> Result<Option<Entry>> {
        let view = match &mut self.view {
            Ok(v) => &*v,
            Err(e) => return e.take().map_or(Ok(None), Err),
        };
        if self.done {
            return Ok(None);
        }
        let at = |e: bough_tree::error::TreeError| Error::from(e).at(&view.label);
        let snap = view.snap.as_ref();
        if snap.has_buffered() {
            let read = snap.buffered();
            if self.buffered_front.is_none() {
                let start = match &self.lo {
                    Bound::Included(k) | Bound::Excluded(k) => Some(k.as_slice()),
                    Bound::Unbounded => None,
                };
                self.buffered_front = Some(read.seek_owned(start).map_err(at)?);
            }
            let Some(pos) = self.buffered_front.as_mut() else {
                return Ok(None);
            };
            let found = next_in_range(&mut self.lo, &self.hi, view, || {
                pos.next_entry(&read).map_err(at)
            })?;
            self.done = found.is_none();
            return Ok(found);
        }
        if self.front.is_none() {
            let start = match &self.lo {
                Bound::Included(k) | Bound::Excluded(k) => Some(k.as_slice()),
                Bound::Unbounded => None,
            };
            self.front = Some(btree::ForwardCursor::seek(snap, view.snap.root, start).map_err(at)?);
        }
        let Some(cursor) = self.front.as_mut() else {
            return Ok(None);
        };
        let found = next_in_range(&mut self.lo, &self.hi, view, || {
            cursor.next_entry(snap).map_err(at)
        })?;
        self.done = found.is_none();
        Ok(found)
    }

    /// The next live entry from the back, its value not read yet.
    fn next_back_entry(&mut self) -> Result<Option<Entry>> {
        let view = match &mut self.view {
            Ok(v) => &*v,
            Err(e) => return e.take().map_or(Ok(None), Err),
        };
        if self.done {
            return Ok(None);
        }
        let at = |e: bough_tree::error::TreeError| Error::from(e).at(&view.label);
        let snap = view.snap.as_ref();
        if snap.has_buffered() {
            // One `before` per step from the bound the back has reached (a descent each;
            // reverse scans of a buffered branch are the rare case).
            let read = snap.buffered();
            loop {
                let found = match &self.hi {
                    Bound::Included(k) => read.before(k, true),
                    Bound::Excluded(k) => read.before(k, false),
                    // Longer than any key, all 0xff: above every key there is.
                    Bound::Unbounded => read.before(&vec![0xff; view.max_key + 1], true),
                }
                .map_err(at)?;
                let Some(e) = found else { break };
                if !above(&self.lo, &e.key) {
                    break;
                }
                set_excluded(&mut self.hi, &e.key);
                if view.live(&e) {
                    return Ok(Some(e));
                }
            }
            self.done = true;
            return Ok(None);
        }
        if self.back.is_none() {
            let (end, inclusive) = match &self.hi {
                Bound::Included(k) => (Some(k.as_slice()), true),
                Bound::Excluded(k) => (Some(k.as_slice()), false),
                Bound::Unbounded => (None, false),
            };
            self.back =
                Some(btree::Cursor::seek_back(snap, view.snap.root, end, inclusive).map_err(at)?);
        }
        let Some(cursor) = self.back.as_mut() else {
            return Ok(None);
        };
        while let Some(e) = cursor.prev_entry(snap).map_err(at)? {
            if !below(&self.hi, &e.key) {
                continue;
            }
            if !above(&self.lo, &e.key) {
                break;
            }
            if view.live(&e) {
                set_excluded(&mut self.hi, &e.key);
                return Ok(Some(e));
            }
        }
        self.done = true;
        Ok(None)
    }

    /// `e` as a key-value pair (reading an overflow value).
    pub(super) fn pair(&self, mut e: Entry, keys_only: bool) -> Result<KeyValue> {
        let Ok(view) = &self.view else {
            return Err(Error::closed());
        };
        // The value is read from the location alone: the key moves, no copy per entry.
        let key = std::mem::take(&mut e.key);
        Ok(KeyValue {
            key,
            value: view.value_of(e, keys_only)?,
        })
    }

    fn yielded(&mut self, e: Result<Option<Entry>>) -> Option<Result<KeyValue>> {
        let r = e.and_then(|e| e.map(|e| self.pair(e, false)).transpose());
        if let Err(_) | Ok(None) = &r {
            self.done = true;
        }
        r.transpose()
    }
}

/// The next live entry inside (`lo`, `hi`) that `next` yields in ascending key order, with
/// `lo` moved past it; `None` once `next` ends or passes `hi`. The buffered and the tree
/// cursor both step through this, so the bounds and liveness rule is written once.
fn next_in_range(
    lo: &mut Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
    view: &ReadView,
    mut next: impl FnMut() -> Result<Option<Entry>>,
) -> Result<Option<Entry>> {
    while let Some(e) = next()? {
        if !above(lo, &e.key) {
            continue;
        }
        if !below(hi, &e.key) {
            break;
        }
        if view.live(&e) {
            set_excluded(lo, &e.key);
            return Ok(Some(e));
        }
    }
    Ok(None)
}

/// Moves a bound just past `key`, reusing the bound's buffer: a scan moves it once per
/// entry, and a fresh copy of every key was a second allocation per entry.
fn set_excluded(bound: &mut Bound<Vec<u8>>, key: &[u8]) {
    match bound {
        Bound::Included(k) | Bound::Excluded(k) => {
            let mut k = std::mem::take(k);
            k.clear();
            k.extend_from_slice(key);
            *bound = Bound::Excluded(k);
        }
        Bound::Unbounded => *bound = Bound::Excluded(key.to_vec()),
    }
}

/// Whether `key` lies above the low bound `lo`.
fn above(lo: &Bound<Vec<u8>>, key: &[u8]) -> bool {
    match lo {
        Bound::Included(k) => key >= k.as_slice(),
        Bound::Excluded(k) => key > k.as_slice(),
        Bound::Unbounded => true,
    }
}

/// Whether `key` lies below the high bound `hi`.
pub(super) fn below(hi: &Bound<Vec<u8>>, key: &[u8]) -> bool {
    match hi {
        Bound::Included(k) => key <= k.as_slice(),
        Bound::Excluded(k) => key < k.as_slice(),
        Bound::Unbounded => true,
    }
}

impl Iterator for RangeIter {
    type Item = Result<KeyValue>;

    fn next(&mut self) -> Option<Result<KeyValue>> {
        let e = self.next_entry();
        self.yielded(e)
    }
}

impl DoubleEndedIterator for RangeIter {
    fn next_back(&mut self) -> Option<Result<KeyValue>> {
        let e = self.next_back_entry();
        self.yielded(e)
    }
}

impl std::iter::FusedIterator for RangeIter {}

/// Owned bounds of a range of byte keys.
pub(super) fn owned_bounds<K: AsRef<[u8]> + ?Sized>(
    range: &impl std::ops::RangeBounds<K>,
) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let own = |b: Bound<&K>| match b {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    };
    (own(range.start_bound()), own(range.end_bound()))
}

/// The range of every key that starts with `prefix`: from `prefix` up to (excluding) the
/// least key above all of them, which is the prefix without its trailing `0xff` bytes with
/// its last byte raised by one (no upper bound if it is all `0xff`).
pub(super) fn prefix_bounds(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return (Bound::Included(prefix.to_vec()), Bound::Excluded(end));
        }
    }
    (Bound::Included(prefix.to_vec()), Bound::Unbounded)
}

impl ReadView {
    /// The live entries of `range` in this view, lazily (see [`RangeIter`]).
    pub fn range<K: AsRef<[u8]> + ?Sized>(
        &self,
        range: impl std::ops::RangeBounds<K>,
    ) -> RangeIter {
        let (lo, hi) = owned_bounds(&range);
        RangeIter::new(self.clone(), lo, hi)
    }

    /// The live entries whose key starts with `prefix`, lazily.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> RangeIter {
        let (lo, hi) = prefix_bounds(prefix.as_ref());
        RangeIter::new(self.clone(), lo, hi)
    }

    /// Every live entry of this view, lazily.
    pub fn iter(&self) -> RangeIter {
        RangeIter::new(self.clone(), Bound::Unbounded, Bound::Unbounded)
    }
}

impl Branch {
    /// The live entries of `range` (any range of byte keys: `"a".."c"`, `b"k".as_slice()..`,
    /// `(Bound::Excluded(k), Bound::Unbounded)`), lazily, over a snapshot of the branch's
    /// latest commit taken now (see [`RangeIter`]). An error (the branch deleted, the store
    /// closed, a damaged page) is the iterator's last item.
    pub fn range<K: AsRef<[u8]> + ?Sized>(
        &self,
        range: impl std::ops::RangeBounds<K>,
    ) -> RangeIter {
        match self.read_view() {
            Ok(v) => v.range(range),
            Err(e) => RangeIter::failed(e),
        }
    }

    /// The live entries whose key starts with `prefix`, lazily (as [`range`](Self::range)).
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> RangeIter {
        match self.read_view() {
            Ok(v) => v.prefix(prefix),
            Err(e) => RangeIter::failed(e),
        }
    }

    /// Every live entry of the branch, lazily (as [`range`](Self::range)).
    pub fn iter(&self) -> RangeIter {
        match self.read_view() {
            Ok(v) => v.iter(),
            Err(e) => RangeIter::failed(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_bounds_end_above_every_key_with_the_prefix() {
        let b = |v: &[u8]| v.to_vec();
        assert_eq!(
            prefix_bounds(b"ab"),
            (Bound::Included(b(b"ab")), Bound::Excluded(b(b"ac")))
        );
        assert_eq!(
            prefix_bounds(b"a\xff\xff"),
            (Bound::Included(b(b"a\xff\xff")), Bound::Excluded(b(b"b")))
        );
        assert_eq!(
            prefix_bounds(b"\xff"),
            (Bound::Included(b(b"\xff")), Bound::Unbounded)
        );
        assert_eq!(
            prefix_bounds(b""),
            (Bound::Included(b(b"")), Bound::Unbounded)
        );
    }
}
