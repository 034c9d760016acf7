//! Prewarm: loading the newest data objects into the cache at open, within its budget.

use super::*;

/// What [`CloudStorage::prewarm`] loaded.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PrewarmReport {
    /// Data objects downloaded into the cache.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Data objects already cached (a warm cache), left as they were.
    pub already_cached: usize,
    /// Data objects left out because the budget was full.
    pub skipped: usize,
}

impl CloudStorage {
    /// Loads the most recently written data objects into the cache, newest first, within
    /// the space the budget has left (nothing cached is evicted for them). Objects already
    /// cached are kept as they are.
    pub fn prewarm(&self) -> IoResult<PrewarmReport> {
        let inner = &self.inner;
        let all = inner
            .retry
            .simple("list", || list_all(inner.store.as_ref(), ""))
            .map_err(|e| obj_err("", e))?;
        let mut data: Vec<crate::object::ObjectMeta> = all
            .into_iter()
            .filter(|o| kind_of(&o.key) == Kind::Data)
            .collect();
        // Newest first; objects without a time go last.
        data.sort_by_key(|o| std::cmp::Reverse(o.last_modified_ms.unwrap_or(0)));
        let mut report = PrewarmReport::default();
        let mut free = inner.cache.budget().saturating_sub(inner.cache.used());
        let mut chosen = Vec::new();
        for o in data {
            if inner.cache.contains(&o.key) {
                report.already_cached += 1;
            } else if o.size <= free {
                free -= o.size;
                chosen.push(o);
            } else {
                report.skipped += 1;
            }
        }
        // Oldest of the chosen first, so the newest end up most recently used.
        for o in chosen.into_iter().rev() {
            let bytes = inner.download(&o.key)?;
            if bytes.len() as u64 != o.size {
                return Err(IoError::corruption(
                    &o.key,
                    0,
                    format!("object holds {} bytes, listed as {}", bytes.len(), o.size),
                ));
            }
            if inner.cache.insert(&o.key, &bytes)?.is_some() {
                report.files += 1;
                report.bytes += o.size;
                inner.cache.stats.prewarmed.fetch_add(1, Ordering::Relaxed);
            }
        }
        tracing::info!(
            files = report.files,
            bytes = report.bytes,
            already_cached = report.already_cached,
            skipped = report.skipped,
            "cache prewarmed"
        );
        Ok(report)
    }
}
