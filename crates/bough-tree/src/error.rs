//! The tree layer's error: one variant per cause, each naming the file (and the offset in it)
//! whose bytes failed, wrapping the I/O layer's [`IoError`] for everything storage reports.

use std::fmt;

use bough_io::{ErrorKind, IoError};
use bough_manifest::{DecodeError, PageId};

/// Where a page lives: its data file and the page's byte offset in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The data file (its path in the store's storage).
    pub file: String,
    /// The page's first byte in that file.
    pub offset: u64,
}

/// An error of the tree layer (pages, the mapping table, a branch head).
#[derive(Debug)]
#[non_exhaustive]
pub enum TreeError {
    /// Storage failed (or the I/O layer refused a page frame: its checksum, its header).
    Io(IoError),
    /// A page read from `file` at `offset` (tree, overflow or mapping page) is not what the
    /// structure that reached it requires.
    Page {
        file: String,
        offset: u64,
        what: String,
    },
    /// A data file the manifest names cannot serve its pages: missing, another
    /// incarnation's, another page size, or a file id outside every range.
    DataFile { file: String, what: String },
    /// A manifest (or log) record does not decode; the offset is the record's.
    Manifest { file: String, source: DecodeError },
    /// A manifest decodes but says something impossible (an extension that does not parse,
    /// another branch's name, an end that is not where its writer left it).
    ManifestContent {
        file: String,
        offset: u64,
        what: String,
    },
    /// Logical page `page` is reached but its mapping slot does not hold a page: `at` is the
    /// mapping page holding the slot, `None` when the slot changed since the last
    /// checkpoint (the manifest's log holds it).
    Slot {
        page: PageId,
        what: String,
        at: Option<Location>,
    },
    /// The caller passed something invalid (a key, a batch, a snapshot to adopt).
    InvalidArgument { what: String },
    /// A newer term took over the branch; this writer must stop.
    Fenced { what: String },
    /// An earlier durability failure poisoned the head; it refuses durable work.
    Poisoned { cause: String },
}

impl TreeError {
    /// The public kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            TreeError::Io(e) => e.kind(),
            TreeError::Page { .. }
            | TreeError::DataFile { .. }
            | TreeError::Manifest { .. }
            | TreeError::ManifestContent { .. }
            | TreeError::Slot { .. } => ErrorKind::Corruption,
            TreeError::InvalidArgument { .. } => ErrorKind::InvalidArgument,
            TreeError::Fenced { .. } => ErrorKind::Fenced,
            TreeError::Poisoned { .. } => ErrorKind::Poisoned,
        }
    }

    /// A page at `offset` of `file` failed validation.
    pub fn corruption(file: impl Into<String>, offset: u64, what: impl Into<String>) -> Self {
        TreeError::Page {
            file: file.into(),
            offset,
            what: what.into(),
        }
    }

    /// The manifest record at `source.offset` of `file` does not decode.
    pub fn manifest(file: impl Into<String>, source: DecodeError) -> Self {
        TreeError::Manifest {
            file: file.into(),
            source,
        }
    }

    /// The manifest `file` holds something impossible at `offset`.
    pub fn manifest_content(file: impl Into<String>, offset: u64, what: impl Into<String>) -> Self {
        TreeError::ManifestContent {
            file: file.into(),
            offset,
            what: what.into(),
        }
    }

    /// The storage error inside, if this is one.
    pub fn io(&self) -> Option<&IoError> {
        match self {
            TreeError::Io(e) => Some(e),
            _ => None,
        }
    }

    /// Whether a read allowed cached pages only needed storage ([`crate::cache_only`]).
    pub fn is_not_cached(&self) -> bool {
        matches!(self, TreeError::Io(IoError::NotCached { .. }))
    }

    /// The file and offset the error names, when it names one.
    pub fn location(&self) -> Option<(&str, u64)> {
        match self {
            TreeError::Io(IoError::Corruption { path, offset, .. }) => Some((path, *offset)),
            TreeError::Page { file, offset, .. }
            | TreeError::ManifestContent { file, offset, .. } => Some((file, *offset)),
            TreeError::Slot { at: Some(at), .. } => Some((&at.file, at.offset)),
            TreeError::DataFile { file, .. } => Some((file, 0)),
            TreeError::Manifest { file, source } => Some((file, source.offset)),
            _ => None,
        }
    }
}

impl fmt::Display for TreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TreeError::Io(e) => e.fmt(f),
            TreeError::Page { file, offset, what }
            | TreeError::ManifestContent { file, offset, what } => {
                write!(f, "corruption in {file} at offset {offset}: {what}")
            }
            TreeError::DataFile { file, what } => write!(f, "corruption in {file}: {what}"),
            // The record's offset once (DecodeError's own Display says it too).
            TreeError::Manifest { file, source } => write!(
                f,
                "corruption in {file} at offset {}: {}",
                source.offset, source.reason
            ),
            TreeError::Slot { page, what, at } => {
                write!(
                    f,
                    "logical page {page} is referenced but its mapping slot {what}"
                )?;
                match at {
                    Some(at) => write!(f, " (mapping page at offset {} of {})", at.offset, at.file),
                    None => f.write_str(" (changed since the last checkpoint)"),
                }
            }
            TreeError::InvalidArgument { what } => write!(f, "invalid argument: {what}"),
            TreeError::Fenced { what } => write!(f, "fenced: {what}"),
            TreeError::Poisoned { cause } => write!(
                f,
                "storage poisoned by an earlier sync failure ({cause}); reopen the store"
            ),
        }
    }
}

impl std::error::Error for TreeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TreeError::Io(e) => Some(e),
            TreeError::Manifest { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<IoError> for TreeError {
    fn from(e: IoError) -> Self {
        TreeError::Io(e)
    }
}

/// For tools that report every layer's storage errors alike (the CLI's file walk, the
/// reliability harness's checker): the same kind, file and offset, the cause as text.
impl From<TreeError> for IoError {
    fn from(e: TreeError) -> Self {
        let kind = e.kind();
        match e {
            TreeError::Io(e) => e,
            TreeError::InvalidArgument { what } => IoError::InvalidArgument { what },
            TreeError::Fenced { what } => IoError::Fenced { what },
            TreeError::Poisoned { cause } => IoError::Poisoned { cause },
            TreeError::Page { file, offset, what }
            | TreeError::ManifestContent { file, offset, what } => IoError::Corruption {
                path: file,
                offset,
                reason: what,
            },
            TreeError::DataFile { file, what } => IoError::corruption(file, 0, what),
            TreeError::Manifest { file, source } => {
                IoError::corruption(file, source.offset, source.reason.to_string())
            }
            other => {
                debug_assert_eq!(kind, ErrorKind::Corruption);
                let (file, offset) = other
                    .location()
                    .map_or((String::new(), 0), |(f, o)| (f.to_string(), o));
                let what = other.to_string();
                IoError::corruption(file, offset, what)
            }
        }
    }
}

/// Result of the tree layer.
pub type TreeResult<T> = Result<T, TreeError>;
