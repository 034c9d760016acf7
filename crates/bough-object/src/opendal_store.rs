//! [`OpendalStore`]: the [`ObjectStore`] interface over an opendal 0.59 operator: S3 and
//! S3-compatible services; GCS and Azure Blob with the `gcs` / `azblob` features; opendal's
//! memory and fs services for tests.
//!
//! opendal is async; this module owns a small tokio runtime and runs each request on it,
//! waiting on a channel, so callers may be plain threads or even sit inside another
//! runtime without "runtime within a runtime" panics. Credentials come from the usual
//! environment variables (opendal's loaders: `AWS_*`, `GOOGLE_APPLICATION_CREDENTIALS`,
//! `AZURE_STORAGE_*`); they are never stored here nor logged. A service's guarantees are
//! the weaker of what it is declared to guarantee ([`Service::declared_guarantees`]) and
//! what opendal's capabilities say it sends.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_core::Stream;
use opendal::{EntryMode, ErrorKind as OdKind, Operator, options};

use crate::config::{CloudConfig, Service};
use crate::object::{
    Etag, Guarantees, ListPage, ObjResult, ObjectError, ObjectMeta, ObjectStore, Transient,
};

/// An object store reached through opendal.
pub struct OpendalStore {
    op: Operator,
    rt: Arc<tokio::runtime::Runtime>,
    service: &'static str,
    guarantees: Guarantees,
    start_after: bool,
    /// Compare-and-swap on the object version (GCS generation) instead of the ETag.
    cas_by_version: bool,
}

impl std::fmt::Debug for OpendalStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the operator: its configuration may hold credentials.
        f.debug_struct("OpendalStore")
            .field("service", &self.service)
            .field("guarantees", &self.guarantees)
            .finish_non_exhaustive()
    }
}

fn config_error(what: impl Into<String>) -> ObjectError {
    ObjectError::Other {
        op: "configure",
        key: String::new(),
        message: what.into(),
    }
}

fn od_config_error(e: &opendal::Error) -> ObjectError {
    // The message may quote configuration values; credentials are never in the
    // configuration (they come from the environment), so it is safe to show.
    config_error(format!("object store: {}: {}", e.kind(), e.message()))
}

/// The opendal operator of the configured service (no I/O).
fn build_operator(cfg: &CloudConfig) -> ObjResult<Operator> {
    match cfg.service {
        Service::S3 => {
            if cfg.bucket.is_empty() {
                return Err(config_error("object store: `bucket` is required for s3"));
            }
            let mut b = opendal::services::S3::default()
                .bucket(&cfg.bucket)
                .root(&cfg.root)
                .region(if cfg.region.is_empty() {
                    "us-east-1"
                } else {
                    &cfg.region
                })
                .disable_ec2_metadata();
            if !cfg.endpoint.is_empty() {
                b = b.endpoint(&cfg.endpoint);
            }
            if cfg.virtual_host_style {
                b = b.enable_virtual_host_style();
            }
            if cfg.allow_anonymous && std::env::var_os("AWS_ACCESS_KEY_ID").is_none() {
                b = b.skip_signature();
            }
            Operator::new(b).map_err(|e| od_config_error(&e))
        }
        #[cfg(feature = "gcs")]
        Service::Gcs => {
            if cfg.bucket.is_empty() {
                return Err(config_error("object store: `bucket` is required for gcs"));
            }
            // Credentials: opendal's default chain (GOOGLE_APPLICATION_CREDENTIALS, the
            // gcloud configuration, the VM metadata server).
            let mut b = opendal::services::Gcs::default()
                .bucket(&cfg.bucket)
                .root(&cfg.root);
            if !cfg.endpoint.is_empty() {
                b = b.endpoint(&cfg.endpoint);
            }
            if cfg.allow_anonymous {
                b = b.skip_signature();
            }
            Operator::new(b).map_err(|e| od_config_error(&e))
        }
        #[cfg(feature = "azblob")]
        Service::Azblob => {
            if cfg.bucket.is_empty() || cfg.endpoint.is_empty() {
                return Err(config_error(
                    "object store: `bucket` (the container) and `endpoint` are required for \
                     azblob",
                ));
            }
            // Credentials: AZURE_STORAGE_ACCOUNT_NAME / AZURE_STORAGE_ACCOUNT_KEY, a SAS token
            // or a managed identity (opendal's default chain).
            let mut b = opendal::services::Azblob::default()
                .container(&cfg.bucket)
                .endpoint(&cfg.endpoint)
                .root(&cfg.root);
            if cfg.allow_anonymous {
                b = b.skip_signature();
            }
            Operator::new(b).map_err(|e| od_config_error(&e))
        }
        Service::Memory => Operator::new(opendal::services::Memory::default().root(&cfg.root))
            .map_err(|e| od_config_error(&e)),
        // No `atomic_write_dir`: create-if-absent stays an atomic `O_EXCL` open (with it,
        // opendal checks for existence and then renames, which two creators both pass).
        Service::Fs => Operator::new(opendal::services::Fs::default().root(&cfg.root))
            .map_err(|e| od_config_error(&e)),
        #[allow(unreachable_patterns)]
        other => Err(config_error(format!(
            "object store: service `{other}` is not built in"
        ))),
    }
}

