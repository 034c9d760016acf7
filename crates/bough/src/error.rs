//! The facade's error: a small public [`ErrorKind`] plus what the error concerns.

use std::fmt;

use bough_catalog::error::CatalogError;
use bough_gc::error::GcError;
/// The coarse kind of an error, and whether retrying can help.
///
/// ```
/// use bough::{ErrorKind, Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// let err = orders.branch("no-such-branch").unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::NotFound);
/// assert!(!err.is_retryable());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_io::ErrorKind;
use bough_io::IoError;
use bough_names::NameError;
use bough_tree::error::TreeError;

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

/// The lower layer's error, kept whole (`source()` reaches it); each layer's `kind()` is
/// what the public kind is, mapped in the `From`s below (the one place).
#[derive(Debug)]
enum Detail {
    Io(IoError),
    Tree(TreeError),
    Catalog(CatalogError),
    Gc(GcError),
    Name(NameError),
    Message(String),
}

impl Detail {
    fn as_error(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Detail::Io(e) => Some(e),
            Detail::Tree(e) => Some(e),
            Detail::Catalog(e) => Some(e),
            Detail::Gc(e) => Some(e),
            Detail::Name(e) => Some(e),
            Detail::Message(_) => None,
        }
    }

    fn text(&self) -> String {
        match (self, self.as_error()) {
            (Detail::Message(m), _) => m.clone(),
            (_, Some(e)) => e.to_string(),
            (_, None) => String::new(),
        }
    }
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
        match &self.detail {
            Detail::Io(e) => matches!(e, IoError::NotCached { .. }),
            Detail::Tree(e) => e.is_not_cached(),
            Detail::Catalog(e) => e.is_not_cached(),
            Detail::Gc(GcError::Tree(e)) => e.is_not_cached(),
            _ => false,
        }
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
            detail: Detail::Message(self.detail.text()),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let detail = self.detail.text();
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
        self.detail.as_error()
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

impl From<TreeError> for Error {
    fn from(e: TreeError) -> Self {
        Error {
            kind: e.kind(),
            target: None,
            detail: Detail::Tree(e),
        }
    }
}

impl From<CatalogError> for Error {
    fn from(e: CatalogError) -> Self {
        Error {
            kind: e.kind(),
            target: None,
            detail: Detail::Catalog(e),
        }
    }
}

impl From<GcError> for Error {
    fn from(e: GcError) -> Self {
        Error {
            kind: e.kind(),
            target: None,
            detail: Detail::Gc(e),
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

    /// A page corruption from the tree keeps its kind, says its file and offset, and stays
    /// reachable as the tree's error through `source()`.
    #[test]
    fn a_tree_error_keeps_its_kind_and_its_place() {
        let e = Error::from(TreeError::corruption(
            "t.0/data_3_main_1",
            8192,
            "tree page 7: leaf restart offset out of bounds",
        ))
        .at("t.0@main");
        assert_eq!(e.kind(), ErrorKind::Corruption);
        assert_eq!(
            e.to_string(),
            "t.0@main: corruption in t.0/data_3_main_1 at offset 8192: tree page 7: leaf \
             restart offset out of bounds"
        );
        let inner = std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<TreeError>())
            .expect("the tree's error");
        assert_eq!(inner.location(), Some(("t.0/data_3_main_1", 8192)));
        // Kinds pass through every layer unchanged.
        let busy = Error::from(CatalogError::Tree(TreeError::Io(IoError::NotCached {
            path: "t.0/data_1_main_0".into(),
        })));
        assert_eq!(busy.kind(), ErrorKind::Busy);
        assert!(busy.is_not_cached());
        let gc = Error::from(GcError::State {
            file: "t.0/manifest_main_0".into(),
            what: "merge bases: Truncated".into(),
        });
        assert_eq!(gc.kind(), ErrorKind::Corruption);
    }
}
