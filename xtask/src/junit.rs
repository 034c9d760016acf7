//! The failed tests of a nextest JUnit report, for the last lines of `cargo xtask ci`.
//!
//! CI shows only the tail of a run, and the fuzz stage prints thousands of lines after the
//! test stage: a failed test's name and panic would scroll out of view. The `ci` profile
//! writes `target/nextest/ci/junit.xml`; this reads the failures back out of it. A scanner
//! over the few tags nextest writes, not an XML library: the file is our own tool's output
//! and a malformed one only costs the recap, never the verdict.

/// One failed test case: its suite (the test binary), name, and the tail of its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub suite: String,
    pub name: String,
    pub output_tail: Vec<String>,
}

/// Lines of a failed test's stderr (where panics go) kept in the recap.
pub const TAIL_LINES: usize = 25;

/// Every `<testcase>` of `xml` that holds a `<failure` or `<error`.
pub fn failures(xml: &str) -> Vec<Failure> {
    let mut out = Vec::new();
    let mut rest = xml;
    let mut suite = String::new();
    while let Some(start) = next_tag(rest) {
        rest = &rest[start..];
        if rest.starts_with("<testsuite ") {
            suite = attribute(rest, "name").unwrap_or_default();
            rest = &rest[1..];
            continue;
        }
        // A test case runs to its closing tag, or is self-closing (a pass).
        let open_end = rest.find('>').unwrap_or(rest.len());
        let self_closing = rest[..open_end].ends_with('/');
        let end = if self_closing {
            open_end
        } else {
            rest.find("</testcase>").unwrap_or(rest.len())
        };
        let case = &rest[..end];
        if case.contains("<failure") || case.contains("<error") {
            out.push(Failure {
                suite: suite.clone(),
                name: attribute(case, "name").unwrap_or_default(),
                output_tail: tail(&element_text(case, "system-err")),
            });
        }
        rest = &rest[end.max(1)..];
    }
    out
}

/// Offset of the next `<testsuite ` or `<testcase ` tag.
fn next_tag(s: &str) -> Option<usize> {
    match (s.find("<testsuite "), s.find("<testcase ")) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The unescaped value of `name="..."` in the first tag of `tag`.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let head = &tag[..tag.find('>').unwrap_or(tag.len())];
    let key = format!(" {name}=\"");
    let from = head.find(&key)? + key.len();
    let len = head[from..].find('"')?;
    Some(unescape(&head[from..from + len]))
}

/// The unescaped text of the first `<element>...</element>` in `s`, empty without one.
fn element_text(s: &str, element: &str) -> String {
    let open = format!("<{element}>");
    let close = format!("</{element}>");
    let Some(from) = s.find(&open).map(|i| i + open.len()) else {
        return String::new();
    };
    let to = s[from..].find(&close).map_or(s.len(), |i| from + i);
    unescape(&s[from..to])
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

fn tail(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(TAIL_LINES);
    lines[from..].iter().map(|l| l.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="nextest-run" tests="3" failures="1" errors="0">
  <testsuite name="bough::durability" tests="2" disabled="0" errors="0" failures="1">
    <testcase name="passes" classname="bough::durability" time="0.1"/>
    <testcase name="loses &quot;a&quot; write" classname="bough::durability" time="0.2">
      <failure type="test failure with exit code 101"/>
      <system-out>running 1 test</system-out>
      <system-err>thread 'x' panicked at a.rs:1:2:
assertion `left == right` failed: 1 &lt; 2 &amp; more</system-err>
    </testcase>
  </testsuite>
  <testsuite name="bough-gc" tests="1" disabled="0" errors="0" failures="0">
    <testcase name="sweeps" classname="bough-gc" time="0.1">
    </testcase>
  </testsuite>
</testsuites>"#;

    #[test]
    fn a_failed_case_is_named_with_its_suite_and_panic() {
        let f = failures(REPORT);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].suite, "bough::durability");
        assert_eq!(f[0].name, "loses \"a\" write");
        assert_eq!(
            f[0].output_tail,
            [
                "thread 'x' panicked at a.rs:1:2:",
                "assertion `left == right` failed: 1 < 2 & more"
            ]
        );
    }

    #[test]
    fn a_report_without_failures_or_truncated_yields_none_and_does_not_panic() {
        assert!(failures(&REPORT.replace("<failure", "<fine")).is_empty());
        for cut in 0..REPORT.len() {
            if REPORT.is_char_boundary(cut) {
                let _ = failures(&REPORT[..cut]);
            }
        }
    }
}
