//! Model-based test of branches: random create (from any live branch), write, read, scan,
//! floor, delete, archive, prune, restore, branch-from-archive, new term, compaction,
//! truncation, GC, reopen, tag create/read/delete, branch-from-tag and protect/unprotect,
//! cherry-picks and reverts of ranges between archives and branch states (issue 18), and
//! point-in-time branches and restores at instants of each branch's recorded history,
//! checked against one `BTreeMap` per branch and per tag (a protected branch's delete and
//! restore must be refused and change nothing). Every value written is unique, so two equal
//! values are the same write and a value model predicts conflicts.
//!
//! Every run prints its seed; `BOUGH_SEED=<seed> cargo nextest run -p bough --test
//! branch_model` replays one seed (on both backends). `BOUGH_MODEL_OPS` sets the number of
//! operations per run.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use bough::io::MemoryStorage;
use bough::object::{CloudConfig, MemoryObjectStore, ObjectStore, OpendalStore, RetryPolicy};
use bough::{
    ArchiveName, Backend, Branch, Clock, ConflictPolicy, ErrorKind, ManualClock, Options,
    PickOptions, ScanOptions, StateRef, Store, StoreBuilder, WriteBatch,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const T0: u64 = 1_700_000_000_000;
/// Names drawn from a small pool so they are reused after deletion (ABA).
const NAMES: &[&str] = &[
    "a", "b", "c", "d", "e", "f", "feature", "hotfix", "x-1", "y_z",
];
const KEYS: usize = 400;
/// Tag names: a pool of their own (a tag may not take a branch's name; that refusal is
/// checked in `refused`).
const TAG_NAMES: &[&str] = &["v1", "v2", "rel", "t-x"];

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

fn key(i: usize) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

struct World {
    backend: Backend,
    dir: tempfile::TempDir,
    mem: MemoryStorage,
    /// The object store of `Backend::Object`.
    obj: Option<Arc<dyn ObjectStore>>,
    clock: ManualClock,
    store: Store,
    rng: Rng,
    /// Live branches and their contents.
    models: BTreeMap<String, Model>,
    /// Archives of live branches, oldest first, with the state each recorded.
    archives: BTreeMap<String, Vec<(ArchiveName, Model)>>,
    /// Tags and the state each keeps.
    tags: BTreeMap<String, Model>,
    /// Live branches that are protected.
    protected: std::collections::BTreeSet<String>,
    log: Rc<RefCell<Vec<String>>>,
    seq: u64,
    /// Cherry-picks and reverts: (run, that applied keys, that met conflicts).
    picks: (u64, u64, u64),
    /// Each live branch's states since its history began (its creation; `main`'s first
    /// change), with the store-clock instant each became the branch's state.
    history: BTreeMap<String, Vec<(u64, Model)>>,
    /// Point-in-time branches and restores run.
    points_in_time: u64,
}

/// How far back point-in-time reads may go: short against a run, so GC prunes points.
const HISTORY_WINDOW_MS: u64 = 300;

impl World {
    fn opts(
        backend: Backend,
        dir: &Path,
        mem: &MemoryStorage,
        obj: &Option<Arc<dyn ObjectStore>>,
        clock: &ManualClock,
    ) -> StoreBuilder {
        let o = match (backend, obj) {
            (Backend::Memory, _) => Store::builder(Options::in_memory()).memory(mem.clone()),
            (Backend::Object, Some(obj)) => {
                let mut o = Store::builder(Options::new(dir)).object_store(obj.clone());
                o.settings_mut().object = CloudConfig {
                    cache_bytes: 4 << 20,
                    min_delete_age_ms: 0,
                    retry: RetryPolicy {
                        attempts: 6,
                        base_delay_ms: 1,
                        max_delay_ms: 5,
                    },
                    ..CloudConfig::default()
                };
                o
            }
            (b, _) => Store::builder(Options::new(dir).backend(b)),
        };
        o.clock(Arc::new(clock.clone())).map_settings(|o| {
            o.maintenance_interval_ms(0)
                .data_file_size(64 * 4096)
                .write_buffer_bytes(WRITE_BUFFER.with(|b| b.get()))
                .history_window_ms(HISTORY_WINDOW_MS)
        })
    }

    fn new(
        backend: Backend,
        obj: Option<Arc<dyn ObjectStore>>,
        seed: u64,
        log: Rc<RefCell<Vec<String>>>,
    ) -> World {
        let dir = tempfile::tempdir().unwrap();
        let mem = MemoryStorage::new();
        let clock = ManualClock::new(T0);
        let store = Store::open(Self::opts(backend, dir.path(), &mem, &obj, &clock)).unwrap();
        let mut models = BTreeMap::new();
        models.insert("main".to_string(), Model::new());
        let mut archives = BTreeMap::new();
        archives.insert("main".to_string(), Vec::new());
        World {
            backend,
            dir,
            mem,
            obj,
            clock,
            store,
            rng: Rng(seed),
            models,
            archives,
            tags: BTreeMap::new(),
            protected: Default::default(),
            log,
            seq: 0,
            picks: (0, 0, 0),
            history: BTreeMap::new(),
            points_in_time: 0,
        }
    }

    fn note(&self, s: String) {
        self.log.borrow_mut().push(s);
    }

    fn branch(&self, name: &str) -> Branch {
        self.store.partition("t", 0).unwrap().branch(name).unwrap()
    }

    fn live(&self) -> Vec<String> {
        self.models.keys().cloned().collect()
    }

    fn free_names(&self) -> Vec<&'static str> {
        NAMES
            .iter()
            .copied()
            .filter(|n| !self.models.contains_key(*n))
            .collect()
    }

    fn pick_live(&mut self) -> String {
        let live = self.live();
        self.rng.pick(&live).clone()
    }

    fn check(&self, name: &str) {
        let b = self.branch(name);
        let model = &self.models[name];
        let got: Model = b
            .scan_blocking(&ScanOptions::default())
            .unwrap()
            .entries
            .into_iter()
            .map(|kv| (kv.key, kv.value.value))
            .collect();
        if got != *model {
            let diff: Vec<String> = model
                .keys()
                .chain(got.keys())
                .filter(|k| model.get(*k) != got.get(*k))
                .take(5)
                .map(|k| {
                    format!(
                        "{} model={:?} store={:?}",
                        String::from_utf8_lossy(k),
                        model.get(k).map(Vec::len),
                        got.get(k).map(Vec::len)
                    )
                })
                .collect();
            panic!(
                "{name}: store has {} keys, model {}; differences: {diff:?}",
                got.len(),
                model.len()
            );
        }
    }

    fn check_all(&self) {
        for name in self.live() {
            self.check(&name);
        }
        for name in self.tags.keys() {
            self.check_tag(name);
        }
    }

    fn check_tag(&self, name: &str) {
        let p = self.store.partition("t", 0).unwrap();
        let got: Model = p
            .tag(name)
            .unwrap()
            .scan(&ScanOptions::default())
            .unwrap()
            .entries
            .into_iter()
            .map(|kv| (kv.key, kv.value.value))
            .collect();
        assert!(got == self.tags[name], "tag {name} differs from its state");
    }

    fn value(&mut self, i: usize) -> Vec<u8> {
        self.seq += 1;
        let len = if self.rng.chance(3) {
            3000 + self.rng.below(6000)
        } else {
            10 + self.rng.below(400)
        };
        let mut v = format!("{i}:{}:", self.seq).into_bytes();
        v.resize(len, b'a' + (self.seq % 26) as u8);
        v
    }

    fn step(&mut self) {
        self.clock.advance(self.rng.below(3) as u64);
        let roll = self.rng.below(116);
        match roll {
            0..=34 => self.write(),
            35..=44 => self.read(),
            45..=52 => self.create(),
            53..=58 => self.delete(),
            59..=64 => self.archive(),
            65..=67 => self.prune(),
            68..=71 => self.restore(),
            72..=74 => self.branch_from_archive(),
            75..=77 => self.new_term(),
            78..=80 => self.compact(),
            81..=82 => self.truncate(),
            83..=84 => self.gc(),
            85..=88 => self.pick(),
            89..=91 => self.reopen(),
            92..=97 => self.refused(),
            98..=101 => self.tag_create(),
            102..=103 => self.tag_delete(),
            104..=106 => self.tag_read(),
            107..=111 => self.protect(),
            _ => self.point_in_time(),
        }
        self.record_history();
    }

    /// After each step: every live branch's state as of now (a later change in the same
    /// millisecond replaces an earlier one: an instant reads every commit made at it).
    fn record_history(&mut self) {
        let now = self.clock.now_ms();
        self.history
            .retain(|name, _| self.models.contains_key(name));
        for (name, model) in &self.models {
            match self.history.get_mut(name) {
                Some(h) => match h.last_mut() {
                    Some((t, m)) if *m == *model => {
                        let _ = t;
                    }
                    Some((t, m)) if *t == now => *m = model.clone(),
                    _ => h.push((now, model.clone())),
                },
                // `main` starts empty with no history point: its history begins with its
                // first change. Every other branch's begins when it is created.
                None if name == "main" && model.is_empty() => {}
                None => {
                    self.history
                        .insert(name.clone(), vec![(now, model.clone())]);
                }
            }
        }
    }

    /// A point-in-time branch (or, one time in three, a restore) of a live branch at an
    /// instant of its recorded history inside the window, checked against the model's
    /// state at that instant.
    fn point_in_time(&mut self) {
        let now = self.clock.now_ms();
        let oldest = now.saturating_sub(HISTORY_WINDOW_MS);
        let with: Vec<String> = self
            .history
            .iter()
            .filter(|(n, h)| self.models.contains_key(*n) && !h.is_empty())
            .map(|(n, _)| n.clone())
            .collect();
        let free = self.free_names();
        if with.is_empty() || free.is_empty() {
            return;
        }
        let name = self.rng.pick(&with).clone();
        let h = &self.history[&name];
        let (first, _) = h[0];
        let lo = first.max(oldest);
        let at = lo + self.rng.below((now - lo + 1) as usize) as u64;
        let want = h
            .iter()
            .rev()
            .find(|(t, _)| *t <= at)
            .map(|(_, m)| m.clone())
            .expect("an instant after the history's first");
        let new = *self.rng.pick(&free);
        self.points_in_time += 1;
        let p = self.store.partition("t", 0).unwrap();
        if self.rng.chance(33) {
            self.note(format!(
                "restore_at {name} at {at} (now {now}), backup {new}"
            ));
            if self.protected.contains(&name) {
                let e = self.branch(&name).restore_at(at, new).unwrap_err();
                assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
                return;
            }
            self.branch(&name).restore_at(at, new).unwrap();
            let old = self.models.insert(name.clone(), want).unwrap();
            self.models.insert(new.to_string(), old);
            self.archives.insert(new.to_string(), Vec::new());
            self.check(&name);
            self.check(new);
        } else {
            self.note(format!("branch_at {new} from {name} at {at} (now {now})"));
            p.branch_at(new, &name, at).unwrap();
            self.models.insert(new.to_string(), want);
            self.archives.insert(new.to_string(), Vec::new());
            self.check(new);
        }
    }

    fn write(&mut self) {
        let name = self.pick_live();
        let max = if self.rng.chance(10) { 400 } else { 40 };
        let n = 1 + self.rng.below(max);
        let mut keys: Vec<usize> = (0..n).map(|_| self.rng.below(KEYS)).collect();
        keys.sort_unstable();
        keys.dedup();
        let mut wb = WriteBatch::new();
        let mut next = self.models[&name].clone();
        for i in keys {
            if self.rng.chance(20) {
                wb.delete(key(i));
                next.remove(&key(i));
            } else {
                let v = self.value(i);
                wb.put(key(i), v.clone());
                next.insert(key(i), v);
            }
        }
        self.note(format!("write {name}: {} ops", wb.len()));
        self.branch(&name).write_blocking(wb).unwrap();
        self.models.insert(name, next);
    }

    fn read(&mut self) {
        let name = self.pick_live();
        self.note(format!("read {name}"));
        let b = self.branch(&name);
        let model = &self.models[&name];
        for _ in 0..5 {
            let k = key(self.rng.below(KEYS + 10));
            assert_eq!(
                b.get_blocking(&k).unwrap().map(|v| v.value),
                model.get(&k).cloned(),
                "{name}: get {}",
                String::from_utf8_lossy(&k)
            );
            let want = model.range(..=k.clone()).next_back();
            let got = b.floor_blocking(&k).unwrap();
            assert_eq!(
                got.map(|kv| (kv.key, kv.value.value)),
                want.map(|(k, v)| (k.clone(), v.clone())),
                "{name}: floor {}",
                String::from_utf8_lossy(&k)
            );
        }
        // A bounded, paged scan.
        let from = key(self.rng.below(KEYS));
        let to = key(self.rng.below(KEYS + 10));
        let limit = 1 + self.rng.below(30);
        let mut begin = Bound::Included(from.clone());
        let mut got = Vec::new();
        loop {
            let page = b
                .scan_blocking(&ScanOptions {
                    begin: begin.clone(),
                    end: Bound::Excluded(to.clone()),
                    limit,
                    ..Default::default()
                })
                .unwrap();
            assert!(page.entries.len() <= limit);
            got.extend(page.entries.into_iter().map(|kv| (kv.key, kv.value.value)));
            match page.next {
                Some(n) => begin = Bound::Included(n),
                None => break,
            }
        }
        let want: Vec<(Vec<u8>, Vec<u8>)> = if from < to {
            model
                .range(from..to)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        } else {
            Vec::new()
        };
        assert_eq!(got, want, "{name}: paged scan");
    }

    fn create(&mut self) {
        let free = self.free_names();
        if free.is_empty() {
            return;
        }
        let name = *self.rng.pick(&free);
        let parent = self.pick_live();
        self.note(format!("create {name} from {parent}"));
        let p = self.store.partition("t", 0).unwrap();
        let b = p.create_branch(name, &parent).unwrap();
        let model = self.models[&parent].clone();
        self.models.insert(name.to_string(), model);
        self.archives.insert(name.to_string(), Vec::new());
        if self.rng.chance(30) {
            self.check(b.label().split('@').nth(1).unwrap());
        }
    }

    fn delete(&mut self) {
        let live: Vec<String> = self.live().into_iter().filter(|n| n != "main").collect();
        if live.is_empty() {
            return;
        }
        let name = self.rng.pick(&live).clone();
        self.note(format!("delete {name}"));
        let p = self.store.partition("t", 0).unwrap();
        if self.protected.contains(&name) {
            let e = p.delete_branch(&name).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            self.check(&name);
            return;
        }
        p.delete_branch(&name).unwrap();
        self.models.remove(&name);
        self.archives.remove(&name);
        assert_eq!(p.branch(&name).unwrap_err().kind(), ErrorKind::NotFound);
    }

    fn archive(&mut self) {
        let name = self.pick_live();
        let b = self.branch(&name);
        let a = if self.rng.chance(30) {
            // An explicit timestamp, possibly taken already.
            let ts = T0 + self.rng.below(50) as u64;
            match b.archive_at(ts) {
                Ok(a) => a,
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::AlreadyExists, "{e}");
                    let taken = self.archives[&name].iter().any(|(a, _)| a.timestamp == ts);
                    let term = self
                        .store
                        .partition("t", 0)
                        .unwrap()
                        .describe(&name)
                        .unwrap()
                        .term;
                    assert!(
                        taken
                            && self.archives[&name]
                                .iter()
                                .any(|(a, _)| a.timestamp == ts && a.term == term),
                        "{name}: archive at {ts} refused but none exists"
                    );
                    self.note(format!("archive {name} at {ts}: exists"));
                    return;
                }
            }
        } else {
            b.archive().unwrap()
        };
        self.note(format!("archive {name}: {a}"));
        let model = self.models[&name].clone();
        let list = self.archives.get_mut(&name).unwrap();
        list.push((a, model));
        list.sort_by_key(|(a, _)| (a.timestamp, a.term));
        let listed = b.archives().unwrap();
        let ours: Vec<ArchiveName> = list.iter().map(|(a, _)| a.clone()).collect();
        assert_eq!(listed, ours, "{name}: archive list");
    }

    fn prune(&mut self) {
        let name = self.pick_live();
        let n = self.archives[&name].len();
        let keep = self.rng.below(n + 2);
        self.note(format!("prune {name} keep {keep}"));
        let pruned = self.branch(&name).prune_archives(keep).unwrap();
        let list = self.archives.get_mut(&name).unwrap();
        let excess = list.len().saturating_sub(keep);
        let gone: Vec<ArchiveName> = list.drain(..excess).map(|(a, _)| a).collect();
        assert_eq!(pruned, gone, "{name}: pruned");
    }

    fn restore(&mut self) {
        let with: Vec<String> = self
            .archives
            .iter()
            .filter(|(_, l)| !l.is_empty())
            .map(|(n, _)| n.clone())
            .collect();
        let free = self.free_names();
        if with.is_empty() || free.is_empty() {
            return;
        }
        let name = self.rng.pick(&with).clone();
        let backup = *self.rng.pick(&free);
        let (a, state) = self.rng.pick(&self.archives[&name]).clone();
        self.note(format!("restore {name} to {a}, backup {backup}"));
        if self.protected.contains(&name) {
            let e = self.branch(&name).restore(&a, backup).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            assert!(
                !self
                    .store
                    .partition("t", 0)
                    .unwrap()
                    .branches()
                    .unwrap()
                    .contains(&backup.to_string())
            );
            return;
        }
        self.branch(&name).restore(&a, backup).unwrap();
        let old = self.models.insert(name.clone(), state).unwrap();
        self.models.insert(backup.to_string(), old);
        self.archives.insert(backup.to_string(), Vec::new());
    }

    fn branch_from_archive(&mut self) {
        let with: Vec<String> = self
            .archives
            .iter()
            .filter(|(_, l)| !l.is_empty())
            .map(|(n, _)| n.clone())
            .collect();
        let free = self.free_names();
        if with.is_empty() || free.is_empty() {
            return;
        }
        let name = self.rng.pick(&with).clone();
        let new = *self.rng.pick(&free);
        let (a, state) = self.rng.pick(&self.archives[&name]).clone();
        self.note(format!("branch {new} from archive {a}"));
        self.branch(&name).branch_from_archive(&a, new).unwrap();
        self.models.insert(new.to_string(), state);
        self.archives.insert(new.to_string(), Vec::new());
    }

    /// One end of a range: an archive (with the state it recorded) or a live branch.
    fn range_end(&mut self) -> (StateRef, Model) {
        let archived: Vec<(ArchiveName, Model)> =
            self.archives.values().flatten().cloned().collect();
        if !archived.is_empty() && self.rng.chance(60) {
            let (a, m) = self.rng.pick(&archived).clone();
            return (StateRef::Archive(a), m);
        }
        let name = self.pick_live();
        let m = self.models[&name].clone();
        (StateRef::branch(name), m)
    }

    /// Cherry-pick or revert a range onto a live branch: a key the range changes applies
    /// where the target holds the range's start, stays where it holds the end, and is a
    /// conflict otherwise (settled by the policy).
    fn pick(&mut self) {
        let (from, mf) = self.range_end();
        let (to, mt) = self.range_end();
        let target = self.pick_live();
        let revert = self.rng.chance(40);
        let policy = *self.rng.pick(&[
            ConflictPolicy::Fail,
            ConflictPolicy::Ours,
            ConflictPolicy::Theirs,
        ]);
        let opts = PickOptions {
            policy,
            dry_run: self.rng.chance(15),
        };
        let what = if revert { "revert" } else { "cherry-pick" };
        self.note(format!("{what} {from}..{to} onto {target} {opts:?}"));
        let p = self.store.partition("t", 0).unwrap();
        let r = if revert {
            p.revert(&from, &to, &target, opts)
        } else {
            p.cherry_pick(&from, &to, &target, opts)
        }
        .unwrap();
        let (old, new) = if revert { (&mt, &mf) } else { (&mf, &mt) };
        let t = &self.models[&target];
        let mut result = t.clone();
        let (mut applied, mut resolved, mut conflicts) = (0, 0, Vec::new());
        let keys: std::collections::BTreeSet<&Vec<u8>> = old.keys().chain(new.keys()).collect();
        for k in keys {
            let (was, becomes, held) = (old.get(k), new.get(k), t.get(k));
            if was == becomes || held == becomes {
                continue;
            }
            let take = if held == was {
                true
            } else {
                match policy {
                    ConflictPolicy::Fail => {
                        conflicts.push(k.clone());
                        false
                    }
                    ConflictPolicy::Ours => {
                        resolved += 1;
                        false
                    }
                    _ => {
                        resolved += 1;
                        true
                    }
                }
            };
            if take {
                applied += 1;
                match becomes {
                    Some(v) => result.insert(k.clone(), v.clone()),
                    None => result.remove(k),
                };
            }
        }
        let got: Vec<Vec<u8>> = r.conflicts.iter().map(|c| c.key.clone()).collect();
        assert_eq!(
            (r.applied, r.resolved, got),
            (applied, resolved, conflicts.clone()),
            "{what} {from}..{to} onto {target}"
        );
        self.picks.0 += 1;
        self.picks.1 += u64::from(applied > 0);
        self.picks.2 += u64::from(!conflicts.is_empty() || resolved > 0);
        let commits = !opts.dry_run && conflicts.is_empty() && applied > 0;
        assert_eq!(r.committed, commits, "{what}: committed");
        if commits {
            self.models.insert(target.clone(), result);
        }
        self.check(&target);
    }

    fn new_term(&mut self) {
        let name = self.pick_live();
        let p = self.store.partition("t", 0).unwrap();
        let before = p.describe(&name).unwrap().term;
        self.note(format!("new term of {name} (was {before})"));
        p.open_new_term(&name).unwrap();
        let after = p.describe(&name).unwrap().term;
        if self.backend == Backend::Object {
            // Opening a branch not yet open in this store takes it over first.
            assert!(after > before, "{after} after {before}");
        } else {
            assert_eq!(after, before + 1);
        }
    }

    fn compact(&mut self) {
        let name = self.pick_live();
        self.note(format!("compact {name}"));
        self.branch(&name).compact_now().unwrap();
    }

    fn truncate(&mut self) {
        let name = self.pick_live();
        let from = if self.rng.chance(20) {
            Vec::new()
        } else {
            key(self.rng.below(KEYS))
        };
        self.note(format!(
            "truncate {name} from {}",
            String::from_utf8_lossy(&from)
        ));
        self.branch(&name).truncate_blocking(&from).unwrap();
        let m = self.models.get_mut(&name).unwrap();
        m.retain(|k, _| !from.is_empty() && *k < from);
    }

    fn gc(&mut self) {
        let dry = self.rng.chance(20);
        self.note(format!("gc (dry run: {dry})"));
        let part = self.store.partition("t", 0).unwrap();
        let r = if dry { part.gc_dry_run() } else { part.gc() }.unwrap();
        self.note(format!(
            "  gc deleted {} kept {}",
            r.deleted.len(),
            r.kept.len()
        ));
        // After every GC every live branch still matches its model.
        self.check_all();
    }

    fn reopen(&mut self) {
        // On the memory backend, half the reopens are a power loss: only what was synced
        // survives, and every acknowledged operation must be part of it.
        let power_loss = self.backend == Backend::Memory && self.rng.chance(50);
        self.note(format!("reopen (power loss: {power_loss})"));
        if power_loss {
            let durable = self.mem.clone_durable();
            self.store.close().unwrap();
            self.mem = durable;
        } else {
            self.store.close().unwrap();
        }
        self.store = Store::open(Self::opts(
            self.backend,
            self.dir.path(),
            &self.mem,
            &self.obj,
            &self.clock,
        ))
        .unwrap();
        let p = self.store.partition("t", 0).unwrap();
        assert_eq!(p.branches().unwrap(), self.live());
        let tags: Vec<String> = p
            .tags()
            .unwrap()
            .iter()
            .map(|t| t.name.to_string())
            .collect();
        assert_eq!(tags, self.tags.keys().cloned().collect::<Vec<_>>());
        for name in self.live() {
            let protected = p.describe(&name).unwrap().policy.protected;
            assert_eq!(
                protected,
                self.protected.contains(&name),
                "{name}: protection"
            );
        }
        if self.rng.chance(50) {
            self.check_all();
        }
    }

    fn tag_create(&mut self) {
        let free: Vec<&str> = TAG_NAMES
            .iter()
            .copied()
            .filter(|n| !self.tags.contains_key(*n))
            .collect();
        if free.is_empty() {
            return;
        }
        let name = *self.rng.pick(&free);
        let from = self.pick_live();
        self.note(format!("tag {name} from {from}"));
        let p = self.store.partition("t", 0).unwrap();
        let info = p.create_tag(name, &from).unwrap();
        assert_eq!(info.branch.as_str(), from);
        self.tags
            .insert(name.to_string(), self.models[&from].clone());
        if self.rng.chance(30) {
            self.check_tag(name);
        }
    }

    fn tag_delete(&mut self) {
        let tags: Vec<String> = self.tags.keys().cloned().collect();
        if tags.is_empty() {
            return;
        }
        let name = self.rng.pick(&tags).clone();
        self.note(format!("delete tag {name}"));
        let p = self.store.partition("t", 0).unwrap();
        p.delete_tag(&name).unwrap();
        self.tags.remove(&name);
        assert_eq!(p.tag(&name).unwrap_err().kind(), ErrorKind::NotFound);
    }

    /// Reads a tag, or starts a branch from one.
    fn tag_read(&mut self) {
        let tags: Vec<String> = self.tags.keys().cloned().collect();
        if tags.is_empty() {
            return;
        }
        let name = self.rng.pick(&tags).clone();
        let free = self.free_names();
        if free.is_empty() || self.rng.chance(50) {
            self.note(format!("read tag {name}"));
            self.check_tag(&name);
            return;
        }
        let new = *self.rng.pick(&free);
        self.note(format!("branch {new} from tag {name}"));
        let p = self.store.partition("t", 0).unwrap();
        p.create_branch(new, &name).unwrap();
        self.models
            .insert(new.to_string(), self.tags[&name].clone());
        self.archives.insert(new.to_string(), Vec::new());
        self.check(new);
    }

    /// Protects a branch, or (more often, so deletes and restores keep happening) lifts a
    /// protection.
    fn protect(&mut self) {
        let p = self.store.partition("t", 0).unwrap();
        let protected: Vec<String> = self.protected.iter().cloned().collect();
        if !protected.is_empty() && self.rng.chance(60) {
            let name = self.rng.pick(&protected).clone();
            self.note(format!("unprotect {name}"));
            assert!(!p.unprotect(&name).unwrap().protected);
            self.protected.remove(&name);
        } else {
            let name = self.pick_live();
            self.note(format!("protect {name}"));
            assert!(p.protect(&name).unwrap().protected);
            self.protected.insert(name);
        }
    }

    /// Operations that must fail, and fail cleanly.
    fn refused(&mut self) {
        let p = self.store.partition("t", 0).unwrap();
        let live = self.pick_live();
        self.note(format!("refused ops around {live}"));
        assert_eq!(
            p.create_branch(&live, "main").unwrap_err().kind(),
            ErrorKind::AlreadyExists
        );
        let upper = live.to_ascii_uppercase();
        assert_eq!(
            p.create_branch(&upper, "main").unwrap_err().kind(),
            ErrorKind::InvalidArgument,
            "{upper}"
        );
        assert_eq!(
            p.delete_branch("main").unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
        // Branches and tags share one name space.
        assert_eq!(
            p.create_tag(&live, "main").unwrap_err().kind(),
            ErrorKind::AlreadyExists
        );
        if let Some(tag) = self.tags.keys().next() {
            assert_eq!(
                p.create_branch(tag, "main").unwrap_err().kind(),
                ErrorKind::AlreadyExists
            );
            assert_eq!(
                p.create_tag(tag, "main").unwrap_err().kind(),
                ErrorKind::AlreadyExists
            );
        }
        if let Some(free) = self.free_names().first() {
            assert_eq!(p.branch(free).unwrap_err().kind(), ErrorKind::NotFound);
            assert_eq!(
                p.create_branch("zz", free).unwrap_err().kind(),
                ErrorKind::NotFound
            );
        }
        assert_eq!(p.branches().unwrap(), self.live());
    }

    /// Every retained archive still reads its state.
    fn check_archives(&mut self) {
        let p = self.store.partition("t", 0).unwrap();
        let mut n = 0;
        for (name, list) in self.archives.clone() {
            let b = p.branch(&name).unwrap();
            for (a, model) in list {
                n += 1;
                let tmp = format!("check-{n}");
                let c = b.branch_from_archive(&a, &tmp).unwrap();
                let got: Model = c
                    .scan_blocking(&ScanOptions::default())
                    .unwrap()
                    .entries
                    .into_iter()
                    .map(|kv| (kv.key, kv.value.value))
                    .collect();
                assert!(got == model, "archive {a} of {name} differs from its state");
                drop(c);
                p.delete_branch(&tmp).unwrap();
            }
        }
    }
}

