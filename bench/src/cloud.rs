//! The cloud set (`--cloud`): Bough in S3 mode (`backend = "object"`, the `bough-object`
//! crate over opendal's S3 service) against SlateDB (object_store's S3 client), both on the
//! same S3 endpoint (a local moto server started by `cargo xtask bench --cloud`), each in a
//! prefix of its own. Both sit behind a wrapper that counts the requests each engine sends
//! and the bytes in their bodies, so the report gives GET/PUT per operation.
//! bench/README.md ("The cloud set") lists every setting made here.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use crate::Res;
use crate::engines::{Engine, Pair};
use crate::measure::{Counters, Requests};

/// Engines of the cloud set, in report order.
pub const CLOUD: &[&str] = &["bough-s3", "slatedb"];

/// Local disk cache of each engine (Bough `object.cache_bytes`, SlateDB
/// `object_store_cache_options.max_cache_size_bytes`): large enough to hold the data set.
pub const LOCAL_CACHE_BYTES: u64 = 1 << 30;

/// Where the S3 server is.
#[derive(Debug, Clone)]
pub struct S3Env {
    pub endpoint: String,
    pub bucket: String,
    pub region: String,
}

impl S3Env {
    /// From `BOUGH_S3_ENDPOINT` / `BOUGH_S3_BUCKET` / `AWS_REGION`; the error says why the
    /// cloud set cannot run.
    pub fn from_env() -> Result<S3Env, String> {
        let endpoint = match std::env::var("BOUGH_S3_ENDPOINT") {
            Ok(e) if !e.is_empty() => e,
            _ => {
                return Err(std::env::var("BOUGH_BENCH_CLOUD_UNAVAILABLE")
                    .ok()
                    .filter(|r| !r.is_empty())
                    .unwrap_or_else(|| {
                        "BOUGH_S3_ENDPOINT is not set (`cargo xtask bench --cloud` starts moto and sets it)"
                            .into()
                    }));
            }
        };
        let env = S3Env {
            bucket: std::env::var("BOUGH_S3_BUCKET").unwrap_or_else(|_| "bough-bench".into()),
            region: std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()),
            endpoint,
        };
        env.reachable()?;
        Ok(env)
    }

    /// Whether a TCP connection to the endpoint's host and port opens.
    fn reachable(&self) -> Result<(), String> {
        let rest = self
            .endpoint
            .split_once("://")
            .map(|(_, r)| r)
            .unwrap_or(&self.endpoint);
        let hostport = rest.split('/').next().unwrap_or(rest);
        let hostport = if hostport.contains(':') {
            hostport.to_string()
        } else {
            format!("{hostport}:80")
        };
        use std::net::ToSocketAddrs;
        let addrs: Vec<_> = hostport
            .to_socket_addrs()
            .map_err(|e| format!("S3 endpoint {}: {e}", self.endpoint))?
            .collect();
        for a in &addrs {
            if std::net::TcpStream::connect_timeout(a, std::time::Duration::from_secs(2)).is_ok() {
                return Ok(());
            }
        }
        Err(format!("S3 endpoint {} is not reachable", self.endpoint))
    }
}

// ---------------------------------------------------------------------------------------
// Bough in S3 mode
// ---------------------------------------------------------------------------------------

use bough::object as bo;

/// Counts the requests Bough's cloud tier sends through its object-store interface.
#[derive(Debug)]
struct CountingStore {
    inner: Arc<dyn bo::ObjectStore>,
    c: Arc<Counters>,
}

