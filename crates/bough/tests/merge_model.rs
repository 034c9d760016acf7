//! Model-based test of diff, merge, reset and re-home over random branch histories.
//!
//! Every branch has an ordered-map model holding each key's value, user timestamp and
//! expiry; the merge bases the store keeps per pair of branches are modelled too (recorded
//! at fork, by merges and resets; dropped by re-homing and when the branch they name is
//! deleted — names come from a small pool, so they are reused). Histories mix puts (some
//! with values larger than a page, some with a TTL, a few already expired), deletes,
//! identical writes on two branches, truncations, expiry runs, new terms, GC and reopens,
//! while an injected `ManualClock` moves forward, sometimes far enough to expire keys.
//!
//! **Expiry semantics under test:** at the store clock's time, an entry whose expiry has
//! passed is *absent* — for reads, for diffs (on either side) and for all three states a
//! merge compares (base, target, source) — whether or not expiry has physically deleted it
//! from that branch yet.
//!
//! **Deletes are writes:** the model keeps each delete as a tombstone with its timestamp
//! (invisible to reads, like the store's). "Newest timestamp wins" in a merge is the write
//! path's rule — the source's entry or delete wins when its timestamp is at least the
//! target's — with a delete counted at its tombstone's timestamp; a conflict reports a
//! delete as its tombstone; a diff reports when a removed key was deleted.
//!
//! Checked against the model after every operation that can change something:
//! - `diff(a, b)` is exactly the model diff of the two live states (keys, kinds, values,
//!   timestamps, expiries);
//! - every merge — each conflict policy (fail, ours, theirs, newest timestamp), dry run or
//!   not, fast-forward allowed or not — reports what the model predicts (fast-forward or
//!   not, keys applied, the conflicting keys, conflicts resolved, committed or not), and
//!   leaves the target exactly at the model's result (unchanged on a dry run or a failed
//!   merge); a merge without a recorded base is refused;
//! - every branch reads exactly its live model (scan and point reads).
//!
//! Seeds are printed; `BOUGH_SEED=<seed> cargo nextest run -p bough --test merge_model`
//! replays one; `BOUGH_MODEL_OPS` sets the number of operations per run.

mod common;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use bough::io::MemoryStorage;
use bough::{
    Backend, Branch, ConflictPolicy, DiffChange, ErrorKind, ManualClock, MergeOptions, Options,
    PutOptions, ScanOptions, Store, StoreBuilder, Value, WriteBatch,
};
use common::Rng;

const T0: u64 = 1_700_000_000_000;
/// Few keys, so branches collide and merges conflict.
const KEYS: u64 = 120;
/// Branch names; deleted names come back (a new branch under an old name).
const NAMES: &[&str] = &["main", "a", "b", "c", "feature"];
const POLICIES: [ConflictPolicy; 4] = [
    ConflictPolicy::Fail,
    ConflictPolicy::Ours,
    ConflictPolicy::Theirs,
    ConflictPolicy::NewestTimestamp,
];

/// One key's entry: value, user timestamp, expiry (0 = never), and whether it is the
/// tombstone of a delete (no value; never visible; the store keeps it for
/// `tombstone_retention_ms`, far longer than a run's clock moves).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ent {
    value: Vec<u8>,
    ts: u64,
    exp: u64,
    tomb: bool,
}

impl Ent {
    fn live(&self, now: u64) -> bool {
        self.exp == 0 || self.exp > now
    }

    fn tombstone(ts: u64) -> Ent {
        Ent {
            value: Vec::new(),
            ts,
            exp: 0,
            tomb: true,
        }
    }

    fn to_value(&self) -> Value {
        Value {
            value: self.value.clone(),
            timestamp: self.ts,
            expire_at: (self.exp != 0).then_some(self.exp),
        }
    }
}

type Model = BTreeMap<Vec<u8>, Ent>;

/// The entries a read sees at `now`.
fn visible(m: &Model, now: u64) -> Model {
    m.iter()
        .filter(|(_, e)| !e.tomb && e.live(now))
        .map(|(k, e)| (k.clone(), e.clone()))
        .collect()
}

