//! The report: a Markdown table, JSON, the target rows (PASS / MISS / NOT MEASURED) and
//! SVG charts, all written to one directory.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use serde_json::json;

use crate::Res;
use crate::device::Device;
use crate::engines;
use crate::targets::{self, Target};
use crate::workloads::{Results, Row, Sizes};

/// Everything the report needs to know about the run.
pub struct RunInfo<'a> {
    pub sizes: &'a Sizes,
    pub engines: &'a [String],
    pub skipped: &'a [String],
    pub cold_method: &'a str,
    pub device: Option<&'a Device>,
    pub device_error: Option<&'a str>,
    pub data_dir: &'a Path,
    pub cloud: &'a CloudStatus,
    pub started: String,
    pub wall_secs: f64,
}

/// Whether and where the cloud set (`bough-s3` against `slatedb`) ran.
#[derive(Debug, Clone)]
pub enum CloudStatus {
    /// Neither `--cloud` nor a cloud engine was asked for.
    NotSelected,
    /// Asked for, but the S3 server was missing or unreachable.
    NotMeasured { engines: Vec<String>, why: String },
    Ran {
        engines: Vec<String>,
        endpoint: String,
        bucket: String,
    },
}

fn is_cloud(engine: &str) -> bool {
    crate::cloud::CLOUD.contains(&engine)
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

fn mib(b: u64) -> String {
    format!("{:.1}", b as f64 / 1048576.0)
}

/// The Markdown report.
pub fn markdown(info: &RunInfo<'_>, res: &Results, tg: &[Target]) -> String {
    let s = info.sizes;
    let mut m = String::new();
    let _ = writeln!(m, "# Bough side-by-side benchmark ({})\n", s.mode.name());
    let _ = writeln!(
        m,
        "Started {} · {:.0} s wall · data in `{}` · engines run: {}{}",
        info.started,
        info.wall_secs,
        info.data_dir.display(),
        match info.cloud {
            CloudStatus::Ran { engines, .. } => info
                .engines
                .iter()
                .chain(engines)
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
            _ => info.engines.join(", "),
        },
        if info.skipped.is_empty() {
            String::new()
        } else {
            format!(" · not run: {}", info.skipped.join(", "))
        }
    );
    let _ = writeln!(
        m,
        "\nData set: {} keys × ({} B key + {} B value) = {:.0} MiB of user data ({:.1}x the largest \
         engine write buffer, 64 MiB: fjall's memtable, RocksDB's write buffer, Bough's planned \
         `write_buffer_bytes`), random keys unless the workload says `seq`; \
         cache budget {} MiB while warm, {} MiB for the cold reads. Cold method: {}.\n",
        s.keys,
        crate::measure::KEY_LEN,
        s.value_len,
        (s.keys * (crate::measure::KEY_LEN + s.value_len) as u64) as f64 / 1048576.0,
        (s.keys * (crate::measure::KEY_LEN + s.value_len) as u64) as f64
            / crate::workloads::LARGEST_WRITE_BUFFER as f64,
        s.warm_cache >> 20,
        s.cold_cache >> 20,
        info.cold_method
    );
    let _ = writeln!(m, "Engines:\n");
    for e in info.engines {
        let _ = writeln!(m, "- `{e}`: {}", engines::describe(e));
        if let Some(rev) = e.strip_prefix("bough@") {
            let _ = writeln!(
                m,
                "  (the same harness built against revision {rev}'s `crates/bough`, \
                 run as a second process right after `bough` with the same sizes and settings: \
                 `cargo xtask bench --bough-rev {rev}`)"
            );
        }
        if *e == "bough" {
            let _ = writeln!(
                m,
                "  (local backend: {}; `BOUGH_BENCH_BACKEND` = uring | pread | auto chooses it)",
                engines::backend_used()
            );
        }
    }
    if let CloudStatus::Ran { engines, .. } = info.cloud {
        for e in engines {
            let _ = writeln!(m, "- `{e}`: {}", crate::cloud::describe(e));
        }
    }

    let _ = writeln!(
        m,
        "\n## Targets (issues 16 and 17; issue 9's where they did not replace it; issue 15's before/after)\n"
    );
    if s.mode == crate::workloads::Mode::Smoke {
        let _ = writeln!(
            m,
            "**Smoke sizes: these statuses only show that each target is computed; the figures mean nothing.**\n"
        );
    }
    let _ = writeln!(
        m,
        "| issue | target | wanted | measured | result | detail |"
    );
    let _ = writeln!(m, "|---|---|---|---|---|---|");
    for t in tg {
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} | **{}** | {} |",
            t.issue, t.what, t.target, t.measured, t.status, t.detail
        );
    }
    let pass = tg.iter().filter(|t| t.status == "PASS").count();
    let miss = tg.iter().filter(|t| t.status == "MISS").count();
    let _ = writeln!(
        m,
        "\n{pass} PASS, {miss} MISS, {} NOT MEASURED.",
        tg.len() - pass - miss
    );

    if let Some(d) = info.device {
        let _ = writeln!(m, "\n## The device (fio, same run, same file system)\n");
        let _ = writeln!(m, "| test | result |");
        let _ = writeln!(m, "|---|---|");
        let _ = writeln!(
            m,
            "| random 4 KiB read, QD1 (psync, O_DIRECT) | {:.0} IOPS, p99 {:.0} µs |",
            d.randread_qd1_iops, d.randread_qd1_p99_us
        );
        let _ = writeln!(
            m,
            "| random 4 KiB read, QD32 (io_uring, O_DIRECT) | {:.0} IOPS, p99 {:.0} µs |",
            d.randread_qd32_iops, d.randread_qd32_p99_us
        );
        let _ = writeln!(
            m,
            "| sequential write 1 MiB, QD8 (io_uring, O_DIRECT) | {:.0} MB/s |",
            d.seqwrite_bytes_per_sec / 1e6
        );
        let _ = writeln!(
            m,
            "| 4 KiB write + fdatasync | {:.0} syncs/s, p50 {:.0} µs, p99 {:.0} µs |",
            d.fsync_per_sec, d.fsync_p50_us, d.fsync_p99_us
        );
        let _ = writeln!(m, "\n{}", d.fio_version);
        let _ = writeln!(m, "\n### Bough as a fraction of the hardware\n");
        let _ = writeln!(m, "| Bough figure | device limit | fraction |");
        let _ = writeln!(m, "|---|---|---|");
        let frac = |wl: &str, limit: f64, what: &str, scale: f64, unit: &str| -> Option<String> {
            let r = res.find(wl, "bough")?;
            let v = r.ops_per_sec * scale;
            Some(format!(
                "| {wl}: {v:.0} {unit} | {what}: {limit:.0} {unit} | {:.1} % |",
                100.0 * v / limit.max(1e-9)
            ))
        };
        let user = (crate::measure::KEY_LEN + s.value_len) as f64;
        let large = (crate::measure::KEY_LEN + s.large_len) as f64;
        for line in [
            frac(
                "get_cold_t1",
                d.randread_qd1_iops,
                "random 4 KiB reads QD1",
                1.0,
                "reads/s",
            ),
            frac(
                "get_cold_t32",
                d.randread_qd32_iops,
                "random 4 KiB reads QD32",
                1.0,
                "reads/s",
            ),
            frac(
                "commit_1w",
                d.fsync_per_sec,
                "write + fdatasync",
                1.0,
                "commits/s",
            ),
            frac(
                "commit_8w",
                d.fsync_per_sec,
                "write + fdatasync",
                1.0,
                "commits/s",
            ),
            frac(
                "fill_rand_10k",
                d.seqwrite_bytes_per_sec / 1e6,
                "sequential write",
                user / 1e6,
                "MB/s of user data",
            ),
            frac(
                "large_put_256k",
                d.seqwrite_bytes_per_sec / 1e6,
                "sequential write",
                large / 1e6,
                "MB/s of user data",
            ),
        ]
        .into_iter()
        .flatten()
        {
            let _ = writeln!(m, "{line}");
        }
    } else {
        let _ = writeln!(
            m,
            "\n## The device\n\nfio did not run: {}",
            info.device_error.unwrap_or("unknown reason")
        );
    }

    let _ = writeln!(m, "\n## All workloads\n");
    let _ = writeln!(
        m,
        "Throughput is per second of wall time; latency percentiles are per operation of the \
         named kind. `wr/B` = bytes this process caused to be written to storage (/proc/self/io) \
         per byte of user data; `eng wr/B` = the same from Bough's own counter; `reads/get` = \
         device reads per get counted by the engine (Bough); `4K/get` = bytes read from storage \
         by the process (/proc/self/io, read-ahead included) / 4096 per get; `syncs/op` = file + \
         directory syncs per operation counted by the engine (Bough).\n"
    );
    let _ = writeln!(
        m,
        "| workload | engine | ops/s | unit | p50 µs | p99 µs | latency of | wr/B | eng wr/B | reads/get | 4K/get | syncs/op | disk MiB | vs Bough | note |"
    );
    let _ = writeln!(
        m,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in res.rows.iter().filter(|r| !is_cloud(&r.engine)) {
        let vs = res
            .find(&r.workload, "bough")
            .filter(|_| r.engine != "bough")
            .map(|b| format!("{:.2}x", b.ops_per_sec / r.ops_per_sec.max(1e-9)))
            .unwrap_or_default();
        let _ = writeln!(
            m,
            "| {} | {} | {:.0} | {} | {:.1} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.workload,
            r.engine,
            r.ops_per_sec,
            r.unit,
            r.p50_us,
            r.p99_us,
            r.lat_of,
            fmt_opt(r.write_amp, 2),
            fmt_opt(r.engine_write_amp, 2),
            fmt_opt(r.engine_reads_per_get, 3),
            fmt_opt(r.read_4k_per_get, 3),
            fmt_opt(r.engine_syncs_per_op, 3),
            r.disk_bytes.map(mib).unwrap_or_else(|| "-".into()),
            vs,
            r.note
        );
    }
    let _ = writeln!(
        m,
        "\n`vs Bough` = Bough's ops/s divided by this engine's (above 1: Bough is faster)."
    );

    before_after_section(&mut m, res);

    cloud_section(&mut m, info, res);

    let _ = writeln!(m, "\n## Branches, GC, diff and merge\n");
    let _ = writeln!(m, "| series | size | ms | note |");
    let _ = writeln!(m, "|---|---|---|---|");
    for p in &res.points {
        let size = if p.series.contains("create_branch") || p.series.contains("checkpoint") {
            format!("{} ({} MiB on disk)", p.x_label, mib(p.x as u64))
        } else {
            p.x_label.clone()
        };
        let _ = writeln!(m, "| {} | {} | {:.2} | {} |", p.series, size, p.ms, p.note);
    }
    if let Some(a) = &res.agent_scale {
        m.push_str(&crate::agent_scale::markdown(a));
    }
    if !res.errors.is_empty() {
        let _ = writeln!(m, "\n## Errors\n");
        for e in &res.errors {
            let _ = writeln!(m, "- {e}");
        }
    }
    let _ = writeln!(
        m,
        "\nCharts: `*.svg` beside this file. Settings of every engine: bench/README.md. \
         One run on a shared 2-vCPU VM: compare ratios, expect ±30 % noise between runs."
    );
    m
}

