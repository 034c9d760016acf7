//! Operations on names in a local directory (open, read whole, delete, list, make and remove
//! directories, length): metadata always goes through std/libc, whatever the engine.

use std::fs::File;
use std::sync::Arc;

use super::file::LocalFile;
use super::{Local, map_os};
use crate::error::{IoError, IoResult};
use crate::faults::FaultOp;
use crate::path::{self, components};
use crate::storage::{OpenOptions, StorageFile};

pub(super) fn open(
    local: &Arc<Local>,
    path: &str,
    opts: OpenOptions,
) -> IoResult<Arc<dyn StorageFile>> {
    path::check_file(path)?;
    let creating = opts.create || opts.create_new;
    let writable = opts.write || creating;
    if writable {
        local.poison.check()?;
    }
    if creating {
        local.fault(FaultOp::Create, "open", path)?;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(writable)
        .create(opts.create && !opts.create_new)
        .create_new(opts.create_new)
        .open(local.abs(path))
        .map_err(|e| map_os("open", path, e))?;
    let meta = file.metadata().map_err(|e| IoError::os("stat", path, e))?;
    if meta.is_dir() {
        return Err(IoError::errno("open", path, libc::EISDIR));
    }
    let f = LocalFile {
        local: local.clone(),
        file,
        path: path.to_string(),
        writable,
    };
    if writable && opts.preallocate > 0 {
        f.preallocate(0, opts.preallocate)?;
    }
    Ok(Arc::new(f))
}

pub(super) fn read_file(local: &Arc<Local>, path: &str, max_len: u64) -> IoResult<Vec<u8>> {
    path::check_file(path)?;
    let file = File::open(local.abs(path)).map_err(|e| map_os("open", path, e))?;
    let meta = file.metadata().map_err(|e| IoError::os("stat", path, e))?;
    if meta.is_dir() {
        return Err(IoError::errno("read", path, libc::EISDIR));
    }
    let len = meta.len();
    if len > max_len {
        return Err(IoError::corruption(
            path,
            max_len,
            format!("file is {len} bytes, longer than the limit of {max_len}"),
        ));
    }
    let len = usize::try_from(len).map_err(|_| IoError::errno("read", path, libc::EFBIG))?;
    let mut buf = vec![0u8; len];
    local.read_whole(&file, path, &mut buf)?;
    Ok(buf)
}

pub(super) fn delete(local: &Local, path: &str) -> IoResult<()> {
    path::check_file(path)?;
    local.poison.check()?;
    local.fault(FaultOp::Delete, "delete", path)?;
    match std::fs::remove_file(local.abs(path)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(IoError::os("delete", path, e)),
    }
}

/// Names in `dir` whose type passes `want`, sorted; a missing directory lists empty.
pub(super) fn list_where(
    local: &Local,
    dir: &str,
    want: fn(&std::fs::FileType) -> bool,
) -> IoResult<Vec<String>> {
    path::check_dir(dir)?;
    let entries = match std::fs::read_dir(local.abs(dir)) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(IoError::os("list", dir, e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| IoError::os("list", dir, e))?;
        let ty = entry.file_type().map_err(|e| IoError::os("list", dir, e))?;
        if !want(&ty) {
            continue;
        }
        match entry.file_name().into_string() {
            Ok(name) => names.push(name),
            Err(name) => {
                tracing::warn!(dir, name = ?name, "skipping a file name that is not UTF-8");
            }
        }
    }
    names.sort();
    Ok(names)
}

pub(super) fn create_dir(local: &Local, dir: &str) -> IoResult<()> {
    path::check_dir(dir)?;
    if dir.is_empty() {
        return Ok(());
    }
    local.poison.check()?;
    local.fault(FaultOp::Create, "create_dir", dir)?;
    std::fs::create_dir_all(local.abs(dir)).map_err(|e| IoError::os("create_dir", dir, e))?;
    // Sync the parent of every component, so each entry on the path is durable.
    let mut parent = String::new();
    for c in components(dir) {
        local.sync_dir_entries(&parent)?;
        if !parent.is_empty() {
            parent.push('/');
        }
        parent.push_str(c);
    }
    Ok(())
}

pub(super) fn remove_dir(local: &Local, dir: &str) -> IoResult<()> {
    path::check_dir(dir)?;
    if dir.is_empty() {
        return Err(IoError::InvalidArgument {
            what: "cannot remove the root directory".into(),
        });
    }
    local.poison.check()?;
    local.fault(FaultOp::Delete, "remove_dir", dir)?;
    match std::fs::remove_dir(local.abs(dir)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(IoError::os("remove_dir", dir, e)),
    }
}

pub(super) fn file_len(local: &Local, path: &str) -> IoResult<u64> {
    path::check_file(path)?;
    let meta = std::fs::metadata(local.abs(path)).map_err(|e| map_os("stat", path, e))?;
    if meta.is_dir() {
        return Err(IoError::errno("stat", path, libc::EISDIR));
    }
    Ok(meta.len())
}
