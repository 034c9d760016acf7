//! `backend = "object"`: the storage and head settings of a store whose data lives in an
//! object store (the `bough-object` crate), with `path` as the local cache.

use std::path::Path;
use std::sync::Arc;

use bough_io::Storage;
use bough_object::{CloudStorage, GcLease, open_object_store};
use bough_tree::head::HeadConfig;

use crate::builder::Components;
use crate::error::{Error, ErrorKind, Result};
use crate::options::{Backend, Options};

/// Largest manifest object in cloud mode before it is rewritten as one snapshot: each
/// commit uploads the whole manifest, so it is kept small (it never grows with the data).
const CLOUD_MANIFEST_BYTES: u64 = 64 << 10;

/// Opens the object store the options name (or the injected one) with its cache in `path`,
/// and prewarms the cache when the options ask for it.
pub(crate) fn open_storage(
    opts: &Options,
    parts: &Components,
    path: &Path,
) -> Result<(Arc<dyn Storage>, CloudStorage)> {
    let store = match &parts.object_store {
        Some(s) => s.clone(),
        None => open_object_store(&opts.object)
            .map_err(|e| Error::new(ErrorKind::InvalidArgument, format!("option `object`: {e}")))?,
    };
    let clock = parts.clock.clone();
    let cloud = CloudStorage::open(
        store,
        path,
        &opts.object,
        Some(Arc::new(move || clock.now_ms())),
    )
    .map_err(|e| Error::from(e).at(path.display()))?;
    if opts.object.prewarm {
        cloud
            .prewarm()
            .map_err(|e| Error::from(e).at(path.display()))?;
    }
    Ok((Arc::new(cloud.clone()), cloud))
}

/// Claims the GC lease of a partition for one GC run (cloud mode; `None` elsewhere or for
/// a dry run, which deletes nothing). `Busy` while another process collects garbage there.
pub(crate) fn gc_lease(cloud: Option<&CloudStorage>, dir: &str) -> Result<Option<GcLease>> {
    match cloud {
        Some(c) => c
            .acquire_gc_lease(dir)
            .map(Some)
            .map_err(|e| Error::from(e).at(dir)),
        None => Ok(None),
    }
}

/// Head settings in cloud mode: one data file per checkpoint or direct commit (each
/// uploaded once, never rewritten), the mapping checkpointed at every manifest record and
/// a small manifest (so the manifest object uploaded per record stays O(1) in the data
/// size); a logged commit is one log segment (`bough_object` `cloud/logs.rs`).
pub(crate) fn head_config(opts: &Options, mut cfg: HeadConfig) -> HeadConfig {
    if opts.backend == Backend::Object {
        cfg.file_per_commit = true;
        cfg.checkpoint_chunks = 1;
        cfg.manifest_rewrite_bytes = cfg.manifest_rewrite_bytes.min(CLOUD_MANIFEST_BYTES);
        cfg.preallocate = 0;
        // The log is a sequence of segment objects, one per sync: nothing to lay out.
        cfg.log.layout_bytes = 0;
    }
    cfg
}
