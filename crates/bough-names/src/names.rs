//! Structured names of the files and directories the store writes.
//!
//! Each type formats itself with `Display` and parses with `parse`; the two
//! are exact inverses on valid names.

use std::fmt;

use crate::ident::{BranchName, TableName};
use crate::{
    CURRENT_TERM_PREFIX, DATA_PREFIX, FileId, GC_LEASE_FILE, HISTORY_PREFIX, LOG_PREFIX, LogId,
    MANIFEST_PREFIX, PartitionId, TABLE_OP_END_SUFFIX, TABLE_OP_PREFIX, TAG_PREFIX, TMP_SUFFIX,
    TORN_INFIX, Term, Timestamp, VERSION_INFIX,
};

/// Directory of one table partition: `<table>.<partition_id>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionDir {
    /// The table; may itself contain dots.
    pub table: TableName,
    /// The partition within the table.
    pub partition: PartitionId,
}

impl PartitionDir {
    /// Builds the directory name of `partition` of `table`.
    pub fn new(table: TableName, partition: PartitionId) -> Self {
        PartitionDir { table, partition }
    }
}

impl fmt::Display for PartitionDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.table, self.partition)
    }
}

/// The current manifest of a branch at a term: `manifest_<branch>_<term>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ManifestName {
    /// Branch the manifest belongs to.
    pub branch: BranchName,
    /// Term of the writer that produced it.
    pub term: Term,
}

impl ManifestName {
    /// Builds the manifest name of `branch` at `term`.
    pub fn new(branch: BranchName, term: Term) -> Self {
        ManifestName { branch, term }
    }
}

impl fmt::Display for ManifestName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{MANIFEST_PREFIX}{}_{}", self.branch, self.term)
    }
}

/// An archived manifest: `manifest_<branch>_<term>_<timestamp>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArchiveName {
    /// Branch the archive belongs to.
    pub branch: BranchName,
    /// Term of the manifest that was archived.
    pub term: Term,
    /// When the archive was taken.
    pub timestamp: Timestamp,
}

impl ArchiveName {
    /// Builds the archive name of `branch` at `term`, taken at `timestamp`.
    pub fn new(branch: BranchName, term: Term, timestamp: Timestamp) -> Self {
        ArchiveName {
            branch,
            term,
            timestamp,
        }
    }
}

impl fmt::Display for ArchiveName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{MANIFEST_PREFIX}{}_{}_{}",
            self.branch, self.term, self.timestamp
        )
    }
}

/// A data file: `data_<file_id>_<branch>_<term>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DataFileName {
    /// File id, allocated per branch.
    pub file_id: FileId,
    /// Branch that wrote the file.
    pub branch: BranchName,
    /// Term of the writer that wrote it.
    pub term: Term,
}

impl DataFileName {
    /// Builds the data file name.
    pub fn new(file_id: FileId, branch: BranchName, term: Term) -> Self {
        DataFileName {
            file_id,
            branch,
            term,
        }
    }
}

impl fmt::Display for DataFileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{DATA_PREFIX}{}_{}_{}",
            self.file_id, self.branch, self.term
        )
    }
}

/// A write-ahead log file: `wal_<log_id>_<branch>_<term>`.
///
/// Written only by the head of `(branch, term)` (and its incarnation, which salts every
/// record), created with `create_new` and never renamed, so it is no temporary-file target:
/// a name that exists is never written by anyone else.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LogFileName {
    /// Log id, allocated per branch; a new file always gets a higher one.
    pub log_id: LogId,
    /// Branch whose commits the file holds.
    pub branch: BranchName,
    /// Term of the writer that appends to it.
    pub term: Term,
}

impl LogFileName {
    /// Builds the log file name.
    pub fn new(log_id: LogId, branch: BranchName, term: Term) -> Self {
        LogFileName {
            log_id,
            branch,
            term,
        }
    }
}

impl fmt::Display for LogFileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{LOG_PREFIX}{}_{}_{}",
            self.log_id, self.branch, self.term
        )
    }
}

