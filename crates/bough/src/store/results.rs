//! What reads and writes return: values, key-value pairs, diff entries, scan pages, write
//! reports.

use super::*;

/// A key's value and metadata.
///
/// ```
/// use bough::{Options, PutOptions, Store, WriteBatch};
///
/// let store = Store::open(Options::in_memory())?;
/// let main = store.partition("t", 0)?.branch("main")?;
/// let at = PutOptions { timestamp: Some(5), expire_at: Some(u64::MAX), ..PutOptions::default() };
/// main.write_blocking(WriteBatch::new().put_with("k", "v", at))?;
/// let v = main.get_blocking("k")?.unwrap();
/// assert_eq!((v.value.as_slice(), v.timestamp, v.expire_at), (&b"v"[..], 5, Some(u64::MAX)));
/// let kv = main.iter().next().unwrap()?; // a KeyValue
/// assert_eq!((kv.key, kv.value), (b"k".to_vec(), v));
/// # Ok::<(), bough::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    /// The value bytes.
    pub value: Vec<u8>,
    /// The user timestamp it was written with.
    pub timestamp: u64,
    /// When it expires (ms since the epoch), if ever.
    pub expire_at: Option<u64>,
}

/// A key with its value, as a scan returns it.
///
/// ```
/// use bough::{KeyValue, Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let main = store.partition("t", 0)?.branch("main")?;
/// main.put_blocking("order-1", "paid")?;
/// let all: Vec<KeyValue> = main.prefix("order-").collect::<bough::Result<_>>()?;
/// assert_eq!((all[0].key.as_slice(), all[0].value.value.as_slice()), (&b"order-1"[..], &b"paid"[..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: Vec<u8>,
    /// Its value and metadata.
    pub value: Value,
}

/// How a key differs between two branches.
///
/// ```
/// use bough::{DiffChange, Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// orders.branch("main")?.put_blocking("a", "1")?;
/// let dev = orders.create_branch("dev", "main")?;
/// dev.put_blocking("a", "2")?;
/// dev.put_blocking("b", "3")?;
/// let diff = orders.diff("main", "dev")?;
/// assert!(matches!(&diff[0].change, DiffChange::Changed { old, new } if old.value == b"1" && new.value == b"2"));
/// assert!(matches!(&diff[1].change, DiffChange::Added(v) if v.value == b"3"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffChange {
    /// Only in the second branch.
    Added(Value),
    /// Only in the first branch.
    Removed(Value),
    /// In both, different.
    Changed { old: Value, new: Value },
}

/// One key of a diff.
///
/// ```
/// use bough::{DiffChange, Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// orders.branch("main")?.put_blocking("a", "1")?;
/// let dev = orders.create_branch("dev", "main")?;
/// dev.delete_blocking("a")?;
/// let diff = orders.diff("main", "dev")?;
/// assert_eq!(diff[0].key, b"a");
/// assert!(matches!(diff[0].change, DiffChange::Removed(_)));
/// // Removed by a delete: its tombstone's time is kept.
/// assert!(diff[0].deleted_at.is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffEntry {
    /// The key.
    pub key: Vec<u8>,
    /// How it differs.
    pub change: DiffChange,
    /// For a [`DiffChange::Removed`] key that the second branch deleted: the timestamp of
    /// its delete (the tombstone it keeps). `None` otherwise — also for a key removed
    /// without a tombstone (expired, truncated).
    pub deleted_at: Option<u64>,
}

/// What a scan reads: one page of a range, for callers that page (the CLI); a
/// [`RangeIter`](crate::RangeIter) reads a range lazily instead.
///
/// ```
/// use std::ops::Bound;
/// use bough::{Options, ScanOptions, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let main = store.partition("t", 0)?.branch("main")?;
/// for k in ["a", "b", "c", "d"] {
///     main.put_blocking(k, "v")?;
/// }
/// let mut opts = ScanOptions {
///     begin: Bound::Excluded(b"a".to_vec()),
///     end: Bound::Included(b"d".to_vec()),
///     limit: 2,
///     ..ScanOptions::default()
/// };
/// let page = main.scan_blocking(&opts)?; // a ScanPage
/// assert_eq!(page.entries.len(), 2);
/// opts.begin = Bound::Included(page.next.unwrap()); // where the next page starts
/// assert_eq!(main.scan_blocking(&opts)?.entries[0].key, b"d");
/// # Ok::<(), bough::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// Where to start (inclusive or exclusive; unbounded = from the first key).
    pub begin: Bound<Vec<u8>>,
    /// Where to stop (inclusive or exclusive; unbounded = to the last key).
    pub end: Bound<Vec<u8>>,
    /// Most entries returned; at least 1 (0 is refused as an invalid argument).
    pub limit: usize,
    /// Stop after this many key + value bytes (at least one entry is returned).
    pub max_bytes: usize,
    /// Return keys without reading values.
    pub keys_only: bool,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            begin: Bound::Unbounded,
            end: Bound::Unbounded,
            limit: usize::MAX,
            max_bytes: usize::MAX,
            keys_only: false,
        }
    }
}

/// What [`Branch::write_counted_blocking`] changed.
///
/// ```
/// use bough::{Options, PutOptions, Store, WriteBatch};
///
/// let store = Store::open(Options::in_memory())?;
/// let main = store.partition("t", 0)?.branch("main")?;
/// let at = |ts| PutOptions { timestamp: Some(ts), ..PutOptions::default() };
/// main.write_blocking(WriteBatch::new().put_with("a", "new", at(20)))?;
/// let r = main.write_counted_blocking(WriteBatch::new().put_with("a", "old", at(10)).put("b", "x"))?;
/// assert_eq!((r.applied, r.superseded), (1, 1));
/// # Ok::<(), bough::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteReport {
    /// Puts and deletes that took effect.
    pub applied: u64,
    /// Puts and deletes that last-writer-wins skipped: the stored entry (or the tombstone
    /// of a delete) had a newer timestamp.
    pub superseded: u64,
}

/// One page of scan results.
///
/// ```
/// use bough::{Options, ScanOptions, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let main = store.partition("t", 0)?.branch("main")?;
/// for k in ["a", "b", "c"] {
///     main.put_blocking(k, "v")?;
/// }
/// let page = main.scan_blocking(&ScanOptions { limit: 2, ..ScanOptions::default() })?;
/// assert_eq!(page.entries.len(), 2);
/// assert_eq!(page.next.as_deref(), Some(&b"c"[..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanPage {
    /// Entries in key order.
    pub entries: Vec<KeyValue>,
    /// Where the next page starts (inclusive), if the scan stopped at a limit.
    pub next: Option<Vec<u8>>,
}
