//! Write batches and their validation.
//!
//! A batch is atomic within one (partition, branch). Keys may be added in any order (the
//! batch is sorted before it is applied); a key may appear only once per batch — two changes
//! to one key in one batch would leave "which one wins" to an accident of ordering, so such a
//! batch is refused.

use bough_tree::btree::{Mutation, Op};

use crate::error::{Error, Result};
use crate::options::Durability;

/// Per-put options: a user timestamp (last writer wins by it) and an expiry.
///
/// ```
/// use std::sync::Arc;
/// use bough::{ManualClock, Options, PutOptions, Store, WriteBatch};
///
/// let clock = ManualClock::new(1_000);
/// let store = Store::builder(Options::in_memory()).clock(Arc::new(clock.clone())).open()?;
/// let main = store.partition("t", 0)?.branch("main")?;
/// let ttl = PutOptions { ttl_ms: Some(10), ..PutOptions::default() };
/// main.write_blocking(WriteBatch::new().put_with("session", "s1", ttl))?;
/// assert!(main.get_blocking("session")?.is_some());
/// clock.advance(10); // expired: absent from every read
/// assert!(main.get_blocking("session")?.is_none());
/// # Ok::<(), bough::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PutOptions {
    /// User timestamp for last-writer-wins (default: the store clock, in ms).
    pub timestamp: Option<u64>,
    /// Absolute expiry in ms since the epoch.
    pub expire_at: Option<u64>,
    /// Expiry relative to the store clock (ignored when `expire_at` is set).
    pub ttl_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum BatchOp {
    Put { value: Vec<u8>, opts: PutOptions },
    Delete { timestamp: Option<u64> },
}

/// A set of upserts and deletes applied atomically.
///
/// Its methods chain, and a chain can be handed to a write as it is (the batch is moved out
/// of the temporary, no copy):
///
/// ```
/// use bough::{Options, Store, WriteBatch};
///
/// let store = Store::open(Options::in_memory())?;
/// let main = store.partition("orders", 0)?.branch("main")?;
/// main.write_blocking(WriteBatch::new().put("a", "1").put("b", "2"))?;
///
/// let mut batch = WriteBatch::new();
/// batch.put(b"c", [3u8]).delete("a");
/// assert_eq!(batch.len(), 2);
/// main.write_blocking(batch)?;
/// assert!(main.get_blocking("a")?.is_none());
/// assert_eq!(main.get_blocking("c")?.unwrap().value, [3]);
/// # Ok::<(), bough::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<(Vec<u8>, BatchOp)>,
    /// This batch's durability; `None`: the store's ([`Options::durability`](crate::Options::durability)).
    durability: Option<Durability>,
}

/// Takes the batch out of a chain of calls (`WriteBatch::new().put(..).delete(..)`), leaving
/// an empty batch behind.
impl From<&mut WriteBatch> for WriteBatch {
    fn from(batch: &mut WriteBatch) -> WriteBatch {
        std::mem::take(batch)
    }
}

