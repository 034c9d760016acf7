//! The facade's error: a small public [`ErrorKind`] plus what the error concerns.

use std::fmt;

pub use bough_io::ErrorKind;
use bough_io::IoError;
use bough_names::NameError;

/// An error from the store, naming the partition and branch it concerns when there is one.
///
/// ```
/// use bough::{ErrorKind, Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let e = store.partition("t", 0)?.branch("nosuch").unwrap_err();
/// assert_eq!(e.kind(), ErrorKind::NotFound);
/// assert!(!e.is_retryable());
/// assert!(e.to_string().contains("t.0@nosuch"), "{e}");
/// # Ok::<(), bough::Error>(())
/// ```
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    target: Option<String>,
    detail: Detail,
}

#[derive(Debug)]
enum Detail {
    Io(IoError),
    Name(NameError),
    Message(String),
}

impl Error {
    /// What the caller can do about it.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Whether retrying later may succeed.
    pub fn is_retryable(&self) -> bool {
        self.kind.is_retryable()
    }

    /// The `table.partition@branch` (or other object) the error concerns.
    pub fn target(&self) -> Option<&str> {
        self.target.as_deref()
    }

    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            target: None,
            detail: Detail::Message(message.into()),
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    /// Whether a read allowed cached pages only needed storage (`bough_tree::cache_only`).
    pub(crate) fn is_not_cached(&self) -> bool {
        matches!(self.detail, Detail::Io(IoError::NotCached { .. }))
    }

    pub(crate) fn closed() -> Self {
        Error::new(ErrorKind::Closed, "the store is closed")
    }

    /// Names the object the error concerns (kept if already set).
    pub(crate) fn at(mut self, target: impl fmt::Display) -> Self {
        if self.target.is_none() {
            self.target = Some(target.to_string());
        }
        self
    }

    /// A copy for delivering one failure to several waiters (a group commit).
    pub(crate) fn duplicate(&self) -> Self {
        Error {
            kind: self.kind,
            target: self.target.clone(),
            detail: Detail::Message(match &self.detail {
                Detail::Io(e) => e.to_string(),
                Detail::Name(e) => e.to_string(),
                Detail::Message(m) => m.clone(),
            }),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let detail = match &self.detail {
            Detail::Io(e) => e.to_string(),
            Detail::Name(e) => e.to_string(),
            Detail::Message(m) => m.clone(),
        };
        // A lower layer may already have named the same object ("t.0@b: already exists"):
        // it is said once.
        if let Some(t) = &self.target
            && !detail
                .strip_prefix(t.as_str())
                .is_some_and(|rest| rest.starts_with(':'))
        {
            write!(f, "{t}: ")?;
        }
        f.write_str(&detail)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.detail {
            Detail::Io(e) => Some(e),
            Detail::Name(e) => Some(e),
            Detail::Message(_) => None,
        }
    }
}

impl From<IoError> for Error {
    fn from(e: IoError) -> Self {
        Error {
            kind: e.kind(),
            target: None,
            detail: Detail::Io(e),
        }
    }
}

impl From<NameError> for Error {
    fn from(e: NameError) -> Self {
        Error {
            kind: ErrorKind::InvalidArgument,
            target: None,
            detail: Detail::Name(e),
        }
    }
}

/// Result of store operations.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    /// `bough branch create feature t.0` twice said "t.0@feature: t.0@feature: already
    /// exists": the target is not repeated when the lower layer's message starts with it.
    #[test]
    fn regression_the_target_is_named_once() {
        let e = Error::from(IoError::AlreadyExists {
            path: "t.0@feature".into(),
        })
        .at("t.0@feature");
        assert_eq!(e.to_string(), "t.0@feature: already exists");
        let e = Error::invalid("bad key").at("t.0@main");
        assert_eq!(e.to_string(), "t.0@main: bad key");
        // A different object in the message keeps the target in front of it.
        let e = Error::from(IoError::AlreadyExists {
            path: "t.0@feature-x".into(),
        })
        .at("t.0@feature");
        assert_eq!(e.to_string(), "t.0@feature: t.0@feature-x: already exists");
    }
}