/// A history point: `history_<stamp>_<branch>_<term>`, one snapshot record of a state the
/// branch's head made durable, kept for point-in-time branches while the history window
/// needs it (`docs/format.md`, "History points").
///
/// Written only by the head of `(branch, term)` with `create_new` (through a temporary
/// file on local storage), never rewritten. `stamp` orders a branch's points: the store-clock millisecond of the state,
/// raised past the previous point's when two fall in one millisecond (the exact time is in
/// the record's `HISTORY` extension).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HistoryName {
    /// Orders the branch's points (see above).
    pub stamp: u64,
    /// Branch whose state the point records.
    pub branch: BranchName,
    /// Term of the head that wrote it.
    pub term: Term,
}

impl HistoryName {
    /// Builds the history point name.
    pub fn new(stamp: u64, branch: BranchName, term: Term) -> Self {
        HistoryName {
            stamp,
            branch,
            term,
        }
    }
}

impl fmt::Display for HistoryName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{HISTORY_PREFIX}{}_{}_{}",
            self.stamp, self.branch, self.term
        )
    }
}

/// The file holding a branch's current term: `CURRENT_TERM.<branch>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CurrentTermName {
    /// The branch.
    pub branch: BranchName,
}

impl CurrentTermName {
    /// Builds the CURRENT_TERM file name of `branch`.
    pub fn new(branch: BranchName) -> Self {
        CurrentTermName { branch }
    }
}

impl fmt::Display for CurrentTermName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{CURRENT_TERM_PREFIX}{}", self.branch)
    }
}

/// The file holding a tag: `tag_<name>`, one snapshot record (`docs/format.md`, "Tags").
///
/// A tag's name follows the branch grammar ([`BranchName`]) and shares the branches' name
/// space: the catalog refuses a tag and a branch that share a name or fold to one key
/// ([`crate::alias_of`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TagFileName {
    /// The tag.
    pub tag: BranchName,
}

impl TagFileName {
    /// Builds the file name of tag `tag`.
    pub fn new(tag: BranchName) -> Self {
        TagFileName { tag }
    }
}

impl fmt::Display for TagFileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{TAG_PREFIX}{}", self.tag)
    }
}

/// Which record of a table-wide branch operation a [`TableOpName`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TableOpPart {
    /// `tableop_<seq>`: what the operation is, written before any partition acts.
    Intent,
    /// `tableop_<seq>_end`: how it ended (applied everywhere, or nowhere).
    Outcome,
}

/// A record of the store-level branch registry, in the store root: `tableop_<seq>` (the
/// intent of table-wide operation `seq`) or `tableop_<seq>_end` (its outcome).
///
/// Both are created with `create_new` and never rewritten; `seq` grows by one per
/// operation, so an intent without an outcome is an operation a crash interrupted
/// (`docs/format.md`, "Table-wide branch operations").
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableOpName {
    /// The operation's sequence number in the store.
    pub seq: u64,
    /// Which of its two records.
    pub part: TableOpPart,
}

impl TableOpName {
    /// The intent record of operation `seq`.
    pub fn intent(seq: u64) -> Self {
        TableOpName {
            seq,
            part: TableOpPart::Intent,
        }
    }

    /// The outcome record of operation `seq`.
    pub fn outcome(seq: u64) -> Self {
        TableOpName {
            seq,
            part: TableOpPart::Outcome,
        }
    }
}

impl fmt::Display for TableOpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.part {
            TableOpPart::Intent => write!(f, "{TABLE_OP_PREFIX}{}", self.seq),
            TableOpPart::Outcome => write!(f, "{TABLE_OP_PREFIX}{}{TABLE_OP_END_SUFFIX}", self.seq),
        }
    }
}

