//! nom parsers for every name, plus the error type they report.
//!
//! Every parser here works on a whole file or directory name. After a known
//! prefix has matched, the rest is wrapped in `cut` so that a malformed name
//! fails hard instead of being tried as another kind (and so the error points
//! at the real problem).

use std::fmt;

use nom::branch::alt;
use nom::bytes::complete::{tag, take_while1};
use nom::character::complete::digit1;
use nom::combinator::{cut, eof, map_res, opt, peek, recognize, verify};
use nom::error::{ContextError, ErrorKind, FromExternalError, ParseError, context};
use nom::multi::{many_till, separated_list1};
use nom::sequence::{preceded, terminated};
use nom::{IResult, Parser};

use crate::ident::{BranchName, NameError, Shown, TableName, is_all_digits};
use crate::names::{
    ArchiveName, CurrentTermName, DataFileName, HistoryName, LogFileName, ManifestName,
    PartitionDir, TableOpName, TableOpPart, TagFileName, TmpName, TmpTarget, TornTailName,
    VersionName, VersionTarget,
};
use crate::{
    CURRENT_TERM_PREFIX, DATA_PREFIX, GC_LEASE_FILE, HISTORY_PREFIX, LOG_PREFIX, MANIFEST_PREFIX,
    TABLE_OP_END_SUFFIX, TABLE_OP_PREFIX, TAG_PREFIX, TMP_SUFFIX, TORN_INFIX, VERSION_INFIX,
};

/// Why a number field was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NumberError {
    /// More than one digit and the first is `0`; refused so that each value
    /// has exactly one spelling.
    LeadingZero,
    /// The value does not fit the field's type.
    Overflow {
        /// Largest value the field holds.
        max: u64,
    },
}

impl fmt::Display for NumberError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NumberError::LeadingZero => f.write_str("number has a leading zero"),
            NumberError::Overflow { max } => write!(f, "number is larger than {max}"),
        }
    }
}

impl std::error::Error for NumberError {}

/// Which name a [`NameParseError`] was parsing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NameKind {
    /// `manifest_<branch>_<term>`
    Manifest,
    /// `manifest_<branch>_<term>_<ts>`
    Archive,
    /// `data_<file_id>_<branch>_<term>`
    Data,
    /// `wal_<log_id>_<branch>_<term>`
    Log,
    /// `history_<stamp>_<branch>_<term>`
    History,
    /// `CURRENT_TERM.<branch>`
    CurrentTerm,
    /// `tag_<name>`
    Tag,
    /// `tableop_<seq>[_end]`
    TableOp,
    /// `<inner>.<nonce>.tmp`
    Tmp,
    /// `<target>.v<version>`
    Version,
    /// `<manifest>.torn.<offset>.<n>`
    TornTail,
    /// `<table>.<partition_id>`
    PartitionDir,
    /// Any file name, as tried by [`crate::classify`].
    File,
}

impl fmt::Display for NameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameKind::Manifest => "manifest",
            NameKind::Archive => "archive",
            NameKind::Data => "data file",
            NameKind::Log => "log file",
            NameKind::History => "history point",
            NameKind::CurrentTerm => "CURRENT_TERM",
            NameKind::Tag => "tag",
            NameKind::TableOp => "table-wide operation record",
            NameKind::Tmp => "temporary file",
            NameKind::Version => "version",
            NameKind::TornTail => "kept-aside torn tail",
            NameKind::PartitionDir => "partition directory",
            NameKind::File => "file",
        })
    }
}

/// What went wrong at the failing position.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseFailure {
    /// The text does not follow the grammar.
    Syntax,
    /// A number field is not a canonical decimal of its type.
    Number(NumberError),
    /// The branch or table field is not a valid identifier.
    Ident(NameError),
}

impl fmt::Display for ParseFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseFailure::Syntax => f.write_str("does not match the grammar"),
            ParseFailure::Number(e) => e.fmt(f),
            ParseFailure::Ident(e) => e.fmt(f),
        }
    }
}

/// A string that is not a well-formed name of the expected kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameParseError {
    /// The kind of name that was expected.
    pub kind: NameKind,
    /// The whole refused input.
    pub input: String,
    /// Byte offset where parsing failed.
    pub offset: usize,
    /// The part of the name being parsed there (`"term"`, `"branch name"`,
    /// ...), when known.
    pub field: Option<&'static str>,
    /// What was wrong.
    pub failure: ParseFailure,
}

