//! The store's branch registry: one durable record per table-wide branch operation, so
//! that a create, delete, archive or merge over every partition of a table happens in
//! all of them or in none, across crashes at any point (`docs/format.md`, "Table-wide
//! branch operations").
//!
//! Durability order of one operation:
//! 1. the table-level checks (the name is free in every partition, the source exists in
//!    every partition) — once for the table, each partition asked through the catalog;
//! 2. the intent `tableop_<seq>` is created (`create_new`: file and directory synced);
//! 3. each partition acts, in ascending order (each step is the partition's own durable
//!    change: a manifest and `CURRENT_TERM`, an archive, a merge commit);
//! 4. the outcome `tableop_<seq>_end` is created (synced) and the call returns.
//!
//! An intent without an outcome is an operation a crash (or a failed sync, which
//! poisons the storage) interrupted; the next writing open finishes it before anything
//! else runs. Every operation *rolls forward* there, because only going forward never
//! loses an acknowledged write: a branch created on some partitions may already hold
//! writes (it was readable and writable there as soon as it was created), so undoing the
//! create would delete them; a deletion cannot be undone; an archive or a merge already
//! taken on some partitions cannot be taken back without rewriting those branches. Each
//! step is idempotent: a create finding the branch, a delete not finding it, an archive
//! finding its timestamp are steps already done; a merge again is a no-op where the
//! source did not change since. An operation that fails on a partition while the store
//! runs (not a crash: the source is missing, a conflict) is rolled back at once instead
//! where that is safe — a create deletes the branches it made (nothing was acknowledged
//! yet: the call had not returned) — and its outcome says so.

use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};

use bough_catalog::ConflictPolicy;
use bough_manifest::{
    TableOpIntent, TableOpKind, TableOpOutcome, TableOpRecord, TableOpResult, decode_table_op,
};
use bough_names::{FileKind, TableOpName, TableOpPart, classify};

use super::*;

/// The registry's records live in the store root.
const ROOT: &str = "";
/// Largest record read back (a million partitions fit).
const MAX_RECORD: u64 = bough_manifest::MAX_TABLE_OP_BODY as u64 + 64;

thread_local! {
    /// Set while this thread runs the steps of a table-wide operation, so the reservation
    /// of its names does not refuse its own per-partition steps.
    static IN_TABLE_OP: Cell<bool> = const { Cell::new(false) };
}

/// In-memory side of the registry.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    /// Serializes table-wide operations of this process; holds the next sequence number
    /// once the root was listed.
    next: Mutex<Option<u64>>,
    /// (table, branch) names an operation of this process is changing, or left
    /// unresolved after a failure: per-partition creates and deletes of them are refused
    /// (`Busy`) until it is resolved, so a table-wide name is checked once.
    reserved: Mutex<HashSet<(String, String)>>,
}

/// One record pair as listed.
#[derive(Debug, Default, Clone, Copy)]
struct Listed {
    intent: bool,
    outcome: bool,
}

/// What a listing of the registry found.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.table("orders")?;
/// store.partition("orders", 0)?.branch("main")?.put_blocking("k", "v")?;
/// store.partition("orders", 1)?.branch("main")?.put_blocking("k", "v")?;
/// orders.create_branch("dev", "main")?;
/// // Every table-wide operation finished: nothing waits for the next open.
/// assert!(store.table_ops()?.unresolved.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistryStatus {
    /// Operations recorded (intents still on storage).
    pub recorded: usize,
    /// Of them, the ones without an outcome (interrupted, resolved at the next writing
    /// open).
    pub unresolved: Vec<u64>,
}

fn list(storage: &Arc<dyn Storage>) -> Result<BTreeMap<u64, Listed>> {
    let mut out: BTreeMap<u64, Listed> = BTreeMap::new();
    for name in storage.list(ROOT)? {
        if let FileKind::TableOp(n) = classify(&name) {
            let e = out.entry(n.seq).or_default();
            match n.part {
                TableOpPart::Intent => e.intent = true,
                TableOpPart::Outcome => e.outcome = true,
            }
        }
    }
    Ok(out)
}