impl bo::ObjectStore for CountingStore {
    fn service(&self) -> &str {
        self.inner.service()
    }
    fn guarantees(&self) -> bo::Guarantees {
        self.inner.guarantees()
    }
    fn get(&self, key: &str) -> bo::ObjResult<(Vec<u8>, bo::ObjectMeta)> {
        let r = self.inner.get(key);
        self.c
            .get(r.as_ref().map(|(b, _)| b.len() as u64).unwrap_or(0));
        r
    }
    fn get_range(&self, key: &str, offset: u64, len: u64) -> bo::ObjResult<Vec<u8>> {
        let r = self.inner.get_range(key, offset, len);
        self.c.get(r.as_ref().map(|b| b.len() as u64).unwrap_or(0));
        r
    }
    fn head(&self, key: &str) -> bo::ObjResult<bo::ObjectMeta> {
        Counters::bump(&self.c.heads, 1);
        self.inner.head(key)
    }
    fn put(&self, key: &str, body: &[u8]) -> bo::ObjResult<Option<bo::Etag>> {
        self.c.put(body.len() as u64);
        self.inner.put(key, body)
    }
    fn put_if_absent(&self, key: &str, body: &[u8]) -> bo::ObjResult<Option<bo::Etag>> {
        self.c.put(body.len() as u64);
        self.inner.put_if_absent(key, body)
    }
    fn put_if_match(&self, key: &str, body: &[u8], etag: &str) -> bo::ObjResult<Option<bo::Etag>> {
        self.c.put(body.len() as u64);
        self.inner.put_if_match(key, body, etag)
    }
    fn list(
        &self,
        prefix: &str,
        delimiter: bool,
        start_after: Option<&str>,
        limit: usize,
    ) -> bo::ObjResult<bo::ListPage> {
        Counters::bump(&self.c.lists, 1);
        self.inner.list(prefix, delimiter, start_after, limit)
    }
    fn delete(&self, key: &str) -> bo::ObjResult<()> {
        Counters::bump(&self.c.deletes, 1);
        self.inner.delete(key)
    }
    fn delete_batch(&self, keys: &[String]) -> bo::ObjResult<()> {
        Counters::bump(&self.c.deletes, keys.len() as u64);
        self.inner.delete_batch(keys)
    }
}

/// Bough with `backend = "object"` on S3: partition `bench/0`, branch `main`, the local
/// cache in the directory the engine is opened on.
pub struct BoughS3 {
    store: bough::Store,
    main: bough::Branch,
    c: Arc<Counters>,
}

impl BoughS3 {
    /// Opens the store under `prefix` of the bucket with its local cache in `cache_dir`
    /// (empty for a cold open) and `mem_cache` bytes of page cache in memory.
    pub fn open(s3: &S3Env, prefix: &str, cache_dir: &Path, mem_cache: u64) -> Res<Self> {
        std::fs::create_dir_all(cache_dir)?;
        let cfg = bo::CloudConfig {
            service: bo::Service::S3,
            endpoint: s3.endpoint.clone(),
            region: s3.region.clone(),
            bucket: s3.bucket.clone(),
            root: format!("/{prefix}/"),
            allow_anonymous: true,
            cache_bytes: LOCAL_CACHE_BYTES,
            range_read_bytes: range_read_bytes(),
            ..bo::CloudConfig::default()
        };
        let c = Arc::new(Counters::default());
        let inner: Arc<dyn bo::ObjectStore> = Arc::new(bo::OpendalStore::new(&cfg)?);
        let counted: Arc<dyn bo::ObjectStore> = Arc::new(CountingStore {
            inner,
            c: c.clone(),
        });
        // Maintenance (expiry, compaction, checkpoints, GC) at its default interval, as a
        // user runs it; SlateDB's compactor and GC run too.
        let settings = bough::Options::new(cache_dir)
            .cache_bytes(mem_cache.max(1 << 20))
            .cache_data_pages(true);
        let store = crate::shim::open_object(settings, cfg, counted)?;
        let main = store.partition("bench", 0)?.branch("main")?;
        Ok(BoughS3 { store, main, c })
    }
}

/// `BOUGH_BENCH_RANGE_READ_BYTES` (bytes; 0 = whole objects) sets `bough-s3`'s
/// `range_read_bytes`, so the trade between bytes and requests per cold get can be measured;
/// the default otherwise.
fn range_read_bytes() -> u64 {
    std::env::var("BOUGH_BENCH_RANGE_READ_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(bo::DEFAULT_RANGE_READ_BYTES)
}

impl Drop for BoughS3 {
    fn drop(&mut self) {
        let _ = self.store.close();
    }
}

impl Engine for BoughS3 {
    /// Bough's deferred work, as for the local engine: one maintenance pass (expiry,
    /// compaction, the mapping checkpoint, GC under the partition's lease).
    fn settle(&self) -> Res<()> {
        self.store.run_maintenance()?;
        Ok(())
    }

    fn write_batch(&self, pairs: &[Pair]) -> Res<()> {
        let mut b = bough::WriteBatch::new();
        for (k, v) in pairs {
            b.put(k.clone(), v.clone());
        }
        self.main.write_blocking(b)?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Res<Option<usize>> {
        Ok(self.main.get_blocking(key)?.map(|v| v.value.len()))
    }

    /// Through the range iterator, each entry dropped as the next is read, as every peer's
    /// adapter reads its own iterator (a `scan_blocking` page holds all `n` entries at once:
    /// what it costs is in `cargo bench -p bough --bench reads -- scan_warm`).
    fn scan(&self, start: &[u8], n: usize) -> Res<usize> {
        Ok(crate::shim::scan(&self.main, start, n)?)
    }

    fn object_requests(&self) -> Option<Requests> {
        Some(self.c.snapshot())
    }
}

// ---------------------------------------------------------------------------------------
// SlateDB
// ---------------------------------------------------------------------------------------

use futures::StreamExt as _;
use futures::stream::BoxStream;
use object_store::path::Path as OsPath;

/// Counts the requests SlateDB sends through object_store (the disk cache sits above this
/// wrapper, so only requests that reach S3 are counted).
#[derive(Debug)]
struct CountingOs {
    inner: Arc<dyn object_store::ObjectStore>,
    c: Arc<Counters>,
}

impl fmt::Display for CountingOs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({})", self.inner)
    }
}

