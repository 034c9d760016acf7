//! The report's target table: the targets of issues 16 (write path), 17 (read path and
//! space), the targets of issue 9 that neither replaced, and issue 15's before/after rule,
//! each judged on this run's rows as PASS, MISS (by how much, and why from the run's own
//! write, sync and space figures) or NOT MEASURED (and why).

use crate::device::Device;
use crate::engines;
use crate::workloads::{Results, Row, Sizes};

/// One target and how the run did against it.
#[derive(Debug, Clone)]
pub struct Target {
    /// The issue that sets it (`16`, `17`, `9`, `15`).
    pub issue: &'static str,
    pub what: String,
    pub target: String,
    pub measured: String,
    /// `PASS`, `MISS` or `NOT MEASURED`.
    pub status: String,
    pub detail: String,
}

/// Slower than its baseline by more than this fraction counts as worse than noise
/// (issue 15's before/after rule; the same 10 % as issue 16's "reads do not regress").
pub const NOISE: f64 = 0.10;

#[derive(Clone, Copy, PartialEq)]
enum Cmp {
    AtLeast,
    AtMost,
}

fn judged(
    issue: &'static str,
    what: String,
    want: f64,
    cmp: Cmp,
    got: Option<(f64, f64)>,
    missing: String,
) -> Target {
    let sign = if cmp == Cmp::AtLeast { ">=" } else { "<=" };
    match got {
        Some((a, b)) if b > 0.0 => {
            let r = a / b;
            let pass = if cmp == Cmp::AtLeast {
                r >= want
            } else {
                r <= want
            };
            let off = if cmp == Cmp::AtLeast {
                format!("short by {:.0} %", (1.0 - r / want) * 100.0)
            } else {
                format!("over by {:.0} %", (r / want - 1.0) * 100.0)
            };
            Target {
                issue,
                what,
                target: format!("{sign} {want:.2}x"),
                measured: format!("{r:.2}x ({} vs {})", num(a), num(b)),
                status: if pass { "PASS" } else { "MISS" }.into(),
                detail: if pass { String::new() } else { off },
            }
        }
        _ => Target {
            issue,
            what,
            target: format!("{sign} {want:.2}x"),
            measured: "-".into(),
            status: "NOT MEASURED".into(),
            detail: missing,
        },
    }
}

/// An absolute target `value <= limit` (or `>=`).
fn absolute(
    issue: &'static str,
    what: String,
    limit: f64,
    cmp: Cmp,
    unit: &str,
    got: Option<f64>,
    missing: String,
) -> Target {
    let sign = if cmp == Cmp::AtLeast { ">=" } else { "<=" };
    match got {
        Some(v) => {
            let pass = if cmp == Cmp::AtLeast {
                v >= limit
            } else {
                v <= limit
            };
            Target {
                issue,
                what,
                target: format!("{sign} {} {unit}", num(limit)),
                measured: format!("{} {unit}", num(v)),
                status: if pass { "PASS" } else { "MISS" }.into(),
                detail: if pass {
                    String::new()
                } else {
                    format!("off by {:.0} %", (v / limit - 1.0).abs() * 100.0)
                },
            }
        }
        None => Target {
            issue,
            what,
            target: format!("{sign} {} {unit}", num(limit)),
            measured: "-".into(),
            status: "NOT MEASURED".into(),
            detail: missing,
        },
    }
}

fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn mib(b: u64) -> String {
    format!("{:.1}", b as f64 / 1048576.0)
}

fn missing(peer: &str) -> String {
    if crate::cloud::CLOUD.contains(&peer) {
        format!("the cloud set did not run {peer} (`--cloud` and an S3 server)")
    } else if engines::available(peer) {
        format!("{peer} was not run or failed (see errors)")
    } else {
        format!("{peer} is not compiled in (build with --features {peer})")
    }
}

/// The first baseline (Bough at another revision) that ran, if any.
pub fn baseline_label(res: &Results) -> Option<String> {
    res.rows
        .iter()
        .map(|r| r.engine.as_str())
        .find(|e| e.starts_with("bough@"))
        .map(str::to_string)
}

