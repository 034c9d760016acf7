//! Validated identifiers chosen by users: branch names and table names.
//!
//! Both end up inside file or directory names, so validation is about two
//! things: the name must be safe as a path component on every file system and
//! object store we target, and it must not make the file-name grammar
//! ambiguous (see the crate documentation).

use std::borrow::Borrow;
use std::fmt;
use std::str::FromStr;

/// Spelling of the primary branch.
pub const MAIN_BRANCH: &str = "main";
/// Longest branch name, in bytes (branch names are ASCII, so also characters).
pub const MAX_BRANCH_LEN: usize = 64;
/// Longest table name, in bytes (table names are ASCII, so also characters).
pub const MAX_TABLE_LEN: usize = 128;

/// Which kind of user-chosen identifier a [`NameError`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IdentKind {
    /// A [`BranchName`].
    Branch,
    /// A [`TableName`].
    Table,
}

impl fmt::Display for IdentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IdentKind::Branch => "branch",
            IdentKind::Table => "table",
        })
    }
}

/// Why a branch or table name was refused. Each variant names one rule.
///
/// Positions are byte offsets into the refused name.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameError {
    /// The name is empty.
    Empty {
        /// Branch or table.
        kind: IdentKind,
    },
    /// The name is longer than `max` bytes.
    TooLong {
        /// Branch or table.
        kind: IdentKind,
        /// The refused name.
        name: String,
        /// Longest allowed length, in bytes.
        max: usize,
        /// Actual length, in bytes.
        len: usize,
    },
    /// The name holds a character outside its alphabet.
    InvalidChar {
        /// Branch or table.
        kind: IdentKind,
        /// The refused name.
        name: String,
        /// The first offending character.
        ch: char,
        /// Its byte offset.
        pos: usize,
    },
    /// A branch name spelled like `main` in another case (`Main`, `MAIN`):
    /// on a case-insensitive store it would alias the primary branch.
    ReservedSpelling {
        /// The refused name.
        name: String,
    },
    /// A branch name with an empty `_`-separated segment (leading, trailing or
    /// doubled `_`).
    EmptySegment {
        /// The refused name.
        name: String,
        /// Byte offset where the empty segment starts.
        pos: usize,
    },
    /// A branch name with a `_`-separated segment made only of digits; such a
    /// segment would be read as a term or file id inside a file name.
    NumericSegment {
        /// The refused name.
        name: String,
        /// The all-digit segment.
        segment: String,
    },
    /// A table name that is `.` or `..`, starts or ends with `.`, or holds
    /// `..`; such names could escape or alias the store directory.
    DotRule {
        /// The refused name.
        name: String,
        /// Byte offset of the offending dot.
        pos: usize,
    },
    /// A name starting with `-`: on a command line it reads as an option, so it could not
    /// be named (or deleted) without `--`.
    LeadingDash {
        /// Branch or table.
        kind: IdentKind,
        /// The refused name.
        name: String,
    },
}

impl NameError {
    /// Whether the error is about a branch or a table name.
    pub fn ident_kind(&self) -> IdentKind {
        match self {
            NameError::Empty { kind }
            | NameError::TooLong { kind, .. }
            | NameError::InvalidChar { kind, .. }
            | NameError::LeadingDash { kind, .. } => *kind,
            NameError::ReservedSpelling { .. }
            | NameError::EmptySegment { .. }
            | NameError::NumericSegment { .. } => IdentKind::Branch,
            NameError::DotRule { .. } => IdentKind::Table,
        }
    }
}

/// Shows a possibly hostile name in a message: escaped (so control characters
/// cannot forge log lines) and cut short (so a huge input stays readable).
pub(crate) struct Shown<'a>(pub(crate) &'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const LIMIT: usize = 96;
        match self.0.char_indices().nth(LIMIT) {
            None => write!(f, "{:?}", self.0),
            Some((cut, _)) => write!(f, "{:?}...", &self.0[..cut]),
        }
    }
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = self.ident_kind();
        match self {
            NameError::Empty { .. } => write!(f, "invalid {kind} name: empty"),
            NameError::TooLong { name, max, len, .. } => write!(
                f,
                "invalid {kind} name {}: {len} bytes long, at most {max} allowed",
                Shown(name)
            ),
            NameError::InvalidChar { name, ch, pos, .. } => {
                let allowed = match kind {
                    IdentKind::Branch => "[a-zA-Z0-9_-]",
                    IdentKind::Table => "[a-zA-Z0-9_.-]",
                };
                write!(
                    f,
                    "invalid {kind} name {}: character {ch:?} at byte {pos} is not in {allowed}",
                    Shown(name)
                )
            }
            NameError::ReservedSpelling { name } => write!(
                f,
                "invalid {kind} name {}: a case variant of the reserved name \"{MAIN_BRANCH}\"",
                Shown(name)
            ),
            NameError::EmptySegment { name, pos } => write!(
                f,
                "invalid {kind} name {}: empty '_'-separated segment at byte {pos}",
                Shown(name)
            ),
            NameError::NumericSegment { name, segment } => write!(
                f,
                "invalid {kind} name {}: segment {} is all digits",
                Shown(name),
                Shown(segment)
            ),
            NameError::DotRule { name, pos } => write!(
                f,
                "invalid {kind} name {}: '.' at byte {pos} is leading, trailing or doubled",
                Shown(name)
            ),
            NameError::LeadingDash { name, .. } => write!(
                f,
                "invalid {kind} name {}: starts with '-', which a command line reads as an option",
                Shown(name)
            ),
        }
    }
}

