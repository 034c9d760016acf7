//! Check 6: no room (source file) over [`ROOM_LIMIT`] lines before its unit tests.
//!
//! A file that does one job stays short; a long one is several rooms in one. The lines that
//! count are those before the first top-level `#[cfg(test)]` (a file's own unit tests may be
//! long). The few exceptions are listed in [`ROOM_EXCEPTIONS`], each with why; an exception
//! whose file has shrunk under the limit is itself a problem, so the list only gets shorter.

use super::{Problem, SourceFile, problem};

/// Lines of non-test code a source file may hold.
pub const ROOM_LIMIT: usize = 700;

/// Files allowed over [`ROOM_LIMIT`], and why. Paths are relative to the workspace root.
///
/// Empty since every room was split (issue 15). An entry is the path and the reason the file
/// cannot be split; the check fails once the file shrinks, so the list only shortens.
pub const ROOM_EXCEPTIONS: &[(&str, &str)] = &[];

/// Lines before the first top-level `#[cfg(test)]` (all lines when there is none).
pub fn lines_before_tests(text: &str) -> usize {
    text.lines()
        .take_while(|line| !line.starts_with("#[cfg(test)]"))
        .count()
}

/// Check 6 over already-read files: library code (`src/`) of every crate.
pub fn check_rooms(
    files: &[SourceFile],
    limit: usize,
    exceptions: &[(&str, &str)],
) -> Vec<Problem> {
    let mut problems = Vec::new();
    for file in files.iter().filter(|f| f.in_src) {
        let lines = lines_before_tests(&file.text);
        let excepted = exceptions.iter().any(|(path, _)| *path == file.path);
        if lines > limit && !excepted {
            problems.push(problem(
                "rooms",
                format!(
                    "{}: {lines} lines before its tests (limit {limit}): split it by what it \
                     does, one noun or activity per file",
                    file.path
                ),
            ));
        }
        if lines <= limit && excepted {
            problems.push(problem(
                "rooms",
                format!(
                    "{}: {lines} lines, under the limit: remove it from ROOM_EXCEPTIONS",
                    file.path
                ),
            ));
        }
    }
    for (path, _) in exceptions {
        if !files.iter().any(|f| f.path == *path) {
            problems.push(problem(
                "rooms",
                format!("ROOM_EXCEPTIONS names {path}, which is not a source file"),
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, in_src: bool, lines: usize, test_lines: usize) -> SourceFile {
        let mut text = "fn f() {}\n".repeat(lines);
        if test_lines > 0 {
            text.push_str("#[cfg(test)]\nmod tests {\n");
            text.push_str(&"    fn g() {}\n".repeat(test_lines));
            text.push_str("}\n");
        }
        SourceFile {
            path: path.to_string(),
            krate: "bough-tree".to_string(),
            in_src,
            text,
        }
    }

    #[test]
    fn only_lines_before_the_tests_count() {
        assert_eq!(lines_before_tests("a\nb\n#[cfg(test)]\nmod t {}\n"), 2);
        assert_eq!(lines_before_tests("a\n    #[cfg(test)]\nb\n"), 3);
        let files = [file("crates/t/src/a.rs", true, 10, 5000)];
        assert!(check_rooms(&files, 10, &[]).is_empty());
    }

    #[test]
    fn a_long_room_is_a_problem_unless_excepted() {
        let files = [
            file("crates/t/src/big.rs", true, 11, 0),
            file("crates/t/tests/long_test.rs", false, 5000, 0),
        ];
        let found = check_rooms(&files, 10, &[]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].message.contains("big.rs: 11 lines"), "{found:?}");
        assert!(check_rooms(&files, 10, &[("crates/t/src/big.rs", "why")]).is_empty());
    }

    #[test]
    fn stale_exceptions_are_problems() {
        let files = [file("crates/t/src/small.rs", true, 3, 0)];
        let found = check_rooms(
            &files,
            10,
            &[
                ("crates/t/src/small.rs", "why"),
                ("crates/t/src/gone.rs", "why"),
            ],
        );
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().any(|p| p.message.contains("remove it")));
        assert!(found.iter().any(|p| p.message.contains("gone.rs")));
    }
}