/// Evaluates every target on the results.
pub fn targets(res: &Results, device: Option<&Device>, sizes: &Sizes) -> Vec<Target> {
    let row = |wl: &str, e: &str| res.find(wl, e);
    let ops = |wl: &str, e: &str| row(wl, e).map(|r| r.ops_per_sec);
    let pair = |wl: &str, a: &str, b: &str| ops(wl, a).zip(ops(wl, b));
    let mut out = Vec::new();
    let vs = |out: &mut Vec<Target>, issue, wl: &str, peer: &str, want: f64, what: &str| {
        let mut t = judged(
            issue,
            format!("{wl}: Bough vs {peer} ({what})"),
            want,
            Cmp::AtLeast,
            pair(wl, "bough", peer),
            missing(peer),
        );
        if t.status == "MISS" {
            add_why(&mut t, res, wl, Some(peer), device);
        }
        out.push(t);
    };

    // Issue 16: the write path.
    for (peer, want) in [
        ("fjall", 1.0),
        ("rocksdb", 1.0),
        ("redb", 3.0),
        ("lmdb", 3.0),
    ] {
        vs(
            &mut out,
            "16",
            "fill_rand_10k",
            peer,
            want,
            "random durable 10k-key batches, load + settle",
        );
    }
    vs(
        &mut out,
        "16",
        "fill_rand_1k",
        "fjall",
        1.0,
        "random durable 1k-key batches, load + settle",
    );
    vs(
        &mut out,
        "16",
        "commit_1w",
        "fjall",
        1.0,
        "single-key durable commits, 1 writer",
    );
    let mut t = absolute(
        "16",
        "commit_1w: Bough syncs per commit (io_stats)".into(),
        1.0,
        Cmp::AtMost,
        "",
        row("commit_1w", "bough").and_then(|r| r.engine_syncs_per_op),
        "Bough's commit_1w did not run".into(),
    );
    t.target = "exactly 1.00".into();
    if let Some(x) = row("commit_1w", "bough").and_then(|r| r.engine_syncs_per_op) {
        let pass = (x - 1.0).abs() <= 0.02;
        t.status = if pass { "PASS" } else { "MISS" }.into();
        t.detail = if pass {
            String::new()
        } else {
            "why: some commits synced more than their log append (a checkpoint, a log rotation or a manifest record fell among the timed commits)".into()
        };
    }
    out.push(t);
    vs(
        &mut out,
        "16",
        "commit_8w",
        "fjall",
        1.0,
        "8 writers on one partition each",
    );
    let mut t = judged(
        "16",
        "commit_8w: Bough 8 writers vs fjall's single writer".into(),
        3.0,
        Cmp::AtLeast,
        ops("commit_8w", "bough").zip(ops("commit_1w", "fjall")),
        missing("fjall"),
    );
    if t.status == "MISS" {
        add_why(&mut t, res, "commit_8w", None, device);
    }
    out.push(t);
    let mut t = absolute(
        "16",
        "fill_rand_10k: Bough bytes written per user byte (/proc/self/io, load + settle)".into(),
        5.0,
        Cmp::AtMost,
        "B/B",
        row("fill_rand_10k", "bough").and_then(|r| r.write_amp),
        "Bough's fill_rand_10k did not run".into(),
    );
    if t.status == "MISS" {
        t.detail = format!(
            "{}; why: each checkpoint rewrites every leaf the buffered writes touch (and its mapping pages), and random keys over a tree several times the write buffer touch most leaves at every checkpoint",
            t.detail
        );
    }
    out.push(t);
    // Reads do not regress: the ratio against each peer within 10 % of the baseline's
    // ratio against the same peer in the same run, i.e. Bough / baseline >= 0.90.
    let base = baseline_label(res);
    for wl in ["get_warm_t1", "get_warm_t2", "get_cold_t1", "get_cold_t32"] {
        let got = base.as_deref().and_then(|b| pair(wl, "bough", b));
        let t = judged(
            "16",
            format!(
                "{wl}: reads do not regress (Bough's ratio to every peer within 10 % of {}'s)",
                base.as_deref().unwrap_or("the baseline")
            ),
            1.0 - NOISE,
            Cmp::AtLeast,
            got,
            "needs a baseline in the same run (`cargo xtask bench --bough-rev REV`)".into(),
        );
        out.push(t);
    }
    out.push(judged(
        "16",
        "s3_fill_rand_1k: bough-s3 vs slatedb (random durable loads)".into(),
        1.0,
        Cmp::AtLeast,
        pair("s3_fill_rand_1k", "bough-s3", "slatedb"),
        missing("slatedb"),
    ));
    let mut t = judged(
        "16",
        "s3_commit_1w: bough-s3 vs slatedb (single-key durable commits)".into(),
        1.0,
        Cmp::AtLeast,
        pair("s3_commit_1w", "bough-s3", "slatedb"),
        missing("slatedb"),
    );
    let puts = |e: &str| {
        row("s3_commit_1w", e).and_then(|r| r.requests.map(|q| q.puts as f64 / r.ops.max(1) as f64))
    };
    if let (Some(b), Some(s)) = (puts("bough-s3"), puts("slatedb")) {
        t.detail = format!(
            "{}{}PUTs per commit: bough-s3 {b:.2}, slatedb {s:.2} (SlateDB flushed on every write, not on its 100 ms interval)",
            t.detail,
            if t.detail.is_empty() { "" } else { "; " }
        );
    }
    out.push(t);
    branch_creation(&mut out, res, sizes);
    let gc = res
        .points
        .iter()
        .find(|p| p.series == "bough gc" && p.x == 1000.0)
        .map(|p| p.ms);
    out.push(absolute(
        "16",
        "gc with 1,000 branches".into(),
        1000.0,
        Cmp::AtMost,
        "ms",
        gc,
        "the 1,000-branch GC point did not run (smoke sizes stop at 50)".into(),
    ));

    // Issue 17: the read path and space.
    vs(
        &mut out,
        "17",
        "get_warm_t1",
        "lmdb",
        0.8,
        "warm gets, 1 thread",
    );
    vs(
        &mut out,
        "17",
        "get_warm_t2",
        "lmdb",
        0.8,
        "warm gets, 2 threads",
    );
    for wl in ["get_cold_t1", "get_cold_t32"] {
        let x = row(wl, "bough").and_then(|r| r.engine_reads_per_get);
        let mut t = absolute(
            "17",
            format!("{wl}: Bough device reads per get (io_stats)"),
            1.0,
            Cmp::AtMost,
            "",
            x,
            "Bough's cold gets did not run".into(),
        );
        t.target = "1.00 (within ±5 %)".into();
        if let Some(x) = x {
            let pass = (x - 1.0).abs() <= 0.05;
            t.status = if pass { "PASS" } else { "MISS" }.into();
            t.detail = if pass {
                String::new()
            } else {
                let mut d = format!("off by {:+.1} %", (x - 1.0) * 100.0);
                add_detail(&mut d, &why(res, wl, None, device));
                d
            };
        }
        out.push(t);
    }
    let mut t = judged(
        "17",
        "get_cold_t32: Bough gets/s vs the device's random 4 KiB read IOPS at QD32 (fio)".into(),
        0.8,
        Cmp::AtLeast,
        ops("get_cold_t32", "bough").zip(device.map(|d| d.randread_qd32_iops)),
        "fio did not run".into(),
    );
    if t.status == "MISS" {
        add_why(&mut t, res, "get_cold_t32", None, device);
    }
    out.push(t);
    vs(
        &mut out,
        "17",
        "get_cold_t32",
        "lmdb",
        1.5,
        "cold gets, 32 threads",
    );
    vs(
        &mut out,
        "17",
        "get_cold_t32",
        "rocksdb",
        1.5,
        "cold gets, 32 threads",
    );
    vs(&mut out, "17", "scan_100", "lmdb", 0.8, "scans of 100");
    for wl in ["fill_rand_1k", "fill_rand_10k", "overwrite_1k"] {
        let d = |e: &str| row(wl, e).and_then(|r| r.disk_bytes).map(|b| b as f64);
        let mut t = judged(
            "17",
            format!("{wl}: Bough's files on disk vs redb's after the row"),
            1.5,
            Cmp::AtMost,
            d("bough").zip(d("redb")),
            missing("redb"),
        );
        if let (Some(b), Some(r)) = (d("bough"), d("redb")) {
            t.measured = format!("{:.2}x ({} vs {} MiB)", b / r, mib(b as u64), mib(r as u64));
        }
        out.push(t);
    }
    for wl in ["s3_get_cold_t1", "s3_get_cold_t8"] {
        let per_get = |e: &str| {
            row(wl, e).and_then(|r| r.requests.map(|q| q.get_bytes as f64 / r.ops.max(1) as f64))
        };
        let mut t = judged(
            "17",
            format!("{wl}: bough-s3 bytes downloaded per get vs slatedb's"),
            2.0,
            Cmp::AtMost,
            per_get("bough-s3").zip(per_get("slatedb")),
            missing("slatedb"),
        );
        if t.status == "MISS" {
            t.detail = format!(
                "{}; why: a cold page read fetches its whole range (`range_read_bytes`, 256 KiB by default), and a cold get reads index and mapping pages too (each its own range until cached)",
                t.detail
            );
        }
        out.push(t);
        let mut t = judged(
            "17",
            format!("{wl}: bough-s3 vs slatedb (cold gets/s)"),
            1.0,
            Cmp::AtLeast,
            pair(wl, "bough-s3", "slatedb"),
            missing("slatedb"),
        );
        let requests_per_get = |e: &str| {
            row(wl, e).and_then(|r| {
                r.requests
                    .map(|q| (q.gets + q.heads) as f64 / r.ops.max(1) as f64)
            })
        };
        if let ("MISS", Some(b), Some(s)) = (
            t.status.as_str(),
            requests_per_get("bough-s3"),
            requests_per_get("slatedb"),
        ) {
            t.detail = format!(
                "{}; why: requests per get (GET + HEAD), each costing about the same on the store: bough-s3 {b:.3}, slatedb {s:.3} (larger fetches); see results/2026-12-05/cloud-range-reads.md",
                t.detail
            );
        }
        out.push(t);
    }
    for wl in ["s3_get_warm_t1", "s3_scan_10", "s3_scan_100"] {
        out.push(judged(
            "17",
            format!("{wl}: bough-s3 vs slatedb (keeps its lead)"),
            1.0,
            Cmp::AtLeast,
            pair(wl, "bough-s3", "slatedb"),
            missing("slatedb"),
        ));
    }

    // Issue 9's targets that issues 16 and 17 did not replace.
    for peer in ["redb", "lmdb"] {
        vs(
            &mut out,
            "9",
            "fill_rand_1k",
            peer,
            2.0,
            "random durable 1k-key batches, load + settle",
        );
    }
    let largest = largest_create(res, "bough create_branch");
    let ck = largest.and_then(|p| {
        res.points
            .iter()
            .find(|c| c.series == "rocksdb checkpoint" && c.x_label == p.x_label)
    });
    let mut t = judged(
        "9",
        format!(
            "create_branch (p50) vs a RocksDB checkpoint of the same data ({})",
            largest.map_or("largest partition".into(), |p| p.x_label.clone())
        ),
        10.0,
        Cmp::AtLeast,
        ck.zip(largest).map(|(c, p)| (c.ms, p.ms)),
        missing("rocksdb"),
    );
    if let (Some(c), Some(p)) = (ck, largest) {
        t.measured = format!(
            "{:.1}x faster ({:.2} ms vs {:.2} ms)",
            c.ms / p.ms.max(1e-6),
            p.ms,
            c.ms
        );
    }
    out.push(t);

    agent_scale(&mut out, res, sizes);
    // Issue 15: the refactor changed no figure by more than noise.
    out.push(before_after(res));
    out
}