/// Issue 15's before/after table: each Bough row against the baseline's.
fn before_after_section(m: &mut String, res: &Results) {
    let Some(base) = targets::baseline_label(res) else {
        return;
    };
    let _ = writeln!(m, "\n## Before/after: `bough` vs `{base}` (same run)\n");
    let _ = writeln!(
        m,
        "`ratio` = this tree's figure against the baseline's, both as \"higher is better\" \
         (ops/s; for the branch series the inverse of the ms): below {:.2} is worse than noise.\n",
        1.0 - targets::NOISE
    );
    let _ = writeln!(m, "| row | bough | {base} | ratio | |");
    let _ = writeln!(m, "|---|---|---|---|---|");
    for (what, new, old, ratio) in targets::before_after_pairs(res) {
        let flag = if ratio < 1.0 - targets::NOISE {
            "**worse**"
        } else if ratio > 1.0 + targets::NOISE {
            "better"
        } else {
            ""
        };
        let _ = writeln!(m, "| {what} | {new:.1} | {old:.1} | {ratio:.2} | {flag} |");
    }
}

/// The cloud set's table: Bough in S3 mode against SlateDB, with requests per operation.
fn cloud_section(m: &mut String, info: &RunInfo<'_>, res: &Results) {
    let s = info.sizes;
    match info.cloud {
        CloudStatus::NotSelected => {}
        CloudStatus::NotMeasured { engines, why } => {
            let _ = writeln!(m, "\n## Cloud set: Bough (S3 mode) vs SlateDB\n");
            let _ = writeln!(m, "**NOT MEASURED**: {why}\n");
            let _ = writeln!(m, "| workload | engine | result |");
            let _ = writeln!(m, "|---|---|---|");
            for wl in crate::workloads::CLOUD_WORKLOADS {
                for e in engines {
                    let _ = writeln!(m, "| {wl} | {e} | not measured |");
                }
            }
        }
        CloudStatus::Ran {
            engines,
            endpoint,
            bucket,
        } => {
            let _ = writeln!(m, "\n## Cloud set: Bough (S3 mode) vs SlateDB\n");
            let _ = writeln!(
                m,
                "Both engines on the same S3 server (`{endpoint}`, bucket `{bucket}`, a prefix \
                 each): {} keys × ({} B key + {} B value) loaded in durable batches of 1,000; \
                 memory cache {} MiB while warm and {} MiB for the cold rounds, local disk \
                 cache {} MiB. Cold = the engine reopened on an empty local cache directory \
                 before each round (the object data then comes from S3). `GET/op`, `PUT/op` \
                 = requests that reached the object store per operation (counted by a \
                 wrapper around each engine's object-store client), `KiB down/op`, `KiB \
                 up/op` = their body bytes, `other/op` = HEAD + LIST + DELETE. The S3 server \
                 is moto on this machine: request latencies are loopback + Python, not a \
                 real region's.\n",
                s.cloud_keys,
                crate::measure::KEY_LEN,
                s.value_len,
                s.cloud_warm_cache >> 20,
                s.cold_cache >> 20,
                crate::cloud::LOCAL_CACHE_BYTES >> 20
            );
            let _ = writeln!(
                m,
                "| workload | engine | ops/s | unit | p50 µs | p99 µs | latency of | GET/op | PUT/op | other/op | KiB down/op | KiB up/op | bough-s3 vs this | note |"
            );
            let _ = writeln!(
                m,
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
            );
            for wl in crate::workloads::CLOUD_WORKLOADS {
                for e in engines {
                    let Some(r) = res.find(wl, e) else {
                        let _ = writeln!(
                            m,
                            "| {wl} | {e} | - | | | | | | | | | | | not measured (failed: see errors) |"
                        );
                        continue;
                    };
                    let q = r.requests.unwrap_or_default();
                    let per = |v: u64| v as f64 / r.ops.max(1) as f64;
                    let vs = res
                        .find(wl, "bough-s3")
                        .filter(|_| r.engine != "bough-s3")
                        .map(|b| format!("{:.2}x", b.ops_per_sec / r.ops_per_sec.max(1e-9)))
                        .unwrap_or_default();
                    let _ = writeln!(
                        m,
                        "| {} | {} | {:.0} | {} | {:.1} | {:.1} | {} | {:.3} | {:.3} | {:.3} | {:.1} | {:.1} | {} | {} |",
                        r.workload,
                        r.engine,
                        r.ops_per_sec,
                        r.unit,
                        r.p50_us,
                        r.p99_us,
                        r.lat_of,
                        per(q.gets),
                        per(q.puts),
                        per(q.heads + q.lists + q.deletes),
                        per(q.get_bytes) / 1024.0,
                        per(q.put_bytes) / 1024.0,
                        vs,
                        r.note
                    );
                }
            }
            let _ = writeln!(
                m,
                "\n`bough-s3 vs this` = bough-s3's ops/s divided by this engine's (above 1: Bough is faster). \
                 For loads and commits an operation is a key / a commit, so PUT/op of a load is per key."
            );
        }
    }
}

