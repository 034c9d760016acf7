//! The measuring walk: every page a state reaches, file by file, with who holds it (the pass
//! GC's marking and space per branch share).

use super::*;
use crate::error::{GcError, GcResult};

/// Who holds a file, while the walk runs: indexes into [`Track::referents`].
/// Page-level bookkeeping of a measuring walk.
#[derive(Debug, Default)]
pub(crate) struct Track {
    /// Data file name → index into `files`.
    pub(crate) ids: HashMap<String, u32>,
    pub(crate) files: Vec<FileAcc>,
    pub(crate) referents: Vec<Holder>,
    /// The durable referent being walked (`None` while walking reader snapshots).
    pub(crate) current: Option<u32>,
    /// Log file name → the referents whose `LOG` references name it (ascending).
    pub(crate) logs: BTreeMap<String, Vec<u32>>,
}

#[derive(Debug)]
pub(crate) struct FileAcc {
    pub(crate) name: String,
    /// One bit per page index: referenced by something.
    pub(crate) pages: Vec<u64>,
    pub(crate) live: u64,
    /// Indexes into `referents`, ascending (referents are walked one after the other).
    pub(crate) held: Vec<u32>,
    pub(crate) read: bool,
}

impl Track {
    pub(crate) fn file(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.ids.get(name) {
            return i;
        }
        let i = self.files.len() as u32;
        self.files.push(FileAcc {
            name: name.to_string(),
            pages: Vec::new(),
            live: 0,
            held: Vec::new(),
            read: false,
        });
        self.ids.insert(name.to_string(), i);
        i
    }

    /// Records that the current referent reaches a page of file `f`.
    pub(crate) fn hold(&mut self, f: u32) {
        // `f` comes from `file`, which only hands out ids of entries it pushed.
        let Some(acc) = self.files.get_mut(f as usize) else {
            return;
        };
        match self.current {
            None => acc.read = true,
            Some(r) => {
                if acc.held.last() != Some(&r) {
                    acc.held.push(r);
                }
            }
        }
    }

    /// Records that the current referent's `LOG` references name log file `name`.
    pub(crate) fn hold_log(&mut self, name: &str) {
        let Some(r) = self.current else {
            return;
        };
        let held = self.logs.entry(name.to_string()).or_default();
        if held.last() != Some(&r) {
            held.push(r);
        }
    }

    pub(crate) fn page(&mut self, name: &str, index: u32) -> u32 {
        let f = self.file(name);
        if let Some(acc) = self.files.get_mut(f as usize) {
            // Page indexes are below 2^24, so a file's bitmap is at most 2 MiB.
            let (word, bit) = ((index / 64) as usize, index % 64);
            if acc.pages.len() <= word {
                acc.pages.resize(word + 1, 0);
            }
            if let Some(bits) = acc.pages.get_mut(word)
                && *bits & (1 << bit) == 0
            {
                *bits |= 1 << bit;
                acc.live += 1;
            }
        }
        self.hold(f);
        f
    }

    pub(crate) fn finish(
        self,
        page_size: u32,
    ) -> (BTreeMap<String, FileUsage>, LogHolders, Vec<Holder>) {
        let referents = self.referents;
        let files = self
            .files
            .into_iter()
            .map(|acc| {
                let holders = match acc.held.as_slice() {
                    [] => Holders::None,
                    [r] => referents
                        .get(*r as usize)
                        .map_or(Holders::Many, |h| Holders::One(h.referent.clone())),
                    _ => Holders::Many,
                };
                let usage = FileUsage {
                    live_pages: acc.live,
                    live_bytes: acc.live * u64::from(page_size),
                    holders,
                    read_by_snapshot: acc.read,
                    held_by: acc.held,
                };
                (acc.name, usage)
            })
            .collect();
        (files, self.logs, referents)
    }
}

/// What every node of one state's mapping walk shares.
#[derive(Clone, Copy)]
pub(crate) struct State<'s> {
    pub(crate) ranges: &'s BranchFileMapping,
    pub(crate) shadow: &'s Shadow,
    /// The manifest or archive walked (for error messages).
    pub(crate) by: &'s str,
    pub(crate) why: &'s KeepReason,
    /// Mapping pages of this tree walked so far (each may be reached once).
    pub(crate) seen: &'s std::cell::RefCell<HashSet<u64>>,
}

/// A mapping node to walk: its address, the first chunk it covers, the level it must have.
#[derive(Clone, Copy)]
pub(crate) struct NodeAt {
    pub(crate) addr: PageAddr,
    pub(crate) first_chunk: u64,
    pub(crate) level: Option<u8>,
}

