//! [`Branch`]: reads and writes of one branch, its archives, and its maintenance on demand.

use super::*;

/// One branch of one partition: reads, writes, truncate.
///
/// Reads run on the caller's thread against an immutable snapshot and never wait for a
/// writer. Writes go through the branch's write queue; the returned future (usable from any
/// executor, or blocked on with the `_blocking` methods) resolves once the batch is durable.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let main = store.partition("orders", 0)?.branch("main")?;
/// main.put_blocking("a", "1")?;
/// main.put_blocking("b", "2")?;
/// assert_eq!(main.label(), "orders.0@main");
/// assert_eq!(main.get_blocking("a")?.unwrap().value, b"1");
/// assert_eq!(main.floor_blocking("az")?.unwrap().key, b"a");
/// let archive = main.archive()?; // the state now, kept
/// main.delete_blocking("a")?;
/// assert_eq!(main.range("a"..).count(), 1);
/// main.restore(&archive, "before-restore")?; // back to the archive; the replaced state is a branch
/// assert!(main.get_blocking("a")?.is_some());
/// main.truncate_blocking("")?; // every key
/// assert_eq!(main.iter().count(), 0);
/// # Ok::<(), bough::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Branch {
    pub(super) store: Store,
    pub(super) entry: Arc<BranchEntry>,
}

impl Branch {
    /// `table.partition@branch`.
    pub fn label(&self) -> &str {
        &self.entry.label
    }

    pub(super) fn check_live(&self) -> Result<()> {
        self.store.check_open()?;
        if self.entry.gone.load(Ordering::Acquire) {
            return Err(
                Error::new(ErrorKind::NotFound, "the branch was deleted").at(&self.entry.label)
            );
        }
        Ok(())
    }

