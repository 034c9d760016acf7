//! What a command works on: `TABLE.PART[@BRANCH]` targets, table-or-partition scopes, and
//! the one branch resolver every command uses.
//!
//! A branch can be named in several places at once — the `@BRANCH` of a target, `--branch`,
//! a command's own argument (`branch delete NAME`, `branch create --from`). The resolver
//! takes every place that named one: when they agree (or only one is given) that branch is
//! used, when none is given it is `main`, and when two name different branches the command
//! is refused rather than guessing which one was meant.

use bough::{ArchiveName, Branch};
use bough_names::{BranchName, PartitionDir, PartitionId, TableName};

use crate::error::{CliError, CliResult};

/// One partition of one table, and a branch of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The table.
    pub table: String,
    /// The partition.
    pub partition: PartitionId,
    /// The resolved branch.
    pub branch: String,
}

impl Target {
    /// `table.partition`.
    pub fn dir(&self) -> String {
        format!("{}.{}", self.table, self.partition)
    }

    /// `table.partition@branch`.
    pub fn label(&self) -> String {
        format!("{}.{}@{}", self.table, self.partition, self.branch)
    }
}

/// A user's argument for a message: escaped (control characters cannot forge lines or move
/// the cursor) and cut short (a 300-byte name stays readable). Arguments are never echoed
/// any other way.
pub fn shown(s: &str) -> String {
    const LIMIT: usize = 80;
    let escaped = crate::output::escape(s.as_bytes());
    match escaped.char_indices().nth(LIMIT) {
        None => escaped,
        Some((cut, _)) => format!("{}… ({} bytes)", &escaped[..cut], s.len()),
    }
}

/// Splits `TABLE.PART[@BRANCH]` into the partition and the branch written after `@`.
pub fn split_target(s: &str) -> CliResult<(PartitionDir, Option<String>)> {
    let (part, branch) = match s.split_once('@') {
        Some((p, b)) => (p, Some(b)),
        None => (s, None),
    };
    if let Some(b) = branch
        && (b.is_empty() || b.contains('@'))
    {
        return Err(CliError::usage(format!(
            "`{}`: write TABLE.PARTITION@BRANCH with one branch name after `@`",
            shown(s)
        )));
    }
    Ok((partition(part)?, branch.map(String::from)))
}

/// Parses `TABLE.PARTITION` (split at the last `.`).
pub fn partition(s: &str) -> CliResult<PartitionDir> {
    PartitionDir::parse(s).map_err(|e| {
        let hint = if s.contains('.') {
            "the part after the last `.` is the partition number, e.g. `orders.0`"
        } else {
            "add the partition number after a dot, e.g. `orders.0`"
        };
        CliError::usage(format!("`{}` is not TABLE.PARTITION: {e}", shown(s))).hint(hint)
    })
}

/// A table name.
pub fn table(s: &str) -> CliResult<TableName> {
    // The error shows the name (escaped); echoing it raw first would defeat that.
    TableName::new(s).map_err(|e| CliError::usage(e.to_string()))
}

/// A whole table or one partition of it: `orders` or `orders.3`. A name whose last
/// `.`-segment is a number is a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every partition of a table.
    Table(String),
    /// One partition.
    Partition(PartitionDir),
}

/// Parses a [`Scope`].
pub fn scope(s: &str) -> CliResult<Scope> {
    match PartitionDir::parse(s) {
        Ok(p) => Ok(Scope::Partition(p)),
        Err(_) => Ok(Scope::Table(table(s)?.as_str().to_string())),
    }
}

/// Checks a branch name, naming where it came from.
pub fn branch_name(name: &str, source: &str) -> CliResult<BranchName> {
    BranchName::new(name).map_err(|e| {
        let err = CliError::usage(format!("{source}: {e}"));
        if name.starts_with('-') {
            err.hint("branch names cannot start with `-`; choose another name")
        } else {
            err
        }
    })
}

/// The branch resolver. `named` lists every place that may name the branch, as
/// (description, name); the result is the one branch they all name, `main` if none does.
/// Two different names are refused.
pub fn resolve_branch(named: &[(&str, Option<&str>)]) -> CliResult<String> {
    let mut chosen: Option<(&str, &str)> = None;
    for &(source, name) in named {
        let Some(name) = name else { continue };
        branch_name(name, source)?;
        match chosen {
            None => chosen = Some((source, name)),
            Some((first_source, first)) if first != name => {
                return Err(CliError::usage(format!(
                    "conflicting branch names: {first_source} names `{first}` but {source} names \
                     `{name}`"
                ))
                .hint("name the branch once (either TABLE.PART@BRANCH or --branch), or make both agree"));
            }
            Some(_) => {}
        }
    }
    Ok(chosen.map_or_else(|| "main".to_string(), |(_, n)| n.to_string()))
}