/// Issue 18 §7: branches at agent scale (the goals it states: creation p50 <= 1 ms and flat,
/// <= 4 KiB per idle branch, open <= 1 s with 100,000 branches, GC that grows with what
/// changed since the last cycle rather than with the branch count).
fn agent_scale(out: &mut Vec<Target>, res: &Results, sizes: &Sizes) {
    let a = res.agent_scale.as_ref();
    let (first, last) = match a {
        Some(a) => (a.rows.first(), a.rows.last()),
        None => (None, None),
    };
    let n = last.map_or(0, |r| r.branches);
    let not_run = || "the agent-scale series did not run".to_string();
    let mut small = String::new();
    if n < 100_000 {
        small = format!(
            "the goal is stated for 100,000 branches; this {} run made {n}",
            sizes.mode.name()
        );
    }
    let mut t = absolute(
        "18",
        format!("create_branch p50 with {n} branches in the partition"),
        1.0,
        Cmp::AtMost,
        "ms",
        last.map(|r| r.create_p50_ms),
        not_run(),
    );
    add_detail(&mut t.detail, &small);
    out.push(t);
    out.push(judged(
        "18",
        format!(
            "create_branch p50 flat: with {n} branches against with {}",
            first.map_or(0, |r| r.branches)
        ),
        1.5,
        Cmp::AtMost,
        first
            .zip(last)
            .map(|(f, l)| (l.create_p50_ms, f.create_p50_ms)),
        not_run(),
    ));
    for (what, v) in [
        ("disk", last.map(|r| r.disk_per_branch)),
        ("memory", last.map(|r| r.memory_per_branch)),
    ] {
        let mut t = absolute(
            "18",
            format!("{what} kept per idle branch ({n} branches)"),
            4096.0,
            Cmp::AtMost,
            "B",
            v.map(|b| b as f64),
            not_run(),
        );
        if what == "disk" && v.is_some_and(|b| b > 4096) {
            add_detail(
                &mut t.detail,
                "why: a branch is two files, its CURRENT_TERM record (48 B) and its manifest, \
                 as seed 000 lays a branch out, and the file system gives each a 4 KiB block",
            );
        }
        out.push(t);
    }
    let mut t = absolute(
        "18",
        format!("reopen to the first get with {n} branches"),
        1000.0,
        Cmp::AtMost,
        "ms",
        a.map(|a| a.reopen_to_first_get_ms),
        not_run(),
    );
    add_detail(&mut t.detail, &small);
    if let Some(a) = a {
        // The open figure alone hides what moved off it: the used-terms scan the first
        // creation waits for.
        add_detail(
            &mut t.detail,
            &format!(
                "the first creation after it took {:.0} ms more",
                a.first_create_after_reopen_ms
            ),
        );
    }
    out.push(t);
    let mut t = absolute(
        "18",
        format!("manifests a GC cycle reads with nothing changed since the last ({n} branches)"),
        crate::agent_scale::CHANGED_BRANCHES as f64,
        Cmp::AtMost,
        "manifests",
        a.map(|a| a.gc_unchanged_manifests_read as f64),
        not_run(),
    );
    if let Some(a) = a {
        // What it reads grows with the change; its time still grows with the branch count.
        add_detail(
            &mut t.detail,
            &format!(
                "its time still grows with the branch count: {:.0} ms (a listing and a stamp \
                 per file), {:.0} ms after {} branches changed, {:.0} ms for the process's \
                 first cycle",
                a.gc_unchanged_ms,
                a.gc_changed_ms,
                crate::agent_scale::CHANGED_BRANCHES,
                a.gc_first_ms
            ),
        );
    }
    out.push(t);
}