    /// Applies the branch's write buffer to its tree now (a checkpoint; see
    /// [`Options::write_buffer_bytes`](crate::Options::write_buffer_bytes)) and writes the
    /// mapping's dirty chunks; returns when that is durable. Nothing to do without a buffer.
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v")?;
    /// assert!(store.write_buffer_usage().bytes > 0);
    /// main.checkpoint_blocking()?; // the buffered write is now in the tree
    /// assert_eq!(store.write_buffer_usage().bytes, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn checkpoint_blocking(&self) -> Result<()> {
        self.call(|reply| BranchOp::CheckpointIfDirty { reply })
    }

    /// Returns once every write acknowledged on this branch before the call is durable —
    /// with [`Durability::Buffered`](crate::Durability::Buffered), one `fdatasync` of the
    /// branch's log covering all of them; nothing to do (no sync) when none waits for one,
    /// as always with `Durability::Sync` or the write buffer off. A failed sync is returned
    /// and poisons the branch's writer: it is never retried, so this and later writes and
    /// syncs fail until the store is reopened (the writes it did not cover may be lost).
    /// Queued behind the branch's earlier requests; awaits without blocking the executor.
    ///
    /// ```
    /// use bough::{Durability, Options, Store};
    ///
    /// let opts = Options::in_memory().write_buffer_bytes(1 << 20).durability(Durability::Buffered);
    /// let store = Store::open(opts)?;
    /// let main = store.partition("t", 0)?.branch("main")?;
    /// main.put_blocking("k", "v")?;
    /// main.sync_blocking()?; // "k" is durable
    /// store.sync_blocking()?; // every branch of the store
    /// # Ok::<(), bough::Error>(())
    /// ```
    pub fn sync(&self) -> impl std::future::Future<Output = Result<()>> + use<> {
        let rx = self.send(|reply| BranchOp::Sync { reply });
        async move {
            match rx {
                Ok(rx) => rx.await.unwrap_or_else(|| Err(Error::closed())),
                Err(e) => Err(e),
            }
        }
    }

    /// Blocking [`sync`](Self::sync).
    ///
    /// ```
    /// use bough::{Durability, Options, Store};
    /// let store = Store::open(Options::in_memory().durability(Durability::Buffered))?;
    /// let main = store.partition("orders", 0)?.branch("main")?;
    /// main.put_blocking("k", "v")?; // acknowledged before its log record is synced
    /// main.sync_blocking()?; // now every write before it is durable
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sync_blocking(&self) -> Result<()> {
        self.call(|reply| BranchOp::Sync { reply })
    }

    /// Archives the branch's current state as `manifest_<branch>_<term>_<ts>` at the store
    /// clock's time (moved forward past any archive already using that timestamp).
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v1")?;
    /// let archive = main.archive()?;
    /// main.put_blocking("k", "v2")?;
    /// assert_eq!(main.archives()?, vec![archive]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn archive(&self) -> Result<ArchiveName> {
        let mut ts = self.store.inner.clock.now_ms();
        loop {
            match self.archive_at(ts) {
                Err(e) if e.kind() == ErrorKind::AlreadyExists => ts += 1,
                other => return other,
            }
        }
    }

    /// Archives at timestamp `ts`; `AlreadyExists` if that archive exists (never overwritten).
    pub fn archive_at(&self, ts: u64) -> Result<ArchiveName> {
        let part = self.store.partition_entry(self.partition_dir())?;
        self.call(|reply| BranchOp::Archive { part, ts, reply })
    }

    /// The branch's archives, oldest first.
    pub fn archives(&self) -> Result<Vec<ArchiveName>> {
        let entry = self.store.partition_entry(self.partition_dir())?;
        let name = self.branch_name()?;
        entry
            .part
            .archives(&name)
            .map_err(|e| Error::from(e).at(&self.entry.label))
    }

    /// Keeps only the newest `keep` archives of this branch.
    pub fn prune_archives(&self, keep: usize) -> Result<Vec<ArchiveName>> {
        let entry = self.store.partition_entry(self.partition_dir())?;
        let name = self.branch_name()?;
        entry
            .part
            .prune_archives(&name, keep)
            .map_err(|e| Error::from(e).at(&self.entry.label))
    }

    /// Restores the branch to `archive` in place; the state it replaces is kept as branch
    /// `backup`.
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v1")?;
    /// let archive = main.archive()?;
    /// main.put_blocking("k", "v2")?;
    /// // Back to the archive; the state it replaces is kept as branch `before-restore`.
    /// main.restore(&archive, "before-restore")?;
    /// let main = orders.branch("main")?;
    /// assert_eq!(main.get_blocking("k")?.unwrap().value, b"v1");
    /// assert_eq!(orders.branch("before-restore")?.get_blocking("k")?.unwrap().value, b"v2");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn restore(&self, archive: &ArchiveName, backup: &str) -> Result<()> {
        let backup = BranchName::new(backup).map_err(|e| Error::from(e).at(&self.entry.label))?;
        let part = self.store.partition_entry(self.partition_dir())?;
        self.call(|reply| BranchOp::Restore {
            part,
            archive: archive.clone(),
            backup,
            reply,
        })
    }

    /// Creates branch `name` at the state `archive` recorded (a point-in-time branch).
    pub fn branch_from_archive(&self, archive: &ArchiveName, name: &str) -> Result<Branch> {
        let label = format!("{}@{name}", self.partition_dir());
        let bname = BranchName::new(name).map_err(|e| Error::from(e).at(&label))?;
        let entry = self.store.partition_entry(self.partition_dir())?;
        let head = {
            let _catalog = entry.catalog_change();
            entry
                .part
                .branch_from_archive(archive, &bname, self.store.inner.clock.now_ms())
                .map_err(|e| Error::from(e).at(&label))?
        };
        let b = self.store.register(head, self.partition_dir());
        entry.branches.lock().insert(bname, b.clone());
        self.store.evict_idle_branches();
        Ok(Branch {
            store: self.store.clone(),
            entry: b,
        })
    }

    pub(super) fn partition_dir(&self) -> &PartitionDir {
        &self.entry.dir
    }

    pub(super) fn branch_name(&self) -> Result<BranchName> {
        Ok(self.entry.name.clone())
    }

    /// A consistent read view of the branch as of its latest commit.
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v1")?;
    /// let view = main.read_view()?; // a snapshot: later writes do not show in it
    /// main.put_blocking("k", "v2")?;
    /// assert_eq!(view.get("k")?.unwrap().value, b"v1");
    /// assert_eq!(main.get_blocking("k")?.unwrap().value, b"v2");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_view(&self) -> Result<ReadView> {
        self.check_live()?;
        Ok(ReadView {
            snap: self.entry.published.load(),
            now: self.store.inner.clock.now_ms(),
            label: self.entry.label.clone(),
            max_key: self.store.inner.opts.max_key_len(),
        })
    }

    /// The value of `key`, unless absent or expired. Never waits for storage on the calling
    /// thread: answered from cached pages there, or else on a reader thread of the store.
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v")?;
    /// // On any executor; `bough::oneshot::block_on` stands in for one here.
    /// let value = bough::oneshot::block_on(main.get("k"))?;
    /// assert_eq!(value.unwrap().value, b"v");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn get<K: AsRef<[u8]>>(&self, key: K) -> Result<Option<Value>> {
        let key = key.as_ref();
        // From cached pages on this thread; a reader thread (with a view of its own) when
        // a page must come from storage.
        match bough_tree::cache_only::cache_only(|| self.get_published(key)) {
            Err(e) if e.is_not_cached() => self.read_off_thread(key, |v, k| v.get(k)).await,
            done => done,
        }
    }

    /// Blocking [`get`](Self::get).
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v")?;
    /// assert_eq!(main.get_blocking("k")?.unwrap().value, b"v");
    /// assert!(main.get_blocking("missing")?.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get_blocking(&self, key: impl AsRef<[u8]>) -> Result<Option<Value>> {
        self.get_published(key.as_ref())
    }

    /// A get on the published snapshot, borrowed for the get (what [`Self::read_view`]
    /// holds, without its `Arc`s).
    fn get_published(&self, key: &[u8]) -> Result<Option<Value>> {
        self.check_live()?;
        let at = ReadAt {
            now: self.store.inner.clock.now_ms(),
            label: &self.entry.label,
            max_key: self.store.inner.opts.max_key_len(),
        };
        self.entry.published.with_current(|snap| at.get(snap, key))
    }

    /// The greatest live key ≤ `key`, with its value (read as [`get`](Self::get) is).
    pub async fn floor<K: AsRef<[u8]>>(&self, key: K) -> Result<Option<KeyValue>> {
        self.read_off_thread(key.as_ref(), |v, k| v.floor(k)).await
    }

    /// Blocking [`floor`](Self::floor).
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("b", "1")?;
    /// main.put_blocking("d", "2")?;
    /// // The greatest key at or below the one asked for.
    /// assert_eq!(main.floor_blocking("c")?.unwrap().key, b"b");
    /// assert!(main.floor_blocking("a")?.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn floor_blocking(&self, key: impl AsRef<[u8]>) -> Result<Option<KeyValue>> {
        self.read_view()?.floor(key)
    }

    /// A page of entries in key order (read as [`get`](Self::get) is).
    pub async fn scan(&self, opts: &ScanOptions) -> Result<ScanPage> {
        self.read_off_thread(opts, ReadView::scan).await
    }

    /// Runs `read(view, arg)` on this thread from cached pages only; if it needed storage,
    /// runs it again on a reader thread (the same view: the same commit either way). `arg` is
    /// copied only then, so a warm read allocates nothing here.
    async fn read_off_thread<A, T>(
        &self,
        arg: &A,
        read: fn(&ReadView, &A) -> Result<T>,
    ) -> Result<T>
    where
        A: ToOwned + ?Sized + 'static,
        A::Owned: Send + 'static,
        T: Send + 'static,
    {
        let view = self.read_view()?;
        match bough_tree::cache_only::cache_only(|| read(&view, arg)) {
            Err(e) if e.is_not_cached() => {
                let arg = arg.to_owned();
                let inner = &self.store.inner;
                inner
                    .readers
                    .run(inner.opts.read_threads, move || {
                        read(&view, std::borrow::Borrow::borrow(&arg))
                    })
                    .await
            }
            done => done,
        }
    }

    /// Blocking [`scan`](Self::scan).
    ///
    /// ```
    /// use bough::{Options, ScanOptions, Store};
    /// use std::ops::Bound;
    /// let store = Store::open(Options::in_memory())?;
    /// let main = store.partition("orders", 0)?.branch("main")?;
    /// for k in ["a", "b", "c", "d"] {
    ///     main.put_blocking(k, "v")?;
    /// }
    /// let page = main.scan_blocking(&ScanOptions {
    ///     begin: Bound::Included(b"b".to_vec()),
    ///     limit: 2,
    ///     ..ScanOptions::default()
    /// })?;
    /// let keys: Vec<&[u8]> = page.entries.iter().map(|kv| kv.key.as_slice()).collect();
    /// assert_eq!(keys, [&b"b"[..], &b"c"[..]]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scan_blocking(&self, opts: &ScanOptions) -> Result<ScanPage> {
        self.read_view()?.scan(opts)
    }

    /// Applies a batch atomically; resolves once it is durable. The batch is queued when
    /// this is called, not when the future is first polled. Takes a [`WriteBatch`] or a chain
    /// of its calls (`WriteBatch::new().put(..).delete(..)`).
    ///
    /// ```
    /// use bough::{Options, Store, WriteBatch};
    /// let store = Store::open(Options::in_memory())?;
    /// let main = store.partition("orders", 0)?.branch("main")?;
    /// // Resolves once the batch is durable; any executor can await it.
    /// bough::oneshot::block_on(main.write(WriteBatch::new().put("a", "1").delete("b")))?;
    /// assert!(main.get_blocking("a")?.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write<B: Into<WriteBatch>>(
        &self,
        batch: B,
    ) -> impl std::future::Future<Output = Result<()>> + use<B> {
        let rx = self.submit_write(batch.into());
        async move {
            match rx {
                Ok(rx) => rx.await.unwrap_or_else(|| Err(Error::closed())),
                Err(e) => Err(e),
            }
        }
    }

    /// Blocking [`write`](Self::write).
    ///
    /// ```
    /// use bough::{Options, Store, WriteBatch};
    /// let store = Store::open(Options::in_memory())?;
    /// let main = store.partition("orders", 0)?.branch("main")?;
    /// main.write_blocking(WriteBatch::new().put("a", "1").put("b", "2"))?; // all or nothing
    /// assert!(main.get_blocking("b")?.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_blocking(&self, batch: impl Into<WriteBatch>) -> Result<()> {
        let (muts, sync) = self.prepare_write(batch.into())?;
        self.store.check_open()?;
        self.store.check_writable()?;
        // A lone writer commits on its own thread; otherwise the write queues and groups.
        let muts = match self.store.commit_if_idle(&self.entry, muts, sync) {
            Ok(done) => return done,
            Err(muts) => muts,
        };
        self.queue_write(muts, sync)?
            .wait()
            .unwrap_or_else(|| Err(Error::closed()))
    }

    /// Sets `key` to `value`: a batch of one put, durable when the future resolves.
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// bough::oneshot::block_on(main.put("k", "v"))?;
    /// assert_eq!(main.get_blocking("k")?.unwrap().value, b"v");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn put<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &self,
        key: K,
        value: V,
    ) -> impl std::future::Future<Output = Result<()>> + use<K, V> {
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.write(batch)
    }

    /// Blocking [`put`](Self::put).
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v")?;
    /// assert_eq!(main.get_blocking("k")?.unwrap().value, b"v");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn put_blocking(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.write_blocking(WriteBatch::new().put(key, value))
    }

    /// Deletes `key` (at the store clock's time): a batch of one delete, durable when the
    /// future resolves. Deleting an absent key is no error.
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v")?;
    /// bough::oneshot::block_on(main.delete("k"))?;
    /// assert!(main.get_blocking("k")?.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delete<K: AsRef<[u8]>>(
        &self,
        key: K,
    ) -> impl std::future::Future<Output = Result<()>> + use<K> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write(batch)
    }

    /// Blocking [`delete`](Self::delete).
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// main.put_blocking("k", "v")?;
    /// main.delete_blocking("k")?;
    /// assert!(main.get_blocking("k")?.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delete_blocking(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.write_blocking(WriteBatch::new().delete(key))
    }

    /// [`write_blocking`](Self::write_blocking) that also says what the batch changed: how
    /// many of its puts and deletes took effect and how many last-writer-wins skipped
    /// because the stored entry was newer. The batch commits on its own (not grouped with
    /// other batches), so the counts are its own.
    pub fn write_counted_blocking(&self, batch: impl Into<WriteBatch>) -> Result<WriteReport> {
        let muts = self.mutations(batch.into())?;
        self.call(|reply| BranchOp::WriteCounted { muts, reply })
    }

    pub(super) fn mutations(&self, batch: WriteBatch) -> Result<Vec<Mutation>> {
        self.check_live()?;
        batch
            .into_mutations(
                self.store.inner.clock.now_ms(),
                self.store.inner.opts.page_size,
                self.store.inner.opts.tombstone_retention_ms,
                self.store.inner.opts.max_timestamp_skew_ms,
            )
            .map_err(|e| e.at(&self.entry.label))
    }

    pub(super) fn submit_write(&self, batch: WriteBatch) -> Result<oneshot::Receiver<Result<()>>> {
        let (muts, sync) = self.prepare_write(batch)?;
        self.queue_write(muts, sync)
    }

    /// The batch's mutations, and whether it waits for durability.
    fn prepare_write(&self, batch: WriteBatch) -> Result<(Vec<Mutation>, bool)> {
        let durability = batch
            .durability_choice()
            .unwrap_or(self.store.inner.opts.durability);
        Ok((self.mutations(batch)?, durability != Durability::Buffered))
    }

    fn queue_write(
        &self,
        muts: Vec<Mutation>,
        sync: bool,
    ) -> Result<oneshot::Receiver<Result<()>>> {
        let (tx, rx) = oneshot::channel();
        self.store.submit(
            Request::Write {
                branch: self.entry.clone(),
                muts,
                sync,
                reply: tx,
            },
            self.entry.shard,
        )?;
        Ok(rx)
    }

    /// Removes every key ≥ `from` (every key when `from` is empty).
    ///
    /// The keys go in pieces, in key order: each piece removes at most
    /// [`Options::truncate_piece_keys`](crate::Options::truncate_piece_keys) keys in one
    /// durable commit, and the branch's other writes are served between pieces, so a
    /// truncate of any size holds the writer only for a piece at a time. The truncate
    /// removes what the branch held when it began: a write that commits while it runs is
    /// kept, wherever its key lies. Without such writes the result is that of removing
    /// every key at once.
    ///
    /// Not atomic: a crash (or an error) midway leaves a prefix of the pieces applied —
    /// the keys from `from` up to some key removed, the later ones still there; calling
    /// it again finishes the work. The state the truncate began at is held like a reader's
    /// snapshot until it returns, so GC keeps its files meanwhile.
    ///
    /// Awaits the writer without blocking the executor thread.
    pub async fn truncate(&self, from: impl AsRef<[u8]>) -> Result<()> {
        let from = from.as_ref();
        let limit = self.store.inner.opts.truncate_piece_keys;
        let mut start = None;
        let mut next = (!from.is_empty()).then(|| from.to_vec());
        loop {
            let rx = self.send(|reply| BranchOp::TruncatePiece {
                start,
                from: next,
                limit,
                reply,
            })?;
            let progress = rx.await.unwrap_or_else(|| Err(Error::closed()))?;
            match progress.next {
                None => return Ok(()),
                Some(key) => {
                    start = Some(progress.start);
                    next = Some(key);
                }
            }
        }
    }

    /// Blocking [`truncate`](Self::truncate).
    ///
    /// ```
    /// use bough::{Options, Store};
    /// let store = Store::open(Options::in_memory())?;
    /// let orders = store.partition("orders", 0)?;
    /// let main = orders.branch("main")?;
    /// for k in ["a", "b", "c"] {
    ///     main.put_blocking(k, "v")?;
    /// }
    /// main.truncate_blocking("b")?; // every key from `b` on goes
    /// assert!(main.get_blocking("a")?.is_some());
    /// assert!(main.get_blocking("b")?.is_none() && main.get_blocking("c")?.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn truncate_blocking(&self, from: impl AsRef<[u8]>) -> Result<()> {
        oneshot::block_on(self.truncate(from))
    }

    /// Deletes expired keys now (the background task does this periodically), a piece of
    /// at most 4096 keys per commit, the branch's other requests served between pieces.
    pub fn expire_now(&self) -> Result<()> {
        let limit = EXPIRE_PIECE_KEYS;
        while self.call(|reply| BranchOp::ExpirePiece { limit, reply })? {}
        Ok(())
    }

    /// Copies into the branch's own files every page it borrows from other branches' files
    /// and forgets its merge bases, so those branches can be deleted and collected. The
    /// report names the pairs of branches that can no longer merge because of it
    /// ([`RehomeReport::merges_lost`]); [`rehome_with`](Self::rehome_with) can keep them.
    pub fn rehome(&self) -> Result<RehomeReport> {
        self.rehome_with(RehomeOptions::default())
    }

    /// [`rehome`](Self::rehome) with options: [`RehomeOptions::keep_merge_bases`] keeps the
    /// merge bases (every merge stays possible; what the states they pin cost is reported
    /// as [`RehomeReport::kept_bases_bytes`]).
    pub fn rehome_with(&self, opts: RehomeOptions) -> Result<RehomeReport> {
        let part = self.store.partition_entry(self.partition_dir())?;
        self.call(|reply| BranchOp::Rehome { part, opts, reply })
    }

    /// Compacts the branch's mostly-garbage files now: moves its live pages out of every
    /// sealed file that is at least `compaction_garbage_ratio` garbage and that no other
    /// branch, archive or merge base references (see [`CompactionReport`]).
    pub fn compact_now(&self) -> Result<CompactionReport> {
        self.check_live()?;
        let ratio = self.store.inner.opts.compaction_garbage_ratio;
        let entry = self.store.partition_entry(self.partition_dir())?;
        let usage = usage_of(&entry).map_err(|e| e.at(&self.entry.label))?;
        compact_in_steps(self, ratio, &usage, false)
    }
}
