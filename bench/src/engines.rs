//! The engines under test behind one trait, each configured for the same durability
//! (every acknowledged batch is on stable storage) and the same user-space cache budget.
//! bench/README.md lists every setting made here and why.

use std::ops::Bound;
use std::path::Path;

use crate::Res;
use crate::shim;

/// One key-value pair of a batch.
pub type Pair = (Vec<u8>, Vec<u8>);

/// What every workload drives. Implementations are shared between threads: the
/// concurrent workloads call `write_batch` and `get` from several threads at once.
pub trait Engine: Send + Sync {
    /// Applies `pairs` atomically and returns once they are durable (synced).
    fn write_batch(&self, pairs: &[Pair]) -> Res<()>;
    /// Reads `key` in its own read transaction / snapshot; returns the value's length.
    fn get(&self, key: &[u8]) -> Res<Option<usize>>;
    /// Reads up to `n` entries from `start` on (key + value materialised); returns how many.
    fn scan(&self, start: &[u8], n: usize) -> Res<usize>;
    /// Moves everything written into the engine's on-disk structures (LSM engines flush
    /// their memtables), so that a reopen reads tables rather than replaying a journal
    /// into memory. A no-op for the B-trees.
    fn settle(&self) -> Res<()> {
        Ok(())
    }
    /// Device reads the engine itself counted, when it counts them (Bough's `io_stats`).
    fn engine_reads(&self) -> Option<u64> {
        None
    }
    /// Bytes the engine itself counted as written, when it counts them.
    fn engine_write_bytes(&self) -> Option<u64> {
        None
    }
    /// File and directory syncs the engine itself counted, when it counts them.
    fn engine_syncs(&self) -> Option<u64> {
        None
    }
    /// Object-store requests sent so far (the cloud engines: a counting wrapper).
    fn object_requests(&self) -> Option<crate::measure::Requests> {
        None
    }
}

/// The engines the harness knows, in report order.
pub const ALL: &[&str] = &["bough", "redb", "fjall", "lmdb", "rocksdb"];

/// A human description of the engine, its version and its durability setting.
pub fn describe(name: &str) -> String {
    if let Some(rev) = name.strip_prefix("bough@") {
        return format!("Bough at revision {rev}, with the same settings as `bough`");
    }
    let d = match name {
        "bough" => {
            "Bough (path dependency; always durable: a write returns after its group commit is synced; maintenance on at its default interval)"
        }
        "redb" => "redb 4.6 (Durability::Immediate)",
        "fjall" => "fjall 3.1 (batch durability PersistMode::SyncAll, no compression)",
        "lmdb" => "LMDB via heed 0.22 (default sync on commit, MDB_NORDAHEAD)",
        "rocksdb" => {
            "RocksDB 11.8 via rocksdb 0.25 (WriteOptions sync=true, WAL on, no compression, bloom 10 bits)"
        }
        _ => "unknown",
    };
    let d = match shim::revision() {
        Some(rev) if name == "bough" => format!("{d}; built from revision {rev}"),
        _ => d.to_string(),
    };
    #[cfg(not(feature = "baseline"))]
    if name == "bough"
        && let Some(bytes) = shim::write_buffer_override()
    {
        return format!("{d}; write_buffer_bytes = {bytes} (BOUGH_BENCH_WRITE_BUFFER)");
    }
    d
}

/// Whether `name` is compiled into this binary.
pub fn available(name: &str) -> bool {
    match name {
        "bough" | "redb" | "fjall" | "lmdb" => true,
        "rocksdb" => cfg!(feature = "rocksdb"),
        _ => false,
    }
}

/// Opens (creating) engine `name` in the empty directory `dir` with a user-space cache of
/// `cache` bytes.
pub fn open(name: &str, dir: &Path, cache: u64) -> Res<Box<dyn Engine>> {
    std::fs::create_dir_all(dir)?;
    Ok(match name {
        "bough" => Box::new(BoughEngine::open(dir, cache)?),
        "redb" => Box::new(RedbEngine::open(dir, cache)?),
        "fjall" => Box::new(FjallEngine::open(dir, cache)?),
        "lmdb" => Box::new(LmdbEngine::open(dir)?),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Box::new(rocks::RocksEngine::open(dir, cache)?),
        other => return Err(format!("engine {other:?} is not compiled in").into()),
    })
}