#[async_trait::async_trait]
impl object_store::ObjectStore for CountingOs {
    async fn put_opts(
        &self,
        location: &OsPath,
        payload: object_store::PutPayload,
        opts: object_store::PutOptions,
    ) -> object_store::Result<object_store::PutResult> {
        self.c.put(payload.content_length() as u64);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &OsPath,
        opts: object_store::PutMultipartOptions,
    ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
        let up = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(CountingUpload {
            inner: up,
            c: self.c.clone(),
        }))
    }

    async fn get_opts(
        &self,
        location: &OsPath,
        options: object_store::GetOptions,
    ) -> object_store::Result<object_store::GetResult> {
        let head = options.head;
        let r = self.inner.get_opts(location, options).await;
        if head {
            Counters::bump(&self.c.heads, 1);
        } else {
            let bytes = r.as_ref().map(|g| g.range.end - g.range.start).unwrap_or(0);
            self.c.get(bytes);
        }
        r
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<OsPath>>,
    ) -> BoxStream<'static, object_store::Result<OsPath>> {
        let c = self.c.clone();
        let counted = locations
            .inspect(move |_| Counters::bump(&c.deletes, 1))
            .boxed();
        self.inner.delete_stream(counted)
    }

    fn list(
        &self,
        prefix: Option<&OsPath>,
    ) -> BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
        Counters::bump(&self.c.lists, 1);
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&OsPath>,
        offset: &OsPath,
    ) -> BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
        Counters::bump(&self.c.lists, 1);
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&OsPath>,
    ) -> object_store::Result<object_store::ListResult> {
        Counters::bump(&self.c.lists, 1);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &OsPath,
        to: &OsPath,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.c.put(0);
        self.inner.copy_opts(from, to, options).await
    }
}

/// Counts each part of a multipart upload as a PUT.
#[derive(Debug)]
struct CountingUpload {
    inner: Box<dyn object_store::MultipartUpload>,
    c: Arc<Counters>,
}

#[async_trait::async_trait]
impl object_store::MultipartUpload for CountingUpload {
    fn put_part(&mut self, data: object_store::PutPayload) -> object_store::UploadPart {
        self.c.put(data.content_length() as u64);
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> object_store::Result<object_store::PutResult> {
        self.c.put(0);
        self.inner.complete().await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.inner.abort().await
    }
}

/// SlateDB on S3 under its own prefix: default `Settings` except the disk cache (in the
/// directory the engine is opened on, `LOCAL_CACHE_BYTES`) and a moka block cache of the
/// phase's memory budget. Every write is made durable before it returns: `Db::write`, then
/// `Db::flush` (the WAL goes out now rather than at the next `flush_interval` tick), then
/// `WriteHandle::await_durable`.
pub struct SlateEngine {
    rt: tokio::runtime::Runtime,
    db: Option<slatedb::Db>,
    c: Arc<Counters>,
}

impl SlateEngine {
    pub fn open(s3: &S3Env, prefix: &str, cache_dir: &Path, mem_cache: u64) -> Res<Self> {
        std::fs::create_dir_all(cache_dir)?;
        // reqwest is compiled without a default TLS provider (see Cargo.toml); an error
        // only means one is installed already (Bough's S3 store installs the same).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let s3_store = object_store::aws::AmazonS3Builder::new()
            .with_endpoint(&s3.endpoint)
            .with_bucket_name(&s3.bucket)
            .with_region(&s3.region)
            .with_allow_http(true)
            .with_access_key_id(
                std::env::var("AWS_ACCESS_KEY_ID").unwrap_or_else(|_| "bough-bench".into()),
            )
            .with_secret_access_key(
                std::env::var("AWS_SECRET_ACCESS_KEY").unwrap_or_else(|_| "bough-bench".into()),
            )
            .with_virtual_hosted_style_request(false)
            .build()?;
        let c = Arc::new(Counters::default());
        let counted: Arc<dyn object_store::ObjectStore> = Arc::new(CountingOs {
            inner: Arc::new(s3_store),
            c: c.clone(),
        });
        let mut settings = slatedb::Settings::default();
        settings.object_store_cache_options.root_folder = Some(cache_dir.to_path_buf());
        settings.object_store_cache_options.max_cache_size_bytes = Some(LOCAL_CACHE_BYTES as usize);
        let cache = Arc::new(slatedb::db_cache::moka::MokaCache::new_with_opts(
            slatedb::db_cache::moka::MokaCacheOptions {
                max_capacity: mem_cache.max(1 << 20),
                ..slatedb::db_cache::moka::MokaCacheOptions::default()
            },
        ));
        let db = rt.block_on(
            slatedb::Db::builder(format!("/{prefix}"), counted)
                .with_settings(settings)
                .with_db_cache(cache, 0)
                .build(),
        )?;
        Ok(SlateEngine {
            rt,
            db: Some(db),
            c,
        })
    }

