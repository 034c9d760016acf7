//! The local disk cache of immutable data objects: whole files, and ranges of objects read
//! page by page (`cloud/ranges.rs`), in a local directory, bounded by one byte budget,
//! evicted least-recently-used first. A file being read right now is pinned (its handle is
//! borrowed); everything else may go. Files being written never live here: they stay in
//! memory until uploaded (see `cloud.rs`), so nothing in the cache is ever the only copy.
//!
//! A whole file is installed synced (it survives a restart: a warm cache). A range is
//! written without a sync and named `<object>.range<index>`, which no data file name
//! matches, so reopening the cache deletes every range: a crash can leave a torn range on
//! disk, never one that is read.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bough_io::{IoResult, OpenOptions, PreadStorage, Storage, StorageFile};
use bough_names::{FileKind, parse_file_name};
use parking_lot::Mutex;

#[derive(Debug)]
struct Entry {
    file: Arc<dyn StorageFile>,
    size: u64,
    tick: u64,
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<String, Entry>,
    /// tick -> path, oldest first.
    lru: BTreeMap<u64, String>,
    used: u64,
    tick: u64,
}

/// Counters of the cache.
#[derive(Debug, Default)]
pub struct CacheStats {
    /// Reads served from a cached file.
    pub hits: AtomicU64,
    /// Objects downloaded into the cache.
    pub downloads: AtomicU64,
    /// Files evicted.
    pub evictions: AtomicU64,
    /// Highest byte usage seen.
    pub peak_bytes: AtomicU64,
    /// Objects loaded by a prewarm.
    pub prewarmed: AtomicU64,
    /// Ranged GETs of data objects (page-granular reads).
    pub range_gets: AtomicU64,
    /// Bytes those ranged GETs fetched.
    pub range_bytes: AtomicU64,
    /// Ranges stored in the cache.
    pub ranges_cached: AtomicU64,
}

/// The cache key of range `index` of the data object `path`.
pub(crate) fn range_key(path: &str, index: u64) -> String {
    format!("{path}{RANGE_MARK}{index}")
}

const RANGE_MARK: &str = ".range";

/// The bounded cache.
#[derive(Debug)]
pub(crate) struct DiskCache {
    local: PreadStorage,
    budget: u64,
    state: Mutex<State>,
    /// Directories known to exist in the cache directory.
    dirs: Mutex<std::collections::HashSet<String>>,
    pub(crate) stats: CacheStats,
}

impl DiskCache {
    /// Opens the cache directory, keeping the data files already there (a warm restart) up
    /// to the budget and removing anything else.
    pub(crate) fn open(local: PreadStorage, budget: u64) -> IoResult<DiskCache> {
        let cache = DiskCache {
            local,
            budget,
            state: Mutex::new(State::default()),
            dirs: Mutex::default(),
            stats: CacheStats::default(),
        };
        let mut found: Vec<(std::time::SystemTime, String, u64)> = Vec::new();
        for dir in cache.local.list_dirs()? {
            for name in cache.local.list(&dir)? {
                let path = format!("{dir}/{name}");
                match parse_file_name(&name) {
                    Ok(FileKind::Data(_)) => {
                        let size = cache.local.file_len(&path)?;
                        let mtime = std::fs::metadata(cache.local.root().join(&path))
                            .and_then(|m| m.modified())
                            .unwrap_or(std::time::UNIX_EPOCH);
                        found.push((mtime, path, size));
                    }
                    // Temporary files of an interrupted download, or anything foreign.
                    _ => cache.local.delete(&path)?,
                }
            }
        }
        // Oldest first, so the most recently used files survive the trim.
        found.sort();
        {
            let mut st = cache.state.lock();
            for (_, path, size) in found {
                let file = cache.local.open(&path, OpenOptions::read())?;
                st.tick += 1;
                let tick = st.tick;
                st.lru.insert(tick, path.clone());
                st.used += size;
                st.entries.insert(path, Entry { file, size, tick });
            }
        }
        cache.evict_to(budget)?;
        Ok(cache)
    }

    /// Bytes held.
    pub(crate) fn used(&self) -> u64 {
        self.state.lock().used
    }

    /// The byte budget.
    pub(crate) fn budget(&self) -> u64 {
        self.budget
    }

    /// Whether `path` is cached (without touching its recency).
    pub(crate) fn contains(&self, path: &str) -> bool {
        self.state.lock().entries.contains_key(path)
    }

    /// The cached file, marked most recently used; the returned handle pins it.
    pub(crate) fn get(&self, path: &str) -> Option<(Arc<dyn StorageFile>, u64)> {
        let mut st = self.state.lock();
        st.tick += 1;
        let tick = st.tick;
        let e = st.entries.get_mut(path)?;
        let old = std::mem::replace(&mut e.tick, tick);
        let out = (e.file.clone(), e.size);
        st.lru.remove(&old);
        st.lru.insert(tick, path.to_string());
        self.stats.hits.fetch_add(1, Ordering::Relaxed);
        Some(out)
    }

