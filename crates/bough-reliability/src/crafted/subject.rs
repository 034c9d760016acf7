//! The stores crafted pages go into: a workload's partitions and a deep partition with
//! interior mapping nodes and index pages, and the pages of each that some state references.

use super::*;

/// What a page is, as far as crafting needs to know.
#[derive(Debug, Clone)]
pub(crate) enum Role {
    /// A mapping node: its address, level and parent node.
    Mapping {
        addr: PageAddr,
        level: u8,
        parent: Option<PageAddr>,
    },
    /// A key-tree page (index or leaf): its logical id and parent index page.
    Tree { id: PageId, parent: Option<PageId> },
}

/// A page some state references.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub(super) path: String,
    pub(super) index: u32,
    pub(super) kind: u8,
    pub(super) salt: FileSalt,
    pub(super) payload: Vec<u8>,
    pub(super) role: Role,
}

/// A built store and what it must hold.
pub(crate) struct Subject {
    pub(super) image: MemoryStorage,
    /// (family, branch) → state.
    pub(super) branches: BTreeMap<(u32, String), State>,
    pub(super) candidates: Vec<Candidate>,
    /// Files GC may delete (nothing references them).
    pub(super) collectable: BTreeSet<String>,
    /// Whether reads check every key by a point lookup (else a sample).
    pub(super) every_get: bool,
}

pub(crate) fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The workload's store (the bit-flip class builds the same).
pub(crate) fn build_workload(seed: u64, cfg: &WorkloadConfig) -> Result<Subject, String> {
    let mem = MemoryStorage::new();
    let clock = ManualClock::new(1_000_000);
    let store = Store::open(memory_options(mem.clone(), &clock)).map_err(err)?;
    let mut models: Vec<FamilyModel> = (0..cfg.families).map(FamilyModel::new).collect();
    for f in schedule(seed, cfg) {
        let m = &mut models[f as usize];
        let op = m.next_op(seed, cfg);
        clock.advance(1);
        execute(&store, seed, f, m.applied, &op)
            .map_err(|e| format!("building: {} failed: {e}", op.kind()))?;
        m.apply(seed, &op);
    }
    store.close().map_err(err)?;
    let mut branches = BTreeMap::new();
    for m in &models {
        for (b, bm) in &m.branches {
            branches.insert((m.family, b.clone()), bm.state.clone());
        }
    }
    finish(mem.clone_durable(), branches, true)
}

/// A partition big enough for interior mapping nodes and index pages: `main` with `keys`
/// keys, and `side` forked from it with a few changes (so the two share most pages).
pub(crate) fn build_deep(seed: u64, family: u32, keys: u64) -> Result<Subject, String> {
    let mem = MemoryStorage::new();
    let clock = ManualClock::new(1_000_000);
    let store = Store::open(memory_options(mem.clone(), &clock)).map_err(err)?;
    let part = store.partition(TABLE, family).map_err(err)?;
    let main = part.branch("main").map_err(err)?;
    let key = |i: u64| format!("deep{i:08}").into_bytes();
    let value = |i: u64, tag: &str| format!("{tag}-{i:08}-{}", "v".repeat((i % 23) as usize));
    let mut state = BTreeMap::new();
    let mut i = 0;
    while i < keys {
        let mut b = WriteBatch::new();
        for j in i..(i + 5_000).min(keys) {
            b.put(key(j), value(j, "main"));
            state.insert(key(j), Arc::from(value(j, "main").into_bytes()));
        }
        main.write_blocking(b).map_err(err)?;
        i += 5_000;
    }
    let side = part.create_branch("side", "main").map_err(err)?;
    let mut side_state = state.clone();
    let mut r = Rng::derive(seed, &[0x4450]);
    // A batch holds each key once: 200 draws, the last one for a key decides.
    let mut changes: BTreeMap<u64, bool> = BTreeMap::new();
    for _ in 0..200 {
        let j = r.below(keys.max(1));
        changes.insert(j, r.chance(20));
    }
    let mut b = WriteBatch::new();
    for (j, delete) in changes {
        if delete {
            b.delete(key(j));
            side_state.remove(&key(j));
        } else {
            b.put(key(j), value(j, "side"));
            side_state.insert(key(j), Arc::from(value(j, "side").into_bytes()));
        }
    }
    side.write_blocking(b).map_err(err)?;
    drop((main, side, part));
    store.close().map_err(err)?;
    let mut branches = BTreeMap::new();
    branches.insert((family, "main".to_string()), Arc::new(state));
    branches.insert((family, "side".to_string()), Arc::new(side_state));
    finish(mem.clone_durable(), branches, false)
}