/// Reads and decodes record `name`; damage is `Corruption` naming the file and offset.
fn read(storage: &Arc<dyn Storage>, name: &TableOpName) -> Result<TableOpRecord> {
    let path = name.to_string();
    let bytes = storage
        .read_file(&path, MAX_RECORD)
        .map_err(|e| Error::from(e).at(&path))?;
    decode_table_op(&bytes, name.seq).map_err(|e| {
        Error::new(
            ErrorKind::Corruption,
            format!("{path}: at offset {}: {}", e.offset, e.reason),
        )
    })
}

/// Decodes every registry record (for [`Store::check`]): each problem as (file, message).
pub(crate) fn check_records(
    storage: &Arc<dyn Storage>,
) -> Result<(RegistryStatus, Vec<(String, String)>)> {
    let mut status = RegistryStatus::default();
    let mut bad = Vec::new();
    for (seq, l) in list(storage)? {
        let parts = [
            (l.intent, TableOpName::intent(seq), true),
            (l.outcome, TableOpName::outcome(seq), false),
        ];
        for (present, name, intent) in parts {
            if !present {
                continue;
            }
            match read(storage, &name) {
                Ok(TableOpRecord::Intent(_)) if intent => {}
                Ok(TableOpRecord::Outcome(_)) if !intent => {}
                Ok(_) => bad.push((name.to_string(), "record of the other kind".to_string())),
                Err(e) => bad.push((name.to_string(), e.to_string())),
            }
        }
        if l.intent {
            status.recorded += 1;
            if !l.outcome {
                status.unresolved.push(seq);
            }
        }
    }
    Ok((status, bad))
}

fn policy_code(p: ConflictPolicy) -> u8 {
    match p {
        ConflictPolicy::Fail => 0,
        ConflictPolicy::Ours => 1,
        ConflictPolicy::Theirs => 2,
        ConflictPolicy::NewestTimestamp => 3,
    }
}

fn policy_of(code: u8) -> ConflictPolicy {
    match code {
        1 => ConflictPolicy::Ours,
        2 => ConflictPolicy::Theirs,
        3 => ConflictPolicy::NewestTimestamp,
        _ => ConflictPolicy::Fail,
    }
}

/// Runs `f` as a step of a table-wide operation (its reserved names are its own).
fn as_step<T>(f: impl FnOnce() -> T) -> T {
    let before = IN_TABLE_OP.with(|c| c.replace(true));
    let out = f();
    IN_TABLE_OP.with(|c| c.set(before));
    out
}

impl Registry {
    /// Refuses a per-partition create or delete of a name a table-wide operation is
    /// changing.
    pub(crate) fn check_free(&self, table: &TableName, branch: &str) -> Result<()> {
        if IN_TABLE_OP.with(Cell::get) {
            return Ok(());
        }
        if self
            .reserved
            .lock()
            .contains(&(table.as_str().to_string(), branch.to_string()))
        {
            return Err(Error::new(
                ErrorKind::Busy,
                format!(
                    "branch {branch} of table {table} is being changed by a table-wide operation"
                ),
            ));
        }
        Ok(())
    }
}

/// Everything the steps of one operation need.
struct Op<'a> {
    store: &'a Store,
    seq: u64,
    intent: TableOpIntent,
}

