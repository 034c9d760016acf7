//! An open file of a local backend: contents move through its engine (pread or io_uring).

use std::fs::File;
use std::sync::Arc;

use super::{Local, fallocate_keep_size};
use crate::error::{IoError, IoResult};
use crate::faults::FaultOp;
use crate::storage::StorageFile;

/// An open local file.
#[derive(Debug)]
pub(super) struct LocalFile {
    pub(super) local: Arc<Local>,
    pub(super) file: File,
    pub(super) path: String,
    pub(super) writable: bool,
}

impl LocalFile {
    fn writable(&self, op: &'static str) -> IoResult<()> {
        if !self.writable {
            return Err(IoError::errno(op, &self.path, libc::EBADF));
        }
        self.local.poison.check()
    }
}

impl StorageFile for LocalFile {
    fn path(&self) -> &str {
        &self.path
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> IoResult<()> {
        self.local
            .read_into(&self.file, &self.path, &mut [(offset, buf)])
    }

    fn read_batch(&self, reqs: &mut [(u64, &mut [u8])]) -> IoResult<()> {
        self.local.read_into(&self.file, &self.path, reqs)
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> IoResult<()> {
        self.writable("write")?;
        self.local
            .write_from(&self.file, &self.path, &[(offset, buf)])
    }

    fn write_batch(&self, reqs: &[(u64, &[u8])]) -> IoResult<()> {
        self.writable("write")?;
        self.local.write_from(&self.file, &self.path, reqs)
    }

    fn sync(&self) -> IoResult<()> {
        self.local.sync_file(&self.file, &self.path)
    }

    fn len(&self) -> IoResult<u64> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| IoError::os("stat", &self.path, e))
    }

    fn set_len(&self, len: u64) -> IoResult<()> {
        self.writable("set_len")?;
        self.local.fault(FaultOp::Write, "set_len", &self.path)?;
        self.file
            .set_len(len)
            .map_err(|e| IoError::os("set_len", &self.path, e))
    }

    fn preallocate(&self, offset: u64, len: u64) -> IoResult<()> {
        self.writable("preallocate")?;
        self.local
            .fault(FaultOp::Write, "preallocate", &self.path)?;
        if len == 0 {
            return Ok(());
        }
        fallocate_keep_size(&self.file, offset, len)
            .map_err(|e| IoError::os("preallocate", &self.path, e))
    }
}
