//! What an integrity check finds: one typed [`Problem`] per cause, each about one file.

use std::fmt;

/// How bad a finding is.
///
/// ```
/// use bough::{Options, Store};
///
/// let dir = tempfile::tempdir()?;
/// let store = Store::open(Options::new(dir.path()))?;
/// let orders = store.partition("orders", 0)?;
/// let main = orders.branch("main")?;
/// main.put_blocking("a", "1")?;
/// main.archive()?;
/// store.close()?;
/// // The branch's manifest is damaged (a bad disk, a careless operator):
/// let manifest = dir.path().join("orders.0").join("manifest_main_0");
/// let mut bytes = std::fs::read(&manifest)?;
/// bytes[40] ^= 1;
/// std::fs::write(&manifest, &bytes)?;
/// let store = Store::open(Options::new(dir.path()))?;
/// use bough::check::Severity;
/// let report = store.check(&Default::default())?;
/// let errors = report.partitions[0].findings.iter().filter(|f| f.severity() == Severity::Error);
/// assert!(errors.count() > 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Data may be lost or unreadable: something a state references is missing or bad, or
    /// a state cannot be established.
    Error,
    /// Nothing any state references is affected (left by an interrupted write, a stray
    /// file, an ambiguous manifest tail), but an operator may want to look.
    Warning,
}

/// What holds a snapshot, as a user names it.
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
/// let (held, _unreadable) = files.held();
/// // `main`'s head state, held by its manifest.
/// assert!(held.iter().any(|h| h.referent.is_head() && h.referent.file() == "manifest_main_0"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Referent {
    /// The head state of a branch's manifest (`manifest` is the file; an old term's
    /// manifest GC has not removed yet names the same branch).
    Branch {
        /// The branch.
        branch: String,
        /// The manifest file holding it.
        manifest: String,
    },
    /// A merge base recorded in a branch's manifest.
    MergeBase {
        /// The branch whose manifest records it.
        branch: String,
        /// The other branch of the pair.
        other: String,
        /// The manifest file holding it.
        manifest: String,
    },
    /// An archive.
    Archive {
        /// The branch archived.
        branch: String,
        /// When it was taken (ms since the epoch).
        timestamp: u64,
        /// The archive file.
        file: String,
    },
    /// A history point (kept for point-in-time branches while the history window needs it).
    History {
        /// The branch whose state it records.
        branch: String,
        /// Its stamp (store-clock ms of the state, made unique per branch).
        stamp: u64,
        /// The history point file.
        file: String,
    },
    /// A tag (its state; the merge bases it keeps are `MergeBase`s with `branch` the tag).
    Tag {
        /// The tag.
        tag: String,
        /// The tag file.
        file: String,
    },
}

impl Referent {
    /// The file holding the snapshot.
    pub fn file(&self) -> &str {
        match self {
            Referent::Branch { manifest, .. } | Referent::MergeBase { manifest, .. } => manifest,
            Referent::Archive { file, .. }
            | Referent::History { file, .. }
            | Referent::Tag { file, .. } => file,
        }
    }

    /// Whether this is the head state of a manifest (not an archive, not a merge base).
    pub fn is_head(&self) -> bool {
        matches!(self, Referent::Branch { .. })
    }
}

impl fmt::Display for Referent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Referent::Branch { branch, .. } => write!(f, "branch {branch}"),
            Referent::MergeBase { branch, other, .. } => {
                write!(f, "merge base of branch {branch} with {other}")
            }
            Referent::Archive {
                branch, timestamp, ..
            } => write!(f, "archive {timestamp} of {branch}"),
            Referent::History { branch, stamp, .. } => {
                write!(f, "history point {stamp} of {branch}")
            }
            Referent::Tag { tag, .. } => write!(f, "tag {tag}"),
        }
    }
}

/// A part of a snapshot that could not be read.
///
/// ```
/// use bough::check::SnapshotPart;
///
/// // Which part of a snapshot a `Problem::SnapshotUnreadable` names, as `bough verify` says it.
/// assert_eq!(SnapshotPart::KeyTree.to_string(), "key tree");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SnapshotPart {
    /// The mapping table could not be opened.
    Mapping,
    /// The key tree.
    KeyTree,
    /// The TTL index.
    TtlIndex,
    /// Listing the pages the mapping table references.
    MappingPages,
}