impl fmt::Display for NameParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "malformed {} name {}: at byte {}",
            self.kind,
            Shown(&self.input),
            self.offset
        )?;
        if let Some(field) = self.field {
            write!(f, " ({field})")?;
        }
        write!(f, ": {}", self.failure)
    }
}

impl std::error::Error for NameParseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.failure {
            ParseFailure::Syntax => None,
            ParseFailure::Number(e) => Some(e),
            ParseFailure::Ident(e) => Some(e),
        }
    }
}

/// The nom error type of this crate: remembers the innermost failure and the
/// innermost `context` label, which are the most specific ones.
#[derive(Debug)]
pub(crate) struct GErr<'a> {
    rest: &'a str,
    field: Option<&'static str>,
    failure: ParseFailure,
}

impl<'a> ParseError<&'a str> for GErr<'a> {
    fn from_error_kind(rest: &'a str, _kind: ErrorKind) -> Self {
        GErr {
            rest,
            field: None,
            failure: ParseFailure::Syntax,
        }
    }

    fn append(_: &'a str, _: ErrorKind, other: Self) -> Self {
        other
    }
}

impl<'a> ContextError<&'a str> for GErr<'a> {
    fn add_context(_: &'a str, ctx: &'static str, mut other: Self) -> Self {
        other.field.get_or_insert(ctx);
        other
    }
}

impl<'a> FromExternalError<&'a str, NumberError> for GErr<'a> {
    fn from_external_error(rest: &'a str, _: ErrorKind, e: NumberError) -> Self {
        GErr {
            rest,
            field: None,
            failure: ParseFailure::Number(e),
        }
    }
}

impl<'a> FromExternalError<&'a str, NameError> for GErr<'a> {
    fn from_external_error(rest: &'a str, _: ErrorKind, e: NameError) -> Self {
        GErr {
            rest,
            field: None,
            failure: ParseFailure::Ident(e),
        }
    }
}

type Res<'a, O> = IResult<&'a str, O, GErr<'a>>;

/// Runs `parser` over the whole of `input` and converts its error.
pub(crate) fn run<'a, O>(
    kind: NameKind,
    input: &'a str,
    parser: impl Parser<&'a str, Output = O, Error = GErr<'a>>,
) -> Result<O, NameParseError> {
    match terminated(parser, context("end of name", eof)).parse(input) {
        Ok((_, out)) => Ok(out),
        Err(nom::Err::Error(e) | nom::Err::Failure(e)) => Err(NameParseError {
            kind,
            input: input.to_owned(),
            offset: input.len().saturating_sub(e.rest.len()),
            field: e.field,
            failure: e.failure,
        }),
        // Only streaming parsers report Incomplete; all parsers here are
        // `complete`, but keep a sane answer rather than panic.
        Err(nom::Err::Incomplete(_)) => Err(NameParseError {
            kind,
            input: input.to_owned(),
            offset: input.len(),
            field: None,
            failure: ParseFailure::Syntax,
        }),
    }
}

/// Canonical decimal text to a number no larger than `max`.
fn canonical(digits: &str, max: u64) -> Result<u64, NumberError> {
    if digits.len() > 1 && digits.starts_with('0') {
        return Err(NumberError::LeadingZero);
    }
    match digits.parse::<u64>() {
        Ok(v) if v <= max => Ok(v),
        // `digits` is all ASCII digits, so the only parse failure is overflow.
        _ => Err(NumberError::Overflow { max }),
    }
}

fn dec_u64(i: &str) -> Res<'_, u64> {
    map_res(digit1, |d: &str| canonical(d, u64::MAX)).parse(i)
}

fn dec_u32(i: &str) -> Res<'_, u32> {
    const MAX: u64 = u32::MAX as u64;
    map_res(digit1, |d: &str| {
        canonical(d, MAX)
            .and_then(|v| u32::try_from(v).map_err(|_| NumberError::Overflow { max: MAX }))
    })
    .parse(i)
}

/// `"_" <number>` where, once the `_` is seen, only a number may follow.
fn sep_u64<'a>(field: &'static str) -> impl Parser<&'a str, Output = u64, Error = GErr<'a>> {
    context(field, preceded(tag("_"), cut(dec_u64)))
}

/// One `_`-free piece of a branch name that is not all digits. The first
/// all-digit piece therefore ends the branch: that is the term or file id.
fn word_segment(i: &str) -> Res<'_, &str> {
    verify(
        take_while1(|c: char| c.is_ascii_alphanumeric() || c == '-'),
        |s: &str| !is_all_digits(s),
    )
    .parse(i)
}

