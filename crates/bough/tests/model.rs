//! Model-based test of the store facade on every backend.
//!
//! Random sequences of every operation — write batches (puts of 0 B to overflow-sized values,
//! deletes, explicit last-writer-wins timestamps older and newer than the stored one, TTL and
//! absolute expiries under a `ManualClock`), pipelined (group-committed) writes, refused
//! batches, `get`, `floor`, paged `scan`s that follow their continuation, old read views,
//! `truncate`, `drop_table`, `expire_now`, `compact_now`, maintenance, close + reopen and (on
//! the memory backend) simulated power loss — are checked against an in-memory model with the
//! documented semantics:
//!
//! - last writer wins by timestamp; a tie goes to the later write; a batch is atomic;
//! - a delete whose timestamp is ≥ the entry's (or of an absent key) leaves a tombstone with
//!   its timestamp, so an older put arriving later loses; the tombstone is never returned
//!   and expiry removes it [`RETENTION_MS`] after the delete;
//! - an expired entry is never returned, but still takes part in last-writer-wins until
//!   expiry (`expire_now`, maintenance) removes it;
//! - `truncate`, `drop_table` and expiry remove entries whatever their timestamps;
//! - a batch naming one key twice, an empty key or an over-long key is refused with
//!   `InvalidArgument` and changes nothing.
//!
//! Each test prints its seeds (replay one with `BOUGH_SEED=<seed>`), the backend it ran on
//! and a table of the operations it ran. Small data files, `checkpoint_chunks(2)` and
//! `manifest_rewrite_bytes(64 KiB)` make file rollovers, checkpoints and manifest rewrites
//! frequent.

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use bough::io::{CrashPolicy, MemoryStorage};
use bough::{
    Backend, Branch, ErrorKind, ManualClock, Options, PutOptions, ReadView, ScanOptions, Store,
    StoreBuilder, Value, WriteBatch, show_key,
};
use common::Rng;

const TABLE: &str = "model";
const PARTITIONS: u32 = 2;
/// A table `drop_table` of [`TABLE`] must not touch.
const OTHER_TABLE: &str = "bystander";
const START_MS: u64 = 1_700_000_000_000;
/// Tombstone retention of the model's stores: short, so runs see tombstones both kept and
/// purged (the clock moves by 100 ms to 3 s at times).
const RETENTION_MS: u64 = 5_000;

// ---------------------------------------------------------------------------------------
// The model.

#[derive(Debug, Clone, PartialEq, Eq)]
struct Ent {
    value: Vec<u8>,
    ts: u64,
    /// 0 = never.
    exp: u64,
    /// A delete remembered until `exp` (no value, never live).
    tomb: bool,
}

impl Ent {
    fn live(&self, now: u64) -> bool {
        !self.tomb && self.present(now)
    }

    /// Whether expiry has not removed it yet (at `now`).
    fn present(&self, now: u64) -> bool {
        self.exp == 0 || self.exp > now
    }
}

/// One mutation as the model applies it (timestamps and expiries resolved).
#[derive(Debug, Clone)]
enum MOp {
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        ts: u64,
        exp: u64,
    },
    Del {
        key: Vec<u8>,
        ts: u64,
        /// When the tombstone is purged.
        exp: u64,
    },
}

#[derive(Debug, Clone, Default)]
struct Model {
    map: BTreeMap<Vec<u8>, Ent>,
}

impl Model {
    fn apply(&mut self, op: &MOp) {
        match op {
            MOp::Put {
                key,
                value,
                ts,
                exp,
            } => {
                if self.map.get(key).is_none_or(|e| *ts >= e.ts) {
                    self.map.insert(
                        key.clone(),
                        Ent {
                            value: value.clone(),
                            ts: *ts,
                            exp: *exp,
                            tomb: false,
                        },
                    );
                }
            }
            MOp::Del { key, ts, exp } => {
                if self.map.get(key).is_none_or(|e| *ts >= e.ts) {
                    self.map.insert(
                        key.clone(),
                        Ent {
                            value: Vec::new(),
                            ts: *ts,
                            exp: *exp,
                            tomb: true,
                        },
                    );
                }
            }
        }
    }

    fn truncate(&mut self, from: &[u8]) {
        if from.is_empty() {
            self.map.clear();
        } else {
            self.map.split_off(from);
        }
    }

    fn expire(&mut self, now: u64) {
        self.map.retain(|_, e| e.present(now));
    }

    fn get(&self, key: &[u8], now: u64) -> Option<&Ent> {
        self.map.get(key).filter(|e| e.live(now))
    }

    fn floor(&self, key: &[u8], now: u64) -> Option<(&Vec<u8>, &Ent)> {
        self.map
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .rev()
            .find(|(_, e)| e.live(now))
    }

    fn range(
        &self,
        begin: &Bound<Vec<u8>>,
        end: &Option<Vec<u8>>,
        now: u64,
    ) -> Vec<(&Vec<u8>, &Ent)> {
        let lo: Bound<&[u8]> = match begin {
            Bound::Included(k) => Bound::Included(k),
            Bound::Excluded(k) => Bound::Excluded(k),
            Bound::Unbounded => Bound::Unbounded,
        };
        let hi: Bound<&[u8]> = match end {
            Some(k) => Bound::Excluded(k),
            None => Bound::Unbounded,
        };
        // BTreeMap::range panics on an empty or inverted range; the store returns nothing.
        if let (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b)) = (lo, hi)
            && (a > b || (a == b && matches!(lo, Bound::Excluded(_))))
        {
            return Vec::new();
        }
        self.map
            .range::<[u8], _>((lo, hi))
            .filter(|(_, e)| e.live(now))
            .collect()
    }
}

fn same(got: &Value, want: &Ent) -> bool {
    got.value == want.value
        && got.timestamp == want.ts
        && got.expire_at == (want.exp != 0).then_some(want.exp)
}

fn show_value(v: &Value) -> String {
    format!(
        "{} B ts {} exp {:?} head {:02x?}",
        v.value.len(),
        v.timestamp,
        v.expire_at,
        &v.value[..v.value.len().min(8)]
    )
}

fn show_ent(e: &Ent) -> String {
    format!(
        "{} B ts {} exp {} head {:02x?}",
        e.value.len(),
        e.ts,
        e.exp,
        &e.value[..e.value.len().min(8)]
    )
}

// ---------------------------------------------------------------------------------------
// Operation mix and counters.

/// Relative weights of the operations.
#[derive(Debug, Clone, Copy)]
struct Mix {
    load: u32,
    write: u32,
    pipelined: u32,
    refused: u32,
    get: u32,
    floor: u32,
    scan: u32,
    view: u32,
    expire: u32,
    compact: u32,
    gc: u32,
    maintenance: u32,
    truncate: u32,
    drop_table: u32,
    reopen: u32,
    clock: u32,
}

