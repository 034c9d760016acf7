//! Page-granular reads of data objects. An object is cut into aligned ranges of
//! `range_read_bytes`; a read the cache cannot serve fetches the ranges it touches that the
//! cache lacks with one ranged GET (the span from the first missing range to the last, so
//! neighbours coalesce) and caches each range. A cold get thus downloads one range, not the
//! whole object. A scan shows as ranges of one object read in a row: the third in a row
//! downloads the object whole, as a read of most of an object does. Scattered reads that
//! keep landing in one object (a quarter of its ranges fetched) complete it in one request.

use super::*;

use super::data::{DataObject, short_body};
use crate::cache::range_key;

/// Reads in a row after which an object is downloaded whole.
const SCAN_AFTER: u32 = 3;
/// Range fetches of one object after which, once they add up to a quarter of its ranges,
/// the rest of it comes in one request (see [`Pattern::Dense`]).
const DENSE_AFTER: u64 = 2;
/// Objects whose last ranges are remembered; the memory is cleared past it (a scan then
/// takes three more ranges to notice).
const RECENT_LIMIT: usize = 4096;

/// What the fetches of one object so far look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pattern {
    /// Scattered, and few: fetch the ranges the read needs.
    Sparse,
    /// Ranges in a row: a scan, which reads the object whole.
    Scan,
    /// Scattered, but a quarter of the object or more: reads keep landing in it, so its
    /// missing ranges come in one request. On an object store a request costs far more
    /// than the bytes of a range, and this bounds the requests an object takes at about
    /// `DENSE_AFTER` plus one, while a large object read sparsely keeps its ranges.
    Dense,
}

/// Per recently read object: the last range fetched, how many fetches in a row were each
/// the range after the one before, and how many ranges were fetched in all.
#[derive(Debug, Default)]
pub(super) struct RecentRanges {
    last: HashMap<String, Recent>,
}

#[derive(Debug, Clone, Copy)]
struct Recent {
    last: u64,
    run: u32,
    fetches: u64,
    ranges: u64,
}

impl RecentRanges {
    /// Records a fetch of ranges `first..=last` of `path`, an object of `total` ranges;
    /// answers what the fetches of the object now look like.
    fn record(&mut self, path: &str, first: u64, last: u64, total: u64) -> Pattern {
        if self.last.len() >= RECENT_LIMIT && !self.last.contains_key(path) {
            self.last.clear();
        }
        let before = self.last.get(path).copied();
        let run = match before {
            Some(r) if first == r.last.saturating_add(1) => r.run.saturating_add(1),
            _ => 1,
        };
        let (fetches, ranges) = before.map_or((0, 0), |r| (r.fetches, r.ranges));
        let now = Recent {
            last,
            run,
            fetches: fetches + 1,
            ranges: ranges + (last - first + 1),
        };
        self.last.insert(path.to_string(), now);
        if run >= SCAN_AFTER {
            Pattern::Scan
        } else if now.fetches >= DENSE_AFTER && now.ranges.saturating_mul(4) >= total {
            Pattern::Dense
        } else {
            Pattern::Sparse
        }
    }
}

impl Inner {
    /// Whether a read of `want` bytes of an uncached object of `len` bytes goes by ranges.
    pub(super) fn reads_ranges(&self, len: u64, want: u64) -> bool {
        self.range_bytes > 0 && len > self.range_bytes && want < len / 2
    }

