//! Bough: page layouts and the copy-on-write B+tree over the page-mapping table.

pub mod bounds;
pub mod btree;
pub mod cache;
pub mod diff;
pub mod files;
pub mod head;
pub mod mapping;
pub mod page;
