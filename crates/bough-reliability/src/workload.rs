//! The deterministic multi-branch workload and its model.
//!
//! A *family* is one partition (`rel.<family>`) and the sequence of operations run on it one
//! after another: writes on several branches, branch creation and deletion, archives,
//! point-in-time branches, restores, merges, new terms, compaction, re-homing and GC.
//! Operation `i` of a family is a pure function of `(seed, family, i)` and the model's state
//! after operation `i - 1`, so a verifier regenerates the expected state of any prefix without
//! talking to the process that ran it — the kill test needs only the child's stream of
//! acknowledged operation numbers.
//!
//! Values are self-describing (`<family>/<branch>/<op>/k<key>|<filler>`) and unique per write,
//! so a value read back names the write it came from.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::rng::Rng;

/// The table every family writes to; family `f` is partition `f`.
pub const TABLE: &str = "rel";

/// Branch names the workload uses (all valid, some with `_` and `-`).
pub const BRANCH_POOL: &[&str] = &["dev", "feat_a", "feat-b", "hotfix", "v2", "exp_x"];

/// A branch's keys and values.
pub type State = Arc<BTreeMap<Vec<u8>, Arc<[u8]>>>;

/// How big a workload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadConfig {
    /// Families (partitions), each with its own sequence of operations.
    pub families: u32,
    /// Operations per family.
    pub ops_per_family: usize,
    /// Distinct keys per family (shared by its branches, so merges meet).
    pub keys: u32,
    /// Most live branches per family, `main` included.
    pub max_branches: usize,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            families: 2,
            ops_per_family: 60,
            keys: 40,
            max_branches: 5,
        }
    }
}

/// One operation of a family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// One write batch on a branch.
    Write {
        branch: String,
        puts: Vec<u32>,
        deletes: Vec<u32>,
    },
    /// `create_branch(name, from)`.
    CreateBranch { name: String, from: String },
    /// `delete_branch(name)`.
    DeleteBranch { name: String },
    /// `archive()` of a branch.
    Archive { branch: String },
    /// `prune_archives(keep)` of a branch.
    PruneArchives { branch: String, keep: usize },
    /// A new branch at the branch's latest archive.
    BranchFromArchive { branch: String, name: String },
    /// `merge(source, target)` with the `Theirs` policy.
    Merge { source: String, target: String },
    /// `open_new_term(branch)`.
    NewTerm { branch: String },
    /// `restore(latest archive, backup)`.
    Restore { branch: String, backup: String },
    /// `compact_now()` of a branch.
    Compact { branch: String },
    /// `rehome()` of a branch (forgets its merge bases).
    Rehome { branch: String },
    /// GC of the family's partition.
    Gc,
}

impl Op {
    /// A short name of the operation's kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Write { .. } => "write",
            Op::CreateBranch { .. } => "create_branch",
            Op::DeleteBranch { .. } => "delete_branch",
            Op::Archive { .. } => "archive",
            Op::PruneArchives { .. } => "prune_archives",
            Op::BranchFromArchive { .. } => "branch_from_archive",
            Op::Merge { .. } => "merge",
            Op::NewTerm { .. } => "new_term",
            Op::Restore { .. } => "restore",
            Op::Compact { .. } => "compact",
            Op::Rehome { .. } => "rehome",
            Op::Gc => "gc",
        }
    }

    /// Whether the operation must write to storage when it succeeds (GC, compaction and
    /// pruning may find nothing to do).
    pub fn always_writes(&self) -> bool {
        !matches!(self, Op::Gc | Op::Compact { .. } | Op::PruneArchives { .. })
    }
}

/// Operation numbers from here up tag writes outside the generated sequence.
pub const EXTRA_OPS: usize = 1 << 40;

/// The key with number `k`.
pub fn key(k: u32) -> Vec<u8> {
    format!("k{k:03}").into_bytes()
}

/// The value operation `op` of `family` writes to key `k` on `branch`: self-describing,
/// unique per write, 16 bytes to ~9 KiB (some values go to overflow pages).
pub fn value(seed: u64, family: u32, op: usize, branch: &str, k: u32) -> Vec<u8> {
    let mut r = Rng::derive(seed, &[u64::from(family), op as u64, u64::from(k), 0x5641]);
    let len = match r.below(100) {
        0..=69 => r.range(0, 180),
        70..=94 => r.range(180, 1400),
        _ => r.range(1400, 9000),
    } as usize;
    let mut v = format!("{family}/{branch}/{op}/k{k}|").into_bytes();
    let fill = r.next_u64();
    v.extend((0..len).map(|i| b'a' + (((fill >> (i % 57)) as u8) ^ (i as u8)) % 26));
    v
}