impl OpendalStore {
    /// Builds the operator described by `cfg`. Checks nothing on the network.
    pub fn new(cfg: &CloudConfig) -> ObjResult<OpendalStore> {
        // reqwest is built without a default TLS provider (no aws-lc build): install ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
        opendal::install_default();
        opendal_http_transport_reqwest::install_default();
        if !cfg.service.is_built() {
            return Err(config_error(format!(
                "object store: service `{}` is not built in (enable the `{}` feature of \
                 bough-object)",
                cfg.service, cfg.service
            )));
        }
        let op = build_operator(cfg)?;
        let op = if cfg.request_timeout_ms > 0 {
            op.layer(
                opendal::layers::TimeoutLayer::new()
                    .with_timeout(Duration::from_millis(cfg.request_timeout_ms))
                    .with_io_timeout(Duration::from_millis(cfg.request_timeout_ms)),
            )
        } else {
            op
        };
        let cap = op.info().capability();
        let declared = cfg.service.declared_guarantees();
        // GCS has generation preconditions instead of If-Match: the generation is then the
        // version token handed out as the "ETag" of the trait.
        let cas_by_version = !cap.write_with_if_match && cap.write_with_if_version_match;
        // What opendal says it can do, never more than what the service is declared to
        // guarantee (opendal's flags say an option is sent, not that the service is atomic).
        let guarantees = Guarantees {
            conditional_create: declared.conditional_create && cap.write_with_if_not_exists,
            compare_and_swap: declared.compare_and_swap
                && (cap.write_with_if_match || cap.write_with_if_version_match),
            // Every opendal write here is one request (no multipart: see `put`).
            atomic_put: declared.atomic_put,
            durable: declared.durable,
            max_batch_delete: cap
                .delete_max_size
                .unwrap_or(1)
                .clamp(1, declared.max_batch_delete.max(1)),
        };
        if guarantees != declared {
            tracing::warn!(
                service = %cfg.service,
                ?declared,
                ?guarantees,
                "opendal's capabilities differ from the declared guarantees"
            );
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("bough-object-io")
            .enable_all()
            .build()
            .map_err(|e| config_error(format!("cannot start the object-store runtime: {e}")))?;
        Ok(OpendalStore {
            op,
            rt: Arc::new(rt),
            service: cfg.service.name(),
            guarantees,
            start_after: cap.list_with_start_after,
            cas_by_version,
        })
    }

    /// Runs `fut` on the runtime and waits for it.
    fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = opendal::Result<T>> + Send + 'static,
    ) -> Result<T, opendal::Error> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.rt.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv().unwrap_or_else(|_| {
            Err(opendal::Error::new(
                OdKind::Unexpected,
                "object-store runtime dropped the request",
            ))
        })
    }
}