/// Resolves a `TABLE.PART[@BRANCH]` target together with `--branch` and any other place the
/// command lets the branch be named.
pub fn resolve(
    target: &str,
    flag: Option<&str>,
    others: &[(&str, Option<&str>)],
) -> CliResult<Target> {
    let (dir, at) = split_target(target)?;
    let at_source = format!("`{}`", shown(target));
    let mut named: Vec<(&str, Option<&str>)> = others.to_vec();
    named.push((at_source.as_str(), at.as_deref()));
    named.push(("--branch", flag));
    let branch = resolve_branch(&named)?;
    Ok(Target {
        table: dir.table.as_str().to_string(),
        partition: dir.partition,
        branch,
    })
}

/// A target that must not carry a branch (commands that name their branches otherwise,
/// such as `diff A B TABLE.PART`).
pub fn plain_partition(target: &str, what: &str) -> CliResult<PartitionDir> {
    let (dir, at) = split_target(target)?;
    if let Some(b) = at {
        return Err(CliError::usage(format!(
            "`{}` names branch `{}`, but {what} names its branches as arguments",
            shown(target),
            shown(&b)
        ))
        .hint(format!("write just `{dir}`")));
    }
    Ok(dir)
}

/// Finds an archive by file name or timestamp.
pub(crate) fn find_archive(branch: &Branch, arg: &str) -> CliResult<ArchiveName> {
    find_archive_in(branch.archives()?, branch.label(), arg)
}

/// The archive `arg` names (file name or timestamp) among `archives` of `label`.
pub(crate) fn find_archive_in(
    archives: Vec<ArchiveName>,
    label: &str,
    arg: &str,
) -> CliResult<ArchiveName> {
    let found = match ArchiveName::parse(arg) {
        Ok(a) => archives.into_iter().find(|x| *x == a),
        Err(_) => match arg.parse::<u64>() {
            Ok(ts) => archives.into_iter().find(|x| x.timestamp == ts),
            Err(_) => {
                return Err(CliError::usage(format!(
                    "`{}` is neither an archive name (manifest_<branch>_<term>_<ts>) nor a timestamp",
                    shown(arg)
                )));
            }
        },
    };
    found.ok_or_else(|| {
        CliError::not_found(format!("{label} has no archive `{}`", shown(arg)))
            .hint(format!("list them with `bough archive list {label}`"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_resolver_for_every_place_a_branch_is_named() {
        let t = resolve("orders.3", None, &[]).unwrap();
        assert_eq!(
            (t.table.as_str(), t.partition, t.branch.as_str()),
            ("orders", 3, "main")
        );
        assert_eq!(resolve("orders.3@feat", None, &[]).unwrap().branch, "feat");
        assert_eq!(
            resolve("orders.3", Some("feat"), &[]).unwrap().branch,
            "feat"
        );
        // Both forms naming the same branch is fine; different branches are refused.
        assert_eq!(
            resolve("orders.3@feat", Some("feat"), &[]).unwrap().branch,
            "feat"
        );
        let e = resolve("orders.3@feat", Some("main"), &[]).unwrap_err();
        assert_eq!(e.code, crate::error::code::USAGE);
        assert!(e.message.contains("conflicting branch names"), "{e}");
        assert!(
            e.message.contains("feat") && e.message.contains("main"),
            "{e}"
        );
        // A command's own argument takes part too.
        let e = resolve("orders.3@a", None, &[("--from", Some("b"))]).unwrap_err();
        assert!(e.message.contains("--from"), "{e}");
        assert_eq!(
            resolve("orders.3", None, &[("--from", Some("b"))])
                .unwrap()
                .branch,
            "b"
        );
        // Tables may contain dots; the partition is after the last one.
        let t = resolve("eu.orders.12@x", None, &[]).unwrap();
        assert_eq!((t.table.as_str(), t.partition), ("eu.orders", 12));
    }

    #[test]
    fn bad_targets_and_names_are_refused() {
        for bad in [
            "orders",
            "orders.x",
            "orders.3@",
            "orders.3@a@b",
            ".3",
            "orders.-1",
        ] {
            assert!(resolve(bad, None, &[]).is_err(), "{bad}");
        }
        for bad in ["Main", "a__b", "v_1", "2024", "has space", "-x"] {
            let e = resolve("t.0", Some(bad), &[]).unwrap_err();
            assert!(e.message.contains("invalid branch"), "{bad}: {e}");
        }
        assert!(plain_partition("t.0@x", "diff").is_err());
        assert_eq!(
            scope("t.0").unwrap(),
            Scope::Partition(partition("t.0").unwrap())
        );
        assert_eq!(scope("t").unwrap(), Scope::Table("t".into()));
        assert!(scope("..").is_err());
    }
}
