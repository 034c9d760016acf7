//! Bough: the manifest format (snapshot + log records, `CURRENT_TERM`, branch file ranges).
//!
//! This crate does no I/O: it turns structures into bytes and bytes (from anywhere, trusted
//! or not) back into structures, failing with a typed error that names the offset.

pub mod checksum;
pub mod varint;
