//! Validation of the relative `/`-separated paths the [`Storage`](crate::Storage) trait takes.

use crate::error::{IoError, IoResult};

/// The temporary name `write_atomic` and `create_new` write before renaming:
/// `<name>.<nonce>.tmp`, the temporary-file grammar of `bough-names` (so `classify` sorts a
/// leftover one as `Tmp`). The nonce combines the process id and a per-instance counter.
pub(crate) fn temp_name(name: &str, seq: u64) -> String {
    let nonce = (u64::from(std::process::id()) << 32) | (seq & 0xffff_ffff);
    format!("{name}.{nonce}{}", bough_names::TMP_SUFFIX)
}

/// Checks a file path: non-empty, relative, components neither empty nor `.`/`..`, no NUL.
pub(crate) fn check_file(path: &str) -> IoResult<()> {
    if path.is_empty() {
        return Err(invalid(path, "empty path"));
    }
    check_dir(path)
}

/// Checks a directory path; `""` is the root.
pub(crate) fn check_dir(path: &str) -> IoResult<()> {
    if path.is_empty() {
        return Ok(());
    }
    if path.contains('\0') {
        return Err(invalid(path, "NUL byte in path"));
    }
    if path.starts_with('/') {
        return Err(invalid(path, "absolute path"));
    }
    for c in path.split('/') {
        if c.is_empty() || c == "." || c == ".." {
            return Err(invalid(path, "empty, `.` or `..` path component"));
        }
    }
    Ok(())
}

/// Splits a checked file path into (parent directory, file name); the root parent is `""`.
pub(crate) fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => ("", path),
    }
}

/// The components of a checked directory path (none for the root).
pub(crate) fn components(dir: &str) -> impl Iterator<Item = &str> {
    dir.split('/').filter(|c| !c.is_empty())
}

fn invalid(path: &str, why: &str) -> IoError {
    IoError::InvalidArgument {
        what: format!("path {path:?}: {why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert!(check_file("a/b").is_ok());
        assert!(check_file("").is_err());
        assert!(check_file("/a").is_err());
        assert!(check_file("a//b").is_err());
        assert!(check_file("a/../b").is_err());
        assert!(check_file("a/").is_err());
        assert!(check_dir("").is_ok());
        assert_eq!(split("a/b/c"), ("a/b", "c"));
        assert_eq!(split("c"), ("", "c"));
        assert_eq!(components("").count(), 0);
        assert_eq!(components("a/b").collect::<Vec<_>>(), vec!["a", "b"]);
        let t = temp_name("data_1_main_0", 3);
        assert!(
            matches!(bough_names::classify(&t), bough_names::FileKind::Tmp(_)),
            "{t}"
        );
    }
}
