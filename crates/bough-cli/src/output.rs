//! Output helpers: escaping binary bytes, hex, sizes, times, aligned tables, JSON values for
//! keys and values, and a progress line on stderr.

use std::io::Write;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Map, Value as Json, json};

use crate::error::CliError;

/// Bytes for a terminal: valid UTF-8 as is, except `\` and control characters, which are
/// escaped (`\\`, `\t`, `\n`, `\r`, `\xNN`); invalid UTF-8 bytes as `\xNN`. The escaping is
/// reversible with [`unescape`].
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c if c.is_control() => {
                    let mut buf = [0u8; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        out.push_str(&format!("\\x{b:02x}"));
                    }
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// The inverse of [`escape`]: `\\`, `\t`, `\n`, `\r`, `\0` and `\xNN`; any other character
/// stands for its UTF-8 bytes.
pub fn unescape(s: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        match chars.next() {
            Some('\\') => out.push(b'\\'),
            Some('t') => out.push(b'\t'),
            Some('n') => out.push(b'\n'),
            Some('r') => out.push(b'\r'),
            Some('0') => out.push(0),
            Some('x') => {
                let hi = chars.next();
                let lo = chars.next();
                let byte = match (hi, lo) {
                    (Some(h), Some(l)) => h
                        .to_digit(16)
                        .zip(l.to_digit(16))
                        .map(|(h, l)| (h * 16 + l) as u8),
                    _ => None,
                };
                out.push(byte.ok_or("`\\x` must be followed by two hex digits")?);
            }
            Some(other) => return Err(format!("unknown escape `\\{other}`")),
            None => return Err("a trailing `\\` escapes nothing".into()),
        }
    }
    Ok(out)
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Parses hex (upper or lower case, even length).
pub fn unhex(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim();
    if !s.len().is_multiple_of(2) {
        return Err(format!("hex `{s}` has an odd number of digits"));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            s.get(i..i + 2)
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(|| format!("`{s}` is not hex"))
        })
        .collect()
}

/// Bytes as text: hex when asked, escaped otherwise.
pub fn show(bytes: &[u8], as_hex: bool) -> String {
    if as_hex { hex(bytes) } else { escape(bytes) }
}

/// Adds `name` (UTF-8 text) or `name_hex` to a JSON object, so any bytes survive the trip.
pub fn put_bytes(obj: &mut Map<String, Json>, name: &str, bytes: &[u8], force_hex: bool) {
    match std::str::from_utf8(bytes) {
        Ok(s) if !force_hex => {
            obj.insert(name.into(), json!(s));
        }
        _ => {
            obj.insert(format!("{name}_hex"), json!(hex(bytes)));
        }
    }
}

/// Reads `name` or `name_hex` from a JSON object.
pub fn get_bytes(obj: &Map<String, Json>, name: &str) -> Result<Option<Vec<u8>>, String> {
    if let Some(v) = obj.get(name) {
        return match v {
            Json::String(s) => Ok(Some(s.as_bytes().to_vec())),
            other => Err(format!("`{name}` must be a string, found {other}")),
        };
    }
    match obj.get(&format!("{name}_hex")) {
        Some(Json::String(s)) => unhex(s).map(Some),
        Some(other) => Err(format!("`{name}_hex` must be a string, found {other}")),
        None => Ok(None),
    }
}

/// A byte count for people: `512 B`, `8.0 KiB`, `1.5 GiB`. Ten lines, so no crate: the
/// format (binary units, one decimal) is pinned by the CLI's tests and read by scripts.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// Milliseconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn time(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Now, in ms since the epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Left-aligned columns separated by two spaces; the header row is the first row. Kept by
/// hand on purpose: no borders, no wrapping and no terminal-width probing, so `awk` and
/// `cut` read the same text a person sees; a table crate's plainest preset adds only a
/// dependency.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut l = String::new();
        for (i, c) in cells.enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            l.push_str(c);
            let pad = widths
                .get(i)
                .copied()
                .unwrap_or(0)
                .saturating_sub(c.chars().count());
            l.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(&mut header.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
    out
}

/// Prints a JSON document on one line.
pub fn print_json(v: &Json) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, v).map_err(|e| CliError::io(format!("stdout: {e}")))?;
    writeln!(out).map_err(|e| CliError::io(format!("stdout: {e}")))
}