// ---------------------------------------------------------------------------------------
// Bough
// ---------------------------------------------------------------------------------------

/// The local backend Bough runs on: `BOUGH_BENCH_BACKEND` = `uring`, `pread` or `auto`
/// (the default: io_uring where the kernel allows it).
pub fn local_backend() -> bough::Backend {
    match std::env::var("BOUGH_BENCH_BACKEND").as_deref() {
        Ok("uring") => bough::Backend::IoUring,
        Ok("pread") => bough::Backend::Pread,
        _ => bough::Backend::Auto,
    }
}

/// The backend the last Bough store of this run opened on (`io_uring`, `pread`), for the
/// report.
static BACKEND_USED: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Which local backend Bough ran on in this run.
pub fn backend_used() -> &'static str {
    BACKEND_USED.get().map_or("not opened", String::as_str)
}

/// Records the backend a child process of this run (a round of `bough` or of a baseline)
/// reported, when this process opened no store of its own.
pub fn note_child_backend(backend: &str) {
    if backend != "not opened" {
        let _ = BACKEND_USED.set(backend.to_string());
    }
}

/// Bough: one store, partition `bench/0`, branch `main`.
pub struct BoughEngine {
    pub store: bough::Store,
    pub part: bough::PartitionHandle,
    pub main: bough::Branch,
}

impl BoughEngine {
    /// Opens the side-by-side engine: every setting at its default except the backend
    /// (`BOUGH_BENCH_BACKEND`) and the cache budget; maintenance (expiry, compaction,
    /// mapping checkpoints, GC) runs in the background every `maintenance_interval_ms`
    /// (default 10 s), as a user runs it.
    pub fn open(dir: &Path, cache: u64) -> Res<Self> {
        Self::open_with(dir, cache, true)
    }

    /// `maintenance` false: no background work at all (the Bough-only branch workloads,
    /// which call `run_maintenance` themselves where they measure the steady state, so a
    /// background tick cannot land inside one of their timings).
    pub fn open_with(dir: &Path, cache: u64, maintenance: bool) -> Res<Self> {
        let mut settings = bough::Options::new(dir)
            .backend(local_backend())
            .cache_bytes(cache.max(1 << 20))
            .cache_data_pages(true);
        if !maintenance {
            settings = settings.maintenance_interval_ms(0);
        }
        let store = crate::shim::open_local(settings)?;
        let _ = BACKEND_USED.set(store.backend().to_string());
        let part = store.partition("bench", 0)?;
        let main = part.branch("main")?;
        Ok(BoughEngine { store, part, main })
    }
}

impl Engine for BoughEngine {
    /// Bough's deferred work: one maintenance pass now (expiry, compaction of files whose
    /// garbage passed `compaction_garbage_ratio`, the mapping checkpoint, GC of what is
    /// unreachable), the work its background ticks would do.
    fn settle(&self) -> Res<()> {
        self.store.run_maintenance()?;
        Ok(())
    }

