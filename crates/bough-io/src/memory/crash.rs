//! Simulated power loss for [`super::MemoryStorage`]: what a crash keeps of each unsynced
//! write and directory change, drawn from a seed so every image can be rebuilt.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use super::{DirRef, FileData, MemDir, MemInode, Node, PendingWrite, SECTOR_SIZE};

/// What a simulated power loss keeps of the writes that were not synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CrashPolicy {
    /// Every unsynced write, and every unsynced directory change, is lost.
    #[default]
    DropAllUnsynced,
    /// Every unsynced write and directory change reached the media: what a process crash
    /// (the OS page cache survives) or a lucky power loss leaves.
    KeepAllUnsynced,
    /// Each unsynced write is independently kept, dropped, torn or garbled, and each
    /// unsynced directory change kept or undone, as a seeded generator draws them.
    Random(RandomCrash),
}

/// The odds of [`CrashPolicy::Random`]. Weights are relative: `keep = 1, drop = 1, tear = 0,
/// garble = 0` keeps half of the unsynced writes and drops the other half.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RandomCrash {
    /// Seed of the generator: one seed, one crash image (for the same namespace).
    pub seed: u64,
    /// Weight of "the write reached the media in full".
    pub keep: u32,
    /// Weight of "the write never reached the media".
    pub drop: u32,
    /// Weight of "each [`SECTOR_SIZE`] sector of the write is new or old at random".
    pub tear: u32,
    /// Weight of "the write's range holds random bytes".
    pub garble: u32,
    /// Percent (0..=100) of unsynced directory changes (creates, deletes, removals) that
    /// survive.
    pub dir_keep_percent: u8,
}

impl RandomCrash {
    /// Equal odds for keep, drop, tear and garble; half the directory changes survive.
    pub fn new(seed: u64) -> Self {
        RandomCrash {
            seed,
            keep: 1,
            drop: 1,
            tear: 1,
            garble: 1,
            dir_keep_percent: 50,
        }
    }

    /// Sets the relative weights of keep, drop, tear and garble (all zero means keep).
    pub fn weights(mut self, keep: u32, drop: u32, tear: u32, garble: u32) -> Self {
        self.keep = keep;
        self.drop = drop;
        self.tear = tear;
        self.garble = garble;
        self
    }

    /// Sets the percentage of unsynced directory changes that survive (capped at 100).
    pub fn dir_keep_percent(mut self, percent: u8) -> Self {
        self.dir_keep_percent = percent.min(100);
        self
    }
}

/// What a simulated power loss did to the unsynced state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// Unsynced writes (and length changes) that reached the media in full.
    pub writes_kept: u64,
    /// Unsynced writes that were lost.
    pub writes_dropped: u64,
    /// Unsynced writes torn at sector boundaries.
    pub writes_torn: u64,
    /// Unsynced writes replaced by random bytes.
    pub writes_garbled: u64,
    /// Unsynced directory changes that survived.
    pub dir_changes_kept: u64,
    /// Unsynced directory changes that were undone.
    pub dir_changes_dropped: u64,
}

impl CrashReport {
    /// Unsynced writes the crash decided about.
    pub fn unsynced_writes(&self) -> u64 {
        self.writes_kept + self.writes_dropped + self.writes_torn + self.writes_garbled
    }

    /// Adds another report's counts to this one.
    pub fn add(&mut self, other: &CrashReport) {
        self.writes_kept += other.writes_kept;
        self.writes_dropped += other.writes_dropped;
        self.writes_torn += other.writes_torn;
        self.writes_garbled += other.writes_garbled;
        self.dir_changes_kept += other.dir_changes_kept;
        self.dir_changes_dropped += other.dir_changes_dropped;
    }
}

/// The namespace a power loss now would leave under `policy`.
pub(super) fn crash_image(root: &DirRef, policy: CrashPolicy) -> (DirRef, CrashReport) {
    let mut crash = Crash {
        policy,
        rng: SplitMix(match policy {
            CrashPolicy::Random(r) => r.seed,
            _ => 0,
        }),
        report: CrashReport::default(),
        done: HashMap::new(),
    };
    let image = crash.dir(root);
    (image, crash.report)
}

/// One simulated power loss being decided, directory by directory (in name order, so a seed
/// always gives the same image of the same namespace).
struct Crash {
    policy: CrashPolicy,
    rng: SplitMix,
    report: CrashReport,
    /// Files already decided (by inode), so a file reached twice gets one fate.
    done: HashMap<usize, Arc<MemInode>>,
}

/// What happens to one unsynced write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Keep,
    Drop,
    Tear,
    Garble,
}

impl Crash {
    fn keeps_dir_change(&mut self) -> bool {
        let keep = match self.policy {
            CrashPolicy::DropAllUnsynced => false,
            CrashPolicy::KeepAllUnsynced => true,
            CrashPolicy::Random(r) => self.rng.below(100) < u64::from(r.dir_keep_percent),
        };
        if keep {
            self.report.dir_changes_kept += 1;
        } else {
            self.report.dir_changes_dropped += 1;
        }
        keep
    }

