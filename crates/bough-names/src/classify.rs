//! Sorting directory entries into kinds, for recovery, listing and GC.

use std::fmt;

use nom::Parser;
use nom::branch::alt;
use nom::bytes::complete::tag;
use nom::combinator::{opt, value, verify};

use crate::grammar::{self, NameKind, NameParseError};
use crate::ident::BranchName;
use crate::names::{
    ArchiveName, CurrentTermName, DataFileName, HistoryName, LogFileName, ManifestName,
    PartitionDir, TableOpName, TagFileName, TmpName, TmpTarget, TornTailName, VersionName,
    VersionTarget,
};
use crate::{
    CURRENT_TERM_PREFIX, DATA_PREFIX, GC_LEASE_FILE, HISTORY_PREFIX, LOCK_FILE, LOG_PREFIX,
    MANIFEST_PREFIX, TABLE_OP_PREFIX, TAG_PREFIX,
};

/// What a file name in a partition or store directory denotes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileKind {
    /// `manifest_<branch>_<term>`
    Manifest(ManifestName),
    /// `manifest_<branch>_<term>_<ts>`
    Archive(ArchiveName),
    /// `data_<file_id>_<branch>_<term>`
    Data(DataFileName),
    /// `wal_<log_id>_<branch>_<term>`: a write-ahead log file.
    Log(LogFileName),
    /// `history_<stamp>_<branch>_<term>`: a history point (one snapshot record).
    History(HistoryName),
    /// `CURRENT_TERM.<branch>`
    CurrentTerm(CurrentTermName),
    /// `<target>.<nonce>.tmp`
    Tmp(TmpName),
    /// [`LOCK_FILE`]
    Lock,
    /// [`GC_LEASE_FILE`]: a partition's garbage-collection lease (object stores only).
    GcLease,
    /// `<target>.v<version>`: one version of an object kept as numbered versions (object
    /// stores without If-Match only).
    Version(VersionName),
    /// `<manifest>.torn.<offset>.<n>`: the bytes a manifest's dropped torn tail held, kept
    /// aside as evidence. Never store data; GC leaves it alone.
    TornTail(TornTailName),
    /// `tag_<name>`: a tag, one snapshot record naming the state it keeps.
    Tag(TagFileName),
    /// `tableop_<seq>[_end]` (store root): a record of the store's branch registry, the
    /// intent or the outcome of one table-wide branch operation.
    TableOp(TableOpName),
    /// Anything else, kept verbatim. Never to be treated as store data.
    Unknown(String),
}

impl FileKind {
    /// The branch the file belongs to, if it belongs to one.
    pub fn branch(&self) -> Option<&BranchName> {
        match self {
            FileKind::Manifest(n) => Some(&n.branch),
            FileKind::Archive(n) => Some(&n.branch),
            FileKind::Data(n) => Some(&n.branch),
            FileKind::Log(n) => Some(&n.branch),
            FileKind::History(n) => Some(&n.branch),
            FileKind::CurrentTerm(n) => Some(&n.branch),
            FileKind::Tmp(n) => n.target.branch(),
            FileKind::Version(n) => n.target.branch(),
            FileKind::TornTail(n) => Some(&n.manifest.branch),
            // A tag outlives the branch it was taken from: it belongs to none.
            FileKind::Tag(_)
            | FileKind::TableOp(_)
            | FileKind::Lock
            | FileKind::GcLease
            | FileKind::Unknown(_) => None,
        }
    }

    /// Whether the name was recognised (anything but [`FileKind::Unknown`]).
    pub fn is_known(&self) -> bool {
        !matches!(self, FileKind::Unknown(_))
    }
}

impl From<TmpTarget> for FileKind {
    fn from(t: TmpTarget) -> Self {
        match t {
            TmpTarget::Manifest(n) => FileKind::Manifest(n),
            TmpTarget::Archive(n) => FileKind::Archive(n),
            TmpTarget::Data(n) => FileKind::Data(n),
            TmpTarget::CurrentTerm(n) => FileKind::CurrentTerm(n),
            TmpTarget::TornTail(n) => FileKind::TornTail(n),
            TmpTarget::Tag(n) => FileKind::Tag(n),
            TmpTarget::TableOp(n) => FileKind::TableOp(n),
            TmpTarget::History(n) => FileKind::History(n),
        }
    }
}

