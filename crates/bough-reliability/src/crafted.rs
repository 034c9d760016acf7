//! Crafted pages: checksum-valid pages with hostile contents.
//!
//! A bit flip is caught by the page checksum; a buggy writer or a crafted file is not. Each
//! trial here takes a built store, picks a page some state references — a mapping page
//! (radix node), an index page or a leaf — and rewrites it with hostile contents under a
//! *valid* checksum: a mapping node pointing at itself or an ancestor, claiming another
//! level, reaching past the id space or holding a slot no address decodes from; an index
//! page whose child is itself, its parent or an id nothing maps; a leaf whose restart slot
//! points outside the page or whose value points at overflow pages that are not there (or
//! are the leaf itself). Then, bounded in time and with panics caught:
//!
//! - every branch is read (a full scan and point lookups): exactly right, or `Corruption`;
//! - every branch is diffed against `main`: exactly the model's keys, or `Corruption`;
//! - the integrity checker, and for crafted mapping pages compaction, run without panicking
//!   and answer, or refuse with `Corruption`;
//! - GC succeeds or refuses with `Corruption`;
//! - then the page is put back and every branch must read exactly right: nothing a hostile
//!   page made the store do lost data.
//!
//! Only *structurally* hostile contents are crafted: a page that is well-formed and merely
//! says something else (another key's leaf, another subtree at the right level) cannot be
//! told from a real write by any reader, and is not what this class is about.
//!
//! Besides the workload's families, a *deep* partition holds enough pages (more than one
//! mapping page's fan-out) that its mapping table has interior nodes, so crafted levels and
//! pointers to ancestors are exercised on a real radix tree, and its key tree has index
//! pages.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::mpsc;

use bough::io::{MemoryStorage, OpenOptions, Storage};
use bough::{ErrorKind, ManualClock, Store, WriteBatch};
use bough_io::layout::{DataFileHeader, FRAME_HEADER_LEN, FileSalt, max_payload, seal_page};
use bough_manifest::{NO_PAGE, PageAddr, PageId, replay};
use bough_names::{FileKind, classify, classify_dir};
use bough_tree::cache::PageCache;
use bough_tree::files::FileTable;
use bough_tree::head::TreeSnapshot;
use bough_tree::mapping::{NodeSource, Slot};
use bough_tree::page::index::IndexNode;
use bough_tree::page::kind;
use bough_tree::page::leaf::{self, LeafView, ValueLoc};
use bough_tree::page::mapping::{MappingNode, fanout};

use crate::exec::{PAGE_SIZE, execute, read_branch};
use crate::power::{memory_options, schedule};
use crate::report::{Tally, guarded};
use crate::rng::Rng;
use crate::workload::{FamilyModel, State, TABLE, WorkloadConfig, state_diff};

mod payload;
mod subject;
mod trial;

use payload::*;
use subject::*;
use trial::*;

/// How many crafted pages.
#[derive(Debug, Clone, Copy)]
pub struct CraftConfig {
    /// The workload that builds the store.
    pub workload: WorkloadConfig,
    /// Trials on the workload's store.
    pub crafts: u64,
    /// Keys of the deep partition (0: none).
    pub deep_keys: u64,
    /// Trials on the deep partition.
    pub deep_crafts: u64,
    /// Longest a trial's checks may take before it counts as a hang.
    pub timeout_secs: u64,
    /// Worker threads.
    pub threads: usize,
}

impl CraftConfig {
    /// CI: 300 crafted pages, 30 of them in the deep partition.
    pub fn short() -> Self {
        CraftConfig {
            workload: WorkloadConfig {
                families: 2,
                ops_per_family: 50,
                keys: 40,
                max_branches: 5,
            },
            crafts: 270,
            deep_keys: 36_000,
            deep_crafts: 30,
            timeout_secs: 60,
            threads: 2,
        }
    }

    /// Long: 3,000 crafted pages.
    pub fn long() -> Self {
        CraftConfig {
            crafts: 2_500,
            deep_crafts: 500,
            ..Self::short()
        }
    }
}