pub(crate) fn branch(i: &str) -> Res<'_, BranchName> {
    context(
        "branch name",
        map_res(
            recognize(separated_list1(tag("_"), word_segment)),
            BranchName::new,
        ),
    )
    .parse(i)
}

/// `manifest_<branch>_<term>[_<ts>]`: a manifest or an archive.
pub(crate) fn manifest_or_archive(i: &str) -> Res<'_, TmpTarget> {
    preceded(
        tag(MANIFEST_PREFIX),
        cut((branch, sep_u64("term"), opt(sep_u64("archive timestamp")))),
    )
    .map(|(branch, term, ts)| match ts {
        None => TmpTarget::Manifest(ManifestName { branch, term }),
        Some(timestamp) => TmpTarget::Archive(ArchiveName {
            branch,
            term,
            timestamp,
        }),
    })
    .parse(i)
}

pub(crate) fn manifest(i: &str) -> Res<'_, ManifestName> {
    preceded(tag(MANIFEST_PREFIX), cut((branch, sep_u64("term"))))
        .map(|(branch, term)| ManifestName { branch, term })
        .parse(i)
}

pub(crate) fn archive(i: &str) -> Res<'_, ArchiveName> {
    preceded(
        tag(MANIFEST_PREFIX),
        cut((branch, sep_u64("term"), sep_u64("archive timestamp"))),
    )
    .map(|(branch, term, timestamp)| ArchiveName {
        branch,
        term,
        timestamp,
    })
    .parse(i)
}

pub(crate) fn data(i: &str) -> Res<'_, DataFileName> {
    preceded(
        tag(DATA_PREFIX),
        cut((
            context("file id", dec_u64),
            preceded(tag("_"), branch),
            sep_u64("term"),
        )),
    )
    .map(|(file_id, branch, term)| DataFileName {
        file_id,
        branch,
        term,
    })
    .parse(i)
}

/// `wal_<log_id>_<branch>_<term>`: the same shape as a data name, so the same reading
/// rule (the first all-digit segment after the log id ends the branch) applies.
pub(crate) fn log(i: &str) -> Res<'_, LogFileName> {
    preceded(
        tag(LOG_PREFIX),
        cut((
            context("log id", dec_u64),
            preceded(tag("_"), branch),
            sep_u64("term"),
        )),
    )
    .map(|(log_id, branch, term)| LogFileName {
        log_id,
        branch,
        term,
    })
    .parse(i)
}

/// `history_<stamp>_<branch>_<term>`: the shape of a log name, read by the same rule.
pub(crate) fn history(i: &str) -> Res<'_, HistoryName> {
    preceded(
        tag(HISTORY_PREFIX),
        cut((
            context("history stamp", dec_u64),
            preceded(tag("_"), branch),
            sep_u64("term"),
        )),
    )
    .map(|(stamp, branch, term)| HistoryName {
        stamp,
        branch,
        term,
    })
    .parse(i)
}

pub(crate) fn current_term(i: &str) -> Res<'_, CurrentTermName> {
    preceded(tag(CURRENT_TERM_PREFIX), cut(branch))
        .map(|branch| CurrentTermName { branch })
        .parse(i)
}

/// `tag_<name>`: the whole rest is the tag's name (branch grammar), so nothing follows
/// it but a temporary-file suffix.
pub(crate) fn tag_file(i: &str) -> Res<'_, TagFileName> {
    preceded(tag(TAG_PREFIX), cut(branch))
        .map(|tag| TagFileName { tag })
        .parse(i)
}

/// `tableop_<seq>` or `tableop_<seq>_end`: a record of the store's branch registry.
pub(crate) fn table_op(i: &str) -> Res<'_, TableOpName> {
    preceded(
        tag(TABLE_OP_PREFIX),
        cut((
            context("sequence number", dec_u64),
            opt(tag(TABLE_OP_END_SUFFIX)),
        )),
    )
    .map(|(seq, end)| TableOpName {
        seq,
        part: if end.is_some() {
            TableOpPart::Outcome
        } else {
            TableOpPart::Intent
        },
    })
    .parse(i)
}

/// Anything that may be written through a temporary file.
pub(crate) fn tmp_target(i: &str) -> Res<'_, TmpTarget> {
    alt((
        tag_file.map(TmpTarget::Tag),
        // Before the plain manifest: a torn tail's name starts with one.
        torn_tail.map(TmpTarget::TornTail),
        manifest_or_archive,
        data.map(TmpTarget::Data),
        current_term.map(TmpTarget::CurrentTerm),
        table_op.map(TmpTarget::TableOp),
        history.map(TmpTarget::History),
    ))
    .parse(i)
}

