//! The lengths of data objects this instance has seen listed, uploaded or HEADed. A data
//! object is written once under a name never reused (invariant 4), so a length seen once
//! stays true: opening the object again needs no HEAD. An object deleted behind the
//! instance's back (another process's GC, an operator) then fails at its first read, with
//! the same `NotFound` naming it, instead of at open.

use super::*;

/// Lengths remembered at most; past it the memory starts over (opens HEAD again).
const SIZES_LIMIT: usize = 1 << 18;

/// Data object name → length.
#[derive(Debug, Default)]
pub(super) struct ObjectSizes {
    known: Mutex<HashMap<String, u64>>,
}

impl Inner {
    /// The length of the uploaded data object `path`: remembered, or asked with a HEAD
    /// (and then remembered).
    pub(super) fn data_object_len(&self, path: &str) -> IoResult<u64> {
        if let Some(len) = self.sizes.get(path) {
            return Ok(len);
        }
        let meta = self
            .retry
            .simple("head", || self.store.head(path))
            .map_err(|e| obj_err(path, e))?;
        self.sizes.learn(path, meta.size);
        Ok(meta.size)
    }
}

impl ObjectSizes {
    fn get(&self, path: &str) -> Option<u64> {
        self.known.lock().get(path).copied()
    }

    /// Remembers the length of the data object `path` (ignored for other kinds).
    pub(super) fn learn(&self, path: &str, len: u64) {
        if kind_of(path) != Kind::Data {
            return;
        }
        let mut known = self.known.lock();
        if known.len() >= SIZES_LIMIT && !known.contains_key(path) {
            known.clear();
        }
        known.insert(path.to_string(), len);
    }

    pub(super) fn forget(&self, path: &str) {
        self.known.lock().remove(path);
    }
}
