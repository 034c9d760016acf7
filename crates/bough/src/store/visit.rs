//! Visiting a key range with borrowed entries: [`ReadView::for_each_in`] and
//! [`Branch::for_each_in`] hand each live entry's key and value to a closure, borrowed from
//! the page they lie in, where a [`RangeIter`] copies both out of it.

use super::range::{below, owned_bounds};
use super::*;
use bough_tree::page::leaf::ValueRef;
use std::ops::ControlFlow;

impl ReadView {
    /// Calls `f` with the key and value of each live entry of `range` in key order, until
    /// `f` returns [`ControlFlow::Break`] or the range ends. Both are lent for the call
    /// only: a [`RangeIter`] copies every key and value out of its page, this copies
    /// neither (a value in overflow pages is read into a buffer), so it is the way to
    /// scan fast. A branch with writes not yet checkpointed is read through its write
    /// buffer as a [`RangeIter`] reads it (what `f` is lent then is copied).
    ///
    /// ```
    /// use bough::{Options, Store};
    /// use std::ops::ControlFlow;
    ///
    /// let store = Store::open(Options::in_memory())?;
    /// let main = store.partition("t", 0)?.branch("main")?;
    /// for k in ["a", "b", "c", "d"] {
    ///     main.put_blocking(k, k.to_uppercase())?;
    /// }
    /// let mut seen = Vec::new();
    /// main.read_view()?.for_each_in("b".., |key, value| {
    ///     seen.push((key.to_vec(), value.to_vec()));
    ///     if seen.len() == 2 { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    /// })?;
    /// assert_eq!(seen, [(b"b".to_vec(), b"B".to_vec()), (b"c".to_vec(), b"C".to_vec())]);
    /// # Ok::<(), bough::Error>(())
    /// ```
    pub fn for_each_in<K: AsRef<[u8]> + ?Sized>(
        &self,
        range: impl std::ops::RangeBounds<K>,
        mut f: impl FnMut(&[u8], &[u8]) -> ControlFlow<()>,
    ) -> Result<()> {
        let (lo, hi) = owned_bounds(&range);
        let snap = self.snap.as_ref();
        if snap.has_buffered() {
            for kv in RangeIter::new(self.clone(), lo, hi) {
                let kv = kv?;
                if f(&kv.key, &kv.value.value).is_break() {
                    break;
                }
            }
            return Ok(());
        }
        let start = match &lo {
            Bound::Included(k) | Bound::Excluded(k) => Some(k.as_slice()),
            Bound::Unbounded => None,
        };
        btree::ForwardCursor::visit(snap, snap.root, start, |e| {
            if matches!(&lo, Bound::Excluded(k) if k.as_slice() == e.key) {
                return Ok(ControlFlow::Continue(()));
            }
            if !below(&hi, e.key) {
                return Ok(ControlFlow::Break(()));
            }
            if !e.is_live_at(self.now) {
                return Ok(ControlFlow::Continue(()));
            }
            Ok(match e.value {
                ValueRef::Inline(v) => f(e.key, v),
                ValueRef::Overflow { first, pages, len } => {
                    f(e.key, &snap.read_overflow(first, pages, len)?)
                }
                ValueRef::Tombstone => ControlFlow::Continue(()),
            })
        })
        .map_err(|e| Error::from(e).at(&self.label))
    }
}

impl Branch {
    /// [`ReadView::for_each_in`] over a snapshot of the branch's latest commit taken now.
    pub fn for_each_in<K: AsRef<[u8]> + ?Sized>(
        &self,
        range: impl std::ops::RangeBounds<K>,
        f: impl FnMut(&[u8], &[u8]) -> ControlFlow<()>,
    ) -> Result<()> {
        self.read_view()?.for_each_in(range, f)
    }
}
