//! A byte-budgeted page cache keyed by physical identity.
//!
//! Keys are `(file handle id, page index)`: the same physical page read through any branch
//! hits the same entry, so a thousand branches of one partition share their cached index
//! pages (design notes §3). Each shard keeps two tiers, each evicted by CLOCK (a hit sets a
//! reference bit, the hand gives referenced entries a second chance):
//! - structure (index and mapping pages), within the structure budget: only another
//!   structure page evicts one, so a stream of leaves never pushes out the pages every get
//!   walks and a cold get reads only its leaf (ARCHITECTURE.md, "Caching by physical
//!   identity");
//! - leaves, in what the whole budget leaves over.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

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

    /// Index and mapping pages: what every lookup walks.
    fn is_structure(&self) -> bool {
        !matches!(self, CachedPage::Tree(Node::Leaf(_)))
    }
}

const SHARDS: usize = 16;

/// Which tier an entry is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tier {
    Structure,
    Leaf,
}

#[derive(Debug)]
struct Entry {
    page: CachedPage,
    referenced: bool,
    weight: usize,
    tier: Tier,
}

/// One tier of a shard: the CLOCK order of its keys (a key no longer in the map, or now in
/// the other tier, is dropped when the hand reaches it) and its bytes.
#[derive(Debug, Default)]
struct TierList {
    clock: VecDeque<u64>,
    bytes: usize,
}

#[derive(Debug, Default)]
struct Shard {
    map: HashMap<u64, Entry, PageKeyHash>,
    structure: TierList,
    leaves: TierList,
    /// Counted under the shard's lock, which a lookup holds anyway: a counter shared by
    /// every shard would bounce between the cores of concurrent readers.
    hits: u64,
    misses: u64,
}

/// Hashes a page key (a file handle and a page index, both from this process's tables)
/// with one multiply: SipHash's resistance to chosen keys buys nothing here and cost a
/// tenth of a warm get.
#[derive(Debug, Default, Clone, Copy)]
struct PageKeyHash;

impl std::hash::BuildHasher for PageKeyHash {
    type Hasher = PageKeyHasher;
    fn build_hasher(&self) -> PageKeyHasher {
        PageKeyHasher(0)
    }
}

#[derive(Debug)]
struct PageKeyHasher(u64);

impl std::hash::Hasher for PageKeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn finish(&self) -> u64 {
        // Fold the well-mixed high bits into the low ones the table indexes by.
        self.0 ^ (self.0 >> 32)
    }
}

impl Shard {
    fn total(&self) -> usize {
        self.structure.bytes + self.leaves.bytes
    }

    fn list(&mut self, tier: Tier) -> &mut TierList {
        match tier {
            Tier::Structure => &mut self.structure,
            Tier::Leaf => &mut self.leaves,
        }
    }

    fn remove(&mut self, key: u64) -> Option<Entry> {
        let e = self.map.remove(&key)?;
        self.list(e.tier).bytes -= e.weight;
        Some(e)
    }

    /// Evicts one entry of `tier` other than `keep` by CLOCK; false if the tier has no
    /// other entry.
    fn evict_one(&mut self, tier: Tier, keep: u64) -> bool {
        let Shard {
            map,
            structure,
            leaves,
            ..
        } = self;
        let list = match tier {
            Tier::Structure => structure,
            Tier::Leaf => leaves,
        };
        // Each entry is looked at most twice per pass, so this ends.
        let mut steps = 2 * list.clock.len();
        while steps > 0 {
            steps -= 1;
            let Some(k) = list.clock.pop_front() else {
                return false;
            };
            match map.get_mut(&k) {
                Some(e) if e.tier == tier && k == keep => list.clock.push_back(k),
                Some(e) if e.tier == tier && e.referenced => {
                    e.referenced = false;
                    list.clock.push_back(k);
                }
                Some(e) if e.tier == tier => {
                    let w = e.weight;
                    map.remove(&k);
                    list.bytes -= w;
                    return true;
                }
                // Gone, or re-inserted into the other tier: a stale position.
                _ => {}
            }
        }
        false
    }
}