impl fmt::Display for SnapshotPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SnapshotPart::Mapping => "mapping table unreadable",
            SnapshotPart::KeyTree => "key tree",
            SnapshotPart::TtlIndex => "TTL index",
            SnapshotPart::MappingPages => "mapping table",
        })
    }
}

/// One problem, by cause. [`fmt::Display`] gives the sentence `bough verify` prints.
///
/// ```
/// use bough::{Options, Store};
///
/// let dir = tempfile::tempdir()?;
/// let store = Store::open(Options::new(dir.path()))?;
/// let orders = store.partition("orders", 0)?;
/// let main = orders.branch("main")?;
/// main.put_blocking("a", "1")?;
/// main.archive()?;
/// store.close()?;
/// // The branch's manifest is damaged (a bad disk, a careless operator):
/// let manifest = dir.path().join("orders.0").join("manifest_main_0");
/// let mut bytes = std::fs::read(&manifest)?;
/// bytes[40] ^= 1;
/// std::fs::write(&manifest, &bytes)?;
/// let store = Store::open(Options::new(dir.path()))?;
/// use bough::check::Problem;
/// let report = store.check(&Default::default())?;
/// let f = &report.partitions[0].findings[0];
/// assert_eq!(f.file, "manifest_main_0");
/// // Each cause is a variant; `Display` is the sentence `bough verify` prints.
/// println!("{:?}: {}", f.problem, f.problem);
/// let _: &Problem = &f.problem;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A `CURRENT_TERM` record cannot be read or does not decode.
    CurrentTermUnreadable {
        /// Why.
        why: String,
    },
    /// A live branch's current manifest does not exist.
    MissingManifest {
        /// The branch.
        branch: String,
        /// Its term.
        term: u64,
        /// The manifest its `CURRENT_TERM` names.
        manifest: String,
    },
    /// A manifest or archive does not replay.
    ManifestUnreadable {
        /// Where in the file, when the bytes were read and a record is bad.
        offset: Option<u64>,
        /// Why.
        why: String,
    },
    /// A manifest's state names another branch or term than its file name.
    ManifestIdentity {
        /// The branch its state names.
        branch: String,
        /// The term its state names.
        term: u64,
    },
    /// An archive holds more than one record.
    ArchiveRecords {
        /// Records it holds.
        records: usize,
    },
    /// A tag holds more than one record, or a mapping overlay (a tag's state is
    /// checkpointed).
    TagRecords {
        /// Records it holds.
        records: usize,
    },
    /// A manifest's merge bases do not decode.
    MergeBasesUnreadable {
        /// Why.
        why: String,
    },
    /// Replay dropped the last record of a manifest not closed cleanly: a torn last append
    /// or a damaged last record (replay cannot tell which).
    DroppedTail {
        /// Offset of the dropped bytes.
        offset: u64,
    },
    /// A torn tail the engine kept aside before appending over it.
    TornTailKept {
        /// The manifest it was cut from.
        manifest: String,
        /// Its offset there.
        offset: u64,
    },
    /// The current manifest is a staging branch of an interrupted command.
    StagingBranch {
        /// The branch.
        branch: String,
        /// What it staged.
        purpose: String,
        /// The partition.
        dir: String,
    },
    /// A temporary file of an interrupted write.
    TempFile,
    /// A file name Bough does not write.
    UnknownFile,
    /// A write-ahead log file a live branch's manifest names (`LOG`) that is missing, does
    /// not replay (a damaged record before an intact one, a version gap), or whose versions
    /// do not continue the manifest's: acknowledged commits in it are unreadable.
    LogUnreadable {
        /// The manifest naming it.
        manifest: String,
        /// What failed.
        why: String,
    },
    /// A `LOCK` file inside a partition directory.
    LockFile,
    /// An object-store object (GC lease, numbered version) in a local directory.
    ObjectStoreObject,
    /// A directory of the store that is not a partition.
    StrayDirectory,
    /// A record of the store's branch registry that does not decode.
    TableOpUnreadable {
        /// Why.
        why: String,
    },
    /// A table-wide branch operation a crash interrupted: its intent has no outcome yet
    /// (the next writing open finishes it).
    TableOpUnresolved {
        /// Its sequence number.
        seq: u64,
    },
    /// A branch-registry record inside a partition directory (they live in the root).
    TableOpInPartition,
    /// Part of a snapshot could not be read, not because of a page of a data file.
    SnapshotUnreadable {
        /// Who holds the snapshot.
        referent: Referent,
        /// What could not be read.
        part: SnapshotPart,
        /// Why.
        why: String,
    },
    /// Logical pages the mapping table maps that neither root reaches.
    UnreachablePages {
        /// Who holds the snapshot.
        referent: Referent,
        /// How many.
        count: usize,
        /// The first few ids.
        first: Vec<u32>,
    },
    /// A page of a data file that some snapshot references fails its checksum or layout.
    BadPage {
        /// Page index in the file.
        page: u32,
        /// Byte offset in the file.
        offset: u64,
        /// Why.
        why: String,
        /// Every snapshot that references it.
        referents: Vec<Referent>,
    },
    /// Reading a page of a data file failed while walking snapshots (the page itself reads
    /// as a valid page, so it is what the snapshots make of it: an unexpected type, a
    /// broken tree shape).
    BadPageRead {
        /// Page index in the file.
        page: u32,
        /// Why.
        why: String,
        /// Every snapshot whose walk failed there.
        referents: Vec<Referent>,
    },
    /// A bad page nothing references (left by an interrupted or superseded write).
    UnreferencedBadPage {
        /// Page index in the file.
        page: u32,
        /// Byte offset in the file.
        offset: u64,
        /// Why.
        why: String,
    },
    /// A data file's header cannot be read or names another file.
    DataFileHeader {
        /// Why.
        why: String,
        /// Whether any snapshot references pages of it.
        referenced: bool,
    },
    /// Bytes past the last whole page of a data file.
    PartialTail {
        /// How many.
        bytes: u64,
    },
    /// A referenced page lies past the end of its data file.
    PagePastEnd {
        /// The page.
        page: u32,
        /// The first file that references it.
        by: String,
        /// Pages the file holds.
        pages: u64,
    },
    /// A data file some snapshot references does not exist.
    MissingDataFile {
        /// Pages referenced.
        pages: usize,
        /// The first file that references it.
        first_by: String,
    },
    /// A file GC's dry run does not recognise.
    GcUnknown,
    /// GC's dry run failed.
    GcFailed {
        /// Why.
        why: String,
    },
}

