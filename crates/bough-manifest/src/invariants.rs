//! Invariants a manifest append must keep, checked before the record is written (as
//! SlateDB's `manifest/invariants.rs`). The encoder checks what one record says on its own
//! (ids below `next_page_id`, sorted changes, ranges below `max_file_id`); these are the
//! rules between the state a head holds and the record it appends (ARCHITECTURE.md,
//! "Invariants" 4, 8 and 11, and the version rule of "Recovery"):
//!
//! - the log sequence, and so the commit version, grows by exactly one per record;
//! - the file-id and logical-page-id high-water marks never go back;
//! - every address the record maps (changes, checkpoint root, overlay, mapping root) lies
//!   in a file some branch file range names, at or below the file-id high-water mark, so a
//!   reader can resolve it and knows its incarnation;
//! - no range of the head's own branch name is of a later term than the head's (a name's
//!   new incarnation starts above every term it had), and the range of the head's own
//!   (branch, term) carries the head's incarnation;
//! - a snapshot names the head's branch and term, and its commit version is not below the
//!   one the head had (a seal or rewrite keeps it, a commit raises it).
//!
//! Each check is a few comparisons per range and per mapped address, cheap next to the
//! encoding itself, so it runs in release builds too: a head refuses to write a manifest
//! that breaks one.

use crate::page::FREE_SLOT_BIT;
use crate::{BranchFileMapping, BranchName, FileId, LogRecord, PageAddr, PageId, Snapshot, Term};

/// What the head holds before an append: the state the record follows.
#[derive(Debug, Clone, Copy)]
pub struct Prior<'a> {
    /// The head's branch.
    pub branch: &'a BranchName,
    /// The head's term.
    pub term: Term,
    /// The head's incarnation (0: its manifest names none).
    pub incarnation: u64,
    /// Sequence number of the last record (0 right after the snapshot).
    pub seq: u64,
    /// The commit version the head is at.
    pub version: u64,
    /// The file-id high-water mark.
    pub max_file_id: FileId,
    /// The logical page-id high-water mark.
    pub next_page_id: PageId,
}

/// A rule an append would break.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InvariantViolation {
    /// The sequence number is not the previous one plus one.
    Sequence {
        /// What it should be.
        expected: u64,
        /// What the record says.
        found: u64,
    },
    /// A high-water mark would go back.
    HighWaterBack {
        /// `max_file_id` or `next_page_id`.
        what: &'static str,
        /// What the head has.
        was: u64,
        /// What the record says.
        now: u64,
    },
    /// A mapped address lies in a file no branch file range names, or above
    /// `max_file_id`.
    UnknownFile {
        /// The address.
        addr: PageAddr,
    },
    /// A range of the head's own branch name is of a later term than the head's.
    LaterTerm {
        /// The range's term.
        term: Term,
        /// The head's term.
        head: Term,
    },
    /// The range of the head's own (branch, term) names another incarnation.
    Incarnation {
        /// The range's.
        range: u64,
        /// The head's.
        head: u64,
    },
    /// A snapshot names another branch or term than the head's.
    Identity {
        /// The branch it names.
        branch: BranchName,
        /// The term it names.
        term: Term,
    },
    /// A snapshot's commit version is below the head's.
    VersionBack {
        /// The head's.
        was: u64,
        /// The snapshot's.
        now: u64,
    },
}

impl std::fmt::Display for InvariantViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use InvariantViolation::*;
        match self {
            Sequence { expected, found } => {
                write!(f, "log sequence {found} where {expected} comes next")
            }
            HighWaterBack { what, was, now } => {
                write!(f, "{what} would go back from {was} to {now}")
            }
            UnknownFile { addr } => write!(
                f,
                "address {addr} lies in file {} that no branch file range names",
                addr.file_id()
            ),
            LaterTerm { term, head } => write!(
                f,
                "a range of the branch's own name is of term {term}, after the head's term {head}"
            ),
            Incarnation { range, head } => write!(
                f,
                "the head's own range names incarnation {range:#x}, the head is {head:#x}"
            ),
            Identity { branch, term } => {
                write!(
                    f,
                    "the snapshot names branch {branch} term {term}, not the head's"
                )
            }
            VersionBack { was, now } => {
                write!(f, "commit version would go back from {was} to {now}")
            }
        }
    }
}

