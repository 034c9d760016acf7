//! Read-only access to one partition directory for `inspect` and `verify`: its manifests and
//! archives replayed, the snapshots they hold (heads, archives, merge bases), and the pages
//! each snapshot references. Nothing here writes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use std::io::Read;

use bough_io::layout::max_payload;
use bough_io::{DataFileHeader, IoResult, MIN_PAGE_SIZE, PreadStorage, Storage, open_page};
use bough_manifest::{ManifestState, PageAddr, Replayed, Snapshot, merge_bases, replay};
use bough_names::{DataFileName, FileKind, classify};
use bough_tree::cache::PageCache;
use bough_tree::files::FileTable;
use bough_tree::head::TreeSnapshot;
use bough_tree::page::index::IndexNode;
use bough_tree::page::kind;
use bough_tree::page::leaf::LeafView;
use bough_tree::page::mapping::{MappingNode, fanout};

use crate::error::{CliError, CliResult};

/// Largest manifest the tools read whole.
pub const MAX_MANIFEST_BYTES: u64 = 1 << 30;

/// One partition directory opened for reading.
pub struct PartitionFiles {
    /// `table.partition`.
    pub dir: String,
    /// The directory listing, classified.
    pub names: Vec<(String, FileKind)>,
    /// Data files through the engine's page reader.
    pub files: Arc<FileTable>,
    /// Every manifest and archive, replayed (or why not).
    pub manifests: Vec<(String, Result<ManifestState, String>)>,
    /// Manifests whose replay dropped a tail, with the tail's offset: a torn last append
    /// or a damaged last record (replay cannot tell which).
    pub dropped_tails: Vec<(String, u64)>,
}

impl std::fmt::Debug for PartitionFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionFiles")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// A snapshot some manifest holds: its head state, or a merge base recorded in it.
pub struct Held {
    /// What holds it: `manifest_main_0`, or `manifest_main_0 (merge base with feature)`.
    pub label: String,
    /// The manifest file holding it.
    pub file: String,
    /// The state.
    pub snapshot: Snapshot,
}

/// The read-only storage of a local store.
pub fn storage(root: &Path) -> CliResult<Arc<dyn Storage>> {
    // `verify` and `inspect` read beside a writer: refuse every change at the storage layer.
    Ok(Arc::new(bough_io::ReadOnlyStorage::new(Arc::new(
        PreadStorage::new(root)?,
    ))))
}

impl PartitionFiles {
    /// Lists and replays partition `dir`.
    pub fn open(storage: &Arc<dyn Storage>, dir: &str) -> CliResult<PartitionFiles> {
        let listed = storage.list(dir)?;
        let names: Vec<(String, FileKind)> = listed
            .into_iter()
            .map(|n| {
                let k = classify(&n);
                (n, k)
            })
            .collect();
        let mut manifests = Vec::new();
        let mut dropped_tails = Vec::new();
        let mut page_size = None;
        for (n, k) in &names {
            // A tag is one snapshot record in the manifest format, like an archive.
            if matches!(
                k,
                FileKind::Manifest(_) | FileKind::Archive(_) | FileKind::Tag(_)
            ) {
                let r = replay_manifest(storage.as_ref(), &format!("{dir}/{n}"));
                if let Ok(s) = &r {
                    page_size.get_or_insert(s.state.page_size);
                    if let Some(off) = s.dropped_tail {
                        dropped_tails.push((n.clone(), off));
                    }
                }
                manifests.push((n.clone(), r.map(|r| r.state)));
            }
        }
        let files = Arc::new(FileTable::new(
            storage.clone(),
            dir.to_string(),
            page_size.unwrap_or(4096),
            Arc::new(PageCache::new(32 << 20)),
            false,
        ));
        Ok(PartitionFiles {
            dir: dir.to_string(),
            names,
            files,
            manifests,
            dropped_tails,
        })
    }

    /// Every snapshot the manifests and archives hold, with the merge bases recorded in them.
    /// Errors decoding merge bases come back as (file, message).
    pub fn held(&self) -> (Vec<Held>, Vec<(String, String)>) {
        let mut out = Vec::new();
        let mut errors = Vec::new();
        for (name, r) in &self.manifests {
            let Ok(state) = r else { continue };
            out.push(Held {
                label: name.clone(),
                file: name.clone(),
                snapshot: state.to_snapshot(),
            });
            match merge_bases(&state.extensions) {
                Ok(bases) => {
                    for b in bases {
                        out.push(Held {
                            label: format!("{name} (merge base with {})", b.branch),
                            file: name.clone(),
                            snapshot: b.state,
                        });
                    }
                }
                Err(e) => errors.push((name.clone(), format!("merge bases do not decode: {e}"))),
            }
        }
        (out, errors)
    }

    /// A read-only tree view of a snapshot.
    pub fn tree(&self, s: &Snapshot) -> IoResult<TreeSnapshot> {
        TreeSnapshot::from_record(self.files.clone(), s)
    }

