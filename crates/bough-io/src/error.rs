//! Errors of the I/O layer, and the small public [`ErrorKind`] every Bough error maps to.

use std::fmt;

/// What a caller can do about an error. Small on purpose: match on this, log the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The caller passed something invalid (a name, a key, an option).
    InvalidArgument,
    /// The partition, branch, file or archive does not exist.
    NotFound,
    /// Something that must be new exists already.
    AlreadyExists,
    /// Bytes read from storage failed validation. Never retried: the data is bad.
    Corruption,
    /// The operating system or the object store failed.
    Io,
    /// The device or bucket is out of space; writes may resume once space is freed.
    NoSpace,
    /// Temporarily unable (a lock held, a queue full, a throttled request): retry later.
    Busy,
    /// A newer owner (term) took over this branch; this handle must stop writing.
    Fenced,
    /// The store or handle was closed.
    Closed,
    /// An earlier durability failure (a failed fsync) poisoned the instance; reopen it.
    Poisoned,
}

impl ErrorKind {
    /// Whether retrying the same call later may succeed.
    pub fn is_retryable(self) -> bool {
        matches!(self, ErrorKind::Busy | ErrorKind::NoSpace)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            ErrorKind::InvalidArgument => "invalid argument",
            ErrorKind::NotFound => "not found",
            ErrorKind::AlreadyExists => "already exists",
            ErrorKind::Corruption => "corruption",
            ErrorKind::Io => "I/O error",
            ErrorKind::NoSpace => "no space",
            ErrorKind::Busy => "busy",
            ErrorKind::Fenced => "fenced",
            ErrorKind::Closed => "closed",
            ErrorKind::Poisoned => "poisoned",
        };
        f.write_str(s)
    }
}

/// An error of the I/O layer, with the path (and offset) it concerns.
#[derive(Debug)]
pub enum IoError {
    /// The OS failed an operation on `path`.
    Os {
        op: &'static str,
        path: String,
        source: std::io::Error,
    },
    /// Bytes at `path`/`offset` failed validation.
    Corruption {
        path: String,
        offset: u64,
        reason: String,
    },
    /// `path` does not exist.
    NotFound { path: String },
    /// `path` exists and was required not to.
    AlreadyExists { path: String },
    /// A previous sync failed; the instance refuses durable work until reopened.
    Poisoned { cause: String },
    /// Another open handle (in this process or another) holds the store directory.
    Locked { path: String },
    /// The store lock was still held by another handle after waiting `waited_ms`.
    LockTimeout { path: String, waited_ms: u64 },
    /// A read-only storage instance was asked to change something.
    ReadOnly { op: &'static str, path: String },
    /// The caller asked for something the backend cannot do.
    Unsupported { what: String },
    /// An argument was invalid.
    InvalidArgument { what: String },
    /// A newer term took over `what`; this writer must stop.
    Fenced { what: String },
    /// A read allowed to use cached pages only (an async read's first try, on the caller's
    /// executor thread) needed `path` from storage; the caller retries it off that thread.
    NotCached { path: String },
}

impl IoError {
    /// The public kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            IoError::Os { source, .. } => match source.raw_os_error() {
                Some(libc::ENOSPC) | Some(libc::EDQUOT) => ErrorKind::NoSpace,
                _ => match source.kind() {
                    std::io::ErrorKind::NotFound => ErrorKind::NotFound,
                    std::io::ErrorKind::AlreadyExists => ErrorKind::AlreadyExists,
                    std::io::ErrorKind::StorageFull => ErrorKind::NoSpace,
                    _ => ErrorKind::Io,
                },
            },
            IoError::Corruption { .. } => ErrorKind::Corruption,
            IoError::NotFound { .. } => ErrorKind::NotFound,
            IoError::AlreadyExists { .. } => ErrorKind::AlreadyExists,
            IoError::Poisoned { .. } => ErrorKind::Poisoned,
            IoError::Locked { .. } | IoError::LockTimeout { .. } => ErrorKind::Busy,
            IoError::ReadOnly { .. } => ErrorKind::InvalidArgument,
            IoError::Unsupported { .. } | IoError::InvalidArgument { .. } => {
                ErrorKind::InvalidArgument
            }
            IoError::Fenced { .. } => ErrorKind::Fenced,
            IoError::NotCached { .. } => ErrorKind::Busy,
        }
    }

    /// Shorthand for an OS error.
    pub fn os(op: &'static str, path: impl Into<String>, source: std::io::Error) -> Self {
        IoError::Os {
            op,
            path: path.into(),
            source,
        }
    }

    /// Shorthand for an OS error from a raw `errno`.
    pub fn errno(op: &'static str, path: impl Into<String>, errno: i32) -> Self {
        IoError::os(op, path, std::io::Error::from_raw_os_error(errno))
    }

    /// The error of a read that reached the end of the file before filling its buffer.
    pub fn unexpected_eof(path: impl Into<String>) -> Self {
        IoError::os(
            "read",
            path,
            std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "read past the end of the file",
            ),
        )
    }

    /// Whether this is a read that reached the end of the file early.
    pub fn is_unexpected_eof(&self) -> bool {
        matches!(self, IoError::Os { source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof)
    }

    /// The `errno` of an OS error, if it has one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            IoError::Os { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    /// Shorthand for a corruption error.
    pub fn corruption(path: impl Into<String>, offset: u64, reason: impl Into<String>) -> Self {
        IoError::Corruption {
            path: path.into(),
            offset,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IoError::Os { op, path, source } => write!(f, "{op} {path}: {source}"),
            IoError::Corruption {
                path,
                offset,
                reason,
            } => write!(f, "corruption in {path} at offset {offset}: {reason}"),
            IoError::NotFound { path } => write!(f, "{path}: not found"),
            IoError::AlreadyExists { path } => write!(f, "{path}: already exists"),
            IoError::Poisoned { cause } => write!(
                f,
                "storage poisoned by an earlier sync failure ({cause}); reopen the store"
            ),
            IoError::Locked { path } => {
                write!(f, "{path} is locked: the store is open elsewhere")
            }
            IoError::LockTimeout { path, waited_ms } => write!(
                f,
                "{path} is still locked after waiting {waited_ms} ms: another process has \
                 the store open for writing"
            ),
            IoError::ReadOnly { op, path } => {
                write!(f, "cannot {op} {path}: the store is open read-only")
            }
            IoError::Unsupported { what } => write!(f, "unsupported: {what}"),
            IoError::InvalidArgument { what } => write!(f, "invalid argument: {what}"),
            IoError::Fenced { what } => write!(f, "fenced: {what}"),
            IoError::NotCached { path } => {
                write!(
                    f,
                    "{path}: not cached, and this read may not wait for storage"
                )
            }
        }
    }
}

impl std::error::Error for IoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            IoError::Os { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Result of the I/O layer.
pub type IoResult<T> = Result<T, IoError>;
