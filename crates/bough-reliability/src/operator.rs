//! Operator mistakes: what a careless operator does to a store's directory between runs.
//!
//! The workload builds a store (several families, branches, deletions, re-created names),
//! keeping a durable copy taken halfway through. Each round copies the finished image and
//! makes one mistake, chosen evenly:
//!
//! - **lost `CURRENT_TERM`**: a branch's record (live or tombstone) is deleted;
//! - **stale `CURRENT_TERM`**: a record is replaced by its copy from halfway through;
//! - **foreign `CURRENT_TERM`**: a record is replaced by one from another store — a valid
//!   record of some other term (often ahead of every manifest), live or a tombstone, of
//!   another incarnation;
//! - **restored directory**: a partition directory is replaced by its copy from halfway
//!   through (what it held then is what it must hold now);
//! - **re-created name**: a branch another branch may read is deleted, its tombstone lost,
//!   and the name created again and written to.
//!
//! Then the store is reopened and, in every round, a name that is not live is created
//! (again) from `main` and written to — so a name whose tombstone was lost is reused — GC
//! runs, and every branch of every family must read exactly what the model says: the
//! mistake may be reported (`Corruption`, GC refusing), never turn into lost or wrong
//! data. After GC and a second reopen everything is read again.

use std::collections::BTreeMap;
use std::sync::Arc;

use bough::io::{MemoryStorage, Storage};
use bough::{ErrorKind, ManualClock, Store, WriteBatch};
use bough_manifest::CurrentTerm;
use bough_names::{FileKind, classify};

use crate::exec::{execute, read_branch};
use crate::power::{memory_options, schedule};
use crate::report::{Tally, guarded};
use crate::rng::Rng;
use crate::workload::{BRANCH_POOL, FamilyModel, State, TABLE, WorkloadConfig, state_diff};

/// How many mistakes.
#[derive(Debug, Clone, Copy)]
pub struct OperatorConfig {
    /// The workload that builds the store.
    pub workload: WorkloadConfig,
    /// Rounds (one mistake each).
    pub rounds: u64,
}

impl OperatorConfig {
    /// CI: 100 mistakes.
    pub fn short() -> Self {
        OperatorConfig {
            workload: WorkloadConfig {
                families: 2,
                ops_per_family: 60,
                keys: 30,
                max_branches: 5,
            },
            rounds: 100,
        }
    }

    /// Long: 1,000 mistakes.
    pub fn long() -> Self {
        OperatorConfig {
            rounds: 1000,
            ..Self::short()
        }
    }
}

/// The kinds of mistakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mistake {
    /// A `CURRENT_TERM` file deleted.
    LostCurrentTerm,
    /// A `CURRENT_TERM` file replaced by an older copy.
    StaleCurrentTerm,
    /// A `CURRENT_TERM` file replaced by another store's.
    ForeignCurrentTerm,
    /// A partition directory replaced by an older copy.
    RestoredDirectory,
    /// A branch deleted, its tombstone lost, its name created again.
    RecreatedName,
}

const MISTAKES: [Mistake; 5] = [
    Mistake::LostCurrentTerm,
    Mistake::StaleCurrentTerm,
    Mistake::ForeignCurrentTerm,
    Mistake::RestoredDirectory,
    Mistake::RecreatedName,
];

/// A built store, its halfway copy and what each must hold.
struct Built {
    image: MemoryStorage,
    models: Vec<FamilyModel>,
    early: MemoryStorage,
    early_models: Vec<FamilyModel>,
}

fn build(seed: u64, cfg: &WorkloadConfig) -> Result<Built, String> {
    let mem = MemoryStorage::new();
    let clock = ManualClock::new(1_000_000);
    let store = Store::open(memory_options(mem.clone(), &clock)).map_err(|e| e.to_string())?;
    let mut models: Vec<FamilyModel> = (0..cfg.families).map(FamilyModel::new).collect();
    let order = schedule(seed, cfg);
    let half = order.len() / 2;
    let mut early = None;
    for (i, f) in order.into_iter().enumerate() {
        if i == half {
            // Everything acknowledged so far is durable: this is a consistent copy.
            early = Some((mem.clone_durable(), models.clone()));
        }
        let m = &mut models[f as usize];
        let op = m.next_op(seed, cfg);
        clock.advance(1);
        execute(&store, seed, f, m.applied, &op)
            .map_err(|e| format!("building: {} failed: {e}", op.kind()))?;
        m.apply(seed, &op);
    }
    store.close().map_err(|e| e.to_string())?;
    let (early, early_models) = early.ok_or("workload too short for a halfway copy")?;
    Ok(Built {
        image: mem.clone_durable(),
        models,
        early,
        early_models,
    })
}