/// `.<nonce>.tmp` after a target. Branch names hold no `.`, so the first `.`
/// after the target starts this suffix.
pub(crate) fn tmp_suffix(i: &str) -> Res<'_, u64> {
    preceded(
        tag("."),
        cut(terminated(
            context("nonce", dec_u64),
            context("\".tmp\" suffix", tag(TMP_SUFFIX)),
        )),
    )
    .parse(i)
}

pub(crate) fn tmp(i: &str) -> Res<'_, TmpName> {
    (tmp_target, tmp_suffix)
        .map(|(target, nonce)| TmpName { target, nonce })
        .parse(i)
}

/// `.v<version>` after a target. A nonce starts with a digit, so `.v` never begins a
/// temporary-file suffix; once `.v` is seen only a number may follow.
pub(crate) fn version_suffix(i: &str) -> Res<'_, u64> {
    preceded(tag(VERSION_INFIX), cut(context("version", dec_u64))).parse(i)
}

/// `.torn.<offset>.<n>` after a manifest name. `.t` starts neither a nonce (a digit) nor
/// a version (`v`); once `.torn.` is seen only the two numbers may follow.
pub(crate) fn torn_suffix(i: &str) -> Res<'_, (u64, u64)> {
    preceded(
        tag(TORN_INFIX),
        cut((
            context("offset", dec_u64),
            preceded(tag("."), context("tail number", dec_u64)),
        )),
    )
    .parse(i)
}

pub(crate) fn torn_tail(i: &str) -> Res<'_, TornTailName> {
    (manifest, torn_suffix)
        .map(|(manifest, (offset, n))| TornTailName {
            manifest,
            offset,
            n,
        })
        .parse(i)
}

/// The partition's GC lease, `GC_LEASE`.
pub(crate) fn gc_lease(i: &str) -> Res<'_, &str> {
    tag(GC_LEASE_FILE).parse(i)
}

/// Anything that may be kept as numbered versions.
pub(crate) fn version_target(i: &str) -> Res<'_, VersionTarget> {
    alt((
        manifest.map(VersionTarget::Manifest),
        current_term.map(VersionTarget::CurrentTerm),
        gc_lease.map(|_| VersionTarget::GcLease),
    ))
    .parse(i)
}

pub(crate) fn version(i: &str) -> Res<'_, VersionName> {
    (version_target, version_suffix)
        .map(|(target, version)| VersionName { target, version })
        .parse(i)
}

/// `<table>.<partition_id>`, split at the last `.`: the table is everything
/// before the one `.` that is followed by digits and then the end.
pub(crate) fn partition_dir(i: &str) -> Res<'_, PartitionDir> {
    let table_text = recognize(many_till(
        alt((take_while1(|c: char| c != '.'), tag("."))),
        peek((tag("."), digit1, eof)),
    ));
    (
        context("table name", map_res(table_text, TableName::new)),
        preceded(tag("."), cut(context("partition id", dec_u32))),
    )
        .map(|(table, partition)| PartitionDir { table, partition })
        .parse(i)
}

// Parsing entry points of the name types: the grammar is the only place names are read.

impl PartitionDir {
    /// Parses `<table>.<partition_id>`, splitting at the last `.`.
    pub fn parse(s: &str) -> Result<Self, NameParseError> {
        run(NameKind::PartitionDir, s, partition_dir)
    }
}

impl std::str::FromStr for PartitionDir {
    type Err = NameParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PartitionDir::parse(s)
    }
}

impl ManifestName {
    /// Parses `manifest_<branch>_<term>`; an archive name is refused.
    pub fn parse(s: &str) -> Result<Self, NameParseError> {
        run(NameKind::Manifest, s, manifest)
    }
}

impl std::str::FromStr for ManifestName {
    type Err = NameParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ManifestName::parse(s)
    }
}

impl ArchiveName {
    /// Parses `manifest_<branch>_<term>_<timestamp>`.
    pub fn parse(s: &str) -> Result<Self, NameParseError> {
        run(NameKind::Archive, s, archive)
    }
}

impl std::str::FromStr for ArchiveName {
    type Err = NameParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ArchiveName::parse(s)
    }
}