/// The final name a temporary file is renamed to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TmpTarget {
    /// A manifest.
    Manifest(ManifestName),
    /// An archive.
    Archive(ArchiveName),
    /// A data file.
    Data(DataFileName),
    /// A CURRENT_TERM file.
    CurrentTerm(CurrentTermName),
    /// A kept-aside torn tail.
    TornTail(TornTailName),
    /// A tag.
    Tag(TagFileName),
    /// A table-wide branch operation record (store root).
    TableOp(TableOpName),
    /// A history point (`create_new` writes it through a temporary file on local storage).
    History(HistoryName),
}

impl TmpTarget {
    /// The branch the target belongs to (`None` for a tag, which belongs to no branch).
    pub fn branch(&self) -> Option<&BranchName> {
        match self {
            TmpTarget::Manifest(n) => Some(&n.branch),
            TmpTarget::Archive(n) => Some(&n.branch),
            TmpTarget::Data(n) => Some(&n.branch),
            TmpTarget::CurrentTerm(n) => Some(&n.branch),
            TmpTarget::TornTail(n) => Some(&n.manifest.branch),
            TmpTarget::History(n) => Some(&n.branch),
            TmpTarget::Tag(_) | TmpTarget::TableOp(_) => None,
        }
    }
}

impl fmt::Display for TmpTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TmpTarget::Manifest(n) => n.fmt(f),
            TmpTarget::Archive(n) => n.fmt(f),
            TmpTarget::Data(n) => n.fmt(f),
            TmpTarget::CurrentTerm(n) => n.fmt(f),
            TmpTarget::TornTail(n) => n.fmt(f),
            TmpTarget::Tag(n) => n.fmt(f),
            TmpTarget::TableOp(n) => n.fmt(f),
            TmpTarget::History(n) => n.fmt(f),
        }
    }
}

impl From<TableOpName> for TmpTarget {
    fn from(n: TableOpName) -> Self {
        TmpTarget::TableOp(n)
    }
}

impl From<ManifestName> for TmpTarget {
    fn from(n: ManifestName) -> Self {
        TmpTarget::Manifest(n)
    }
}

impl From<ArchiveName> for TmpTarget {
    fn from(n: ArchiveName) -> Self {
        TmpTarget::Archive(n)
    }
}

impl From<DataFileName> for TmpTarget {
    fn from(n: DataFileName) -> Self {
        TmpTarget::Data(n)
    }
}

impl From<CurrentTermName> for TmpTarget {
    fn from(n: CurrentTermName) -> Self {
        TmpTarget::CurrentTerm(n)
    }
}

impl From<TagFileName> for TmpTarget {
    fn from(n: TagFileName) -> Self {
        TmpTarget::Tag(n)
    }
}

impl From<HistoryName> for TmpTarget {
    fn from(n: HistoryName) -> Self {
        TmpTarget::History(n)
    }
}

impl From<TornTailName> for TmpTarget {
    fn from(n: TornTailName) -> Self {
        TmpTarget::TornTail(n)
    }
}

/// A temporary file, written in full and then renamed onto `target`:
/// `<target>.<nonce>.tmp`.
///
/// The nonce keeps concurrent writers of the same target apart. A leftover
/// temporary file is never live data, so GC may delete it once no writer can
/// still be renaming it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TmpName {
    /// The name the file gets when it is published.
    pub target: TmpTarget,
    /// Distinguishes concurrent temporary files of one target.
    pub nonce: u64,
}

impl TmpName {
    /// Builds the temporary name for writing `target`.
    pub fn new(target: impl Into<TmpTarget>, nonce: u64) -> Self {
        TmpName {
            target: target.into(),
            nonce,
        }
    }
}

impl fmt::Display for TmpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}{TMP_SUFFIX}", self.target, self.nonce)
    }
}

/// What a [`VersionName`] is a version of: the objects an object store without If-Match
/// keeps as numbered versions, because they change by compare-and-swap.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VersionTarget {
    /// A manifest.
    Manifest(ManifestName),
    /// A CURRENT_TERM record.
    CurrentTerm(CurrentTermName),
    /// The partition's garbage-collection lease ([`GC_LEASE_FILE`]).
    GcLease,
}