/// The cache. Cheap to share (`Arc`).
#[derive(Debug)]
pub struct PageCache {
    shards: Vec<Mutex<Shard>>,
    shard_budget: usize,
    shard_structure_budget: usize,
}

impl PageCache {
    /// A cache holding at most about `budget` bytes, three quarters of which index and
    /// mapping pages may hold.
    pub fn new(budget: usize) -> Self {
        Self::with_structure_budget(budget, budget)
    }

    /// A cache holding at most about `budget` bytes, of which index and mapping pages hold
    /// at most `structure` that leaves never evict. Clamped to three quarters of `budget`:
    /// leaves always keep a quarter, and index pages a commit replaced (evicted only by
    /// other structure pages) cannot crowd them out.
    pub fn with_structure_budget(budget: usize, structure: usize) -> Self {
        PageCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            shard_budget: budget / SHARDS,
            shard_structure_budget: structure.min(budget / 4 * 3) / SHARDS,
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
            Some(e) => {
                e.referenced = true;
                let page = e.page.clone();
                s.hits += 1;
                Some(page)
            }
            None => {
                s.misses += 1;
                None
            }
        }
    }

    /// Caches a page, evicting others of its tier (a leaf may also evict leaves only) if
    /// the shard is over budget. A leaf that finds no room is not kept.
    pub fn insert(&self, key: u64, page: CachedPage) {
        let weight = page.weight();
        let tier = if page.is_structure() && weight <= self.shard_structure_budget {
            Tier::Structure
        } else {
            Tier::Leaf
        };
        if weight > self.shard_budget {
            return;
        }
        let mut s = self.shard(key).lock();
        let old = s.remove(key);
        s.map.insert(
            key,
            Entry {
                page,
                referenced: false,
                weight,
                tier,
            },
        );
        let list = s.list(tier);
        // A key re-inserted into its tier keeps its place in that tier's clock.
        if old.is_none_or(|o| o.tier != tier) {
            list.clock.push_back(key);
        }
        list.bytes += weight;
        if tier == Tier::Structure {
            while s.structure.bytes > self.shard_structure_budget
                && s.evict_one(Tier::Structure, key)
            {}
        }
        // Leaves go first; a structure page goes only for another structure page, never
        // for a leaf.
        while s.total() > self.shard_budget {
            if s.evict_one(Tier::Leaf, key) {
                continue;
            }
            if tier == Tier::Leaf {
                // No other leaf to evict: the new leaf is the one that does not fit.
                s.remove(key);
                break;
            }
            if !s.evict_one(Tier::Structure, key) {
                break;
            }
        }
    }

    /// Drops every page of a file handle (when the file is deleted).
    pub fn forget_file(&self, file: u64) {
        for shard in &self.shards {
            let mut s = shard.lock();
            let before = s.map.len();
            let (mut freed_structure, mut freed_leaves) = (0, 0);
            s.map.retain(|k, e| {
                let keep = k >> 24 != file;
                if !keep {
                    match e.tier {
                        Tier::Structure => freed_structure += e.weight,
                        Tier::Leaf => freed_leaves += e.weight,
                    }
                }
                keep
            });
            if s.map.len() != before {
                s.structure.bytes -= freed_structure;
                s.leaves.bytes -= freed_leaves;
                let Shard {
                    map,
                    structure,
                    leaves,
                    ..
                } = &mut *s;
                structure.clock.retain(|k| map.contains_key(k));
                leaves.clock.retain(|k| map.contains_key(k));
            }
        }
    }

    /// (hits, misses) so far.
    pub fn hit_stats(&self) -> (u64, u64) {
        self.shards.iter().fold((0, 0), |(h, m), s| {
            let s = s.lock();
            (h + s.hits, m + s.misses)
        })
    }

    /// Bytes currently cached.
    pub fn bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().total()).sum()
    }

    /// Bytes of index and mapping pages held in the structure tier.
    pub fn structure_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().structure.bytes).sum()
    }

    /// Whether the structure tier is (nearly) full: a prewarm stops there, since more
    /// pages would only evict the ones it read.
    pub fn structure_full(&self) -> bool {
        let budget = self.shard_structure_budget * SHARDS;
        self.structure_bytes() + budget / 16 >= budget
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(n: usize) -> CachedPage {
        CachedPage::Tree(Node::Leaf(vec![0u8; n].into()))
    }

    fn mapping() -> CachedPage {
        // 8 * 496 + 64 = 4,032 bytes of weight, like a leaf of 3,968.
        CachedPage::Mapping(Arc::new(MappingNode::empty(0, 496)))
    }

    fn index() -> CachedPage {
        let keys: Vec<Vec<u8>> = (0..100u32).map(|k| k.to_be_bytes().to_vec()).collect();
        CachedPage::Tree(Node::Index(Arc::new(crate::page::index::IndexNode::new(
            keys,
            (0..101).collect(),
        ))))
    }

    #[test]
    fn a_stream_of_leaves_never_evicts_structure_pages() {
        let cache = PageCache::new(16 * 64 * 1024);
        for i in 0..64u32 {
            cache.insert(PageCache::key(2, i), mapping());
            cache.insert(PageCache::key(3, i), index());
        }
        let held = cache.structure_bytes();
        assert!(held > 0);
        // Far more leaves than the cache holds, none of them read again.
        for i in 0..20_000u32 {
            cache.insert(PageCache::key(1, i), leaf(4096));
        }
        for i in 0..64u32 {
            assert!(
                cache.get(PageCache::key(2, i)).is_some(),
                "mapping page {i}"
            );
            assert!(cache.get(PageCache::key(3, i)).is_some(), "index page {i}");
        }
        assert_eq!(cache.structure_bytes(), held);
        assert!(cache.bytes() <= 16 * 64 * 1024);
        // Leaves still use what is left over.
        cache.insert(PageCache::key(1, 99_999), leaf(4096));
        assert!(cache.get(PageCache::key(1, 99_999)).is_some());
    }

    #[test]
    fn structure_pages_stay_within_their_budget_and_evict_each_other() {
        let budget = 16 * 64 * 1024;
        let structure = 16 * 16 * 1024;
        let cache = PageCache::with_structure_budget(budget, structure);
        for i in 0..2_000u32 {
            cache.insert(PageCache::key(2, i), mapping());
            // Page 0 is hot: CLOCK keeps it.
            assert!(
                cache.get(PageCache::key(2, 0)).is_some(),
                "hot page evicted at {i}"
            );
            assert!(cache.structure_bytes() <= structure, "at {i}");
        }
        assert!(cache.structure_full());
        // Beyond their budget, structure pages are still cached, as leaves are.
        cache.insert(PageCache::key(5, 0), index());
        assert!(cache.get(PageCache::key(5, 0)).is_some());
        assert!(cache.bytes() <= budget);
    }

    #[test]
    fn forgetting_a_file_frees_both_tiers() {
        let cache = PageCache::new(16 * 64 * 1024);
        for i in 0..32u32 {
            cache.insert(PageCache::key(7, i), mapping());
            cache.insert(PageCache::key(7, 100 + i), leaf(1000));
            cache.insert(PageCache::key(8, i), leaf(1000));
        }
        let other = cache.bytes() - cache.structure_bytes();
        cache.forget_file(7);
        assert_eq!(cache.structure_bytes(), 0);
        assert!(cache.bytes() < other);
        assert!(cache.get(PageCache::key(7, 0)).is_none());
        assert!(cache.get(PageCache::key(8, 0)).is_some());
        cache.forget_file(8);
        assert_eq!(cache.bytes(), 0);
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