impl std::error::Error for InvariantViolation {}

/// Checks log record `rec` appended to the state `prior`.
pub fn check_log(prior: &Prior<'_>, rec: &LogRecord) -> Result<(), InvariantViolation> {
    let expected = prior.seq.saturating_add(1);
    if rec.seq != expected {
        return Err(InvariantViolation::Sequence {
            expected,
            found: rec.seq,
        });
    }
    high_water(prior, rec.max_file_id, rec.next_page_id)?;
    check_ranges(prior, &rec.branch_file_ranges)?;
    let addrs = rec.changes.iter().map(|&(_, raw)| raw);
    let addrs = addrs.chain(rec.checkpoint.map(PageAddr::to_u64));
    check_addrs(&rec.branch_file_ranges, rec.max_file_id, addrs)
}

/// Checks snapshot `s` written by the head whose state is `prior` (a new manifest, a
/// rewrite, a seal). The high-water marks are not compared: a snapshot restored from an
/// archive or adopted may start from its own.
pub fn check_snapshot(prior: &Prior<'_>, s: &Snapshot) -> Result<(), InvariantViolation> {
    if &s.meta.branch != prior.branch || s.meta.term != prior.term {
        return Err(InvariantViolation::Identity {
            branch: s.meta.branch.clone(),
            term: s.meta.term,
        });
    }
    let version = crate::commit_version(&s.extensions)
        .ok()
        .flatten()
        .unwrap_or(0);
    if version < prior.version {
        return Err(InvariantViolation::VersionBack {
            was: prior.version,
            now: version,
        });
    }
    check_ranges(prior, &s.meta.branch_file_ranges)?;
    let addrs = s.overlay.iter().map(|&(_, raw)| raw);
    let addrs = addrs.chain(std::iter::once(s.mapping_root.to_u64()));
    check_addrs(&s.meta.branch_file_ranges, s.max_file_id, addrs)
}

fn high_water(
    prior: &Prior<'_>,
    max_file_id: FileId,
    next_page_id: PageId,
) -> Result<(), InvariantViolation> {
    if max_file_id < prior.max_file_id {
        return Err(InvariantViolation::HighWaterBack {
            what: "max_file_id",
            was: prior.max_file_id,
            now: max_file_id,
        });
    }
    if next_page_id < prior.next_page_id {
        return Err(InvariantViolation::HighWaterBack {
            what: "next_page_id",
            was: u64::from(prior.next_page_id),
            now: u64::from(next_page_id),
        });
    }
    Ok(())
}

fn check_ranges(prior: &Prior<'_>, ranges: &BranchFileMapping) -> Result<(), InvariantViolation> {
    for r in ranges.iter().filter(|r| &r.branch == prior.branch) {
        if r.term > prior.term {
            return Err(InvariantViolation::LaterTerm {
                term: r.term,
                head: prior.term,
            });
        }
        if r.term == prior.term && prior.incarnation != 0 && r.incarnation != prior.incarnation {
            return Err(InvariantViolation::Incarnation {
                range: r.incarnation,
                head: prior.incarnation,
            });
        }
    }
    Ok(())
}

