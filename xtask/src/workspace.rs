//! Facts about the workspace on disk: its root, its crates and their dependency edges
//! (from `cargo metadata`), and its source files.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;

/// The root of the Cargo workspace (the parent of `xtask/`).
pub fn root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// The `cargo` to run: the one that runs us when there is one.
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

/// Which table of a manifest a dependency was declared in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DepKind {
    Normal,
    Dev,
    Build,
}

impl std::fmt::Display for DepKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DepKind::Normal => "normal dependency",
            DepKind::Dev => "dev-dependency",
            DepKind::Build => "build-dependency",
        })
    }
}

/// One dependency edge as declared (the package name, not a rename).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dep {
    pub name: String,
    pub kind: DepKind,
}

/// One workspace member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrateInfo {
    pub name: String,
    /// The directory holding its Cargo.toml.
    pub dir: PathBuf,
    /// Whether `publish = false` is absent.
    pub publishable: bool,
    pub deps: Vec<Dep>,
}

impl CrateInfo {
    /// A crate with only normal dependencies (for tests).
    #[cfg(test)]
    pub fn synthetic(name: &str, deps: &[&str]) -> CrateInfo {
        CrateInfo {
            name: name.to_string(),
            dir: PathBuf::from("crates").join(name),
            publishable: true,
            deps: deps
                .iter()
                .map(|d| Dep {
                    name: d.to_string(),
                    kind: DepKind::Normal,
                })
                .collect(),
        }
    }
}

/// Runs `cargo metadata --no-deps` in `root` and returns the members.
pub fn load(root: &Path) -> Result<Vec<CrateInfo>, String> {
    let output = Command::new(cargo())
        .current_dir(root)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo metadata failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let text = String::from_utf8(output.stdout)
        .map_err(|_| "cargo metadata printed non-UTF-8 output".to_string())?;
    let doc: Json = serde_json::from_str(&text).map_err(|e| format!("cargo metadata: {e}"))?;
    from_metadata(&doc)
}

/// Extracts the members and their dependencies from `cargo metadata` JSON.
pub fn from_metadata(doc: &Json) -> Result<Vec<CrateInfo>, String> {
    let members: Vec<&str> = array(doc.get("workspace_members"))
        .iter()
        .filter_map(Json::as_str)
        .collect();
    let mut crates = Vec::new();
    for pkg in array(doc.get("packages")) {
        let field = |key: &str| pkg.get(key).and_then(Json::as_str);
        let (Some(name), Some(id), Some(manifest)) =
            (field("name"), field("id"), field("manifest_path"))
        else {
            return Err("cargo metadata: package without name, id or manifest_path".into());
        };
        if !members.contains(&id) {
            continue;
        }
        // `publish` is null (publishable anywhere) or a list of allowed registries
        // (empty for `publish = false`).
        let publishable = match pkg.get("publish") {
            Some(Json::Array(registries)) => !registries.is_empty(),
            _ => true,
        };
        let mut deps = Vec::new();
        for dep in array(pkg.get("dependencies")) {
            let Some(dep_name) = dep.get("name").and_then(Json::as_str) else {
                return Err(format!(
                    "cargo metadata: a dependency of {name} has no name"
                ));
            };
            let kind = match dep.get("kind").and_then(Json::as_str) {
                None => DepKind::Normal,
                Some("dev") => DepKind::Dev,
                Some("build") => DepKind::Build,
                Some(other) => {
                    return Err(format!("cargo metadata: unknown dependency kind {other:?}"));
                }
            };
            deps.push(Dep {
                name: dep_name.to_string(),
                kind,
            });
        }
        let dir = Path::new(manifest)
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        crates.push(CrateInfo {
            name: name.to_string(),
            dir,
            publishable,
            deps,
        });
    }
    Ok(crates)
}

/// The elements of a JSON array, or none when the value is absent or not an array.
fn array(value: Option<&Json>) -> &[Json] {
    value
        .and_then(Json::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Directory names never descended into when walking the tree.
const SKIP_DIRS: &[&str] = &["target", "node_modules", "artifacts", "corpus"];

/// Every file below `dir` (skipping build output and hidden directories), sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(dir, &mut out);
    out.sort();
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        if file_type.is_dir() {
            if name.starts_with('.') || SKIP_DIRS.contains(&name.as_ref()) {
                continue;
            }
            out.push(path.clone());
            walk(&path, out);
        } else if file_type.is_file() {
            out.push(path);
        }
    }
}

/// `path` relative to `root` for messages (unchanged when it is not below `root`).
pub fn display(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_members_and_edges_from_metadata() {
        let doc: Json = serde_json::from_str(
            r#"{"packages":[
                {"name":"a","id":"path+file:///w/a#0.1.0","manifest_path":"/w/a/Cargo.toml",
                 "publish":null,"dependencies":[
                    {"name":"b","kind":null,"rename":"bee","path":"/w/b"},
                    {"name":"c","kind":"dev"},
                    {"name":"d","kind":"build"}]},
                {"name":"x","id":"path+file:///w/x#0.0.0","manifest_path":"/w/x/Cargo.toml",
                 "publish":[],"dependencies":[]}],
               "workspace_members":["path+file:///w/a#0.1.0","path+file:///w/x#0.0.0"]}"#,
        )
        .unwrap();
        let crates = from_metadata(&doc).unwrap();
        assert_eq!(crates.len(), 2);
        assert_eq!(crates[0].name, "a");
        assert_eq!(crates[0].dir, Path::new("/w/a"));
        assert!(crates[0].publishable);
        let kinds: Vec<_> = crates[0]
            .deps
            .iter()
            .map(|d| (d.name.as_str(), d.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                ("b", DepKind::Normal),
                ("c", DepKind::Dev),
                ("d", DepKind::Build)
            ]
        );
        assert!(!crates[1].publishable);
    }
}