/// One branch of the model.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BranchModel {
    /// Its keys and values.
    pub state: State,
    /// Merge bases by other branch: (logical time recorded, common state).
    pub bases: BTreeMap<String, (u64, State)>,
    /// Its archives, oldest first.
    pub archives: Vec<State>,
}

/// What can be observed of one branch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BranchView {
    /// Its keys and values.
    pub state: State,
    /// Its archives' states, oldest first.
    pub archives: Vec<State>,
    /// The merge bases its manifest records, by other branch.
    pub bases: BTreeMap<String, State>,
}

/// What can be observed of a family: its live branches.
pub type FamilyView = BTreeMap<String, BranchView>;

/// The model of one family after some prefix of its operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyModel {
    /// Which family.
    pub family: u32,
    /// Operations applied so far (the next one has this number).
    pub applied: usize,
    /// Live branches.
    pub branches: BTreeMap<String, BranchModel>,
}

impl FamilyModel {
    /// A family before its first operation: `main`, empty.
    pub fn new(family: u32) -> Self {
        let mut branches = BTreeMap::new();
        branches.insert("main".to_string(), BranchModel::default());
        FamilyModel {
            family,
            applied: 0,
            branches,
        }
    }

    /// The model after the first `n` operations.
    pub fn after(seed: u64, cfg: &WorkloadConfig, family: u32, n: usize) -> Self {
        Self::after_with(seed, cfg, family, n, &[])
    }

    /// The model after the first `n` operations, where operation `i` of each `(i, k)` in
    /// `partial` ended in its outcome `k` (see [`outcomes`](Self::outcomes)) — a crash cut
    /// it short — instead of completing.
    pub fn after_with(
        seed: u64,
        cfg: &WorkloadConfig,
        family: u32,
        n: usize,
        partial: &[(usize, usize)],
    ) -> Self {
        let mut m = FamilyModel::new(family);
        while m.applied < n {
            let op = m.next_op(seed, cfg);
            match partial.iter().find(|(i, _)| *i == m.applied) {
                Some(&(_, k)) => {
                    let mut outs = m.outcomes(seed, &op);
                    let last = outs.len().saturating_sub(1);
                    m = outs.swap_remove(k.min(last));
                }
                None => m.apply(seed, &op),
            }
        }
        m
    }

    /// What a reader should see.
    pub fn view(&self) -> FamilyView {
        self.branches
            .iter()
            .map(|(n, b)| {
                let view = BranchView {
                    state: b.state.clone(),
                    archives: b.archives.clone(),
                    bases: b
                        .bases
                        .iter()
                        .map(|(o, (_, s))| (o.clone(), s.clone()))
                        .collect(),
                };
                (n.clone(), view)
            })
            .collect()
    }

    fn live(&self) -> Vec<String> {
        self.branches.keys().cloned().collect()
    }

    fn with_archives(&self) -> Vec<String> {
        self.branches
            .iter()
            .filter(|(_, b)| !b.archives.is_empty())
            .map(|(n, _)| n.clone())
            .collect()
    }

    fn free_names(&self) -> Vec<String> {
        BRANCH_POOL
            .iter()
            .filter(|n| !self.branches.contains_key(**n))
            .map(|n| n.to_string())
            .collect()
    }

    /// The merge base the store would pick for merging `source` into `target`.
    pub fn merge_base(&self, source: &str, target: &str) -> Option<&State> {
        let t = self.branches.get(target)?.bases.get(source);
        let s = self.branches.get(source)?.bases.get(target);
        // The newer wins; on a tie the source's record (read second) does.
        match (t, s) {
            (Some(a), Some(b)) => Some(if b.0 >= a.0 { &b.1 } else { &a.1 }),
            (Some(a), None) => Some(&a.1),
            (None, Some(b)) => Some(&b.1),
            (None, None) => None,
        }
    }