impl std::error::Error for NameError {}

/// Common checks: non-empty, alphabet, then length. The alphabet is checked
/// before the length so the error names a bad character rather than a byte
/// count inflated by multi-byte characters.
fn check_common(
    kind: IdentKind,
    name: &str,
    max: usize,
    allowed: impl Fn(char) -> bool,
) -> Result<(), NameError> {
    if name.is_empty() {
        return Err(NameError::Empty { kind });
    }
    if let Some((pos, ch)) = name.char_indices().find(|&(_, c)| !allowed(c)) {
        return Err(NameError::InvalidChar {
            kind,
            name: name.to_owned(),
            ch,
            pos,
        });
    }
    if name.len() > max {
        return Err(NameError::TooLong {
            kind,
            name: name.to_owned(),
            max,
            len: name.len(),
        });
    }
    if name.starts_with('-') {
        return Err(NameError::LeadingDash {
            kind,
            name: name.to_owned(),
        });
    }
    Ok(())
}

pub(crate) fn is_branch_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

fn is_table_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'
}

pub(crate) fn is_all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// A validated branch name.
///
/// Alphabet `[a-zA-Z0-9_-]`, 1 to [`MAX_BRANCH_LEN`] bytes, not starting with `-`. `main` names the
/// primary branch and must be spelled exactly so. No `_`-separated segment may
/// be empty or all digits, which is what keeps names such as
/// `manifest_<branch>_<term>_<ts>` unambiguous.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct BranchName(String);

impl BranchName {
    /// Validates `name` as a branch name.
    pub fn new(name: &str) -> Result<BranchName, NameError> {
        validate_branch(name)?;
        Ok(BranchName(name.to_owned()))
    }

    /// The primary branch, `main`.
    pub fn main() -> BranchName {
        BranchName(MAIN_BRANCH.to_owned())
    }

    /// Whether this is the primary branch.
    pub fn is_main(&self) -> bool {
        self.0 == MAIN_BRANCH
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// ASCII-lowercased name. Two branches with the same key would collide on
    /// a case-insensitive store, so a catalog should refuse a new branch whose
    /// key equals an existing branch's key.
    pub fn case_fold_key(&self) -> String {
        self.0.to_ascii_lowercase()
    }
}

/// The one rule for names that alias: the existing name `name` would collide with, if any —
/// the same name, or one that differs only in ASCII case (the two would name the same files
/// on a case-insensitive store). Branches and tags share one name space, so the catalog asks
/// this of every branch and tag before it creates either; a name that aliases is refused, a
/// lookup never picks one of two candidates.
pub fn alias_of<'a>(
    name: &BranchName,
    existing: impl IntoIterator<Item = &'a BranchName>,
) -> Option<&'a BranchName> {
    let fold = name.case_fold_key();
    let mut folded = None;
    for e in existing {
        if e == name {
            return Some(e);
        }
        if folded.is_none() && e.case_fold_key() == fold {
            folded = Some(e);
        }
    }
    folded
}

fn validate_branch(name: &str) -> Result<(), NameError> {
    check_common(IdentKind::Branch, name, MAX_BRANCH_LEN, is_branch_char)?;
    if name != MAIN_BRANCH && name.eq_ignore_ascii_case(MAIN_BRANCH) {
        return Err(NameError::ReservedSpelling {
            name: name.to_owned(),
        });
    }
    let mut pos = 0;
    for segment in name.split('_') {
        if segment.is_empty() {
            return Err(NameError::EmptySegment {
                name: name.to_owned(),
                pos,
            });
        }
        if is_all_digits(segment) {
            return Err(NameError::NumericSegment {
                name: name.to_owned(),
                segment: segment.to_owned(),
            });
        }
        pos += segment.len() + 1;
    }
    Ok(())
}

impl fmt::Display for BranchName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for BranchName {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BranchName::new(s)
    }
}

impl TryFrom<String> for BranchName {
    type Error = NameError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        validate_branch(&s)?;
        Ok(BranchName(s))
    }
}

