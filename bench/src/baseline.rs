//! Before/after rows (issue 15: "the benchmark … passes before and after, no ratio worse by
//! more than noise"): Bough at another git revision runs as one more engine of the same run.
//!
//! `cargo xtask bench --bough-rev REV` exports REV's tree, builds this same harness against
//! that tree's `crates/bough` (feature `baseline`, plus the shim of `src/shim/` for REV's
//! API where it differs) into a second binary, and passes it here as `--baseline
//! bough@REV=BINARY`. The `bough` engine rows then run in rounds that alternate this
//! tree's binary and that one (`ENGINE_ROUNDS` in main.rs), each a fresh child with the same
//! sizes and `--label bough` or `--label bough@REV` and `--no-branches`: it runs the `bough`
//! workloads, relabels its rows and writes its report.json, whose rows join this run's; each
//! row is the median round's ([`median_rows`]). The Bough-only branch series run in rounds
//! the same way (`--only-branches` in the child), each point the median of its rounds. Each
//! binary embeds one Bough in its own process (no IPC on the measured path), on the same
//! machine minutes apart.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Res;
use crate::workloads::{Point, Results, Row};

/// A second Bough to run beside the tree's own.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// The engine name its rows carry, `bough@<rev>`.
    pub label: String,
    pub binary: PathBuf,
}

impl Baseline {
    /// Parses `LABEL=BINARY`.
    pub fn parse(spec: &str) -> Result<Baseline, String> {
        let (label, binary) = spec
            .split_once('=')
            .ok_or_else(|| format!("--baseline wants LABEL=BINARY, got {spec:?}"))?;
        if !label.starts_with("bough@") || label.len() <= "bough@".len() {
            return Err(format!("a baseline's label is bough@<rev>, got {label:?}"));
        }
        Ok(Baseline {
            label: label.to_string(),
            binary: PathBuf::from(binary),
        })
    }
}

impl Baseline {
    /// This tree's own harness binary as a child run (rows labelled `bough`): its branch
    /// rounds then start from a fresh process, as the baseline's do. In one long-lived
    /// process the same build's branch creations ran 2x slower from the second round on
    /// (2026-12-03: p50 1.6-2.1 ms in fresh processes, 3.5-4.2 ms in the parent).
    pub fn this_tree() -> Res<Baseline> {
        Ok(Baseline {
            label: "bough".to_string(),
            binary: std::env::current_exe()?,
        })
    }
}

/// What the child run shares with this one.
pub struct Shared<'a> {
    /// `--smoke`, `--quick` or nothing.
    pub mode_flag: Option<&'static str>,
    pub keys: Option<u64>,
    pub data_dir: &'a Path,
    pub out: &'a Path,
}

/// Which half of its workloads a baseline runs in one start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The engine rows (`--no-branches`).
    Engines,
    /// One round of the branch series (`--only-branches`).
    Branches,
}

/// Runs `part` of `b` and adds its rows, series and errors to `out`.
pub fn run(b: &Baseline, part: Part, shared: &Shared<'_>, out: &mut Results) {
    eprintln!("== {} ({part:?}): {}", b.label, b.binary.display());
    if let Err(e) = run_inner(b, part, shared, out) {
        eprintln!("  {} failed: {e}", b.label);
        out.errors.push(format!("{}: {e}", b.label));
    }
}

fn run_inner(b: &Baseline, part: Part, shared: &Shared<'_>, out: &mut Results) -> Res<()> {
    let dir_name = b.label.replace('@', "-");
    let report_dir = shared.out.join(&dir_name);
    let _ = std::fs::remove_file(report_dir.join("report.json"));
    let mut cmd = Command::new(&b.binary);
    cmd.args(["--engines", "bough", "--no-fio", "--label", &b.label]);
    if let Some(flag) = shared.mode_flag {
        cmd.arg(flag);
    }
    if let Some(k) = shared.keys {
        cmd.args(["--keys", &k.to_string()]);
    }
    match part {
        Part::Engines => cmd.arg("--no-branches"),
        Part::Branches => cmd.arg("--only-branches"),
    };
    cmd.arg("--data-dir")
        .arg(shared.data_dir.join(&dir_name))
        .arg("--out")
        .arg(&report_dir);
    // Its report goes to its JSON; its stdout (the Markdown) is not wanted here.
    cmd.stdout(std::process::Stdio::null());
    let status = cmd
        .status()
        .map_err(|e| format!("{}: {e}", b.binary.display()))?;
    if !status.success() {
        return Err(format!("{} exited with {status}", b.binary.display()).into());
    }
    let text = std::fs::read_to_string(report_dir.join("report.json"))?;
    let js: serde_json::Value = serde_json::from_str(&text)?;
    absorb(&js, out)
}