impl Problem {
    /// How bad it is.
    pub fn severity(&self) -> Severity {
        use Problem::*;
        match self {
            CurrentTermUnreadable { .. }
            | MissingManifest { .. }
            | ManifestUnreadable { .. }
            | ManifestIdentity { .. }
            | ArchiveRecords { .. }
            | TagRecords { .. }
            | MergeBasesUnreadable { .. }
            | SnapshotUnreadable { .. }
            | UnreachablePages { .. }
            | BadPage { .. }
            | BadPageRead { .. }
            | PagePastEnd { .. }
            | MissingDataFile { .. }
            | LogUnreadable { .. }
            | GcUnknown
            | TableOpUnreadable { .. }
            | GcFailed { .. } => Severity::Error,
            DataFileHeader { referenced, .. } => {
                if *referenced {
                    Severity::Error
                } else {
                    Severity::Warning
                }
            }
            DroppedTail { .. }
            | TornTailKept { .. }
            | StagingBranch { .. }
            | TempFile
            | UnknownFile
            | LockFile
            | ObjectStoreObject
            | StrayDirectory
            | TableOpUnresolved { .. }
            | TableOpInPartition
            | UnreferencedBadPage { .. }
            | PartialTail { .. } => Severity::Warning,
        }
    }
}

/// `a, b and c`.
pub fn join_referents<T: fmt::Display>(whos: &[T]) -> String {
    // Two manifests of one branch (an old term GC has not removed yet) read as one.
    let mut v: Vec<String> = Vec::new();
    for w in whos {
        let w = w.to_string();
        if !v.contains(&w) {
            v.push(w);
        }
    }
    match v.as_slice() {
        [] => "nothing that could be read".into(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Problem::*;
        match self {
            CurrentTermUnreadable { why } | ManifestUnreadable { why, .. } => f.write_str(why),
            MissingManifest {
                branch,
                term,
                manifest,
            } => write!(
                f,
                "branch {branch} is at term {term} but {manifest} is missing"
            ),
            ManifestIdentity { branch, term } => {
                write!(f, "its state names branch {branch} term {term}")
            }
            ArchiveRecords { records } => {
                write!(f, "an archive holds {records} records, not one")
            }
            TagRecords { records } => write!(
                f,
                "a tag holds one checkpointed snapshot record, not {records} records (or an overlay)"
            ),
            MergeBasesUnreadable { why } => write!(f, "merge bases do not decode: {why}"),
            DroppedTail { offset } => f.write_str(&bough_manifest::dropped_tail_finding(*offset)),
            TornTailKept { manifest, offset } => write!(
                f,
                "kept aside from {manifest}: {}; delete this file once it has been looked at",
                bough_manifest::dropped_tail_finding(*offset)
            ),
            StagingBranch {
                branch,
                purpose,
                dir,
            } => write!(
                f,
                "branch {branch} is the staging branch of an interrupted `{purpose}`; the next \
                 command that writes to {dir} (or `bough gc`) removes it"
            ),
            TempFile => f.write_str(
                "leftover temporary file of an interrupted write (the next open removes it)",
            ),
            UnknownFile => f.write_str("not a Bough file name; ignored by the store"),
            LogUnreadable { manifest, why } => {
                write!(
                    f,
                    "the write-ahead log {manifest} names does not replay: {why}"
                )
            }
            LockFile => f.write_str("a LOCK file inside a partition directory"),
            ObjectStoreObject => f.write_str(
                "an object-store object (GC lease or numbered version) in a local directory",
            ),
            StrayDirectory => f.write_str("not a partition directory; ignored by the store"),
            TableOpUnreadable { why } => write!(f, "branch-registry record unreadable: {why}"),
            TableOpUnresolved { seq } => write!(
                f,
                "table-wide branch operation {seq} was interrupted; the next writing open finishes it"
            ),
            TableOpInPartition => {
                f.write_str("a branch-registry record inside a partition directory; ignored")
            }
            SnapshotUnreadable {
                referent,
                part,
                why,
            } => write!(f, "{referent}: {part}: {why}"),
            UnreachablePages {
                referent,
                count,
                first,
            } => write!(
                f,
                "{referent}: {count} logical pages are mapped but unreachable from the roots \
                 (first {first:?})"
            ),
            BadPage {
                page,
                offset,
                why,
                referents,
            } => write!(
                f,
                "page {page} (offset {offset}): {why}; referenced by {}",
                join_referents(referents)
            ),
            BadPageRead {
                page,
                why,
                referents,
            } => write!(
                f,
                "page {page}: {why}; read by {}",
                join_referents(referents)
            ),
            UnreferencedBadPage { page, offset, why } => {
                write!(
                    f,
                    "page {page} (offset {offset}), referenced by nothing: {why}"
                )
            }
            DataFileHeader { why, referenced } => {
                if *referenced {
                    write!(f, "header: {why}")
                } else {
                    write!(
                        f,
                        "header: {why}; referenced by nothing (left by an interrupted write)"
                    )
                }
            }
            PartialTail { bytes } => write!(f, "{bytes} bytes past the last whole page"),
            PagePastEnd { page, by, pages } => write!(
                f,
                "page {page}, referenced by {by}, lies past the end of the file ({pages} pages)"
            ),
            MissingDataFile { pages, first_by } => write!(
                f,
                "missing, but {pages} of its pages are referenced (first by {first_by})"
            ),
            GcUnknown => f.write_str("GC does not recognise it"),
            GcFailed { why } => write!(f, "dry-run GC failed: {why}"),
        }
    }
}

/// One finding: a problem and the file (name inside its partition directory) it is about.
///
/// ```
/// use bough::{Options, Store};
///
/// let dir = tempfile::tempdir()?;
/// let store = Store::open(Options::new(dir.path()))?;
/// let orders = store.partition("orders", 0)?;
/// let main = orders.branch("main")?;
/// main.put_blocking("a", "1")?;
/// main.archive()?;
/// store.close()?;
/// // The branch's manifest is damaged (a bad disk, a careless operator):
/// let manifest = dir.path().join("orders.0").join("manifest_main_0");
/// let mut bytes = std::fs::read(&manifest)?;
/// bytes[40] ^= 1;
/// std::fs::write(&manifest, &bytes)?;
/// let store = Store::open(Options::new(dir.path()))?;
/// let report = store.check(&Default::default())?;
/// let f = &report.partitions[0].findings[0];
/// println!("{} ({:?}): {}", f.file, f.severity(), f.problem);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The file it is about (for store-level findings, the directory).
    pub file: String,
    /// What is wrong.
    pub problem: Problem,
}

impl Finding {
    /// How bad it is.
    pub fn severity(&self) -> Severity {
        self.problem.severity()
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.problem)
    }
}