impl AsRef<str> for BranchName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

// Sound because Eq/Ord/Hash are derived from the inner String.
impl Borrow<str> for BranchName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// A validated table name, safe as the first part of a directory name.
///
/// Alphabet `[a-zA-Z0-9_.-]`, 1 to [`MAX_TABLE_LEN`] bytes, not starting with `-`; no leading or
/// trailing `.` and no `..`, so `.`, `..` and anything with a path separator
/// or NUL are refused and the name can never leave the store directory.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct TableName(String);

impl TableName {
    /// Validates `name` as a table name.
    pub fn new(name: &str) -> Result<TableName, NameError> {
        validate_table(name)?;
        Ok(TableName(name.to_owned()))
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn validate_table(name: &str) -> Result<(), NameError> {
    check_common(IdentKind::Table, name, MAX_TABLE_LEN, is_table_char)?;
    // Leading dot: `.`, `..` and hidden files. Trailing dot: silently stripped
    // by Windows, so `t.` would alias `t`. Inner `..`: keeps that sequence out
    // of every path built from a table name, as defence in depth.
    let bad = if name.starts_with('.') {
        Some(0)
    } else if let Some(p) = name.find("..") {
        Some(p)
    } else if name.ends_with('.') {
        Some(name.len() - 1)
    } else {
        None
    };
    match bad {
        Some(pos) => Err(NameError::DotRule {
            name: name.to_owned(),
            pos,
        }),
        None => Ok(()),
    }
}

impl fmt::Display for TableName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for TableName {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TableName::new(s)
    }
}

impl TryFrom<String> for TableName {
    type Error = NameError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        validate_table(&s)?;
        Ok(TableName(s))
    }
}

impl AsRef<str> for TableName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

