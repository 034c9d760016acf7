//! Check 7: each crate's dependencies are the ones ARCHITECTURE.md's layer table allows.
//!
//! The layer order ([`super::LAYERS`]) only says a crate may not depend *up*; the table says
//! which crates below each one it may use at all (the CLI, for one, is meant to stand on the
//! facade). The table in ARCHITECTURE.md is the single source: this check parses it, so the
//! document and the build cannot disagree. Normal and build dependencies must be allowed by
//! the table; dev-dependencies (tests) only by the layer order.

use std::collections::BTreeMap;

use super::{Problem, problem};
use crate::workspace::{CrateInfo, DepKind};

/// One row of the table: a crate, its layer label (`3b`), and what it may depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub layer: String,
    pub krate: String,
    pub may_depend_on: String,
}

/// The rows of the "| layer | crate | owns | may depend on |" table in `architecture`.
pub fn parse_table(architecture: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in architecture.lines() {
        let cells: Vec<&str> = line.trim().split('|').map(str::trim).collect();
        // A row "| a | b | c | d |" splits into ["", a, b, c, d, ""].
        if cells.len() != 6 {
            in_table = false;
            continue;
        }
        if cells[1] == "layer" && cells[4] == "may depend on" {
            in_table = true;
            continue;
        }
        if !in_table || cells[1].starts_with("---") {
            continue;
        }
        let krate = cells[2].trim_matches('`');
        rows.push(Row {
            layer: cells[1].to_string(),
            krate: krate.to_string(),
            may_depend_on: cells[4].to_string(),
        });
    }
    rows
}

/// The short name the table uses for a crate: `bough-tree` is `tree`, the facade `bough`.
fn short_name(krate: &str) -> &str {
    krate.strip_prefix("bough-").unwrap_or(krate)
}