impl WriteBatch {
    /// An empty batch.
    ///
    /// ```
    /// let mut batch = bough::WriteBatch::new();
    /// assert!(batch.is_empty());
    /// batch.put("a", "1").delete("b");
    /// assert_eq!(batch.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new() -> Self {
        WriteBatch::default()
    }

    /// Inserts or replaces `key`.
    ///
    /// ```
    /// use bough::{Options, Store, WriteBatch};
    /// let store = Store::open(Options::in_memory())?;
    /// let main = store.partition("orders", 0)?.branch("main")?;
    /// let mut batch = WriteBatch::new();
    /// batch.put("a", "1").put("b", "2"); // chains
    /// main.write_blocking(batch)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        self.put_with(key, value, PutOptions::default())
    }

    /// Inserts or replaces `key` with a timestamp and/or expiry.
    ///
    /// ```
    /// use bough::{Options, PutOptions, Store, WriteBatch};
    /// let store = Store::open(Options::in_memory())?;
    /// let main = store.partition("orders", 0)?.branch("main")?;
    /// let mut batch = WriteBatch::new();
    /// batch.put_with("session", "token", PutOptions { ttl_ms: Some(60_000), ..PutOptions::default() });
    /// main.write_blocking(batch)?;
    /// assert!(main.get_blocking("session")?.unwrap().expire_at.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn put_with(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        opts: PutOptions,
    ) -> &mut Self {
        self.ops.push((
            key.as_ref().to_vec(),
            BatchOp::Put {
                value: value.as_ref().to_vec(),
                opts,
            },
        ));
        self
    }

    /// Deletes `key` (at the store clock's time).
    ///
    /// ```
    /// use bough::{Options, Store, WriteBatch};
    /// let store = Store::open(Options::in_memory())?;
    /// let main = store.partition("orders", 0)?.branch("main")?;
    /// main.put_blocking("a", "1")?;
    /// main.write_blocking(WriteBatch::new().delete("a"))?;
    /// assert!(main.get_blocking("a")?.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        self.ops
            .push((key.as_ref().to_vec(), BatchOp::Delete { timestamp: None }));
        self
    }

    /// Deletes `key` as of user timestamp `ts` (an entry with a newer timestamp survives).
    ///
    /// ```
    /// use bough::{Options, PutOptions, Store, WriteBatch};
    /// let store = Store::open(Options::in_memory())?;
    /// let main = store.partition("orders", 0)?.branch("main")?;
    /// let mut put = WriteBatch::new();
    /// put.put_with("a", "new", PutOptions { timestamp: Some(2_000), ..PutOptions::default() });
    /// main.write_blocking(put)?;
    /// // A delete older than the entry loses (last writer wins by user timestamp).
    /// main.write_blocking(WriteBatch::new().delete_at("a", 1_000))?;
    /// assert!(main.get_blocking("a")?.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delete_at(&mut self, key: impl AsRef<[u8]>, ts: u64) -> &mut Self {
        self.ops.push((
            key.as_ref().to_vec(),
            BatchOp::Delete {
                timestamp: Some(ts),
            },
        ));
        self
    }

    /// Sets when this batch is acknowledged, overriding the store's
    /// [`Options::durability`](crate::Options::durability): `Sync` waits for its log
    /// record's `fdatasync` (which also makes every earlier buffered write of the branch
    /// durable), `Buffered` does not. Only for writes through the write buffer; batches
    /// committed through the tree (the buffer off, a batch too large for a log record,
    /// [`Branch::write_counted_blocking`](crate::Branch::write_counted_blocking)) are
    /// always acknowledged durable. Batches grouped into one commit are synced if any of
    /// them asks for `Sync`.
    ///
    /// ```
    /// use bough::{Durability, Options, Store, WriteBatch};
    /// let store = Store::open(Options::in_memory())?;
    /// let main = store.partition("orders", 0)?.branch("main")?;
    /// // Acknowledged once written, before its sync; `sync_blocking` makes it durable.
    /// main.write_blocking(WriteBatch::new().put("a", "1").durability(Durability::Buffered))?;
    /// main.sync_blocking()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn durability(&mut self, d: Durability) -> &mut Self {
        self.durability = Some(d);
        self
    }

    /// The durability this batch asked for, if it did.
    pub(crate) fn durability_choice(&self) -> Option<Durability> {
        self.durability
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Validates and sorts the batch into tree mutations. A delete's tombstone is purged
    /// `tombstone_retention_ms` after now; a user timestamp more than `max_skew_ms` after now
    /// is refused.
    pub(crate) fn into_mutations(
        self,
        now_ms: u64,
        page_size: u32,
        tombstone_retention_ms: u64,
        max_skew_ms: u64,
    ) -> Result<Vec<Mutation>> {
        let mut muts = Vec::with_capacity(self.ops.len());
        let latest = now_ms.saturating_add(max_skew_ms);
        for (key, op) in self.ops {
            let user_ts = match &op {
                BatchOp::Put { opts, .. } => opts.timestamp,
                BatchOp::Delete { timestamp } => *timestamp,
            };
            if let Some(ts) = user_ts.filter(|&ts| ts > latest) {
                // Last-writer-wins would keep such an entry against every later write until
                // the clock caught up: refused rather than stored.
                return Err(Error::invalid(format!(
                    "key {}: timestamp {ts} is {} ms ahead of the store clock ({now_ms}); at most \
                     {max_skew_ms} ms ahead is accepted (option `max_timestamp_skew_ms`)",
                    show_key(&key),
                    ts - now_ms
                )));
            }
            let op = match op {
                BatchOp::Put { value, opts } => {
                    let expire_at = match (opts.expire_at, opts.ttl_ms) {
                        (Some(at), _) => at.max(1),
                        (None, Some(ttl)) => now_ms.saturating_add(ttl).max(1),
                        (None, None) => 0,
                    };
                    Op::Put {
                        value,
                        timestamp: opts.timestamp.unwrap_or(now_ms),
                        expire_at,
                    }
                }
                BatchOp::Delete { timestamp } => Op::Delete {
                    timestamp: timestamp.unwrap_or(now_ms),
                    expire_at: now_ms.saturating_add(tombstone_retention_ms).max(1),
                },
            };
            let m = Mutation { key, op };
            // The same check the tree applies to every commit (writes, imports, merges).
            m.check(page_size)
                .map_err(|e| Error::invalid(format!("key {}: {e}", show_key(&m.key))))?;
            muts.push(m);
        }
        muts.sort_unstable_by(|a, b| bough_tree::btree::key_order(&a.key, &b.key));
        if let Some([a, _]) = muts
            .windows(2)
            .find(|w| matches!(w, [a, b] if a.key == b.key))
        {
            return Err(Error::invalid(format!(
                "key {} appears twice in one batch",
                show_key(&a.key)
            )));
        }
        Ok(muts)
    }
}