impl Mix {
    /// Write-heavy: commits are cheap in memory. (Weights per 10,000 operations.)
    const MEMORY: Mix = Mix {
        load: 8,
        write: 2200,
        pipelined: 400,
        refused: 150,
        get: 3000,
        floor: 1000,
        scan: 800,
        view: 400,
        expire: 100,
        compact: 60,
        gc: 40,
        maintenance: 20,
        truncate: 8,
        drop_table: 2,
        reopen: 30,
        clock: 100,
    };
    /// Read-heavy: every commit costs real fsyncs (several ms each), so batches are fewer.
    const DISK: Mix = Mix {
        load: 6,
        write: 250,
        pipelined: 80,
        refused: 150,
        get: 5200,
        floor: 1800,
        scan: 1300,
        view: 600,
        expire: 30,
        compact: 20,
        gc: 15,
        maintenance: 8,
        truncate: 5,
        drop_table: 2,
        reopen: 12,
        clock: 150,
    };

    fn weights(&self) -> [(Kind, u32); 16] {
        [
            (Kind::Load, self.load),
            (Kind::Write, self.write),
            (Kind::Pipelined, self.pipelined),
            (Kind::Refused, self.refused),
            (Kind::Get, self.get),
            (Kind::Floor, self.floor),
            (Kind::Scan, self.scan),
            (Kind::View, self.view),
            (Kind::Expire, self.expire),
            (Kind::Compact, self.compact),
            (Kind::Gc, self.gc),
            (Kind::Maintenance, self.maintenance),
            (Kind::Truncate, self.truncate),
            (Kind::DropTable, self.drop_table),
            (Kind::Reopen, self.reopen),
            (Kind::Clock, self.clock),
        ]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Load,
    Write,
    Pipelined,
    Refused,
    Get,
    Floor,
    Scan,
    View,
    Expire,
    Compact,
    Gc,
    Maintenance,
    Truncate,
    DropTable,
    Reopen,
    Clock,
}

/// Operation counters, printed as a table.
#[derive(Debug, Default, Clone)]
struct Counts(BTreeMap<&'static str, u64>);

impl Counts {
    fn add(&mut self, what: &'static str, n: u64) {
        *self.0.entry(what).or_default() += n;
    }
    fn merge(&mut self, other: &Counts) {
        for (k, v) in &other.0 {
            self.add(k, *v);
        }
    }
    fn get(&self, what: &str) -> u64 {
        self.0.get(what).copied().unwrap_or(0)
    }
    /// Store calls (each write batch, read, scan page, admin call); the mutations inside
    /// batches are counted separately.
    fn calls(&self) -> u64 {
        self.0
            .iter()
            .filter(|(k, _)| k.starts_with("call "))
            .map(|(_, v)| v)
            .sum()
    }
    fn print(&self, title: &str) {
        eprintln!("{title}");
        eprintln!("  {:<40} {:>10}", "operation", "count");
        for (k, v) in &self.0 {
            eprintln!("  {k:<40} {v:>10}");
        }
        eprintln!("  {:<40} {:>10}", "= store calls in total", self.calls());
    }
}

// ---------------------------------------------------------------------------------------
// One run: one seed on one backend.

struct Run {
    test: &'static str,
    backend: Backend,
    seed: u64,
    rng: Rng,
    dir: tempfile::TempDir,
    mem: MemoryStorage,
    clock: ManualClock,
    cache_bytes: u64,
    cache_data_pages: bool,
    shards: usize,
    store: Option<Store>,
    branches: Vec<Branch>,
    models: Vec<Model>,
    keys: Vec<Vec<u8>>,
    hot: Vec<usize>,
    /// An old read view kept across writes: (partition, view, model then, clock then).
    view: Option<(usize, ReadView, Model, u64)>,
    other: Model,
    counts: Counts,
    op: u64,
    /// The last changes of each key per partition, printed when a check fails.
    history: BTreeMap<(usize, Vec<u8>), Vec<String>>,
    /// The last operations that affect many keys (truncate, expiry, reopen, ...).
    events: Vec<String>,
    /// Time spent per kind of operation.
    time: BTreeMap<Kind, std::time::Duration>,
}

/// The key of id `i` in a keyspace salted by `salt`: a mix of short text keys, binary keys
/// with 0x00 / 0xff bytes, keys sharing a long prefix and maximum-length (512 B) keys.
fn make_key(salt: u64, i: usize) -> Vec<u8> {
    let h = common::mix(salt ^ (i as u64).wrapping_mul(0x9E37_79B9));
    let id = (i as u32).to_be_bytes();
    match h % 10 {
        0 => {
            let mut k = vec![0u8, 0];
            k.extend_from_slice(&id);
            k
        }
        1 => {
            let mut k = vec![0xff];
            k.extend_from_slice(&id);
            k.extend(std::iter::repeat_n(
                (h >> 8) as u8,
                ((h >> 16) % 60) as usize,
            ));
            k
        }
        2 => {
            let mut k = vec![b'p'; 100 + ((h >> 8) % 300) as usize];
            k.extend_from_slice(&id);
            k
        }
        3 => {
            let mut k = b"z".to_vec();
            k.extend_from_slice(&id);
            k.resize(512, (h >> 24) as u8);
            k
        }
        _ => format!("k{i:06}").into_bytes(),
    }
}

impl Run {
    fn new(test: &'static str, backend: Backend, seed: u64) -> Run {
        let mut rng = Rng::new(seed);
        let nkeys = rng.urange(200, 5000);
        let salt = rng.next_u64();
        let keys: Vec<Vec<u8>> = (0..nkeys).map(|i| make_key(salt, i)).collect();
        let hot = (0..16).map(|_| rng.urange(0, nkeys)).collect();
        let cache_bytes = *rng.pick(&[1u64 << 20, 4 << 20, 256 << 20]);
        let cache_data_pages = rng.chance(0.7);
        let shards = rng.urange(1, 4);
        eprintln!(
            "[{test}] seed {seed}: {nkeys} keys, cache {cache_bytes} B (data pages: \
             {cache_data_pages}), {shards} shards"
        );
        let mut run = Run {
            test,
            backend,
            seed,
            rng,
            dir: tempfile::tempdir().expect("tempdir"),
            mem: MemoryStorage::new(),
            clock: ManualClock::new(START_MS),
            cache_bytes,
            cache_data_pages,
            shards,
            store: None,
            branches: Vec::new(),
            models: vec![Model::default(); PARTITIONS as usize],
            keys,
            hot,
            view: None,
            other: Model::default(),
            counts: Counts::default(),
            op: 0,
            history: BTreeMap::new(),
            events: Vec::new(),
            time: BTreeMap::new(),
        };
        run.open();
        // A bystander table that `drop_table` of the model table must leave alone.
        let other = run
            .store()
            .partition(OTHER_TABLE, 0)
            .and_then(|p| p.branch("main"))
            .expect("bystander branch");
        let mut b = WriteBatch::new();
        for i in 0..50u32 {
            let (k, v) = (
                format!("o{i:03}").into_bytes(),
                vec![i as u8; i as usize * 3],
            );
            b.put_with(
                k.clone(),
                v.clone(),
                PutOptions {
                    timestamp: Some(7),
                    ..Default::default()
                },
            );
            run.other.apply(&MOp::Put {
                key: k,
                value: v,
                ts: 7,
                exp: 0,
            });
        }
        other.write_blocking(b).expect("bystander write");
        for p in 0..PARTITIONS as usize {
            run.load(p);
        }
        run
    }

    fn options(&self) -> StoreBuilder {
        common::options(self.backend, self.dir.path(), &self.mem)
            .clock(Arc::new(self.clock.clone()))
            .map_settings(|o| {
                o.data_file_size(16 * 4096 * 2)
                    .checkpoint_chunks(2)
                    .manifest_rewrite_bytes(64 * 1024)
                    .cache_bytes(self.cache_bytes)
                    .cache_data_pages(self.cache_data_pages)
                    .shards(self.shards)
                    .tombstone_retention_ms(RETENTION_MS)
                    // The buffered variants: a buffer so small that nearly every commit
                    // crosses a checkpoint, and one that holds many commits across reopens.
                    .write_buffer_bytes(if self.test.contains("tiny_buffer") {
                        1
                    } else if self.test.contains("buffered") {
                        256 * 1024
                    } else {
                        0
                    })
            })
    }

    fn open(&mut self) {
        let store = Store::open(self.options())
            .unwrap_or_else(|e| panic!("{}: open failed: {e}", self.ctx()));
        assert_eq!(
            store.backend().to_string(),
            match self.backend {
                Backend::Memory => "memory",
                Backend::Pread => "pread",
                Backend::IoUring => "io_uring",
                other => unreachable!("no model runs on {other:?}"),
            },
            "{}: wrong backend",
            self.ctx()
        );
        self.branches = (0..PARTITIONS)
            .map(|p| {
                store
                    .partition(TABLE, p)
                    .and_then(|h| h.branch("main"))
                    .unwrap_or_else(|e| panic!("{}: open branch: {e}", self.ctx()))
            })
            .collect();
        self.store = Some(store);
    }

    fn store(&self) -> &Store {
        self.store.as_ref().expect("store open")
    }

    fn ctx(&self) -> String {
        format!(
            "[{} seed {} on {:?}, op {}]",
            self.test, self.seed, self.backend, self.op
        )
    }

    fn now(&self) -> u64 {
        use bough::Clock;
        self.clock.now_ms()
    }

    /// Applies a mutation to the model, remembering it for failure reports.
    fn model_apply(&mut self, part: usize, o: &MOp, how: &str) {
        let line = match o {
            MOp::Put {
                key,
                value,
                ts,
                exp,
            } => {
                let (k, v) = (key.clone(), value.len());
                (
                    k,
                    format!("op {} {how}: put {v} B ts {ts} exp {exp}", self.op),
                )
            }
            MOp::Del { key, ts, exp } => (
                key.clone(),
                format!("op {} {how}: delete ts {ts} tombstone exp {exp}", self.op),
            ),
        };
        let before = self.models[part].map.get(&line.0).map(|e| e.ts);
        self.models[part].apply(o);
        let after = self.models[part].map.get(&line.0).map(|e| e.ts);
        let now = self.now();
        let h = self.history.entry((part, line.0)).or_default();
        h.push(format!(
            "{} (model ts {before:?} -> {after:?}, now {now})",
            line.1
        ));
        if h.len() > 12 {
            h.remove(0);
        }
    }

    fn history_of(&self, part: usize, key: &[u8]) -> String {
        let h = self
            .history
            .get(&(part, key.to_vec()))
            .map_or_else(|| "no history".to_string(), |h| h.join("\n    "));
        format!("{h}\n  recent events:\n    {}", self.events.join("\n    "))
    }

    fn event(&mut self, what: String) {
        let line = format!("op {} (now {}): {what}", self.op, self.now());
        self.events.push(line);
        if self.events.len() > 20 {
            self.events.remove(0);
        }
    }

    // -- generators ----------------------------------------------------------------------

    fn key_index(&mut self) -> usize {
        if self.rng.chance(0.3) {
            *self.rng.pick(&self.hot)
        } else {
            self.rng.urange(0, self.keys.len())
        }
    }

    /// A key to read with: usually one of the keyspace, sometimes a neighbour of one or an
    /// arbitrary byte string.
    fn probe(&mut self) -> Vec<u8> {
        let i = self.key_index();
        let k = self.keys[i].clone();
        match self.rng.below(10) {
            0 => {
                let mut k = k;
                k.push(0);
                k
            }
            1 => k[..k.len() - 1].to_vec(),
            2 => {
                let mut b = vec![0u8; self.rng.urange(1, 12)];
                self.rng.fill(&mut b);
                b
            }
            3 => vec![*self.rng.pick(&[0x00u8, 0xff, b'k', b'p'])],
            _ => k,
        }
    }

    fn value(&mut self) -> Vec<u8> {
        let len = match self.rng.below(100) {
            0..25 => 0,
            25..60 => self.rng.urange(1, 64),
            60..75 => self.rng.urange(64, 900),
            75..80 => self.rng.urange(900, 1100),
            80..95 => self.rng.urange(1025, 8192),
            _ => self.rng.urange(8192, 40_000),
        };
        let mut v = vec![0u8; len];
        self.rng.fill(&mut v);
        v
    }

    /// A user timestamp around the stored one (older, equal, newer) or around now.
    fn timestamp(&mut self, part: usize, key: &[u8]) -> u64 {
        let now = self.now();
        let base = self.models[part].map.get(key).map_or(now, |e| e.ts);
        match self.rng.below(6) {
            0 => base - 1,
            1 => base,
            2 => base + 1,
            3 => now - self.rng.below(1000),
            4 => now + self.rng.below(1000),
            _ => base + self.rng.below(50),
        }
    }

    /// A batch of distinct keys and the model ops it means.
    fn batch(&mut self, part: usize) -> (WriteBatch, Vec<MOp>) {
        let n = match self.rng.below(100) {
            0 => self.rng.urange(100, 300),
            1..10 => self.rng.urange(9, 64),
            _ => self.rng.urange(1, 9),
        };
        self.batch_of(part, n)
    }

    /// A batch of up to `n` distinct keys.
    fn batch_of(&mut self, part: usize, n: usize) -> (WriteBatch, Vec<MOp>) {
        let now = self.now();
        let mut used = std::collections::BTreeSet::new();
        let mut b = WriteBatch::new();
        let mut ops = Vec::new();
        for _ in 0..n {
            let i = self.key_index();
            if !used.insert(i) {
                continue;
            }
            let key = self.keys[i].clone();
            if self.rng.chance(0.78) {
                let value = self.value();
                let mut o = PutOptions::default();
                if self.rng.chance(0.4) {
                    o.timestamp = Some(self.timestamp(part, &key));
                }
                match self.rng.below(10) {
                    0 | 1 => o.ttl_ms = Some(self.rng.range(1, 400)),
                    2 => {
                        o.expire_at = Some(match self.rng.below(4) {
                            0 => 0,
                            1 => now - self.rng.below(100),
                            _ => now + self.rng.range(1, 400),
                        })
                    }
                    3 => {
                        // Both: the absolute expiry wins.
                        o.ttl_ms = Some(self.rng.range(1, 400));
                        o.expire_at = Some(now + self.rng.range(1, 400));
                    }
                    _ => {}
                }
                let exp = match (o.expire_at, o.ttl_ms) {
                    (Some(at), _) => at.max(1),
                    (None, Some(ttl)) => now + ttl,
                    (None, None) => 0,
                };
                let ts = o.timestamp.unwrap_or(now);
                b.put_with(key.clone(), value.clone(), o);
                ops.push(MOp::Put {
                    key,
                    value,
                    ts,
                    exp,
                });
            } else if self.rng.chance(0.5) {
                let ts = self.timestamp(part, &key);
                b.delete_at(key.clone(), ts);
                ops.push(MOp::Del {
                    key,
                    ts,
                    exp: now + RETENTION_MS,
                });
            } else {
                b.delete(key.clone());
                ops.push(MOp::Del {
                    key,
                    ts: now,
                    exp: now + RETENTION_MS,
                });
            }
        }
        self.counts.add(
            "  mutations: put",
            ops.iter().filter(|o| matches!(o, MOp::Put { .. })).count() as u64,
        );
        self.counts.add(
            "  mutations: delete",
            ops.iter().filter(|o| matches!(o, MOp::Del { .. })).count() as u64,
        );
        (b, ops)
    }

    // -- operations ----------------------------------------------------------------------

    fn step(&mut self, mix: &Mix) {
        let weights = mix.weights();
        let total: u32 = weights.iter().map(|(_, w)| w).sum();
        let mut r = self.rng.below(u64::from(total)) as u32;
        let mut kind = Kind::Get;
        for (k, w) in weights {
            if r < w {
                kind = k;
                break;
            }
            r -= w;
        }
        self.step_kind(kind);
    }

    /// Runs once each kind of operation a seed has not run yet (the rare ones may not come
    /// up in a short run).
    fn run_missing_kinds(&mut self, mix: &Mix) {
        for (kind, _) in mix.weights() {
            if !self.time.contains_key(&kind) {
                self.step_kind(kind);
            }
        }
    }

    fn step_kind(&mut self, kind: Kind) {
        self.op += 1;
        // Time moves a little between operations (0 ms often, so default timestamps tie).
        self.clock.advance(self.rng.below(3));
        let part = self.rng.urange(0, PARTITIONS as usize);
        let started = std::time::Instant::now();
        match kind {
            Kind::Load => self.load(part),
            Kind::Write => self.write(part),
            Kind::Pipelined => self.pipelined(),
            Kind::Refused => self.refused(part),
            Kind::Get => self.get(part),
            Kind::Floor => self.floor(part),
            Kind::Scan => self.scan(part),
            Kind::View => self.view(part),
            Kind::Expire => {
                self.counts.add("call expire_now", 1);
                self.event(format!("expire_now on partition {part}"));
                self.branches[part]
                    .expire_now()
                    .unwrap_or_else(|e| panic!("{}: expire_now: {e}", self.ctx()));
                let now = self.now();
                self.models[part].expire(now);
                self.check_all(part);
            }
            Kind::Compact => {
                self.counts.add("call compact_now", 1);
                self.event(format!("compact_now on partition {part}"));
                let before = self.store().io_stats();
                self.branches[part]
                    .compact_now()
                    .unwrap_or_else(|e| panic!("{}: compact_now: {e}", self.ctx()));
                if self.store().io_stats().since(&before).writes > 0 {
                    self.counts.add("  compact_now that relocated pages", 1);
                }
                self.check_all(part);
            }
            Kind::Gc => {
                self.counts.add("call gc", 1);
                let reports = self
                    .store()
                    .gc()
                    .unwrap_or_else(|e| panic!("{}: gc: {e}", self.ctx()));
                let deleted: usize = reports.iter().map(|(_, r)| r.deleted.len()).sum();
                self.counts
                    .add("  data files deleted by gc", deleted as u64);
                self.event(format!("gc deleted {deleted} files"));
                self.check_all(part);
            }
            Kind::Maintenance => {
                self.counts.add("call run_maintenance", 1);
                self.event("run_maintenance".into());
                self.store()
                    .run_maintenance()
                    .unwrap_or_else(|e| panic!("{}: run_maintenance: {e}", self.ctx()));
                let now = self.now();
                for m in &mut self.models {
                    m.expire(now);
                }
                self.check_all(part);
            }
            Kind::Truncate => {
                let from = if self.rng.chance(0.3) {
                    Vec::new()
                } else {
                    self.probe()
                };
                self.counts.add(
                    if from.is_empty() {
                        "call truncate (all)"
                    } else {
                        "call truncate (from key)"
                    },
                    1,
                );
                self.event(format!(
                    "truncate partition {part} from {}",
                    show_key(&from)
                ));
                self.branches[part]
                    .truncate_blocking(&from)
                    .unwrap_or_else(|e| panic!("{}: truncate: {e}", self.ctx()));
                self.models[part].truncate(&from);
                self.check_all(part);
            }
            Kind::DropTable => {
                self.counts.add("call drop_table", 1);
                self.event("drop_table".into());
                self.store()
                    .table(TABLE)
                    .and_then(|t| t.truncate())
                    .unwrap_or_else(|e| panic!("{}: drop_table: {e}", self.ctx()));
                for m in &mut self.models {
                    m.map.clear();
                }
                for p in 0..PARTITIONS as usize {
                    self.check_all(p);
                }
                self.check_other();
            }
            Kind::Reopen => {
                if self.backend == Backend::Memory && self.rng.chance(0.5) {
                    self.crash_and_recover();
                } else {
                    self.reopen();
                }
            }
            Kind::Clock => {
                self.counts.add("  clock jumps", 1);
                self.clock.advance(self.rng.range(100, 3000));
            }
        }
        *self.time.entry(kind).or_default() += started.elapsed();
        if self.op.is_multiple_of(1500) {
            self.check_all(part);
        }
    }

    /// One large batch over a good part of the keyspace (grows the tree by many levels'
    /// worth of splits at once).
    fn load(&mut self, part: usize) {
        let n = self.keys.len() / 2;
        let (b, ops) = self.batch_of(part, n);
        self.counts.add("call write_blocking (large batch)", 1);
        self.branches[part]
            .write_blocking(b)
            .unwrap_or_else(|e| panic!("{}: load: {e}", self.ctx()));
        for o in &ops {
            self.model_apply(part, o, "load");
        }
    }

    fn write(&mut self, part: usize) {
        let (b, ops) = self.batch(part);
        self.counts.add("call write_blocking", 1);
        self.branches[part]
            .write_blocking(b)
            .unwrap_or_else(|e| panic!("{}: write: {e}", self.ctx()));
        for o in &ops {
            self.model_apply(part, o, "write");
        }
        // Read back what was just written.
        for o in ops.iter().take(3) {
            let (MOp::Put { key, .. } | MOp::Del { key, .. }) = o;
            let key = key.clone();
            self.check_get(part, &key);
        }
    }

    /// Several batches in flight at once (the writer may group-commit them); they must
    /// apply exactly as if committed one after the other.
    fn pipelined(&mut self) {
        let n = self.rng.urange(2, 7);
        self.counts.add("call write (pipelined)", n as u64);
        let mut futs = Vec::new();
        let mut planned = Vec::new();
        for _ in 0..n {
            let part = self.rng.urange(0, PARTITIONS as usize);
            // Hot keys make batches of one group touch the same keys.
            let (b, ops) = self.batch(part);
            futs.push(self.branches[part].write(b));
            planned.push((part, ops));
        }
        // Sometimes a maintenance call queues right behind the writes: it must run after
        // them (the writer flushes a pending group before any other job of the branch).
        let behind = if self.rng.chance(0.25) {
            let part = self.rng.urange(0, PARTITIONS as usize);
            // Truncates are rarer: they empty much of the keyspace.
            let what = match self.rng.below(20) {
                0..3 => 0,
                3..12 => 1,
                _ => 2,
            };
            let from = self.probe();
            let r = match what {
                0 => {
                    self.counts
                        .add("call truncate (behind pipelined writes)", 1);
                    self.branches[part].truncate_blocking(&from)
                }
                1 => {
                    self.counts
                        .add("call expire_now (behind pipelined writes)", 1);
                    self.branches[part].expire_now()
                }
                _ => {
                    self.counts
                        .add("call compact_now (behind pipelined writes)", 1);
                    self.branches[part].compact_now().map(|_| ())
                }
            };
            r.unwrap_or_else(|e| panic!("{}: behind pipelined writes: {e}", self.ctx()));
            Some((part, what, from))
        } else {
            None
        };
        for f in futs {
            common::block_on(f).unwrap_or_else(|e| panic!("{}: pipelined write: {e}", self.ctx()));
        }
        for (i, (part, ops)) in planned.iter().enumerate() {
            for o in ops {
                self.model_apply(*part, o, &format!("pipelined {i}/{n}"));
            }
        }
        if let Some((part, what, from)) = behind {
            let now = self.now();
            match what {
                0 => {
                    self.event(format!(
                        "truncate partition {part} from {} behind pipelined writes",
                        show_key(&from)
                    ));
                    self.models[part].truncate(&from);
                }
                1 => {
                    self.event(format!(
                        "expire_now partition {part} behind pipelined writes"
                    ));
                    self.models[part].expire(now);
                }
                _ => self.event(format!(
                    "compact_now partition {part} behind pipelined writes"
                )),
            }
        }
        for (part, ops) in planned {
            for o in ops.iter().take(4) {
                let (MOp::Put { key, .. } | MOp::Del { key, .. }) = o;
                self.check_get(part, key);
            }
        }
    }

    /// Batches the store must refuse, whole: a key twice, an empty key, an over-long key.
    fn refused(&mut self, part: usize) {
        let (mut b, ops) = self.batch(part);
        let how = self.rng.below(4);
        let victim: Vec<u8> = match ops.get(self.rng.urange(0, ops.len().max(1))) {
            Some(MOp::Put { key, .. } | MOp::Del { key, .. }) => key.clone(),
            None => self.keys[0].clone(),
        };
        let (what, expect) = match how {
            0 | 1 => {
                if ops.is_empty() {
                    b.put(victim.clone(), "first");
                }
                if how == 0 {
                    b.put(victim.clone(), "again");
                } else {
                    b.delete(victim.clone());
                }
                ("call write refused: key twice", "twice")
            }
            2 => {
                b.put(Vec::new(), "v");
                ("call write refused: empty key", "empty key")
            }
            _ => {
                b.put(vec![b'x'; 513], "v");
                ("call write refused: key > 512 B", "maximum")
            }
        };
        self.counts.add(what, 1);
        let e = self.branches[part]
            .write_blocking(b)
            .expect_err("a refused batch was accepted");
        assert_eq!(
            e.kind(),
            ErrorKind::InvalidArgument,
            "{}: {what}: {e}",
            self.ctx()
        );
        assert!(e.to_string().contains(expect), "{}: {e}", self.ctx());
        // Nothing of the batch was applied.
        for o in ops.iter().take(5) {
            let (MOp::Put { key, .. } | MOp::Del { key, .. }) = o;
            self.check_get(part, key);
        }
    }

    fn check_get(&mut self, part: usize, key: &[u8]) {
        self.counts.add("call get", 1);
        let now = self.now();
        let got = self.branches[part].get_blocking(key);
        let want = self.models[part].get(key, now);
        match (&got, want) {
            (Ok(None), None) => {}
            (Ok(Some(g)), Some(w)) if same(g, w) => {}
            // Keys the store cannot hold are refused on reads too.
            (Err(e), _)
                if (key.is_empty() || key.len() > 512)
                    && e.kind() == ErrorKind::InvalidArgument => {}
            _ => panic!(
                "{}: get {} on partition {part}: store {:?}, model {:?}; history:\n    {}",
                self.ctx(),
                show_key(key),
                got.as_ref().map(|o| o.as_ref().map(show_value)),
                want.map(show_ent),
                self.history_of(part, key)
            ),
        }
    }

    fn get(&mut self, part: usize) {
        let key = self.probe();
        self.check_get(part, &key);
    }

    fn floor(&mut self, part: usize) {
        self.counts.add("call floor", 1);
        let key = if self.rng.chance(0.01) {
            Vec::new()
        } else {
            self.probe()
        };
        let now = self.now();
        let got = self.branches[part]
            .floor_blocking(&key)
            .unwrap_or_else(|e| panic!("{}: floor: {e}", self.ctx()));
        let want = self.models[part].floor(&key, now);
        let ok = match (&got, want) {
            (None, None) => true,
            (Some(g), Some((k, e))) => g.key == *k && same(&g.value, e),
            _ => false,
        };
        assert!(
            ok,
            "{}: floor {} on partition {part}: store {:?}, model {:?}",
            self.ctx(),
            show_key(&key),
            got.map(|g| (show_key(&g.key), show_value(&g.value))),
            want.map(|(k, e)| (show_key(k), show_ent(e)))
        );
    }

    fn scan(&mut self, part: usize) {
        let begin = match self.rng.below(5) {
            0 => Bound::Unbounded,
            1 | 2 => Bound::Included(self.probe()),
            _ => Bound::Excluded(self.probe()),
        };
        let end = if self.rng.chance(0.4) {
            None
        } else {
            Some(self.probe())
        };
        let limit = match self.rng.below(10) {
            0..3 => usize::MAX,
            3..5 => self.rng.urange(1, 60),
            _ => self.rng.urange(60, 600),
        };
        let max_bytes = if self.rng.chance(0.4) {
            usize::MAX
        } else {
            self.rng.urange(1, 20_000)
        };
        let keys_only = self.rng.chance(0.2);
        // Page through one read view, or a fresh view per page (nothing changes between).
        let view = if self.rng.chance(0.5) {
            Some(self.branches[part].read_view().expect("read_view"))
        } else {
            None
        };
        self.counts.add("call scan (first page)", 1);
        let now = self.now();
        let expected: Vec<(Vec<u8>, Ent)> = self.models[part]
            .range(&begin, &end, now)
            .into_iter()
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect();
        let mut got: Vec<bough::KeyValue> = Vec::new();
        let mut opts = ScanOptions {
            begin: begin.clone(),
            end: end
                .clone()
                .map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded),
            limit,
            max_bytes,
            keys_only,
        };
        let mut pages = 0usize;
        loop {
            pages += 1;
            assert!(
                pages <= expected.len() + 1,
                "{}: scan never ends ({pages} pages for {} entries)",
                self.ctx(),
                expected.len()
            );
            let page = match &view {
                Some(v) => v.scan(&opts),
                None => self.branches[part].scan_blocking(&opts),
            }
            .unwrap_or_else(|e| panic!("{}: scan: {e}", self.ctx()));
            let n = page.entries.len();
            let bytes: Vec<usize> = page
                .entries
                .iter()
                .map(|e| e.key.len() + e.value.value.len())
                .collect();
            let ctx = || {
                format!(
                    "{}: scan page {pages} of [{:?}, {:?}) limit {limit} max_bytes {max_bytes} \
                     keys_only {keys_only}",
                    self.ctx(),
                    opts.begin.as_ref().map(|k| show_key(k)),
                    end.as_ref().map(|k| show_key(k))
                )
            };
            assert!(n <= limit, "{}: {n} entries over the limit", ctx());
            if n > 1 {
                assert!(
                    bytes[..n - 1].iter().sum::<usize>() < max_bytes,
                    "{}: went on after max_bytes",
                    ctx()
                );
            }
            if let Some(next) = &page.next {
                assert!(
                    n == limit || (n > 0 && bytes.iter().sum::<usize>() >= max_bytes),
                    "{}: stopped early ({n} entries, {} bytes) with next {}",
                    ctx(),
                    bytes.iter().sum::<usize>(),
                    show_key(next)
                );
                let want_next = expected.get(got.len() + n).map(|(k, _)| k);
                assert_eq!(
                    Some(next),
                    want_next,
                    "{}: continuation token is not the next live key",
                    ctx()
                );
                self.counts.add("call scan (continuation page)", 1);
            }
            got.extend(page.entries);
            match page.next {
                Some(next) => opts.begin = Bound::Included(next),
                None => break,
            }
        }
        let ok = got.len() == expected.len()
            && got.iter().zip(&expected).all(|(g, (k, e))| {
                g.key == *k
                    && if keys_only {
                        g.value.value.is_empty()
                            && g.value.timestamp == e.ts
                            && g.value.expire_at == (e.exp != 0).then_some(e.exp)
                    } else {
                        same(&g.value, e)
                    }
            });
        if !ok {
            let first_bad = got
                .iter()
                .zip(&expected)
                .position(|(g, (k, _))| g.key != *k)
                .unwrap_or(got.len().min(expected.len()));
            panic!(
                "{}: scan of partition {part} differs from the model: {} entries vs {} \
                 expected; first difference at {first_bad}: store {:?} model {:?}",
                self.ctx(),
                got.len(),
                expected.len(),
                got.get(first_bad)
                    .map(|g| (show_key(&g.key), show_value(&g.value))),
                expected
                    .get(first_bad)
                    .map(|(k, e)| (show_key(k), show_ent(e)))
            );
        }
        // The borrowed walk over the same range, stopped after `limit` entries, lends
        // exactly the model's first `limit` keys and values.
        self.counts.add("call for_each_in", 1);
        let range = (begin, end.map_or(Bound::Unbounded, Bound::Excluded));
        let mut lent: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let walk = |key: &[u8], value: &[u8]| {
            lent.push((key.to_vec(), value.to_vec()));
            if lent.len() >= limit {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        };
        match &view {
            Some(v) => v.for_each_in(range, walk),
            None => self.branches[part].for_each_in(range, walk),
        }
        .unwrap_or_else(|e| panic!("{}: for_each_in: {e}", self.ctx()));
        let want: Vec<(Vec<u8>, Vec<u8>)> = expected
            .iter()
            .take(limit)
            .map(|(k, e)| (k.clone(), e.value.clone()))
            .collect();
        assert!(
            lent == want,
            "{}: for_each_in lent {} entries, the model has {} (first keys {:?} / {:?})",
            self.ctx(),
            lent.len(),
            want.len(),
            lent.first().map(|(k, _)| show_key(k)),
            want.first().map(|(k, _)| show_key(k))
        );
    }

    /// Opens an old read view, or checks (and sometimes drops) the one held: it must still
    /// show the state and the clock of when it was taken.
    fn view(&mut self, part: usize) {
        let Some((vp, view, model, then)) = self.view.take() else {
            self.counts.add("call read_view (kept)", 1);
            let v = self.branches[part].read_view().expect("read_view");
            self.view = Some((part, v, self.models[part].clone(), self.now()));
            return;
        };
        self.counts.add("call read_view checks", 1);
        for _ in 0..5 {
            let mut key = self.probe();
            key.truncate(512);
            let got = view
                .get(&key)
                .unwrap_or_else(|e| panic!("{}: old view get: {e}", self.ctx()));
            let want = model.get(&key, then);
            let ok = match (&got, want) {
                (None, None) => true,
                (Some(g), Some(w)) => same(g, w),
                _ => false,
            };
            assert!(
                ok,
                "{}: old view of partition {vp} changed: get {}: {:?} vs {:?}",
                self.ctx(),
                show_key(&key),
                got.as_ref().map(show_value),
                want.map(show_ent)
            );
        }
        if self.rng.chance(0.75) {
            self.view = Some((vp, view, model, then));
            return;
        }
        let all = view
            .scan(&ScanOptions::default())
            .unwrap_or_else(|e| panic!("{}: old view scan: {e}", self.ctx()));
        let want = model.range(&Bound::Unbounded, &None, then);
        assert!(
            all.entries.len() == want.len()
                && all
                    .entries
                    .iter()
                    .zip(&want)
                    .all(|(g, (k, e))| g.key == **k && same(&g.value, e)),
            "{}: old view of partition {vp}: scan shows {} entries, model {}",
            self.ctx(),
            all.entries.len(),
            want.len()
        );
        if self.rng.chance(0.8) {
            self.view = Some((vp, view, model, then));
        }
    }

    /// Compares a whole partition with the model (one full scan plus floor at the end).
    fn check_all(&mut self, part: usize) {
        self.counts.add("call scan (full check)", 1);
        let now = self.now();
        let all = self.branches[part]
            .scan_blocking(&ScanOptions::default())
            .unwrap_or_else(|e| panic!("{}: full scan: {e}", self.ctx()));
        assert!(all.next.is_none());
        let want = self.models[part].range(&Bound::Unbounded, &None, now);
        if all.entries.len() != want.len()
            || !all
                .entries
                .iter()
                .zip(&want)
                .all(|(g, (k, e))| g.key == **k && same(&g.value, e))
        {
            let first_bad = all
                .entries
                .iter()
                .zip(&want)
                .position(|(g, (k, e))| g.key != **k || !same(&g.value, e))
                .unwrap_or(all.entries.len().min(want.len()));
            panic!(
                "{}: partition {part} differs from the model: {} entries vs {}; first \
                 difference at {first_bad}: store {:?}, model {:?}",
                self.ctx(),
                all.entries.len(),
                want.len(),
                all.entries
                    .get(first_bad)
                    .map(|g| (show_key(&g.key), show_value(&g.value))),
                want.get(first_bad).map(|(k, e)| (show_key(k), show_ent(e)))
            );
        }
    }

    fn check_other(&mut self) {
        let other = self
            .store()
            .partition(OTHER_TABLE, 0)
            .and_then(|p| p.branch("main"))
            .expect("bystander");
        let all = other.scan_blocking(&ScanOptions::default()).expect("scan");
        let want = self.other.range(&Bound::Unbounded, &None, self.now());
        assert!(
            all.entries.len() == want.len()
                && all
                    .entries
                    .iter()
                    .zip(&want)
                    .all(|(g, (k, e))| g.key == **k && same(&g.value, e)),
            "{}: drop_table of {TABLE} touched {OTHER_TABLE}",
            self.ctx()
        );
    }

    fn close_handles(&mut self) -> Store {
        self.view = None;
        self.branches.clear();
        self.store.take().expect("store open")
    }

    fn reopen(&mut self) {
        self.counts.add("call close + reopen", 1);
        self.event("close + reopen".into());
        let store = self.close_handles();
        store
            .close()
            .unwrap_or_else(|e| panic!("{}: close: {e}", self.ctx()));
        drop(store);
        self.open();
        for p in 0..PARTITIONS as usize {
            self.check_all(p);
        }
        self.check_other();
    }

    /// Power loss on the memory backend: everything not synced is lost. Every acknowledged
    /// batch was synced, so the model does not change.
    fn crash_and_recover(&mut self) {
        self.counts.add("call power loss + recover (memory)", 1);
        self.event("power loss + recover".into());
        let store = self.close_handles();
        drop(store);
        self.mem.crash(CrashPolicy::DropAllUnsynced);
        self.open();
        for p in 0..PARTITIONS as usize {
            self.check_all(p);
        }
        self.check_other();
    }

    fn finish(mut self) -> Counts {
        for p in 0..PARTITIONS as usize {
            self.check_all(p);
        }
        eprintln!(
            "[{}] seed {}: io since the last open {:?}, live keys {:?}",
            self.test,
            self.seed,
            self.store().io_stats(),
            self.models
                .iter()
                .map(|m| m.map.values().filter(|e| !e.tomb).count())
                .collect::<Vec<_>>()
        );
        self.reopen();
        if self.backend != Backend::Memory {
            let part_dir = self.dir.path().join(format!("{TABLE}.0"));
            let files = std::fs::read_dir(&part_dir).map_or(0, |d| d.count());
            eprintln!(
                "[{}] seed {}: {} files in {}",
                self.test,
                self.seed,
                files,
                part_dir.display()
            );
        }
        let store = self.close_handles();
        store.close().expect("close");
        eprintln!(
            "[{}] seed {}: time per kind of step {:?}",
            self.test, self.seed, self.time
        );
        self.counts
    }
}

/// Runs each seed on `backend` until it has made `calls` store calls (so the budget holds
/// whatever the seed's data looks like), then prints the table of operations.
fn run_backend(test: &'static str, backend: Backend, seeds: usize, calls: u64) {
    let seeds = common::seeds(test, seeds);
    let started = std::time::Instant::now();
    let mut total = Counts::default();
    let mix = if backend == Backend::Memory {
        Mix::MEMORY
    } else {
        Mix::DISK
    };
    let mut steps = 0;
    for &seed in &seeds {
        let mut run = Run::new(test, backend, seed);
        while run.counts.calls() < calls {
            run.step(&mix);
        }
        run.run_missing_kinds(&mix);
        steps += run.op;
        let counts = run.finish();
        total.merge(&counts);
    }
    total.print(&format!(
        "[{test}] on {backend:?}: seeds {seeds:?}, {steps} steps, {:.1?}",
        started.elapsed()
    ));
    assert!(total.calls() >= calls * seeds.len() as u64);
    for what in [
        "call write_blocking",
        "call write (pipelined)",
        "call get",
        "call floor",
        "call scan (first page)",
        "call drop_table",
        "call close + reopen",
        "call gc",
    ] {
        assert!(total.get(what) > 0, "no {what} ran");
    }
}

// Budget: 3 × 14,000 + 2 × 15,000 + 2 × 15,000 = 102,000 store calls per CI run (plus the
// mutations inside the batches, counted separately).

#[test]
fn model_memory() {
    run_backend("model_memory", Backend::Memory, 3, 14_000);
}

#[test]
fn model_pread() {
    run_backend("model_pread", Backend::Pread, 2, 15_000);
}

#[test]
fn model_io_uring() {
    run_backend("model_io_uring", Backend::IoUring, 2, 15_000);
}

#[test]
fn model_memory_tiny_buffer() {
    run_backend("model_memory_tiny_buffer", Backend::Memory, 2, 10_000);
}

#[test]
fn model_memory_buffered() {
    run_backend("model_memory_buffered", Backend::Memory, 2, 10_000);
}

#[test]
fn model_pread_buffered() {
    run_backend("model_pread_buffered", Backend::Pread, 1, 10_000);
}

#[test]
fn slow_model_memory() {
    run_backend("slow_model_memory", Backend::Memory, 24, 40_000);
}

#[test]
fn slow_model_pread() {
    run_backend("slow_model_pread", Backend::Pread, 6, 40_000);
}

#[test]
fn slow_model_io_uring() {
    run_backend("slow_model_io_uring", Backend::IoUring, 6, 40_000);
}

// ---------------------------------------------------------------------------------------
// Regression tests found by the model.

/// Batches that queue up together are group-committed; the merge must give the same
/// result as committing them one after the other. A delete at timestamp 20 followed by a
/// put at timestamp 10: the delete leaves a tombstone, so committed in turn the older put
/// loses, and merged by timestamp the delete wins too — the key stays deleted either way.
#[test]
fn regression_group_commit_delete_then_older_put() {
    for backend in [Backend::Pread, Backend::IoUring] {
        let dir = tempfile::tempdir().expect("tempdir");
        let faults = bough::io::FaultInjector::new();
        let store = common::open(
            "regression_group_commit_delete_then_older_put",
            Store::builder(
                Options::new(dir.path())
                    .backend(backend)
                    .maintenance_interval_ms(0)
                    .shards(1),
            )
            .faults(faults.clone()),
        );
        let main = store
            .partition("t", 0)
            .and_then(|p| p.branch("main"))
            .expect("branch");
        let at = |ts| PutOptions {
            timestamp: Some(ts),
            ..Default::default()
        };
        let mut b = WriteBatch::new();
        b.put_with("absent-before", "x", at(1));
        b.put_with("present", "old", at(5));
        main.write_blocking(b).expect("setup");
        let mut b = WriteBatch::new();
        b.delete_at("absent-before", 1);
        main.write_blocking(b).expect("setup");

        // Hold the writer inside fsync so the next batches queue up behind it and are
        // taken as one group.
        faults.stall_sync();
        let mut first = WriteBatch::new();
        first.put("unrelated", "u");
        let f0 = main.write(first);
        assert!(
            faults.wait_for_stalled_syncs(1, std::time::Duration::from_secs(10)),
            "the writer never reached fsync"
        );
        let mut del = WriteBatch::new();
        del.delete_at("present", 20).delete_at("absent-before", 20);
        let f1 = main.write(del);
        let mut put = WriteBatch::new();
        put.put_with("present", "new", at(10))
            .put_with("absent-before", "back", at(10));
        let f2 = main.write(put);
        faults.release_sync();
        for f in [f0, f1, f2] {
            common::block_on(f).expect("write");
        }
        // One after the other: the delete (20 ≥ 5) leaves a tombstone at 20, then the put
        // (10) loses to it. Same for "absent-before" (a tombstone on a deleted key).
        for k in ["present", "absent-before"] {
            let got = main.get_blocking(k.as_bytes()).expect("get");
            assert_eq!(
                got.map(|g| g.value),
                None,
                "{k}: an older put resurrected a deleted key"
            );
        }
        store.close().expect("close");
    }
}

/// A leaf split evens out the last two leaves by entry count; moving many small entries
/// next to a few large ones made a leaf larger than a page, and the writer thread panicked
/// while writing it (every later write of its shard then failed with `Closed`).
#[test]
fn regression_leaf_split_rebalance_overflows_the_page() {
    for backend in common::ALL_BACKENDS {
        let dir = tempfile::tempdir().expect("tempdir");
        let mem = MemoryStorage::new();
        let store = common::open(
            "regression_leaf_split_rebalance_overflows_the_page",
            common::options(backend, dir.path(), &mem),
        );
        let main = store
            .partition("t", 0)
            .and_then(|p| p.branch("main"))
            .expect("branch");
        // One leaf's worth of tiny entries, then four entries of ~950 B (inline, a full
        // leaf together): the split leaves 4 large entries last and moves half the tiny
        // ones over to them.
        let mut b = WriteBatch::new();
        for i in 0..71u32 {
            b.put(format!("a{i:03}"), "");
        }
        for i in 0..4u32 {
            b.put(format!("b{i}"), vec![b'v'; 940]);
        }
        main.write_blocking(b).expect("write");
        let all = main.scan_blocking(&ScanOptions::default()).expect("scan");
        assert_eq!(all.entries.len(), 75);
        // The same with two values just under the inline limit (half a page).
        let mut b = WriteBatch::new();
        for i in 0..71u32 {
            b.put(format!("d{i:03}"), "");
        }
        for i in 0..2u32 {
            b.put(format!("e{i}"), vec![b'v'; 1950]);
        }
        main.write_blocking(b).expect("write");
        let all = main.scan_blocking(&ScanOptions::default()).expect("scan");
        assert_eq!(all.entries.len(), 75 + 73);
        // The writer is still alive.
        let mut b = WriteBatch::new();
        b.put("c", "after");
        main.write_blocking(b).expect("a later write");
        store.close().expect("close");
    }
}

/// `ReadView::version` is documented as the commit the view shows, and the snapshot's
/// version as growing by one per commit of the head. When the manifest is rewritten as a
/// fresh snapshot (every `manifest_rewrite_bytes`), the head used to restart its manifest
/// sequence at 0 and publish that as the version, so two different states of a branch
/// reported the same version and a reader comparing versions was misled. (The fork version a
/// new branch records comes from the same counter.) The version is now kept in the snapshot
/// record (`VERSION` extension) apart from the log sequence.
#[test]
fn regression_view_version_never_goes_back() {
    let store = Store::open(
        Options::in_memory()
            .maintenance_interval_ms(0)
            .manifest_rewrite_bytes(64 * 1024),
    )
    .expect("open");
    let main = store
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    let mut last = main.read_view().expect("view").version();
    for i in 0..40u32 {
        let mut b = WriteBatch::new();
        b.put(format!("k{i}"), "v");
        main.write_blocking(b).expect("write");
        let v = main.read_view().expect("view").version();
        assert!(
            v > last,
            "after commit {i} the version went from {last} to {v}"
        );
        last = v;
    }
}

/// The version also keeps growing across what replaces a branch's manifest: a reopen, a new
/// term, a restore from an archive; and a branch starts at its parent's version, so its own
/// versions continue that history.
#[test]
fn view_version_continues_across_reopen_new_term_fork_and_restore() {
    let mem = MemoryStorage::new();
    let opts = || {
        Store::builder(
            Options::in_memory()
                .maintenance_interval_ms(0)
                .manifest_rewrite_bytes(64 * 1024),
        )
        .memory(mem.clone())
    };
    let write = |b: &Branch, i: u32| {
        let mut wb = WriteBatch::new();
        wb.put(format!("k{i}"), "v");
        b.write_blocking(wb).expect("write");
    };
    let version = |b: &Branch| b.read_view().expect("view").version();
    let store = Store::open(opts()).expect("open");
    let p = store.partition("t", 0).expect("partition");
    let main = p.branch("main").expect("branch");
    // Past several manifest rewrites.
    for i in 0..40 {
        write(&main, i);
    }
    let mut last = version(&main);
    assert!(last >= 40, "40 commits, version {last}");
    let archive = main.archive().expect("archive");
    assert!(version(&main) >= last);
    last = version(&main);

    let feature = p.create_branch("feature", "main").expect("fork");
    let fork = p
        .describe("feature")
        .expect("describe")
        .origin
        .expect("origin")
        .fork_version;
    assert!(
        fork >= last,
        "fork version {fork} below the parent's {last}"
    );
    assert_eq!(
        version(&feature),
        fork,
        "a branch starts at its parent's version"
    );
    write(&feature, 100);
    assert!(version(&feature) > fork);

    write(&main, 41);
    let before = version(&main);
    assert!(before > last);
    let main = p.open_new_term("main").expect("new term");
    assert!(version(&main) >= before, "a new term went back");
    write(&main, 42);
    let before = version(&main);

    main.restore(&archive, "backup").expect("restore");
    let restored = version(&main);
    assert!(
        restored > before,
        "restoring an older state moved the version back: {before} -> {restored}"
    );
    write(&main, 43);
    let before = version(&main);
    drop((main, feature, p));
    store.close().expect("close");

    let store = Store::open(opts()).expect("reopen");
    let main = store
        .partition("t", 0)
        .and_then(|p| p.branch("main"))
        .expect("branch");
    let after = version(&main);
    assert_eq!(after, before, "a reopen changed the version");
    write(&main, 44);
    assert!(version(&main) > after);
    store.close().expect("close");
}
