//! Reads that may use cached pages only.
//!
//! An async read first runs on the caller's executor thread, where it must not wait for a
//! device or the network. Inside [`cache_only`], a read of this thread that would touch storage
//! (a page not in the cache, a data file not yet open) fails with [`IoError::NotCached`]
//! instead, and the caller runs the read again on a thread that may wait. Most warm reads are
//! answered from the cache on the first try, with no thread hand-off.

use crate::error::TreeResult;
use std::cell::Cell;

use bough_io::IoError;

thread_local! {
    static CACHE_ONLY: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` with this thread's storage reads refused (see the module docs).
pub fn cache_only<T>(f: impl FnOnce() -> T) -> T {
    /// Restores the previous setting even if `f` unwinds.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            CACHE_ONLY.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CACHE_ONLY.with(|c| c.replace(true)));
    f()
}

/// `Err(NotCached)` when this thread may only use cached pages: called before every storage
/// read and file open of the read path.
pub(crate) fn may_read_storage(path: &str) -> TreeResult<()> {
    if CACHE_ONLY.with(Cell::get) {
        return Err(IoError::NotCached { path: path.into() }.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_inside_and_restores_after() {
        assert!(may_read_storage("f").is_ok());
        let inside = cache_only(|| may_read_storage("f"));
        assert!(
            inside
                .as_ref()
                .is_err_and(crate::error::TreeError::is_not_cached),
            "{inside:?}"
        );
        let nested = cache_only(|| cache_only(|| 7));
        assert_eq!(nested, 7);
        assert!(
            may_read_storage("f").is_ok(),
            "a nested call restored the outer setting"
        );
        assert!(may_read_storage("f").is_ok());
        let unwound = std::panic::catch_unwind(|| cache_only(|| panic!("inside")));
        assert!(unwound.is_err());
        assert!(
            may_read_storage("f").is_ok(),
            "the setting outlived an unwind"
        );
    }
}