    /// Evicts unpinned files, oldest first, until at most `target` bytes are held (or only
    /// pinned files remain).
    fn evict_to(&self, target: u64) -> IoResult<()> {
        let mut doomed = Vec::new();
        {
            let mut st = self.state.lock();
            let ticks: Vec<u64> = st.lru.keys().copied().collect();
            for t in ticks {
                if st.used <= target {
                    break;
                }
                let Some(path) = st.lru.get(&t).cloned() else {
                    continue;
                };
                let pinned = st
                    .entries
                    .get(&path)
                    .is_some_and(|e| Arc::strong_count(&e.file) > 1);
                if pinned {
                    continue;
                }
                if let Some(e) = st.entries.remove(&path) {
                    st.lru.remove(&t);
                    st.used -= e.size;
                    doomed.push(path);
                }
            }
        }
        for path in doomed {
            self.stats.evictions.fetch_add(1, Ordering::Relaxed);
            self.local.delete(&path)?;
        }
        Ok(())
    }

    /// Stores `bytes` as the cached copy of `path` if it fits in the budget (evicting what
    /// it must), synced so it survives a restart. Returns the cached handle, or `None` when
    /// it cannot fit.
    pub(crate) fn insert(
        &self,
        path: &str,
        bytes: &[u8],
    ) -> IoResult<Option<Arc<dyn StorageFile>>> {
        self.admit(path, bytes.len() as u64, || {
            self.local.write_atomic(path, bytes)?;
            self.local.open(path, OpenOptions::read())
        })
    }

    /// Stores range `index` of the data object `path` (its bytes at `index` × the range
    /// size), unsynced: ranges never outlive the process's cache (see the module). `None`
    /// when it cannot fit, or when another reader is storing the same range right now.
    pub(crate) fn insert_range(
        &self,
        path: &str,
        index: u64,
        bytes: &[u8],
    ) -> IoResult<Option<Arc<dyn StorageFile>>> {
        let key = range_key(path, index);
        let stored = self.admit(&key, bytes.len() as u64, || {
            let f = self.local.open(&key, OpenOptions::write_new(0))?;
            f.write_at(0, bytes)?;
            Ok(f)
        });
        match stored {
            Ok(Some(f)) => {
                self.stats.ranges_cached.fetch_add(1, Ordering::Relaxed);
                Ok(Some(f))
            }
            // Another reader created the file first; it registers it when done.
            Err(bough_io::IoError::AlreadyExists { .. }) => Ok(None),
            other => other,
        }
    }

    /// Reserves `size` bytes for `key`, runs `write` to put the file in place, and
    /// registers it most recently used. A failed write leaves nothing behind.
    fn admit(
        &self,
        key: &str,
        size: u64,
        write: impl FnOnce() -> IoResult<Arc<dyn StorageFile>>,
    ) -> IoResult<Option<Arc<dyn StorageFile>>> {
        if let Some((f, _)) = self.get(key) {
            return Ok(Some(f));
        }
        if size > self.budget {
            return Ok(None);
        }
        self.evict_to(self.budget - size)?;
        {
            // Reserve the space before writing, so concurrent inserts never overshoot.
            let mut st = self.state.lock();
            if st.used + size > self.budget {
                return Ok(None);
            }
            st.used += size;
        }
        let (dir, _) = key.rsplit_once('/').unwrap_or(("", key));
        let made = if self.dirs.lock().contains(dir) {
            Ok(())
        } else {
            self.local.create_dir(dir).inspect(|()| {
                self.dirs.lock().insert(dir.to_string());
            })
        };
        let file = match made.and_then(|()| write()) {
            Ok(f) => f,
            Err(e) => {
                self.state.lock().used -= size;
                if !matches!(e, bough_io::IoError::AlreadyExists { .. }) {
                    let _ = self.local.delete(key);
                }
                return Err(e);
            }
        };
        let mut st = self.state.lock();
        st.tick += 1;
        let tick = st.tick;
        if let Some(old) = st.entries.insert(
            key.to_string(),
            Entry {
                file: file.clone(),
                size,
                tick,
            },
        ) {
            st.lru.remove(&old.tick);
            st.used -= old.size;
        }
        st.lru.insert(tick, key.to_string());
        let used = st.used;
        self.stats.peak_bytes.fetch_max(used, Ordering::Relaxed);
        Ok(Some(file))
    }

    /// Drops the cached copy of `path` and every cached range of it (the object was
    /// deleted).
    pub(crate) fn remove(&self, path: &str) -> IoResult<()> {
        self.drop_keys(|key| key == path || is_range_of(key, path))
    }

    /// Drops the cached ranges of `path` (its whole copy replaces them).
    pub(crate) fn remove_ranges(&self, path: &str) -> IoResult<()> {
        self.drop_keys(|key| is_range_of(key, path))
    }

    fn drop_keys(&self, doomed: impl Fn(&str) -> bool) -> IoResult<()> {
        let gone: Vec<String> = {
            let mut st = self.state.lock();
            let keys: Vec<String> = st.entries.keys().filter(|k| doomed(k)).cloned().collect();
            for k in &keys {
                if let Some(e) = st.entries.remove(k) {
                    st.lru.remove(&e.tick);
                    st.used -= e.size;
                }
            }
            keys
        };
        for key in gone {
            self.local.delete(&key)?;
        }
        Ok(())
    }

    /// Number of cached files.
    pub(crate) fn files(&self) -> usize {
        self.state.lock().entries.len()
    }
}

/// Whether `key` names a range of `path`.
fn is_range_of(key: &str, path: &str) -> bool {
    key.strip_prefix(path)
        .and_then(|rest| rest.strip_prefix(RANGE_MARK))
        .is_some_and(|index| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()))
}
