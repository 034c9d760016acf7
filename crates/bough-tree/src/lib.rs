//! Bough: page layouts and the copy-on-write B+tree over the page-mapping table.

// Library code returns errors, never panics on input (tests may unwrap).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

pub mod bounds;
pub mod btree;
pub mod buffer;
pub mod cache;
pub mod cache_only;
pub mod diff;
pub mod error;
pub mod files;
pub mod head;
pub mod key_order;
pub mod lazy_cells;
pub mod lww;
pub mod mapping;
pub mod page;
pub mod wal;
