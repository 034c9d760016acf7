//! Today's facade API (after issue 15's API changes): settings and components apart,
//! `gc()` without a flag.

use std::sync::Arc;

/// Opens a local store with these settings.
pub fn open_local(settings: bough::Options) -> bough::Result<bough::Store> {
    bough::Store::open(settings)
}

/// Opens a store on `object_store` (the cloud set's counting wrapper).
pub fn open_object(
    settings: bough::Options,
    object: bough::object::CloudConfig,
    object_store: Arc<dyn bough::object::ObjectStore>,
) -> bough::Result<bough::Store> {
    bough::Store::builder(settings.object(object))
        .object_store(object_store)
        .open()
}

/// Collects the partition's garbage (deleting it).
pub fn gc(part: &bough::PartitionHandle) -> bough::Result<bough::GcReport> {
    part.gc()
}