    fn write_batch(&self, pairs: &[Pair]) -> Res<()> {
        let mut b = bough::WriteBatch::new();
        for (k, v) in pairs {
            b.put(k, v);
        }
        self.main.write_blocking(b)?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Res<Option<usize>> {
        Ok(self.main.get_blocking(key)?.map(|v| v.value.len()))
    }

    /// See `shim::scan`: the fastest scan the embedded revision offers.
    fn scan(&self, start: &[u8], n: usize) -> Res<usize> {
        Ok(crate::shim::scan(&self.main, start, n)?)
    }

    fn engine_reads(&self) -> Option<u64> {
        Some(self.store.io_stats().reads)
    }

    fn engine_write_bytes(&self) -> Option<u64> {
        Some(self.store.io_stats().write_bytes)
    }

    fn engine_syncs(&self) -> Option<u64> {
        let s = self.store.io_stats();
        Some(s.syncs + s.dir_syncs)
    }
}

/// Waits until `idle()` held on [`IDLE_POLLS`] polls in a row, 10 ms apart (background
/// work that one finished job schedules starts within that time), or 10 minutes passed.
pub fn wait_until_idle(idle: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    let mut quiet = 0;
    while quiet < IDLE_POLLS && std::time::Instant::now() < deadline {
        quiet = if idle() { quiet + 1 } else { 0 };
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Consecutive idle polls that end [`wait_until_idle`] (30 ms of quiet).
pub const IDLE_POLLS: u32 = 3;

// ---------------------------------------------------------------------------------------
// redb
// ---------------------------------------------------------------------------------------

const REDB_TABLE: redb::TableDefinition<'static, &[u8], &[u8]> =
    redb::TableDefinition::new("bench");

pub struct RedbEngine {
    db: redb::Database,
}

impl RedbEngine {
    fn open(dir: &Path, cache: u64) -> Res<Self> {
        let db = redb::Database::builder()
            .set_cache_size(cache as usize)
            .create(dir.join("redb.db"))?;
        let mut tx = db.begin_write()?;
        tx.set_durability(redb::Durability::Immediate)?;
        tx.open_table(REDB_TABLE)?;
        tx.commit()?;
        Ok(RedbEngine { db })
    }
}

impl Engine for RedbEngine {
    fn write_batch(&self, pairs: &[Pair]) -> Res<()> {
        let mut tx = self.db.begin_write()?;
        tx.set_durability(redb::Durability::Immediate)?;
        {
            let mut t = tx.open_table(REDB_TABLE)?;
            for (k, v) in pairs {
                t.insert(k.as_slice(), v.as_slice())?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Res<Option<usize>> {
        use redb::ReadableDatabase;
        let tx = self.db.begin_read()?;
        let t = tx.open_table(REDB_TABLE)?;
        Ok(t.get(key)?
            .map(|g| std::hint::black_box(g.value().to_vec()).len()))
    }

    fn scan(&self, start: &[u8], n: usize) -> Res<usize> {
        use redb::ReadableDatabase;
        let tx = self.db.begin_read()?;
        let t = tx.open_table(REDB_TABLE)?;
        let mut got = 0;
        for item in t.range::<&[u8]>(start..)?.take(n) {
            let (k, v) = item?;
            std::hint::black_box((k.value().to_vec(), v.value().to_vec()));
            got += 1;
        }
        Ok(got)
    }
}

// ---------------------------------------------------------------------------------------
// fjall
// ---------------------------------------------------------------------------------------

pub struct FjallEngine {
    db: fjall::Database,
    ks: fjall::Keyspace,
}

impl FjallEngine {
    fn open(dir: &Path, cache: u64) -> Res<Self> {
        let db = fjall::Database::builder(dir.join("fjall"))
            .cache_size(cache)
            .open()?;
        let ks = db.keyspace("bench", fjall::KeyspaceCreateOptions::default)?;
        Ok(FjallEngine { db, ks })
    }
}

impl Engine for FjallEngine {
    /// The memtable flushed into a table, then every flush and compaction it started
    /// finished (fjall has no call that waits for compactions: polled until idle).
    fn settle(&self) -> Res<()> {
        self.ks.rotate_memtable_and_wait()?;
        wait_until_idle(|| self.db.outstanding_flushes() == 0 && self.db.active_compactions() == 0);
        Ok(())
    }

    fn write_batch(&self, pairs: &[Pair]) -> Res<()> {
        let mut b = self
            .db
            .batch()
            .durability(Some(fjall::PersistMode::SyncAll));
        for (k, v) in pairs {
            b.insert(&self.ks, k.as_slice(), v.as_slice());
        }
        b.commit()?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Res<Option<usize>> {
        Ok(self
            .ks
            .get(key)?
            .map(|v| std::hint::black_box(v.to_vec()).len()))
    }

    fn scan(&self, start: &[u8], n: usize) -> Res<usize> {
        let mut got = 0;
        for g in self.ks.range(start..).take(n) {
            let (k, v) = g.into_inner()?;
            std::hint::black_box((k.to_vec(), v.to_vec()));
            got += 1;
        }
        Ok(got)
    }
}

// ---------------------------------------------------------------------------------------
// LMDB (heed)
// ---------------------------------------------------------------------------------------

pub struct LmdbEngine {
    env: heed::Env,
    db: heed::Database<heed::types::Bytes, heed::types::Bytes>,
}

impl LmdbEngine {
    fn open(dir: &Path) -> Res<Self> {
        let mut opts = heed::EnvOpenOptions::new();
        opts.map_size(64 << 30).max_dbs(1);
        // SAFETY: the directory is fresh and only this process opens it; NO_READ_AHEAD only
        // changes the kernel read-ahead hint for random reads.
        let env = unsafe {
            opts.flags(heed::EnvFlags::NO_READ_AHEAD);
            opts.open(dir)?
        };
        let mut wtxn = env.write_txn()?;
        let db = env.create_database(&mut wtxn, Some("bench"))?;
        wtxn.commit()?;
        Ok(LmdbEngine { env, db })
    }
}

impl Engine for LmdbEngine {
    fn write_batch(&self, pairs: &[Pair]) -> Res<()> {
        let mut wtxn = self.env.write_txn()?;
        for (k, v) in pairs {
            self.db.put(&mut wtxn, k, v)?;
        }
        wtxn.commit()?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Res<Option<usize>> {
        let rtxn = self.env.read_txn()?;
        Ok(self
            .db
            .get(&rtxn, key)?
            .map(|v| std::hint::black_box(v.to_vec()).len()))
    }

    fn scan(&self, start: &[u8], n: usize) -> Res<usize> {
        let rtxn = self.env.read_txn()?;
        let range = (Bound::Included(start), Bound::Unbounded);
        let mut got = 0;
        for item in self.db.range(&rtxn, &range)?.take(n) {
            let (k, v) = item?;
            std::hint::black_box((k.to_vec(), v.to_vec()));
            got += 1;
        }
        Ok(got)
    }
}

// ---------------------------------------------------------------------------------------
// RocksDB
// ---------------------------------------------------------------------------------------

#[cfg(feature = "rocksdb")]
pub mod rocks {
    use super::*;

    pub struct RocksEngine {
        pub db: rocksdb::DB,
        sync: rocksdb::WriteOptions,
    }

    impl RocksEngine {
        pub fn open(dir: &Path, cache: u64) -> Res<Self> {
            let mut block = rocksdb::BlockBasedOptions::default();
            block.set_block_cache(&rocksdb::Cache::new_lru_cache(cache as usize));
            block.set_bloom_filter(10.0, false);
            let mut opts = rocksdb::Options::default();
            opts.create_if_missing(true);
            opts.set_compression_type(rocksdb::DBCompressionType::None);
            opts.set_block_based_table_factory(&block);
            let db = rocksdb::DB::open(&opts, dir.join("rocksdb"))?;
            let mut sync = rocksdb::WriteOptions::default();
            sync.set_sync(true);
            Ok(RocksEngine { db, sync })
        }

        /// Creates a checkpoint (hard links + a flushed memtable) in `to`.
        pub fn checkpoint(&self, to: &Path) -> Res<()> {
            rocksdb::checkpoint::Checkpoint::new(&self.db)?.create_checkpoint(to)?;
            Ok(())
        }
    }

    impl Engine for RocksEngine {
        /// The memtable flushed, then every flush and compaction finished (polled on
        /// RocksDB's own counters until idle).
        fn settle(&self) -> Res<()> {
            self.db.flush()?;
            let busy = |p: &str| self.db.property_int_value(p).ok().flatten().unwrap_or(0) > 0;
            wait_until_idle(|| {
                !busy("rocksdb.num-running-compactions")
                    && !busy("rocksdb.num-running-flushes")
                    && !busy("rocksdb.compaction-pending")
                    && !busy("rocksdb.mem-table-flush-pending")
            });
            Ok(())
        }

        fn write_batch(&self, pairs: &[Pair]) -> Res<()> {
            let mut b = rocksdb::WriteBatch::default();
            for (k, v) in pairs {
                b.put(k, v);
            }
            self.db.write_opt(b, &self.sync)?;
            Ok(())
        }

        fn get(&self, key: &[u8]) -> Res<Option<usize>> {
            Ok(self.db.get(key)?.map(|v| v.len()))
        }

        fn scan(&self, start: &[u8], n: usize) -> Res<usize> {
            let mut got = 0;
            let it = self.db.iterator(rocksdb::IteratorMode::From(
                start,
                rocksdb::Direction::Forward,
            ));
            for item in it.take(n) {
                let (k, v) = item?;
                std::hint::black_box((k, v));
                got += 1;
            }
            Ok(got)
        }
    }
}