/// Maps an opendal error.
fn map_err(op: &'static str, key: &str, e: opendal::Error) -> ObjectError {
    let key = key.to_string();
    match e.kind() {
        OdKind::NotFound => ObjectError::NotFound { key },
        OdKind::ConditionNotMatch | OdKind::AlreadyExists => {
            ObjectError::PreconditionFailed { key }
        }
        OdKind::RateLimited => ObjectError::Transient {
            op,
            key,
            reason: Transient::Throttled,
            message: e.to_string(),
        },
        OdKind::Unsupported => ObjectError::Unsupported {
            what: format!("{op} {key}: {e}"),
        },
        _ if e.is_temporary() => {
            let text = e.to_string();
            let reason = if text.contains("timeout") || text.contains("timed out") {
                Transient::Timeout
            } else if text.contains("connect") || text.contains("send") {
                Transient::Network
            } else {
                Transient::Server
            };
            ObjectError::Transient {
                op,
                key,
                reason,
                message: text,
            }
        }
        _ => ObjectError::Other {
            op,
            key,
            message: e.to_string(),
        },
    }
}

fn to_meta(key: &str, m: &opendal::Metadata, by_version: bool) -> ObjectMeta {
    ObjectMeta {
        key: key.to_string(),
        size: m.content_length(),
        etag: cas_token(m, by_version),
        last_modified_ms: m
            .last_modified()
            .map(|t| t.into_inner().as_millisecond().max(0) as u64),
    }
}

/// The token compare-and-swap is conditioned on: the ETag, or the object version where the
/// service preconditions writes on that (GCS generations).
fn cas_token(m: &opendal::Metadata, by_version: bool) -> Option<Etag> {
    if by_version {
        m.version().map(str::to_string)
    } else {
        m.etag().map(str::to_string)
    }
}

impl OpendalStore {
    fn write(
        &self,
        name: &'static str,
        key: &str,
        body: &[u8],
        opts: options::WriteOptions,
    ) -> ObjResult<Option<Etag>> {
        let op = self.op.clone();
        let k = key.to_string();
        let body = body.to_vec();
        // `write_options` with one buffer and no `chunk` is a single PUT: the object appears
        // whole or not at all, which is what makes a commit readable from the store alone.
        let meta = self
            .run(async move { op.write_options(&k, body, opts).await })
            .map_err(|e| map_err(name, key, e))?;
        Ok(cas_token(&meta, self.cas_by_version))
    }
}

impl ObjectStore for OpendalStore {
    fn service(&self) -> &str {
        self.service
    }

    fn guarantees(&self) -> Guarantees {
        self.guarantees
    }