impl Op<'_> {
    fn partition(&self, p: PartitionId) -> Result<PartitionHandle> {
        self.store.partition(&self.intent.table, p)
    }

    /// Step `p` of the operation, idempotently (a step already done is `Ok`).
    fn step(&self, p: PartitionId) -> Result<Option<MergeReport>> {
        let i = &self.intent;
        let part = self.partition(p)?;
        as_step(|| match i.kind {
            TableOpKind::Create => match part.create_branch(&i.branch, &i.other) {
                Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(None),
                other => other.map(|_| None),
            },
            TableOpKind::Delete => match part.delete_branch(&i.branch) {
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
                other => other.map(|_| None),
            },
            TableOpKind::Archive => match part.branch(&i.branch)?.archive_at(i.timestamp) {
                Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(None),
                other => other.map(|_| None),
            },
            TableOpKind::Merge => {
                let opts = MergeOptions {
                    policy: policy_of(i.policy),
                    ..MergeOptions::default()
                };
                part.merge(&i.other, &i.branch, opts).map(Some)
            }
        })
    }

    fn end(&self, result: TableOpResult, detail: String) -> Result<()> {
        let name = TableOpName::outcome(self.seq);
        let bytes = TableOpOutcome { result, detail }.encode(self.seq);
        match self
            .store
            .inner
            .storage
            .create_new(&name.to_string(), &bytes)
        {
            // Written by an earlier attempt whose reply was lost: the record is final.
            Err(bough_io::IoError::AlreadyExists { .. }) => Ok(()),
            other => other.map_err(|e| Error::from(e).at(name.to_string())),
        }
    }

    fn key(&self) -> (String, String) {
        (self.intent.table.clone(), self.intent.branch.clone())
    }
}

impl Store {
    /// Runs a table-wide operation through the registry: intent, every partition, outcome.
    /// Returns each partition's merge report (merges only).
    pub(crate) fn table_op(
        &self,
        mut intent: TableOpIntent,
        policy: ConflictPolicy,
    ) -> Result<Vec<(PartitionId, MergeReport)>> {
        self.check_open()?;
        intent.policy = policy_code(policy);
        let reg = &self.inner.registry;
        let mut next = reg.next.lock();
        let mut seq = match *next {
            Some(s) => s,
            None => list(&self.inner.storage)?
                .keys()
                .next_back()
                .map_or(0, |s| s + 1),
        };
        // Another process on shared object storage may take a number first: creating the
        // intent is a create-if-absent, so the loser takes the next one.
        loop {
            let bytes = intent.encode(seq);
            let name = TableOpName::intent(seq).to_string();
            match self.inner.storage.create_new(&name, &bytes) {
                Ok(()) => break,
                Err(bough_io::IoError::AlreadyExists { .. }) => seq += 1,
                Err(e) => return Err(Error::from(e).at(name)),
            }
        }
        *next = Some(seq + 1);
        let op = Op {
            store: self,
            seq,
            intent,
        };
        reg.reserved.lock().insert(op.key());
        let out = self.run_live(&op);
        if out.is_ok() {
            reg.reserved.lock().remove(&op.key());
        }
        out
    }

    /// The steps of `op` while the store runs; a failure of one partition (not of the
    /// storage) rolls a create back; anything else stays for the next open to finish.
    fn run_live(&self, op: &Op<'_>) -> Result<Vec<(PartitionId, MergeReport)>> {
        let mut reports = Vec::new();
        let mut done = Vec::new();
        for &p in &op.intent.partitions {
            match op.step(p) {
                Ok(r) => {
                    done.push(p);
                    if let Some(r) = r {
                        reports.push((p, r));
                    }
                }
                Err(e) if op.intent.kind == TableOpKind::Create && !storage_failed(&e) => {
                    let mut detail = format!("partition {p}: {e}");
                    for &d in &done {
                        if let Err(e2) =
                            as_step(|| op.partition(d)?.delete_branch(&op.intent.branch))
                        {
                            // The rollback could not finish: leave the intent unresolved;
                            // the next open rolls the create forward.
                            return Err(Error::new(
                                e.kind(),
                                format!("{detail}; rollback on partition {d}: {e2}"),
                            ));
                        }
                    }
                    op.end(TableOpResult::RolledBack, detail.clone())?;
                    detail.insert_str(
                        0,
                        &format!(
                            "creating branch {} on table {} failed (undone on every partition): ",
                            op.intent.branch, op.intent.table
                        ),
                    );
                    self.inner.registry.reserved.lock().remove(&op.key());
                    return Err(Error::new(e.kind(), detail));
                }
                Err(e) => {
                    return Err(Error::new(
                        e.kind(),
                        format!(
                            "table-wide {:?} of branch {} on table {} stopped at partition {p} \
                             (done on {done:?}; the next open of the store finishes it): {e}",
                            op.intent.kind, op.intent.branch, op.intent.table
                        ),
                    ));
                }
            }
        }
        op.end(TableOpResult::Applied, String::new())?;
        Ok(reports)
    }