    /// Operation number `self.applied`: a pure function of the seed and the model.
    pub fn next_op(&self, seed: u64, cfg: &WorkloadConfig) -> Op {
        let mut r = Rng::derive(seed, &[u64::from(self.family), self.applied as u64, 0x4F50]);
        let live = self.live();
        let free = self.free_names();
        let archived = self.with_archives();
        let pickb = |r: &mut Rng| r.pick(&live).cloned().unwrap_or_else(|| "main".into());
        let pairs: Vec<(String, String)> = live
            .iter()
            .flat_map(|s| live.iter().map(move |t| (s.clone(), t.clone())))
            .filter(|(s, t)| s != t && self.merge_base(s, t).is_some())
            .collect();
        // A few tries: the first kind that makes sense here wins, else a write.
        for _ in 0..4 {
            let roll = r.below(100);
            let op = match roll {
                0..=49 => None,
                50..=56 if live.len() < cfg.max_branches && !free.is_empty() => {
                    Some(Op::CreateBranch {
                        name: r.pick(&free).cloned().unwrap_or_default(),
                        from: pickb(&mut r),
                    })
                }
                57..=60 if live.len() > 1 => {
                    let others: Vec<String> =
                        live.iter().filter(|b| *b != "main").cloned().collect();
                    r.pick(&others)
                        .map(|n| Op::DeleteBranch { name: n.clone() })
                }
                61..=66 => Some(Op::Archive {
                    branch: pickb(&mut r),
                }),
                67..=68 if !archived.is_empty() => {
                    // One to three of the oldest go, so a crash's possible leftovers (any
                    // subset of them) stay few to enumerate.
                    let branch = r.pick(&archived).cloned().unwrap_or_default();
                    let have = self.branches.get(&branch).map_or(0, |b| b.archives.len());
                    Some(Op::PruneArchives {
                        branch,
                        keep: have.saturating_sub(r.range(1, 4) as usize),
                    })
                }
                69..=71
                    if !archived.is_empty()
                        && live.len() < cfg.max_branches
                        && !free.is_empty() =>
                {
                    Some(Op::BranchFromArchive {
                        branch: r.pick(&archived).cloned().unwrap_or_default(),
                        name: r.pick(&free).cloned().unwrap_or_default(),
                    })
                }
                72..=80 if !pairs.is_empty() => r.pick(&pairs).map(|(s, t)| Op::Merge {
                    source: s.clone(),
                    target: t.clone(),
                }),
                81..=83 => Some(Op::NewTerm {
                    branch: pickb(&mut r),
                }),
                84..=85
                    if !archived.is_empty()
                        && live.len() < cfg.max_branches
                        && !free.is_empty() =>
                {
                    Some(Op::Restore {
                        branch: r.pick(&archived).cloned().unwrap_or_default(),
                        backup: r.pick(&free).cloned().unwrap_or_default(),
                    })
                }
                86..=89 => Some(Op::Compact {
                    branch: pickb(&mut r),
                }),
                90..=91 => Some(Op::Rehome {
                    branch: pickb(&mut r),
                }),
                92..=99 => Some(Op::Gc),
                _ => continue,
            };
            if let Some(op) = op {
                return op;
            }
        }
        let branch = pickb(&mut r);
        let n = r.range(1, 9) as usize;
        let mut keys = BTreeSet::new();
        for _ in 0..n {
            keys.insert(r.below(u64::from(cfg.keys.max(1))) as u32);
        }
        let state = &self.branches.get(&branch).map(|b| b.state.clone());
        let (mut puts, mut deletes) = (Vec::new(), Vec::new());
        for k in keys {
            let present = state.as_ref().is_some_and(|s| s.contains_key(&key(k)));
            if present && r.chance(25) {
                deletes.push(k);
            } else {
                puts.push(k);
            }
        }
        Op::Write {
            branch,
            puts,
            deletes,
        }
    }

    /// Applies a write outside the generated sequence (the operation count does not move):
    /// `tag` stands in for the operation number in the values, so it must not collide with
    /// one (use numbers from [`EXTRA_OPS`] up).
    pub fn extra_write(&mut self, seed: u64, branch: &str, keys: &[u32], tag: usize) {
        if let Some(b) = self.branches.get_mut(branch) {
            let s = Arc::make_mut(&mut b.state);
            for &k in keys {
                s.insert(key(k), value(seed, self.family, tag, branch, k).into());
            }
        }
    }

    /// Applies operation number `self.applied` (as `next_op` generated it).
    pub fn apply(&mut self, seed: u64, op: &Op) {
        let mut outcomes = self.outcomes(seed, op);
        if let Some(last) = outcomes.pop() {
            *self = last;
        }
    }