fn run(backend: Backend, seed: u64, ops: usize) {
    run_with(backend, None, seed, ops);
}

fn run_with(backend: Backend, obj: Option<Arc<dyn ObjectStore>>, seed: u64, ops: usize) {
    eprintln!(
        "branch model: backend {backend:?} seed {seed:#x} ({ops} ops); replay with BOUGH_SEED={seed:#x}"
    );
    let log = Rc::new(RefCell::new(Vec::new()));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut w = World::new(backend, obj.clone(), seed, log.clone());
        for i in 0..ops {
            w.log.borrow_mut().push(format!("-- op {i}"));
            w.step();
        }
        w.gc();
        w.reopen();
        w.check_all();
        w.check_archives();
        w.gc();
        (
            w.models.len(),
            w.archives.values().map(Vec::len).sum::<usize>(),
            w.tags.len(),
            w.protected.len(),
            w.picks,
            w.points_in_time,
        )
    }));
    match result {
        Ok((branches, archives, tags, protected, picks, pits)) => {
            eprintln!(
                "  done: {branches} live branches ({protected} protected), {archives} archives, \
                 {tags} tags; (picks, that applied, that conflicted): {picks:?}; {pits} \
                 point-in-time branches and restores"
            );
            // A run long enough picks ranges that change keys, and some that conflict.
            if ops >= 400 {
                assert!(
                    picks.1 > 0 && picks.2 > 0,
                    "picks covered too little: {picks:?}"
                );
            }
        }
        Err(e) => {
            let log = log.borrow();
            let keep = std::env::var("BOUGH_MODEL_TAIL")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(40);
            let tail = &log[log.len().saturating_sub(keep)..];
            eprintln!(
                "FAILED: backend {backend:?} seed {seed:#x}; last operations:\n  {}",
                tail.join("\n  ")
            );
            std::panic::resume_unwind(e);
        }
    }
}

