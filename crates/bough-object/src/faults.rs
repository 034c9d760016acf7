//! [`FaultyObjectStore`]: a wrapper that injects the failures real object stores produce —
//! 5xx and 429 answers, timeouts before or *after* the request took effect, and bodies cut
//! off mid-transfer — so the retry and read-back logic of the cloud tier can be tested.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::object::{
    Etag, Guarantees, ListPage, ObjResult, ObjectError, ObjectMeta, ObjectStore, Transient,
};

/// The request kind a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjOp {
    /// `get` and `get_range`.
    Get,
    /// `head`.
    Head,
    /// `put`.
    Put,
    /// `put_if_absent`.
    PutIfAbsent,
    /// `put_if_match`.
    PutIfMatch,
    /// `list`.
    List,
    /// `delete` and `delete_batch`.
    Delete,
}

/// What goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// An HTTP status: 429 is throttling, 5xx a server error; nothing took effect.
    Status(u16),
    /// No answer in time; the request did not reach the store.
    TimeoutBefore,
    /// No answer in time, but the store applied the request.
    TimeoutAfter,
    /// The body of a read is cut off halfway (reported as success by the transport).
    ShortRead,
}

#[derive(Debug, Clone)]
struct Plan {
    op: ObjOp,
    key_contains: Option<String>,
    skip: u64,
    count: u64,
    fault: Fault,
}

/// Wraps a store and fails planned requests. Clones share the plan.
#[derive(Debug, Clone)]
pub struct FaultyObjectStore {
    inner: Arc<dyn ObjectStore>,
    plans: Arc<Mutex<VecDeque<Plan>>>,
    fired: Arc<AtomicU64>,
}

impl FaultyObjectStore {
    /// Wraps `inner` with nothing planned.
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        FaultyObjectStore {
            inner,
            plans: Arc::default(),
            fired: Arc::default(),
        }
    }

    /// Fails the next `count` requests of kind `op`.
    pub fn fail_next(&self, op: ObjOp, fault: Fault, count: u64) {
        self.plan(op, None, 0, fault, count);
    }

    /// Lets `skip` matching requests pass, then fails `count` requests of kind `op` whose
    /// key contains `key_contains` (any key if `None`).
    pub fn plan(&self, op: ObjOp, key_contains: Option<&str>, skip: u64, fault: Fault, count: u64) {
        if count == 0 {
            return;
        }
        self.plans.lock().push_back(Plan {
            op,
            key_contains: key_contains.map(str::to_string),
            skip,
            count,
            fault,
        });
    }

    /// Forgets every plan.
    pub fn clear(&self) {
        self.plans.lock().clear();
    }

    /// Faults injected so far.
    pub fn fired(&self) -> u64 {
        self.fired.load(Ordering::Relaxed)
    }

    /// The planned fault for this request, if one fires.
    fn take(&self, op: ObjOp, key: &str) -> Option<Fault> {
        let mut plans = self.plans.lock();
        let i = plans.iter().position(|p| {
            p.op == op && p.key_contains.as_deref().is_none_or(|s| key.contains(s))
        })?;
        let p = plans.get_mut(i)?;
        if p.skip > 0 {
            p.skip -= 1;
            return None;
        }
        let fault = p.fault;
        p.count -= 1;
        if p.count == 0 {
            plans.remove(i);
        }
        self.fired.fetch_add(1, Ordering::Relaxed);
        Some(fault)
    }

    fn error(op: &'static str, key: &str, fault: Fault) -> ObjectError {
        let (reason, message) = match fault {
            Fault::Status(429) => (Transient::Throttled, "injected 429 SlowDown".to_string()),
            Fault::Status(s) => (Transient::Server, format!("injected HTTP {s}")),
            Fault::TimeoutBefore => (Transient::Timeout, "injected timeout".into()),
            Fault::TimeoutAfter => (
                Transient::Timeout,
                "injected timeout (the request was applied)".into(),
            ),
            Fault::ShortRead => (Transient::Network, "injected short read".into()),
        };
        ObjectError::Transient {
            op,
            key: key.to_string(),
            reason,
            message,
        }
    }

    /// Runs `f` under the planned fault of (`op`, `key`).
    fn with<T>(
        &self,
        op: ObjOp,
        name: &'static str,
        key: &str,
        f: impl FnOnce() -> ObjResult<T>,
    ) -> ObjResult<T> {
        match self.take(op, key) {
            None | Some(Fault::ShortRead) => f(),
            Some(Fault::TimeoutAfter) => {
                let _ = f();
                Err(Self::error(name, key, Fault::TimeoutAfter))
            }
            Some(fault) => Err(Self::error(name, key, fault)),
        }
    }
}

impl ObjectStore for FaultyObjectStore {
    fn service(&self) -> &str {
        self.inner.service()
    }

    fn guarantees(&self) -> Guarantees {
        self.inner.guarantees()
    }

    fn get(&self, key: &str) -> ObjResult<(Vec<u8>, ObjectMeta)> {
        match self.take(ObjOp::Get, key) {
            Some(Fault::ShortRead) => {
                let (mut data, meta) = self.inner.get(key)?;
                data.truncate(data.len() / 2);
                Ok((data, meta))
            }
            Some(Fault::TimeoutAfter) => {
                let _ = self.inner.get(key);
                Err(Self::error("get", key, Fault::TimeoutAfter))
            }
            Some(f) => Err(Self::error("get", key, f)),
            None => self.inner.get(key),
        }
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> ObjResult<Vec<u8>> {
        match self.take(ObjOp::Get, key) {
            Some(Fault::ShortRead) => {
                let mut data = self.inner.get_range(key, offset, len)?;
                data.truncate(data.len() / 2);
                Ok(data)
            }
            Some(f) => Err(Self::error("get_range", key, f)),
            None => self.inner.get_range(key, offset, len),
        }
    }

    fn head(&self, key: &str) -> ObjResult<ObjectMeta> {
        self.with(ObjOp::Head, "head", key, || self.inner.head(key))
    }

    fn put(&self, key: &str, body: &[u8]) -> ObjResult<Option<Etag>> {
        self.with(ObjOp::Put, "put", key, || self.inner.put(key, body))
    }

    fn put_if_absent(&self, key: &str, body: &[u8]) -> ObjResult<Option<Etag>> {
        self.with(ObjOp::PutIfAbsent, "put_if_absent", key, || {
            self.inner.put_if_absent(key, body)
        })
    }

    fn put_if_match(&self, key: &str, body: &[u8], etag: &str) -> ObjResult<Option<Etag>> {
        self.with(ObjOp::PutIfMatch, "put_if_match", key, || {
            self.inner.put_if_match(key, body, etag)
        })
    }

    fn list(
        &self,
        prefix: &str,
        delimiter: bool,
        start_after: Option<&str>,
        limit: usize,
    ) -> ObjResult<ListPage> {
        self.with(ObjOp::List, "list", prefix, || {
            self.inner.list(prefix, delimiter, start_after, limit)
        })
    }

    fn delete(&self, key: &str) -> ObjResult<()> {
        self.with(ObjOp::Delete, "delete", key, || self.inner.delete(key))
    }

    fn delete_batch(&self, keys: &[String]) -> ObjResult<()> {
        let first = keys.first().map(String::as_str).unwrap_or("");
        self.with(ObjOp::Delete, "delete_batch", first, || {
            self.inner.delete_batch(keys)
        })
    }
}