/// Finds the candidate pages and what GC may delete.
pub(crate) fn finish(
    image: MemoryStorage,
    branches: BTreeMap<(u32, String), State>,
    every_get: bool,
) -> Result<Subject, String> {
    let clock = ManualClock::new(1_000_000);
    let mut collectable = BTreeSet::new();
    let reopened = Store::open(memory_options(image.clone_durable(), &clock)).map_err(err)?;
    let families: BTreeSet<u32> = branches.keys().map(|(f, _)| *f).collect();
    for &f in &families {
        let p = reopened.partition(TABLE, f).map_err(err)?;
        for (name, _) in p.gc_dry_run().map_err(err)?.deleted {
            collectable.insert(format!("{}/{name}", p.dir()));
        }
    }
    reopened.close().map_err(err)?;
    let storage: Arc<dyn Storage> = Arc::new(image.clone());
    let mut candidates = Vec::new();
    let mut seen = BTreeSet::new();
    for d in image.list_dirs().map_err(err)? {
        if classify_dir(&d).is_none() {
            continue;
        }
        let files = Arc::new(FileTable::new(
            storage.clone(),
            d.clone(),
            PAGE_SIZE,
            Arc::new(PageCache::new(1 << 20)),
            false,
        ));
        for n in image.list(&d).map_err(err)? {
            if !matches!(classify(&n), FileKind::Manifest(_)) {
                continue;
            }
            let bytes = image.read_file(&format!("{d}/{n}"), 1 << 30).map_err(err)?;
            let state = replay(&bytes).map_err(|e| format!("{d}/{n}: {e:?}"))?.state;
            let snap = TreeSnapshot::from_record(files.clone(), &state.to_snapshot())
                .map_err(|e| format!("{d}/{n}: {e}"))?;
            pages_of(&image, &files, &snap, &mut seen, &mut candidates)
                .map_err(|e| format!("{d}/{n}: {e}"))?;
        }
    }
    Ok(Subject {
        image,
        branches,
        candidates,
        collectable,
        every_get,
    })
}

/// Adds every page `snap` references that a craft applies to (mapping pages, index pages,
/// key-tree leaves), with its role.
pub(crate) fn pages_of(
    image: &MemoryStorage,
    files: &FileTable,
    snap: &TreeSnapshot,
    seen: &mut BTreeSet<(String, u32)>,
    out: &mut Vec<Candidate>,
) -> Result<(), String> {
    let mut ids: Vec<(PageId, PageAddr)> = Vec::new();
    snap.mapping
        .for_each_slot(snap, &mut |id, raw| {
            if let Some(Slot::Page(a)) = Slot::decode(raw) {
                ids.push((id, a));
            }
        })
        .map_err(err)?;
    let mut nodes: Vec<PageAddr> = Vec::new();
    snap.mapping
        .for_each_node_addr(snap, &mut |a| nodes.push(a))
        .map_err(err)?;
    // Parents: of mapping nodes by address, of tree pages by logical id.
    let mut node_parent: HashMap<PageAddr, PageAddr> = HashMap::new();
    for &a in &nodes {
        let n = snap.mapping_node(a).map_err(err)?;
        if n.level > 0 {
            for &c in &n.slots {
                if let Some(c) = PageAddr::from_u64(c).filter(|c| !c.is_none()) {
                    node_parent.insert(c, a);
                }
            }
        }
    }
    let mut raw_pages: Vec<(PageAddr, Role, u8, Vec<u8>, String)> = Vec::new();
    let mut tree_parent: HashMap<PageId, PageId> = HashMap::new();
    for &(id, a) in &ids {
        let h = files.handle(&snap.ranges, a.file_id()).map_err(err)?;
        let (k, payload, _) = files.read_raw(&h, a.page_index()).map_err(err)?;
        if k == kind::INDEX {
            let n = IndexNode::decode(&payload).map_err(err)?;
            for &c in &n.children {
                tree_parent.insert(c, id);
            }
        }
        if k == kind::INDEX || k == kind::LEAF {
            raw_pages.push((
                a,
                Role::Tree { id, parent: None },
                k,
                payload,
                h.path.clone(),
            ));
        }
    }
    for &a in &nodes {
        let h = files.handle(&snap.ranges, a.file_id()).map_err(err)?;
        let (k, payload, _) = files.read_raw(&h, a.page_index()).map_err(err)?;
        let level = snap.mapping_node(a).map_err(err)?.level;
        let role = Role::Mapping {
            addr: a,
            level,
            parent: node_parent.get(&a).copied(),
        };
        raw_pages.push((a, role, k, payload, h.path.clone()));
    }
    for (a, mut role, k, payload, path) in raw_pages {
        if !seen.insert((path.clone(), a.page_index())) {
            continue;
        }
        if let Role::Tree { id, parent } = &mut role {
            *parent = tree_parent.get(id).copied();
        }
        out.push(Candidate {
            salt: file_salt(image, &path)?,
            path,
            index: a.page_index(),
            kind: k,
            payload,
            role,
        });
    }
    Ok(())
}

pub(crate) fn file_salt(image: &MemoryStorage, path: &str) -> Result<FileSalt, String> {
    let f = image.open(path, OpenOptions::read()).map_err(err)?;
    let mut page = vec![0u8; PAGE_SIZE as usize];
    f.read_at(0, &mut page).map_err(err)?;
    Ok(DataFileHeader::decode(&page, path).map_err(err)?.salt())
}
