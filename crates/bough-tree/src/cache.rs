//! A byte-budgeted page cache keyed by physical identity.
//!
//! Keys are `(file handle id, page index)`: the same physical page read through any branch
//! hits the same entry, so a thousand branches of one partition share their cached index
//! pages (design notes §3). Eviction is CLOCK per shard: a hit sets a reference bit, the hand
//! gives referenced entries a second chance.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::btree::Node;
use crate::page::mapping::MappingNode;

/// A cached, already verified page.
#[derive(Debug, Clone)]
pub enum CachedPage {
    /// A tree page (leaf payload or decoded index node).
    Tree(Node),
    /// A decoded mapping node.
    Mapping(Arc<MappingNode>),
}

impl CachedPage {
    fn weight(&self) -> usize {
        let body = match self {
            CachedPage::Tree(Node::Leaf(p)) => p.len(),
            CachedPage::Tree(Node::Index(n)) => n.encoded_len() + 24 * n.children.len(),
            CachedPage::Mapping(m) => 8 * m.slots.len(),
        };
        body + 64
    }
}

const SHARDS: usize = 16;

#[derive(Debug, Default)]
struct Shard {
    map: HashMap<u64, (CachedPage, bool, usize)>,
    clock: VecDeque<u64>,
    bytes: usize,
}

/// The cache. Cheap to share (`Arc`).
#[derive(Debug)]
pub struct PageCache {
    shards: Vec<Mutex<Shard>>,
    shard_budget: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl PageCache {
    /// A cache holding at most about `budget` bytes.
    pub fn new(budget: usize) -> Self {
        PageCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            shard_budget: budget / SHARDS,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The key of page `page_index` of the file with handle id `file`.
    pub fn key(file: u64, page_index: u32) -> u64 {
        file << 24 | u64::from(page_index)
    }

    #[expect(
        clippy::indexing_slicing,
        reason = "the shard index is reduced modulo SHARDS, the vector's length"
    )]
    fn shard(&self, key: u64) -> &Mutex<Shard> {
        // Fibonacci hashing spreads consecutive pages over shards.
        let h = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60;
        &self.shards[h as usize % SHARDS]
    }

    /// A cached page.
    pub fn get(&self, key: u64) -> Option<CachedPage> {
        let mut s = self.shard(key).lock();
        match s.map.get_mut(&key) {
            Some((page, referenced, _)) => {
                *referenced = true;
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(page.clone())
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Caches a page, evicting others if the shard is over budget.
    pub fn insert(&self, key: u64, page: CachedPage) {
        let w = page.weight();
        if w > self.shard_budget {
            return;
        }
        let mut s = self.shard(key).lock();
        if let Some(old) = s.map.insert(key, (page, false, w)) {
            s.bytes -= old.2;
        } else {
            s.clock.push_back(key);
        }
        s.bytes += w;
        // Each entry is looked at most twice per pass, so this ends.
        let mut budget_steps = 2 * s.clock.len();
        while s.bytes > self.shard_budget && budget_steps > 0 {
            budget_steps -= 1;
            let Some(k) = s.clock.pop_front() else { break };
            match s.map.get_mut(&k) {
                Some((_, referenced, _)) if *referenced && k != key => {
                    *referenced = false;
                    s.clock.push_back(k);
                }
                Some(_) if k == key => s.clock.push_back(k),
                Some(_) => {
                    if let Some((_, _, w)) = s.map.remove(&k) {
                        s.bytes -= w;
                    }
                }
                None => {}
            }
        }
    }

    /// Drops every page of a file handle (when the file is deleted).
    pub fn forget_file(&self, file: u64) {
        for shard in &self.shards {
            let mut s = shard.lock();
            let before = s.map.len();
            let mut freed = 0;
            s.map.retain(|k, v| {
                let keep = k >> 24 != file;
                if !keep {
                    freed += v.2;
                }
                keep
            });
            if s.map.len() != before {
                s.bytes -= freed;
                let Shard { map, clock, .. } = &mut *s;
                clock.retain(|k| map.contains_key(k));
            }
        }
    }

    /// (hits, misses) so far.
    pub fn hit_stats(&self) -> (u64, u64) {
        (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    /// Bytes currently cached.
    pub fn bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().bytes).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(n: usize) -> CachedPage {
        CachedPage::Tree(Node::Leaf(vec![0u8; n].into()))
    }

    #[test]
    fn stays_within_budget_and_keeps_hot_pages() {
        let cache = PageCache::new(16 * 64 * 1024);
        for i in 0..10_000u32 {
            cache.insert(PageCache::key(1, i), leaf(4096));
            // Page 0 is hot.
            assert!(
                cache.get(PageCache::key(1, 0)).is_some(),
                "hot page evicted at {i}"
            );
        }
        assert!(cache.bytes() <= 16 * 64 * 1024);
        cache.forget_file(1);
        assert_eq!(cache.bytes(), 0);
    }
}