/// What "newest timestamp wins" compares for `k` on a side: its visible entry, or the
/// tombstone of its delete; `None` when it is absent without one (expired, truncated).
fn stamped<'a>(full: &'a Model, vis: &'a Model, k: &[u8]) -> Option<&'a Ent> {
    vis.get(k).or_else(|| full.get(k).filter(|e| e.tomb))
}

/// Keys whose visible entry differs from `a` to `b`.
fn changed(a: &Model, b: &Model) -> BTreeSet<Vec<u8>> {
    a.keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn show(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

/// What a merge should report.
#[derive(Debug, PartialEq, Eq)]
struct Expect {
    fast_forward: bool,
    applied: usize,
    conflicts: Vec<Vec<u8>>,
    resolved: usize,
    committed: bool,
}

/// What the runs covered (summed over seeds, checked at the end).
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    ops: u64,
    merges_ff: u64,
    merges_three_way: u64,
    merges_refused: u64,
    dry_runs: u64,
    conflicts: [u64; 4],
    conflicts_settled: u64,
    diffs: u64,
    diff_entries: u64,
    expired_seen: u64,
    overflow_writes: u64,
    truncates: u64,
    names_reused: u64,
    resets: u64,
    rehomes: u64,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.ops += o.ops;
        self.merges_ff += o.merges_ff;
        self.merges_three_way += o.merges_three_way;
        self.merges_refused += o.merges_refused;
        self.dry_runs += o.dry_runs;
        for i in 0..4 {
            self.conflicts[i] += o.conflicts[i];
        }
        self.conflicts_settled += o.conflicts_settled;
        self.diffs += o.diffs;
        self.diff_entries += o.diff_entries;
        self.expired_seen += o.expired_seen;
        self.overflow_writes += o.overflow_writes;
        self.truncates += o.truncates;
        self.names_reused += o.names_reused;
        self.resets += o.resets;
        self.rehomes += o.rehomes;
    }
}

struct World {
    backend: Backend,
    dir: tempfile::TempDir,
    mem: MemoryStorage,
    clock: ManualClock,
    store: Store,
    rng: Rng,
    branches: BTreeMap<String, Model>,
    /// (holder, other) → (recorded at, the common state).
    bases: BTreeMap<(String, String), (u64, Model)>,
    /// Names ever deleted (a creation under one of them is a reuse).
    deleted: BTreeSet<String>,
    /// User timestamps: strictly increasing, so every write wins last-writer-wins.
    ts: u64,
    log: Rc<RefCell<Vec<String>>>,
    tally: Tally,
}

impl World {
    fn opts(
        backend: Backend,
        dir: &Path,
        mem: &MemoryStorage,
        clock: &ManualClock,
    ) -> StoreBuilder {
        let o = match backend {
            Backend::Memory => Store::builder(Options::in_memory()).memory(mem.clone()),
            b => Store::builder(Options::new(dir).backend(b)),
        };
        o.clock(Arc::new(clock.clone())).map_settings(|o| {
            o.maintenance_interval_ms(0)
                .data_file_size(64 * 4096)
                .checkpoint_chunks(4)
        })
    }

