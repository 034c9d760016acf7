//! Opening the store the global options describe, and the existence checks that keep read
//! commands from creating what they were asked to read.

use std::path::{Path, PathBuf};

use bough::{Backend, Branch, ErrorKind, Options, PartitionHandle, Store};
use bough_names::{LOCK_FILE, PartitionDir, classify_dir};

use crate::error::{CliError, CliResult};
use crate::target::Target;

/// The store directory used when neither `--store`, `BOUGH_STORE` nor a config names one.
pub const DEFAULT_STORE: &str = "bough-data";

/// Global options every command sees.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// `--store`.
    pub store: Option<PathBuf>,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--backend`.
    pub backend: Option<Backend>,
    /// `--json`.
    pub json: bool,
    /// Progress lines allowed (stderr is a terminal and `--no-progress` is absent).
    pub progress: bool,
    /// `--wait SECONDS`: how long a writing command waits for the store lock.
    pub wait: Option<f64>,
}

/// How long a writing command waits for the store lock when neither `--wait` nor the config
/// file says: long enough for another short command (a `bough put`) to finish.
pub const DEFAULT_LOCK_WAIT_MS: u64 = 10_000;

impl Ctx {
    /// The options: the config file (if any), then `--store` and `--backend` on top. The
    /// background maintenance thread is off unless the config file sets it.
    pub fn options(&self) -> CliResult<Options> {
        let mut opts = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    CliError::not_found(format!("cannot read config {}: {e}", path.display()))
                })?;
                let mut o: Options = toml::from_str(&text)
                    .map_err(|e| CliError::usage(format!("config {}: {e}", path.display())))?;
                if !text.contains("maintenance_interval_ms") {
                    o.maintenance_interval_ms = 0;
                }
                if !text.contains("lock_wait_ms") {
                    o.lock_wait_ms = DEFAULT_LOCK_WAIT_MS;
                }
                if !text.contains("write_buffer_bytes") {
                    o.write_buffer_bytes = 0;
                }
                if !text.contains("prewarm_on_open") {
                    o.prewarm_on_open = false;
                }
                o
            }
            // A command commits a few times and exits: a write buffer would only add a log
            // file to create, name and checkpoint at close (more syncs than writing the
            // pages directly), so the CLI runs without one unless its config asks. Nor
            // does it prewarm: a command reads a few pages, not a branch's whole index.
            None => Options::default()
                .maintenance_interval_ms(0)
                .write_buffer_bytes(0)
                .prewarm_on_open(false)
                .lock_wait_ms(DEFAULT_LOCK_WAIT_MS),
        };
        if let Some(secs) = self.wait {
            if !secs.is_finite() || !(0.0..=86_400.0).contains(&secs) {
                return Err(CliError::usage(format!(
                    "--wait {secs}: give seconds from 0 to 86400"
                )));
            }
            opts.lock_wait_ms = (secs * 1000.0).round() as u64;
        }
        if let Some(s) = &self.store {
            opts.path = Some(s.clone());
        } else if opts.path.is_none() {
            opts.path = Some(PathBuf::from(DEFAULT_STORE));
        }
        if let Some(b) = self.backend {
            opts.backend = b;
        }
        opts.validate()
            .map_err(|e| CliError::from(e).hint("check --config, --store and --backend"))?;
        Ok(opts)
    }

    /// The local store directory.
    pub fn root(&self) -> CliResult<PathBuf> {
        self.options()?
            .path
            .ok_or_else(|| CliError::usage("no store directory: pass --store DIR"))
    }

    /// Fails unless a store exists at the configured directory.
    pub fn require_store(&self) -> CliResult<PathBuf> {
        let root = self.root()?;
        not_a_file(&root)?;
        if !root.is_dir() {
            return Err(CliError::not_found(format!("no store at {}", root.display())).hint(
                "pass --store DIR (or set BOUGH_STORE) to use another store, or create this one \
                 by writing to it: `bough put TABLE.PART KEY VALUE`",
            ));
        }
        Ok(root)
    }

    /// Opens the store; unless `create`, it must exist already. A store this creates is
    /// announced on stderr (with a warning when the directory held other files).
    pub fn open(&self, create: bool) -> CliResult<Store> {
        let opts = self.options()?;
        let local = matches!(
            opts.backend,
            Backend::Auto | Backend::IoUring | Backend::Pread
        );
        let mut created = None;
        if !create && opts.backend != Backend::Memory {
            self.require_store()?;
        } else if local && let Some(root) = opts.path.as_deref() {
            not_a_file(root)?;
            created = new_store_in(root)?;
        }
        let shown = opts
            .path
            .as_deref()
            .map_or_else(|| "memory".to_string(), |p| p.display().to_string());
        let waited = opts.lock_wait_ms;
        let store = Store::open(opts).map_err(|e| {
            let busy = e.kind() == ErrorKind::Busy;
            let err = CliError::from(e);
            if busy {
                err.hint(format!(
                    "another process has {shown} open for writing (waited {:.1} s); wait longer \
                     with --wait SECONDS, or use another --store. Reading commands (get, scan, \
                     ls, diff, verify, ...) work beside it",
                    waited as f64 / 1000.0
                ))
            } else {
                err
            }
        })?;
        if let Some(foreign) = created
            && !self.json
        {
            let at = std::path::absolute(&shown).map_or(shown.clone(), |p| p.display().to_string());
            if foreign > 0 {
                eprintln!(
                    "warning: {at} already held other files ({} not part of a Bough store); the store was created beside them",
                    crate::output::plural(foreign as u64, "entry", "entries")
                );
            }
            eprintln!("created a new store in {at}");
        }
        Ok(store)
    }

    /// Opens the existing store for reading only: beside a writer in another process, never
    /// waiting for it and never changing a byte (`Store::open_read_only`).
    pub fn open_read_only(&self) -> CliResult<Store> {
        let opts = self.options()?;
        // The object tier has no read-only mode: there a reading command opens as before.
        if opts.backend == Backend::Object {
            return self.open(false);
        }
        if opts.backend != Backend::Memory {
            self.require_store()?;
        }
        Ok(Store::open_read_only(opts)?)
    }

    /// Every partition directory in the local store, sorted.
    pub fn all_partitions(&self) -> CliResult<Vec<PartitionDir>> {
        let root = self.require_store()?;
        partitions_in(&root)
    }
}

/// Refuses a store path that names something other than a directory.
fn not_a_file(root: &Path) -> CliResult<()> {
    if root.exists() && !root.is_dir() {
        return Err(CliError::usage(format!(
            "{} is not a directory; a store is a directory",
            root.display()
        ))
        .hint("pass --store DIR with a directory (a new one is created on the first write)"));
    }
    Ok(())
}

/// Whether opening `root` creates a new store there: `None` when one is there already,
/// otherwise how many entries not belonging to a store the directory holds (0 when it is
/// absent or empty).
fn new_store_in(root: &Path) -> CliResult<Option<usize>> {
    let rd = match std::fs::read_dir(root) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Some(0)),
        Err(e) => return Err(CliError::io(format!("cannot list {}: {e}", root.display()))),
    };
    let mut foreign = 0;
    for entry in rd.flatten() {
        let name = entry.file_name();
        let ours = name
            .to_str()
            .is_some_and(|n| n == LOCK_FILE || classify_dir(n).is_some());
        if ours {
            return Ok(None);
        }
        foreign += 1;
    }
    Ok(Some(foreign))
}

/// The partition directories under `root`, sorted.
pub fn partitions_in(root: &Path) -> CliResult<Vec<PartitionDir>> {
    let rd = std::fs::read_dir(root)
        .map_err(|e| CliError::io(format!("cannot list {}: {e}", root.display())))?;
    let mut out = Vec::new();
    for entry in rd {
        let entry =
            entry.map_err(|e| CliError::io(format!("cannot list {}: {e}", root.display())))?;
        if entry.file_type().is_ok_and(|t| t.is_dir())
            && let Some(name) = entry.file_name().to_str()
            && let Some(p) = classify_dir(name)
        {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// A partition handle; unless `create`, the partition must exist.
pub fn partition(
    store: &Store,
    table: &str,
    partition: u32,
    create: bool,
) -> CliResult<PartitionHandle> {
    let handle = store.partition(table, partition)?;
    if !create {
        let existing = store.table(table)?.partitions()?;
        if !existing.contains(&partition) {
            let listed = if existing.is_empty() {
                format!("table `{table}` has no partitions in this store")
            } else {
                format!(
                    "partitions of `{table}`: {}",
                    existing
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            return Err(CliError::not_found(format!(
                "partition {table}.{partition} does not exist ({listed})"
            ))
            .hint(format!(
                "run `bough ls` to see the partitions; writing creates one: `bough put {table}.{partition} KEY VALUE`"
            )));
        }
    }
    Ok(handle)
}

/// Opens a branch, turning "not found" into a message that lists the branches and a
/// branch whose state cannot be read into the way back (`bough repair`).
pub fn branch(part: &PartitionHandle, name: &str) -> CliResult<Branch> {
    part.branch(name).map_err(|e| match e.kind() {
        ErrorKind::NotFound => missing_branch(part, name),
        // The branch's state cannot be read (its manifest is damaged): say how it comes
        // back, whatever the command was (`reset`, `get`, `merge`, ...).
        ErrorKind::Corruption => {
            let has_archive = part.archives(name).is_ok_and(|a| !a.is_empty());
            let label = format!("{}@{name}", part.dir());
            CliError::from(e).hint(remedy(&label, has_archive))
        }
        _ => e.into(),
    })
}

/// The way back for a branch that cannot be opened (its manifest is damaged), labelled
/// `label`: `bough repair` when it has an archive to come back from.
pub fn remedy(label: &str, has_archive: bool) -> String {
    if has_archive {
        format!(
            "`bough repair {label}` brings it back from its newest intact archive and lists what is lost"
        )
    } else {
        format!(
            "{label} has no archive to come back from: `bough branch delete` it (other branches are unaffected)"
        )
    }
}

/// The error for a branch that does not exist.
pub fn missing_branch(part: &PartitionHandle, name: &str) -> CliError {
    let list = part.branches().map(|b| b.join(", ")).unwrap_or_default();
    let tags = part
        .tags()
        .map(|t| {
            t.iter()
                .map(|t| t.name.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let tags = if tags.is_empty() {
        String::new()
    } else {
        format!("; tags: {tags}")
    };
    CliError::not_found(format!(
        "branch `{name}` does not exist in {} (branches: {list}{tags})",
        part.dir()
    ))
    .hint(format!(
        "create it with `bough branch create {name} {} --from main`",
        part.dir()
    ))
}

/// A read view of the branch or tag `name` (branches and tags share one name space), for
/// commands that read a state without writing it (a merge, reset or diff source).
pub fn state_view(part: &PartitionHandle, name: &str) -> CliResult<bough::ReadView> {
    match part.branch(name) {
        Ok(b) => Ok(b.read_view()?),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let is_tag = part
                .tags()
                .is_ok_and(|t| t.iter().any(|t| t.name.as_str() == name));
            if is_tag {
                Ok(part.tag(name)?)
            } else {
                Err(missing_branch(part, name))
            }
        }
        Err(_) => branch(part, name).and_then(|b| Ok(b.read_view()?)),
    }
}

/// The partition and branch of a resolved target.
pub fn open_target(
    store: &Store,
    t: &Target,
    create: bool,
) -> CliResult<(PartitionHandle, Branch)> {
    let part = partition(store, &t.table, t.partition, create)?;
    let b = branch(&part, &t.branch)?;
    Ok((part, b))
}