/// Every `CURRENT_TERM` path in `image`.
fn current_terms(image: &MemoryStorage) -> Vec<String> {
    let mut out = Vec::new();
    for d in image.list_dirs().unwrap_or_default() {
        for n in image.list(&d).unwrap_or_default() {
            if matches!(classify(&n), FileKind::CurrentTerm(_)) {
                out.push(format!("{d}/{n}"));
            }
        }
    }
    out
}

/// Runs the operator-mistake rounds.
pub fn run(seed: u64, cfg: &OperatorConfig) -> Tally {
    guarded("operator mistakes", || {
        let mut tally = Tally::default();
        let built = match build(seed, &cfg.workload) {
            Ok(b) => b,
            Err(e) => {
                tally.fail(format!("operator mistakes (seed {seed}): {e}"));
                return tally;
            }
        };
        eprintln!("operator mistakes: seed {seed}, {} rounds", cfg.rounds);
        for i in 0..cfg.rounds {
            let t = guarded(&format!("mistake {i}"), || one_round(seed, i, &built));
            tally.merge(&t);
        }
        tally
    })
}

/// The models each family must read as after a round, and what the round did.
struct Expect {
    models: Vec<FamilyModel>,
    ctx: String,
}

fn make_mistake(
    r: &mut Rng,
    seed: u64,
    i: u64,
    built: &Built,
    image: &MemoryStorage,
    tally: &mut Tally,
) -> Result<Expect, String> {
    let mistake = *r.pick(&MISTAKES).ok_or("no mistakes")?;
    let mut models = built.models.clone();
    let e = |e: bough::io::IoError| e.to_string();
    let what = match mistake {
        Mistake::LostCurrentTerm => {
            let cts = current_terms(image);
            let path = r.pick(&cts).ok_or("no CURRENT_TERM")?.clone();
            image.delete(&path).map_err(e)?;
            tally.op_lost_current_term += 1;
            format!("deleted {path}")
        }
        Mistake::StaleCurrentTerm => {
            let cts: Vec<String> = current_terms(&built.early)
                .into_iter()
                .filter(|p| image.file_len(p).is_ok())
                .collect();
            let path = r
                .pick(&cts)
                .ok_or("no CURRENT_TERM in both copies")?
                .clone();
            let old = built.early.read_file(&path, 4096).map_err(e)?;
            image.write_atomic(&path, &old).map_err(e)?;
            tally.op_stale_current_term += 1;
            format!("replaced {path} by its halfway copy")
        }
        Mistake::ForeignCurrentTerm => {
            let cts = current_terms(image);
            let path = r.pick(&cts).ok_or("no CURRENT_TERM")?.clone();
            let bytes = image.read_file(&path, 4096).map_err(e)?;
            let ours = CurrentTerm::decode(&bytes).map_err(|e| e.to_string())?;
            let term = match r.below(3) {
                0 => ours.term + 1 + r.below(20),
                1 => r.below(ours.term + 1),
                _ => r.below(1000),
            };
            let foreign = CurrentTerm {
                term,
                deleted: r.chance(40),
                first_term: 0,
                incarnation: r.next_u64(),
                expiry: bough_manifest::ExpiryHint::Unknown,
            };
            image.write_atomic(&path, &foreign.encode()).map_err(e)?;
            tally.op_foreign_current_term += 1;
            format!("replaced {path} by a foreign record {foreign:?} (was {ours:?})")
        }
        Mistake::RestoredDirectory => {
            let family = r.below(built.models.len() as u64) as u32;
            let dir = format!("{TABLE}.{family}");
            for n in image.list(&dir).map_err(e)? {
                image.delete(&format!("{dir}/{n}")).map_err(e)?;
            }
            for n in built.early.list(&dir).map_err(e)? {
                let path = format!("{dir}/{n}");
                let bytes = built.early.read_file(&path, 1 << 32).map_err(e)?;
                image.create_new(&path, &bytes).map_err(e)?;
            }
            image.sync_dir(&dir).map_err(e)?;
            models[family as usize] = built.early_models[family as usize].clone();
            tally.op_restored_dirs += 1;
            format!("restored {dir} from its halfway copy")
        }
        Mistake::RecreatedName => {
            let family = r.below(built.models.len() as u64) as u32;
            let names: Vec<String> = models[family as usize]
                .branches
                .keys()
                .filter(|b| b.as_str() != "main")
                .cloned()
                .collect();
            let Some(name) = r.pick(&names).cloned() else {
                return Ok(Expect {
                    models,
                    ctx: format!("seed {seed} mistake {i}: no branch to re-create"),
                });
            };
            let clock = ManualClock::new(20_000_000);
            let store =
                Store::open(memory_options(image.clone(), &clock)).map_err(|e| e.to_string())?;
            let part = store.partition(TABLE, family).map_err(|e| e.to_string())?;
            part.delete_branch(&name).map_err(|e| e.to_string())?;
            store.close().map_err(|e| e.to_string())?;
            let ct = format!("{TABLE}.{family}/CURRENT_TERM.{name}");
            image.delete(&ct).map_err(e)?;
            image.sync_dir(&format!("{TABLE}.{family}")).map_err(e)?;
            let store =
                Store::open(memory_options(image.clone(), &clock)).map_err(|e| e.to_string())?;
            let part = store.partition(TABLE, family).map_err(|e| e.to_string())?;
            let m = &mut models[family as usize];
            m.branches.remove(&name);
            recreate(seed, &part, m, &name, i).map_err(|e| format!("re-creating {name}: {e}"))?;
            store.close().map_err(|e| e.to_string())?;
            tally.op_recreated_names += 1;
            format!("deleted {name} of family {family}, lost its tombstone, created it again")
        }
    };
    Ok(Expect {
        models,
        ctx: format!("seed {seed} mistake {i} ({mistake:?}): {what}"),
    })
}