    /// The states a crash during `op` may leave, the completed operation last. Every
    /// operation is atomic except `Restore`, which first creates the backup branch, and
    /// `PruneArchives`, which deletes archives one by one.
    pub fn outcomes(&self, seed: u64, op: &Op) -> Vec<FamilyModel> {
        let now = self.applied as u64;
        let mut m = self.clone();
        m.applied += 1;
        let mut partial = Vec::new();
        match op {
            Op::Write {
                branch,
                puts,
                deletes,
            } => {
                if let Some(b) = m.branches.get_mut(branch) {
                    let s = Arc::make_mut(&mut b.state);
                    for &k in puts {
                        let v = value(seed, self.family, self.applied, branch, k);
                        s.insert(key(k), v.into());
                    }
                    for &k in deletes {
                        s.remove(&key(k));
                    }
                }
            }
            Op::CreateBranch { name, from } => {
                if let Some(p) = m.branches.get(from).map(|b| b.state.clone()) {
                    let mut b = BranchModel {
                        state: p.clone(),
                        ..Default::default()
                    };
                    b.bases.insert(from.clone(), (now, p));
                    m.branches.insert(name.clone(), b);
                }
            }
            Op::DeleteBranch { name } => {
                m.branches.remove(name);
                // No merge base naming it survives: the store drops them from every other
                // branch right after the deletion, or (after a crash in between) when that
                // branch's head opens again, which reading it back does first.
                for b in m.branches.values_mut() {
                    b.bases.remove(name);
                }
            }
            Op::Archive { branch } => {
                if let Some(b) = m.branches.get_mut(branch) {
                    b.archives.push(b.state.clone());
                }
            }
            Op::PruneArchives { branch, keep } => {
                if let Some(b) = m.branches.get(branch) {
                    // One deletion after another, made durable together at the end: a crash
                    // may keep any subset of the doomed archives.
                    let excess = b.archives.len().saturating_sub(*keep).min(8);
                    for mask in 1..(1u32 << excess).saturating_sub(1) {
                        let mut p = m.clone();
                        if let Some(pb) = p.branches.get_mut(branch) {
                            let mut i = 0;
                            pb.archives.retain(|_| {
                                let gone = i < excess && mask & (1 << i) != 0;
                                i += 1;
                                !gone
                            });
                        }
                        partial.push(p);
                    }
                }
                if let Some(b) = m.branches.get_mut(branch) {
                    let excess = b.archives.len().saturating_sub(*keep);
                    b.archives.drain(..excess);
                }
            }
            Op::BranchFromArchive { branch, name } => {
                if let Some(a) = m
                    .branches
                    .get(branch)
                    .and_then(|b| b.archives.last().cloned())
                {
                    let mut b = BranchModel {
                        state: a.clone(),
                        ..Default::default()
                    };
                    b.bases.insert(branch.clone(), (now, a));
                    m.branches.insert(name.clone(), b);
                }
            }
            Op::Merge { source, target } => {
                let base = m.merge_base(source, target).cloned();
                let src = m.branches.get(source).map(|b| b.state.clone());
                if let (Some(base), Some(src), Some(t)) = (base, src, m.branches.get_mut(target)) {
                    if t.state == base {
                        t.state = src.clone();
                    } else {
                        let s = Arc::make_mut(&mut t.state);
                        let keys: BTreeSet<&Vec<u8>> = base.keys().chain(src.keys()).collect();
                        for k in keys {
                            match (base.get(k), src.get(k)) {
                                (b, Some(v)) if b != Some(v) => {
                                    s.insert(k.clone(), v.clone());
                                }
                                (Some(_), None) => {
                                    s.remove(k);
                                }
                                _ => {}
                            }
                        }
                    }
                    t.bases.insert(source.clone(), (now, src));
                }
            }
            Op::NewTerm { .. } | Op::Compact { .. } | Op::Gc => {}
            Op::Restore { branch, backup } => {
                let cur = m.branches.get(branch).cloned();
                if let Some(cur) = cur
                    && let Some(a) = cur.archives.last().cloned()
                {
                    let mut bk = BranchModel {
                        state: cur.state.clone(),
                        ..Default::default()
                    };
                    bk.bases.insert(branch.clone(), (now, cur.state.clone()));
                    m.branches.insert(backup.clone(), bk);
                    partial.push(m.clone());
                    if let Some(b) = m.branches.get_mut(branch) {
                        b.state = a;
                        b.bases.clear();
                    }
                }
            }
            Op::Rehome { branch } => {
                if let Some(b) = m.branches.get_mut(branch) {
                    b.bases.clear();
                }
            }
        }
        partial.push(m);
        partial
    }
}