fn seeds(n: usize) -> Vec<u64> {
    if let Ok(s) = std::env::var("BOUGH_SEED") {
        let s = s.trim();
        let v = match s.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => s.parse(),
        };
        return vec![v.expect("BOUGH_SEED must be a number (decimal or 0x-hex)")];
    }
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut r = Rng(base);
    (0..n).map(|_| r.next()).collect()
}

fn ops(default: usize) -> usize {
    std::env::var("BOUGH_MODEL_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

thread_local! {
    /// The write buffer of the stores this thread's worlds open (0: no log).
    static WRITE_BUFFER: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The branch model with a write buffer so small that every operation crosses a
/// checkpoint boundary, and with one holding many commits (merges, forks, archives, tags,
/// picks and reopens of buffered branches).
#[test]
fn branch_model_buffered() {
    for (buffer, seeds_n) in [(1u64, 2), (1 << 20, 2)] {
        WRITE_BUFFER.with(|b| b.set(buffer));
        for seed in seeds(seeds_n) {
            eprintln!("write_buffer_bytes {buffer}");
            run(Backend::Memory, seed, ops(250));
        }
    }
    WRITE_BUFFER.with(|b| b.set(1 << 20));
    for seed in seeds(1) {
        run(Backend::Pread, seed, ops(200));
    }
}

#[test]
fn branch_model_memory() {
    for seed in seeds(4) {
        run(Backend::Memory, seed, ops(300));
    }
}

#[test]
fn branch_model_pread() {
    for seed in seeds(3) {
        run(Backend::Pread, seed, ops(250));
    }
}

/// Cloud mode over the in-process object store (atomic conditional writes).
#[test]
fn branch_model_object() {
    for seed in seeds(2) {
        let obj: Arc<dyn ObjectStore> = Arc::new(MemoryObjectStore::new());
        run_with(Backend::Object, Some(obj), seed, ops(200));
    }
}

/// Cloud mode over a store without If-Match (like opendal's memory and fs services): terms
/// are fenced with numbered claims.
#[test]
fn branch_model_object_numbered_claims() {
    for seed in seeds(1) {
        let obj: Arc<dyn ObjectStore> = Arc::new(MemoryObjectStore::without_if_match(None));
        run_with(Backend::Object, Some(obj), seed, ops(200));
    }
}

/// Cloud mode against the real S3 server (moto) that `.ci/run` starts: required under
/// `CI=true`, skipped (loudly) elsewhere when `BOUGH_S3_ENDPOINT` is not set.
#[test]
fn branch_model_s3() {
    let endpoint = match std::env::var("BOUGH_S3_ENDPOINT") {
        Ok(e) if !e.is_empty() => e,
        _ => {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "BOUGH_S3_ENDPOINT is not set under CI=true: .ci/run must start moto"
            );
            eprintln!("branch_model_s3: SKIPPED (BOUGH_S3_ENDPOINT not set)");
            return;
        }
    };
    for seed in seeds(1) {
        let cfg = CloudConfig {
            endpoint: endpoint.clone(),
            bucket: std::env::var("BOUGH_S3_BUCKET").unwrap_or_else(|_| "bough-test".into()),
            root: format!("/branch-model-{seed:x}/"),
            allow_anonymous: true,
            ..CloudConfig::default()
        };
        let obj: Arc<dyn ObjectStore> = Arc::new(OpendalStore::new(&cfg).unwrap());
        run_with(Backend::Object, Some(obj), seed, ops(120));
    }
}

/// Fixed seeds, so every run covers at least these histories.
#[test]
fn branch_model_fixed_seeds() {
    if std::env::var("BOUGH_SEED").is_ok() {
        return;
    }
    for seed in [1, 2, 0xB0B, 0x5EED_CAFE] {
        run(Backend::Memory, seed, 300);
    }
}

#[test]
fn slow_branch_model() {
    for seed in seeds(10) {
        run(Backend::Memory, seed, ops(3000));
        run(Backend::Pread, seed, ops(1500));
    }
}