fn largest_create<'a>(res: &'a Results, series: &str) -> Option<&'a crate::workloads::Point> {
    res.points
        .iter()
        .filter(|p| p.series == series)
        .max_by(|a, b| a.x.total_cmp(&b.x))
}

/// Issue 16: creation stays flat with the parent's write buffer full.
fn branch_creation_full_buffer(out: &mut Vec<Target>, res: &Results) {
    let p = largest_create(res, "bough create_branch, full write buffer");
    let mut t = absolute(
        "16",
        match p {
            Some(p) => format!(
                "create_branch p50 with a full write buffer, {} MiB partition ({})",
                mib(p.x as u64),
                p.x_label
            ),
            None => "create_branch p50 with a full write buffer".into(),
        },
        1.0,
        Cmp::AtMost,
        "ms",
        p.map(|p| p.ms),
        "the branch workloads did not run".into(),
    );
    if let Some(p) = p {
        add_detail(&mut t.detail, &p.note);
    }
    out.push(t);
}

fn branch_creation(out: &mut Vec<Target>, res: &Results, sizes: &Sizes) {
    branch_creation_full_buffer(out, res);
    match largest_create(res, "bough create_branch") {
        Some(p) => {
            let mut t = absolute(
                "16",
                format!(
                    "create_branch p50 on a {} MiB partition ({})",
                    mib(p.x as u64),
                    p.x_label
                ),
                1.0,
                Cmp::AtMost,
                "ms",
                Some(p.ms),
                String::new(),
            );
            let mut caveat = String::new();
            if p.x < 0.9e9 {
                caveat.push_str(&format!(
                    "the target is stated for 1 GB; this {} run's largest partition is smaller",
                    sizes.mode.name()
                ));
            }
            add_detail(
                &mut caveat,
                "measured after a maintenance pass and one small write, which the write buffer holds: the fork names the parent's log and checkpoints nothing (forks by reference)",
            );
            add_detail(&mut t.detail, &caveat);
            out.push(t);
        }
        None => out.push(absolute(
            "16",
            "create_branch p50 on a 1 GB partition".into(),
            1.0,
            Cmp::AtMost,
            "ms",
            None,
            "the branch workloads did not run".into(),
        )),
    }
}

