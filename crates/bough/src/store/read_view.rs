//! [`ReadView`]: a consistent view of one branch at one commit.

use super::*;

/// A consistent view of one branch at one commit.
#[derive(Debug, Clone)]
pub struct ReadView {
    pub(super) snap: Arc<TreeSnapshot>,
    pub(super) now: u64,
    pub(super) label: Arc<str>,
    pub(super) max_key: usize,
}

impl ReadView {
    pub(super) fn live(&self, e: &Entry) -> bool {
        e.is_live_at(self.now)
    }

    pub(super) fn value_of(&self, e: Entry, keys_only: bool) -> Result<Value> {
        let value = match e.value {
            _ if keys_only => Vec::new(),
            ValueLoc::Inline(v) => v,
            ValueLoc::Overflow { first, pages, len } => self
                .snap
                .read_overflow(first, pages, len)
                .map_err(|err| Error::from(err).at(&self.label))?,
            // Callers pass live entries only, and a tombstone is never live.
            ValueLoc::Tombstone => Vec::new(),
        };
        Ok(Value {
            value,
            timestamp: e.timestamp,
            expire_at: (e.expire_at != 0).then_some(e.expire_at),
        })
    }

    /// The commit this view shows.
    pub fn version(&self) -> u64 {
        self.snap.version
    }

    /// The value of `key`, unless absent or expired.
    pub fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        check_key(key, self.max_key).map_err(|e| e.at(&self.label))?;
        let found = btree::get(self.snap.as_ref(), self.snap.root, key)
            .map_err(|e| Error::from(e).at(&self.label))?;
        match found {
            Some(e) if self.live(&e) => Ok(Some(self.value_of(e, false)?)),
            _ => Ok(None),
        }
    }

    /// The greatest live key ≤ `key`.
    pub fn floor(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        let mut probe = key.to_vec();
        let mut inclusive = true;
        loop {
            let found =
                btree::Cursor::before(self.snap.as_ref(), self.snap.root, &probe, inclusive)
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

    /// A page of live entries in `[begin, end)`.
    pub fn scan(&self, opts: &ScanOptions) -> Result<ScanPage> {
        if opts.limit == 0 {
            // A page of nothing whose continuation is its own start would make a paging
            // loop spin forever.
            return Err(Error::invalid("scan limit must be at least 1"));
        }
        let at = |e: bough_tree::error::TreeError| Error::from(e).at(&self.label);
        let (start, skip_equal) = match &opts.begin {
            Bound::Included(k) => (Some(k.as_slice()), None),
            Bound::Excluded(k) => (Some(k.as_slice()), Some(k.clone())),
            Bound::Unbounded => (None, None),
        };
        let mut c = btree::Cursor::seek(self.snap.as_ref(), self.snap.root, start).map_err(at)?;
        let mut entries = Vec::new();
        let mut bytes = 0usize;
        while let Some(e) = c.next_entry(self.snap.as_ref()).map_err(at)? {
            if skip_equal.as_ref().is_some_and(|k| *k == e.key) {
                continue;
            }
            if opts.end.as_ref().is_some_and(|end| e.key >= *end) {
                break;
            }
            if !self.live(&e) {
                continue;
            }
            if entries.len() >= opts.limit || (bytes >= opts.max_bytes && !entries.is_empty()) {
                return Ok(ScanPage {
                    entries,
                    next: Some(e.key),
                });
            }
            let key = e.key.clone();
            let value = self.value_of(e, opts.keys_only)?;
            bytes += key.len() + value.value.len();
            entries.push(KeyValue { key, value });
        }
        Ok(ScanPage {
            entries,
            next: None,
        })
    }
}