/// Every raw slot value that is an address (not a free-chain link, not `NONE`) must lie in
/// a file a range names, at or below `max_file_id`.
fn check_addrs(
    ranges: &BranchFileMapping,
    max_file_id: FileId,
    raws: impl Iterator<Item = u64>,
) -> Result<(), InvariantViolation> {
    for raw in raws.filter(|raw| raw & FREE_SLOT_BIT == 0) {
        // The encoder refuses slot values that are no address; nothing to say here.
        let Some(addr) = PageAddr::from_u64(raw) else {
            continue;
        };
        if addr.is_none() {
            continue;
        }
        if addr.file_id() > max_file_id || ranges.resolve(addr.file_id()).is_none() {
            return Err(InvariantViolation::UnknownFile { addr });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BranchFileRange;
    use crate::ext::Extensions;

    fn branch(s: &str) -> BranchName {
        BranchName::new(s).unwrap()
    }

    fn ranges(v: &[(&str, Term, u64, FileId)]) -> BranchFileMapping {
        BranchFileMapping::from_ranges(
            v.iter()
                .map(|&(b, term, incarnation, max_file_id)| BranchFileRange {
                    branch: branch(b),
                    term,
                    incarnation,
                    max_file_id,
                })
                .collect(),
        )
        .unwrap()
    }

    fn log(seq: u64) -> LogRecord {
        LogRecord {
            seq,
            root: 0,
            ttl_root: crate::NO_PAGE,
            max_file_id: 3,
            branch_file_ranges: ranges(&[("main", 2, 7, 3)]),
            checkpoint: None,
            next_page_id: 10,
            free_head: None,
            changes: vec![(0, PageAddr::new(3, 1).unwrap().to_u64())],
            extensions: Extensions::new(),
        }
    }

    fn prior(b: &BranchName) -> Prior<'_> {
        Prior {
            branch: b,
            term: 2,
            incarnation: 7,
            seq: 4,
            version: 4,
            max_file_id: 3,
            next_page_id: 10,
        }
    }

    #[test]
    fn a_record_that_keeps_every_rule_passes() {
        let b = branch("main");
        assert_eq!(check_log(&prior(&b), &log(5)), Ok(()));
    }

    #[test]
    fn each_violating_record_is_refused() {
        let b = branch("main");
        let p = prior(&b);
        let cases: Vec<(LogRecord, &str)> = vec![
            (log(4), "log sequence 4 where 5 comes next"),
            (log(7), "log sequence 7"),
            (
                LogRecord {
                    max_file_id: 2,
                    branch_file_ranges: ranges(&[("main", 2, 7, 2)]),
                    changes: vec![],
                    ..log(5)
                },
                "max_file_id would go back",
            ),
            (
                LogRecord {
                    next_page_id: 9,
                    ..log(5)
                },
                "next_page_id would go back",
            ),
            (
                LogRecord {
                    max_file_id: 9,
                    changes: vec![(0, PageAddr::new(9, 1).unwrap().to_u64())],
                    ..log(5)
                },
                "no branch file range names",
            ),
            (
                LogRecord {
                    checkpoint: Some(PageAddr::new(8, 2).unwrap()),
                    ..log(5)
                },
                "no branch file range names",
            ),
            (
                LogRecord {
                    branch_file_ranges: ranges(&[("main", 2, 7, 1), ("main", 3, 9, 3)]),
                    ..log(5)
                },
                "of term 3, after the head's term 2",
            ),
            (
                LogRecord {
                    branch_file_ranges: ranges(&[("main", 2, 8, 3)]),
                    ..log(5)
                },
                "incarnation",
            ),
        ];
        for (rec, why) in cases {
            let e = check_log(&p, &rec).expect_err(why);
            assert!(e.to_string().contains(why), "{e} / {why}");
        }
        // A free-chain link in a change is no address.
        let free = LogRecord {
            changes: vec![(1, FREE_SLOT_BIT | 5)],
            ..log(5)
        };
        assert_eq!(check_log(&p, &free), Ok(()));
    }

    #[test]
    fn a_snapshot_of_another_branch_or_an_older_version_is_refused() {
        let b = branch("main");
        let p = prior(&b);
        let mut s = Snapshot::empty(branch("main"), 2, 4096);
        crate::set_commit_version(&mut s.extensions, 4);
        assert_eq!(check_snapshot(&p, &s), Ok(()));
        let other = Snapshot::empty(branch("feature"), 2, 4096);
        assert!(matches!(
            check_snapshot(&p, &other),
            Err(InvariantViolation::Identity { .. })
        ));
        crate::set_commit_version(&mut s.extensions, 3);
        assert_eq!(
            check_snapshot(&p, &s),
            Err(InvariantViolation::VersionBack { was: 4, now: 3 })
        );
        s.mapping_root = PageAddr::new(1, 1).unwrap();
        crate::set_commit_version(&mut s.extensions, 4);
        assert!(matches!(
            check_snapshot(&p, &s),
            Err(InvariantViolation::UnknownFile { .. })
        ));
    }
}
