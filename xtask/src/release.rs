//! `cargo xtask release [--bump patch|minor|major] [--dry-run] [--no-package]`
//!
//! 1. Bumps `[workspace.package] version` in the root Cargo.toml and the `version` of
//!    every internal entry of `[workspace.dependencies]`.
//! 2. Requires CHANGELOG.md to have a section for the new version, or an `## Unreleased`
//!    section with content, which becomes `## [X.Y.Z] - YYYY-MM-DD` under a fresh empty
//!    `## [Unreleased]`.
//! 3. Packages every publishable crate (`cargo package --workspace --exclude xtask`),
//!    which packages the crates together so path dependencies that are not on the
//!    registry yet resolve to the freshly packaged ones.
//!
//! `--dry-run` prints what would change and writes no source file (packaging still runs,
//! on the current versions, as a check; it writes only under the target directory).

use std::fmt;
use std::path::Path;
use std::process::Command;

use crate::process;
use crate::tidy::{LAYERS, TOOLING};
use crate::workspace;

/// A `MAJOR.MINOR.PATCH` version (no pre-release or build metadata).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
}

impl Version {
    pub fn parse(text: &str) -> Option<Version> {
        let mut parts = text.split('.');
        let mut next = || -> Option<u64> {
            let p = parts.next()?;
            if p.is_empty() || (p.len() > 1 && p.starts_with('0')) {
                return None;
            }
            p.parse().ok()
        };
        let v = Version {
            major: next()?,
            minor: next()?,
            patch: next()?,
        };
        parts.next().is_none().then_some(v)
    }

