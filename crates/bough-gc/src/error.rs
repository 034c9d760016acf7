//! GC's error: one variant per cause, naming the file whose bytes (or state) stopped the
//! walk, wrapping the tree layer's [`TreeError`] and the I/O layer's [`IoError`]. Any error
//! stops a collection before it deletes anything.

use std::fmt;

use bough_io::{ErrorKind, IoError};
use bough_manifest::DecodeError;
use bough_tree::error::TreeError;

/// An error of garbage collection (the marking walk, the sweep).
#[derive(Debug)]
#[non_exhaustive]
pub enum GcError {
    /// Storage failed (listing, reading, deleting).
    Io(IoError),
    /// Reading a page through the tree layer failed.
    Tree(TreeError),
    /// A record of `file` (a manifest, an archive, `CURRENT_TERM`) does not decode; the
    /// offset is the record's.
    Record { file: String, source: DecodeError },
    /// The mapping page at `offset` of data file `file` is not what the walk requires.
    Page {
        file: String,
        offset: u64,
        what: String,
    },
    /// The state `file` (a manifest or archive) records is impossible: a slot that is no
    /// slot, a page in a file no range covers, merge bases that do not parse, a term whose
    /// manifest is gone. The walk does not know which record said it.
    State { file: String, what: String },
}

impl GcError {
    /// The public kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            GcError::Io(e) => e.kind(),
            GcError::Tree(e) => e.kind(),
            GcError::Record { .. } | GcError::Page { .. } | GcError::State { .. } => {
                ErrorKind::Corruption
            }
        }
    }

    /// The file and offset the error names, when it names one.
    pub fn location(&self) -> Option<(&str, u64)> {
        match self {
            GcError::Io(IoError::Corruption { path, offset, .. }) => Some((path, *offset)),
            GcError::Tree(e) => e.location(),
            GcError::Record { file, source } => Some((file, source.offset)),
            GcError::Page { file, offset, .. } => Some((file, *offset)),
            GcError::State { file, .. } => Some((file, 0)),
            GcError::Io(_) => None,
        }
    }
}

impl fmt::Display for GcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GcError::Io(e) => e.fmt(f),
            GcError::Tree(e) => e.fmt(f),
            // The record's offset once (DecodeError's own Display says it too).
            GcError::Record { file, source } => write!(
                f,
                "corruption in {file} at offset {}: {}",
                source.offset, source.reason
            ),
            GcError::Page { file, offset, what } => {
                write!(f, "corruption in {file} at offset {offset}: {what}")
            }
            GcError::State { file, what } => write!(f, "corruption in {file}: {what}"),
        }
    }
}

impl std::error::Error for GcError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GcError::Io(e) => Some(e),
            GcError::Tree(e) => Some(e),
            GcError::Record { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<IoError> for GcError {
    fn from(e: IoError) -> Self {
        GcError::Io(e)
    }
}

impl From<TreeError> for GcError {
    fn from(e: TreeError) -> Self {
        GcError::Tree(e)
    }
}

/// For tools that report every layer's storage errors alike (the reliability harness):
/// the same kind, file and offset, the cause as text.
impl From<GcError> for IoError {
    fn from(e: GcError) -> Self {
        match e {
            GcError::Io(e) => e,
            GcError::Tree(e) => e.into(),
            GcError::Record { file, source } => {
                IoError::corruption(file, source.offset, source.reason.to_string())
            }
            GcError::Page { file, offset, what } => IoError::Corruption {
                path: file,
                offset,
                reason: what,
            },
            GcError::State { file, what } => IoError::corruption(file, 0, what),
        }
    }
}

/// Result of garbage collection.
pub type GcResult<T> = Result<T, GcError>;
