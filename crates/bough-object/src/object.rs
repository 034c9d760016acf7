//! The narrow object-store interface the cloud tier is written against, so faults can be
//! injected in front of any store and an opendal upgrade stays inside one module.
//!
//! Keys are `/`-separated, relative to the store's root (bucket + prefix), never starting
//! with `/`. Every call is blocking; implementations are safe to call from many threads.

use std::fmt;

/// An object's entity tag, as the service returned it (quotes included where it has them).
pub type Etag = String;

/// What a service guarantees. The cloud tier refuses a configuration whose needs the
/// service does not meet (see [`CloudStorage::open`](crate::CloudStorage::open)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guarantees {
    /// `put_if_absent` is atomic: of racing creators exactly one wins.
    pub conditional_create: bool,
    /// `put_if_match` is an atomic compare-and-swap on the ETag.
    pub compare_and_swap: bool,
    /// A PUT is all or nothing: readers see the old object, or the whole new one.
    pub atomic_put: bool,
    /// Acknowledged writes survive the process (false for in-process stores).
    pub durable: bool,
    /// Most keys one batch delete removes (1 = deleted one by one).
    pub max_batch_delete: usize,
}

/// Size, ETag and modification time of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    /// The object's key.
    pub key: String,
    /// Its length in bytes.
    pub size: u64,
    /// Its entity tag, where the service reports one.
    pub etag: Option<Etag>,
    /// Last modification, milliseconds since the Unix epoch, where the service reports it.
    pub last_modified_ms: Option<u64>,
}

/// One page of a listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListPage {
    /// Objects, in key order.
    pub objects: Vec<ObjectMeta>,
    /// With a delimiter: the "directories" (key prefixes ending in `/`) directly below the
    /// listed prefix, in order.
    pub prefixes: Vec<String>,
    /// Where the next page starts (exclusive), when there may be more.
    pub next: Option<String>,
}

/// Why a request may succeed if repeated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transient {
    /// 429 / SlowDown.
    Throttled,
    /// 5xx.
    Server,
    /// No answer in time. The request may or may not have taken effect.
    Timeout,
    /// The connection failed or a body was cut off.
    Network,
}

/// An object-store failure.
#[derive(Debug)]
pub enum ObjectError {
    /// The key does not exist.
    NotFound { key: String },
    /// A conditional write lost: the object exists (`put_if_absent`) or its ETag differs or
    /// it is gone (`put_if_match`). After a retried request this is ambiguous: the earlier
    /// attempt may have been the one that changed the object.
    PreconditionFailed { key: String },
    /// A failure that a later attempt may not see.
    Transient {
        op: &'static str,
        key: String,
        reason: Transient,
        message: String,
    },
    /// The service cannot do this (for example `put_if_match` without If-Match support).
    Unsupported { what: String },
    /// Anything else (permission denied, bad configuration, a malformed answer).
    Other {
        op: &'static str,
        key: String,
        message: String,
    },
}

impl ObjectError {
    /// Whether repeating the request may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, ObjectError::Transient { .. })
    }

    /// Whether an earlier attempt of the failed request may nevertheless have taken effect.
    pub fn may_have_applied(&self) -> bool {
        matches!(
            self,
            ObjectError::Transient {
                reason: Transient::Timeout | Transient::Network | Transient::Server,
                ..
            }
        )
    }
}

impl fmt::Display for ObjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObjectError::NotFound { key } => write!(f, "object {key}: not found"),
            ObjectError::PreconditionFailed { key } => {
                write!(f, "object {key}: precondition failed")
            }
            ObjectError::Transient {
                op,
                key,
                reason,
                message,
            } => write!(f, "{op} {key}: transient failure ({reason:?}): {message}"),
            ObjectError::Unsupported { what } => write!(f, "unsupported: {what}"),
            ObjectError::Other { op, key, message } => write!(f, "{op} {key}: {message}"),
        }
    }
}

impl std::error::Error for ObjectError {}

/// Result of an object-store call.
pub type ObjResult<T> = Result<T, ObjectError>;

/// The operations the cloud tier needs from an object store.
pub trait ObjectStore: Send + Sync + fmt::Debug {
    /// A short name of the service (`s3`, `memory`, …) for logs and errors.
    fn service(&self) -> &str;
    /// What the service guarantees.
    fn guarantees(&self) -> Guarantees;
    /// The whole object and its metadata.
    fn get(&self, key: &str) -> ObjResult<(Vec<u8>, ObjectMeta)>;
    /// `len` bytes at `offset`. A range past the end is an error.
    fn get_range(&self, key: &str, offset: u64, len: u64) -> ObjResult<Vec<u8>>;
    /// Metadata without the body.
    fn head(&self, key: &str) -> ObjResult<ObjectMeta>;
    /// Writes (replaces) the object; returns its new ETag where the service reports one.
    fn put(&self, key: &str, body: &[u8]) -> ObjResult<Option<Etag>>;
    /// Writes the object only if no object has the key (If-None-Match: *).
    fn put_if_absent(&self, key: &str, body: &[u8]) -> ObjResult<Option<Etag>>;
    /// Replaces the object only if its ETag is `etag` (If-Match); a missing object fails
    /// too. Returns the new ETag.
    fn put_if_match(&self, key: &str, body: &[u8], etag: &str) -> ObjResult<Option<Etag>>;
    /// One page of the keys starting with `prefix` and (exclusive) after `start_after`, at
    /// most `limit` entries. With `delimiter`, keys containing a further `/` after the prefix
    /// are folded into `prefixes`.
    fn list(
        &self,
        prefix: &str,
        delimiter: bool,
        start_after: Option<&str>,
        limit: usize,
    ) -> ObjResult<ListPage>;
    /// Deletes the object; a missing object is not an error.
    fn delete(&self, key: &str) -> ObjResult<()>;
    /// Deletes several objects (in batches of [`Guarantees::max_batch_delete`] where the
    /// service can); missing objects are not errors.
    fn delete_batch(&self, keys: &[String]) -> ObjResult<()> {
        for k in keys {
            self.delete(k)?;
        }
        Ok(())
    }
}

/// Every key under `prefix` (recursive), following pagination to the end.
pub fn list_all(store: &dyn ObjectStore, prefix: &str) -> ObjResult<Vec<ObjectMeta>> {
    let mut out = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = store.list(prefix, false, after.as_deref(), 1000)?;
        out.extend(page.objects);
        match page.next {
            Some(n) => after = Some(n),
            None => return Ok(out),
        }
    }
}