// Sound because Eq/Ord/Hash are derived from the inner String.
impl Borrow<str> for TableName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn branch_err(s: &str) -> NameError {
        match BranchName::new(s) {
            Ok(b) => panic!("{s:?} accepted as branch {b}"),
            Err(e) => e,
        }
    }

    fn table_err(s: &str) -> NameError {
        match TableName::new(s) {
            Ok(t) => panic!("{s:?} accepted as table {t}"),
            Err(e) => e,
        }
    }

    #[test]
    fn valid_branches() {
        for s in [
            "main",
            "feature",
            "v1",
            "v-1",
            "release_v2",
            "1a",
            "a_b",
            "a-",
            "a_-",
            "x_-_-",
            "MAIN_x",
            "main_1a",
            "x-2024",
            "Feature-X_y",
        ] {
            let b = BranchName::new(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
            assert_eq!(b.as_str(), s);
            assert_eq!(b.to_string(), s);
            assert_eq!(s.parse::<BranchName>().as_ref(), Ok(&b));
        }
    }

    #[test]
    fn main_branch() {
        let m = BranchName::main();
        assert!(m.is_main());
        assert_eq!(m.as_str(), "main");
        assert_eq!(BranchName::new("main"), Ok(m));
        assert!(!BranchName::new("mainline").is_ok_and(|b| b.is_main()));
    }

    #[test]
    fn reserved_spellings_of_main() {
        for s in ["Main", "MAIN", "mAin", "maiN", "MaIn"] {
            assert_eq!(
                branch_err(s),
                NameError::ReservedSpelling { name: s.into() },
                "{s}"
            );
        }
    }

    #[test]
    fn branch_invalid_chars() {
        for (s, ch, pos) in [
            ("a.b", '.', 1),
            ("a/b", '/', 1),
            ("a b", ' ', 1),
            ("a\\b", '\\', 1),
            ("a\0", '\0', 1),
            ("é", 'é', 0),
            ("ab$", '$', 2),
            ("feat\n", '\n', 4),
        ] {
            assert_eq!(
                branch_err(s),
                NameError::InvalidChar {
                    kind: IdentKind::Branch,
                    name: s.into(),
                    ch,
                    pos
                },
                "{s:?}"
            );
        }
    }

    #[test]
    fn branch_length_bounds() {
        assert_eq!(
            branch_err(""),
            NameError::Empty {
                kind: IdentKind::Branch
            }
        );
        assert!(BranchName::new("a").is_ok());
        let ok = "a".repeat(64);
        assert!(BranchName::new(&ok).is_ok());
        let long = "a".repeat(65);
        assert_eq!(
            branch_err(&long),
            NameError::TooLong {
                kind: IdentKind::Branch,
                name: long.clone(),
                max: 64,
                len: 65
            }
        );
    }

    #[test]
    fn branch_segments() {
        for (s, pos) in [("_x", 0), ("x_", 2), ("a__b", 2), ("_", 0), ("__", 0)] {
            assert_eq!(
                branch_err(s),
                NameError::EmptySegment {
                    name: s.into(),
                    pos
                },
                "{s}"
            );
        }
        for (s, seg) in [
            ("v_1", "1"),
            ("2024", "2024"),
            ("0", "0"),
            ("a_05_b", "05"),
            ("1_a", "1"),
        ] {
            assert_eq!(
                branch_err(s),
                NameError::NumericSegment {
                    name: s.into(),
                    segment: seg.into()
                },
                "{s}"
            );
        }
    }

    /// A name starting with `-` reads as an option on a command line (`bough branch delete
    /// -x t.0` cannot name it without `--`), so neither kind of name may start with one.
    #[test]
    fn regression_names_starting_with_a_dash_are_refused() {
        for s in ["-", "-x", "-_-", "--force", "-1a"] {
            assert_eq!(
                branch_err(s),
                NameError::LeadingDash {
                    kind: IdentKind::Branch,
                    name: s.into()
                },
                "{s:?}"
            );
            assert_eq!(
                table_err(s),
                NameError::LeadingDash {
                    kind: IdentKind::Table,
                    name: s.into()
                },
                "{s:?}"
            );
        }
        assert_eq!(
            branch_err("-x").to_string(),
            "invalid branch name \"-x\": starts with '-', which a command line reads as an option"
        );
    }

    #[test]
    fn alias_of_finds_the_same_name_first_then_a_case_fold() {
        let names = [
            BranchName::new("Feat").unwrap(),
            BranchName::new("feat").unwrap(),
        ];
        let feat = BranchName::new("feat").unwrap();
        assert_eq!(alias_of(&feat, &names), Some(&names[1]));
        let fe_at = BranchName::new("FEAT").unwrap();
        assert_eq!(alias_of(&fe_at, &names), Some(&names[0]));
        assert_eq!(alias_of(&BranchName::new("other").unwrap(), &names), None);
    }

    #[test]
    fn case_fold_key() {
        let a = BranchName::new("Feature-X").unwrap_or_else(|e| panic!("{e}"));
        let b = BranchName::new("feature-x").unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(a, b);
        assert_eq!(a.case_fold_key(), b.case_fold_key());
        assert_eq!(BranchName::main().case_fold_key(), "main");
    }

    #[test]
    fn valid_tables() {
        for s in [
            "t", "orders", "a.b", "a-b_c.d", "v1.2.3", "a-", "_", "_-", "T0",
        ] {
            let t = TableName::new(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
            assert_eq!(t.as_str(), s);
            assert_eq!(t.to_string(), s);
        }
        assert!(TableName::new(&"t".repeat(128)).is_ok());
    }

    #[test]
    fn table_path_escapes() {
        for (s, ch, pos) in [
            ("a/b", '/', 1),
            ("/", '/', 0),
            ("a\\b", '\\', 1),
            ("a/../b", '/', 1),
            ("a\0", '\0', 1),
            ("a:b", ':', 1),
            ("a b", ' ', 1),
            ("ü", 'ü', 0),
        ] {
            assert_eq!(
                table_err(s),
                NameError::InvalidChar {
                    kind: IdentKind::Table,
                    name: s.into(),
                    ch,
                    pos
                },
                "{s:?}"
            );
        }
        for (s, pos) in [
            (".", 0),
            ("..", 0),
            (".hidden", 0),
            ("t.", 1),
            ("a..b", 1),
            ("a...", 1),
        ] {
            assert_eq!(
                table_err(s),
                NameError::DotRule {
                    name: s.into(),
                    pos
                },
                "{s:?}"
            );
        }
        assert_eq!(
            table_err(""),
            NameError::Empty {
                kind: IdentKind::Table
            }
        );
        let long = "t".repeat(129);
        assert_eq!(
            table_err(&long),
            NameError::TooLong {
                kind: IdentKind::Table,
                name: long.clone(),
                max: 128,
                len: 129
            }
        );
    }

    #[test]
    fn error_display_names_input_and_kind() {
        let e = branch_err("Main");
        assert_eq!(
            e.to_string(),
            "invalid branch name \"Main\": a case variant of the reserved name \"main\""
        );
        let e = table_err("a/b");
        assert_eq!(
            e.to_string(),
            "invalid table name \"a/b\": character '/' at byte 1 is not in [a-zA-Z0-9_.-]"
        );
        let e = branch_err("v_1");
        assert_eq!(
            e.to_string(),
            "invalid branch name \"v_1\": segment \"1\" is all digits"
        );
        // Control characters are escaped and huge names are shortened.
        let e = branch_err("a\nb");
        assert!(e.to_string().contains("\"a\\nb\""), "{e}");
        let e = branch_err(&"x".repeat(1000));
        assert!(e.to_string().len() < 200, "{e}");
    }
}
