//! Finding store files for `inspect` and `verify`, and the read-only storage they read
//! through. What a partition holds is read by `bough::check` (`PartitionFiles`, the
//! check itself); nothing here writes.

use std::path::Path;
use std::sync::Arc;

use bough::check::replay_manifest;
use bough_io::{PreadStorage, Storage};
use bough_manifest::ManifestState;

use crate::error::{CliError, CliResult};

/// The read-only storage of a local store.
pub fn storage(root: &Path) -> CliResult<Arc<dyn Storage>> {
    // `verify` and `inspect` read beside a writer: refuse every change at the storage layer.
    Ok(Arc::new(bough_io::ReadOnlyStorage::new(Arc::new(
        PreadStorage::new(root)?,
    ))))
}

/// Reads and replays a manifest or archive file.
pub fn read_manifest(storage: &dyn Storage, path: &str) -> Result<ManifestState, String> {
    replay_manifest(storage, path)
        .map(|r| r.state)
        .map_err(|e| e.message)
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
