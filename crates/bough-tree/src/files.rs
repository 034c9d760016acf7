//! The data files of one partition, shared by every branch head of it: open handles, header
//! checks, and verified page reads through the page cache.

use crate::error::{TreeError, TreeResult};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bough_io::layout::{DataFileHeader, FileSalt, open_page, page_offset};
use bough_io::{OpenOptions, Storage, StorageFile};
use bough_manifest::{BranchFileMapping, PageAddr};
use bough_names::{BranchName, DataFileName, FileId, Term};
use parking_lot::{Mutex, RwLock};

use crate::btree::Node;
use crate::cache::{CachedPage, PageCache};
use crate::page::index::IndexNode;
use crate::page::kind;
use crate::page::mapping::{MappingNode, fanout};

/// Source of cache ids for file handles (process-wide, so caches can be shared).
static NEXT_HANDLE_ID: AtomicU64 = AtomicU64::new(1);

/// One open data file.
#[derive(Debug)]
pub struct DataFile {
    /// `data_<id>_<branch>_<term>`.
    pub name: DataFileName,
    /// Path relative to the store root.
    pub path: String,
    /// The open file.
    pub file: Arc<dyn StorageFile>,
    /// The incarnation of the branch that wrote it (from the header, checked against the
    /// branch file range it was opened through).
    pub incarnation: u64,
    /// Hashed into every page checksum.
    pub salt: FileSalt,
    /// Key prefix of this file's pages in the page cache.
    pub cache_id: u64,
    /// Set by every use; cleared by the sweep that looks for idle handles to close.
    used: AtomicBool,
}

impl DataFile {
    fn touch(&self) {
        if !self.used.load(Ordering::Relaxed) {
            self.used.store(true, Ordering::Relaxed);
        }
    }
}

/// Open data-file handles a partition keeps by default: a partition with thousands of
/// branches has thousands of files, and one descriptor each would run into the process's
/// limit (`EMFILE`; the bench's GC with 10,000 branches did).
pub const DEFAULT_MAX_OPEN_FILES: usize = 1024;

/// Removes `h` from the by-id index of the handles.
fn unindex(by_id: &mut HashMap<FileId, Vec<Arc<DataFile>>>, h: &Arc<DataFile>) {
    if let Some(same) = by_id.get_mut(&h.name.file_id) {
        same.retain(|o| !Arc::ptr_eq(o, h));
        if same.is_empty() {
            by_id.remove(&h.name.file_id);
        }
    }
}

/// The data files of one partition directory.
#[derive(Debug)]
pub struct FileTable {
    storage: Arc<dyn Storage>,
    dir: String,
    page_size: u32,
    cache: Arc<PageCache>,
    /// Whether leaf and overflow pages are cached (index and mapping pages always are).
    cache_data_pages: bool,
    handles: Mutex<HashMap<String, Arc<DataFile>>>,
    /// The same handles by file id, for the read path: a page read finds its file without
    /// building its name or taking the `handles` lock (kept in step with `handles`, under
    /// its lock).
    by_id: RwLock<HashMap<FileId, Vec<Arc<DataFile>>>>,
    /// Page-cache ids by file name, kept when an idle handle is closed so the reopened file
    /// finds its cached pages (file names are never reused; a deleted file's id goes).
    cache_ids: Mutex<HashMap<String, u64>>,
    /// Handles kept open before idle ones are closed.
    max_open: usize,
    /// The file each writer (branch@term) is appending to: GC must keep them.
    writing: Mutex<HashMap<String, String>>,
}

impl FileTable {
    /// The files of partition directory `dir`.
    pub fn new(
        storage: Arc<dyn Storage>,
        dir: String,
        page_size: u32,
        cache: Arc<PageCache>,
        cache_data_pages: bool,
    ) -> Self {
        FileTable {
            storage,
            dir,
            page_size,
            cache,
            cache_data_pages,
            handles: Mutex::new(HashMap::new()),
            by_id: RwLock::new(HashMap::new()),
            cache_ids: Mutex::new(HashMap::new()),
            max_open: DEFAULT_MAX_OPEN_FILES,
            writing: Mutex::new(HashMap::new()),
        }
    }