impl VersionTarget {
    /// The branch the target belongs to (the GC lease belongs to none).
    pub fn branch(&self) -> Option<&BranchName> {
        match self {
            VersionTarget::Manifest(n) => Some(&n.branch),
            VersionTarget::CurrentTerm(n) => Some(&n.branch),
            VersionTarget::GcLease => None,
        }
    }
}

impl fmt::Display for VersionTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VersionTarget::Manifest(n) => n.fmt(f),
            VersionTarget::CurrentTerm(n) => n.fmt(f),
            VersionTarget::GcLease => f.write_str(GC_LEASE_FILE),
        }
    }
}

impl From<ManifestName> for VersionTarget {
    fn from(n: ManifestName) -> Self {
        VersionTarget::Manifest(n)
    }
}

impl From<CurrentTermName> for VersionTarget {
    fn from(n: CurrentTermName) -> Self {
        VersionTarget::CurrentTerm(n)
    }
}

/// One version of an object that an object store without If-Match keeps as numbered
/// versions, each created with create-if-absent: `<target>.v<version>`. The highest
/// version is the object's current content (see docs/format.md, "Numbered claims").
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VersionName {
    /// The object this is a version of.
    pub target: VersionTarget,
    /// Its number; the first version is 0, each change creates the next.
    pub version: u64,
}

impl VersionName {
    /// Builds the name of version `version` of `target`.
    pub fn new(target: impl Into<VersionTarget>, version: u64) -> Self {
        VersionName {
            target: target.into(),
            version,
        }
    }
}

impl fmt::Display for VersionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{VERSION_INFIX}{}", self.target, self.version)
    }
}

/// The bytes a manifest held from `offset` to its end when that tail failed its checksum
/// and replay dropped it, kept aside before the next append replaced them:
/// `<manifest>.torn.<offset>.<n>`. `n` tells apart tails dropped at the same offset at
/// different times. Evidence for `bough verify` and the operator, never store data: nothing
/// reads it as a manifest, and GC never deletes it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TornTailName {
    /// The manifest the tail was cut from.
    pub manifest: ManifestName,
    /// Where the tail started in the manifest (a block boundary).
    pub offset: u64,
    /// Which tail dropped at that offset: 0, then 1, ...
    pub n: u64,
}

impl TornTailName {
    /// Builds the name of tail `n` dropped at `offset` of `manifest`.
    pub fn new(manifest: ManifestName, offset: u64, n: u64) -> Self {
        TornTailName {
            manifest,
            offset,
            n,
        }
    }
}

