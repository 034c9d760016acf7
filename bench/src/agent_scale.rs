//! Branches at agent scale (issue 18 §7): one partition grows to tens of thousands of
//! branches while the harness measures what each one costs — creation latency as the count
//! grows, the disk and memory an idle branch keeps, reopening the partition, and a GC cycle
//! after a few branches changed and after none did. Bough only; run once per report (not
//! in the before/after rounds: the baseline has the same layout and the series takes
//! minutes at full size).

use std::path::Path;
use std::time::Instant;

use serde_json::{Value, json};

use crate::Res;
use crate::engines::{BoughEngine, Engine};
use crate::measure;
use crate::workloads::{Sizes, bough_load};

/// Creations timed at each branch count: the last ones before the count is reached.
const TIMED_CREATIONS: usize = 100;

/// Branches written to between the first GC cycle and the second (what changed since the
/// last cycle).
pub const CHANGED_BRANCHES: usize = 10;

/// Creation latency and idle cost at one branch count.
#[derive(Debug, Clone)]
pub struct CountRow {
    pub branches: usize,
    pub create_p50_ms: f64,
    pub create_p99_ms: f64,
    /// Growth of the partition's files since before the first branch, per branch.
    pub disk_per_branch: u64,
    /// Growth of the process's resident memory since before the first branch, per branch
    /// (every `Branch` handle dropped: what the store keeps for an idle branch).
    pub memory_per_branch: u64,
}

/// The whole series.
#[derive(Debug, Clone, Default)]
pub struct AgentScale {
    pub rows: Vec<CountRow>,
    /// Branches in the partition for the figures below (the last count).
    pub branches: usize,
    /// The process's first GC cycle (nothing decoded yet: it reads every manifest).
    pub gc_first_ms: f64,
    pub gc_first_manifests_read: u64,
    /// The next cycle, after `CHANGED_BRANCHES` branches took one write each.
    pub gc_changed_ms: f64,
    /// The next GC cycle, nothing changed since the one before.
    pub gc_unchanged_ms: f64,
    pub gc_manifests_read: u64,
    pub gc_unchanged_manifests_read: u64,
    /// Store open, partition and `main` opened, one get: what a restarted process waits for.
    pub reopen_to_first_get_ms: f64,
    /// The first branch created after that reopen.
    pub first_create_after_reopen_ms: f64,
}

impl AgentScale {
    pub fn to_json(&self) -> Value {
        json!({
            "counts": self.rows.iter().map(|r| json!({
                "branches": r.branches, "create_p50_ms": r.create_p50_ms,
                "create_p99_ms": r.create_p99_ms, "disk_per_branch": r.disk_per_branch,
                "memory_per_branch": r.memory_per_branch,
            })).collect::<Vec<_>>(),
            "branches": self.branches,
            "gc_first_ms": self.gc_first_ms,
            "gc_first_manifests_read": self.gc_first_manifests_read,
            "gc_changed_ms": self.gc_changed_ms,
            "gc_unchanged_ms": self.gc_unchanged_ms,
            "gc_manifests_read": self.gc_manifests_read,
            "gc_unchanged_manifests_read": self.gc_unchanged_manifests_read,
            "reopen_to_first_get_ms": self.reopen_to_first_get_ms,
            "first_create_after_reopen_ms": self.first_create_after_reopen_ms,
        })
    }
}

/// Resident memory of this process, from `/proc/self/statm` (0 where there is none).
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or(0.0)
}

fn name(i: usize) -> String {
    format!("agent{i}")
}

