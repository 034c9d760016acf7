//! The lower layers' types that the facade's API hands out or takes (merge and GC reports,
//! names, branch descriptions, stored entries), re-exported here with an example each,
//! written against the facade.

/// How a merge, rebase, cherry-pick or revert settles a key both sides changed.
///
/// ```
/// use bough::{ConflictPolicy, MergeOptions, Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// let main = orders.branch("main")?;
/// main.put_blocking("k", "base")?;
/// let dev = orders.create_branch("dev", "main")?;
/// main.put_blocking("k", "main")?;
/// dev.put_blocking("k", "dev")?;
/// let fail = MergeOptions { policy: ConflictPolicy::Fail, ..MergeOptions::default() };
/// // Merge dev into main: both changed `k`, so the merge stops and reports it.
/// let report = orders.merge("dev", "main", fail)?;
/// assert!(!report.committed && report.conflicts.len() == 1);
/// // Taking the source's side instead:
/// let theirs = MergeOptions { policy: ConflictPolicy::Theirs, ..MergeOptions::default() };
/// orders.merge("dev", "main", theirs)?;
/// assert_eq!(main.get_blocking("k")?.unwrap().value, b"dev");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_catalog::ConflictPolicy;

/// What a merge may do: its conflict policy, a dry run, fast-forwards.
///
/// ```
/// use bough::{MergeOptions, Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// orders.branch("main")?.put_blocking("a", "1")?;
/// let dev = orders.create_branch("dev", "main")?;
/// dev.put_blocking("b", "2")?;
/// // A dry run reports what a merge would do and commits nothing.
/// let dry = orders.merge("dev", "main", MergeOptions { dry_run: true, ..MergeOptions::default() })?;
/// assert!(!dry.committed);
/// assert!(orders.branch("main")?.get_blocking("b")?.is_none());
/// let done = orders.merge("dev", "main", MergeOptions::default())?;
/// assert!(done.committed && done.fast_forward);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_catalog::MergeOptions;

/// What a merge, rebase, cherry-pick or revert did.
///
/// ```
/// use bough::{ConflictPolicy, MergeOptions, Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// let main = orders.branch("main")?;
/// main.put_blocking("k", "base")?;
/// let dev = orders.create_branch("dev", "main")?;
/// main.put_blocking("k", "main")?;
/// dev.put_blocking("k", "dev")?;
/// let fail = MergeOptions { policy: ConflictPolicy::Fail, ..MergeOptions::default() };
/// // Merge dev into main: both changed `k`, so the merge stops and reports it.
/// let report = orders.merge("dev", "main", fail)?;
/// assert_eq!((report.committed, report.fast_forward, report.conflicts.len()), (false, false, 1));
/// // The merge base it used: `main` as `dev` forked from it.
/// let base = report.base.unwrap();
/// assert_eq!((base.branch.as_str(), base.holder.as_str()), ("main", "dev"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_catalog::MergeReport;

/// A key both sides changed differently, with each side's entry.
///
/// ```
/// use bough::{ConflictPolicy, MergeOptions, Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// let main = orders.branch("main")?;
/// main.put_blocking("k", "base")?;
/// let dev = orders.create_branch("dev", "main")?;
/// main.put_blocking("k", "main")?;
/// dev.put_blocking("k", "dev")?;
/// let fail = MergeOptions { policy: ConflictPolicy::Fail, ..MergeOptions::default() };
/// // Merge dev into main: both changed `k`, so the merge stops and reports it.
/// let report = orders.merge("dev", "main", fail)?;
/// let c = &report.conflicts[0];
/// assert_eq!(c.key, b"k");
/// let value = |e: &Option<bough::Entry>| match e.as_ref().map(|e| &e.value) {
///     Some(bough::ValueLoc::Inline(v)) => v.clone(),
///     _ => Vec::new(),
/// };
/// // Ours is the target's entry (main), theirs the source's (dev).
/// assert_eq!((value(&c.ours), value(&c.theirs)), (b"main".to_vec(), b"dev".to_vec()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_catalog::Conflict;

/// One key's entry as stored: value, timestamp, expiry (what a merge conflict holds on each side).
///
/// ```
/// use bough::{ConflictPolicy, MergeOptions, Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// let main = orders.branch("main")?;
/// main.put_blocking("k", "base")?;
/// let dev = orders.create_branch("dev", "main")?;
/// main.put_blocking("k", "main")?;
/// dev.put_blocking("k", "dev")?;
/// let fail = MergeOptions { policy: ConflictPolicy::Fail, ..MergeOptions::default() };
/// // Merge dev into main: both changed `k`, so the merge stops and reports it.
/// let report = orders.merge("dev", "main", fail)?;
/// let theirs: &bough::Entry = report.conflicts[0].theirs.as_ref().unwrap();
/// assert!(theirs.timestamp > 0 && theirs.expire_at == 0 && !theirs.is_tombstone());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_tree::page::leaf::Entry;

