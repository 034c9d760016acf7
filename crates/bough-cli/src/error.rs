//! The CLI's error: a message, an optional hint on how to fix it, and the exit code.

use std::fmt;

use bough::ErrorKind;

/// Exit codes (documented in `bough --help`).
pub mod code {
    /// Success.
    pub const OK: u8 = 0;
    /// Any other failure (I/O, a poisoned or fenced store, an internal error).
    pub const FAILURE: u8 = 1;
    /// Bad usage or invalid input (a name, a key, an option, a file to load).
    pub const USAGE: u8 = 2;
    /// Something named does not exist: the store, a partition, a branch, a key, an archive.
    pub const NOT_FOUND: u8 = 3;
    /// Something to be created exists already.
    pub const EXISTS: u8 = 4;
    /// Corrupt data: `verify` found problems, a checksum failed, a stream was cut short.
    pub const CORRUPT: u8 = 5;
    /// The store is locked by another process.
    pub const BUSY: u8 = 6;
    /// A merge found conflicts and changed nothing.
    pub const CONFLICT: u8 = 7;
}

/// The text `bough --help` prints about exit codes.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  failure (I/O error, poisoned or fenced store, internal error)
  2  bad usage or invalid input (names, keys, options, input lines)
  3  not found (store, partition, branch, key, archive, file)
  4  already exists
  5  corruption: verify found problems, a checksum failed, an import stream was cut short
  6  busy: another process has the store open
  7  merge conflicts: nothing was changed";

/// What went wrong, how to fix it, and the exit code.
#[derive(Debug)]
pub struct CliError {
    /// Exit code.
    pub code: u8,
    /// What went wrong.
    pub message: String,
    /// How to fix it.
    pub hint: Option<String>,
    /// The store's error kind, when it came from the store.
    pub kind: Option<ErrorKind>,
}

impl CliError {
    /// An error with an exit code.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        CliError {
            code,
            message: message.into(),
            hint: None,
            kind: None,
        }
    }

    /// Bad input.
    pub fn usage(message: impl Into<String>) -> Self {
        CliError::new(code::USAGE, message)
    }

    /// Something missing.
    pub fn not_found(message: impl Into<String>) -> Self {
        CliError::new(code::NOT_FOUND, message)
    }

    /// Corrupt data.
    pub fn corrupt(message: impl Into<String>) -> Self {
        CliError::new(code::CORRUPT, message)
    }

    /// An I/O failure outside the store (stdin, stdout, a file).
    pub fn io(message: impl Into<String>) -> Self {
        CliError::new(code::FAILURE, message)
    }

    /// Adds a hint (replacing any).
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Adds a hint unless one is set.
    pub fn or_hint(mut self, hint: impl Into<String>) -> Self {
        if self.hint.is_none() {
            self.hint = Some(hint.into());
        }
        self
    }

    /// The kind's name for `--json` error reports.
    pub fn kind_name(&self) -> String {
        match self.kind {
            Some(k) => format!("{k:?}"),
            None => match self.code {
                code::USAGE => "InvalidArgument".into(),
                code::NOT_FOUND => "NotFound".into(),
                code::EXISTS => "AlreadyExists".into(),
                code::CORRUPT => "Corruption".into(),
                code::BUSY => "Busy".into(),
                code::CONFLICT => "Conflict".into(),
                _ => "Failure".into(),
            },
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<bough::Error> for CliError {
    fn from(e: bough::Error) -> Self {
        let kind = e.kind();
        let (code, hint) = match kind {
            ErrorKind::InvalidArgument => (code::USAGE, None),
            ErrorKind::NotFound => (code::NOT_FOUND, None),
            ErrorKind::AlreadyExists => (code::EXISTS, None),
            ErrorKind::Corruption => (
                code::CORRUPT,
                Some("run `bough verify` to list every problem in the store"),
            ),
            ErrorKind::Busy => (
                code::BUSY,
                Some("another process has this store open; wait for it to finish"),
            ),
            ErrorKind::NoSpace => (code::FAILURE, Some("free some space and retry")),
            ErrorKind::Poisoned => (
                code::FAILURE,
                Some("a sync failed; check the disk, then run the command again"),
            ),
            _ => (code::FAILURE, None),
        };
        let message = e.to_string();
        let hint = if message.contains("differs from the configured") {
            Some("open the store with the options it was created with (--config FILE)")
        } else {
            hint
        };
        CliError {
            code,
            message,
            hint: hint.map(String::from),
            kind: Some(kind),
        }
    }
}

impl From<bough_io::IoError> for CliError {
    fn from(e: bough_io::IoError) -> Self {
        CliError::from(bough::Error::from(e))
    }
}

/// Results of CLI commands.
pub type CliResult<T = ()> = Result<T, CliError>;
