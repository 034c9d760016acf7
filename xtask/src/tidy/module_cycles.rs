//! Check 8: no circle among the source files of a crate.
//!
//! A file names another when it takes an item from it by path: `use crate::a::b::X`,
//! `crate::a::f(..)` in code, `super::x::Y`, `self::x::Y`, or `use x::Y` for a `mod x;` it
//! declares; the file named is the one of the longest module prefix of the path (a
//! re-export counts for the file that re-exports). Between a file and the files of its own
//! ancestor modules nothing counts, either way: a parent holding what its children share and
//! re-exporting what they define is one unit by design, and so is the crate root. Glob
//! imports (`use super::*`) are not counted either. Comments and the unit tests after the
//! first top-level `#[cfg(test)]` are not read.
//!
//! Files that name each other in a circle are one room in all but name: neither can be
//! read, changed or tested without the other. Each circle is reported with what ties it.

use std::collections::{BTreeMap, BTreeSet};

use super::{Problem, SourceFile, problem};

/// A module path inside one crate (`[]` is the crate root).
type ModPath = Vec<String>;

/// One crate's files, by module path.
struct Crate<'a> {
    files: BTreeMap<ModPath, &'a SourceFile>,
}

/// Check 8 over already-read files: library code (`src/`) of every crate.
pub fn check_module_cycles(files: &[SourceFile]) -> Vec<Problem> {
    let mut crates: BTreeMap<&str, Crate<'_>> = BTreeMap::new();
    for f in files.iter().filter(|f| f.in_src) {
        let Some(m) = module_path(&f.path) else {
            continue;
        };
        let c = crates.entry(f.krate.as_str()).or_insert_with(|| Crate {
            files: BTreeMap::new(),
        });
        // A crate with both: `crate::` in the library's files means lib.rs.
        if m.is_empty() && c.files.contains_key(&m) && !f.path.ends_with("/lib.rs") {
            continue;
        }
        c.files.insert(m, f);
    }
    let mut problems = Vec::new();
    for (krate, c) in &crates {
        let edges = c.edges();
        for circle in circles(&edges) {
            let ties: Vec<String> = circle
                .iter()
                .flat_map(|from| {
                    edges[from]
                        .iter()
                        .filter(|(to, _)| circle.contains(to))
                        .map(move |(to, names)| {
                            let names: Vec<&str> = names.iter().map(String::as_str).collect();
                            format!("{from} -> {to} ({})", names.join(", "))
                        })
                })
                .collect();
            problems.push(problem(
                "module-cycles",
                format!(
                    "{krate}: {} files name each other in a circle: {}; move what both need \
                     into a file of its own, or where it is used",
                    circle.len(),
                    ties.join("; ")
                ),
            ));
        }
    }
    problems
}

/// The module path of a file under some `src/`, or `None` for files outside a module tree
/// (`src/bin/`).
fn module_path(path: &str) -> Option<ModPath> {
    let rel = &path[path.find("src/")? + 4..];
    let rel = rel.strip_suffix(".rs")?;
    if rel.starts_with("bin/") {
        return None;
    }
    let mut parts: ModPath = rel.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    Some(parts)
}

