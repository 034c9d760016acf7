//! Read-only access to one partition directory: its manifests and archives replayed, the
//! snapshots they hold (heads, archives, merge bases), and the pages each snapshot
//! references. Nothing here writes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use bough_io::{IoResult, Storage};
use bough_manifest::{ManifestState, PageAddr, Replayed, Snapshot, merge_bases, replay};
use bough_names::{DataFileName, FileKind, classify};
use bough_tree::cache::PageCache;
use bough_tree::files::FileTable;
use bough_tree::head::TreeSnapshot;

use super::findings::Referent;

/// Largest manifest the check reads whole (the engine's own limit).
pub const MAX_MANIFEST_BYTES: u64 = bough_tree::head::MAX_MANIFEST_BYTES;

/// Page cache the check reads through: small, it should read from storage.
const CHECK_CACHE_BYTES: usize = 1 << 20;

/// Why a manifest or archive did not replay.
///
/// ```
/// use bough::check::replay_manifest;
/// use bough::io::{MemoryStorage, Storage};
///
/// let mem = MemoryStorage::new();
/// mem.create_dir("t.0")?;
/// mem.write_atomic("t.0/manifest_main_0", &[0u8; 100])?;
/// let failure = replay_manifest(&mem, "t.0/manifest_main_0").unwrap_err();
/// println!("at {:?}: {}", failure.offset, failure.message);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayFailure {
    /// Where in the file, when it was read and a record is bad.
    pub offset: Option<u64>,
    /// The whole message, naming the file.
    pub message: String,
}

impl std::fmt::Display for ReplayFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// One partition directory opened for reading.
///
/// ```
/// use std::sync::Arc;
/// use bough::io::{MemoryStorage, Storage};
/// use bough::{Options, Store};
///
/// let mem = MemoryStorage::new();
/// let store = Store::builder(Options::in_memory()).memory(mem.clone()).open()?;
/// let main = store.partition("orders", 0)?.branch("main")?;
/// main.put_blocking("a", "1")?;
/// main.checkpoint_blocking()?;
/// let storage: Arc<dyn Storage> = Arc::new(mem);
/// use bough::check::PartitionFiles;
/// let files = PartitionFiles::open(&storage, "orders.0")?;
/// assert!(files.manifests.iter().all(|(_, replayed)| replayed.is_ok()));
/// assert!(files.state("manifest_main_0").is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct PartitionFiles {
    /// `table.partition`.
    pub dir: String,
    /// The directory listing, classified.
    pub names: Vec<(String, FileKind)>,
    /// Data files through the engine's page reader.
    pub files: Arc<FileTable>,
    /// Every manifest and archive, replayed (or why not).
    pub manifests: Vec<(String, Result<Replayed, ReplayFailure>)>,
}

impl std::fmt::Debug for PartitionFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionFiles")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// A snapshot some manifest holds: its head state, or a merge base recorded in it.
///
/// ```
/// use std::sync::Arc;
/// use bough::io::{MemoryStorage, Storage};
/// use bough::{Options, Store};
///
/// let mem = MemoryStorage::new();
/// let store = Store::builder(Options::in_memory()).memory(mem.clone()).open()?;
/// let main = store.partition("orders", 0)?.branch("main")?;
/// main.put_blocking("a", "1")?;
/// main.checkpoint_blocking()?;
/// let storage: Arc<dyn Storage> = Arc::new(mem);
/// use bough::check::PartitionFiles;
/// let (held, _) = PartitionFiles::open(&storage, "orders.0")?.held();
/// for h in &held {
///     println!("{} holds root {:?}", h.label, h.snapshot.meta.root);
/// }
/// assert!(!held.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Held {
    /// What holds it: `manifest_main_0`, or `manifest_main_0 (merge base with feature)`.
    pub label: String,
    /// Who holds it, as a user names it.
    pub referent: Referent,
    /// The state.
    pub snapshot: Snapshot,
}

impl Held {
    /// The manifest or archive file holding it.
    pub fn file(&self) -> &str {
        self.referent.file()
    }
}

/// The head referent of a manifest or archive file.
fn head_referent(name: &str) -> Referent {
    match classify(name) {
        FileKind::Archive(a) => Referent::Archive {
            branch: a.branch.to_string(),
            timestamp: a.timestamp,
            file: name.to_string(),
        },
        FileKind::Manifest(m) => Referent::Branch {
            branch: m.branch.to_string(),
            manifest: name.to_string(),
        },
        FileKind::History(h) => Referent::History {
            branch: h.branch.to_string(),
            stamp: h.stamp,
            file: name.to_string(),
        },
        FileKind::Tag(t) => Referent::Tag {
            tag: t.tag.to_string(),
            file: name.to_string(),
        },
        // Only manifests, archives and tags are replayed.
        _ => Referent::Branch {
            branch: name.to_string(),
            manifest: name.to_string(),
        },
    }
}