pub(crate) fn addr_at(addr: PageAddr, first_chunk: u64, level: Option<u8>) -> NodeAt {
    NodeAt {
        addr,
        first_chunk,
        level,
    }
}

/// Reachability over one partition directory.
pub(crate) struct Walk<'a> {
    pub(crate) files: &'a FileTable,
    pub(crate) fanout: usize,
    /// Mapping nodes walked in full, with (when measuring) the data files their subtree
    /// reaches, so a state that shares the node is credited as a holder of those files
    /// without walking it again.
    pub(crate) visited: HashMap<(String, u32), Box<[u32]>>,
    pub(crate) referenced: HashMap<String, KeepReason>,
    pub(crate) track: Option<Track>,
}

/// How the marking walk labels a reader's snapshot (it is no file).
pub(crate) const READER: &str = "<reader>";

impl Walk<'_> {
    /// What a state is called in errors: its manifest or archive, or a reader's snapshot.
    fn holder(&self, by: &str) -> String {
        match by {
            READER => format!("a reader's snapshot of {}", self.files.dir()),
            _ => format!("{}/{by}", self.files.dir()),
        }
    }

    pub(crate) fn name(
        &self,
        ranges: &BranchFileMapping,
        addr: PageAddr,
        by: &str,
    ) -> GcResult<String> {
        self.files
            .resolve(ranges, addr.file_id())
            .map(|n| n.to_string())
            .map_err(|_| GcError::State {
                file: self.holder(by),
                what: format!("page {addr} lies in a file id no branch file range covers"),
            })
    }

    /// Marks a page referenced; when measuring, returns its file's index.
    pub(crate) fn mark(&mut self, name: &str, index: u32, why: &KeepReason) -> Option<u32> {
        if !self.referenced.contains_key(name) {
            self.referenced.insert(name.to_string(), why.clone());
        }
        self.track.as_mut().map(|t| t.page(name, index))
    }

    /// Starts walking the states of `referent` (`None`: a reader snapshot).
    /// Records that the referent being walked names these log files.
    pub(crate) fn hold_logs(&mut self, names: &[String]) {
        if let Some(t) = &mut self.track {
            for n in names {
                t.hold_log(n);
            }
        }
    }

    pub(crate) fn begin(&mut self, referent: Option<Holder>) {
        if let Some(t) = &mut self.track {
            t.current = referent.map(|r| {
                t.referents.push(r);
                (t.referents.len() - 1) as u32
            });
        }
    }

    /// Marks the page slot `raw` maps to; `node` is the mapping page holding the slot
    /// (`None`: a manifest's overlay or a reader's changed chunk), for errors.
    pub(crate) fn slot(
        &mut self,
        ranges: &BranchFileMapping,
        raw: u64,
        node: Option<PageAddr>,
        by: &str,
        why: &KeepReason,
    ) -> GcResult<Option<u32>> {
        match Slot::decode(raw) {
            Some(Slot::Page(a)) if !a.is_none() => {
                let n = self.name(ranges, a, by)?;
                Ok(self.mark(&n, a.page_index(), why))
            }
            Some(_) => Ok(None),
            None => {
                let what = format!("invalid mapping slot {raw:#x} (in the state of {by})");
                Err(match node {
                    Some(addr) => {
                        let (file, offset) = self.files.locate(ranges, addr);
                        GcError::Page { file, offset, what }
                    }
                    None => GcError::State {
                        file: self.holder(by),
                        what,
                    },
                })
            }
        }
    }

    /// Marks every page reachable from a mapping root (and the root's pages themselves),
    /// except slots `shadow` says were overwritten since (a manifest's overlay, a reader's
    /// dirty chunks): the page such a slot pointed to is garbage for this state.
    pub(crate) fn radix(
        &mut self,
        ranges: &BranchFileMapping,
        root: PageAddr,
        shadow: &Shadow,
        by: &str,
        why: &KeepReason,
    ) -> GcResult<()> {
        if root.is_none() {
            return Ok(());
        }
        let seen = std::cell::RefCell::new(HashSet::new());
        let state = State {
            ranges,
            shadow,
            by,
            why,
            seen: &seen,
        };
        let mut reached = Vec::new();
        self.node(&state, addr_at(root, 0, None), &mut reached)
    }

    /// Walks the mapping node `at.addr`, which covers chunks from `at.first_chunk` and must
    /// be at `at.level` (the root's level is free). Adds the files its subtree reaches to
    /// `reached` when measuring. Every step follows the mapping walk's rules
    /// ([`bough_tree::mapping::Radix`]): levels strictly decrease from at most 8, so the
    /// recursion depth is at most 9; child positions are checked arithmetic within the id
    /// space; a page reached twice in one tree is refused.
    pub(crate) fn node(
        &mut self,
        st: &State<'_>,
        at: NodeAt,
        reached: &mut Vec<u32>,
    ) -> GcResult<()> {
        let State {
            ranges,
            shadow,
            by,
            why,
            seen,
        } = *st;
        let NodeAt {
            addr,
            first_chunk,
            level,
        } = at;
        let files = self.files;
        let bad = |what: String| {
            let (file, offset) = files.locate(ranges, addr);
            GcError::Page {
                file,
                offset,
                what: format!("{what} (in the state of {by})"),
            }
        };
        if !seen.borrow_mut().insert(addr.to_u64()) {
            return Err(bad(
                "mapping page reached twice in one tree (a cycle or a shared subtree)".into(),
            ));
        }
        let name = self.name(ranges, addr, by)?;
        let key = (name, addr.page_index());
        // A node another state walked in full already had all it reaches marked; only who
        // holds those files is new.
        if let Some(files) = self.visited.get(&key) {
            if let Some(t) = &mut self.track {
                for &f in files.iter() {
                    t.hold(f);
                }
                reached.extend_from_slice(files);
            }
            return Ok(());
        }
        let node = match self.files.read(ranges, addr)? {
            CachedPage::Mapping(m) => m,
            CachedPage::Tree(_) => {
                return Err(bad(
                    "a mapping root or child points at a tree page".to_string()
                ));
            }
        };
        let radix = Radix::new(self.fanout);
        let level = radix.check(level, &node).map_err(bad)?;
        let mut below: Vec<u32> = Vec::new();
        below.extend(self.mark(&key.0, key.1, why));
        // A span past u64 covers every chunk there is: saturating is exact for the shadow.
        let span = radix.span(level).unwrap_or(u64::MAX);
        if level == 0 {
            for (i, &raw) in node.slots.iter().enumerate() {
                if raw != 0 && !shadow.hides(first_chunk, i) {
                    below.extend(self.slot(ranges, raw, Some(addr), by, why)?);
                }
            }
        } else {
            let pos = NodePos {
                addr,
                level,
                first_chunk,
            };
            for (i, &child) in node.slots.iter().enumerate() {
                if let Some(c) = radix.child(pos, i, child).map_err(bad)? {
                    self.node(
                        st,
                        addr_at(c.addr, c.first_chunk, Some(c.level)),
                        &mut below,
                    )?;
                }
            }
        }
        below.sort_unstable();
        below.dedup();
        // Only a node nothing shadows counts as walked in full for other states.
        if !shadow.touches(first_chunk, first_chunk.saturating_add(span)) {
            self.visited.insert(key, below.clone().into_boxed_slice());
        }
        reached.extend_from_slice(&below);
        Ok(())
    }
}