/// The lines of a file that count: before its unit tests, without comment lines.
fn code(text: &str) -> String {
    text.lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a piece of code names, each as written (`crate::a::B`, `super::c::D`,
/// `x::Y` for a declared child `x` in a `use`), groups expanded, globs left out; each with
/// whether a `use` declaration names it.
fn named_paths(code: &str, children: &BTreeSet<String>) -> Vec<(Vec<String>, bool)> {
    let mut out = Vec::new();
    let bytes: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let at_word = i == 0 || !(is_ident_char(bytes[i - 1]) || bytes[i - 1] == ':');
        if at_word && is_ident_char(bytes[i]) {
            let start = i;
            while i < bytes.len() && is_ident_char(bytes[i]) {
                i += 1;
            }
            let word: String = bytes[start..i].iter().collect();
            let rooted = matches!(word.as_str(), "crate" | "super" | "self");
            let is_path = bytes.get(i) == Some(&':') && bytes.get(i + 1) == Some(&':');
            if is_path && (rooted || children.contains(&word)) {
                // `x::` for a declared child module counts only in a `use` (in code, `x`
                // may be a local name).
                let in_use = in_use_statement(&bytes, start);
                if rooted || in_use {
                    let mut found = Vec::new();
                    path_from(&bytes, start, &mut i, vec![], &mut found);
                    out.extend(found.into_iter().map(|p| (p, in_use)));
                }
            }
            continue;
        }
        i += 1;
    }
    out
}

/// Whether position `at` is inside a `use` declaration (the statement it is in starts with
/// `use` or `pub use` / `pub(...) use`).
fn in_use_statement(bytes: &[char], at: usize) -> bool {
    let mut s = at;
    while s > 0 && !matches!(bytes[s - 1], ';' | '{' | '}') {
        s -= 1;
    }
    let stmt: String = bytes[s..at].iter().collect();
    let stmt = stmt.trim_start();
    let stmt = stmt
        .strip_prefix("pub(crate)")
        .or_else(|| stmt.strip_prefix("pub(super)"))
        .or_else(|| stmt.strip_prefix("pub"))
        .unwrap_or(stmt)
        .trim_start();
    stmt.starts_with("use ")
}

/// Reads `a::b::c`, `a::b::{c, d::e}` or `a::*` from `*i` (at `a`), pushing each named path
/// (after `prefix`) onto `out`; leaves `*i` after what it read.
fn path_from(
    bytes: &[char],
    start: usize,
    i: &mut usize,
    prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) {
    let mut path = prefix;
    *i = start;
    loop {
        let s = *i;
        while *i < bytes.len() && is_ident_char(bytes[*i]) {
            *i += 1;
        }
        if *i == s {
            break;
        }
        path.push(bytes[s..*i].iter().collect());
        if bytes.get(*i) == Some(&':') && bytes.get(*i + 1) == Some(&':') {
            *i += 2;
            match bytes.get(*i) {
                Some('*') => return,
                Some('{') => {
                    *i += 1;
                    group(bytes, i, &path, out);
                    return;
                }
                _ => continue,
            }
        }
        break;
    }
    out.push(path);
}

/// The items of a `{...}` group after `prefix`, `*i` just inside the brace.
fn group(bytes: &[char], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
    while *i < bytes.len() {
        match bytes[*i] {
            '}' => {
                *i += 1;
                return;
            }
            c if is_ident_char(c) => {
                let s = *i;
                let mut j = s;
                while j < bytes.len() && is_ident_char(bytes[j]) {
                    j += 1;
                }
                let word: String = bytes[s..j].iter().collect();
                if word == "self" {
                    out.push(prefix.to_vec());
                    *i = j;
                } else if word == "as" {
                    // `x as y`: the alias is no path.
                    *i = j;
                    while *i < bytes.len() && !matches!(bytes[*i], ',' | '}') {
                        *i += 1;
                    }
                } else {
                    path_from(bytes, s, i, prefix.to_vec(), out);
                }
            }
            _ => *i += 1,
        }
    }
}

/// `mod x;` declarations of a file.
fn child_modules(code: &str) -> BTreeSet<String> {
    code.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l
                .strip_prefix("pub(crate) mod ")
                .or_else(|| l.strip_prefix("pub mod "))
                .or_else(|| l.strip_prefix("mod "))?;
            let name = rest.strip_suffix(';')?.trim();
            name.chars().all(is_ident_char).then(|| name.to_string())
        })
        .collect()
}

impl Crate<'_> {
    /// For each file (by path), the files it names and the names it takes from each.
    fn edges(&self) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
        let mut edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
        for (m, f) in &self.files {
            let code = code(&f.text);
            let children = child_modules(&code);
            let from = edges.entry(f.path.clone()).or_default();
            for (p, _) in named_paths(&code, &children) {
                let Some(a) = absolute(m, &p) else {
                    continue;
                };
                let Some(k) = (0..=a.len())
                    .rev()
                    .find(|k| self.files.contains_key(&a[..*k]))
                else {
                    continue;
                };
                let home = &a[..k];
                // Itself, an ancestor or a descendant: one unit (see the module comment).
                if home.starts_with(m) || m.starts_with(home) {
                    continue;
                }
                let name = a.get(k).or(a.last()).cloned().unwrap_or_default();
                if let Some(to) = self.files.get(home) {
                    from.entry(to.path.clone()).or_default().insert(name);
                }
            }
        }
        edges
    }
}

/// `p` (as written in the file at module `m`) from the crate root.
fn absolute(m: &ModPath, p: &[String]) -> Option<ModPath> {
    let mut base: ModPath = m.clone();
    let mut rest = p;
    match p.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &p[1..];
        }
        Some("self") => rest = &p[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        // A declared child (`use x::Y` in the file declaring `mod x;`).
        _ => {}
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The circles of a graph: its strongly connected components of more than one node.
fn circles(edges: &BTreeMap<String, BTreeMap<String, BTreeSet<String>>>) -> Vec<Vec<String>> {
    // Kosaraju: finish order on the graph, then components on the reversed graph.
    let nodes: Vec<&String> = edges.keys().collect();
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    for n in &nodes {
        finish(n, edges, &mut seen, &mut order);
    }
    let mut reversed: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, tos) in edges {
        for to in tos.keys() {
            reversed.entry(to.as_str()).or_default().push(from.as_str());
        }
    }
    let mut assigned = BTreeSet::new();
    let mut out = Vec::new();
    for n in order.iter().rev() {
        if assigned.contains(n.as_str()) {
            continue;
        }
        let mut comp = Vec::new();
        let mut stack = vec![n.as_str()];
        assigned.insert(n.as_str());
        while let Some(x) = stack.pop() {
            comp.push(x.to_string());
            for y in reversed.get(x).into_iter().flatten() {
                if assigned.insert(y) {
                    stack.push(y);
                }
            }
        }
        if comp.len() > 1 {
            comp.sort();
            out.push(comp);
        }
    }
    out
}

