//! [`MemoryObjectStore`]: an in-process object store whose conditional writes are atomic by
//! construction (one lock around check and write), with real ETags, so fencing races can be
//! tested without a server. Clones share the objects. It can also pretend to lack If-Match
//! ([`MemoryObjectStore::without_if_match`]), like opendal's memory and fs services, so the
//! numbered-claims fencing is tested on the same atomic store.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::object::{Etag, Guarantees, ListPage, ObjResult, ObjectError, ObjectMeta, ObjectStore};

#[derive(Debug, Clone)]
struct Obj {
    data: Arc<Vec<u8>>,
    etag: Etag,
    modified_ms: u64,
}

/// A clock in milliseconds; tests move it by hand.
pub type MsClock = Arc<dyn Fn() -> u64 + Send + Sync>;

struct Shared {
    objects: Mutex<BTreeMap<String, Obj>>,
    next_etag: AtomicU64,
    clock: Option<MsClock>,
    guarantees: Guarantees,
    puts: AtomicU64,
    gets: AtomicU64,
    /// Successful GETs and PUTs per key (tests count what reached the store).
    per_key: Mutex<HashMap<String, (u64, u64)>>,
}

/// Everything a store can guarantee (the default of this store).
const ALL: Guarantees = Guarantees {
    conditional_create: true,
    compare_and_swap: true,
    atomic_put: true,
    durable: false,
    max_batch_delete: 1000,
};

impl Default for Shared {
    fn default() -> Self {
        Shared {
            objects: Mutex::default(),
            next_etag: AtomicU64::new(0),
            clock: None,
            guarantees: ALL,
            puts: AtomicU64::new(0),
            gets: AtomicU64::new(0),
            per_key: Mutex::default(),
        }
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryObjectStore")
            .field("objects", &self.objects.lock().len())
            .finish_non_exhaustive()
    }
}

/// An in-process object store with atomic If-None-Match and If-Match.
#[derive(Debug, Clone, Default)]
pub struct MemoryObjectStore {
    shared: Arc<Shared>,
}

fn system_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl MemoryObjectStore {
    /// An empty store stamping objects with the system clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty store stamping objects with `clock`.
    pub fn with_clock(clock: MsClock) -> Self {
        Self::with_options(Some(clock), ALL)
    }

    /// An empty store that refuses `put_if_match` (`Unsupported`) and says so in its
    /// guarantees, like a service without If-Match; its create-if-absent stays atomic.
    pub fn without_if_match(clock: Option<MsClock>) -> Self {
        Self::with_options(
            clock,
            Guarantees {
                compare_and_swap: false,
                ..ALL
            },
        )
    }

    /// An empty store with `clock` (the system clock if `None`) that claims `guarantees`
    /// and refuses the conditional writes they leave out.
    pub fn with_options(clock: Option<MsClock>, guarantees: Guarantees) -> Self {
        MemoryObjectStore {
            shared: Arc::new(Shared {
                clock,
                guarantees,
                ..Shared::default()
            }),
        }
    }

    /// Successful GETs (whole or ranged) of keys containing `pattern`.
    pub fn gets_of(&self, pattern: &str) -> u64 {
        self.count_of(pattern).0
    }

    /// Successful PUTs (of any kind) of keys containing `pattern`.
    pub fn puts_of(&self, pattern: &str) -> u64 {
        self.count_of(pattern).1
    }

    /// The most successful PUTs any one key containing `pattern` had.
    pub fn max_puts_per_key(&self, pattern: &str) -> u64 {
        self.shared
            .per_key
            .lock()
            .iter()
            .filter(|(k, _)| k.contains(pattern))
            .map(|(_, c)| c.1)
            .max()
            .unwrap_or(0)
    }

    fn count_of(&self, pattern: &str) -> (u64, u64) {
        self.shared
            .per_key
            .lock()
            .iter()
            .filter(|(k, _)| k.contains(pattern))
            .fold((0, 0), |acc, (_, c)| (acc.0 + c.0, acc.1 + c.1))
    }

    fn count(&self, key: &str, get: bool) {
        if get {
            self.shared.gets.fetch_add(1, Ordering::Relaxed);
        } else {
            self.shared.puts.fetch_add(1, Ordering::Relaxed);
        }
        let mut per = self.shared.per_key.lock();
        let c = per.entry(key.to_string()).or_default();
        if get {
            c.0 += 1;
        } else {
            c.1 += 1;
        }
    }

    fn now(&self) -> u64 {
        match &self.shared.clock {
            Some(c) => c(),
            None => system_ms(),
        }
    }

    fn new_obj(&self, body: &[u8]) -> Obj {
        let n = self.shared.next_etag.fetch_add(1, Ordering::Relaxed) + 1;
        Obj {
            data: Arc::new(body.to_vec()),
            etag: format!("\"m{n}\""),
            modified_ms: self.now(),
        }
    }

    /// Every key, sorted (tests).
    pub fn keys(&self) -> Vec<String> {
        self.shared.objects.lock().keys().cloned().collect()
    }

    /// Total bytes stored (tests).
    pub fn total_bytes(&self) -> u64 {
        self.shared
            .objects
            .lock()
            .values()
            .map(|o| o.data.len() as u64)
            .sum()
    }

    /// Successful PUTs of any kind so far.
    pub fn puts(&self) -> u64 {
        self.shared.puts.load(Ordering::Relaxed)
    }

    /// Successful GETs (whole or ranged) so far.
    pub fn gets(&self) -> u64 {
        self.shared.gets.load(Ordering::Relaxed)
    }

    fn meta(key: &str, o: &Obj) -> ObjectMeta {
        ObjectMeta {
            key: key.to_string(),
            size: o.data.len() as u64,
            etag: Some(o.etag.clone()),
            last_modified_ms: Some(o.modified_ms),
        }
    }
}