/// The JSON report.
pub fn json(info: &RunInfo<'_>, res: &Results, tg: &[Target]) -> serde_json::Value {
    let s = info.sizes;
    json!({
        "mode": s.mode.name(),
        "started": info.started,
        "wall_secs": info.wall_secs,
        "engines": info.engines,
        "local_backend": engines::backend_used(),
        "not_run": info.skipped,
        "cold_method": info.cold_method,
        "cloud": match info.cloud {
            CloudStatus::NotSelected => json!({"status": "not selected"}),
            CloudStatus::NotMeasured { engines, why } => json!({
                "status": "not measured", "engines": engines, "why": why,
                "workloads": crate::workloads::CLOUD_WORKLOADS,
            }),
            CloudStatus::Ran { engines, endpoint, bucket } => json!({
                "status": "ran", "engines": engines, "endpoint": endpoint, "bucket": bucket,
                "keys": s.cloud_keys,
                "memory_cache_bytes_warm": s.cloud_warm_cache,
                "memory_cache_bytes_cold": s.cold_cache,
                "local_disk_cache_bytes": crate::cloud::LOCAL_CACHE_BYTES,
                "commits": s.cloud_commits,
                "warm_gets": s.cloud_warm_gets,
                "scans": s.cloud_scans,
                "cold_rounds": s.cloud_cold_rounds,
                "cold_gets_per_round": s.cloud_cold_gets_per_round,
            }),
        },
        "settings": {
            "keys": s.keys,
            "key_len": crate::measure::KEY_LEN,
            "value_len": s.value_len,
            "warm_cache_bytes": s.warm_cache,
            "cold_cache_bytes": s.cold_cache,
            "large_value_len": s.large_len,
        },
        "device": info.device.map(|d| json!({
            "fio": d.fio_version,
            "randread_4k_qd1_iops": d.randread_qd1_iops,
            "randread_4k_qd1_p99_us": d.randread_qd1_p99_us,
            "randread_4k_qd32_iops": d.randread_qd32_iops,
            "randread_4k_qd32_p99_us": d.randread_qd32_p99_us,
            "seqwrite_bytes_per_sec": d.seqwrite_bytes_per_sec,
            "fdatasync_per_sec": d.fsync_per_sec,
            "fdatasync_p50_us": d.fsync_p50_us,
            "fdatasync_p99_us": d.fsync_p99_us,
        })),
        "device_error": info.device_error,
        "targets": tg.iter().map(|t| json!({
            "issue": t.issue, "what": t.what, "target": t.target, "measured": t.measured,
            "status": t.status, "detail": t.detail,
        })).collect::<Vec<_>>(),
        "rows": res.rows.iter().map(Row::to_json).collect::<Vec<_>>(),
        "bough_only": res.points.iter().map(|p| json!({
            "series": p.series, "x": p.x, "x_label": p.x_label, "ms": p.ms, "note": p.note,
        })).collect::<Vec<_>>(),
        "agent_scale": res.agent_scale.as_ref().map(crate::agent_scale::AgentScale::to_json),
        "errors": res.errors,
    })
}

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn engine_color(e: &str) -> RGBColor {
    let e = if e == "bough-s3" { "bough" } else { e };
    let i = engines::ALL.iter().position(|x| *x == e).unwrap_or(5);
    PALETTE[i]
}

