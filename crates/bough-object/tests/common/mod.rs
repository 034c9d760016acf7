//! Shared set-up of the object-store tests: which stores to run against.
#![allow(dead_code)]

use std::sync::Arc;

use bough_object::{CloudConfig, ObjectStore, OpendalStore, RetryPolicy, Service};

/// The S3 endpoint of the real server, from `BOUGH_S3_ENDPOINT` (started by `.ci/run`).
/// Missing under `CI=true` is a failure, never a silent skip; missing locally skips.
pub fn s3_endpoint(test: &str) -> Option<String> {
    match std::env::var("BOUGH_S3_ENDPOINT") {
        Ok(e) if !e.is_empty() => Some(e),
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: BOUGH_S3_ENDPOINT is not set, but CI=true: .ci/run must start the S3 \
                 server (moto) and export it"
            );
            eprintln!(
                "{test}: SKIPPED against S3 — set BOUGH_S3_ENDPOINT (e.g. start \
                 `moto_server -H 127.0.0.1 -p 5055`, create a bucket, export \
                 BOUGH_S3_ENDPOINT=http://127.0.0.1:5055 BOUGH_S3_BUCKET=<bucket>)"
            );
            None
        }
    }
}

/// A configuration for the S3 server at `endpoint`, under a fresh prefix.
pub fn s3_config(endpoint: &str, prefix: &str) -> CloudConfig {
    let unique = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    CloudConfig {
        service: Service::S3,
        endpoint: endpoint.to_string(),
        bucket: std::env::var("BOUGH_S3_BUCKET").unwrap_or_else(|_| "bough-test".into()),
        region: std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".into()),
        root: format!("/{prefix}-{unique}-{}/", std::process::id()),
        allow_anonymous: true,
        request_timeout_ms: 20_000,
        cache_bytes: 64 << 20,
        min_delete_age_ms: 0,
        retry: fast_retry(),
        ..CloudConfig::default()
    }
}

/// An S3 store for `test`, or `None` when no server is configured (locally).
pub fn s3_store(test: &str) -> Option<(Arc<dyn ObjectStore>, CloudConfig)> {
    let endpoint = s3_endpoint(test)?;
    let cfg = s3_config(&endpoint, test);
    let store = OpendalStore::new(&cfg).expect("s3 store");
    Some((Arc::new(store), cfg))
}

/// Retries fast enough for tests.
pub fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        attempts: 6,
        base_delay_ms: 1,
        max_delay_ms: 5,
    }
}

/// A tier configuration for in-process tests.
pub fn test_config(cache_bytes: u64) -> CloudConfig {
    CloudConfig {
        cache_bytes,
        min_delete_age_ms: 0,
        retry: fast_retry(),
        writer_id: 0,
        ..CloudConfig::default()
    }
}