    /// Finishes every operation a crash interrupted (an intent without an outcome), rolling
    /// each forward, then removes the records of finished operations but the newest (which
    /// keeps the sequence growing). Runs at a writing open before anything else.
    pub(crate) fn resolve_table_ops(&self) -> Result<()> {
        let storage = &self.inner.storage;
        let listed = list(storage)?;
        let newest = listed.keys().next_back().copied();
        for (&seq, l) in &listed {
            if !l.intent || l.outcome {
                continue;
            }
            let name = TableOpName::intent(seq);
            let intent = match read(storage, &name) {
                Ok(TableOpRecord::Intent(i)) => i,
                Ok(TableOpRecord::Outcome(_)) => {
                    return Err(Error::new(
                        ErrorKind::Corruption,
                        format!("{name}: at offset 14: an outcome record under an intent's name"),
                    ));
                }
                // A damaged intent cannot be finished: it is left (never deleted) for the
                // operator, `Store::check` reports it, and the partitions, each consistent
                // on its own, stay usable.
                Err(e) if e.kind() == ErrorKind::Corruption => {
                    tracing::error!(error = %e, "cannot finish a table-wide branch operation: its record is damaged");
                    continue;
                }
                Err(e) => return Err(e),
            };
            tracing::warn!(seq, table = %intent.table, branch = %intent.branch, kind = ?intent.kind, "finishing an interrupted table-wide branch operation");
            let op = Op {
                store: self,
                seq,
                intent,
            };
            let mut refused = Vec::new();
            for &p in &op.intent.partitions {
                match op.step(p) {
                    Ok(Some(r)) if !r.conflicts.is_empty() && !r.committed => {
                        refused.push(format!("partition {p}: {} conflicts", r.conflicts.len()));
                    }
                    Ok(_) => {}
                    Err(e) if storage_failed(&e) => return Err(e),
                    Err(e) => refused.push(format!("partition {p}: {e}")),
                }
            }
            if !refused.is_empty() {
                tracing::warn!(seq, refused = %refused.join("; "), "table-wide operation finished with partitions refusing");
            }
            op.end(TableOpResult::Applied, refused.join("; "))?;
        }
        let mut pruned = false;
        // Prune: intent first, synced, then the outcome, so a crash between never leaves an
        // intent without its outcome.
        for (&seq, l) in &listed {
            // Unresolved at listing time (resolved just now, or damaged): kept this time.
            let unresolved = l.intent && !l.outcome;
            if Some(seq) == newest || unresolved {
                continue;
            }
            storage.delete(&TableOpName::intent(seq).to_string())?;
            storage.sync_dir(ROOT)?;
            storage.delete(&TableOpName::outcome(seq).to_string())?;
            pruned = true;
        }
        // An open with nothing to prune syncs nothing (a store without table-wide
        // operations opens as before).
        if pruned {
            storage.sync_dir(ROOT)?;
        }
        Ok(())
    }

    /// The registry's records (for `bough verify` and `bough inspect`).
    pub fn table_ops(&self) -> Result<RegistryStatus> {
        Ok(check_records(&self.inner.storage)?.0)
    }
}

/// Whether `e` says the storage failed (so nothing more should be tried now).
fn storage_failed(e: &Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Io
            | ErrorKind::Poisoned
            | ErrorKind::NoSpace
            | ErrorKind::Closed
            | ErrorKind::Fenced
    )
}