/// Issue 15: every row Bough and the baseline both ran, Bough's figure against the
/// baseline's (ops/s: higher is better; the branch series' ms: lower is better).
pub fn before_after_pairs(res: &Results) -> Vec<(String, f64, f64, f64)> {
    let Some(base) = baseline_label(res) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for r in res.rows.iter().filter(|r| r.engine == "bough") {
        if let Some(b) = res.find(&r.workload, &base) {
            out.push((
                r.workload.clone(),
                r.ops_per_sec,
                b.ops_per_sec,
                r.ops_per_sec / b.ops_per_sec.max(1e-9),
            ));
        }
    }
    for p in res.points.iter().filter(|p| p.series.starts_with("bough ")) {
        let theirs = format!("{base} {}", &p.series["bough ".len()..]);
        if let Some(b) = res
            .points
            .iter()
            .find(|q| q.series == theirs && q.x_label == p.x_label)
        {
            out.push((
                format!("{} ({}), ms", p.series, p.x_label),
                p.ms,
                b.ms,
                b.ms / p.ms.max(1e-9),
            ));
        }
    }
    out
}

fn before_after(res: &Results) -> Target {
    let pairs = before_after_pairs(res);
    let base = baseline_label(res).unwrap_or_else(|| "a baseline".into());
    let what = format!("every Bough row vs {base} (same run): none worse by more than noise");
    let want = format!(">= {:.2}x each", 1.0 - NOISE);
    let Some(worst) = pairs.iter().min_by(|a, b| a.3.total_cmp(&b.3)) else {
        return Target {
            issue: "15",
            what,
            target: want,
            measured: "-".into(),
            status: "NOT MEASURED".into(),
            detail: "needs a baseline in the same run (`cargo xtask bench --bough-rev 8e26e9c`)"
                .into(),
        };
    };
    let worse: Vec<&str> = pairs
        .iter()
        .filter(|p| p.3 < 1.0 - NOISE)
        .map(|p| p.0.as_str())
        .collect();
    Target {
        issue: "15",
        what,
        target: want,
        measured: format!(
            "worst {:.2}x ({}) of {} pairs",
            worst.3,
            worst.0,
            pairs.len()
        ),
        status: if worse.is_empty() { "PASS" } else { "MISS" }.into(),
        detail: if worse.is_empty() {
            String::new()
        } else {
            format!(
                "worse than noise: {} (see \"Before/after\")",
                worse.join(", ")
            )
        },
    }
}