    /// Keeps at most about `n` data files open (at least 1): past that, handles unused
    /// since the last sweep are closed, except files being written (reopened on next use).
    pub fn with_max_open_files(mut self, n: usize) -> Self {
        self.max_open = n.max(1);
        self
    }

    /// Whether leaf and overflow pages are cached.
    pub fn caches_data_pages(&self) -> bool {
        self.cache_data_pages
    }

    /// Data files open now.
    pub fn open_files(&self) -> usize {
        self.handles.lock().len()
    }

    /// Records the file writer `owner` appends to (`None`: none).
    pub fn set_writing(&self, owner: &str, file: Option<String>) {
        let mut w = self.writing.lock();
        match file {
            Some(f) => {
                w.insert(owner.to_string(), f);
            }
            None => {
                w.remove(owner);
            }
        }
    }

    /// Names of the files writers are appending to.
    pub fn writing(&self) -> Vec<String> {
        self.writing.lock().values().cloned().collect()
    }

    /// The storage backend.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The partition directory.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// The partition's page size.
    pub fn page_size(&self) -> u32 {
        self.page_size
    }

    /// The page cache.
    pub fn cache(&self) -> &Arc<PageCache> {
        &self.cache
    }

    /// Path of a file in this partition.
    pub fn path_of(&self, name: &str) -> String {
        format!("{}/{}", self.dir, name)
    }

    /// The name of file `file_id` as seen through `ranges`.
    pub fn resolve(&self, ranges: &BranchFileMapping, file_id: FileId) -> TreeResult<DataFileName> {
        let r = ranges.resolve(file_id).ok_or_else(|| TreeError::DataFile {
            file: self.dir.clone(),
            what: format!("file id {file_id} is outside every branch file range of the manifest"),
        })?;
        Ok(DataFileName::new(file_id, r.branch.clone(), r.term))
    }

    /// The path of the file holding `addr` in `ranges` and the page's byte offset in it —
    /// where an error about that page points (the directory and the raw address when the
    /// file id resolves to no file).
    pub fn locate(&self, ranges: &BranchFileMapping, addr: PageAddr) -> (String, u64) {
        match ranges.resolve(addr.file_id()) {
            Some(r) => (
                self.path_of(
                    &DataFileName::new(addr.file_id(), r.branch.clone(), r.term).to_string(),
                ),
                page_offset(addr.page_index(), self.page_size),
            ),
            None => (self.dir.clone(), addr.to_u64()),
        }
    }

    /// The open handle of the file `file_id` resolves to in `ranges` (opened, and its
    /// header checked, on first use). The file must be of the incarnation the range names.
    pub fn handle(&self, ranges: &BranchFileMapping, file_id: FileId) -> TreeResult<Arc<DataFile>> {
        let incarnation = match ranges.resolve(file_id) {
            Some(r) => {
                if let Some(h) = self.with_open(r, file_id, Arc::clone) {
                    return Ok(h);
                }
                r.incarnation
            }
            None => 0,
        };
        self.open(&self.resolve(ranges, file_id)?, incarnation)
    }

    /// The cache id of the file `file_id` resolves to, if it is open: what a cache hit
    /// needs, without cloning the handle (a reference count every reader bumps).
    fn open_cache_id(&self, ranges: &BranchFileMapping, file_id: FileId) -> Option<u64> {
        self.with_open(ranges.resolve(file_id)?, file_id, |h| h.cache_id)
    }