    /// Reads `buf` at `offset` of `obj` (bounds checked by the caller) from cached ranges,
    /// fetching the missing ones (all of the object's, when its reads are dense).
    pub(super) fn read_ranges(
        &self,
        obj: DataObject<'_>,
        offset: u64,
        buf: &mut [u8],
    ) -> IoResult<()> {
        let DataObject { path, len } = obj;
        let size = self.range_bytes;
        let end = offset + buf.len() as u64;
        let (first, last) = (offset / size, (end - 1) / size);
        let held = self.held_ranges(path, first, last);
        let Some((lo, hi)) = missing_span(first, &held) else {
            return copy_out(obj, size, offset, buf, &held, None);
        };
        let total = len.div_ceil(size);
        // An object the cache cannot hold is only ever read by the ranges a read needs
        // (else they would evict each other).
        let fits = len <= self.cache.budget();
        let (want_lo, want_hi) = match self.recent_ranges.lock().record(path, lo, hi, total) {
            Pattern::Scan if fits => return self.read_whole(obj, offset, buf),
            Pattern::Dense if fits => (0, total - 1),
            _ => (first, last),
        };
        // Readers fetching any of these ranges finish first; then what they cached is used.
        let claim = self.range_flights.claim(path, want_lo, want_hi);
        let span = self.held_ranges(path, want_lo, want_hi);
        let fetched = match missing_span(want_lo, &span) {
            Some((lo, hi)) => Some(self.fetch_ranges(path, len, lo, hi)?),
            None => None,
        };
        drop(claim);
        let held = span
            .get((first - want_lo) as usize..=(last - want_lo) as usize)
            .ok_or_else(|| IoError::unexpected_eof(path))?;
        copy_out(obj, size, offset, buf, held, fetched.as_ref())
    }

    /// The cached ranges `first..=last` of `path` (`None` where missing).
    fn held_ranges(&self, path: &str, first: u64, last: u64) -> Vec<Option<Arc<dyn StorageFile>>> {
        (first..=last)
            .map(|i| self.cache.get(&range_key(path, i)).map(|(f, _)| f))
            .collect()
    }

    /// Fetches ranges `lo..=hi` of `path` with one ranged GET and caches each of them.
    /// Returns the offset the bytes start at and the bytes.
    fn fetch_ranges(&self, path: &str, len: u64, lo: u64, hi: u64) -> IoResult<(u64, Vec<u8>)> {
        let size = self.range_bytes;
        let start = lo * size;
        let want = ((hi + 1) * size).min(len) - start;
        let bytes = self
            .retry
            .simple("get_range", || {
                let b = self.store.get_range(path, start, want)?;
                if b.len() as u64 != want {
                    return Err(short_body(path, b.len(), want as usize));
                }
                Ok(b)
            })
            .map_err(|e| obj_err(path, e))?;
        let stats = &self.cache.stats;
        stats.range_gets.fetch_add(1, Ordering::Relaxed);
        stats.range_bytes.fetch_add(want, Ordering::Relaxed);
        for (i, chunk) in (lo..=hi).zip(bytes.chunks(size as usize)) {
            // A range that does not fit (or another reader is storing) is simply not kept.
            if let Err(e) = self.cache.insert_range(path, i, chunk) {
                tracing::warn!(path, range = i, error = %e, "could not cache a range of a data object");
            }
        }
        Ok((start, bytes))
    }
}

/// The first and last missing range of `held` (ranges from `first` on).
fn missing_span(first: u64, held: &[Option<Arc<dyn StorageFile>>]) -> Option<(u64, u64)> {
    let mut missing = (first..)
        .zip(held)
        .filter(|(_, h)| h.is_none())
        .map(|(i, _)| i);
    let lo = missing.next()?;
    Some((lo, missing.last().unwrap_or(lo)))
}

/// Fills `buf` (at `offset` of `obj`) from the fetched bytes where they cover it, else from
/// the cached ranges `held` (from range `offset / size` on).
fn copy_out(
    obj: DataObject<'_>,
    size: u64,
    offset: u64,
    buf: &mut [u8],
    held: &[Option<Arc<dyn StorageFile>>],
    fetched: Option<&(u64, Vec<u8>)>,
) -> IoResult<()> {
    let DataObject { path, len } = obj;
    let end = offset + buf.len() as u64;
    let first = offset / size;
    for (i, cached) in (first..).zip(held) {
        let (r_start, r_end) = (i * size, ((i + 1) * size).min(len));
        let (s, e) = (r_start.max(offset), r_end.min(end));
        let dst = buf
            .get_mut((s - offset) as usize..(e - offset) as usize)
            .ok_or_else(|| IoError::unexpected_eof(path))?;
        match (fetched, cached) {
            (Some((at, bytes)), _) if s >= *at && e <= *at + bytes.len() as u64 => {
                let src = bytes
                    .get((s - at) as usize..(e - at) as usize)
                    .ok_or_else(|| IoError::unexpected_eof(path))?;
                dst.copy_from_slice(src);
            }
            (_, Some(f)) => f.read_at(s - r_start, dst)?,
            // Every range outside the fetched span was held.
            (_, None) => return Err(IoError::unexpected_eof(path)),
        }
    }
    Ok(())
}