/// The leading number of a layer label (`3b` → 3).
fn layer_number(layer: &str) -> Option<u32> {
    let digits: String = layer.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The crates `row` may depend on, or a description of the token that could not be read.
fn allowed(row: &Row, rows: &[Row]) -> Result<Vec<String>, String> {
    let spec = row.may_depend_on.as_str();
    if spec == "–" || spec == "-" || spec == "(tooling)" {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for token in spec.split(',').map(str::trim) {
        if let Some((lo, hi)) = token.split_once('–').or_else(|| token.split_once('-')) {
            let (Ok(lo), Ok(hi)) = (lo.trim().parse::<u32>(), hi.trim().parse::<u32>()) else {
                return Err(token.to_string());
            };
            let in_range = |r: &&Row| layer_number(&r.layer).is_some_and(|n| lo <= n && n <= hi);
            out.extend(rows.iter().filter(in_range).map(|r| r.krate.clone()));
        } else if let Some(r) = rows.iter().find(|r| r.layer == token) {
            out.push(r.krate.clone());
        } else if let Some(r) = rows.iter().find(|r| short_name(&r.krate) == token) {
            out.push(r.krate.clone());
        } else {
            return Err(token.to_string());
        }
    }
    Ok(out)
}

/// Check 7: every workspace crate has a row, every row a crate, and every normal or build
/// dependency on a workspace crate is one its row allows.
pub fn check_dependency_table(crates: &[CrateInfo], rows: &[Row]) -> Vec<Problem> {
    let mut problems = Vec::new();
    if rows.is_empty() {
        problems.push(problem(
            "dependency table",
            "ARCHITECTURE.md has no \"| layer | crate | owns | may depend on |\" table".into(),
        ));
        return problems;
    }
    let mut allowed_by_crate = BTreeMap::new();
    for row in rows {
        match allowed(row, rows) {
            Ok(list) => {
                allowed_by_crate.insert(row.krate.as_str(), list);
            }
            Err(token) => problems.push(problem(
                "dependency table",
                format!(
                    "ARCHITECTURE.md: `{}` may depend on \"{token}\", which names no layer or crate",
                    row.krate
                ),
            )),
        }
        if !crates.iter().any(|c| c.name == row.krate) {
            problems.push(problem(
                "dependency table",
                format!(
                    "ARCHITECTURE.md's table names `{}`, which is not a member",
                    row.krate
                ),
            ));
        }
    }
    let is_member = |name: &str| crates.iter().any(|c| c.name == name);
    for krate in crates {
        let Some(allowed) = allowed_by_crate.get(krate.name.as_str()) else {
            if rows.iter().all(|r| r.krate != krate.name) {
                problems.push(problem(
                    "dependency table",
                    format!(
                        "`{}` has no row in ARCHITECTURE.md's layer table",
                        krate.name
                    ),
                ));
            }
            continue;
        };
        for dep in &krate.deps {
            if dep.kind == DepKind::Dev || !is_member(&dep.name) || allowed.contains(&dep.name) {
                continue;
            }
            problems.push(problem(
                "dependency table",
                format!(
                    "`{}` has a {} on `{}`, which ARCHITECTURE.md's layer table does not \
                     allow (may depend on: {})",
                    krate.name,
                    dep.kind,
                    dep.name,
                    rows.iter()
                        .find(|r| r.krate == krate.name)
                        .map_or("", |r| r.may_depend_on.as_str())
                ),
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::Dep;

    const TABLE: &str = "\
intro
| layer | crate | owns | may depend on |
|---|---|---|---|
| 1 | `bough-names` | names | – |
| 2 | `bough-manifest` | format | names |
| 3 | `bough-io` | io | names, manifest |
| 3b | `bough-object` | cloud | names, manifest, io |
| 4 | `bough-tree` | tree | 1–3 |
| 7 | `bough` | facade | 1–4 |
| 7b | `bough-export` | export | manifest |
| 8 | `bough-cli` | cli | 7, 7b |
| – | `xtask` | tools | (tooling) |

after
";

    fn krate(name: &str, deps: &[(&str, DepKind)]) -> CrateInfo {
        CrateInfo {
            name: name.to_string(),
            dir: name.into(),
            publishable: true,
            deps: deps
                .iter()
                .map(|(n, kind)| Dep {
                    name: n.to_string(),
                    kind: *kind,
                })
                .collect(),
        }
    }

    fn members(cli_deps: &[(&str, DepKind)]) -> Vec<CrateInfo> {
        vec![
            krate("bough-names", &[]),
            krate("bough-manifest", &[("bough-names", DepKind::Normal)]),
            krate("bough-io", &[("bough-manifest", DepKind::Normal)]),
            krate("bough-object", &[("bough-io", DepKind::Normal)]),
            krate(
                "bough-tree",
                &[("bough-io", DepKind::Normal), ("crc", DepKind::Normal)],
            ),
            krate("bough", &[("bough-object", DepKind::Normal)]),
            krate("bough-export", &[("bough-manifest", DepKind::Normal)]),
            krate("bough-cli", cli_deps),
            krate("xtask", &[]),
        ]
    }

    #[test]
    fn parses_rows_with_ranges_labels_and_short_names() {
        let rows = parse_table(TABLE);
        assert_eq!(rows.len(), 9, "{rows:?}");
        let tree = rows
            .iter()
            .find(|r| r.krate == "bough-tree")
            .map(|r| allowed(r, &rows));
        assert_eq!(
            tree,
            Some(Ok(vec![
                "bough-names".into(),
                "bough-manifest".into(),
                "bough-io".into(),
                "bough-object".into()
            ]))
        );
        let cli = rows
            .iter()
            .find(|r| r.krate == "bough-cli")
            .map(|r| allowed(r, &rows));
        assert_eq!(cli, Some(Ok(vec!["bough".into(), "bough-export".into()])));
    }

    #[test]
    fn a_dependency_the_table_does_not_allow_is_a_problem() {
        let rows = parse_table(TABLE);
        let ok = members(&[("bough", DepKind::Normal), ("bough-tree", DepKind::Dev)]);
        assert!(check_dependency_table(&ok, &rows).is_empty());
        let bad = members(&[("bough", DepKind::Normal), ("bough-tree", DepKind::Normal)]);
        let found = check_dependency_table(&bad, &rows);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0]
                .message
                .contains("`bough-cli` has a normal dependency on `bough-tree`")
        );
    }

    #[test]
    fn rows_and_members_must_match_and_tokens_must_resolve() {
        let mut crates = members(&[]);
        crates.push(krate("bough-new", &[]));
        let table = TABLE.replace(
            "| 7b | `bough-export` | export | manifest |",
            "| 7b | `bough-export` | export | pages |",
        );
        let found = check_dependency_table(&crates, &parse_table(&table));
        assert!(
            found
                .iter()
                .any(|p| p.message.contains("`bough-new` has no row")),
            "{found:?}"
        );
        assert!(
            found.iter().any(|p| p.message.contains("\"pages\"")),
            "{found:?}"
        );
        assert_eq!(
            check_dependency_table(&crates, &[]).len(),
            1,
            "a missing table is one problem"
        );
    }
}
