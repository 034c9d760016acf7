//! The device's own limits, measured with fio in the same run and on the same file system
//! as the engines' data: random 4 KiB reads at QD1 and QD32 (O_DIRECT), sequential write
//! bandwidth (1 MiB, QD8, O_DIRECT) and the latency of a 4 KiB write + fdatasync.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::Res;

/// What fio measured.
#[derive(Debug, Clone, Default)]
pub struct Device {
    pub fio_version: String,
    /// Random 4 KiB reads, psync, O_DIRECT, 1 outstanding I/O.
    pub randread_qd1_iops: f64,
    pub randread_qd1_p99_us: f64,
    /// Random 4 KiB reads, io_uring, O_DIRECT, 32 outstanding I/Os.
    pub randread_qd32_iops: f64,
    pub randread_qd32_p99_us: f64,
    /// Sequential 1 MiB writes, io_uring, O_DIRECT, QD8, in bytes per second.
    pub seqwrite_bytes_per_sec: f64,
    /// 4 KiB writes, each followed by fdatasync: syncs per second and latency.
    pub fsync_per_sec: f64,
    pub fsync_p50_us: f64,
    pub fsync_p99_us: f64,
}

fn fio(args: &[String]) -> Res<Value> {
    let out = Command::new("fio")
        .args(args)
        .arg("--output-format=json")
        .output()
        .map_err(|e| format!("cannot run fio: {e} (apt-get install -y fio)"))?;
    if !out.status.success() {
        return Err(format!(
            "fio failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    // fio may print notes before the JSON document.
    let start = text.find('{').ok_or("fio printed no JSON")?;
    Ok(serde_json::from_str(&text[start..])?)
}

fn job(doc: &Value) -> &Value {
    &doc["jobs"][0]
}

fn pct(v: &Value, p: &str) -> f64 {
    v["clat_ns"]["percentile"][p].as_f64().unwrap_or(0.0) / 1e3
}

/// Runs the four fio jobs in `dir` for `secs` seconds each on a `size`-byte file.
pub fn measure(dir: &Path, secs: u64, size: &str) -> Res<Device> {
    std::fs::create_dir_all(dir)?;
    let file = dir.join("fio-test-file");
    let sync_file = dir.join("fio-sync-file");
    let common = |name: &str, f: &Path| -> Vec<String> {
        vec![
            format!("--name={name}"),
            format!("--filename={}", f.display()),
            format!("--runtime={secs}"),
            "--time_based".into(),
            "--group_reporting".into(),
        ]
    };
    let version = Command::new("fio")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();

    // Sequential write first: it also lays the file out for the read jobs.
    let mut a = common("seqwrite", &file);
    a.extend(
        [
            format!("--size={size}"),
            "--direct=1".into(),
            "--rw=write".into(),
            "--bs=1M".into(),
            "--ioengine=io_uring".into(),
            "--iodepth=8".into(),
        ]
        .iter()
        .cloned(),
    );
    let seq = fio(&a)?;
    let seq_bw = job(&seq)["write"]["bw_bytes"].as_f64().unwrap_or(0.0);

    let mut a = common("randread-qd1", &file);
    a.extend([
        format!("--size={size}"),
        "--direct=1".into(),
        "--rw=randread".into(),
        "--bs=4k".into(),
        "--ioengine=psync".into(),
    ]);
    let qd1 = fio(&a)?;
    let mut a = common("randread-qd32", &file);
    a.extend([
        format!("--size={size}"),
        "--direct=1".into(),
        "--rw=randread".into(),
        "--bs=4k".into(),
        "--ioengine=io_uring".into(),
        "--iodepth=32".into(),
    ]);
    let qd32 = fio(&a)?;
    let mut a = common("fdatasync", &sync_file);
    a.extend([
        "--size=256M".into(),
        "--rw=write".into(),
        "--bs=4k".into(),
        "--ioengine=psync".into(),
        "--fdatasync=1".into(),
    ]);
    let sync = fio(&a)?;
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(&sync_file);

    let sj = &job(&sync)["sync"];
    let sync_lat = if sj["lat_ns"]["mean"].as_f64().unwrap_or(0.0) > 0.0 {
        sj
    } else {
        &job(&sync)["write"]
    };
    let p = |v: &Value, k: &str| {
        v["lat_ns"]["percentile"][k]
            .as_f64()
            .or_else(|| v["clat_ns"]["percentile"][k].as_f64())
            .unwrap_or(0.0)
            / 1e3
    };
    Ok(Device {
        fio_version: version,
        randread_qd1_iops: job(&qd1)["read"]["iops"].as_f64().unwrap_or(0.0),
        randread_qd1_p99_us: pct(&job(&qd1)["read"], "99.000000"),
        randread_qd32_iops: job(&qd32)["read"]["iops"].as_f64().unwrap_or(0.0),
        randread_qd32_p99_us: pct(&job(&qd32)["read"], "99.000000"),
        seqwrite_bytes_per_sec: seq_bw,
        fsync_per_sec: job(&sync)["write"]["iops"].as_f64().unwrap_or(0.0),
        fsync_p50_us: p(sync_lat, "50.000000"),
        fsync_p99_us: p(sync_lat, "99.000000"),
    })
}