impl DataFileName {
    /// Parses `data_<file_id>_<branch>_<term>`.
    pub fn parse(s: &str) -> Result<Self, NameParseError> {
        run(NameKind::Data, s, data)
    }
}

impl std::str::FromStr for DataFileName {
    type Err = NameParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DataFileName::parse(s)
    }
}

impl LogFileName {
    /// Parses `wal_<log_id>_<branch>_<term>`.
    pub fn parse(s: &str) -> Result<Self, NameParseError> {
        run(NameKind::Log, s, log)
    }
}

impl std::str::FromStr for LogFileName {
    type Err = NameParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LogFileName::parse(s)
    }
}

impl HistoryName {
    /// Parses `history_<stamp>_<branch>_<term>`.
    pub fn parse(s: &str) -> Result<Self, NameParseError> {
        run(NameKind::History, s, history)
    }
}

impl std::str::FromStr for HistoryName {
    type Err = NameParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HistoryName::parse(s)
    }
}

impl CurrentTermName {
    /// Parses `CURRENT_TERM.<branch>`.
    pub fn parse(s: &str) -> Result<Self, NameParseError> {
        run(NameKind::CurrentTerm, s, current_term)
    }
}

impl std::str::FromStr for CurrentTermName {
    type Err = NameParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CurrentTermName::parse(s)
    }
}

impl VersionName {
    /// Parses `<target>.v<version>` (`target` a manifest, a CURRENT_TERM or `GC_LEASE`).
    pub fn parse(s: &str) -> Result<Self, NameParseError> {
        run(NameKind::Version, s, version)
    }
}

impl std::str::FromStr for VersionName {
    type Err = NameParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        VersionName::parse(s)
    }
}

impl TornTailName {
    /// Parses `<manifest>.torn.<offset>.<n>`.
    pub fn parse(s: &str) -> Result<Self, NameParseError> {
        run(NameKind::TornTail, s, torn_tail)
    }
}

impl std::str::FromStr for TornTailName {
    type Err = NameParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TornTailName::parse(s)
    }
}

impl TagFileName {
    /// Parses `tag_<name>`.
    pub fn parse(s: &str) -> Result<Self, NameParseError> {
        run(NameKind::Tag, s, tag_file)
    }
}

impl std::str::FromStr for TagFileName {
    type Err = NameParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TagFileName::parse(s)
    }
}

impl TableOpName {
    /// Parses `tableop_<seq>` or `tableop_<seq>_end`.
    pub fn parse(s: &str) -> Result<Self, NameParseError> {
        run(NameKind::TableOp, s, table_op)
    }
}

impl std::str::FromStr for TableOpName {
    type Err = NameParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TableOpName::parse(s)
    }
}

impl TmpName {
    /// Parses `<target>.<nonce>.tmp`.
    pub fn parse(s: &str) -> Result<Self, NameParseError> {
        run(NameKind::Tmp, s, tmp)
    }
}

impl std::str::FromStr for TmpName {
    type Err = NameParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TmpName::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_numbers() {
        assert_eq!(canonical("0", u64::MAX), Ok(0));
        assert_eq!(canonical("10", u64::MAX), Ok(10));
        assert_eq!(canonical("00", u64::MAX), Err(NumberError::LeadingZero));
        assert_eq!(canonical("05", u64::MAX), Err(NumberError::LeadingZero));
        assert_eq!(canonical("18446744073709551615", u64::MAX), Ok(u64::MAX));
        assert_eq!(
            canonical("18446744073709551616", u64::MAX),
            Err(NumberError::Overflow { max: u64::MAX })
        );
        assert_eq!(
            canonical("99999999999999999999999", u64::MAX),
            Err(NumberError::Overflow { max: u64::MAX })
        );
        assert!(dec_u32("4294967295").is_ok());
        assert!(dec_u32("4294967296").is_err());
        assert!(dec_u64("+1").is_err());
        assert!(dec_u64("-1").is_err());
        assert!(dec_u64("").is_err());
    }

    #[test]
    fn branch_parser_stops_at_first_numeric_segment() {
        let (rest, b) = branch("v_1_2").unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((b.as_str(), rest), ("v", "_1_2"));
        let (rest, b) = branch("a_b_3").unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((b.as_str(), rest), ("a_b", "_3"));
        let (rest, b) = branch("x-1_2a_7").unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((b.as_str(), rest), ("x-1_2a", "_7"));
        assert!(branch("5_x").is_err());
        assert!(branch("_x").is_err());
    }
}