/// Creates `name` from `main` and writes two keys to it; the model follows.
fn recreate(
    seed: u64,
    part: &bough::PartitionHandle,
    m: &mut FamilyModel,
    name: &str,
    round: u64,
) -> bough::Result<()> {
    let Some(main) = m.branches.get("main").cloned() else {
        return Ok(());
    };
    let b = part.create_branch(name, "main")?;
    let mut state: BTreeMap<Vec<u8>, Arc<[u8]>> = (*main.state).clone();
    let mut batch = WriteBatch::new();
    for k in 0..2u64 {
        let key = format!("recreated-{name}-{k}").into_bytes();
        let value = format!("{seed}/{round}/{name}/{k}").into_bytes();
        batch.put(key.clone(), value.clone());
        state.insert(key, Arc::from(value));
    }
    b.write_blocking(batch)?;
    let mut model = main;
    model.state = Arc::new(state);
    model.archives.clear();
    model.bases.clear();
    m.branches.insert(name.to_string(), model);
    Ok(())
}

fn one_round(seed: u64, i: u64, built: &Built) -> Tally {
    let mut tally = Tally::default();
    let mut r = Rng::derive(seed, &[0x4F50, i]);
    let image = built.image.clone_durable();
    let mut expect = match make_mistake(&mut r, seed, i, built, &image, &mut tally) {
        Ok(x) => x,
        Err(e) => {
            tally.fail(format!("seed {seed} mistake {i}: could not make it: {e}"));
            return tally;
        }
    };
    tally.operator_mistakes += 1;
    let ctx = expect.ctx.clone();
    // Whether GC found a branch whose state it could not establish (a deleted branch's
    // tombstone replaced by a live record naming no manifest): the mistake was reported,
    // and the integrity checker reports the same branch.
    let mut refused = false;
    let clock = ManualClock::new(30_000_000);
    let store = match Store::open(memory_options(image.clone(), &clock)) {
        Ok(s) => s,
        Err(e) => {
            tally.fail(format!("{ctx}: open failed: {e}"));
            return tally;
        }
    };
    // Every family: a name that is not live is created from `main` (a name whose tombstone
    // is lost is used again), then GC.
    for m in &mut expect.models {
        let Ok(part) = store.partition(TABLE, m.family) else {
            tally.fail(format!("{ctx}: partition {} unavailable", m.family));
            continue;
        };
        let free: Vec<&str> = BRANCH_POOL
            .iter()
            .copied()
            .filter(|b| !m.branches.contains_key(*b))
            .collect();
        if let Some(&name) = r.pick(&free) {
            match recreate(seed, &part, m, name, i) {
                Ok(()) => {}
                // A stale record may make a deleted name look live: reported, not lost.
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => tally.fail(format!(
                    "{ctx}: creating {name} in family {} failed: {e}",
                    m.family
                )),
            }
        }
        match part.gc() {
            Ok(_) => {}
            // A branch whose state could not be established: GC deletes nothing.
            Err(e) if e.kind() == ErrorKind::Corruption => {
                tally.op_gc_refused += 1;
                refused = true;
            }
            Err(e) => tally.fail(format!("{ctx}: GC of family {} failed: {e}", m.family)),
        }
    }
    verify(&store, &expect.models, &ctx, &mut tally);
    if let Err(e) = store.close() {
        tally.fail(format!("{ctx}: close failed: {e}"));
    }
    // Everything again after a reopen: GC deleted nothing anything needs.
    match Store::open(memory_options(image.clone(), &clock)) {
        Ok(store) => {
            verify(
                &store,
                &expect.models,
                &format!("{ctx} (reopened)"),
                &mut tally,
            );
            let _ = store.close();
        }
        Err(e) => tally.fail(format!("{ctx}: reopen failed: {e}")),
    }
    tally.integrity_checks += 1;
    match crate::check::check_storage(Arc::new(image)) {
        Ok(rep) if rep.is_ok() => {}
        Ok(rep)
            if refused
                && rep.failing.iter().all(|f| {
                    // The branch GC refused for, and GC's dry run refusing the same way.
                    matches!(
                        f.problem,
                        bough::check::Problem::MissingManifest { .. }
                            | bough::check::Problem::GcFailed { .. }
                    )
                }) => {}
        Ok(rep) => tally.fail(format!("{ctx}: integrity check: {rep}")),
        Err(e) => tally.fail(format!("{ctx}: integrity check failed: {e}")),
    }
    tally
}