/// Takes the rows, Bough-only series and errors of a child's report.json.
pub fn absorb(js: &serde_json::Value, out: &mut Results) -> Res<()> {
    if let Some(b) = js["local_backend"].as_str() {
        crate::engines::note_child_backend(b);
    }
    let rows = js["rows"].as_array().ok_or("report.json has no rows")?;
    for r in rows {
        out.rows
            .push(Row::from_json(r).ok_or("a row of report.json does not parse")?);
    }
    for p in js["bough_only"].as_array().into_iter().flatten() {
        out.points.push(Point {
            series: p["series"].as_str().unwrap_or_default().to_string(),
            x: p["x"].as_f64().unwrap_or_default(),
            x_label: p["x_label"].as_str().unwrap_or_default().to_string(),
            ms: p["ms"].as_f64().unwrap_or_default(),
            note: p["note"].as_str().unwrap_or_default().to_string(),
        });
    }
    for e in js["errors"].as_array().into_iter().flatten() {
        out.errors.push(e.as_str().unwrap_or_default().to_string());
    }
    Ok(())
}

/// One row per (workload, engine) of `rows`, in first-seen order: the round whose ops/s is
/// the median (the lower of the middle two for an even count), so every figure of the row
/// comes from one round; its note lists each round's ops/s.
pub fn median_rows(rows: Vec<Row>) -> Vec<Row> {
    let mut groups: Vec<Vec<Row>> = Vec::new();
    for r in rows {
        match groups.iter_mut().find(|g| {
            g.first()
                .is_some_and(|f| f.workload == r.workload && f.engine == r.engine)
        }) {
            Some(g) => g.push(r),
            None => groups.push(vec![r]),
        }
    }
    groups
        .into_iter()
        .filter_map(|mut g| {
            if g.len() == 1 {
                return g.pop();
            }
            let rounds: Vec<String> = g.iter().map(|r| format!("{:.0}", r.ops_per_sec)).collect();
            g.sort_by(|a, b| a.ops_per_sec.total_cmp(&b.ops_per_sec));
            let n = g.len();
            let mut row = g.swap_remove((n - 1) / 2);
            let sep = if row.note.is_empty() { "" } else { "; " };
            row.note = format!(
                "{}{sep}median of {n} rounds ({} {}/s)",
                row.note,
                rounds.join(", "),
                row.unit
            );
            Some(row)
        })
        .collect()
}

/// In the child: its rows and series carry `label` instead of `bough`.
pub fn relabel(label: &str, res: &mut Results) {
    for r in &mut res.rows {
        if r.engine == "bough" {
            r.engine = label.to_string();
        }
    }
    for p in &mut res.points {
        if let Some(rest) = p.series.strip_prefix("bough ") {
            p.series = format!("{label} {rest}");
        }
    }
    for e in &mut res.errors {
        *e = format!("{label}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_rows_keep_the_median_round_of_each_workload_and_engine() {
        let row = |engine: &str, ops: f64| Row {
            workload: "scan_100".into(),
            engine: engine.into(),
            unit: "scans".into(),
            ops_per_sec: ops,
            p50_us: 1e6 / ops,
            ..Row::default()
        };
        let rows = vec![
            row("bough", 30.0),
            row("bough@x", 20.0),
            row("bough@x", 10.0),
            row("bough", 10.0),
            row("bough", 20.0),
            row("bough@x", 40.0),
        ];
        let m = median_rows(rows);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].engine.as_str(), m[0].ops_per_sec), ("bough", 20.0));
        assert_eq!(
            m[0].p50_us,
            1e6 / 20.0,
            "every figure comes from the median round"
        );
        assert!(
            m[0].note
                .contains("median of 3 rounds (30, 10, 20 scans/s)"),
            "{}",
            m[0].note
        );
        assert_eq!((m[1].engine.as_str(), m[1].ops_per_sec), ("bough@x", 20.0));
        let one = median_rows(vec![row("bough", 5.0)]);
        assert_eq!(one[0].note, "", "a single round is left as it is");
    }

    #[test]
    fn rows_survive_the_json_round_trip_and_relabel() {
        let mut res = Results::default();
        res.rows.push(Row {
            workload: "fill_rand_10k".into(),
            engine: "bough".into(),
            unit: "keys".into(),
            ops: 10,
            secs: 2.0,
            ops_per_sec: 5.0,
            lat_of: "batch".into(),
            p50_us: 1.5,
            p99_us: 3.0,
            write_amp: Some(4.0),
            disk_bytes: Some(4096),
            settle_secs: Some(0.5),
            note: "n".into(),
            ..Row::default()
        });
        res.points.push(Point {
            series: "bough gc".into(),
            x: 10.0,
            x_label: "10 branches".into(),
            ms: 1.0,
            note: String::new(),
        });
        relabel("bough@abc1234", &mut res);
        let js = serde_json::json!({
            "rows": res.rows.iter().map(Row::to_json).collect::<Vec<_>>(),
            "bough_only": [{"series": res.points[0].series, "x": 10.0, "x_label": "10 branches", "ms": 1.0, "note": ""}],
            "errors": [],
        });
        let mut back = Results::default();
        absorb(&js, &mut back).unwrap();
        let r = &back.rows[0];
        assert_eq!(r.engine, "bough@abc1234");
        assert_eq!(
            (r.ops, r.write_amp, r.disk_bytes, r.settle_secs),
            (10, Some(4.0), Some(4096), Some(0.5))
        );
        assert_eq!(back.points[0].series, "bough@abc1234 gc");
        assert!(Baseline::parse("bough@abc=/x").is_ok());
        assert!(Baseline::parse("redb=/x").is_err());
        assert!(Baseline::parse("bough@abc").is_err());
    }
}