/// One line describing how `seen` differs from `want`, or `None` when they are equal.
pub fn describe_diff(want: &FamilyView, seen: &FamilyView) -> Option<String> {
    if want == seen {
        return None;
    }
    let mut out = Vec::new();
    for name in want.keys().chain(seen.keys()).collect::<BTreeSet<_>>() {
        match (want.get(name), seen.get(name)) {
            (Some(_), None) => out.push(format!("branch {name} missing")),
            (None, Some(_)) => out.push(format!("unexpected branch {name}")),
            (Some(w), Some(seen)) => {
                let (ws, wa, ss, sa) = (&w.state, &w.archives, &seen.state, &seen.archives);
                if ws != ss {
                    out.push(format!("branch {name}: {}", state_diff(ws, ss)));
                }
                if w.bases != seen.bases {
                    out.push(format!(
                        "branch {name}: merge bases with {:?} expected, {:?} found{}",
                        w.bases.keys().collect::<Vec<_>>(),
                        seen.bases.keys().collect::<Vec<_>>(),
                        if w.bases.keys().eq(seen.bases.keys()) {
                            " (states differ)"
                        } else {
                            ""
                        }
                    ));
                }
                if wa != sa {
                    out.push(format!(
                        "branch {name}: {} archives expected, {} found{}",
                        wa.len(),
                        sa.len(),
                        if wa.len() == sa.len() {
                            " (contents differ)"
                        } else {
                            ""
                        }
                    ));
                }
            }
            (None, None) => {}
        }
    }
    Some(out.join("; "))
}

/// How two states differ (first few keys).
pub fn state_diff(want: &State, seen: &State) -> String {
    let mut out = Vec::new();
    for k in want.keys().chain(seen.keys()).collect::<BTreeSet<_>>() {
        let (w, s) = (want.get(k), seen.get(k));
        if w != s {
            out.push(format!(
                "{}: want {} saw {}",
                String::from_utf8_lossy(k),
                short(w),
                short(s)
            ));
        }
    }
    let n = out.len();
    out.truncate(4);
    format!("{n} keys differ [{}]", out.join(", "))
}

fn short(v: Option<&Arc<[u8]>>) -> String {
    match v {
        None => "-".into(),
        Some(v) => {
            let text = String::from_utf8_lossy(v);
            let head = text.split('|').next().unwrap_or("");
            format!("{head}({}B)", v.len())
        }
    }
}

/// How an observed state relates to the states it may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mismatch {
    /// Keys whose value is none of the allowed ones (garbage, or a write from elsewhere).
    pub wrong_values: u64,
    /// Keys whose acknowledged value is missing or older.
    pub lost: u64,
}

/// Classifies each key of `seen` against the allowed states: a value no allowed state holds
/// is wrong; a key where `seen` holds what only a state *before* the acknowledged one holds,
/// or nothing where every allowed state holds something, is lost.
pub fn classify(allowed: &[&State], before: Option<&State>, seen: &State) -> Mismatch {
    let mut m = Mismatch::default();
    let mut keys: BTreeSet<&Vec<u8>> = seen.keys().collect();
    for a in allowed {
        keys.extend(a.keys());
    }
    for k in keys {
        let s = seen.get(k);
        if allowed.iter().any(|a| a.get(k) == s) {
            continue;
        }
        let older = before.is_some_and(|b| b.get(k) == s);
        if s.is_none() || older {
            m.lost += 1;
        } else {
            m.wrong_values += 1;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_varied() {
        let cfg = WorkloadConfig::default();
        let a = FamilyModel::after(9, &cfg, 0, 200);
        let b = FamilyModel::after(9, &cfg, 0, 200);
        assert_eq!(a, b);
        let mut kinds = BTreeSet::new();
        let mut m = FamilyModel::new(0);
        for _ in 0..400 {
            let op = m.next_op(9, &cfg);
            kinds.insert(op.kind());
            m.apply(9, &op);
        }
        for k in [
            "write",
            "create_branch",
            "merge",
            "archive",
            "gc",
            "restore",
        ] {
            assert!(kinds.contains(k), "{k} never generated: {kinds:?}");
        }
    }

    #[test]
    fn merges_follow_the_three_way_rule() {
        let cfg = WorkloadConfig::default();
        let mut m = FamilyModel::new(0);
        let w = |branch: &str, puts: Vec<u32>| Op::Write {
            branch: branch.into(),
            puts,
            deletes: vec![],
        };
        m.apply(1, &w("main", vec![1, 2]));
        m.apply(
            1,
            &Op::CreateBranch {
                name: "dev".into(),
                from: "main".into(),
            },
        );
        m.apply(1, &w("dev", vec![2]));
        m.apply(1, &w("main", vec![3]));
        m.apply(
            1,
            &Op::Merge {
                source: "dev".into(),
                target: "main".into(),
            },
        );
        let main = &m.branches["main"].state;
        let dev = &m.branches["dev"].state;
        assert_eq!(main.get(&key(2)), dev.get(&key(2)), "dev's change taken");
        assert!(main.contains_key(&key(3)), "main's own change kept");
        let _ = cfg;
    }
}