/// Range fetches in flight: a reader that needs a range another reader is fetching waits
/// for it instead of sending the same GET (eight threads starting cold on the same index
/// pages sent eight GETs each before).
#[derive(Debug, Default)]
pub(super) struct RangeFlights {
    fetching: Mutex<HashSet<String>>,
    done: parking_lot::Condvar,
}

/// Ranges (or a whole object) this reader is fetching; released (and waiters woken) when
/// dropped.
pub(super) struct Claim<'a> {
    flights: &'a RangeFlights,
    keys: Vec<String>,
}

impl RangeFlights {
    /// Waits until no reader fetches any of ranges `lo..=hi` of `path`, then claims them
    /// all at once (so two readers never hold some and wait for others).
    fn claim(&self, path: &str, lo: u64, hi: u64) -> Claim<'_> {
        self.claim_keys((lo..=hi).map(|i| range_key(path, i)).collect())
    }

    /// Waits until no reader downloads `path` whole, then claims the download (eight
    /// readers that each decided to download one object sent eight GETs of it before).
    pub(super) fn claim_whole(&self, path: &str) -> Claim<'_> {
        self.claim_keys(vec![path.to_string()])
    }

    fn claim_keys(&self, keys: Vec<String>) -> Claim<'_> {
        let mut fetching = self.fetching.lock();
        while keys.iter().any(|k| fetching.contains(k)) {
            self.done.wait(&mut fetching);
        }
        fetching.extend(keys.iter().cloned());
        Claim {
            flights: self,
            keys,
        }
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut fetching = self.flights.fetching.lock();
        for k in &self.keys {
            fetching.remove(k);
        }
        self.flights.done.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_ranges_in_a_row_are_a_scan_and_a_jump_starts_over() {
        let mut r = RecentRanges::default();
        let total = 1_000;
        assert_eq!(r.record("a", 10, 10, total), Pattern::Sparse);
        assert_eq!(r.record("a", 11, 11, total), Pattern::Sparse);
        assert_eq!(
            r.record("a", 12, 13, total),
            Pattern::Scan,
            "the third in a row"
        );
        assert_eq!(
            r.record("a", 40, 40, total),
            Pattern::Sparse,
            "a jump is a new run"
        );
        assert_eq!(
            r.record("b", 41, 41, total),
            Pattern::Sparse,
            "another object"
        );
        assert_eq!(r.record("a", 41, 41, total), Pattern::Sparse);
        assert_eq!(r.record("a", 42, 42, total), Pattern::Scan);
    }

    #[test]
    fn scattered_fetches_of_a_quarter_of_an_object_are_dense() {
        let mut r = RecentRanges::default();
        // 12 ranges: dense from the second fetch on that brings the count to 3.
        assert_eq!(r.record("a", 7, 7, 12), Pattern::Sparse);
        assert_eq!(r.record("a", 2, 2, 12), Pattern::Sparse, "2 of 12");
        assert_eq!(r.record("a", 10, 10, 12), Pattern::Dense, "3 of 12");
        // One fetch alone is never dense, however small the object.
        assert_eq!(r.record("b", 0, 0, 2), Pattern::Sparse);
        assert_eq!(r.record("b", 1, 1, 2), Pattern::Dense, "the second");
        // A large object read sparsely stays sparse.
        for i in 0..20 {
            assert_eq!(r.record("c", i * 10, i * 10, 1_000), Pattern::Sparse);
        }
    }
}