    /// Every page the snapshot references, grouped by data file name.
    pub fn pages_of(&self, s: &Snapshot) -> IoResult<BTreeMap<String, BTreeSet<u32>>> {
        let tree = self.tree(s)?;
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
}

/// Reads and replays a manifest or archive file.
pub fn read_manifest(storage: &dyn Storage, path: &str) -> Result<ManifestState, String> {
    replay_manifest(storage, path).map(|r| r.state)
}

/// Reads and replays a manifest or archive file, keeping what replay says of its tail.
pub fn replay_manifest(storage: &dyn Storage, path: &str) -> Result<Replayed, String> {
    let bytes = storage
        .read_file(path, MAX_MANIFEST_BYTES)
        .map_err(|e| e.to_string())?;
    replay(&bytes).map_err(|e| format!("corruption in {path} at offset {}: {}", e.offset, e.reason))
}

/// Finds a store file by path or by name; returns (store root, partition dir, file name).
pub fn locate(root: &Path, arg: &str) -> CliResult<(std::path::PathBuf, String, String)> {
    let p = Path::new(arg);
    if p.is_file() {
        let abs = p
            .canonicalize()
            .map_err(|e| CliError::io(format!("{arg}: {e}")))?;
        let name = abs
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let dir_path = abs
            .parent()
            .ok_or_else(|| CliError::usage(format!("{arg} has no directory")))?;
        let dir = dir_path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let store_root = dir_path.parent().unwrap_or(dir_path).to_path_buf();
        return Ok((store_root, dir, name));
    }
    if let Some((dir, name)) = arg.rsplit_once('/')
        && root.join(dir).join(name).is_file()
    {
        return Ok((root.to_path_buf(), dir.to_string(), name.to_string()));
    }
    if !root.is_dir() {
        return Err(CliError::not_found(format!(
            "{arg} is not a file, and there is no store at {} to look for it in",
            root.display()
        ))
        .hint("give a path to the file, or --store DIR"));
    }
    let mut found = Vec::new();
    for part in crate::ctx::partitions_in(root)? {
        let dir = part.to_string();
        if root.join(&dir).join(arg).is_file() {
            found.push(dir);
        }
    }
    match found.len() {
        0 => Err(CliError::not_found(format!(
            "no file named {arg} in any partition of {}",
            root.display()
        ))
        .hint("`bough ls` lists the partitions; give TABLE.PART/NAME or a path")),
        1 => Ok((root.to_path_buf(), found.remove(0), arg.to_string())),
        _ => Err(CliError::usage(format!(
            "{arg} exists in several partitions: {}",
            found.join(", ")
        ))
        .hint(format!("name one, e.g. {}/{arg}", found[0]))),
    }
}

/// What reading a data file page by page found.
#[derive(Debug, Default)]
pub struct FileCheck {
    /// The header, or why it is unusable.
    pub header: Option<Result<DataFileHeader, String>>,
    /// File length in bytes.
    pub len: u64,
    /// Pages after the header.
    pub pages: u64,
    /// Good pages by page type.
    pub by_type: BTreeMap<u8, u64>,
    /// Bad pages: (index, file offset, why).
    pub bad: Vec<(u32, u64, String)>,
    /// Bytes past the last whole page.
    pub partial_tail: u64,
}

/// The name of a page type.
pub fn page_type_name(t: u8) -> &'static str {
    match t {
        kind::LEAF => "leaf",
        kind::INDEX => "index",
        kind::OVERFLOW => "overflow",
        kind::MAPPING => "mapping",
        kind::TTL_LEAF => "ttl-leaf",
        _ => "unknown",
    }
}

fn check_payload(t: u8, payload: &[u8], page_size: u32) -> Result<(), String> {
    let r = match t {
        kind::LEAF | kind::TTL_LEAF => LeafView::new(payload).and_then(|v| v.entries()).map(|_| ()),
        kind::INDEX => IndexNode::decode(payload).map(|_| ()),
        kind::MAPPING => MappingNode::decode(payload, fanout(max_payload(page_size))).map(|_| ()),
        kind::OVERFLOW => Ok(()),
        other => return Err(format!("unknown page type {other}")),
    };
    r.map_err(|e| format!("{} page does not decode: {e}", page_type_name(t)))
}

/// Reads the data file at `path` page by page, verifying the header (against the identity
/// its name promises), every page checksum and every page layout.
pub fn check_data_file(path: &Path, name: &DataFileName) -> FileCheck {
    let mut out = FileCheck::default();
    let shown = path.display().to_string();
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => {
            out.header = Some(Err(format!("cannot open: {e}")));
            return out;
        }
    };
    out.len = f.metadata().map_or(0, |m| m.len());
    let mut first = vec![0u8; MIN_PAGE_SIZE as usize];
    if let Err(e) = f.read_exact(&mut first) {
        out.header = Some(Err(format!(
            "file of {} bytes is too short for a header: {e}",
            out.len
        )));
        return out;
    }
    let header = DataFileHeader::peek_page_size(&first, &shown).and_then(|ps| {
        let mut page = first.clone();
        page.resize(ps as usize, 0);
        if ps > MIN_PAGE_SIZE {
            f.read_exact(&mut page[MIN_PAGE_SIZE as usize..])
                .map_err(|e| bough_io::IoError::os("read", shown.clone(), e))?;
        }
        let h = DataFileHeader::decode(&page, &shown)?;
        h.verify_identity(&shown, name.file_id, &name.branch, name.term)?;
        Ok(h)
    });
    let header = match header {
        Ok(h) => h,
        Err(e) => {
            out.header = Some(Err(e.to_string()));
            return out;
        }
    };
    let ps = header.page_size;
    let salt = header.salt();
    out.header = Some(Ok(header));
    out.pages = (out.len / u64::from(ps)).saturating_sub(1);
    out.partial_tail = out.len % u64::from(ps);
    let mut buf = vec![0u8; ps as usize];
    for i in 1..=out.pages {
        let Ok(idx) = u32::try_from(i) else { break };
        let offset = i * u64::from(ps);
        if let Err(e) = f.read_exact(&mut buf) {
            out.bad.push((idx, offset, format!("read failed: {e}")));
            break;
        }
        match open_page(&buf, salt, idx, &shown, offset) {
            Ok((t, payload)) => match check_payload(t, payload, ps) {
                Ok(()) => *out.by_type.entry(t).or_default() += 1,
                Err(why) => out.bad.push((idx, offset, why)),
            },
            Err(e) => out.bad.push((idx, offset, e.to_string())),
        }
    }
    out
}