/// Runs the series on a fresh partition under `base`.
pub fn run(base: &Path, s: &Sizes) -> Res<AgentScale> {
    eprintln!("== bough branches at agent scale");
    let dir = base.join("bough-agent-scale");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let e = BoughEngine::open_with(&dir, 512 << 20, false)?;
    bough_load(&e.main, s.agent_base_keys)?;
    e.store.run_maintenance()?;
    let (disk0, mem0) = (measure::disk_bytes(&dir), resident_bytes());
    let mut out = AgentScale::default();
    let mut created = 0usize;
    for &count in &s.agent_counts {
        let mut took = Vec::new();
        while created < count {
            let t = Instant::now();
            drop(e.part.create_branch(&name(created), "main")?);
            if count - created <= TIMED_CREATIONS {
                took.push(ms(t));
            }
            created += 1;
        }
        took.sort_by(f64::total_cmp);
        let row = CountRow {
            branches: count,
            create_p50_ms: percentile(&took, 0.5),
            create_p99_ms: percentile(&took, 0.99),
            disk_per_branch: measure::disk_bytes(&dir).saturating_sub(disk0) / count as u64,
            memory_per_branch: resident_bytes().saturating_sub(mem0) / count as u64,
        };
        eprintln!(
            "  {count:>7} branches: create p50 {:.2} ms p99 {:.2} ms; per branch {} B on disk, {} B in memory",
            row.create_p50_ms, row.create_p99_ms, row.disk_per_branch, row.memory_per_branch
        );
        out.rows.push(row);
    }
    out.branches = created;
    let t = Instant::now();
    let r = crate::shim::gc(&e.part)?;
    out.gc_first_ms = ms(t);
    out.gc_first_manifests_read = r.manifests_read as u64;
    for i in 0..CHANGED_BRANCHES.min(created) {
        let b = e.part.branch(&name(i * created / CHANGED_BRANCHES))?;
        let mut w = bough::WriteBatch::new();
        w.put(format!("changed{i}"), "by an agent");
        b.write_blocking(w)?;
    }
    let t = Instant::now();
    let r = crate::shim::gc(&e.part)?;
    out.gc_changed_ms = ms(t);
    out.gc_manifests_read = r.manifests_read as u64;
    let t = Instant::now();
    let r = crate::shim::gc(&e.part)?;
    out.gc_unchanged_ms = ms(t);
    out.gc_unchanged_manifests_read = r.manifests_read as u64;
    drop(e);
    let t = Instant::now();
    let e = BoughEngine::open_with(&dir, 512 << 20, false)?;
    e.get(&measure::sorted_key(0))?;
    out.reopen_to_first_get_ms = ms(t);
    let t = Instant::now();
    e.part.create_branch("after-reopen", "main")?;
    out.first_create_after_reopen_ms = ms(t);
    eprintln!(
        "  {created} branches: gc {:.1} ms first, {:.1} ms after {CHANGED_BRANCHES} changed ({} manifests read), {:.1} ms with nothing changed; reopen to first get {:.1} ms, first create after it {:.1} ms",
        out.gc_first_ms,
        out.gc_changed_ms,
        out.gc_manifests_read,
        out.gc_unchanged_ms,
        out.reopen_to_first_get_ms,
        out.first_create_after_reopen_ms
    );
    drop(e);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

/// The report's section: one line per branch count, then GC and reopening.
pub fn markdown(a: &AgentScale) -> String {
    use std::fmt::Write;
    let mut m = String::from(
        "\n## Branches at agent scale\n\n\
         One partition (`main` holding the base keys) grows to the counts below; each row's \
         creations are the last 100 before the count, every `Branch` handle dropped.\n\n\
         | branches | create p50 ms | create p99 ms | disk per branch | memory per branch |\n\
         |---|---|---|---|---|\n",
    );
    for r in &a.rows {
        let _ = writeln!(
            m,
            "| {} | {:.2} | {:.2} | {} B | {} B |",
            r.branches, r.create_p50_ms, r.create_p99_ms, r.disk_per_branch, r.memory_per_branch
        );
    }
    let _ = writeln!(
        m,
        "\nWith {} branches: the process's first GC cycle: {:.1} ms ({} manifests read); the \
         next, after {CHANGED_BRANCHES} branches took a write: {:.1} ms ({} manifests read); \
         the next, nothing changed: {:.1} ms ({} manifests read). \
         Reopening (store, partition, `main`, one get): {:.1} ms; the first branch created \
         after it: {:.1} ms.",
        a.branches,
        a.gc_first_ms,
        a.gc_first_manifests_read,
        a.gc_changed_ms,
        a.gc_manifests_read,
        a.gc_unchanged_ms,
        a.gc_unchanged_manifests_read,
        a.reopen_to_first_get_ms,
        a.first_create_after_reopen_ms
    );
    m
}