    fn new(backend: Backend, seed: u64, log: Rc<RefCell<Vec<String>>>) -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let mem = MemoryStorage::new();
        let clock = ManualClock::new(T0);
        let store = Store::open(Self::opts(backend, dir.path(), &mem, &clock)).expect("open");
        let mut branches = BTreeMap::new();
        branches.insert("main".to_string(), Model::new());
        World {
            backend,
            dir,
            mem,
            clock,
            store,
            rng: Rng::new(seed),
            branches,
            bases: BTreeMap::new(),
            deleted: BTreeSet::new(),
            ts: 0,
            log,
            tally: Tally::default(),
        }
    }

    fn now(&self) -> u64 {
        use bough::Clock;
        self.clock.now_ms()
    }

    fn note(&self, s: String) {
        self.log.borrow_mut().push(s);
    }

    fn part(&self) -> bough::PartitionHandle {
        self.store.partition("t", 0).expect("partition")
    }

    fn branch(&self, name: &str) -> Branch {
        self.part().branch(name).expect("branch")
    }

    fn live_names(&self) -> Vec<String> {
        self.branches.keys().cloned().collect()
    }

    fn pick_live(&mut self) -> String {
        let live = self.live_names();
        self.rng.pick(&live).clone()
    }

    /// The base the store picks for `source` into `target`: the newer of the two records,
    /// the source's on a tie.
    fn merge_base(&self, source: &str, target: &str) -> Option<&Model> {
        let t = self.bases.get(&(target.to_string(), source.to_string()));
        let s = self.bases.get(&(source.to_string(), target.to_string()));
        match (t, s) {
            (Some(a), Some(b)) => Some(if b.0 >= a.0 { &b.1 } else { &a.1 }),
            (Some(a), None) => Some(&a.1),
            (None, Some(b)) => Some(&b.1),
            (None, None) => None,
        }
    }

    fn check(&self, name: &str) {
        let now = self.now();
        let want = visible(&self.branches[name], now);
        let got: Model = self
            .branch(name)
            .scan_blocking(&ScanOptions::default())
            .expect("scan")
            .entries
            .into_iter()
            .map(|kv| {
                let e = Ent {
                    value: kv.value.value,
                    ts: kv.value.timestamp,
                    exp: kv.value.expire_at.unwrap_or(0),
                    tomb: false,
                };
                (kv.key, e)
            })
            .collect();
        if got != want {
            let diff: Vec<String> = changed(&want, &got)
                .iter()
                .take(6)
                .map(|k| {
                    let brief = |e: Option<&Ent>| e.map(|e| (e.value.len(), e.ts, e.exp));
                    format!(
                        "{}: model {:?} store {:?}",
                        show(k),
                        brief(want.get(k)),
                        brief(got.get(k))
                    )
                })
                .collect();
            panic!(
                "{name} at {now}: store has {} keys, model {}; (len, ts, expiry) differ: {diff:?}",
                got.len(),
                want.len()
            );
        }
    }

    fn check_all(&self) {
        for n in self.live_names() {
            self.check(&n);
        }
    }

    fn value(&mut self, tag: &str) -> Vec<u8> {
        let len = if self.rng.chance(0.08) {
            self.tally.overflow_writes += 1;
            self.rng.urange(4500, 9000)
        } else {
            self.rng.urange(1, 200)
        };
        let mut v = format!("{tag}:{}:", self.ts).into_bytes();
        let fill = b'a' + (self.ts % 26) as u8;
        v.resize(len.max(v.len()), fill);
        v
    }

    /// An entry to put: a new timestamp, sometimes a short TTL (a few already expired).
    fn entry(&mut self, tag: &str) -> Ent {
        self.ts += 1;
        let now = self.now();
        let exp = if self.rng.chance(0.03) {
            now
        } else if self.rng.chance(0.25) {
            now + self.rng.range(1, 80)
        } else {
            0
        };
        Ent {
            value: self.value(tag),
            ts: self.ts,
            exp,
            tomb: false,
        }
    }

    fn put_opts(e: &Ent) -> PutOptions {
        PutOptions {
            timestamp: Some(e.ts),
            expire_at: (e.exp != 0).then_some(e.exp),
            ttl_ms: None,
        }
    }

    fn step(&mut self) {
        self.tally.ops += 1;
        self.clock.advance(1 + self.rng.below(3));
        if self.rng.chance(0.06) {
            // Far enough to expire most TTLs.
            self.clock.advance(self.rng.range(20, 120));
        }
        match self.rng.below(100) {
            0..=29 => self.write(),
            30..=33 => self.mirror_write(),
            34..=37 => self.truncate(),
            38..=44 => self.create(),
            45..=48 => self.delete(),
            49..=68 => self.merge(),
            69..=78 => self.diff(),
            79..=81 => self.reset(),
            82..=84 => self.rehome(),
            85..=87 => self.expire(),
            88..=89 => self.new_term(),
            90..=92 => self.gc(),
            93..=94 => self.reopen(),
            _ => {
                let n = self.pick_live();
                self.check(&n);
            }
        }
    }

    fn write(&mut self) {
        let name = self.pick_live();
        let most = if self.rng.chance(0.1) { 60 } else { 12 };
        let n = 1 + self.rng.below(most);
        let keys: BTreeSet<u64> = (0..n).map(|_| self.rng.below(KEYS)).collect();
        let mut wb = WriteBatch::new();
        let mut next = self.branches[&name].clone();
        for i in keys {
            if self.rng.chance(0.2) {
                self.ts += 1;
                wb.delete_at(key(i), self.ts);
                next.insert(key(i), Ent::tombstone(self.ts));
            } else {
                let e = self.entry(&name);
                wb.put_with(key(i), e.value.clone(), Self::put_opts(&e));
                next.insert(key(i), e);
            }
        }
        self.note(format!("write {name}: {} ops", wb.len()));
        self.branch(&name).write_blocking(wb).expect("write");
        self.branches.insert(name, next);
    }

    /// The same entries written on two branches: both sides change a key identically,
    /// which a merge must not call a conflict (overflow values live in different pages).
    fn mirror_write(&mut self) {
        let live = self.live_names();
        if live.len() < 2 {
            return;
        }
        let a = self.rng.pick(&live).clone();
        let b = self.rng.pick(&live).clone();
        if a == b {
            return;
        }
        let keys: BTreeSet<u64> = (0..1 + self.rng.below(5))
            .map(|_| self.rng.below(KEYS))
            .collect();
        let mut wb = WriteBatch::new();
        let mut entries = Vec::new();
        for i in keys {
            let e = self.entry("both");
            wb.put_with(key(i), e.value.clone(), Self::put_opts(&e));
            entries.push((key(i), e));
        }
        self.note(format!("mirror write {a} and {b}: {} keys", entries.len()));
        for name in [&a, &b] {
            self.branch(name).write_blocking(wb.clone()).expect("write");
            let m = self.branches.get_mut(name).expect("model");
            for (k, e) in &entries {
                m.insert(k.clone(), e.clone());
            }
        }
    }

    fn truncate(&mut self) {
        let name = self.pick_live();
        let from = if self.rng.chance(0.2) {
            Vec::new()
        } else {
            key(self.rng.below(KEYS))
        };
        self.note(format!("truncate {name} from {}", show(&from)));
        self.tally.truncates += 1;
        self.branch(&name)
            .truncate_blocking(&from)
            .expect("truncate");
        let m = self.branches.get_mut(&name).expect("model");
        m.retain(|k, _| !from.is_empty() && *k < from);
    }

    fn create(&mut self) {
        let free: Vec<&str> = NAMES
            .iter()
            .copied()
            .filter(|n| !self.branches.contains_key(*n))
            .collect();
        if free.is_empty() {
            return;
        }
        let name = self.rng.pick(&free).to_string();
        let parent = self.pick_live();
        self.note(format!("create {name} from {parent}"));
        self.part()
            .create_branch(&name, &parent)
            .expect("create branch");
        if self.deleted.contains(&name) {
            self.tally.names_reused += 1;
        }
        let state = self.branches[&parent].clone();
        self.bases
            .insert((name.clone(), parent), (self.now(), state.clone()));
        self.branches.insert(name, state);
    }

    fn delete(&mut self) {
        let others: Vec<String> = self
            .live_names()
            .into_iter()
            .filter(|n| n != "main")
            .collect();
        if others.is_empty() {
            return;
        }
        let name = self.rng.pick(&others).clone();
        self.note(format!("delete {name}"));
        self.part().delete_branch(&name).expect("delete branch");
        self.branches.remove(&name);
        // Its own bases go with its manifest; every base naming it is dropped.
        self.bases.retain(|(h, o), _| *h != name && *o != name);
        self.deleted.insert(name);
    }

    fn merge(&mut self) {
        let live = self.live_names();
        if live.len() < 2 {
            return;
        }
        let with_base: Vec<(String, String)> = live
            .iter()
            .flat_map(|s| live.iter().map(move |t| (s.clone(), t.clone())))
            .filter(|(s, t)| s != t && self.merge_base(s, t).is_some())
            .collect();
        let (source, target) = if !with_base.is_empty() && self.rng.chance(0.9) {
            self.rng.pick(&with_base).clone()
        } else {
            let s = self.rng.pick(&live).clone();
            let t = self.rng.pick(&live).clone();
            if s == t {
                return;
            }
            (s, t)
        };
        let opts = MergeOptions {
            policy: *self.rng.pick(&POLICIES),
            dry_run: self.rng.chance(0.2),
            fast_forward: self.rng.chance(0.85),
            count_fast_forward: self.rng.chance(0.5),
        };
        let now = self.now();
        self.note(format!("merge {source} -> {target} {opts:?} at {now}"));
        let got = self.part().merge(&source, &target, opts);
        let Some(base) = self.merge_base(&source, &target).cloned() else {
            let e = got.expect_err("a merge without a recorded base must be refused");
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            self.tally.merges_refused += 1;
            self.check(&target);
            return;
        };
        let report = got.expect("merge");
        let (b, t, s) = (
            visible(&base, now),
            visible(&self.branches[&target], now),
            visible(&self.branches[&source], now),
        );
        for m in [&base, &self.branches[&target], &self.branches[&source]] {
            self.tally.expired_seen += (m.len() - visible(m, now).len()) as u64;
        }
        let (t_changes, s_changes) = (changed(&b, &t), changed(&b, &s));
        let mut want = Expect {
            fast_forward: t_changes.is_empty() && opts.fast_forward,
            applied: 0,
            conflicts: Vec::new(),
            resolved: 0,
            committed: false,
        };
        let mut result = self.branches[&target].clone();
        let (t_full, s_full) = (&self.branches[&target], &self.branches[&source]);
        if want.fast_forward {
            // Counted only when asked: counting costs the divergence.
            if opts.count_fast_forward {
                want.applied = s_changes.len();
            }
            result = self.branches[&source].clone();
        } else {
            for k in &s_changes {
                let theirs = s.get(k);
                let take = if t_changes.contains(k) {
                    let mine = t.get(k);
                    if mine == theirs {
                        false
                    } else {
                        let decision = match opts.policy {
                            ConflictPolicy::Fail => None,
                            ConflictPolicy::Ours => Some(false),
                            ConflictPolicy::Theirs => Some(true),
                            // The write path's rule: the source arrives at the target and
                            // wins on a timestamp at least the target's; deletes count.
                            ConflictPolicy::NewestTimestamp => {
                                Some(match (stamped(t_full, &t, k), stamped(s_full, &s, k)) {
                                    (Some(m), Some(th)) => th.ts >= m.ts,
                                    (None, Some(_)) => true,
                                    _ => false,
                                })
                            }
                        };
                        match decision {
                            Some(d) => {
                                want.resolved += 1;
                                d
                            }
                            None => {
                                want.conflicts.push(k.clone());
                                false
                            }
                        }
                    }
                } else {
                    true
                };
                if take {
                    want.applied += 1;
                    // A delete is taken as its tombstone.
                    match theirs.or_else(|| s_full.get(k).filter(|e| e.tomb)) {
                        Some(e) => result.insert(k.clone(), e.clone()),
                        None => result.remove(k),
                    };
                }
            }
        }
        want.committed = !opts.dry_run && want.conflicts.is_empty();
        let seen = Expect {
            fast_forward: report.fast_forward,
            applied: report.applied,
            conflicts: report.conflicts.iter().map(|c| c.key.clone()).collect(),
            resolved: report.resolved,
            committed: report.committed,
        };
        assert_eq!(seen, want, "merge {source} -> {target} {opts:?}");
        // The conflicts name each side's visible entry, or its delete's tombstone (none
        // when absent otherwise: expired, truncated).
        for c in &report.conflicts {
            let want = |e: Option<&Ent>| e.map(|e| (e.ts, e.tomb));
            let got = |e: &Option<bough_tree::page::leaf::Entry>| {
                e.as_ref().map(|e| (e.timestamp, e.is_tombstone()))
            };
            let (t_full, s_full) = (&self.branches[&target], &self.branches[&source]);
            assert_eq!(got(&c.ours), want(stamped(t_full, &t, &c.key)), "ours");
            assert_eq!(got(&c.theirs), want(stamped(s_full, &s, &c.key)), "theirs");
        }
        let pi = POLICIES.iter().position(|p| *p == opts.policy).unwrap_or(0);
        self.tally.conflicts[pi] += (want.conflicts.len() + want.resolved) as u64;
        self.tally.conflicts_settled += want.resolved as u64;
        if opts.dry_run {
            self.tally.dry_runs += 1;
        }
        if want.fast_forward {
            self.tally.merges_ff += 1;
        } else {
            self.tally.merges_three_way += 1;
        }
        if want.committed {
            let src = self.branches[&source].clone();
            self.bases.insert((target.clone(), source), (now, src));
            self.branches.insert(target.clone(), result);
        }
        self.check(&target);
    }

    fn diff(&mut self) {
        let a = self.pick_live();
        let b = self.pick_live();
        let now = self.now();
        self.note(format!("diff {a}..{b} at {now}"));
        let got = self.part().diff(&a, &b).expect("diff");
        let (ma, mb) = (
            visible(&self.branches[&a], now),
            visible(&self.branches[&b], now),
        );
        let b_full = &self.branches[&b];
        let want: Vec<(Vec<u8>, DiffChange, Option<u64>)> = changed(&ma, &mb)
            .into_iter()
            .map(|k| {
                // A removal by a delete carries the delete's timestamp.
                let deleted_at = match (ma.get(&k), mb.get(&k)) {
                    (Some(_), None) => b_full.get(&k).filter(|e| e.tomb).map(|e| e.ts),
                    _ => None,
                };
                let c = match (ma.get(&k), mb.get(&k)) {
                    (None, Some(n)) => DiffChange::Added(n.to_value()),
                    (Some(o), None) => DiffChange::Removed(o.to_value()),
                    (Some(o), Some(n)) => DiffChange::Changed {
                        old: o.to_value(),
                        new: n.to_value(),
                    },
                    (None, None) => unreachable!("a changed key is on one side"),
                };
                (k, c, deleted_at)
            })
            .collect();
        let got: Vec<(Vec<u8>, DiffChange, Option<u64>)> = got
            .into_iter()
            .map(|e| (e.key, e.change, e.deleted_at))
            .collect();
        if got != want {
            let gk: BTreeSet<&Vec<u8>> = got.iter().map(|(k, _, _)| k).collect();
            let wk: BTreeSet<&Vec<u8>> = want.iter().map(|(k, _, _)| k).collect();
            let differ: Vec<String> = got
                .iter()
                .zip(&want)
                .filter(|(g, w)| g != w)
                .take(3)
                .map(|(g, w)| format!("{}: store {:?} model {:?}", show(&g.0), g.2, w.2))
                .collect();
            eprintln!("diff {a}..{b}: first entries that differ: {differ:?}");
            panic!(
                "diff {a}..{b} at {now}: {} entries, model {}; only in the store {:?}, only in \
                 the model {:?}",
                got.len(),
                want.len(),
                gk.difference(&wk).map(|k| show(k)).collect::<Vec<_>>(),
                wk.difference(&gk).map(|k| show(k)).collect::<Vec<_>>()
            );
        }
        self.tally.diffs += 1;
        self.tally.diff_entries += got.len() as u64;
    }

    fn reset(&mut self) {
        let target = self.pick_live();
        let to = self.pick_live();
        if target == to {
            return;
        }
        self.note(format!("reset {target} to {to}"));
        self.part().reset_branch(&target, &to).expect("reset");
        let state = self.branches[&to].clone();
        self.bases
            .insert((target.clone(), to), (self.now(), state.clone()));
        self.branches.insert(target.clone(), state);
        self.tally.resets += 1;
        self.check(&target);
    }

    fn rehome(&mut self) {
        let name = self.pick_live();
        self.note(format!("rehome {name}"));
        self.branch(&name).rehome().expect("rehome");
        self.bases.retain(|(h, _), _| *h != name);
        self.tally.rehomes += 1;
        self.check(&name);
    }

    fn expire(&mut self) {
        let name = self.pick_live();
        self.note(format!("expire {name} at {}", self.now()));
        self.branch(&name).expire_now().expect("expire");
        // Physically gone now; invisible before too, so the model may drop them.
        let now = self.now();
        self.branches
            .get_mut(&name)
            .expect("model")
            .retain(|_, e| e.live(now));
        self.check(&name);
    }

    fn new_term(&mut self) {
        let name = self.pick_live();
        self.note(format!("new term of {name}"));
        self.part().open_new_term(&name).expect("new term");
    }

    fn gc(&mut self) {
        self.note("gc".into());
        self.part().gc().expect("gc");
        self.check_all();
    }

    fn reopen(&mut self) {
        self.note("reopen".into());
        self.store.close().expect("close");
        self.store = Store::open(Self::opts(
            self.backend,
            self.dir.path(),
            &self.mem,
            &self.clock,
        ))
        .expect("reopen");
        let mut listed = self.part().branches().expect("branches");
        listed.sort();
        assert_eq!(listed, self.live_names());
    }
}

