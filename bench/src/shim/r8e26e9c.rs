//! Revision 8e26e9c (before issue 15's API changes): the object store is a field of the
//! settings, and `gc` takes `dry_run`.

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
    let mut o = settings.object_store(object_store);
    o.object = object;
    bough::Store::open(o)
}

/// Collects the partition's garbage (deleting it).
pub fn gc(part: &bough::PartitionHandle) -> bough::Result<bough::GcReport> {
    part.gc(false)
}

/// Up to `n` entries from `start` (this revision has no `for_each_in`).
pub fn scan(main: &bough::Branch, start: &[u8], n: usize) -> bough::Result<usize> {
    super::range_scan(main, start, n)
}
