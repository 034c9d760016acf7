//! [`StateCache`]: the decoded states of a partition's state files (manifests, archives,
//! tags, history points) with their merge bases, and the decoded `CURRENT_TERM` records,
//! kept from one GC walk to the next, so a walk reads and decodes only the files that
//! changed since the last.
//!
//! A state is reused only while its file shows the same [`FileStamp`] — the length and the
//! backend's marks of the version read (`Storage::cheap_stamp`) — as when it was read. A
//! manifest is not immutable: commits append to it, and a checkpoint, a log fold or a clean
//! close replace it (`write_atomic`) by a snapshot record that is often exactly as long as
//! the one before, and a dropped tail is cut before the next append. The length alone could
//! not tell those versions apart; the stamp does (a replaced file is another inode, a file
//! changed in place another change time or version). A `CURRENT_TERM` record is replaced
//! by rename, so each version is another inode. Archives, tags and history points are
//! created once and never change. A backend that cannot vouch for a file's version cheaply
//! gives no stamp, and the walk then reads the file as it always did.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use bough_io::FileStamp;
use bough_manifest::{CurrentTerm, ManifestState, MergeBase};
use parking_lot::Mutex;

/// Decoded states of one partition directory's state files, by file name, each with the
/// stamp of the version it was replayed from. Pass the same cache to every GC or measuring
/// walk of a partition (`collect_measured_cached`, `measure_cached`): each walk reuses the
/// states whose files still show their stamp, stores the ones it read, and drops the entries
/// of files no longer listed. Thread-safe; costs one decoded state per live state file.
#[derive(Default)]
pub struct StateCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The partition directory the entries were read from: a walk of another directory
    /// starts afresh.
    dir: String,
    states: HashMap<String, (FileStamp, Arc<DecodedState>)>,
    terms: HashMap<String, (FileStamp, CurrentTerm)>,
}

/// A state file's state and the merge bases its extensions record, decoded once.
pub(crate) struct DecodedState {
    pub(crate) state: ManifestState,
    pub(crate) bases: Vec<MergeBase>,
}

impl fmt::Debug for StateCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.inner.lock();
        f.debug_struct("StateCache")
            .field("dir", &g.dir)
            .field("states", &g.states.len())
            .field("terms", &g.terms.len())
            .finish()
    }
}

impl StateCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// State files whose decoded state is held.
    pub fn len(&self) -> usize {
        self.inner.lock().states.len()
    }

    /// Whether no state is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the state of the file `name` is held.
    pub fn contains(&self, name: &str) -> bool {
        self.inner.lock().states.contains_key(name)
    }

    /// `CURRENT_TERM` records held.
    pub fn terms_len(&self) -> usize {
        self.inner.lock().terms.len()
    }

    /// Drops every state and record.
    pub fn clear(&self) {
        let mut g = self.inner.lock();
        g.states.clear();
        g.terms.clear();
    }

    /// Starts a walk of `dir` over the `CURRENT_TERM` files `terms` listed: drops the
    /// records of every other file (deleted since the last walk), and every entry if the
    /// last walk was of another directory.
    pub(crate) fn begin(&self, dir: &str, terms: &[&String]) {
        let mut g = self.inner.lock();
        if g.dir != dir {
            g.dir = dir.to_string();
            g.states.clear();
            g.terms.clear();
            return;
        }
        let live: HashSet<&str> = terms.iter().map(|n| n.as_str()).collect();
        g.terms.retain(|name, _| live.contains(name.as_str()));
    }

    /// Drops the states of every state file but `names` (deleted since the last walk).
    pub(crate) fn keep_only(&self, names: &[String]) {
        let live: HashSet<&str> = names.iter().map(String::as_str).collect();
        self.inner
            .lock()
            .states
            .retain(|name, _| live.contains(name.as_str()));
    }

    /// The state of `name` if it was read from the version `stamp` identifies.
    pub(crate) fn get(&self, name: &str, stamp: FileStamp) -> Option<Arc<DecodedState>> {
        match self.inner.lock().states.get(name) {
            Some((s, state)) if *s == stamp => Some(state.clone()),
            _ => None,
        }
    }

    /// Forgets the state of `name` (its file changed, and the version read is not known).
    pub(crate) fn forget(&self, name: &str) {
        self.inner.lock().states.remove(name);
    }

    /// Records the state replayed from the version of `name` that `stamp` identifies.
    pub(crate) fn put(&self, name: &str, stamp: FileStamp, state: Arc<DecodedState>) {
        self.inner
            .lock()
            .states
            .insert(name.to_string(), (stamp, state));
    }

    /// The record of the `CURRENT_TERM` file `name` if it was read from the version `stamp`
    /// identifies.
    pub(crate) fn term(&self, name: &str, stamp: FileStamp) -> Option<CurrentTerm> {
        match self.inner.lock().terms.get(name) {
            Some((s, rec)) if *s == stamp => Some(*rec),
            _ => None,
        }
    }

    /// Records the `CURRENT_TERM` record read from the version of `name` that `stamp`
    /// identifies, or forgets the name's record (`stamp` is `None`: the version read is not
    /// known).
    pub(crate) fn put_term(&self, name: &str, stamp: Option<FileStamp>, rec: &CurrentTerm) {
        let mut g = self.inner.lock();
        match stamp {
            Some(s) => {
                g.terms.insert(name.to_string(), (s, *rec));
            }
            None => {
                g.terms.remove(name);
            }
        }
    }
}