    fn fate(&mut self) -> Fate {
        let fate = match self.policy {
            CrashPolicy::DropAllUnsynced => Fate::Drop,
            CrashPolicy::KeepAllUnsynced => Fate::Keep,
            CrashPolicy::Random(r) => {
                let weights = [
                    (Fate::Keep, r.keep),
                    (Fate::Drop, r.drop),
                    (Fate::Tear, r.tear),
                    (Fate::Garble, r.garble),
                ];
                let total: u64 = weights.iter().map(|(_, w)| u64::from(*w)).sum();
                if total == 0 {
                    Fate::Keep
                } else {
                    let mut pick = self.rng.below(total);
                    let mut chosen = Fate::Keep;
                    for (f, w) in weights {
                        if pick < u64::from(w) {
                            chosen = f;
                            break;
                        }
                        pick -= u64::from(w);
                    }
                    chosen
                }
            }
        };
        match fate {
            Fate::Keep => self.report.writes_kept += 1,
            Fate::Drop => self.report.writes_dropped += 1,
            Fate::Tear => self.report.writes_torn += 1,
            Fate::Garble => self.report.writes_garbled += 1,
        }
        fate
    }

    fn dir(&mut self, dir: &DirRef) -> DirRef {
        let g = dir.lock();
        let names: BTreeSet<&String> = g.current.keys().chain(g.durable.keys()).collect();
        let mut entries = BTreeMap::new();
        for name in names {
            let (current, durable) = (g.current.get(name), g.durable.get(name));
            let chosen = match (current, durable) {
                (Some(c), Some(d)) if same_node(c, d) => Some(c),
                _ if self.keeps_dir_change() => current,
                _ => durable,
            };
            let node = match chosen {
                Some(Node::File(inode)) => Node::File(self.file(inode)),
                Some(Node::Dir(d)) => Node::Dir(self.dir(d)),
                None => continue,
            };
            entries.insert(name.clone(), node);
        }
        Arc::new(Mutex::new(MemDir {
            current: entries.clone(),
            durable: entries,
            removed: false,
        }))
    }

    fn file(&mut self, inode: &Arc<MemInode>) -> Arc<MemInode> {
        let key = Arc::as_ptr(inode) as usize;
        if let Some(done) = self.done.get(&key) {
            return done.clone();
        }
        let data = inode.data.read();
        let mut bytes = data.durable.clone();
        for w in &data.pending {
            let fate = self.fate();
            match (w, fate) {
                (_, Fate::Drop) => {}
                (PendingWrite::SetLen(len), _) => bytes.resize(*len, 0),
                (PendingWrite::Write { offset, data }, Fate::Keep) => {
                    put(&mut bytes, *offset, data);
                }
                (PendingWrite::Write { offset, data }, Fate::Tear) => {
                    let end = offset + data.len();
                    let mut start = *offset;
                    while start < end {
                        let sector_end = ((start as u64 / SECTOR_SIZE + 1) * SECTOR_SIZE) as usize;
                        let stop = sector_end.min(end);
                        if bytes.len() < stop {
                            bytes.resize(stop, 0);
                        }
                        if self.rng.below(2) == 0 {
                            let src = data.get(start - offset..stop - offset);
                            if let (Some(dst), Some(src)) = (bytes.get_mut(start..stop), src) {
                                dst.copy_from_slice(src);
                            }
                        }
                        start = stop;
                    }
                }
                (PendingWrite::Write { offset, data }, Fate::Garble) => {
                    let garbage: Vec<u8> = (0..data.len()).map(|_| self.rng.next() as u8).collect();
                    put(&mut bytes, *offset, &garbage);
                }
            }
        }
        drop(data);
        let out = Arc::new(MemInode {
            data: RwLock::new(FileData::holding(bytes)),
        });
        self.done.insert(key, out.clone());
        out
    }
}

fn same_node(a: &Node, b: &Node) -> bool {
    match (a, b) {
        (Node::File(x), Node::File(y)) => Arc::ptr_eq(x, y),
        (Node::Dir(x), Node::Dir(y)) => Arc::ptr_eq(x, y),
        _ => false,
    }
}

/// Writes `data` at `offset`, growing `bytes` with zeros as needed.
fn put(bytes: &mut Vec<u8>, offset: usize, data: &[u8]) {
    let end = offset + data.len();
    if bytes.len() < end {
        bytes.resize(end, 0);
    }
    if let Some(dst) = bytes.get_mut(offset..end) {
        dst.copy_from_slice(data);
    }
}

/// SplitMix64: small, seedable, good enough to draw crash outcomes.
#[derive(Debug, Clone)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}
