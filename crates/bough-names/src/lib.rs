//! Bough: names of every file and directory the store writes, with nom parsers.
//!
//! Every name is produced by a `Display` impl and read back by a `parse`
//! function; on valid names the two are exact inverses, so a name found on
//! disk can be trusted to mean exactly one thing. [`classify`] sorts any
//! directory entry into a [`FileKind`] and never fails.
//!
//! # Grammar
//!
//! ```text
//! number        = "0" | [1-9] [0-9]*          ; canonical decimal, fits the field type
//! term, file-id, log-id, timestamp, nonce, version = number ; u64
//! partition-id  = number                      ; u32
//!
//! word          = [a-zA-Z0-9-]+               ; with at least one non-digit
//! branch        = word ("_" word)*            ; 1..=64 bytes; case variants of "main" other
//!                                             ; than "main" itself are refused
//! table         = [a-zA-Z0-9_.-]{1,128}       ; no leading/trailing ".", no ".."
//!
//! manifest      = "manifest_" branch "_" term
//! archive       = "manifest_" branch "_" term "_" timestamp
//! data          = "data_" file-id "_" branch "_" term
//! log           = "wal_" log-id "_" branch "_" term
//! history       = "history_" number "_" branch "_" term ; a history point
//! current-term  = "CURRENT_TERM." branch
//! tag           = "tag_" branch              ; a tag's name follows the branch grammar
//! table-op      = "tableop_" number ["_end"]  ; store root: a table-wide branch operation's
//!                                             ; intent record, or its outcome record
//! tmp           = (manifest | archive | history | data | current-term | tag | table-op) "." nonce ".tmp"
//! lock          = "LOCK"
//! gc-lease      = "GC_LEASE"                  ; object stores only
//! version       = (manifest | current-term | gc-lease) ".v" number
//!                                             ; object stores without If-Match only
//! partition-dir = table "." partition-id      ; split at the last "."
//! ```
//!
//! # Why branch segments cannot be numeric
//!
//! The branch sits between `_`-separated numbers and may itself contain `_`.
//! If a branch could contain an all-digit segment, `manifest_v_1_2` could be
//! branch `v_1` at term 2 or branch `v` at term 1 archived at 2. Since no
//! segment of a branch is empty or all digits, the first all-digit segment
//! after the prefix (or after the file id) always ends the branch, and the
//! number of trailing numbers decides the kind. Canonical numbers make the
//! spelling of every value unique, so formatting a parsed name gives back the
//! same bytes.
//!
//! Branch names contain no `.`, so the first `.` after a target name starts
//! the `.<nonce>.tmp` suffix of a temporary file or the `.v<number>` suffix of
//! a version (a nonce starts with a digit, a version with `v`).
//!
//! # Example
//!
//! ```
//! use bough_names::{BranchName, DataFileName, FileKind, TmpName, classify};
//!
//! let data = DataFileName::new(10, BranchName::new("feature")?, 5);
//! assert_eq!(data.to_string(), "data_10_feature_5");
//! assert_eq!(classify("data_10_feature_5"), FileKind::Data(data.clone()));
//!
//! // Written under a temporary name, then renamed onto the target.
//! let tmp = TmpName::new(data, 7);
//! assert_eq!(tmp.to_string(), "data_10_feature_5.7.tmp");
//!
//! // Malformed store names are never mistaken for data (and are logged).
//! assert_eq!(classify("data_abc_5"), FileKind::Unknown("data_abc_5".into()));
//! # Ok::<(), bough_names::NameError>(())
//! ```
//!
//! The on-disk format reference is `docs/format.md ("File and directory names")`.

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
#![forbid(unsafe_code)]

mod classify;
mod grammar;
mod ident;
mod names;

pub use classify::{
    FileKind, classify, classify_dir, is_branch_archive, is_branch_data_file,
    is_branch_history_point, is_branch_log_file, is_branch_manifest, parse_file_name,
};
pub use grammar::{NameKind, NameParseError, NumberError, ParseFailure};
pub use ident::{
    BranchName, IdentKind, MAIN_BRANCH, MAX_BRANCH_LEN, MAX_TABLE_LEN, NameError, TableName,
    alias_of,
};
pub use names::{
    ArchiveName, CurrentTermName, DataFileName, HistoryName, LogFileName, ManifestName,
    PartitionDir, TableOpName, TableOpPart, TagFileName, TmpName, TmpTarget, TornTailName,
    VersionName, VersionTarget,
};

/// Term of a writer on a branch; grows each time a new writer takes over.
pub type Term = u64;
/// Id of a data file, allocated per branch.
pub type FileId = u64;
/// Id of a write-ahead log file, allocated per branch incarnation; grows, never reused.
pub type LogId = u64;
/// Partition of a table.
pub type PartitionId = u32;
/// Timestamp of a manifest archive.
pub type Timestamp = u64;

/// Name of the store lock file in the store root.
pub const LOCK_FILE: &str = "LOCK";
/// Prefix of manifest and archive names.
pub const MANIFEST_PREFIX: &str = "manifest_";
/// Prefix of data file names.
pub const DATA_PREFIX: &str = "data_";
/// Prefix of write-ahead log file names.
pub const LOG_PREFIX: &str = "wal_";
/// Prefix of history point names.
pub const HISTORY_PREFIX: &str = "history_";
/// Prefix of tag file names.
pub const TAG_PREFIX: &str = "tag_";
/// Prefix of CURRENT_TERM file names.
pub const CURRENT_TERM_PREFIX: &str = "CURRENT_TERM.";
/// Prefix of table-wide branch operation records in the store root (`tableop_<seq>`,
/// `tableop_<seq>_end`).
pub const TABLE_OP_PREFIX: &str = "tableop_";
/// What follows the sequence number in the name of a table-wide operation's outcome record.
pub const TABLE_OP_END_SUFFIX: &str = "_end";
/// Suffix of temporary file names.
pub const TMP_SUFFIX: &str = ".tmp";
/// Name of a partition's garbage-collection lease (object stores only).
pub const GC_LEASE_FILE: &str = "GC_LEASE";
/// What separates a target from its version number in a version name (`<target>.v<n>`).
pub const VERSION_INFIX: &str = ".v";
/// What separates a manifest's name from the offset in a kept-aside torn tail's name
/// (`<manifest>.torn.<offset>.<n>`).
pub const TORN_INFIX: &str = ".torn.";
