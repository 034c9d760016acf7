//! The manifest invariants (`bough_manifest::invariants`) against this head's state, checked
//! before every record it appends or writes: a record that breaks one is refused (an
//! `InvalidArgument` naming the manifest) and never reaches the file.

use super::*;
use bough_manifest::invariants::{self, InvariantViolation, Prior};

impl Head {
    /// What the head holds durably: the state the next record follows.
    fn prior(&self) -> Prior<'_> {
        Prior {
            branch: &self.branch,
            term: self.term,
            incarnation: self.incarnation,
            seq: self.seq,
            version: self.version(),
            max_file_id: self.state.max_file_id,
            next_page_id: self.state.mapping.next_page_id(),
        }
    }

    fn refuse(&self, what: &str, v: InvariantViolation) -> IoError {
        IoError::InvalidArgument {
            what: format!("refusing to write {what} to {}: {v}", self.manifest_path),
        }
    }

    /// Checks log record `log` against the head's state.
    pub(crate) fn check_log_invariants(&self, log: &LogRecord) -> IoResult<()> {
        invariants::check_log(&self.prior(), log).map_err(|v| self.refuse("a log record", v))
    }

    /// Checks snapshot `s` (a rewrite or seal of this head's manifest) against its state.
    pub(crate) fn check_snapshot_invariants(&self, s: &Snapshot) -> IoResult<()> {
        invariants::check_snapshot(&self.prior(), s).map_err(|v| self.refuse("a snapshot", v))
    }
}
