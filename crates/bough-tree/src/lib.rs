//! Bough: page layouts and the copy-on-write B+tree over the page-mapping table
