//! The catalog's error: one variant per cause, naming the branch, archive or file it
//! concerns, wrapping the tree layer's [`TreeError`] and the I/O layer's [`IoError`].

use std::fmt;

use bough_io::{ErrorKind, IoError};
use bough_manifest::DecodeError;
use bough_tree::error::TreeError;

/// An error of the catalog (a partition's branches, terms, archives, merges).
#[derive(Debug)]
#[non_exhaustive]
pub enum CatalogError {
    /// Storage failed.
    Io(IoError),
    /// A branch head failed (its pages, its manifest, its commit).
    Tree(TreeError),
    /// The partition, branch (`t.0@b`) or archive does not exist.
    NotFound { path: String },
    /// The branch (or archive) to create exists already.
    AlreadyExists { path: String },
    /// No state of `branch` at instant `at_ms` is kept: the instant is outside the history
    /// window, in the future, before the branch existed, or before its history began.
    HistoryNotKept {
        branch: String,
        at_ms: u64,
        why: String,
    },
    /// The caller asked for something impossible (a name, a term past the last, a merge
    /// of a branch with itself).
    InvalidArgument { what: String },
    /// A record of `file` (a manifest, an archive, `CURRENT_TERM`) does not decode; the
    /// offset is the record's.
    Record { file: String, source: DecodeError },
    /// `file` decodes but holds something impossible at `offset` (a malformed extension,
    /// a term's manifest missing, merge bases that do not parse).
    Content {
        file: String,
        offset: u64,
        what: String,
    },
}

impl CatalogError {
    /// The public kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CatalogError::Io(e) => e.kind(),
            CatalogError::Tree(e) => e.kind(),
            CatalogError::NotFound { .. } | CatalogError::HistoryNotKept { .. } => {
                ErrorKind::NotFound
            }
            CatalogError::AlreadyExists { .. } => ErrorKind::AlreadyExists,
            CatalogError::InvalidArgument { .. } => ErrorKind::InvalidArgument,
            CatalogError::Record { .. } | CatalogError::Content { .. } => ErrorKind::Corruption,
        }
    }

    /// `file` holds something impossible at `offset`.
    pub fn corruption(file: impl Into<String>, offset: u64, what: impl Into<String>) -> Self {
        CatalogError::Content {
            file: file.into(),
            offset,
            what: what.into(),
        }
    }

    /// The record at `source.offset` of `file` does not decode.
    pub fn record(file: impl Into<String>, source: DecodeError) -> Self {
        CatalogError::Record {
            file: file.into(),
            source,
        }
    }

    /// The tree layer's error inside, if this is one.
    pub fn tree(&self) -> Option<&TreeError> {
        match self {
            CatalogError::Tree(e) => Some(e),
            _ => None,
        }
    }

    /// Whether a read allowed cached pages only needed storage.
    pub fn is_not_cached(&self) -> bool {
        match self {
            CatalogError::Io(e) => matches!(e, IoError::NotCached { .. }),
            CatalogError::Tree(e) => e.is_not_cached(),
            _ => false,
        }
    }
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CatalogError::Io(e) => e.fmt(f),
            CatalogError::Tree(e) => e.fmt(f),
            CatalogError::NotFound { path } => write!(f, "{path}: not found"),
            CatalogError::AlreadyExists { path } => write!(f, "{path}: already exists"),
            CatalogError::InvalidArgument { what } => write!(f, "invalid argument: {what}"),
            CatalogError::HistoryNotKept { branch, at_ms, why } => {
                write!(f, "no state of {branch} at {at_ms} ms is kept: {why}")
            }
            // The record's offset once (DecodeError's own Display says it too).
            CatalogError::Record { file, source } => write!(
                f,
                "corruption in {file} at offset {}: {}",
                source.offset, source.reason
            ),
            CatalogError::Content { file, offset, what } => {
                write!(f, "corruption in {file} at offset {offset}: {what}")
            }
        }
    }
}

impl std::error::Error for CatalogError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CatalogError::Io(e) => Some(e),
            CatalogError::Tree(e) => Some(e),
            CatalogError::Record { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<IoError> for CatalogError {
    fn from(e: IoError) -> Self {
        CatalogError::Io(e)
    }
}

impl From<TreeError> for CatalogError {
    fn from(e: TreeError) -> Self {
        CatalogError::Tree(e)
    }
}

/// For tools that report every layer's storage errors alike (the reliability harness):
/// the same kind, file and offset, the cause as text.
impl From<CatalogError> for IoError {
    fn from(e: CatalogError) -> Self {
        match e {
            CatalogError::Io(e) => e,
            CatalogError::Tree(e) => e.into(),
            CatalogError::NotFound { path } => IoError::NotFound { path },
            CatalogError::AlreadyExists { path } => IoError::AlreadyExists { path },
            CatalogError::InvalidArgument { what } => IoError::InvalidArgument { what },
            e @ CatalogError::HistoryNotKept { .. } => IoError::NotFound {
                path: e.to_string(),
            },
            CatalogError::Record { file, source } => {
                IoError::corruption(file, source.offset, source.reason.to_string())
            }
            CatalogError::Content { file, offset, what } => IoError::Corruption {
                path: file,
                offset,
                reason: what,
            },
        }
    }
}

/// Result of the catalog.
pub type CatalogResult<T> = Result<T, CatalogError>;
