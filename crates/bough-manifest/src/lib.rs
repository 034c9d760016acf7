//! Bough: the manifest format (snapshot + log records, `CURRENT_TERM`, branch file ranges).
//!
//! This crate does no I/O: it turns structures into bytes and bytes (from anywhere, trusted
//! or not) back into structures, failing with a typed error that names the offset. The
//! byte-level format is documented in `docs/format.md ("Manifest format")`.
//!
//! - A manifest file is a [`Snapshot`] record at offset 0 followed by [`LogRecord`]s, each
//!   starting on a [`BLOCK_SIZE`] boundary: [`encode_snapshot`], [`encode_log`],
//!   [`decode_record`], [`replay`] → [`Replayed`] / [`ManifestState`].
//! - An archive file is a single snapshot record.
//! - `CURRENT_TERM.<branch>` holds a [`CurrentTerm`].
//! - [`BranchFileMapping`] answers which (branch, term) allocated a file id.
//! - [`PageAddr`] packs a page's physical location; [`PageId`] is a logical page id.
//! - A write-ahead log file holds [`LogEntry`] records ([`encode_log_entry`],
//!   [`decode_log_entry`], [`replay_log`]); the `LOG` extension ([`LogRef`]) names the part
//!   of it a branch's state still needs.
//! - A branch's commit version survives manifest rewrites: [`commit_version`] ([`VERSION`]).

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

pub mod checksum;
mod codec;
mod current_term;
mod error;
pub mod ext;
mod history;
mod incarnation;
pub mod invariants;
mod log;
mod log_ref;
mod log_replay;
mod origin;
mod page;
mod policy;
mod ranges;
mod record;
mod replay;
mod salvage;
mod staging;
mod table_op;
pub mod varint;
mod version;

pub use bough_names::{BranchName, FileId, Term};
pub use current_term::{
    CURRENT_TERM_LEN, CURRENT_TERM_V2_LEN, CURRENT_TERM_VERSION, CurrentTerm, ExpiryHint,
    FLAG_DELETED, FLAG_EXPIRY_HINT,
};
pub use error::{DecodeError, DecodeReason, EncodeError};
pub use ext::LOG;
pub use history::{HISTORY, HistoryStamp, history_stamp, set_history_stamp};
pub use incarnation::{INCARNATION, incarnation, set_incarnation};
pub use log::{
    LOG_BLOCK, LOG_HEADER_LEN, LOG_MAGIC, LOG_VERSION, LOG_VERSION_SYNCED, LogEntry, LogEntryRef,
    LogHeader, LogMutation, LogMutationRef, LogOp, LogOpRef, LogRecordKind, LogSalt, MAX_LOG_BODY,
    decode_log_entry, decode_log_record, encode_log_entry, encode_log_record,
    encode_log_record_ref, log_record_is_intact, log_record_len,
};
pub use log_ref::{LogRef, decode_log_refs, encode_log_refs, inherited_only, log_refs};
pub use log_replay::{LogReplayed, LoggedRecord, replay_log};
pub use origin::{
    BranchOrigin, MERGE_BASES, MergeBase, ORIGIN, decode_merge_bases, encode_merge_bases,
    merge_bases,
};
pub use page::{
    FREE_SLOT_BIT, MAX_ADDR_FILE_ID, MAX_PAGE_INDEX, NO_PAGE, PAGE_INDEX_BITS, PageAddr, PageId,
    slot_is_valid,
};
pub use policy::{BranchPolicy, POLICY};
pub use ranges::{BranchFileMapping, BranchFileRange, RangeError};
pub use record::{
    BLOCK_SIZE, FORMAT_VERSION, HEADER_LEN, LogRecord, MAX_DICT_LEN, MAX_PAGE_SIZE,
    MAX_RECORD_PAYLOAD, MIN_PAGE_SIZE, ManifestMetadata, Record, RecordHeader, RecordKind,
    Snapshot, decode_record, encode_log, encode_snapshot, record_len,
};
pub use replay::{ManifestState, Replayed, dropped_tail_finding, replay};
pub use salvage::{Salvaged, salvage};
pub use staging::{MAX_STAGING_LEN, STAGING, set_staging, staging_purpose};
pub use table_op::{
    MAX_TABLE_OP_BODY, MAX_TABLE_OP_DETAIL, TABLE_OP_HEADER_LEN, TABLE_OP_MAGIC, TABLE_OP_VERSION,
    TableOpIntent, TableOpKind, TableOpOutcome, TableOpRecord, TableOpResult, decode_table_op,
};
pub use version::{VERSION, commit_version, decode_version, encode_version, set_commit_version};