/// Slots of the on-disk mapping that a state has overwritten since its last checkpoint.
#[derive(Debug, Default)]
pub(crate) struct Shadow {
    /// chunk → overwritten slot indexes (`None`: the whole chunk is replaced).
    pub(crate) chunks: BTreeMap<u64, Option<HashSet<usize>>>,
}

impl Shadow {
    pub(crate) fn from_overlay(ids: impl Iterator<Item = u32>, fanout: usize) -> Shadow {
        let mut chunks: BTreeMap<u64, Option<HashSet<usize>>> = BTreeMap::new();
        for id in ids {
            let c = u64::from(id) / fanout as u64;
            if let Some(set) = chunks.entry(c).or_insert_with(|| Some(HashSet::new())) {
                set.insert(id as usize % fanout);
            }
        }
        Shadow { chunks }
    }

    pub(crate) fn whole_chunks(chunks: impl Iterator<Item = u32>) -> Shadow {
        Shadow {
            chunks: chunks.map(|c| (u64::from(c), None)).collect(),
        }
    }

    pub(crate) fn touches(&self, from: u64, to: u64) -> bool {
        self.chunks.range(from..to).next().is_some()
    }

    pub(crate) fn hides(&self, chunk: u64, slot: usize) -> bool {
        match self.chunks.get(&chunk) {
            Some(None) => true,
            Some(Some(set)) => set.contains(&slot),
            None => false,
        }
    }
}
