//! Data objects: uploaded once with create-if-absent, read through the local cache or by
//! ranges, downloaded whole and checked against their listed length.

use super::*;

/// A data object downloaded whole: the cached copy, or its bytes when the cache could not
/// keep them.
pub(super) enum Whole {
    Cached(Arc<dyn StorageFile>),
    Uncached(Vec<u8>),
}

/// An uploaded data object: its key and its length.
#[derive(Debug, Clone, Copy)]
pub(super) struct DataObject<'a> {
    pub(super) path: &'a str,
    pub(super) len: u64,
}

impl Inner {
    /// Uploads a data file once (create-if-absent); an existing object with the same bytes
    /// (an earlier attempt that landed) counts as success.
    pub(super) fn upload_data(&self, path: &str, bytes: &[u8]) -> IoResult<()> {
        let out = self
            .retry
            .run("put_if_absent", || self.store.put_if_absent(path, bytes));
        let same = || -> IoResult<bool> {
            self.counters.read_backs.fetch_add(1, Ordering::Relaxed);
            match self
                .retry
                .simple("get", || get_full(self.store.as_ref(), path))
            {
                Ok((theirs, _)) => Ok(theirs == bytes),
                Err(e) if is_not_found(&e) => Ok(false),
                Err(e) => Err(obj_err(path, e)),
            }
        };
        match out.result {
            Ok(_) => {}
            Err(ObjectError::PreconditionFailed { .. }) => {
                if !same()? {
                    return Err(IoError::AlreadyExists { path: path.into() });
                }
            }
            Err(e) if out.maybe_applied || e.may_have_applied() => {
                if !same()? {
                    return Err(obj_err(path, e));
                }
            }
            Err(e) => return Err(obj_err(path, e)),
        }
        self.count_upload(bytes.len());
        self.sizes.learn(path, bytes.len() as u64);
        Ok(())
    }

    /// Reads `buf.len()` bytes at `offset` of an uploaded data object.
    pub(super) fn read_data(
        &self,
        obj: DataObject<'_>,
        offset: u64,
        buf: &mut [u8],
    ) -> IoResult<()> {
        let DataObject { path, len } = obj;
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|e| e > len) {
            return Err(IoError::unexpected_eof(path));
        }
        if buf.is_empty() {
            return Ok(());
        }
        if let Some((f, _)) = self.cache.get(path) {
            return f.read_at(offset, buf);
        }
        if self.reads_ranges(len, buf.len() as u64) {
            return self.read_ranges(obj, offset, buf);
        }
        self.read_whole(obj, offset, buf)
    }

    /// Reads through a download of the whole object into the cache (or, when it cannot fit,
    /// a ranged GET of exactly `buf`).
    pub(super) fn read_whole(
        &self,
        obj: DataObject<'_>,
        offset: u64,
        buf: &mut [u8],
    ) -> IoResult<()> {
        let DataObject { path, len } = obj;
        if len <= self.cache.budget() {
            return match self.load_whole(obj)? {
                Whole::Cached(f) => f.read_at(offset, buf),
                Whole::Uncached(bytes) => {
                    let start = offset as usize;
                    let src = bytes
                        .get(start..start + buf.len())
                        .ok_or_else(|| IoError::unexpected_eof(path))?;
                    buf.copy_from_slice(src);
                    Ok(())
                }
            };
        }
        let got = self
            .retry
            .simple("get_range", || {
                let b = self.store.get_range(path, offset, buf.len() as u64)?;
                if b.len() != buf.len() {
                    return Err(short_body(path, b.len(), buf.len()));
                }
                Ok(b)
            })
            .map_err(|e| obj_err(path, e))?;
        buf.copy_from_slice(&got);
        Ok(())
    }

    /// Downloads `obj` whole into the cache, once however many readers race for it: a
    /// reader that waited for another's download reads the copy it cached.
    pub(super) fn load_whole(&self, obj: DataObject<'_>) -> IoResult<Whole> {
        let DataObject { path, len } = obj;
        let _claim = self.range_flights.claim_whole(path);
        if let Some((f, _)) = self.cache.get(path) {
            return Ok(Whole::Cached(f));
        }
        let bytes = self.download(path)?;
        if bytes.len() as u64 != len {
            return Err(IoError::corruption(
                path,
                0,
                format!("object holds {} bytes, expected {len}", bytes.len()),
            ));
        }
        Ok(match self.cache.insert(path, &bytes)? {
            Some(f) => {
                // The whole copy serves every later read: its ranges would only take space.
                self.cache.remove_ranges(path)?;
                Whole::Cached(f)
            }
            None => Whole::Uncached(bytes),
        })
    }

    /// Downloads a whole data object, checking its length against the metadata.
    pub(super) fn download(&self, path: &str) -> IoResult<Vec<u8>> {
        let (bytes, _) = self
            .retry
            .simple("get", || get_full(self.store.as_ref(), path))
            .map_err(|e| obj_err(path, e))?;
        self.cache.stats.downloads.fetch_add(1, Ordering::Relaxed);
        Ok(bytes)
    }

    pub(super) fn live_buf(&self, path: &str) -> Option<Arc<Buf>> {
        if let Some(b) = self.pending.lock().get(path) {
            return Some(b.clone());
        }
        self.bufs.lock().get(path).and_then(Weak::upgrade)
    }
}

/// A whole object, refusing a body shorter or longer than its metadata says (a cut-off
/// transfer), as a transient error so it is retried.
pub(super) fn get_full(
    store: &dyn ObjectStore,
    path: &str,
) -> Result<(Vec<u8>, crate::object::ObjectMeta), ObjectError> {
    let (b, meta) = store.get(path)?;
    if b.len() as u64 != meta.size {
        return Err(short_body(path, b.len(), meta.size as usize));
    }
    Ok((b, meta))
}

pub(super) fn short_body(path: &str, got: usize, want: usize) -> ObjectError {
    ObjectError::Transient {
        op: "get",
        key: path.to_string(),
        reason: crate::object::Transient::Network,
        message: format!("body cut off: {got} of {want} bytes"),
    }
}