    /// `f` of the open handle of the file `range` names for `file_id`, if it is open.
    fn with_open<T>(
        &self,
        range: &bough_manifest::BranchFileRange,
        file_id: FileId,
        f: impl FnOnce(&Arc<DataFile>) -> T,
    ) -> Option<T> {
        let by_id = self.by_id.read();
        let h = by_id.get(&file_id)?.iter().find(|h| {
            h.name.term == range.term
                && h.name.branch == range.branch
                && h.incarnation == range.incarnation
        })?;
        h.touch();
        Some(f(h))
    }

    /// An open handle for an existing file written by incarnation `incarnation` of its
    /// branch, checking its header once. A file of another incarnation is `Corruption`.
    pub fn open(&self, name: &DataFileName, incarnation: u64) -> TreeResult<Arc<DataFile>> {
        let key = name.to_string();
        if let Some(h) = self.handles.lock().get(&key) {
            if h.incarnation != incarnation {
                return Err(TreeError::DataFile {
                    file: h.path.clone(),
                    what: format!(
                        "data file of incarnation {:#018x} of branch {}, the referencing \
                         manifest expects incarnation {incarnation:#018x}",
                        h.incarnation, h.name.branch
                    ),
                });
            }
            h.touch();
            return Ok(h.clone());
        }
        let path = self.path_of(&key);
        crate::cache_only::may_read_storage(&path)?;
        // Only a manifest, archive or snapshot names a file to open: if it is gone, the
        // store is damaged (e.g. a damaged last manifest record was dropped and the earlier
        // state names a file GC had already deleted). That is corruption, not "not found".
        let file = self
            .storage
            .open(&path, OpenOptions::read())
            .map_err(|e| match e.kind() {
                bough_io::ErrorKind::NotFound => TreeError::DataFile {
                    file: path.clone(),
                    what: "a data file the manifest refers to does not exist".into(),
                },
                _ => e.into(),
            })?;
        let header = DataFileHeader::read_from(file.as_ref())?;
        header.verify_identity(&path, name.file_id, &name.branch, name.term)?;
        header.verify_incarnation(&path, incarnation)?;
        if header.page_size != self.page_size {
            return Err(TreeError::DataFile {
                file: path,
                what: format!(
                    "data file page size {} differs from the partition's {}",
                    header.page_size, self.page_size
                ),
            });
        }
        Ok(self.register(name.clone(), incarnation, path, file, false))
    }

    /// Creates a new data file (header page written, not yet synced). An existing file of
    /// that name is never deleted, truncated or overwritten (`AlreadyExists`): it may be
    /// pages another branch still reads. A writer skips the ids of orphans its own crashed
    /// commits left behind (see `Head::open`).
    pub fn create(
        &self,
        file_id: FileId,
        branch: &BranchName,
        term: Term,
        incarnation: u64,
        preallocate: u64,
        now_ms: u64,
    ) -> TreeResult<Arc<DataFile>> {
        let name = DataFileName::new(file_id, branch.clone(), term);
        let key = name.to_string();
        let path = self.path_of(&key);
        let file = self
            .storage
            .open(&path, OpenOptions::write_new(preallocate))?;
        // Only now that the name is ours: a handle or cached pages left from an earlier
        // file of that name (deleted by GC) must not serve the new one.
        self.forget(&key);
        let header = DataFileHeader::new(
            self.page_size,
            file_id,
            branch.clone(),
            term,
            incarnation,
            now_ms,
        );
        file.write_at(0, &header.encode())?;
        Ok(self.register(name, incarnation, path, file, false))
    }