fn err(e: impl std::fmt::Debug) -> Box<dyn std::error::Error + Send + Sync> {
    format!("chart: {e:?}").into()
}

/// A bar chart of ops/s per engine for one workload.
fn bar_chart(path: &Path, title: &str, unit: &str, bars: &[(String, f64)]) -> Res<()> {
    let root = SVGBackend::new(path, (640, 400)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let max = bars.iter().map(|b| b.1).fold(0.0, f64::max).max(1.0) * 1.15;
    let n = bars.len();
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..max)
        .map_err(err)?;
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 0.01 && i >= 0.0 && (i as usize) < names.len() {
                names[i as usize].clone()
            } else {
                String::new()
            }
        })
        .y_desc(unit)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (e, v))| {
            let x = i as f64;
            Rectangle::new([(x - 0.35, 0.0), (x + 0.35, *v)], engine_color(e).filled())
        }))
        .map_err(err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
            Text::new(
                format!("{v:.0}"),
                (i as f64 - 0.3, *v + max * 0.07),
                ("sans-serif", 13),
            )
        }))
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// A log-log line chart of Bough-only series.
fn line_chart(
    path: &Path,
    title: &str,
    x_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Res<()> {
    let root = SVGBackend::new(path, (640, 400)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let all: Vec<(f64, f64)> = series.iter().flat_map(|s| s.1.iter().copied()).collect();
    if all.is_empty() {
        return Ok(());
    }
    let (x0, x1) = all
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (y0, y1) = all
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            ((x0 * 0.8).max(1e-3)..x1 * 1.25).log_scale(),
            ((y0 * 0.5).max(1e-3)..y1 * 2.0).log_scale(),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("ms")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.2}"))
        .draw()
        .map_err(err)?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 4, c.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Writes every chart into `dir`; returns the file names.
pub fn charts(dir: &Path, res: &Results) -> Res<Vec<String>> {
    let mut files = Vec::new();
    let mut workloads: Vec<&str> = Vec::new();
    for r in &res.rows {
        if !workloads.contains(&r.workload.as_str()) {
            workloads.push(&r.workload);
        }
    }
    for wl in workloads {
        let mut bars: Vec<(String, f64)> = res
            .rows
            .iter()
            .filter(|r| r.workload == wl)
            .map(|r| (r.engine.clone(), r.ops_per_sec))
            .collect();
        bars.sort_by_key(|b| engines::ALL.iter().position(|e| *e == b.0));
        let unit = res
            .rows
            .iter()
            .find(|r| r.workload == wl)
            .map(|r| format!("{}/s", r.unit))
            .unwrap_or_default();
        let name = format!("{wl}.svg");
        bar_chart(&dir.join(&name), wl, &unit, &bars)?;
        files.push(name);
    }
    let series = |names: &[&str], x_mib: bool| -> Vec<(String, Vec<(f64, f64)>)> {
        names
            .iter()
            .map(|n| {
                let pts = res
                    .points
                    .iter()
                    .filter(|p| p.series == *n)
                    .map(|p| (if x_mib { p.x / 1048576.0 } else { p.x }, p.ms.max(1e-3)))
                    .collect::<Vec<_>>();
                (n.to_string(), pts)
            })
            .filter(|s| !s.1.is_empty())
            .collect()
    };
    for (file, title, x, names, mib) in [
        (
            "branch_create.svg",
            "branch creation vs partition size",
            "partition MiB on disk",
            &["bough create_branch", "rocksdb checkpoint"][..],
            true,
        ),
        (
            "gc.svg",
            "GC time vs branch count",
            "branches",
            &["bough gc"][..],
            false,
        ),
        (
            "diff_merge.svg",
            "diff / merge vs divergence",
            "changed keys",
            &[
                "bough diff",
                "bough merge",
                "bough fast-forward",
                "bough fast-forward, source just written",
            ][..],
            false,
        ),
    ] {
        let s = series(names, mib);
        if !s.is_empty() {
            line_chart(&dir.join(file), title, x, &s)?;
            files.push(file.to_string());
        }
    }
    Ok(files)
}