/// Formats the file name; for every kind [`classify`] returns, this is
/// exactly the classified string.
impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileKind::Manifest(n) => n.fmt(f),
            FileKind::Archive(n) => n.fmt(f),
            FileKind::Data(n) => n.fmt(f),
            FileKind::Log(n) => n.fmt(f),
            FileKind::History(n) => n.fmt(f),
            FileKind::CurrentTerm(n) => n.fmt(f),
            FileKind::Tmp(n) => n.fmt(f),
            FileKind::Lock => f.write_str(LOCK_FILE),
            FileKind::GcLease => f.write_str(GC_LEASE_FILE),
            FileKind::Version(n) => n.fmt(f),
            FileKind::TornTail(n) => n.fmt(f),
            FileKind::Tag(n) => n.fmt(f),
            FileKind::TableOp(n) => n.fmt(f),
            FileKind::Unknown(s) => f.write_str(s),
        }
    }
}

/// Prefixes that claim a name for the store: a name with one of these that
/// fails to parse is damage or a bug, not a stranger's file.
const KNOWN_PREFIXES: [&str; 8] = [
    HISTORY_PREFIX,
    MANIFEST_PREFIX,
    TABLE_OP_PREFIX,
    TAG_PREFIX,
    DATA_PREFIX,
    LOG_PREFIX,
    CURRENT_TERM_PREFIX,
    GC_LEASE_FILE,
];

/// What may follow a target name.
#[derive(Clone, Copy, Debug)]
enum Suffix {
    Version(u64),
    Tmp(u64),
}

/// Parses any file name the store writes.
pub fn parse_file_name(name: &str) -> Result<FileKind, NameParseError> {
    let lock = value(FileKind::Lock, tag(LOCK_FILE));
    // A log file takes no suffix: it is never written through a temporary file (it is
    // created with create_new) and has no numbered versions.
    let log = grammar::log.map(FileKind::Log);
    let lease = (grammar::gc_lease, opt(grammar::version_suffix)).map(|(_, v)| match v {
        Some(version) => FileKind::Version(VersionName {
            target: VersionTarget::GcLease,
            version,
        }),
        None => FileKind::GcLease,
    });
    // A target optionally followed by `.v<version>` or `.<nonce>.tmp`; branch names hold
    // no dot, so a target always ends before the first `.` that follows it. Only
    // manifests and CURRENT_TERM records have versions.
    let suffix = alt((
        grammar::version_suffix.map(Suffix::Version),
        grammar::tmp_suffix.map(Suffix::Tmp),
    ));
    let stored = verify(
        (grammar::tmp_target, opt(suffix)),
        |(target, suffix): &(TmpTarget, Option<Suffix>)| {
            !matches!(suffix, Some(Suffix::Version(_)))
                || matches!(target, TmpTarget::Manifest(_) | TmpTarget::CurrentTerm(_))
        },
    )
    .map(|(target, suffix)| match (target, suffix) {
        (target, Some(Suffix::Tmp(nonce))) => FileKind::Tmp(TmpName { target, nonce }),
        (TmpTarget::Manifest(m), Some(Suffix::Version(version))) => {
            FileKind::Version(VersionName::new(m, version))
        }
        (TmpTarget::CurrentTerm(c), Some(Suffix::Version(version))) => {
            FileKind::Version(VersionName::new(c, version))
        }
        (target, _) => FileKind::from(target),
    });
    grammar::run(NameKind::File, name, alt((lock, lease, log, stored)))
}

/// Classifies one file name. Never fails and never panics.
///
/// A name that carries a store prefix (`manifest_`, `data_`, `wal_`, `CURRENT_TERM.`, `GC_LEASE`)
/// but does not parse is logged at `warn` level, since it points at damage or
/// a bug; any other foreign name is logged at `debug` level. Both come back
/// as [`FileKind::Unknown`] and must be left alone.
pub fn classify(file_name: &str) -> FileKind {
    match parse_file_name(file_name) {
        Ok(kind) => kind,
        Err(err) => {
            if KNOWN_PREFIXES.iter().any(|p| file_name.starts_with(p)) {
                tracing::warn!(file = %file_name.escape_debug(), error = %err, "ignoring malformed store file name");
            } else {
                tracing::debug!(file = %file_name.escape_debug(), "ignoring foreign file name");
            }
            FileKind::Unknown(file_name.to_owned())
        }
    }
}

/// Classifies one directory name in the store root as a partition directory.
pub fn classify_dir(dir_name: &str) -> Option<PartitionDir> {
    match PartitionDir::parse(dir_name) {
        Ok(dir) => Some(dir),
        Err(err) => {
            tracing::debug!(dir = %dir_name.escape_debug(), error = %err, "ignoring foreign directory name");
            None
        }
    }
}