/// Where an entry's value is: inline, in overflow pages, or a tombstone.
///
/// ```
/// use bough::{ConflictPolicy, MergeOptions, Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// let main = orders.branch("main")?;
/// main.put_blocking("k", "base")?;
/// let dev = orders.create_branch("dev", "main")?;
/// main.put_blocking("k", "main")?;
/// dev.put_blocking("k", "dev")?;
/// let fail = MergeOptions { policy: ConflictPolicy::Fail, ..MergeOptions::default() };
/// // Merge dev into main: both changed `k`, so the merge stops and reports it.
/// let report = orders.merge("dev", "main", fail)?;
/// use bough::ValueLoc;
/// match &report.conflicts[0].ours.as_ref().unwrap().value {
///     ValueLoc::Inline(v) => assert_eq!(v, b"main"),
///     ValueLoc::Overflow { len, .. } => println!("{len} bytes in overflow pages"),
///     ValueLoc::Tombstone => println!("deleted"),
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_tree::page::leaf::ValueLoc;

/// The merge base a merge or rebase used.
///
/// ```
/// use bough::{BaseRoute, MergeOptions, Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// orders.branch("main")?.put_blocking("a", "1")?;
/// let dev = orders.create_branch("dev", "main")?;
/// dev.put_blocking("b", "2")?;
/// let report = orders.merge("dev", "main", MergeOptions::default())?;
/// let base = report.base.unwrap();
/// assert_eq!(base.route, BaseRoute::Pair);
/// println!("base: {} at version {:?}, recorded by {}", base.branch, base.version, base.holder);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_catalog::MergeBaseInfo;

/// How a merge base was found: recorded for the pair, or through the fork tree.
///
/// ```
/// use bough::{BaseRoute, MergeOptions, Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// orders.branch("main")?.put_blocking("a", "1")?;
/// // Two siblings: neither forked from the other.
/// orders.create_branch("left", "main")?.put_blocking("l", "1")?;
/// orders.create_branch("right", "main")?.put_blocking("r", "1")?;
/// let report = orders.merge("left", "right", MergeOptions::default())?;
/// assert!(matches!(report.base.unwrap().route, BaseRoute::Lineage { ancestor, .. } if ancestor.as_str() == "main"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_catalog::BaseRoute;

/// Why a merge was refused: the two branches share no state that is still retained.
///
/// ```
/// use bough::{BranchName, NoCommonState, ReleaseCause};
///
/// let name = |s: &str| BranchName::new(s);
/// let why = NoCommonState::Released {
///     a: name("main")?,
///     b: name("feature")?,
///     ancestor: name("main")?,
///     version: Some(7),
///     forked: vec![name("feature")?],
///     holder: name("feature")?,
///     cause: ReleaseCause::Dropped,
/// };
/// // The refusal's message says which state was needed and what released it.
/// println!("{why}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_catalog::NoCommonState;

/// What released the state a merge would have needed.
///
/// ```
/// use bough::ReleaseCause;
///
/// let causes = [ReleaseCause::Dropped, ReleaseCause::Moved { to: Some(12) }];
/// assert_ne!(causes[0], causes[1]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_catalog::ReleaseCause;

/// How a cherry-pick or revert settles conflicts, and whether it is a dry run.
///
/// ```
/// use bough::{Options, PickOptions, StateRef, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// orders.branch("main")?.put_blocking("a", "1")?;
/// let dev = orders.create_branch("dev", "main")?;
/// let start = dev.archive()?;
/// dev.put_blocking("b", "2")?;
/// let dry = PickOptions { dry_run: true, ..PickOptions::default() };
/// let report = orders.cherry_pick(&StateRef::Archive(start), &StateRef::Branch("dev".into()), "main", dry)?;
/// assert_eq!((report.applied, report.committed), (1, false));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_catalog::PickOptions;

/// Whether a re-home keeps the merge bases it would otherwise end.
///
/// ```
/// use bough::{Options, RehomeOptions, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// orders.branch("main")?.put_blocking("a", "1")?;
/// let dev = orders.create_branch("dev", "main")?;
/// dev.put_blocking("b", "2")?;
/// let report = dev.rehome_with(RehomeOptions { keep_merge_bases: true })?;
/// assert!(report.merges_lost.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_catalog::RehomeOptions;

/// What a re-home copied, and which merges it made impossible.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// orders.branch("main")?.put_blocking("a", "1")?;
/// let dev = orders.create_branch("dev", "main")?;
/// dev.put_blocking("b", "2")?;
/// let report = dev.rehome()?;
/// println!(
///     "{} files, {} pages copied; merges now impossible: {:?}",
///     report.files_rehomed, report.pages_copied, report.merges_lost
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_catalog::RehomeReport;

