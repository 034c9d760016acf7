//! `cargo xtask tidy`: structural rules of the workspace.
//!
//! Every check is a pure function over parsed inputs (crate lists, file names, source
//! text) returning the problems it found, so the rules are unit-tested on synthetic
//! inputs; [`run`] only gathers the inputs from disk and prints the result.
//!
//! 1. Layering: a crate depends (normal, dev or build) only on crates below it in
//!    [`LAYERS`]; every member is in [`LAYERS`] or [`TOOLING`]; nothing depends on tooling.
//! 2. `unsafe` only in [`UNSAFE_ALLOWED`].
//! 3. No `todo!`, `unimplemented!` or `dbg!` in library code (`crates/*/src`).
//! 4. Every crate under `crates/` has `[lints] workspace = true`.
//! 5. No file or module directory named `utils`, `util` or `helpers`.
//! 6. No source file over [`rooms::ROOM_LIMIT`] lines before its unit tests ([`rooms`]).
//! 7. Each crate depends only on what ARCHITECTURE.md's layer table allows it
//!    ([`dependency_table`]).
//! 8. No circle among the source files of a crate ([`module_cycles`]).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::workspace::{self, CrateInfo};

pub mod dependency_table;
pub mod module_cycles;
pub mod rooms;

/// The layers of the workspace, lowest first. A crate may depend only on crates that
/// come before it here.
pub const LAYERS: &[&str] = &[
    "bough-names",
    "bough-manifest",
    "bough-io",
    "bough-object",
    "bough-tree",
    "bough-catalog",
    "bough-gc",
    "bough",
    // The export stream format: only `bough-manifest` below it, so the fuzz workspace
    // builds its reader without the engine.
    "bough-export",
    "bough-cli",
    // The reliability harness: a test crate above the facade, next to the CLI.
    "bough-reliability",
];

/// Workspace members outside the layering: they may depend on any crate, and no crate
/// may depend on them.
pub const TOOLING: &[&str] = &["xtask"];

/// The only crates allowed `unsafe` code.
pub const UNSAFE_ALLOWED: &[&str] = &["bough-io"];

/// Module names that say nothing about what is inside.
pub const BANNED_MODULE_NAMES: &[&str] = &["utils", "util", "helpers"];

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Which check found it (`layering`, `unsafe`, ...).
    pub check: &'static str,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.check, self.message)
    }
}

fn problem(check: &'static str, message: String) -> Problem {
    Problem { check, message }
}

// ---------------------------------------------------------------------------------------
// 1. Layering
// ---------------------------------------------------------------------------------------

/// Checks the dependency edges between workspace crates against `layers` (lowest first)
/// and `tooling`. Edges to crates outside the workspace are ignored.
pub fn check_layers(crates: &[CrateInfo], layers: &[&str], tooling: &[&str]) -> Vec<Problem> {
    let mut problems = Vec::new();
    let position = |name: &str| layers.iter().position(|l| *l == name);
    let is_member = |name: &str| crates.iter().any(|c| c.name == name);

    for krate in crates {
        let own = position(&krate.name);
        let is_tooling = tooling.contains(&krate.name.as_str());
        if own.is_none() && !is_tooling {
            problems.push(problem(
                "layering",
                format!(
                    "{} is not in the layer list (LAYERS or TOOLING in xtask/src/tidy.rs)",
                    krate.name
                ),
            ));
        }
        for dep in &krate.deps {
            if !is_member(&dep.name) {
                continue;
            }
            let message = if tooling.contains(&dep.name.as_str()) {
                format!(
                    "{} depends on {}, which is tooling ({})",
                    krate.name, dep.name, dep.kind
                )
            } else if is_tooling {
                continue;
            } else {
                match (own, position(&dep.name)) {
                    (Some(own), Some(theirs)) if theirs < own => continue,
                    (Some(own), Some(theirs)) if theirs == own => {
                        format!("{} depends on itself ({})", krate.name, dep.kind)
                    }
                    (Some(_), Some(_)) => format!(
                        "{} depends on {}, which is above it ({})",
                        krate.name, dep.name, dep.kind
                    ),
                    // The crate itself is unlisted: already reported above.
                    (None, _) => continue,
                    (Some(_), None) => format!(
                        "{} depends on {}, which is not in the layer list ({})",
                        krate.name, dep.name, dep.kind
                    ),
                }
            };
            problems.push(problem("layering", message));
        }
    }
    problems
}

