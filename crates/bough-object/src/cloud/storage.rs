//! The [`Storage`] trait over the object store: how each file operation becomes object
//! operations.

use super::*;

impl Storage for CloudStorage {
    fn kind(&self) -> BackendKind {
        BackendKind::Object
    }

    fn open(&self, path: &str, opts: OpenOptions) -> IoResult<Arc<dyn StorageFile>> {
        check_path(path, true)?;
        let inner = &self.inner;
        let creating = opts.create || opts.create_new;
        let writable = opts.write || creating;
        if inner.dirs.lock().contains(path) {
            return Err(IoError::errno("open", path, libc::EISDIR));
        }
        let kind = kind_of(path);
        let file = |body: FileBody| -> Arc<dyn StorageFile> {
            Arc::new(CloudFile {
                inner: inner.clone(),
                path: path.to_string(),
                writable,
                body,
            })
        };
        if kind == Kind::Log {
            return Ok(file(FileBody::Log(inner.open_log(path, opts)?)));
        }
        // A file already open for writing here: share its buffer.
        if let Some(b) = inner.live_buf(path) {
            if opts.create_new {
                return Err(IoError::AlreadyExists { path: path.into() });
            }
            return Ok(file(FileBody::Buf(b)));
        }
        if creating && !inner.dir_exists(parent_of(path))? {
            return Err(IoError::NotFound {
                path: parent_of(path).into(),
            });
        }
        if kind == Kind::Data {
            if writable {
                if !creating {
                    return Err(IoError::InvalidArgument {
                        what: format!("{path}: data objects are written once; open read-only"),
                    });
                }
                if !inner.owns_lineage_of(path) {
                    return Err(inner.fenced(
                        path,
                        "this process does not own the term this data file belongs to",
                    ));
                }
                let b = Arc::new(Buf {
                    kind,
                    state: RwLock::new(BufState::Open(Vec::new())),
                });
                inner.pending.lock().insert(path.to_string(), b.clone());
                return Ok(file(FileBody::Buf(b)));
            }
            if let Some((_, size)) = inner.cache.get(path) {
                return Ok(file(FileBody::Sealed(size)));
            }
            let size = inner.data_object_len(path)?;
            // Download on open unless reads go by ranges: the header is read next anyway.
            if size <= inner.cache.budget() && !inner.reads_ranges(size, 0) {
                inner.load_whole(data::DataObject { path, len: size })?;
            }
            return Ok(file(FileBody::Sealed(size)));
        }
        // An envelope file: its contents come from the store (or start empty). A writer
        // starts from the version this instance last saw, if any: its upload is conditional
        // on that version's ETag, so a stale start can only fail, never overwrite.
        let known = if writable {
            inner.docs.lock().get(path).cloned()
        } else {
            None
        };
        let fetched = match known {
            Some(d) => Ok(d),
            None => inner.fetch_doc(path),
        };
        let current = match fetched {
            Ok(d) => Some(d.payload.as_ref().clone()),
            Err(e) if e.kind() == bough_io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        if opts.create_new && current.is_some() {
            return Err(IoError::AlreadyExists { path: path.into() });
        }
        let data = match current {
            Some(d) => d,
            None if creating => Vec::new(),
            None => return Err(IoError::NotFound { path: path.into() }),
        };
        let b = Arc::new(Buf {
            kind,
            state: RwLock::new(BufState::Open(data)),
        });
        if writable {
            inner
                .bufs
                .lock()
                .insert(path.to_string(), Arc::downgrade(&b));
        }
        Ok(file(FileBody::Buf(b)))
    }

    fn read_file(&self, path: &str, max_len: u64) -> IoResult<Vec<u8>> {
        check_path(path, true)?;
        let inner = &self.inner;
        let too_long = |len: u64| {
            IoError::corruption(
                path,
                max_len,
                format!("file is {len} bytes, longer than the limit of {max_len}"),
            )
        };
        if kind_of(path) == Kind::Log {
            return inner.read_log_file(path, max_len);
        }
        if kind_of(path) == Kind::Data {
            if let Some(b) = inner.pending.lock().get(path).cloned()
                && let BufState::Open(d) = &*b.state.read()
            {
                if d.len() as u64 > max_len {
                    return Err(too_long(d.len() as u64));
                }
                return Ok(d.clone());
            }
            let len = inner.data_object_len(path)?;
            if len > max_len {
                return Err(too_long(len));
            }
            let mut buf = vec![0u8; len as usize];
            inner.read_data(data::DataObject { path, len }, 0, &mut buf)?;
            inner.stats.add_read(buf.len());
            return Ok(buf);
        }
        // A manifest this instance owns is, in the store, exactly the version it wrote
        // last (only its owner appends to it, and a seal repeats that state): no request.
        // GC and the catalog read every manifest of a partition.
        let owned = (kind_of(path) == Kind::Manifest && inner.owned.lock().contains(path))
            .then(|| inner.docs.lock().get(path).cloned())
            .flatten();
        let doc = match owned {
            Some(d) => d,
            None => inner.fetch_doc(path)?,
        };
        if doc.payload.len() as u64 > max_len {
            return Err(too_long(doc.payload.len() as u64));
        }
        Ok(doc.payload.as_ref().clone())
    }

    fn write_atomic(&self, path: &str, bytes: &[u8]) -> IoResult<()> {
        check_path(path, true)?;
        let inner = &self.inner;
        if !inner.dir_exists(parent_of(path))? {
            return Err(IoError::NotFound {
                path: parent_of(path).into(),
            });
        }
        let kind = kind_of(path);
        if matches!(kind, Kind::Data | Kind::Log) {
            return Err(IoError::InvalidArgument {
                what: format!(
                    "{path}: data objects and log segments are written once, not replaced"
                ),
            });
        }
        inner.upload_envelope(path, kind, bytes, false)?;
        if let Some(b) = inner.live_buf(path) {
            *b.state.write() = BufState::Open(bytes.to_vec());
        }
        Ok(())
    }

    fn create_new(&self, path: &str, bytes: &[u8]) -> IoResult<()> {
        check_path(path, true)?;
        let inner = &self.inner;
        if !inner.dir_exists(parent_of(path))? {
            return Err(IoError::NotFound {
                path: parent_of(path).into(),
            });
        }
        let kind = kind_of(path);
        if kind == Kind::Log {
            let log = inner.open_log(path, OpenOptions::write_new(0))?;
            log.write_at(path, 0, bytes)?;
            return inner.sync_log(path, &log);
        }
        if kind == Kind::Data {
            if !inner.owns_lineage_of(path) {
                return Err(inner.fenced(path, "this process does not own this data file's term"));
            }
            let out = inner
                .retry
                .run("put_if_absent", || inner.store.put_if_absent(path, bytes));
            return match out.result {
                Ok(_) => {
                    inner.count_upload(bytes.len());
                    Ok(())
                }
                Err(ObjectError::PreconditionFailed { .. }) if !out.maybe_applied => {
                    Err(IoError::AlreadyExists { path: path.into() })
                }
                Err(_) => inner.upload_data(path, bytes),
            };
        }
        if kind == Kind::Manifest {
            inner.seal_predecessor(path)?;
        }
        inner.upload_envelope(path, kind, bytes, true)
    }

    fn delete(&self, path: &str) -> IoResult<()> {
        check_path(path, true)?;
        let inner = &self.inner;
        if inner.dirs.lock().contains(path) {
            return Err(IoError::errno("delete", path, libc::EISDIR));
        }
        let kind = kind_of(path);
        if kind == Kind::Data && inner.pending.lock().remove(path).is_some() {
            // Never uploaded (or an upload that failed): nothing in the store to delete
            // here; an object an ambiguous upload left behind is garbage for GC.
            return Ok(());
        }
        if kind == Kind::GcLease {
            return Err(invalid(path, "the GC lease is released, not deleted"));
        }
        if kind == Kind::Log {
            return inner.delete_log(path);
        }
        if kind == Kind::Data {
            // One process at a time deletes data objects of a partition: the GC holding its
            // lease (checked, and renewed when due, before every deletion).
            inner.check_gc_lease(parent_of(path), path)?;
        }
        if kind == Kind::Data && inner.min_delete_age_ms > 0 {
            match inner.retry.simple("head", || inner.store.head(path)) {
                Ok(meta) => {
                    let now = (inner.clock)();
                    let young = meta
                        .last_modified_ms
                        .is_some_and(|m| now.saturating_sub(m) < inner.min_delete_age_ms);
                    if young {
                        inner
                            .counters
                            .deferred_deletes
                            .fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(path, "data object too young to delete; kept for now");
                        return Ok(());
                    }
                }
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(obj_err(path, e)),
            }
        }
        if inner.claims_for(kind) {
            inner.claims_delete(path)?;
        } else {
            inner
                .retry
                .simple("delete", || inner.store.delete(path))
                .map_err(|e| obj_err(path, e))?;
        }
        inner.cache.remove(path)?;
        inner.sizes.forget(path);
        inner.pending.lock().remove(path);
        inner.docs.lock().remove(path);
        inner.owned.lock().remove(path);
        Ok(())
    }

    fn list(&self, dir: &str) -> IoResult<Vec<String>> {
        check_path(dir, false)?;
        let inner = &self.inner;
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let mut names: BTreeSet<String> = BTreeSet::new();
        let mut after: Option<String> = None;
        loop {
            let page = inner
                .retry
                .simple("list", || {
                    inner.store.list(&prefix, true, after.as_deref(), 1000)
                })
                .map_err(|e| obj_err(dir, e))?;
            for o in page.objects {
                if let Some(n) = o.key.strip_prefix(&prefix)
                    && let Some((log, _)) = logs::parse_segment(n)
                {
                    // A log file lists once, whatever its segments.
                    names.insert(log.to_string());
                } else if let Some(n) = o.key.strip_prefix(&prefix)
                    && !n.is_empty()
                    && !n.contains('/')
                    && let Some(name) = inner.listed_name(dir, n)?
                {
                    inner.sizes.learn(&o.key, o.size);
                    names.insert(name);
                }
            }
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        let local: Vec<String> = inner
            .pending
            .lock()
            .keys()
            .chain(
                inner
                    .bufs
                    .lock()
                    .iter()
                    .filter(|(_, w)| w.strong_count() > 0)
                    .map(|(k, _)| k),
            )
            .cloned()
            .collect();
        let local: Vec<String> = local
            .into_iter()
            .chain(
                inner
                    .logs
                    .lock()
                    .iter()
                    .filter(|(_, w)| w.strong_count() > 0)
                    .map(|(k, _)| k.clone()),
            )
            .collect();
        for p in local {
            if parent_of(&p) == dir {
                names.insert(p.rsplit('/').next().unwrap_or(&p).to_string());
            }
        }
        Ok(names.into_iter().collect())
    }

    fn list_dirs(&self) -> IoResult<Vec<String>> {
        let inner = &self.inner;
        let mut out: BTreeSet<String> = inner
            .dirs
            .lock()
            .iter()
            .filter(|d| !d.contains('/'))
            .cloned()
            .collect();
        let mut after: Option<String> = None;
        loop {
            let page = inner
                .retry
                .simple("list", || {
                    inner.store.list("", true, after.as_deref(), 1000)
                })
                .map_err(|e| obj_err("", e))?;
            for p in page.prefixes {
                let d = p.trim_end_matches('/').to_string();
                if !d.is_empty() {
                    inner.dirs.lock().insert(d.clone());
                    out.insert(d);
                }
            }
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        Ok(out.into_iter().collect())
    }

    fn create_dir(&self, dir: &str) -> IoResult<()> {
        check_path(dir, false)?;
        let mut dirs = self.inner.dirs.lock();
        let mut walked = String::new();
        for c in dir.split('/').filter(|c| !c.is_empty()) {
            if !walked.is_empty() {
                walked.push('/');
            }
            walked.push_str(c);
            dirs.insert(walked.clone());
        }
        Ok(())
    }

    fn remove_dir(&self, dir: &str) -> IoResult<()> {
        check_path(dir, false)?;
        if dir.is_empty() {
            return Err(invalid(dir, "cannot remove the root directory"));
        }
        let inner = &self.inner;
        let prefix = format!("{dir}/");
        let sub = inner.dirs.lock().iter().any(|d| d.starts_with(&prefix));
        let page = inner
            .retry
            .simple("list", || inner.store.list(&prefix, true, None, 1))
            .map_err(|e| obj_err(dir, e))?;
        if sub || !page.objects.is_empty() || !page.prefixes.is_empty() {
            return Err(IoError::errno("remove_dir", dir, libc::ENOTEMPTY));
        }
        inner.dirs.lock().remove(dir);
        Ok(())
    }

    fn sync_dir(&self, dir: &str) -> IoResult<()> {
        check_path(dir, false)?;
        // Object PUTs are durable when acknowledged; there are no directory entries.
        if !self.inner.dir_exists(dir)? {
            return Err(IoError::NotFound { path: dir.into() });
        }
        Ok(())
    }

    fn file_len(&self, path: &str) -> IoResult<u64> {
        check_path(path, true)?;
        let inner = &self.inner;
        if kind_of(path) == Kind::Log {
            return inner.log_len(path);
        }
        if let Some(b) = inner.live_buf(path) {
            return Ok(match &*b.state.read() {
                BufState::Open(d) => d.len() as u64,
                BufState::Uploaded { len } => *len,
            });
        }
        if inner.dirs.lock().contains(path) {
            return Err(IoError::errno("stat", path, libc::EISDIR));
        }
        if kind_of(path) == Kind::Data
            && let Some((_, size)) = inner.cache.get(path)
        {
            return Ok(size);
        }
        let meta = inner.head_of(path)?;
        Ok(if kind_of(path) == Kind::Data {
            meta.size
        } else {
            meta.size
                .saturating_sub(crate::envelope::ENVELOPE_HEADER as u64)
        })
    }

    /// Never known cheaply: a state file's version is the object's, which only a `HEAD`
    /// (a network round trip) tells, and other processes replace objects behind the local
    /// cache. Callers read the file.
    fn cheap_stamp(&self, path: &str) -> IoResult<Option<bough_io::FileStamp>> {
        check_path(path, true)?;
        Ok(None)
    }

    fn stats(&self) -> &IoStats {
        &self.inner.stats
    }
}
