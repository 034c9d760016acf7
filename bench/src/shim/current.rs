//! Today's facade API (after issue 15's API changes): settings and components apart,
//! `gc()` without a flag.

use std::sync::Arc;

/// Opens a local store with these settings (and `BOUGH_BENCH_WRITE_BUFFER`'s buffer size,
/// if set: 0 runs the tree without a write buffer, to measure the two apart).
pub fn open_local(settings: bough::Options) -> bough::Result<bough::Store> {
    let settings = match write_buffer_override() {
        Some(bytes) => settings.write_buffer_bytes(bytes),
        None => settings,
    };
    bough::Store::open(settings)
}

/// `BOUGH_BENCH_WRITE_BUFFER` in bytes, when set to a number.
pub fn write_buffer_override() -> Option<u64> {
    std::env::var("BOUGH_BENCH_WRITE_BUFFER").ok()?.parse().ok()
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

/// Reads up to `n` entries from `start` on: through `Branch::for_each_in`, which lends each
/// key and value from its page as LMDB's and redb's cursors lend theirs (`Branch::range`
/// copies both out of the page). A baseline built before `for_each_in` existed reads
/// through `range`, each entry dropped as the next is read.
#[cfg(not(feature = "baseline"))]
pub fn scan(main: &bough::Branch, start: &[u8], n: usize) -> bough::Result<usize> {
    let mut got = 0;
    if n == 0 {
        return Ok(0);
    }
    main.for_each_in(start.., |k, v| {
        std::hint::black_box((k, v));
        got += 1;
        if got >= n {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    })?;
    Ok(got)
}

/// See the other `scan`.
#[cfg(feature = "baseline")]
pub fn scan(main: &bough::Branch, start: &[u8], n: usize) -> bough::Result<usize> {
    super::range_scan(main, start, n)
}