    fn db(&self) -> &slatedb::Db {
        self.db.as_ref().expect("open until dropped")
    }
}

impl Drop for SlateEngine {
    fn drop(&mut self) {
        if let Some(db) = self.db.take() {
            // Closing flushes the memtable into an L0 table, so a reopen reads tables.
            let _ = self.rt.block_on(db.close());
        }
    }
}

impl Engine for SlateEngine {
    fn write_batch(&self, pairs: &[Pair]) -> Res<()> {
        let db = self.db();
        self.rt.block_on(async {
            let mut b = slatedb::WriteBatch::new();
            for (k, v) in pairs {
                b.put(k, v);
            }
            let handle = db.write(b).await?;
            db.flush().await?;
            handle.await_durable().await?;
            Ok::<(), slatedb::Error>(())
        })?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Res<Option<usize>> {
        let db = self.db();
        Ok(self
            .rt
            .block_on(db.get(key))?
            .map(|v| std::hint::black_box(v.to_vec()).len()))
    }

    fn scan(&self, start: &[u8], n: usize) -> Res<usize> {
        let db = self.db();
        self.rt
            .block_on(async {
                let mut it = db.scan(start.to_vec()..).await?;
                let mut got = 0;
                while got < n {
                    match it.next().await? {
                        Some(kv) => {
                            std::hint::black_box((kv.key.to_vec(), kv.value.to_vec()));
                            got += 1;
                        }
                        None => break,
                    }
                }
                Ok::<usize, slatedb::Error>(got)
            })
            .map_err(Into::into)
    }

    fn settle(&self) -> Res<()> {
        let db = self.db();
        self.rt
            .block_on(db.flush_with_options(slatedb::config::FlushOptions {
                flush_type: slatedb::config::FlushType::MemTable,
            }))?;
        Ok(())
    }

    fn object_requests(&self) -> Option<Requests> {
        Some(self.c.snapshot())
    }
}

/// Opens cloud engine `name` under `prefix` with its local cache in `cache_dir`.
pub fn open(
    name: &str,
    s3: &S3Env,
    prefix: &str,
    cache_dir: &Path,
    mem: u64,
) -> Res<Box<dyn Engine>> {
    Ok(match name {
        "bough-s3" => Box::new(BoughS3::open(s3, prefix, cache_dir, mem)?),
        "slatedb" => Box::new(SlateEngine::open(s3, prefix, cache_dir, mem)?),
        other => return Err(format!("unknown cloud engine {other:?}").into()),
    })
}

/// A human description of a cloud engine and its durability setting.
pub fn describe(name: &str) -> &'static str {
    match name {
        "bough-s3" => {
            "Bough, backend = \"object\" on S3 (opendal; a write returns after its log segment is PUT: one PUT per group commit)"
        }
        "slatedb" => {
            "SlateDB 0.18 on S3 (object_store 0.14; every write: Db::write + Db::flush (WAL PUT) + await_durable)"
        }
        _ => "unknown",
    }
}