    fn get(&self, key: &str) -> ObjResult<(Vec<u8>, ObjectMeta)> {
        let op = self.op.clone();
        let k = key.to_string();
        let (buf, meta) = self
            .run(async move {
                let meta = op.stat(&k).await?;
                let etag = meta.etag().map(str::to_string);
                // Read the version the stat described, so body and ETag belong together.
                let buf = match &etag {
                    Some(e) => op.read_with(&k).if_match(e).await?,
                    None => op.read(&k).await?,
                };
                Ok((buf, meta))
            })
            .map_err(|e| {
                // A read conditioned on the ETag we just saw fails if the object changed in
                // between: a retry reads the new version.
                if e.kind() == OdKind::ConditionNotMatch {
                    ObjectError::Transient {
                        op: "get",
                        key: key.to_string(),
                        reason: Transient::Server,
                        message: "object changed while it was read".into(),
                    }
                } else {
                    map_err("get", key, e)
                }
            })?;
        let data = buf.to_vec();
        let mut m = to_meta(key, &meta, self.cas_by_version);
        if data.len() as u64 != m.size {
            return Err(ObjectError::Transient {
                op: "get",
                key: key.to_string(),
                reason: Transient::Network,
                message: format!("body has {} bytes, expected {}", data.len(), m.size),
            });
        }
        m.size = data.len() as u64;
        Ok((data, m))
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> ObjResult<Vec<u8>> {
        let op = self.op.clone();
        let k = key.to_string();
        let buf = self
            .run(async move { op.read_with(&k).range(offset..offset + len).await })
            .map_err(|e| map_err("get_range", key, e))?;
        Ok(buf.to_vec())
    }

    fn head(&self, key: &str) -> ObjResult<ObjectMeta> {
        let op = self.op.clone();
        let k = key.to_string();
        let meta = self
            .run(async move { op.stat(&k).await })
            .map_err(|e| map_err("head", key, e))?;
        Ok(to_meta(key, &meta, self.cas_by_version))
    }

    fn put(&self, key: &str, body: &[u8]) -> ObjResult<Option<Etag>> {
        self.write("put", key, body, options::WriteOptions::default())
    }

    fn put_if_absent(&self, key: &str, body: &[u8]) -> ObjResult<Option<Etag>> {
        if !self.guarantees.conditional_create {
            return Err(ObjectError::Unsupported {
                what: format!("{} has no conditional create", self.service),
            });
        }
        self.write(
            "put_if_absent",
            key,
            body,
            options::WriteOptions {
                if_not_exists: true,
                ..Default::default()
            },
        )
    }

    fn put_if_match(&self, key: &str, body: &[u8], etag: &str) -> ObjResult<Option<Etag>> {
        if !self.guarantees.compare_and_swap {
            return Err(ObjectError::Unsupported {
                what: format!("{} has no If-Match (compare-and-swap)", self.service),
            });
        }
        self.write(
            "put_if_match",
            key,
            body,
            if self.cas_by_version {
                options::WriteOptions {
                    if_version_match: Some(etag.to_string()),
                    ..Default::default()
                }
            } else {
                options::WriteOptions {
                    if_match: Some(etag.to_string()),
                    ..Default::default()
                }
            },
        )
    }

    fn list(
        &self,
        prefix: &str,
        delimiter: bool,
        start_after: Option<&str>,
        limit: usize,
    ) -> ObjResult<ListPage> {
        let op = self.op.clone();
        let p = prefix.to_string();
        let native_after = if self.start_after {
            start_after.map(str::to_string)
        } else {
            None
        };
        let after = start_after.map(str::to_string);
        let limit = limit.max(1);
        // A file system lists a directory in no particular order and only whole
        // directories: list the directory the prefix lies in, in full, and filter and sort
        // here. Object stores list any key prefix in key order, so a page can stop early.
        let ordered = self.service != "fs";
        let listed = if ordered {
            p.clone()
        } else {
            p.rfind('/').map_or(String::new(), |i| p[..=i].to_string())
        };
        let entries = self.run(async move {
            let mut lister = op
                .lister_options(
                    &listed,
                    options::ListOptions {
                        recursive: !delimiter,
                        start_after: native_after,
                        ..Default::default()
                    },
                )
                .await?;
            let mut out: Vec<(String, bool, opendal::Metadata)> = Vec::new();
            while let Some(entry) =
                std::future::poll_fn(|cx| Pin::new(&mut lister).poll_next(cx)).await
            {
                let entry = entry?;
                let path = entry.path().to_string();
                if path == p || !path.starts_with(&p) {
                    continue;
                }
                if after.as_deref().is_some_and(|a| path.as_str() <= a) {
                    continue;
                }
                let is_dir = entry.metadata().mode() == EntryMode::DIR;
                out.push((path, is_dir, entry.metadata().clone()));
                if ordered && out.len() > limit {
                    break;
                }
            }
            Ok(out)
        });
        let mut entries = match entries {
            Ok(e) => e,
            Err(e) if e.kind() == OdKind::NotFound => Vec::new(),
            Err(e) => return Err(map_err("list", prefix, e)),
        };
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let more = entries.len() > limit;
        entries.truncate(limit);
        let mut page = ListPage::default();
        for (path, is_dir, meta) in entries {
            if is_dir {
                if delimiter {
                    page.prefixes.push(path);
                }
            } else {
                page.objects
                    .push(to_meta(&path, &meta, self.cas_by_version));
            }
        }
        if more {
            let last = page
                .objects
                .iter()
                .map(|o| o.key.clone())
                .chain(page.prefixes.iter().cloned())
                .max();
            page.next = last;
        }
        Ok(page)
    }

    fn delete(&self, key: &str) -> ObjResult<()> {
        let op = self.op.clone();
        let k = key.to_string();
        match self.run(async move { op.delete(&k).await }) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == OdKind::NotFound => Ok(()),
            Err(e) => Err(map_err("delete", key, e)),
        }
    }

    fn delete_batch(&self, keys: &[String]) -> ObjResult<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let op = self.op.clone();
        let ks = keys.to_vec();
        // opendal groups the keys into DeleteObjects requests of at most `delete_max_size`.
        self.run(async move { op.delete_iter(ks).await })
            .map_err(|e| map_err("delete_batch", keys.first().map_or("", String::as_str), e))
    }
}