impl PartitionFiles {
    /// Lists and replays partition `dir`.
    pub fn open(storage: &Arc<dyn Storage>, dir: &str) -> IoResult<PartitionFiles> {
        let names: Vec<(String, FileKind)> = storage
            .list(dir)?
            .into_iter()
            .map(|n| {
                let k = classify(&n);
                (n, k)
            })
            .collect();
        let mut manifests = Vec::new();
        let mut page_size = None;
        let mut vanished = Vec::new();
        for (n, k) in &names {
            // A tag is one snapshot record in the manifest format, like an archive.
            if matches!(
                k,
                FileKind::Manifest(_)
                    | FileKind::Archive(_)
                    | FileKind::History(_)
                    | FileKind::Tag(_)
            ) {
                let path = format!("{dir}/{n}");
                // Listed, then gone before it was read: a writer removed it (a manifest of
                // an older term, a pruned archive, a deleted tag). Not damage: it is left
                // out as if never listed, so a CURRENT_TERM that still names it is reported
                // as a missing manifest.
                if let Err(e) = storage.file_len(&path)
                    && e.kind() == bough_io::ErrorKind::NotFound
                {
                    vanished.push(n.clone());
                    continue;
                }
                let r = replay_manifest(storage.as_ref(), &path);
                if let Ok(s) = &r {
                    page_size.get_or_insert(s.state.page_size);
                }
                manifests.push((n.clone(), r));
            }
        }
        let names: Vec<(String, FileKind)> = names
            .into_iter()
            .filter(|(n, _)| !vanished.contains(n))
            .collect();
        let files = Arc::new(FileTable::new(
            storage.clone(),
            dir.to_string(),
            page_size.unwrap_or(bough_io::MIN_PAGE_SIZE),
            Arc::new(PageCache::new(CHECK_CACHE_BYTES)),
            false,
        ));
        Ok(PartitionFiles {
            dir: dir.to_string(),
            names,
            files,
            manifests,
        })
    }

    /// The replayed state of manifest or archive `name`, if it replayed.
    pub fn state(&self, name: &str) -> Option<&ManifestState> {
        self.manifests
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, r)| r.as_ref().ok())
            .map(|r| &r.state)
    }

    /// Every snapshot the manifests and archives hold, with the merge bases recorded in
    /// them. Errors decoding merge bases come back as (file, message).
    pub fn held(&self) -> (Vec<Held>, Vec<(String, String)>) {
        let mut out = Vec::new();
        let mut errors = Vec::new();
        for (name, r) in &self.manifests {
            let Ok(r) = r else { continue };
            let state = &r.state;
            let head = head_referent(name);
            let branch = match &head {
                Referent::Branch { branch, .. }
                | Referent::Archive { branch, .. }
                | Referent::History { branch, .. } => branch.clone(),
                Referent::MergeBase { branch, .. } => branch.clone(),
                Referent::Tag { tag, .. } => tag.clone(),
            };
            out.push(Held {
                label: name.clone(),
                referent: head,
                snapshot: state.to_snapshot(),
            });
            match merge_bases(&state.extensions) {
                Ok(bases) => {
                    for b in bases {
                        out.push(Held {
                            label: format!("{name} (merge base with {})", b.branch),
                            referent: Referent::MergeBase {
                                branch: branch.clone(),
                                other: b.branch.to_string(),
                                manifest: name.clone(),
                            },
                            snapshot: b.state,
                        });
                    }
                }
                Err(e) => errors.push((name.clone(), e.to_string())),
            }
        }
        (out, errors)
    }

    /// A read-only tree view of a snapshot.
    pub fn tree(&self, s: &Snapshot) -> IoResult<TreeSnapshot> {
        Ok(TreeSnapshot::from_record(self.files.clone(), s)?)
    }

    /// Every page the snapshot references, grouped by data file name.
    pub fn pages_of(&self, s: &Snapshot) -> IoResult<BTreeMap<String, BTreeSet<u32>>> {
        pages_of_tree(&self.tree(s)?, s)
    }
}

/// Every page `tree` (the view of `s`) references, grouped by data file name.
pub(super) fn pages_of_tree(
    tree: &TreeSnapshot,
    s: &Snapshot,
) -> IoResult<BTreeMap<String, BTreeSet<u32>>> {
    let mut addrs: Vec<PageAddr> = Vec::new();
    tree.for_each_page(&mut |a| addrs.push(a))?;
    let mut out: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for a in addrs {
        if a.is_none() {
            continue;
        }
        let name = match s.meta.branch_file_ranges.resolve(a.file_id()) {
            Some(r) => DataFileName::new(a.file_id(), r.branch.clone(), r.term).to_string(),
            None => format!("<file id {} outside every branch file range>", a.file_id()),
        };
        out.entry(name).or_default().insert(a.page_index());
    }
    Ok(out)
}

/// Reads and replays a manifest or archive file, keeping what replay says of its tail.
pub fn replay_manifest(storage: &dyn Storage, path: &str) -> Result<Replayed, ReplayFailure> {
    let bytes = storage
        .read_file(path, MAX_MANIFEST_BYTES)
        .map_err(|e| ReplayFailure {
            offset: None,
            message: e.to_string(),
        })?;
    replay(&bytes).map_err(|e| ReplayFailure {
        offset: Some(e.offset),
        message: format!("corruption in {path} at offset {}: {}", e.offset, e.reason),
    })
}
