//! [`Cut`]: the object store as one process sees it, with the process's death in front of
//! it. Once armed, it lets a given number of further requests through and refuses every
//! later one: the process died, so nothing it sends reaches the store any more.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bough::object::{Etag, Guarantees, ListPage, ObjResult, ObjectError, ObjectMeta, ObjectStore};

/// One process's path to the object store. Clones share the count and the limit.
#[derive(Debug, Clone)]
pub(crate) struct Cut {
    inner: Arc<dyn ObjectStore>,
    state: Arc<Counters>,
}

#[derive(Debug)]
struct Counters {
    /// Requests made so far (passed or refused).
    requests: AtomicU64,
    /// Requests with a lower number pass; `u64::MAX` when not armed.
    limit: AtomicU64,
    /// Requests refused.
    refused: AtomicU64,
}

impl Cut {
    /// Wraps `inner`, not armed.
    pub(crate) fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Cut {
            inner,
            state: Arc::new(Counters {
                requests: AtomicU64::new(0),
                limit: AtomicU64::new(u64::MAX),
                refused: AtomicU64::new(0),
            }),
        }
    }

    /// The process dies after `k` more requests (at once with `k = 0`).
    pub(crate) fn arm(&self, k: u64) {
        let now = self.state.requests.load(Ordering::SeqCst);
        self.state
            .limit
            .store(now.saturating_add(k), Ordering::SeqCst);
    }

    /// Every request passes again (a zombie: the process was only cut off).
    pub(crate) fn disarm(&self) {
        self.state.limit.store(u64::MAX, Ordering::SeqCst);
    }

    /// Whether a request was refused: the process died.
    pub(crate) fn fired(&self) -> bool {
        self.state.refused.load(Ordering::SeqCst) > 0
    }

    /// Lets the request through, or refuses it as a dead process: a non-transient error,
    /// so no retry makes it pass.
    fn gate(&self, op: &'static str, key: &str) -> ObjResult<()> {
        let n = self.state.requests.fetch_add(1, Ordering::SeqCst);
        if n < self.state.limit.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.state.refused.fetch_add(1, Ordering::SeqCst);
        Err(ObjectError::Other {
            op,
            key: key.to_string(),
            message: "injected crash: the process is dead".to_string(),
        })
    }
}

impl ObjectStore for Cut {
    fn service(&self) -> &str {
        self.inner.service()
    }

    fn guarantees(&self) -> Guarantees {
        self.inner.guarantees()
    }

    fn get(&self, key: &str) -> ObjResult<(Vec<u8>, ObjectMeta)> {
        self.gate("get", key)?;
        self.inner.get(key)
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> ObjResult<Vec<u8>> {
        self.gate("get_range", key)?;
        self.inner.get_range(key, offset, len)
    }

    fn head(&self, key: &str) -> ObjResult<ObjectMeta> {
        self.gate("head", key)?;
        self.inner.head(key)
    }

    fn put(&self, key: &str, body: &[u8]) -> ObjResult<Option<Etag>> {
        self.gate("put", key)?;
        self.inner.put(key, body)
    }

    fn put_if_absent(&self, key: &str, body: &[u8]) -> ObjResult<Option<Etag>> {
        self.gate("put_if_absent", key)?;
        self.inner.put_if_absent(key, body)
    }

    fn put_if_match(&self, key: &str, body: &[u8], etag: &str) -> ObjResult<Option<Etag>> {
        self.gate("put_if_match", key)?;
        self.inner.put_if_match(key, body, etag)
    }

    fn list(
        &self,
        prefix: &str,
        delimiter: bool,
        start_after: Option<&str>,
        limit: usize,
    ) -> ObjResult<ListPage> {
        self.gate("list", prefix)?;
        self.inner.list(prefix, delimiter, start_after, limit)
    }

    fn delete(&self, key: &str) -> ObjResult<()> {
        self.gate("delete", key)?;
        self.inner.delete(key)
    }

    /// One request, as a service's batch delete is.
    fn delete_batch(&self, keys: &[String]) -> ObjResult<()> {
        self.gate("delete_batch", keys.first().map_or("", String::as_str))?;
        self.inner.delete_batch(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bough::object::MemoryObjectStore;

    #[test]
    fn armed_cut_lets_k_requests_pass_then_refuses_every_kind() {
        let mem = MemoryObjectStore::new();
        let cut = Cut::new(Arc::new(mem.clone()));
        cut.put("a", b"1").expect("not armed");
        cut.arm(2);
        cut.get("a").expect("first of two");
        cut.head("a").expect("second of two");
        assert!(cut.put("b", b"2").is_err());
        let e = cut.put_if_absent("c", b"3").expect_err("dead");
        assert!(!e.is_transient(), "no retry hides a death");
        assert!(cut.get_range("a", 0, 1).is_err());
        assert!(cut.list("", false, None, 10).is_err());
        assert!(cut.delete("a").is_err());
        assert!(cut.fired());
        assert!(
            mem.get("b").is_err() && mem.get("c").is_err(),
            "nothing reached the store"
        );
        cut.disarm();
        cut.put("d", b"4").expect("disarmed");
    }
}