/// Whether `file_name` is a current (non-archive) manifest of some branch.
pub fn is_branch_manifest(file_name: &str) -> bool {
    matches!(classify(file_name), FileKind::Manifest(_))
}

/// Whether `file_name` is a manifest archive of some branch.
pub fn is_branch_archive(file_name: &str) -> bool {
    matches!(classify(file_name), FileKind::Archive(_))
}

/// Whether `file_name` is a write-ahead log file of some branch.
pub fn is_branch_log_file(file_name: &str) -> bool {
    matches!(classify(file_name), FileKind::Log(_))
}

/// Whether `file_name` is a history point of some branch.
pub fn is_branch_history_point(file_name: &str) -> bool {
    matches!(classify(file_name), FileKind::History(_))
}

/// Whether `file_name` is a data file of some branch.
pub fn is_branch_data_file(file_name: &str) -> bool {
    matches!(classify(file_name), FileKind::Data(_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ident::TableName;

    fn b(s: &str) -> BranchName {
        BranchName::new(s).unwrap_or_else(|e| panic!("{e}"))
    }

    fn known(s: &str) -> FileKind {
        let k = classify(s);
        assert!(k.is_known(), "{s:?} not recognised");
        assert_eq!(k.to_string(), s, "format(classify(s)) != s");
        k
    }

    #[test]
    fn tag_names_follow_the_branch_grammar_and_belong_to_no_branch() {
        assert_eq!(
            known("tag_release_v2"),
            FileKind::Tag(TagFileName::new(b("release_v2")))
        );
        assert_eq!(classify("tag_v1").branch(), None);
        assert_eq!(
            known("tag_v1.7.tmp"),
            FileKind::Tmp(TmpName::new(TagFileName::new(b("v1")), 7))
        );
        assert_eq!(classify("tag_v1.7.tmp").branch(), None);
        // A tag has no versions, a numeric segment is no name, `Main` aliases `main`, and
        // nothing may follow the name.
        for bad in [
            "tag_",
            "tag_v1.v3",
            "tag_v_1",
            "tag_Main",
            "tag_v1_",
            "tag_a.b",
        ] {
            assert!(!classify(bad).is_known(), "{bad}");
        }
    }

    #[test]
    fn table_op_records_are_an_intent_or_an_outcome() {
        assert_eq!(
            known("tableop_0"),
            FileKind::TableOp(TableOpName::intent(0))
        );
        assert_eq!(
            known("tableop_18446744073709551615_end"),
            FileKind::TableOp(TableOpName::outcome(u64::MAX))
        );
        assert_eq!(classify("tableop_3").branch(), None);
        assert_eq!(
            known("tableop_3_end.9.tmp"),
            FileKind::Tmp(TmpName::new(TableOpName::outcome(3), 9))
        );
        assert_eq!(
            TableOpName::parse("tableop_12"),
            Ok(TableOpName::intent(12))
        );
        for bad in [
            "tableop_",
            "tableop_01",
            "tableop_1_",
            "tableop_1_ends",
            "tableop_1_end_end",
            "tableop_1.v2",
            "tableop_x",
            "tableop_18446744073709551616",
            "TABLEOP_1",
        ] {
            assert!(!classify(bad).is_known(), "{bad}");
        }
    }

    #[test]
    fn seed_cases() {
        assert_eq!(
            known("manifest_main_5"),
            FileKind::Manifest(ManifestName::new(BranchName::main(), 5))
        );
        assert_eq!(
            known("manifest_feature_5"),
            FileKind::Manifest(ManifestName::new(b("feature"), 5))
        );
        assert_eq!(
            known("manifest_main_5_123"),
            FileKind::Archive(ArchiveName::new(BranchName::main(), 5, 123))
        );
        assert_eq!(
            known("manifest_feature_5_123"),
            FileKind::Archive(ArchiveName::new(b("feature"), 5, 123))
        );
        assert_eq!(
            known("data_10_main_5"),
            FileKind::Data(DataFileName::new(10, BranchName::main(), 5))
        );
        assert_eq!(
            known("data_10_feature_5"),
            FileKind::Data(DataFileName::new(10, b("feature"), 5))
        );
        assert_eq!(
            known("CURRENT_TERM.main"),
            FileKind::CurrentTerm(CurrentTermName::new(BranchName::main()))
        );
        assert_eq!(
            known("CURRENT_TERM.feature"),
            FileKind::CurrentTerm(CurrentTermName::new(b("feature")))
        );
        assert_eq!(known("LOCK"), FileKind::Lock);
    }

    #[test]
    fn ambiguity_cases() {
        assert_eq!(
            known("manifest_v_1_2"),
            FileKind::Archive(ArchiveName::new(b("v"), 1, 2))
        );
        assert_eq!(
            known("manifest_a_b_3"),
            FileKind::Manifest(ManifestName::new(b("a_b"), 3))
        );
        assert_eq!(
            classify("data_1_x_2_3"),
            FileKind::Unknown("data_1_x_2_3".into())
        );
        assert_eq!(
            classify("manifest_v_1_2_3"),
            FileKind::Unknown("manifest_v_1_2_3".into())
        );
    }

    #[test]
    fn tmp_files() {
        assert_eq!(
            known("manifest_main_5.1.tmp"),
            FileKind::Tmp(TmpName::new(ManifestName::new(BranchName::main(), 5), 1))
        );
        assert_eq!(
            known("manifest_main_5_9.1.tmp"),
            FileKind::Tmp(TmpName::new(ArchiveName::new(BranchName::main(), 5, 9), 1))
        );
        assert_eq!(
            known("data_10_x_5.2.tmp"),
            FileKind::Tmp(TmpName::new(DataFileName::new(10, b("x"), 5), 2))
        );
        assert_eq!(
            known("CURRENT_TERM.feature.18446744073709551615.tmp"),
            FileKind::Tmp(TmpName::new(CurrentTermName::new(b("feature")), u64::MAX))
        );
    }

    #[test]
    fn history_points() {
        assert_eq!(
            known("history_1700000000000_feature_3"),
            FileKind::History(HistoryName::new(1_700_000_000_000, b("feature"), 3))
        );
        assert_eq!(
            known("history_0_v_x_2"),
            FileKind::History(HistoryName::new(0, b("v_x"), 2))
        );
        assert_eq!(classify("history_7_f_3").branch(), Some(&b("f")));
        // A temporary file of one (local `create_new`), but no versions; canonical numbers.
        assert_eq!(
            known("history_7_main_3.1.tmp"),
            FileKind::Tmp(TmpName::new(HistoryName::new(7, b("main"), 3), 1))
        );
        for s in [
            "history_7_main_3.v1",
            "history_07_main_3",
            "history_7_main",
            "history_7_3",
        ] {
            assert_eq!(classify(s), FileKind::Unknown(s.to_string()), "{s}");
        }
    }

    #[test]
    fn log_files() {
        assert_eq!(
            known("wal_7_feature_3"),
            FileKind::Log(LogFileName::new(7, b("feature"), 3))
        );
        assert_eq!(
            known("wal_0_v_1"),
            FileKind::Log(LogFileName::new(0, b("v"), 1))
        );
        assert_eq!(classify("wal_7_f_3").branch(), Some(&b("f")));
        // A log file is never a temporary-file target and has no versions.
        for s in [
            "wal_7_main_3.1.tmp",
            "wal_7_main_3.v1",
            "wal_7_main",
            "wal_07_main_3",
        ] {
            assert_eq!(classify(s), FileKind::Unknown(s.to_owned()), "{s:?}");
        }
        assert!(is_branch_log_file("wal_1_main_2"));
        assert!(!is_branch_log_file("data_1_main_2"));
    }

    #[test]
    fn gc_lease_and_versions() {
        assert_eq!(known("GC_LEASE"), FileKind::GcLease);
        assert_eq!(
            known("GC_LEASE.v0"),
            FileKind::Version(VersionName::new(VersionTarget::GcLease, 0))
        );
        assert_eq!(
            known("manifest_main_5.v3"),
            FileKind::Version(VersionName::new(
                ManifestName::new(BranchName::main(), 5),
                3
            ))
        );
        assert_eq!(
            known("manifest_v_1.v18446744073709551615"),
            FileKind::Version(VersionName::new(ManifestName::new(b("v"), 1), u64::MAX))
        );
        assert_eq!(
            known("CURRENT_TERM.a_b.v12"),
            FileKind::Version(VersionName::new(CurrentTermName::new(b("a_b")), 12))
        );
        assert_eq!(classify("CURRENT_TERM.x.v7").branch(), Some(&b("x")));
        assert_eq!(classify("GC_LEASE.v7").branch(), None);
        // A version is never taken for a temporary file, nor the other way round.
        assert!(matches!(
            classify("manifest_main_5.7.tmp"),
            FileKind::Tmp(_)
        ));
    }

    #[test]
    fn kept_aside_torn_tails() {
        assert_eq!(
            known("manifest_main_5.torn.8192.0"),
            FileKind::TornTail(TornTailName::new(
                ManifestName::new(BranchName::main(), 5),
                8192,
                0
            ))
        );
        assert_eq!(
            known("manifest_a_b_1.torn.0.18446744073709551615"),
            FileKind::TornTail(TornTailName::new(
                ManifestName::new(b("a_b"), 1),
                0,
                u64::MAX
            ))
        );
        assert_eq!(classify("manifest_x_2.torn.4096.1").branch(), Some(&b("x")));
        // It is written through a temporary file like every file created new.
        assert_eq!(
            known("manifest_main_5.torn.8192.0.7.tmp"),
            FileKind::Tmp(TmpName::new(
                TornTailName::new(ManifestName::new(BranchName::main(), 5), 8192, 0),
                7
            ))
        );
        for s in [
            "manifest_main_5.torn",
            "manifest_main_5.torn.",
            "manifest_main_5.torn.8192",
            "manifest_main_5.torn.8192.",
            "manifest_main_5.torn.08192.0",
            "manifest_main_5.torn.8192.0.v1",
            "manifest_main_5.torn.8192.0.1",
            "manifest_main_5_7.torn.8192.0",
            "data_1_main_2.torn.0.0",
            "CURRENT_TERM.main.torn.0.0",
        ] {
            assert_eq!(classify(s), FileKind::Unknown(s.to_owned()), "{s:?}");
        }
    }

    #[test]
    fn malformed_and_foreign_are_unknown() {
        for s in [
            "",
            "manifest_",
            "manifest",
            "manifest_main",
            "manifest_main_",
            "manifest_main_05",
            "manifest_Main_5",
            "manifest_MAIN_5",
            "manifest_5",
            "manifest__5",
            "manifest_main__5",
            "manifest_main_5_",
            "manifest_main_5_1_2",
            "manifest_main_5.tmp",
            "manifest_main_5.07.tmp",
            "manifest_main_18446744073709551616",
            "data_",
            "data_abc_5",
            "data_10_main",
            "data_10_main_",
            "data_010_main_5",
            "data_1_main_18446744073709551616",
            "data_10_5",
            "data_1_x_2_3",
            "data_1_2_x_3",
            "CURRENT_TERM.",
            "CURRENT_TERM.Main",
            "CURRENT_TERM.main.tmp",
            "CURRENT_TERM.a.b",
            "LOCK.tmp",
            "LOCK.1.tmp",
            "LOCKS",
            "lock",
            "README",
            ".DS_Store",
            "t.0",
            "manifest_main_5\n",
            "manifest_main_5\0",
            "data_10_m\u{e4}in_5",
            "GC_LEASE.",
            "GC_LEASE.v",
            "GC_LEASE.v01",
            "GC_LEASE.1.tmp",
            "GC_LEASE_1",
            "gc_lease",
            "manifest_main_5.v",
            "manifest_main_5.v05",
            "manifest_main_5.v-1",
            "manifest_main_5.v3.tmp",
            "manifest_main_5.3.v",
            "manifest_main_5_7.v1",
            "data_1_main_2.v3",
            "CURRENT_TERM.main.v",
            "CURRENT_TERM.main.vx",
            "CURRENT_TERM.main.V3",
            "LOCK.v1",
        ] {
            assert_eq!(classify(s), FileKind::Unknown(s.to_owned()), "{s:?}");
            assert!(parse_file_name(s).is_err(), "{s:?}");
        }
    }

    #[test]
    fn predicates() {
        assert!(is_branch_manifest("manifest_main_5"));
        assert!(is_branch_manifest("manifest_feature_5"));
        assert!(!is_branch_manifest("manifest_main_5_123"));
        assert!(!is_branch_manifest("manifest_main_5.1.tmp"));
        assert!(is_branch_archive("manifest_feature_5_123"));
        assert!(!is_branch_archive("manifest_feature_5"));
        assert!(is_branch_data_file("data_10_feature_5"));
        assert!(!is_branch_data_file("data_abc_5"));
        assert!(!is_branch_data_file("manifest_main_5"));
    }

    #[test]
    fn branch_of_kind() {
        assert_eq!(classify("data_1_f_2").branch(), Some(&b("f")));
        assert_eq!(classify("CURRENT_TERM.g.4.tmp").branch(), Some(&b("g")));
        assert_eq!(classify("LOCK").branch(), None);
        assert_eq!(classify("zzz").branch(), None);
    }

    #[test]
    fn dirs() {
        let t = TableName::new("orders.eu").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(classify_dir("orders.eu.3"), Some(PartitionDir::new(t, 3)));
        assert_eq!(classify_dir("LOCK"), None);
        assert_eq!(classify_dir("../etc.1"), None);
    }
}
