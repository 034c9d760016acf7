//! The facade calls whose signatures differ between the Bough revisions this harness is
//! built against: today's tree, or an older revision for the before/after rows
//! (`cargo xtask bench --bough-rev REV` builds this same harness against that revision's
//! `crates/bough`, with the feature `baseline` and, when the revision's API differs, the
//! feature `baseline-<rev>` naming the shim module written for it). Everything else the
//! harness calls is the same in every supported revision, so the workloads are the same
//! code in both builds.

#[cfg(not(feature = "baseline-8e26e9c"))]
mod current;
#[cfg(not(feature = "baseline-8e26e9c"))]
pub use current::*;

#[cfg(feature = "baseline-8e26e9c")]
mod r8e26e9c;
#[cfg(feature = "baseline-8e26e9c")]
pub use r8e26e9c::*;

/// Which Bough this binary embeds: `None` for the tree it was built in, else the revision
/// xtask exported (set at build time by `cargo xtask bench --bough-rev`).
pub fn revision() -> Option<&'static str> {
    option_env!("BOUGH_BENCH_REV").filter(|r| !r.is_empty())
}

/// Up to `n` entries from `start` through `Branch::range`, each dropped as the next is
/// read: how a revision without `Branch::for_each_in` scans.
#[cfg(feature = "baseline")]
pub fn range_scan(main: &bough::Branch, start: &[u8], n: usize) -> bough::Result<usize> {
    let mut got = 0;
    for kv in main.range(start..).take(n) {
        std::hint::black_box(kv?);
        got += 1;
    }
    Ok(got)
}