fn run(test: &str, backend: Backend, seed: u64, ops: usize) -> Tally {
    eprintln!(
        "[{test}] backend {backend:?} seed {seed} ({ops} ops); replay with BOUGH_SEED={seed}"
    );
    let log = Rc::new(RefCell::new(Vec::new()));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut w = World::new(backend, seed, log.clone());
        for i in 0..ops {
            w.log.borrow_mut().push(format!("-- op {i}"));
            w.step();
        }
        w.gc();
        w.reopen();
        w.check_all();
        w.tally
    }));
    match result {
        Ok(t) => t,
        Err(e) => {
            let log = log.borrow();
            let tail = &log[log.len().saturating_sub(40)..];
            eprintln!(
                "[{test}] FAILED: backend {backend:?} seed {seed} (replay with \
                 BOUGH_SEED={seed}); last operations:\n  {}",
                tail.join("\n  ")
            );
            std::panic::resume_unwind(e);
        }
    }
}

fn ops(default: usize) -> usize {
    std::env::var("BOUGH_MODEL_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Runs `seeds` on `backend` and checks the runs covered what they are meant to.
fn run_all(test: &str, backend: Backend, seeds: &[u64], n: usize) {
    let mut total = Tally::default();
    for &seed in seeds {
        total.add(&run(test, backend, seed, n));
    }
    eprintln!("[{test}] covered: {total:?}");
    if common::replaying() || n < 200 {
        return;
    }
    assert!(
        total.merges_ff > 0 && total.merges_three_way > 0,
        "{total:?}"
    );
    assert!(total.merges_refused > 0 && total.dry_runs > 0, "{total:?}");
    assert!(total.conflicts.iter().all(|&c| c > 0), "{total:?}");
    assert!(
        total.expired_seen > 0 && total.overflow_writes > 0,
        "{total:?}"
    );
    assert!(
        total.names_reused > 0 && total.diff_entries > 0,
        "{total:?}"
    );
}

#[test]
fn merge_model_memory() {
    let test = "merge_model_memory";
    run_all(test, Backend::Memory, &common::seeds(test, 4), ops(1000));
}

#[test]
fn merge_model_pread() {
    let test = "merge_model_pread";
    run_all(test, Backend::Pread, &common::seeds(test, 1), ops(600));
}

/// Fixed seeds, so every run covers at least these histories.
#[test]
fn merge_model_fixed_seeds() {
    if common::replaying() {
        return;
    }
    run_all(
        "merge_model_fixed_seeds",
        Backend::Memory,
        &[1, 2, 0xB0B, 0x5EED_CAFE],
        600,
    );
}

#[test]
fn slow_merge_model() {
    let test = "slow_merge_model";
    run_all(test, Backend::Memory, &common::seeds(test, 10), ops(3000));
}