/// What `describe` says of a branch: term, origin, archives, policy, tags, space.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// orders.branch("main")?.put_blocking("a", "1")?;
/// orders.create_branch("dev", "main")?;
/// let info = orders.describe("dev")?;
/// assert_eq!(info.name.as_str(), "dev");
/// let origin = info.origin.unwrap();
/// assert_eq!(origin.parent.unwrap().0.as_str(), "main");
/// assert!(info.archives.is_empty() && info.tags.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_catalog::BranchInfo;

/// The bytes a branch holds alone, and those it shares.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// let main = orders.branch("main")?;
/// main.put_blocking("a", "1")?;
/// main.checkpoint_blocking()?;
/// orders.create_branch("dev", "main")?;
/// if let Some(space) = orders.describe("dev")?.space {
///     // Deleting dev would free its exclusive bytes; the rest it shares with main.
///     println!("{} B alone, {} B shared with {:?}", space.exclusive_bytes, space.shared_bytes, space.shared_with);
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_catalog::BranchSpace;

/// Where a branch came from: its parent and the version it forked at.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// orders.branch("main")?.put_blocking("a", "1")?;
/// orders.create_branch("dev", "main")?;
/// let origin = orders.describe("dev")?.origin.unwrap();
/// let (parent, _term) = origin.parent.unwrap();
/// assert_eq!(parent.as_str(), "main");
/// println!("forked at version {} ({} ms)", origin.fork_version, origin.created_at_ms);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_manifest::BranchOrigin;

/// What one garbage collection of a partition deleted and kept, and why.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// orders.branch("main")?.put_blocking("a", "1")?;
/// let dev = orders.create_branch("dev", "main")?;
/// dev.put_blocking("b", "2")?;
/// dev.checkpoint_blocking()?;
/// drop(dev);
/// orders.delete_branch("dev")?;
/// let report = orders.gc()?;
/// println!("freed {} B in {:?}; kept {:?}", report.bytes_freed, report.deleted, report.kept);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_gc::GcReport;

/// Why GC kept a file.
///
/// ```
/// use bough::{KeepReason, Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let main = store.partition("orders", 0)?.branch("main")?;
/// main.put_blocking("a", "1")?;
/// main.checkpoint_blocking()?;
/// let report = store.partition("orders", 0)?.gc()?;
/// for (file, why) in &report.kept {
///     match why {
///         KeepReason::Referenced { by } => println!("{file}: referenced by {by}"),
///         other => println!("{file}: {other:?}"),
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_gc::KeepReason;

/// An archive's file name: the branch, its term and when it was taken.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let main = store.partition("orders", 0)?.branch("main")?;
/// main.put_blocking("a", "1")?;
/// let archive = main.archive()?;
/// assert_eq!(archive.branch.as_str(), "main");
/// println!("{archive} taken at {} ms", archive.timestamp);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_names::ArchiveName;

/// A history point's file name: the branch, its term and its stamp (the store-clock ms of
/// the state it records, made unique per branch). Kept while `Options::history_window_ms`
/// needs it.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory().history_window_ms(60_000))?;
/// let orders = store.partition("orders", 0)?;
/// orders.branch("main")?.put_blocking("a", "1")?;
/// let points = orders.history_points("main")?;
/// assert!(points.iter().all(|p| p.branch.as_str() == "main"));
/// assert!(!points.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_names::HistoryName;

/// A valid branch (or tag) name.
///
/// ```
/// use bough::BranchName;
///
/// let name = BranchName::new("feature-1")?;
/// assert_eq!(name.as_str(), "feature-1");
/// assert!(BranchName::new("").is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_names::BranchName;

/// A partition's directory: `table.partition`.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 3)?;
/// assert_eq!(orders.dir().to_string(), "orders.3");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_names::PartitionDir;

/// A partition's number within its table.
///
/// ```
/// use bough::{Options, PartitionId, Store};
///
/// let store = Store::open(Options::in_memory())?;
/// for id in 0..4 as PartitionId {
///     store.partition("orders", id)?.branch("main")?.put_blocking("k", id.to_string())?;
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_names::PartitionId;

/// A branch's term: it grows with each new writer (fencing).
///
/// ```
/// use bough::{Options, Store, Term};
///
/// let store = Store::open(Options::in_memory())?;
/// let orders = store.partition("orders", 0)?;
/// orders.branch("main")?.put_blocking("k", "v")?;
/// let term: Term = orders.describe("main")?.term;
/// println!("main is at term {term}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_names::Term;

/// The page cache ([`crate::Store::cache`]): pages by physical identity, shared by every branch.
///
/// ```
/// use bough::{Options, Store};
///
/// let store = Store::open(Options::in_memory().cache_bytes(8 << 20))?;
/// let main = store.partition("orders", 0)?.branch("main")?;
/// main.put_blocking("k", "v")?;
/// main.checkpoint_blocking()?;
/// main.get_blocking("k")?;
/// let (hits, misses) = store.cache().hit_stats();
/// println!("{} B cached; {hits} hits, {misses} misses", store.cache().bytes());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(inline)]
pub use bough_tree::cache::PageCache;