    /// Opens the existing file `name` for appending (its writer continues it after a
    /// reopen): its header must name the file, `incarnation` and the partition's page size.
    /// The writable handle replaces any registered one (keeping its cached pages: appending
    /// changes none of them). Returns the handle and the file's length.
    pub fn open_for_append(
        &self,
        name: &DataFileName,
        incarnation: u64,
    ) -> TreeResult<(Arc<DataFile>, u64)> {
        let key = name.to_string();
        let path = self.path_of(&key);
        let file = self.storage.open(
            &path,
            OpenOptions {
                write: true,
                ..OpenOptions::default()
            },
        )?;
        let header = DataFileHeader::read_from(file.as_ref())?;
        header.verify_identity(&path, name.file_id, &name.branch, name.term)?;
        header.verify_incarnation(&path, incarnation)?;
        if header.page_size != self.page_size {
            return Err(TreeError::DataFile {
                file: path,
                what: format!(
                    "data file page size {} differs from the partition's {}",
                    header.page_size, self.page_size
                ),
            });
        }
        let len = file.len()?;
        Ok((
            self.register(name.clone(), incarnation, path, file, true),
            len,
        ))
    }

    /// Registers an open file; with `replace`, in place of a handle registered already
    /// (otherwise that handle is kept and returned).
    fn register(
        &self,
        name: DataFileName,
        incarnation: u64,
        path: String,
        file: Arc<dyn StorageFile>,
        replace: bool,
    ) -> Arc<DataFile> {
        let salt = FileSalt::new(name.file_id, &name.branch, name.term, incarnation);
        let key = name.to_string();
        let cache_id = *self
            .cache_ids
            .lock()
            .entry(key.clone())
            .or_insert_with(|| NEXT_HANDLE_ID.fetch_add(1, Ordering::Relaxed));
        let h = Arc::new(DataFile {
            name,
            path,
            file,
            incarnation,
            salt,
            cache_id,
            used: AtomicBool::new(true),
        });
        let mut handles = self.handles.lock();
        if replace && let Some(old) = handles.remove(&key) {
            unindex(&mut self.by_id.write(), &old);
        }
        let h = match handles.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => return e.get().clone(),
            std::collections::hash_map::Entry::Vacant(e) => {
                self.by_id
                    .write()
                    .entry(h.name.file_id)
                    .or_default()
                    .push(h.clone());
                e.insert(h).clone()
            }
        };
        if handles.len() > self.max_open {
            self.close_idle(&mut handles);
        }
        h
    }

    /// Closes handles unused since the last sweep (CLOCK: a used one loses its mark and
    /// stays) until about 90 % of `max_open` are left. Files being written stay open: their
    /// handle is the writable one. A handle in use elsewhere closes when its user drops it.
    fn close_idle(&self, handles: &mut HashMap<String, Arc<DataFile>>) {
        let writing: std::collections::HashSet<String> =
            self.writing.lock().values().cloned().collect();
        let keep = self.max_open - self.max_open / 10;
        let mut close = Vec::new();
        for (name, h) in handles.iter() {
            if handles.len() - close.len() <= keep {
                break;
            }
            if writing.contains(name) || h.used.swap(false, Ordering::Relaxed) {
                continue;
            }
            close.push(name.clone());
        }
        if close.is_empty() {
            return;
        }
        let mut by_id = self.by_id.write();
        for name in close {
            if let Some(h) = handles.remove(&name) {
                unindex(&mut by_id, &h);
            }
        }
    }

    /// Drops a handle and its cached pages (the file was deleted or replaced).
    pub fn forget(&self, name: &str) {
        // Its pages go from the cache even when its handle was closed as idle.
        let cache_id = self.cache_ids.lock().remove(name);
        let mut handles = self.handles.lock();
        if let Some(h) = handles.remove(name) {
            unindex(&mut self.by_id.write(), &h);
        }
        drop(handles);
        if let Some(id) = cache_id {
            self.cache.forget_file(id);
        }
    }

    /// Reads, verifies and decodes the page at `addr` (through the cache).
    pub fn read(&self, ranges: &BranchFileMapping, addr: PageAddr) -> TreeResult<CachedPage> {
        let open = self.open_cache_id(ranges, addr.file_id());
        if let Some(id) = open
            && let Some(p) = self.cache.get(PageCache::key(id, addr.page_index()))
        {
            return Ok(p);
        }
        let h = self.handle(ranges, addr.file_id())?;
        let key = PageCache::key(h.cache_id, addr.page_index());
        // A file that was open has been probed above; one opened just now may still have
        // pages cached (another branch's handle to it was closed and reopened).
        if open.is_none()
            && let Some(p) = self.cache.get(key)
        {
            return Ok(p);
        }
        let (page_kind, payload, offset) = self.read_raw(&h, addr.page_index())?;
        let page = self.decode(&h.path, offset, page_kind, payload)?;
        let cacheable = match &page {
            CachedPage::Tree(Node::Leaf(_)) => self.cache_data_pages,
            _ => true,
        };
        if cacheable {
            self.cache.insert(key, page.clone());
        }
        Ok(page)
    }

    /// Reads and verifies one page; returns (type, payload, file offset).
    pub fn read_raw(&self, h: &DataFile, page_index: u32) -> TreeResult<(u8, Vec<u8>, u64)> {
        crate::cache_only::may_read_storage(&h.path)?;
        let offset = page_offset(page_index, self.page_size);
        let mut buf = vec![0u8; self.page_size as usize];
        h.file.read_at(offset, &mut buf).map_err(|e| {
            if e.is_unexpected_eof() {
                TreeError::corruption(
                    h.path.clone(),
                    offset,
                    format!("page {page_index} lies past the end of the file"),
                )
            } else {
                e.into()
            }
        })?;
        let (t, payload) = open_page(&buf, h.salt, page_index, &h.path, offset)?;
        Ok((t, payload.to_vec(), offset))
    }

    /// Reads the payloads of `count` consecutive pages of one file in one batch.
    pub fn read_run(&self, h: &DataFile, first_index: u32, count: u32) -> TreeResult<Vec<Vec<u8>>> {
        crate::cache_only::may_read_storage(&h.path)?;
        let ps = self.page_size as usize;
        let mut buf = vec![0u8; ps * count as usize];
        let offset = page_offset(first_index, self.page_size);
        h.file.read_at(offset, &mut buf).map_err(|e| {
            if e.is_unexpected_eof() {
                TreeError::corruption(
                    h.path.clone(),
                    offset,
                    "overflow run lies past the end of the file",
                )
            } else {
                e.into()
            }
        })?;
        let mut out = Vec::with_capacity(count as usize);
        for (i, page) in buf.chunks_exact(ps).enumerate() {
            let idx = first_index + i as u32;
            let (t, payload) =
                open_page(page, h.salt, idx, &h.path, page_offset(idx, self.page_size))?;
            if t != kind::OVERFLOW {
                return Err(TreeError::corruption(
                    h.path.clone(),
                    page_offset(idx, self.page_size),
                    format!("expected an overflow page, found type {t}"),
                ));
            }
            out.push(payload.to_vec());
        }
        Ok(out)
    }

    /// Decodes a verified payload by its page type.
    pub fn decode(
        &self,
        path: &str,
        offset: u64,
        page_kind: u8,
        payload: Vec<u8>,
    ) -> TreeResult<CachedPage> {
        let bad = |r: crate::page::CodecError| TreeError::corruption(path, offset, r.0);
        Ok(match page_kind {
            kind::LEAF | kind::TTL_LEAF => {
                crate::page::leaf::LeafView::new(&payload).map_err(bad)?;
                CachedPage::Tree(Node::Leaf(payload.into()))
            }
            kind::INDEX => CachedPage::Tree(Node::Index(Arc::new(
                IndexNode::decode(&payload).map_err(bad)?,
            ))),
            kind::MAPPING => {
                let cap = bough_io::layout::max_payload(self.page_size);
                CachedPage::Mapping(Arc::new(
                    MappingNode::decode(&payload, fanout(cap)).map_err(bad)?,
                ))
            }
            other => {
                return Err(TreeError::corruption(
                    path,
                    offset,
                    format!("unexpected page type {other}"),
                ));
            }
        })
    }
}