fn add_detail(d: &mut String, more: &str) {
    if more.is_empty() {
        return;
    }
    if !d.is_empty() {
        d.push_str("; ");
    }
    d.push_str(more);
}

fn add_why(t: &mut Target, res: &Results, wl: &str, peer: Option<&str>, device: Option<&Device>) {
    let w = why(res, wl, peer, device);
    if !w.is_empty() {
        t.detail = format!("{}; why: {w}", t.detail);
    }
}

/// What the measured rows say about why Bough's figure in `wl` trails `peer`: the space,
/// write and sync figures the same run measured.
fn why(res: &Results, wl: &str, peer: Option<&str>, device: Option<&Device>) -> String {
    let b: Option<&Row> = res.find(wl, "bough");
    let p = peer.and_then(|p| res.find(wl, p));
    let mut parts = Vec::new();
    if wl.starts_with("get_cold") {
        if let (Some(bd), Some(pd)) = (b.and_then(|r| r.disk_bytes), p.and_then(|r| r.disk_bytes))
            && bd > pd
        {
            parts.push(format!(
                "Bough's files take {} MiB against {} MiB (maintenance on), so a read is likelier to miss the OS page cache",
                mib(bd),
                mib(pd)
            ));
        }
        if let Some(x) = b.and_then(|r| r.read_4k_per_get) {
            parts.push(format!("{x:.2} × 4 KiB read from storage per get"));
        }
        if peer.is_none() {
            parts.push(
                "every get is one synchronous read from one of 32 threads on 2 cores, where fio keeps 32 reads in flight from one thread; the lookup and the page's checksum take CPU the 32 threads' wake-ups compete for".into(),
            );
        }
    } else if wl.starts_with("get_warm") {
        parts.push(
            "LMDB binary-searches a memory-mapped page in place; Bough takes the top three levels and the mapping chunk from the tree version's kept nodes, probes the page cache once for the leaf (a shard lock and a reference count), scans up to 4 prefix-compressed entries of one restart block and copies the value out".into(),
        );
    } else if wl.starts_with("scan") {
        parts.push(
            "LMDB walks memory-mapped pages in place, each entry at a fixed place; Bough's borrowed walk (`Branch::for_each_in`, nothing copied) decodes each prefix-compressed entry (its key rebuilt from the one before, varints), checks every key against the one before and its leaf's bound, and reaches each leaf through the mapping and the page cache (a shard lock and a reference count): in `get_probe` with SCAN 100, the cache 17 %, entry decoding 39 %".into(),
        );
    } else if wl.starts_with("fill") || wl.starts_with("overwrite") {
        if let (Some(bw), Some(pw)) = (b.and_then(|r| r.write_amp), p.and_then(|r| r.write_amp)) {
            parts.push(format!(
                "{bw:.1} bytes written per user byte against {pw:.1}: each checkpoint of the write buffer rewrites every leaf its writes touch (and its mapping pages), and once the buffer is full commits wait for checkpoints"
            ));
        }
        if let Some(r) = b {
            parts.push(format!("batch p50 {:.1} ms", r.p50_us / 1000.0));
            if let Some(s) = r.settle_secs {
                parts.push(format!("Bough's settle (maintenance pass) {s:.2} s"));
            }
        }
        if let Some(s) = p.and_then(|r| r.settle_secs) {
            parts.push(format!("the peer's settle {s:.2} s"));
        }
    } else if wl.starts_with("commit") {
        if let Some(x) = b.and_then(|r| r.engine_syncs_per_op) {
            parts.push(format!(
                "{x:.2} syncs per commit (the log's fdatasync; group commit shares one among the writers queued)"
            ));
        }
        if let Some(d) = device {
            parts.push(format!(
                "the device does {:.0} write+fdatasync/s",
                d.fsync_per_sec
            ));
        }
        // A mean far above the median: a few commits waited long, not every one a little.
        if let Some(r) = b.filter(|r| r.wait_per_op() > 2.0 * r.p50_us && r.p50_us > 0.0) {
            parts.push(format!(
                "p50 {:.0} µs against a mean of {:.0} µs per commit: a few commits waited for a checkpoint of the write buffer (one that filled it, or one that found its log file full: the record naming the next file checkpoints the buffer; `WriteBufferUsage::commit_checkpoints` counts both)",
                r.p50_us,
                r.wait_per_op()
            ));
        }
    }
    parts.join("; ")
}