    pub fn bump(self, bump: Bump) -> Version {
        match bump {
            Bump::Major => Version {
                major: self.major + 1,
                minor: 0,
                patch: 0,
            },
            Bump::Minor => Version {
                major: self.major,
                minor: self.minor + 1,
                patch: 0,
            },
            Bump::Patch => Version {
                patch: self.patch + 1,
                ..self
            },
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bump {
    Patch,
    Minor,
    Major,
}

/// One changed line of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineChange {
    /// 1-based.
    pub line: usize,
    pub old: String,
    pub new: String,
}

/// The table header a line opens (`[a.b]` → `a.b`), if it is one.
fn table_header(line: &str) -> Option<&str> {
    let line = line.split('#').next().unwrap_or("").trim();
    let inner = line.strip_prefix('[')?.strip_suffix(']')?;
    Some(inner.trim_matches(|c| c == '[' || c == ']').trim())
}

/// Replaces the first `version = "..."` on `line` with `new`; returns the old value.
fn replace_version(line: &str, new: &str) -> Option<(String, String)> {
    let mut search = 0;
    while let Some(found) = line[search..].find("version") {
        let start = search + found;
        search = start + "version".len();
        let before_ok = line[..start]
            .chars()
            .next_back()
            .is_none_or(|c| c.is_whitespace() || c == '{' || c == ',');
        let rest = line[search..].trim_start();
        let Some(rest) = rest.strip_prefix('=') else {
            continue;
        };
        let rest = rest.trim_start();
        let Some(value) = rest.strip_prefix('"') else {
            continue;
        };
        let Some(end) = value.find('"') else {
            continue;
        };
        if !before_ok {
            continue;
        }
        let old = value[..end].to_string();
        let value_start = line.len() - value.len();
        let mut out = String::with_capacity(line.len());
        out.push_str(&line[..value_start]);
        out.push_str(new);
        out.push_str(&line[value_start + end..]);
        return Some((old, out));
    }
    None
}

/// The `[workspace.package] version` of a root Cargo.toml.
pub fn workspace_version(root_toml: &str) -> Result<Version, String> {
    let mut table = "";
    for line in root_toml.lines() {
        if let Some(t) = table_header(line) {
            table = t;
            continue;
        }
        if table == "workspace.package"
            && let Some((old, _)) = replace_version(line, "")
            && line.trim_start().starts_with("version")
        {
            return Version::parse(&old)
                .ok_or_else(|| format!("workspace version {old:?} is not MAJOR.MINOR.PATCH"));
        }
    }
    Err("no `version` in [workspace.package] of Cargo.toml".into())
}

/// Rewrites the root Cargo.toml for version `new`: `[workspace.package] version` and the
/// `version` of each `internal` crate listed in `[workspace.dependencies]`, where each must
/// carry a version on its line (a published crate needs one for its path dependencies).
pub fn bump_root_manifest(
    root_toml: &str,
    internal: &[&str],
    new: Version,
) -> Result<(String, Vec<LineChange>), String> {
    let new = new.to_string();
    let mut table = String::new();
    let mut changes = Vec::new();
    let mut saw_package_version = false;
    let mut out = String::with_capacity(root_toml.len() + 16);
    for (index, line) in root_toml.split_inclusive('\n').enumerate() {
        let (body, newline) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        if let Some(t) = table_header(body) {
            table = t.to_string();
            out.push_str(line);
            continue;
        }
        let mut replaced = None;
        if table == "workspace.package" && body.trim_start().starts_with("version") {
            replaced = replace_version(body, &new);
            saw_package_version |= replaced.is_some();
        } else if table == "workspace.dependencies" {
            let key = body.split('=').next().unwrap_or("").trim();
            let key = key.trim_matches('"');
            let key = key.strip_suffix(".version").unwrap_or(key);
            if let Some(&name) = internal.iter().find(|n| **n == key) {
                replaced = replace_version(body, &new);
                if replaced.is_none() {
                    return Err(format!(
                        "Cargo.toml:{}: internal dependency {name} has no `version = \"...\"` \
                         on its line",
                        index + 1
                    ));
                }
            }
        }
        match replaced {
            Some((_, new_body)) if new_body != body => {
                changes.push(LineChange {
                    line: index + 1,
                    old: body.to_string(),
                    new: new_body.clone(),
                });
                out.push_str(&new_body);
                out.push_str(newline);
            }
            _ => out.push_str(line),
        }
    }
    if !saw_package_version {
        return Err("no `version` in [workspace.package] of Cargo.toml".into());
    }
    Ok((out, changes))
}

/// What the changelog needs for a release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangelogPlan {
    /// A section for the version exists already.
    Ready,
    /// The Unreleased section becomes the version's; the new text.
    Rename(String),
}

fn heading_title(line: &str) -> Option<&str> {
    let title = line.strip_prefix("## ")?.trim();
    Some(title)
}

/// Whether a `## ` heading title names `version` (`[0.2.0] - 2026-01-01`, `0.2.0`, `v0.2.0`).
fn names_version(title: &str, version: &str) -> bool {
    let first = title.split_whitespace().next().unwrap_or("");
    let first = first.trim_matches(|c| c == '[' || c == ']');
    first == version || first.strip_prefix('v') == Some(version)
}

fn is_unreleased(title: &str) -> bool {
    title
        .trim_matches(|c| c == '[' || c == ']')
        .eq_ignore_ascii_case("unreleased")
}

/// Checks CHANGELOG.md for `version`; `date` is `YYYY-MM-DD` for a renamed section.
pub fn plan_changelog(text: &str, version: Version, date: &str) -> Result<ChangelogPlan, String> {
    let version = version.to_string();
    let lines: Vec<&str> = text.lines().collect();
    if lines
        .iter()
        .filter_map(|l| heading_title(l))
        .any(|t| names_version(t, &version))
    {
        return Ok(ChangelogPlan::Ready);
    }
    let Some(start) = lines
        .iter()
        .position(|l| heading_title(l).is_some_and(is_unreleased))
    else {
        return Err(format!(
            "CHANGELOG.md has neither a `## [{version}]` section nor an `## [Unreleased]` one"
        ));
    };
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.starts_with("## "))
        .map_or(lines.len(), |p| start + 1 + p);
    let has_content = lines[start + 1..end]
        .iter()
        .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with("### "));
    if !has_content {
        return Err(format!(
            "CHANGELOG.md: the Unreleased section is empty; describe the changes in {version}"
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(lines.len() + 2);
    out.extend(lines[..start].iter().map(|l| l.to_string()));
    out.push("## [Unreleased]".to_string());
    out.push(String::new());
    out.push(format!("## [{version}] - {date}"));
    out.extend(lines[start + 1..].iter().map(|l| l.to_string()));
    let mut new_text = out.join("\n");
    if text.ends_with('\n') {
        new_text.push('\n');
    }
    Ok(ChangelogPlan::Rename(new_text))
}

/// Today's UTC date as `YYYY-MM-DD`.
pub fn today() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    date_of_day(secs / 86_400)
}

/// `YYYY-MM-DD` of day `days` since 1970-01-01 (Howard Hinnant's civil-from-days).
pub fn date_of_day(days: u64) -> String {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The command that packages every publishable crate together.
pub fn package_command(root: &Path) -> Command {
    let mut cmd = Command::new(workspace::cargo());
    cmd.current_dir(root)
        .args(["package", "--workspace", "--no-verify", "--allow-dirty"]);
    for tool in TOOLING {
        cmd.args(["--exclude", tool]);
    }
    cmd
}

fn print_changes(file: &str, changes: &[LineChange]) {
    for c in changes {
        println!(
            "{file}:{}:\n  - {}\n  + {}",
            c.line,
            c.old.trim(),
            c.new.trim()
        );
    }
}

pub fn cli(root: &Path, args: &[String]) -> Result<(), String> {
    let usage = "usage: cargo xtask release [--bump patch|minor|major] [--dry-run] [--no-package]";
    let mut bump = Bump::Patch;
    let mut dry_run = false;
    let mut package = true;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--bump" => {
                bump = match rest.next().map(String::as_str) {
                    Some("patch") => Bump::Patch,
                    Some("minor") => Bump::Minor,
                    Some("major") => Bump::Major,
                    _ => return Err(format!("--bump needs patch, minor or major\n{usage}")),
                }
            }
            "--dry-run" => dry_run = true,
            "--no-package" => package = false,
            other => return Err(format!("unknown argument {other:?}\n{usage}")),
        }
    }

    let manifest_path = root.join("Cargo.toml");
    let manifest = std::fs::read_to_string(&manifest_path)
        .map_err(|e| format!("cannot read Cargo.toml: {e}"))?;
    let current = workspace_version(&manifest)?;
    let new = current.bump(bump);
    println!(
        "release: {current} -> {new}{}",
        if dry_run { " (dry run)" } else { "" }
    );

    // Every publishable member must take the workspace version.
    let crates = workspace::load(root)?;
    for krate in crates.iter().filter(|c| c.publishable) {
        let path = krate.dir.join("Cargo.toml");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let inherits = text.lines().any(|l| {
            let squashed: String = l.split_whitespace().collect();
            squashed == "version.workspace=true"
        });
        if !inherits {
            return Err(format!(
                "{} does not use `version.workspace = true`",
                workspace::display(root, &path)
            ));
        }
    }

    let (new_manifest, changes) = bump_root_manifest(&manifest, LAYERS, new)?;
    print_changes("Cargo.toml", &changes);

    let changelog_path = root.join("CHANGELOG.md");
    let changelog = std::fs::read_to_string(&changelog_path)
        .map_err(|e| format!("cannot read CHANGELOG.md: {e}"))?;
    let changelog_plan = plan_changelog(&changelog, new, &today())?;
    match &changelog_plan {
        ChangelogPlan::Ready => println!("CHANGELOG.md: has a section for {new}"),
        ChangelogPlan::Rename(_) => {
            println!(
                "CHANGELOG.md: `## [Unreleased]` becomes `## [{new}] - {}`",
                today()
            )
        }
    }

    if dry_run {
        println!("release: dry run, nothing written");
    } else {
        std::fs::write(&manifest_path, new_manifest)
            .map_err(|e| format!("cannot write Cargo.toml: {e}"))?;
        if let ChangelogPlan::Rename(text) = &changelog_plan {
            std::fs::write(&changelog_path, text)
                .map_err(|e| format!("cannot write CHANGELOG.md: {e}"))?;
        }
        println!("release: wrote Cargo.toml and CHANGELOG.md");
    }

    if package {
        let order: Vec<&str> = LAYERS
            .iter()
            .copied()
            .filter(|l| crates.iter().any(|c| c.name == *l && c.publishable))
            .collect();
        println!("release: packaging {}", order.join(", "));
        let mut cmd = package_command(root);
        println!("$ {}", process::render(&cmd));
        let outcome = process::run_until(&mut cmd, None);
        if !outcome.success() {
            return Err(format!("cargo package: {}", outcome.describe()));
        }
    }
    if !dry_run {
        println!("release: review, then commit and tag v{new}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = r#"[workspace]
members = ["crates/a"]

[workspace.package]
version = "0.1.9"
edition = "2024"

[workspace.dependencies]
bough-names = { path = "crates/bough-names", version = "0.1.9" }
"bough-io" = { version = "0.1.9", path = "crates/bough-io" }
nom = "8"
tracing = { version = "0.1" }

[profile.dev]
debug = 1
"#;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn versions_parse_and_bump() {
        assert_eq!(v("0.1.9").bump(Bump::Patch), v("0.1.10"));
        assert_eq!(v("0.1.9").bump(Bump::Minor), v("0.2.0"));
        assert_eq!(v("1.4.2").bump(Bump::Major), v("2.0.0"));
        for bad in ["1.2", "1.2.3.4", "01.2.3", "1.2.x", "", "1.2.3-rc.1"] {
            assert_eq!(Version::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn bumps_workspace_and_internal_versions_only() {
        assert_eq!(workspace_version(ROOT).unwrap(), v("0.1.9"));
        let (text, changes) =
            bump_root_manifest(ROOT, &["bough-names", "bough-io"], v("0.2.0")).unwrap();
        assert_eq!(changes.len(), 3, "{changes:?}");
        assert_eq!(changes[0].new, "version = \"0.2.0\"");
        assert_eq!(
            changes[1].new,
            "bough-names = { path = \"crates/bough-names\", version = \"0.2.0\" }"
        );
        assert_eq!(
            changes[2].new,
            "\"bough-io\" = { version = \"0.2.0\", path = \"crates/bough-io\" }"
        );
        assert!(text.contains("nom = \"8\"\ntracing = { version = \"0.1\" }"));
        assert_eq!(text.lines().count(), ROOT.lines().count());
        assert_eq!(workspace_version(&text).unwrap(), v("0.2.0"));
    }

    #[test]
    fn bump_requires_a_version_on_internal_entries() {
        let unversioned = ROOT.replace(", version = \"0.1.9\" }", " }");
        let err = bump_root_manifest(&unversioned, &["bough-names"], v("0.2.0")).unwrap_err();
        assert!(err.contains("bough-names has no `version"), "{err}");
    }

    #[test]
    fn changelog_needs_a_section_or_unreleased_content() {
        let ready = "# Changelog\n\n## [0.2.0] - 2026-01-01\n\n- x\n";
        assert_eq!(
            plan_changelog(ready, v("0.2.0"), "2026-02-02"),
            Ok(ChangelogPlan::Ready)
        );
        let empty = "# Changelog\n\n## [Unreleased]\n\n### Added\n\n## [0.1.0] - 2026-01-01\n- a\n";
        assert!(plan_changelog(empty, v("0.2.0"), "2026-02-02").is_err());
        assert!(plan_changelog("# Changelog\n", v("0.2.0"), "2026-02-02").is_err());

        let pending =
            "# Changelog\n\n## Unreleased\n\n### Added\n- y\n\n## [0.1.0] - 2026-01-01\n- a\n";
        let Ok(ChangelogPlan::Rename(text)) = plan_changelog(pending, v("0.2.0"), "2026-02-02")
        else {
            panic!("expected a rename");
        };
        assert_eq!(
            text,
            "# Changelog\n\n## [Unreleased]\n\n## [0.2.0] - 2026-02-02\n\n### Added\n- y\n\n\
             ## [0.1.0] - 2026-01-01\n- a\n"
        );
        assert_eq!(
            plan_changelog(&text, v("0.2.0"), "2026-02-03"),
            Ok(ChangelogPlan::Ready)
        );
    }

    #[test]
    fn dates_from_days() {
        assert_eq!(date_of_day(0), "1970-01-01");
        assert_eq!(date_of_day(11_016), "2000-02-29");
        assert_eq!(date_of_day(20_819), "2027-01-01");
    }

    #[test]
    fn the_real_manifest_bumps_cleanly() {
        let root = workspace::root();
        let text = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
        let current = workspace_version(&text).unwrap();
        let (_, changes) = bump_root_manifest(&text, LAYERS, current.bump(Bump::Minor)).unwrap();
        // The workspace version and at least the lowest layer's dependency entry.
        assert!(changes.len() >= 2, "{changes:?}");
        assert!(changes.iter().any(|c| c.old.starts_with(LAYERS[0])));
    }
}