/// Depth-first finish order (iterative: no recursion limit on a large crate).
fn finish<'a>(
    start: &'a String,
    edges: &'a BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    seen: &mut BTreeSet<&'a str>,
    order: &mut Vec<&'a String>,
) {
    if !seen.insert(start.as_str()) {
        return;
    }
    let mut stack: Vec<(&'a String, Vec<&'a String>)> =
        vec![(start, edges[start].keys().collect())];
    while let Some(top) = stack.last_mut() {
        match top.1.pop() {
            Some(y) => {
                if edges.contains_key(y) && seen.insert(y.as_str()) {
                    let ys = edges[y].keys().collect();
                    stack.push((y, ys));
                }
            }
            None => {
                if let Some((node, _)) = stack.pop() {
                    order.push(node);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> SourceFile {
        SourceFile {
            path: format!("crates/k/src/{path}"),
            krate: "k".to_string(),
            in_src: true,
            text: text.to_string(),
        }
    }

    #[test]
    fn two_files_naming_each_other_are_a_circle() {
        let files = [
            file("lib.rs", "mod a;\nmod b;\n"),
            file("a.rs", "use crate::b::B;\npub struct A;\n"),
            file("b.rs", "pub struct B;\nfn f() { crate::a::A; }\n"),
        ];
        let p = check_module_cycles(&files);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].message
                .contains("crates/k/src/a.rs -> crates/k/src/b.rs (B)"),
            "{}",
            p[0].message
        );
        assert!(
            p[0].message
                .contains("crates/k/src/b.rs -> crates/k/src/a.rs (A)"),
            "{}",
            p[0].message
        );
    }

    #[test]
    fn a_re_export_counts_for_the_file_that_re_exports_it() {
        let tree = "mod ops;\npub use ops::Op;\nuse ops::*;\nuse crate::rule::wins;\n";
        let files = [
            file("lib.rs", "mod tree;\nmod rule;\npub use tree::Op;\n"),
            file("tree.rs", tree),
            file("tree/ops.rs", "use super::*;\npub enum Op {}\n"),
            file("rule.rs", "use crate::tree::Op;\npub fn wins(_: Op) {}\n"),
        ];
        let p = check_module_cycles(&files);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].message
                .contains("rule.rs -> crates/k/src/tree.rs (Op)"),
            "{}",
            p[0].message
        );
        // Taken from the file that defines it, the circle is gone.
        let files = [
            file("lib.rs", "mod tree;\nmod rule;\npub use tree::Op;\n"),
            file("tree.rs", tree),
            file("tree/ops.rs", "use super::*;\npub enum Op {}\n"),
            file(
                "rule.rs",
                "use crate::tree::ops::Op;\npub fn wins(_: Op) {}\n",
            ),
        ];
        assert_eq!(check_module_cycles(&files), []);
    }

    #[test]
    fn a_parent_and_its_children_are_one_unit() {
        let files = [
            file(
                "lib.rs",
                "mod a;\npub use a::Thing;\nfn f(_: crate::a::b::Thing) {}\n",
            ),
            file(
                "a.rs",
                "mod b;\npub use b::{self, Thing as T};\npub struct Top;\n",
            ),
            file(
                "a/b.rs",
                "pub struct Thing;\nfn g(_: super::Top, _: crate::a::Top) {}\n",
            ),
        ];
        assert_eq!(check_module_cycles(&files), []);
    }

    #[test]
    fn a_circle_through_a_group_and_super_is_found() {
        let files = [
            file("lib.rs", "mod x;\n"),
            file("x.rs", "mod a;\nmod b;\nmod c;\n"),
            file("x/a.rs", "use crate::x::{b::B, c};\npub struct A;\n"),
            file("x/b.rs", "pub struct B;\n"),
            file("x/c.rs", "pub fn f() -> super::a::A { super::a::A }\n"),
        ];
        let p = check_module_cycles(&files);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].message.contains("2 files"), "{}", p[0].message);
        assert!(
            p[0].message.contains("x/c.rs -> crates/k/src/x/a.rs (A)"),
            "{}",
            p[0].message
        );
        assert!(
            p[0].message.contains("x/a.rs -> crates/k/src/x/c.rs (c)"),
            "{}",
            p[0].message
        );
    }

    #[test]
    fn comments_and_unit_tests_do_not_count() {
        let files = [
            file("lib.rs", "mod a;\nmod b;\n"),
            file("a.rs", "use crate::b::B;\n"),
            file(
                "b.rs",
                "pub struct B;\n/// See [`crate::a::A`].\n#[cfg(test)]\nmod tests { use crate::a::A; }\n",
            ),
        ];
        assert_eq!(check_module_cycles(&files), []);
    }

    #[test]
    fn module_paths() {
        assert_eq!(module_path("crates/k/src/lib.rs"), Some(vec![]));
        assert_eq!(module_path("crates/k/src/main.rs"), Some(vec![]));
        assert_eq!(
            module_path("crates/k/src/a/mod.rs"),
            Some(vec!["a".to_string()])
        );
        assert_eq!(
            module_path("crates/k/src/a/b.rs"),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        assert_eq!(module_path("crates/k/src/bin/x.rs"), None);
    }
}