/// Every branch of every family reads exactly as its model.
fn verify(store: &Store, models: &[FamilyModel], ctx: &str, tally: &mut Tally) {
    for m in models {
        let part = match store.partition(TABLE, m.family) {
            Ok(p) => p,
            Err(e) => {
                tally.fail(format!("{ctx}: partition {}: {e}", m.family));
                continue;
            }
        };
        for (name, bm) in &m.branches {
            let got = part.branch(name).and_then(|b| read_branch(&b));
            match got {
                Ok(s) if s == bm.state => {}
                Ok(s) => {
                    let (lost, wrong) = count_diff(&bm.state, &s);
                    tally.mismatch(
                        lost,
                        wrong,
                        format!(
                            "{ctx}: family {} branch {name} reads wrong: {}",
                            m.family,
                            state_diff(&bm.state, &s)
                        ),
                    );
                }
                Err(e) => {
                    tally.lost += bm.state.len() as u64;
                    tally.fail(format!(
                        "{ctx}: family {} branch {name} unreadable ({:?}): {e}",
                        m.family,
                        e.kind()
                    ));
                }
            }
        }
    }
}

/// (keys missing, keys with another value or not in the model).
fn count_diff(want: &State, seen: &State) -> (u64, u64) {
    let lost = want.keys().filter(|k| !seen.contains_key(*k)).count() as u64;
    let wrong = seen
        .iter()
        .filter(|(k, v)| want.get(*k) != Some(*v))
        .count() as u64;
    (lost, wrong)
}
