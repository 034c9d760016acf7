//! [`ReadView`]: a consistent view of one branch at one commit.

use super::*;

/// A consistent view of one branch at one commit: every read of it sees the same state,
/// whatever is written meanwhile.
///
/// ```
/// use bough::{Options, ScanOptions, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let main = store.partition("t", 0)?.branch("main")?;
/// main.put_blocking("a", "1")?;
/// let view = main.read_view()?;
/// main.put_blocking("a", "2")?;
/// assert_eq!(view.get("a")?.unwrap().value, b"1");
/// assert_eq!(main.read_view()?.version(), view.version() + 1);
/// let page = view.scan(&ScanOptions { limit: 10, ..ScanOptions::default() })?;
/// assert_eq!(page.entries.len(), 1);
/// assert_eq!(view.prefix("a").count(), 1);
/// # Ok::<(), bough::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ReadView {
    pub(super) snap: Arc<TreeSnapshot>,
    pub(super) now: u64,
    pub(super) label: Arc<str>,
    pub(super) max_key: usize,
}

/// What a read needs besides the snapshot: the time expiry is judged at, the label errors
/// name and the longest key accepted. Borrowed, so a get on the published snapshot clones
/// nothing (see [`Branch::get_blocking`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct ReadAt<'a> {
    pub(super) now: u64,
    pub(super) label: &'a str,
    pub(super) max_key: usize,
}

impl ReadAt<'_> {
    /// The live value of `key` in `snap`, through its write buffer.
    pub(super) fn get(self, snap: &TreeSnapshot, key: &[u8]) -> Result<Option<Value>> {
        check_key(key, self.max_key).map_err(|e| e.at(self.label))?;
        // Through the write buffer: its runs above the tree (just the tree when empty).
        let found = snap
            .buffered()
            .get(key)
            .map_err(|e| Error::from(e).at(self.label))?;
        match found {
            Some(e) if e.is_live_at(self.now) => Ok(Some(self.value_of(snap, e, false)?)),
            _ => Ok(None),
        }
    }

    fn value_of(self, snap: &TreeSnapshot, e: Entry, keys_only: bool) -> Result<Value> {
        let value = match e.value {
            _ if keys_only => Vec::new(),
            ValueLoc::Inline(v) => v,
            ValueLoc::Overflow { first, pages, len } => snap
                .read_overflow(first, pages, len)
                .map_err(|err| Error::from(err).at(self.label))?,
            // Callers pass live entries only, and a tombstone is never live.
            ValueLoc::Tombstone => Vec::new(),
        };
        Ok(Value {
            value,
            timestamp: e.timestamp,
            expire_at: (e.expire_at != 0).then_some(e.expire_at),
        })
    }
}

impl ReadView {
    fn at(&self) -> ReadAt<'_> {
        ReadAt {
            now: self.now,
            label: &self.label,
            max_key: self.max_key,
        }
    }

    pub(super) fn live(&self, e: &Entry) -> bool {
        e.is_live_at(self.now)
    }

    pub(super) fn value_of(&self, e: Entry, keys_only: bool) -> Result<Value> {
        self.at().value_of(&self.snap, e, keys_only)
    }

    /// The commit this view shows.
    pub fn version(&self) -> u64 {
        self.snap.version
    }

    /// The value of `key`, unless absent or expired.
    pub fn get<K: AsRef<[u8]>>(&self, key: K) -> Result<Option<Value>> {
        self.at().get(&self.snap, key.as_ref())
    }

    /// The greatest live key ≤ `key`.
    pub fn floor<K: AsRef<[u8]>>(&self, key: K) -> Result<Option<KeyValue>> {
        let mut probe = key.as_ref().to_vec();
        let mut inclusive = true;
        loop {
            let found = self
                .snap
                .buffered()
                .before(&probe, inclusive)
                .map_err(|e| Error::from(e).at(&self.label))?;
            match found {
                None => return Ok(None),
                Some(e) if self.live(&e) => {
                    let key = e.key.clone();
                    return Ok(Some(KeyValue {
                        key,
                        value: self.value_of(e, false)?,
                    }));
                }
                // Expired: keep looking below it.
                Some(e) => {
                    probe = e.key;
                    inclusive = false;
                }
            }
        }
    }

    /// A page of live entries from `opts.begin` to `opts.end`, read as a [`RangeIter`] is.
    pub fn scan(&self, opts: &ScanOptions) -> Result<ScanPage> {
        if opts.limit == 0 {
            // A page of nothing whose continuation is its own start would make a paging
            // loop spin forever.
            return Err(Error::invalid("scan limit must be at least 1"));
        }
        let mut range = RangeIter::new(self.clone(), opts.begin.clone(), opts.end.clone());
        let mut entries = Vec::new();
        let mut bytes = 0usize;
        while let Some(e) = range.next_entry()? {
            // Checked before the value is read: the entry that does not fit only says where
            // the next page starts.
            if entries.len() >= opts.limit || (bytes >= opts.max_bytes && !entries.is_empty()) {
                return Ok(ScanPage {
                    entries,
                    next: Some(e.key),
                });
            }
            let kv = range.pair(e, opts.keys_only)?;
            bytes += kv.key.len() + kv.value.value.len();
            entries.push(kv);
        }
        Ok(ScanPage {
            entries,
            next: None,
        })
    }
}