/// A progress bar on stderr (indicatif): percentage, rate and ETA when the total is known, a
/// count and rate otherwise. Drawn only when stderr is a terminal and progress is allowed, so
/// scripts and `--json` output never see it.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
    label: String,
    started: Instant,
}

impl Progress {
    /// A progress bar for `label`; `total` (bytes) enables a percentage and an ETA.
    pub fn new(label: impl Into<String>, allowed: bool, total: Option<u64>) -> Self {
        let template = match total {
            Some(_) => {
                "{msg} {percent:>3}% [{bar:24}] {bytes}/{total_bytes} ({bytes_per_sec}, ETA {eta})"
            }
            None => "{msg} {bytes} ({bytes_per_sec}, {elapsed})",
        };
        Self::with(label.into(), allowed, total, template)
    }

    /// A progress bar over `total` units of work (files, snapshots), for [`step`](Self::step).
    pub fn of_units(label: impl Into<String>, allowed: bool, total: u64) -> Self {
        let template = "{msg} {percent:>3}% [{bar:24}] {pos}/{len} (ETA {eta})";
        Self::with(label.into(), allowed, Some(total), template)
    }

    fn with(label: String, allowed: bool, total: Option<u64>, template: &str) -> Self {
        let target = if allowed {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(total, target);
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(label.clone());
        Progress {
            bar,
            label,
            started: Instant::now(),
        }
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// `items` entries and `bytes` bytes done (indicatif throttles the redraws).
    pub fn tick(&mut self, items: u64, bytes: u64) {
        self.bar
            .set_message(format!("{} {items} entries", self.label));
        self.bar.set_position(bytes);
    }

    /// `done` units of `total` done, with what is being worked on.
    pub fn step(&mut self, done: u64, total: u64, what: &str) {
        self.bar.set_length(total);
        self.bar.set_message(format!("{} {what}", self.label));
        self.bar.set_position(done);
    }

    /// Clears the bar.
    pub fn finish(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// `1 file`, `2 files`.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Entries per second for a summary line.
pub fn rate(items: u64, d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs <= 0.0 {
        return "-".into();
    }
    format!("{:.0}/s", items as f64 / secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_round_trips_any_bytes() {
        let samples: Vec<Vec<u8>> = vec![
            b"plain".to_vec(),
            b"tab\there\nnew\\line".to_vec(),
            vec![0, 1, 0xff, 0xfe, b'a'],
            "héllo ☃".as_bytes().to_vec(),
            vec![],
        ];
        for s in samples {
            let e = escape(&s);
            assert_eq!(unescape(&e).unwrap(), s, "{e}");
            assert!(!e.contains('\t') && !e.contains('\n'));
        }
        assert_eq!(escape(b"a\x00b"), "a\\x00b");
        assert!(unescape("\\q").is_err());
        assert!(unescape("\\x1").is_err());
    }

    #[test]
    fn hex_sizes_times_tables() {
        assert_eq!(hex(&[0, 0xab]), "00ab");
        assert_eq!(unhex("00AB").unwrap(), vec![0, 0xab]);
        assert!(unhex("abc").is_err() && unhex("zz").is_err());
        assert_eq!(size(512), "512 B");
        assert_eq!(size(8192), "8.0 KiB");
        assert_eq!(size(3 << 20), "3.0 MiB");
        assert_eq!(time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(time(1_709_251_199_000), "2024-02-29 23:59:59 UTC");
        let t = table(&["A", "BB"], &[vec!["xyz".into(), "1".into()]]);
        assert_eq!(t, "A    BB\nxyz  1\n");
    }

    #[test]
    fn json_bytes_fall_back_to_hex() {
        let mut m = Map::new();
        put_bytes(&mut m, "key", b"abc", false);
        put_bytes(&mut m, "value", &[0xff], false);
        assert_eq!(m["key"], json!("abc"));
        assert_eq!(m["value_hex"], json!("ff"));
        assert_eq!(get_bytes(&m, "value").unwrap(), Some(vec![0xff]));
        assert_eq!(get_bytes(&m, "nope").unwrap(), None);
    }
}