impl fmt::Display for TornTailName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{TORN_INFIX}{}.{}", self.manifest, self.offset, self.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::{NameKind, NameParseError, NumberError, ParseFailure};
    use crate::ident::NameError;

    fn b(s: &str) -> BranchName {
        BranchName::new(s).unwrap_or_else(|e| panic!("{e}"))
    }

    fn t(s: &str) -> TableName {
        TableName::new(s).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Parses `s` with `parse`, checks the expected value and that it formats
    /// back to `s`.
    fn round_trip<T>(s: &str, parse: fn(&str) -> Result<T, NameParseError>, want: T)
    where
        T: fmt::Display + fmt::Debug + PartialEq,
    {
        let got = parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
        assert_eq!(got, want, "{s}");
        assert_eq!(got.to_string(), s);
    }

    #[test]
    fn seed_manifest_names() {
        round_trip(
            "manifest_main_5",
            ManifestName::parse,
            ManifestName::new(BranchName::main(), 5),
        );
        round_trip(
            "manifest_feature_5",
            ManifestName::parse,
            ManifestName::new(b("feature"), 5),
        );
        round_trip(
            "manifest_main_5_123",
            ArchiveName::parse,
            ArchiveName::new(BranchName::main(), 5, 123),
        );
        round_trip(
            "manifest_feature_5_123",
            ArchiveName::parse,
            ArchiveName::new(b("feature"), 5, 123),
        );
        round_trip(
            "manifest_main_5_1234567890",
            ArchiveName::parse,
            ArchiveName::new(BranchName::main(), 5, 1_234_567_890),
        );
    }

    #[test]
    fn seed_data_and_current_term_names() {
        round_trip(
            "data_10_main_5",
            DataFileName::parse,
            DataFileName::new(10, BranchName::main(), 5),
        );
        round_trip(
            "data_10_feature_5",
            DataFileName::parse,
            DataFileName::new(10, b("feature"), 5),
        );
        round_trip(
            "CURRENT_TERM.main",
            CurrentTermName::parse,
            CurrentTermName::new(BranchName::main()),
        );
        round_trip(
            "CURRENT_TERM.feature",
            CurrentTermName::parse,
            CurrentTermName::new(b("feature")),
        );
    }

    #[test]
    fn log_file_names() {
        round_trip(
            "wal_0_main_1",
            LogFileName::parse,
            LogFileName::new(0, BranchName::main(), 1),
        );
        round_trip(
            "wal_12_release_v2_7",
            LogFileName::parse,
            LogFileName::new(12, b("release_v2"), 7),
        );
        round_trip(
            "wal_3_v-1_2",
            LogFileName::parse,
            LogFileName::new(3, b("v-1"), 2),
        );
        for s in [
            "wal_",
            "wal_1",
            "wal_1_main",
            "wal_01_main_1",
            "wal_1_main_01",
            "wal_1_main_1_2",
            "wal_1_x_2_3",
            "wal_1_2_x_3",
            "wal__main_1",
            "wal_1_Main_1",
            "wal_1_main_1.tmp",
            "wal_1_main_1.3.tmp",
            "wal_1_main_1.v2",
            "wal_18446744073709551616_main_1",
            "WAL_1_main_1",
        ] {
            assert!(LogFileName::parse(s).is_err(), "{s:?}");
        }
        let e = LogFileName::parse("wal_x_main_1").unwrap_err();
        assert_eq!(
            (e.kind, e.offset, e.field),
            (NameKind::Log, 4, Some("log id"))
        );
    }

    #[test]
    fn manifest_and_archive_do_not_cross() {
        assert!(ManifestName::parse("manifest_main_5_123").is_err());
        assert!(ArchiveName::parse("manifest_main_5").is_err());
    }

    #[test]
    fn ambiguity_cases() {
        // `v_1` is not a branch (numeric segment), so the only reading is
        // branch `v`, term 1, timestamp 2.
        round_trip(
            "manifest_v_1_2",
            ArchiveName::parse,
            ArchiveName::new(b("v"), 1, 2),
        );
        assert!(ManifestName::parse("manifest_v_1_2").is_err());
        // Multi-segment branch names keep all their non-numeric segments.
        round_trip(
            "manifest_a_b_3",
            ManifestName::parse,
            ManifestName::new(b("a_b"), 3),
        );
        round_trip(
            "manifest_a_b_3_4",
            ArchiveName::parse,
            ArchiveName::new(b("a_b"), 3, 4),
        );
        // A segment with any non-digit belongs to the branch.
        round_trip(
            "manifest_release_v2_7",
            ManifestName::parse,
            ManifestName::new(b("release_v2"), 7),
        );
        round_trip(
            "manifest_1a_7",
            ManifestName::parse,
            ManifestName::new(b("1a"), 7),
        );
        round_trip(
            "data_3_v-1_2",
            DataFileName::parse,
            DataFileName::new(3, b("v-1"), 2),
        );
        // `data_1_x_2_3`: file id 1, branch `x`, then two numbers; data names
        // have exactly one trailing number, and `x_2` is not a branch.
        assert!(DataFileName::parse("data_1_x_2_3").is_err());
        // The branch of a data name cannot start with a numeric segment.
        assert!(DataFileName::parse("data_1_2_x_3").is_err());
        // Three trailing numbers fit no manifest kind.
        assert!(ArchiveName::parse("manifest_v_1_2_3").is_err());
        // A non-numeric segment after the term is not a branch continuation.
        assert!(ManifestName::parse("manifest_a_1_b").is_err());
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = ManifestName::parse("manifest_main_05").unwrap_err();
        assert_eq!(e.kind, NameKind::Manifest);
        assert_eq!(e.offset, 14);
        assert_eq!(e.field, Some("term"));
        assert_eq!(e.failure, ParseFailure::Number(NumberError::LeadingZero));
        assert_eq!(
            e.to_string(),
            "malformed manifest name \"manifest_main_05\": at byte 14 (term): number has a leading zero"
        );

        let e = ManifestName::parse("manifest_Main_5").unwrap_err();
        assert_eq!(e.offset, 9);
        assert_eq!(e.field, Some("branch name"));
        assert_eq!(
            e.failure,
            ParseFailure::Ident(NameError::ReservedSpelling {
                name: "Main".into()
            })
        );

        let e = DataFileName::parse("data_1_main_18446744073709551616").unwrap_err();
        assert_eq!(e.field, Some("term"));
        assert_eq!(
            e.failure,
            ParseFailure::Number(NumberError::Overflow { max: u64::MAX })
        );

        let e = DataFileName::parse("data_abc_5").unwrap_err();
        assert_eq!((e.offset, e.field), (5, Some("file id")));
        assert_eq!(e.failure, ParseFailure::Syntax);

        let e = ManifestName::parse("manifest_main").unwrap_err();
        assert_eq!((e.offset, e.field), (13, Some("term")));

        let e = ManifestName::parse("manifest_main_5_6").unwrap_err();
        assert_eq!((e.offset, e.field), (15, Some("end of name")));

        let long = format!("manifest_{}_1", "b".repeat(65));
        let e = ManifestName::parse(&long).unwrap_err();
        assert!(
            matches!(e.failure, ParseFailure::Ident(NameError::TooLong { .. })),
            "{e}"
        );
    }

    #[test]
    fn malformed_names_rejected() {
        for s in [
            "",
            "manifest_",
            "manifest_main",
            "manifest_main_",
            "manifest__5",
            "manifest_5",
            "manifest_main__5",
            "manifest_main_05",
            "manifest_main_-5",
            "manifest_main_+5",
            "manifest_main_5 ",
            " manifest_main_5",
            "manifest_Main_5",
            "manifest_MAIN_5",
            "manifest_ma.in_5",
            "manifest_main_18446744073709551616",
            "Manifest_main_5",
            "manifest-main-5",
            "manifest_main_5x",
            "manifest_main_5_",
        ] {
            assert!(ManifestName::parse(s).is_err(), "{s:?}");
            assert!(ArchiveName::parse(s).is_err(), "{s:?}");
        }
        for s in [
            "data_",
            "data_abc_5",
            "data_10_main",
            "data_10__5",
            "data_010_main_5",
            "data_10_main_05",
            "data__main_5",
            "data_10_main_5_6",
            "data_1_main_18446744073709551616",
            "data_18446744073709551616_main_1",
            "data_10_mAin_5",
            "data_10_main_5.tmp",
        ] {
            assert!(DataFileName::parse(s).is_err(), "{s:?}");
        }
        for s in [
            "CURRENT_TERM",
            "CURRENT_TERM.",
            "CURRENT_TERM.Main",
            "CURRENT_TERM.a.b",
            "CURRENT_TERM.v_1",
            "CURRENT_TERM._x",
            "current_term.main",
            "CURRENT_TERM_main",
        ] {
            assert!(CurrentTermName::parse(s).is_err(), "{s:?}");
        }
    }

    #[test]
    fn extremes_round_trip() {
        let max = u64::MAX;
        let long = b(&"z".repeat(64));
        let n = ArchiveName::new(long.clone(), max, max);
        assert_eq!(ArchiveName::parse(&n.to_string()), Ok(n));
        let n = DataFileName::new(0, long.clone(), 0);
        assert_eq!(DataFileName::parse(&n.to_string()), Ok(n));
        let n = TmpName::new(CurrentTermName::new(long), max);
        assert_eq!(TmpName::parse(&n.to_string()), Ok(n));
    }

    #[test]
    fn tmp_names() {
        round_trip(
            "manifest_main_5.7.tmp",
            TmpName::parse,
            TmpName::new(ManifestName::new(BranchName::main(), 5), 7),
        );
        round_trip(
            "manifest_v_1_2.0.tmp",
            TmpName::parse,
            TmpName::new(ArchiveName::new(b("v"), 1, 2), 0),
        );
        round_trip(
            "data_10_feature_5.99.tmp",
            TmpName::parse,
            TmpName::new(DataFileName::new(10, b("feature"), 5), 99),
        );
        round_trip(
            "CURRENT_TERM.main.3.tmp",
            TmpName::parse,
            TmpName::new(CurrentTermName::new(BranchName::main()), 3),
        );
        let n = TmpName::new(ManifestName::new(b("f"), 1), 2);
        assert_eq!(n.target.to_string(), "manifest_f_1");
        assert_eq!(n.target.branch().map(BranchName::as_str), Some("f"));
        for s in [
            "manifest_main_5.tmp",
            "manifest_main_5..tmp",
            "manifest_main_5.07.tmp",
            "manifest_main_5.7",
            "manifest_main_5.7.tmp.tmp",
            "manifest_main_5.7.TMP",
            "CURRENT_TERM.main.tmp",
            "LOCK.1.tmp",
            "foo.1.tmp",
            ".1.tmp",
            "data_1_main_2.1.2.tmp",
        ] {
            assert!(TmpName::parse(s).is_err(), "{s:?}");
        }
    }

    #[test]
    fn partition_dirs() {
        round_trip("t.0", PartitionDir::parse, PartitionDir::new(t("t"), 0));
        round_trip(
            "orders.17",
            PartitionDir::parse,
            PartitionDir::new(t("orders"), 17),
        );
        // Split at the last dot: the table keeps its own dots, digits included.
        round_trip("a.b.3", PartitionDir::parse, PartitionDir::new(t("a.b"), 3));
        round_trip(
            "v1.2.3",
            PartitionDir::parse,
            PartitionDir::new(t("v1.2"), 3),
        );
        round_trip(
            "t.01.5",
            PartitionDir::parse,
            PartitionDir::new(t("t.01"), 5),
        );
        round_trip(
            "t.4294967295",
            PartitionDir::parse,
            PartitionDir::new(t("t"), u32::MAX),
        );
        for s in [
            "",
            "t",
            "t.",
            ".5",
            "t..5",
            "..5",
            "t.05",
            "t.-1",
            "t.5a",
            "t.4294967296",
            "a/b.1",
            "../x.1",
            "a\\b.1",
            "a\0.1",
            "LOCK",
        ] {
            assert!(PartitionDir::parse(s).is_err(), "{s:?}");
        }
        let e = PartitionDir::parse("t.4294967296").unwrap_err();
        assert_eq!(e.field, Some("partition id"));
        assert_eq!(
            e.failure,
            ParseFailure::Number(NumberError::Overflow {
                max: u64::from(u32::MAX)
            })
        );
        let e = PartitionDir::parse("a/b.1").unwrap_err();
        assert_eq!(e.field, Some("table name"));
        assert!(
            matches!(
                e.failure,
                ParseFailure::Ident(NameError::InvalidChar { ch: '/', .. })
            ),
            "{e}"
        );
    }

    #[test]
    fn from_str_matches_parse() {
        assert_eq!(
            "data_1_main_2".parse::<DataFileName>(),
            DataFileName::parse("data_1_main_2")
        );
        assert!("x".parse::<TmpName>().is_err());
    }
}