impl ObjectStore for MemoryObjectStore {
    fn service(&self) -> &str {
        "memory-cas"
    }

    fn guarantees(&self) -> Guarantees {
        self.shared.guarantees
    }

    fn get(&self, key: &str) -> ObjResult<(Vec<u8>, ObjectMeta)> {
        let objects = self.shared.objects.lock();
        let o = objects.get(key).ok_or_else(|| ObjectError::NotFound {
            key: key.to_string(),
        })?;
        let out = (o.data.as_ref().clone(), Self::meta(key, o));
        drop(objects);
        self.count(key, true);
        Ok(out)
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> ObjResult<Vec<u8>> {
        let objects = self.shared.objects.lock();
        let o = objects.get(key).ok_or_else(|| ObjectError::NotFound {
            key: key.to_string(),
        })?;
        let end = offset
            .checked_add(len)
            .filter(|&e| e <= o.data.len() as u64);
        let Some(end) = end else {
            return Err(ObjectError::Other {
                op: "get_range",
                key: key.to_string(),
                message: format!(
                    "range {offset}+{len} past the end of a {}-byte object",
                    o.data.len()
                ),
            });
        };
        let out = o
            .data
            .get(offset as usize..end as usize)
            .unwrap_or_default()
            .to_vec();
        drop(objects);
        self.count(key, true);
        Ok(out)
    }

    fn head(&self, key: &str) -> ObjResult<ObjectMeta> {
        let objects = self.shared.objects.lock();
        objects
            .get(key)
            .map(|o| Self::meta(key, o))
            .ok_or_else(|| ObjectError::NotFound {
                key: key.to_string(),
            })
    }

    fn put(&self, key: &str, body: &[u8]) -> ObjResult<Option<Etag>> {
        let o = self.new_obj(body);
        let etag = o.etag.clone();
        self.shared.objects.lock().insert(key.to_string(), o);
        self.count(key, false);
        Ok(Some(etag))
    }

    fn put_if_absent(&self, key: &str, body: &[u8]) -> ObjResult<Option<Etag>> {
        if !self.shared.guarantees.conditional_create {
            return Err(ObjectError::Unsupported {
                what: "memory store configured without create-if-absent".into(),
            });
        }
        let mut objects = self.shared.objects.lock();
        if objects.contains_key(key) {
            return Err(ObjectError::PreconditionFailed {
                key: key.to_string(),
            });
        }
        let o = self.new_obj(body);
        let etag = o.etag.clone();
        objects.insert(key.to_string(), o);
        drop(objects);
        self.count(key, false);
        Ok(Some(etag))
    }

    fn put_if_match(&self, key: &str, body: &[u8], etag: &str) -> ObjResult<Option<Etag>> {
        if !self.shared.guarantees.compare_and_swap {
            return Err(ObjectError::Unsupported {
                what: "memory store configured without If-Match".into(),
            });
        }
        let mut objects = self.shared.objects.lock();
        match objects.get(key) {
            Some(o) if o.etag == etag => {}
            _ => {
                return Err(ObjectError::PreconditionFailed {
                    key: key.to_string(),
                });
            }
        }
        let o = self.new_obj(body);
        let new = o.etag.clone();
        objects.insert(key.to_string(), o);
        drop(objects);
        self.count(key, false);
        Ok(Some(new))
    }

    fn list(
        &self,
        prefix: &str,
        delimiter: bool,
        start_after: Option<&str>,
        limit: usize,
    ) -> ObjResult<ListPage> {
        let objects = self.shared.objects.lock();
        let lower = match start_after {
            Some(a) if a >= prefix => Bound::Excluded(a.to_string()),
            _ => Bound::Included(prefix.to_string()),
        };
        let mut page = ListPage::default();
        let mut last: Option<String> = None;
        let limit = limit.max(1);
        for (k, o) in objects.range((lower, Bound::Unbounded)) {
            if !k.starts_with(prefix) {
                break;
            }
            if page.objects.len() + page.prefixes.len() >= limit {
                page.next = last;
                return Ok(page);
            }
            let rest = &k[prefix.len()..];
            match rest.find('/') {
                Some(i) if delimiter => {
                    let p = format!("{prefix}{}", &rest[..=i]);
                    if page.prefixes.last() != Some(&p) {
                        page.prefixes.push(p.clone());
                    }
                    // Continue after every key of this prefix.
                    last = Some(format!("{p}\u{10FFFF}"));
                }
                _ => {
                    page.objects.push(Self::meta(k, o));
                    last = Some(k.clone());
                }
            }
        }
        Ok(page)
    }

    fn delete(&self, key: &str) -> ObjResult<()> {
        self.shared.objects.lock().remove(key);
        Ok(())
    }

    fn delete_batch(&self, keys: &[String]) -> ObjResult<()> {
        let mut objects = self.shared.objects.lock();
        for k in keys {
            objects.remove(k);
        }
        Ok(())
    }
}