/// Refuses empty and over-long keys (reads use the same bound as writes).
pub(crate) fn check_key(key: &[u8], max_key: usize) -> Result<()> {
    if key.is_empty() {
        return Err(Error::invalid("empty key"));
    }
    if key.len() > max_key {
        return Err(Error::invalid(format!(
            "key {} is {} bytes; the maximum for this page size is {max_key}",
            show_key(key),
            key.len()
        )));
    }
    Ok(())
}

/// A key for messages: printable ASCII as is, the rest escaped, long keys shortened.
///
/// ```
/// assert_eq!(bough::show_key(b"k\x01"), "\"k\\x01\"");
/// ```
pub fn show_key(key: &[u8]) -> String {
    let shown: String = key
        .iter()
        .take(64)
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect();
    if key.len() > 64 {
        format!("\"{shown}…\" ({} bytes)", key.len())
    } else {
        format!("\"{shown}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_and_refuses_duplicates_and_bad_keys() {
        let mut b = WriteBatch::new();
        b.put("b", "2").put("a", "1").delete("c");
        let m = b.into_mutations(5, 4096, 10, 0).unwrap();
        assert_eq!(
            m.iter().map(|m| m.key.clone()).collect::<Vec<_>>(),
            vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]
        );
        let mut b = WriteBatch::new();
        b.put("a", "1").delete("a");
        assert!(
            b.into_mutations(5, 16, 10, 0)
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
        let mut b = WriteBatch::new();
        b.put("", "1");
        assert!(
            b.into_mutations(5, 16, 10, 0)
                .unwrap_err()
                .to_string()
                .contains("empty key")
        );
        let mut b = WriteBatch::new();
        b.put(vec![b'x'; 17], "1");
        assert!(
            b.into_mutations(5, 16, 10, 0)
                .unwrap_err()
                .to_string()
                .contains("maximum")
        );
    }

    /// `put --ts 18446744073709551615` made a key no later write could replace: user
    /// timestamps beyond the clock plus the allowed skew are refused, puts and deletes alike.
    #[test]
    fn regression_timestamps_far_ahead_of_the_clock_are_refused() {
        let at = |ts: u64| PutOptions {
            timestamp: Some(ts),
            ..PutOptions::default()
        };
        let mut b = WriteBatch::new();
        b.put_with("a", "1", at(1_100)).delete_at("b", 1_100);
        assert!(b.into_mutations(1_000, 4096, 10, 100).is_ok());
        for ts in [1_101, u64::MAX] {
            let mut b = WriteBatch::new();
            b.put_with("a", "1", at(ts));
            let e = b.into_mutations(1_000, 4096, 10, 100).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{e}");
            assert!(e.to_string().contains("max_timestamp_skew_ms"), "{e}");
            let mut b = WriteBatch::new();
            b.delete_at("a", ts);
            let e = b.into_mutations(1_000, 4096, 10, 100).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{e}");
        }
        // No skew overflow at the end of time, and old timestamps stay fine.
        let mut b = WriteBatch::new();
        b.put_with("a", "1", at(u64::MAX)).delete_at("b", 0);
        assert!(b.into_mutations(u64::MAX - 5, 4096, 10, 100).is_ok());
    }
}