/// What a crafted page says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Craft {
    /// A mapping node with a child slot pointing at itself.
    MappingSelf,
    /// A mapping node with a child slot pointing at its parent (itself when it is a root).
    MappingAncestor,
    /// A mapping node claiming another level.
    MappingLevel,
    /// A mapping node whose last slot lies past the id space.
    MappingOutOfRange,
    /// A mapping slot no value decodes from.
    MappingBadSlot,
    /// An index page with a child that is itself.
    IndexSelf,
    /// An index page with a child that is its parent (itself when it is a root).
    IndexAncestor,
    /// An index page with a child id nothing maps.
    IndexOutOfRange,
    /// A leaf whose first restart slot points past the page.
    LeafRestart,
    /// A leaf value pointing at overflow "pages" that are the leaf itself.
    LeafOverflowSelf,
    /// A leaf value pointing at overflow pages nothing maps.
    LeafOverflowOutOfRange,
}

const MAPPING_CRAFTS: [Craft; 5] = [
    Craft::MappingSelf,
    Craft::MappingAncestor,
    Craft::MappingLevel,
    Craft::MappingOutOfRange,
    Craft::MappingBadSlot,
];
const INDEX_CRAFTS: [Craft; 3] = [
    Craft::IndexSelf,
    Craft::IndexAncestor,
    Craft::IndexOutOfRange,
];
const LEAF_CRAFTS: [Craft; 3] = [
    Craft::LeafRestart,
    Craft::LeafOverflowSelf,
    Craft::LeafOverflowOutOfRange,
];

/// Runs the crafted pages.
pub fn run(seed: u64, cfg: &CraftConfig) -> Tally {
    let mut t = guarded("crafted pages", || {
        let mut tally = Tally::default();
        let mut subjects = Vec::new();
        match build_workload(seed, &cfg.workload) {
            Ok(s) => subjects.push((Arc::new(s), cfg.crafts)),
            Err(e) => tally.fail(format!("crafted pages (seed {seed}): {e}")),
        }
        if cfg.deep_keys > 0 {
            match build_deep(seed, cfg.workload.families, cfg.deep_keys) {
                Ok(s) => subjects.push((Arc::new(s), cfg.deep_crafts)),
                Err(e) => tally.fail(format!("crafted pages (seed {seed}, deep): {e}")),
            }
        }
        for (n, (subject, crafts)) in subjects.into_iter().enumerate() {
            eprintln!(
                "crafted pages: seed {seed}, store {n}: {} candidate pages; {crafts} crafts",
                subject.candidates.len()
            );
            tally.merge(&run_subject(seed, n as u64, subject, crafts, cfg));
            if !tally.ok() && tally.hangs > 0 {
                break;
            }
        }
        tally
    });
    // The class's own count of what it lost or falsified, for its row of the table.
    t.crafted_lost = t.lost;
    t.crafted_wrong = t.wrong;
    t
}

fn run_subject(seed: u64, n: u64, subject: Arc<Subject>, crafts: u64, cfg: &CraftConfig) -> Tally {
    let tally = Tally::default();
    let threads = cfg.threads.max(1) as u64;
    let (tx, rx) = mpsc::channel::<Tally>();
    let mut workers = Vec::new();
    for w in 0..threads {
        let (subject, tx) = (subject.clone(), tx.clone());
        workers.push(std::thread::spawn(move || {
            let mut i = w;
            while i < crafts {
                let t = guarded(&format!("craft {n}.{i}"), || {
                    one_craft(seed, n, i, &subject)
                });
                if tx.send(t).is_err() {
                    return;
                }
                i += threads;
            }
        }));
    }
    drop(tx);
    crate::report::gather_trials(tally, &rx, workers, crafts, cfg.timeout_secs, |secs| {
        format!("crafted pages (seed {seed}): no trial finished within {secs} s — a walk hangs")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 5652772323004974026 draws one deep key twice for `side`'s batch, which a batch
    /// refuses ("appears twice in one batch"): the store must still build.
    #[test]
    fn regression_the_deep_store_builds_when_its_draws_repeat_a_key() {
        let s = build_deep(5652772323004974026, 2, CraftConfig::short().deep_keys)
            .expect("the deep store builds");
        assert_eq!(s.branches.len(), 2);
        assert!(!s.candidates.is_empty());
    }
}