/// Every directory under `crates/` holding a Cargo.toml must be a workspace member
/// (otherwise the layering check would never see it).
pub fn check_members(crate_dirs: &[PathBuf], crates: &[CrateInfo]) -> Vec<Problem> {
    crate_dirs
        .iter()
        .filter(|dir| !crates.iter().any(|c| c.dir == **dir))
        .map(|dir| {
            problem(
                "layering",
                format!("{} is not a workspace member", dir.display()),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// 2, 3. Source scans
// ---------------------------------------------------------------------------------------

/// `source` with comments blanked out and the contents of string, byte-string, raw-string
/// and character literals replaced by spaces. Newlines are kept so line numbers survive.
/// Only what the scans need: lifetimes stay, literal delimiters stay.
pub fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        // Line comment (including doc comments).
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
            continue;
        }
        // Block comment, possibly nested.
        if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            continue;
        }
        // Raw string: r"..", r#".."#, br#".."#, cr".." — `r` not inside an identifier.
        let prefix_start = if i > 0 && matches!(chars[i - 1], 'b' | 'c') {
            i - 1
        } else {
            i
        };
        if c == 'r' && (prefix_start == 0 || !is_ident(chars[prefix_start - 1])) {
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                j += 1;
            }
            if chars.get(j) == Some(&'"') {
                let hashes = j - i - 1;
                for &ch in &chars[i..=j] {
                    out.push(ch);
                }
                i = j + 1;
                while i < chars.len() {
                    if chars[i] == '"'
                        && chars[i + 1..].len() >= hashes
                        && chars[i + 1..i + 1 + hashes].iter().all(|&h| h == '#')
                    {
                        out.push('"');
                        out.extend(std::iter::repeat_n('#', hashes));
                        i += 1 + hashes;
                        break;
                    }
                    out.push(blank(chars[i]));
                    i += 1;
                }
                continue;
            }
        }
        // Ordinary (byte, C) string.
        if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() {
                match chars[i] {
                    '\\' => {
                        out.push(' ');
                        if let Some(&escaped) = chars.get(i + 1) {
                            out.push(blank(escaped));
                        }
                        i += 2;
                    }
                    '"' => {
                        out.push('"');
                        i += 1;
                        break;
                    }
                    other => {
                        out.push(blank(other));
                        i += 1;
                    }
                }
            }
            continue;
        }
        // Character literal ('x', '\n', '\u{..}', '"') versus lifetime ('a).
        if c == '\'' {
            if next == Some('\\') {
                out.push('\'');
                i += 1;
                let mut first = true;
                while i < chars.len() && (first || chars[i] != '\'') {
                    first = chars[i] == '\\' && first;
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push('\'');
                    i += 1;
                }
                continue;
            }
            if next.is_some() && chars.get(i + 2) == Some(&'\'') {
                out.push_str("' '");
                i += 3;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// Occurrences of `word` in `code` not preceded by an identifier character and followed
/// (after optional spaces) by one of `followers`; returns 1-based line numbers.
fn find_word(code: &str, word: &str, followers: &[char]) -> Vec<usize> {
    let mut lines = Vec::new();
    for (index, line) in code.lines().enumerate() {
        let mut from = 0;
        while let Some(found) = line[from..].find(word) {
            let start = from + found;
            let end = start + word.len();
            from = end;
            let before_ok = line[..start]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            let after = line[end..].trim_start();
            let after_ok = if followers.is_empty() {
                true
            } else if after.is_empty() {
                // `unsafe` at the end of a line (`unsafe\n{`) still counts.
                followers.contains(&' ')
            } else {
                after.chars().next().is_some_and(|c| followers.contains(&c))
                    || (followers.contains(&' ') && line[end..].starts_with(char::is_whitespace))
            };
            if before_ok && after_ok {
                lines.push(index + 1);
                break;
            }
        }
    }
    lines
}

/// Lines of `source` using `unsafe` (blocks, functions, impls, traits, attributes) or
/// allowing the `unsafe_code` lint.
pub fn find_unsafe(source: &str) -> Vec<usize> {
    let code = code_only(source);
    let mut lines = find_word(&code, "unsafe", &[' ', '{', '(']);
    let squashed: String = code
        .lines()
        .map(|l| l.split_whitespace().collect::<String>())
        .collect::<Vec<_>>()
        .join("\n");
    for attr in ["allow(unsafe_code", "expect(unsafe_code"] {
        for (index, line) in squashed.lines().enumerate() {
            if line.contains(attr) {
                lines.push(index + 1);
            }
        }
    }
    lines.sort_unstable();
    lines.dedup();
    lines
}

/// Placeholder and debugging macros that must not reach library code.
pub const BANNED_MACROS: &[&str] = &["todo", "unimplemented", "dbg"];

/// `(line, macro)` for each banned macro invocation in `source`.
pub fn find_banned_macros(source: &str) -> Vec<(usize, &'static str)> {
    let code = code_only(source);
    let mut hits = Vec::new();
    for &mac in BANNED_MACROS {
        for line in find_word(&code, &format!("{mac}!"), &['(', '[', '{']) {
            hits.push((line, mac));
        }
    }
    hits.sort_unstable();
    hits
}

// ---------------------------------------------------------------------------------------
// 4. Lints
// ---------------------------------------------------------------------------------------

/// Whether a Cargo.toml opts into the workspace lints: `[lints]` with `workspace = true`,
/// or `lints.workspace = true` / `lints = { workspace = true }` before any table.
pub fn has_workspace_lints(cargo_toml: &str) -> bool {
    let mut section: Option<String> = None;
    for raw in cargo_toml.lines() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.starts_with('[') {
            section = Some(
                line.trim_matches(|c| c == '[' || c == ']')
                    .trim()
                    .to_string(),
            );
            continue;
        }
        let squashed: String = line.split_whitespace().collect();
        match section.as_deref() {
            Some("lints") if squashed == "workspace=true" => return true,
            None if squashed == "lints.workspace=true" || squashed == "lints={workspace=true}" => {
                return true;
            }
            _ => {}
        }
    }
    false
}

// ---------------------------------------------------------------------------------------
// 5. Names
// ---------------------------------------------------------------------------------------

/// Paths named `utils.rs`, `util.rs`, `helpers.rs` or a directory `utils/`, `util/`,
/// `helpers/` (module directories).
pub fn check_names(paths: &[PathBuf]) -> Vec<Problem> {
    paths
        .iter()
        .filter(|path| {
            let Some(file) = path.file_name().and_then(|n| n.to_str()) else {
                return false;
            };
            let stem = file.strip_suffix(".rs").unwrap_or(file);
            let is_module = file.ends_with(".rs") || path.extension().is_none();
            is_module && BANNED_MODULE_NAMES.contains(&stem)
        })
        .map(|path| {
            problem(
                "names",
                format!(
                    "{} has a catch-all name; name the module after what it holds",
                    path.display()
                ),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------

/// A source file to scan.
#[derive(Debug)]
pub struct SourceFile {
    /// Path relative to the workspace root, for messages.
    pub path: String,
    /// The crate it belongs to.
    pub krate: String,
    /// Whether it is library code (`src/`) rather than tests, benches, examples, build.rs.
    pub in_src: bool,
    pub text: String,
}

/// Checks 2 and 3 over already-read files.
pub fn check_sources(files: &[SourceFile], unsafe_allowed: &[&str]) -> Vec<Problem> {
    let mut problems = Vec::new();
    for file in files {
        if !unsafe_allowed.contains(&file.krate.as_str()) {
            for line in find_unsafe(&file.text) {
                problems.push(problem(
                    "unsafe",
                    format!(
                        "{}:{line}: unsafe code outside {} (in {})",
                        file.path,
                        unsafe_allowed.join(", "),
                        file.krate
                    ),
                ));
            }
        }
        if file.in_src {
            for (line, mac) in find_banned_macros(&file.text) {
                problems.push(problem(
                    "macros",
                    format!("{}:{line}: `{mac}!` in library code", file.path),
                ));
            }
        }
    }
    problems
}

/// Everything tidy knows, gathered from disk.
#[derive(Debug)]
pub struct Inputs {
    pub crates: Vec<CrateInfo>,
    /// Directories under `crates/` holding a Cargo.toml.
    pub crate_dirs: Vec<PathBuf>,
    /// `(path for messages, Cargo.toml text)` of each crate under `crates/`.
    pub manifests: Vec<(String, String)>,
    pub sources: Vec<SourceFile>,
    /// All files and directories in the tree (relative paths) for the name check.
    pub paths: Vec<PathBuf>,
    /// ARCHITECTURE.md's text, for its layer table.
    pub architecture: String,
}

/// Runs every check over `inputs`.
pub fn check_all(inputs: &Inputs) -> Vec<Problem> {
    let mut problems = check_layers(&inputs.crates, LAYERS, TOOLING);
    problems.extend(check_members(&inputs.crate_dirs, &inputs.crates));
    problems.extend(check_sources(&inputs.sources, UNSAFE_ALLOWED));
    for (path, text) in &inputs.manifests {
        if !has_workspace_lints(text) {
            problems.push(problem(
                "lints",
                format!("{path} lacks `[lints] workspace = true`"),
            ));
        }
    }
    problems.extend(check_names(&inputs.paths));
    problems.extend(rooms::check_rooms(
        &inputs.sources,
        rooms::ROOM_LIMIT,
        rooms::ROOM_EXCEPTIONS,
    ));
    problems.extend(module_cycles::check_module_cycles(&inputs.sources));
    problems.extend(dependency_table::check_dependency_table(
        &inputs.crates,
        &dependency_table::parse_table(&inputs.architecture),
    ));
    problems
}

/// Reads the inputs of every check from the workspace at `root`.
pub fn gather(root: &Path) -> Result<Inputs, String> {
    let crates = workspace::load(root)?;
    let crates_root = root.join("crates");
    let mut crate_dirs = Vec::new();
    let mut manifests = Vec::new();
    let mut sources = Vec::new();
    let entries = std::fs::read_dir(&crates_root)
        .map_err(|e| format!("cannot list {}: {e}", crates_root.display()))?;
    let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs {
        let manifest = dir.join("Cargo.toml");
        if !manifest.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&manifest)
            .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
        manifests.push((workspace::display(root, &manifest), text));
        let krate = crates
            .iter()
            .find(|c| c.dir == dir)
            .map(|c| c.name.clone())
            .unwrap_or_else(|| dir.file_name().unwrap_or_default().to_string_lossy().into());
        for path in workspace::files_under(&dir) {
            if path.extension().is_none_or(|e| e != "rs") || !path.is_file() {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            sources.push(SourceFile {
                path: workspace::display(root, &path),
                krate: krate.clone(),
                in_src: path.starts_with(dir.join("src")),
                text,
            });
        }
        crate_dirs.push(dir);
    }
    // Module files and directories (data files such as fuzz seeds may be named anything).
    let mut paths = Vec::new();
    for top in ["crates", "xtask", "fuzz", "bench"] {
        for path in workspace::files_under(&root.join(top)) {
            if path.is_dir() || path.extension().is_some_and(|e| e == "rs") {
                paths.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
            }
        }
    }
    let architecture_path = root.join("ARCHITECTURE.md");
    let architecture = std::fs::read_to_string(&architecture_path)
        .map_err(|e| format!("cannot read {}: {e}", architecture_path.display()))?;
    Ok(Inputs {
        crates,
        crate_dirs,
        manifests,
        sources,
        paths,
        architecture,
    })
}

/// `cargo xtask tidy`: prints problems; `Err` when there are any.
pub fn run(root: &Path) -> Result<(), String> {
    let inputs = gather(root)?;
    let problems = check_all(&inputs);
    if problems.is_empty() {
        println!(
            "tidy: ok ({} crates, {} source files)",
            inputs.crates.len(),
            inputs.sources.len()
        );
        return Ok(());
    }
    for p in &problems {
        eprintln!("tidy: {p}");
    }
    Err(format!("tidy: {} problem(s)", problems.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::{Dep, DepKind};

    /// The real graph as the layering intends it: each crate on the ones below.
    fn layered_graph() -> Vec<CrateInfo> {
        vec![
            CrateInfo::synthetic("bough-names", &[]),
            CrateInfo::synthetic("bough-manifest", &["bough-names"]),
            CrateInfo::synthetic("bough-io", &["bough-names", "bough-manifest"]),
            CrateInfo::synthetic("bough-gc", &["bough-io", "bough-names"]),
            CrateInfo::synthetic("bough", &["bough-gc", "bough-io"]),
            CrateInfo::synthetic("bough-cli", &["bough"]),
            CrateInfo::synthetic("xtask", &[]),
        ]
    }

    #[test]
    fn layering_accepts_downward_edges() {
        assert_eq!(check_layers(&layered_graph(), LAYERS, TOOLING), []);
    }

    #[test]
    fn layering_rejects_lower_crate_depending_on_higher() {
        let mut graph = layered_graph();
        graph[0] = CrateInfo::synthetic("bough-names", &["bough-gc"]);
        let problems = check_layers(&graph, LAYERS, TOOLING);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].check, "layering");
        assert!(
            problems[0]
                .message
                .contains("bough-names depends on bough-gc, which is above it"),
            "{}",
            problems[0].message
        );
    }

    #[test]
    fn layering_rejects_upward_dev_and_build_dependencies() {
        let mut graph = layered_graph();
        graph[1].deps.push(Dep {
            name: "bough-io".into(),
            kind: DepKind::Dev,
        });
        graph[2].deps.push(Dep {
            name: "bough-cli".into(),
            kind: DepKind::Build,
        });
        let messages: Vec<String> = check_layers(&graph, LAYERS, TOOLING)
            .into_iter()
            .map(|p| p.message)
            .collect();
        assert_eq!(
            messages,
            [
                "bough-manifest depends on bough-io, which is above it (dev-dependency)",
                "bough-io depends on bough-cli, which is above it (build-dependency)",
            ]
        );
    }

    #[test]
    fn layering_rejects_same_layer_unlisted_crates_and_tooling_deps() {
        let mut graph = layered_graph();
        graph.push(CrateInfo::synthetic("bough-extra", &["bough-names"]));
        graph[1].deps.push(Dep {
            name: "bough-manifest".into(),
            kind: DepKind::Dev,
        });
        graph[5].deps.push(Dep {
            name: "xtask".into(),
            kind: DepKind::Dev,
        });
        let messages: Vec<String> = check_layers(&graph, LAYERS, TOOLING)
            .into_iter()
            .map(|p| p.message)
            .collect();
        assert_eq!(messages.len(), 3, "{messages:?}");
        assert!(messages[0].contains("bough-manifest depends on itself"));
        assert!(messages[1].contains("bough-cli depends on xtask, which is tooling"));
        assert!(messages[2].starts_with("bough-extra is not in the layer list"));
    }

    #[test]
    fn layering_ignores_external_crates_and_lets_tooling_depend_on_anything() {
        let mut graph = layered_graph();
        graph[0] = CrateInfo::synthetic("bough-names", &["nom", "tracing"]);
        graph[6] = CrateInfo::synthetic("xtask", &["bough-cli", "bough-names"]);
        assert_eq!(check_layers(&graph, LAYERS, TOOLING), []);
    }

    #[test]
    fn layering_passes_for_the_real_workspace() {
        let root = workspace::root();
        let crates = workspace::load(&root).expect("cargo metadata");
        assert!(crates.iter().any(|c| c.name == "bough-names"));
        assert!(crates.iter().any(|c| c.name == "xtask"));
        let problems = check_layers(&crates, LAYERS, TOOLING);
        assert!(problems.is_empty(), "{problems:#?}");
    }

    #[test]
    fn every_layer_is_a_real_crate_directory() {
        let root = workspace::root();
        for layer in LAYERS {
            assert!(
                root.join("crates").join(layer).join("Cargo.toml").is_file(),
                "{layer} is in LAYERS but crates/{layer} does not exist"
            );
        }
    }

    #[test]
    fn code_only_blanks_comments_and_literals() {
        let src = "let a = \"unsafe {\"; // unsafe {\n/* unsafe { /* nested */ unsafe */ x\n\
                   let c = '\"'; let d = r#\"unsafe \"# ; fn f<'a>(x: &'a str) {}\n\
                   let e = b'\\''; unsafe { }";
        let code = code_only(src);
        assert_eq!(code.lines().count(), src.lines().count());
        assert_eq!(code.matches("unsafe").count(), 1, "{code}");
        assert!(code.contains("fn f<'a>(x: &'a str)"), "{code}");
        assert!(code.lines().nth(3).unwrap().contains("unsafe { }"));
    }

    #[test]
    fn finds_unsafe_forms() {
        let src = "\
fn ok() {}
unsafe fn a() {}
fn b() { unsafe{ } }
#![allow(unsafe_code)]
#[allow( unsafe_code )]
#[unsafe(no_mangle)]
#![forbid(unsafe_code)]
let unsafe_count = 1;
// unsafe { in a comment }
let s = \"unsafe { in a string }\";
impl Foo { unsafe_thing() }
/// # Safety: this is not unsafe code
unsafe impl Send for X {}
";
        assert_eq!(find_unsafe(src), [2, 3, 4, 5, 6, 13]);
    }

    #[test]
    fn finds_banned_macros() {
        let src = "\
fn a() { todo!() }
fn b() { unimplemented!(\"later\") }
fn c() { dbg!(x); }
fn d() { my_todo!(); }
// todo!() in a comment
let s = \"dbg!(x)\";
fn e() { todo! () }
fn f() -> usize { todos() }
";
        assert_eq!(
            find_banned_macros(src),
            [(1, "todo"), (2, "unimplemented"), (3, "dbg"), (7, "todo")]
        );
    }

    #[test]
    fn sources_rules_depend_on_crate_and_location() {
        let file = |krate: &str, in_src: bool, text: &str| SourceFile {
            path: format!("crates/{krate}/x.rs"),
            krate: krate.to_string(),
            in_src,
            text: text.to_string(),
        };
        let files = [
            file("bough-io", true, "unsafe { read() }"),
            file("bough-names", true, "fn f() { unsafe { g() } }"),
            file("bough-tree", false, "#[test] fn t() { dbg!(1); }"),
            file("bough-tree", true, "fn f() { dbg!(1); }"),
        ];
        let problems = check_sources(&files, UNSAFE_ALLOWED);
        let checks: Vec<_> = problems.iter().map(|p| p.check).collect();
        assert_eq!(checks, ["unsafe", "macros"], "{problems:?}");
        assert!(
            problems[0]
                .message
                .starts_with("crates/bough-names/x.rs:1:")
        );
        assert!(problems[1].message.starts_with("crates/bough-tree/x.rs:1:"));
    }

    #[test]
    fn workspace_lints_forms() {
        assert!(has_workspace_lints(
            "[package]\nname = \"a\"\n\n[lints]\nworkspace = true\n"
        ));
        assert!(has_workspace_lints(
            "[package]\nname = \"a\"\n[lints]\nworkspace=true # inherit\n[dependencies]\n"
        ));
        assert!(has_workspace_lints("lints.workspace = true\n[package]\n"));
        assert!(!has_workspace_lints("[package]\nname = \"a\"\n"));
        assert!(!has_workspace_lints(
            "[lints]\n[dependencies]\nworkspace = true\n"
        ));
        assert!(!has_workspace_lints("[lints]\n# workspace = true\n"));
    }

    #[test]
    fn catch_all_module_names_are_rejected() {
        let paths: Vec<PathBuf> = [
            "crates/bough-io/src/utils.rs",
            "crates/bough-io/src/helpers",
            "crates/bough-io/src/util.rs",
            "crates/bough-io/src/utility.rs",
            "crates/bough-io/src/page.rs",
            "crates/bough-io/tests/data/utils.txt",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        let flagged: Vec<_> = check_names(&paths)
            .into_iter()
            .map(|p| p.message.split(' ').next().unwrap().to_string())
            .collect();
        assert_eq!(
            flagged,
            [
                "crates/bough-io/src/utils.rs",
                "crates/bough-io/src/helpers",
                "crates/bough-io/src/util.rs",
            ]
        );
    }
}
