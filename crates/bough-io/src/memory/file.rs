//! An open file of a [`super::MemoryStorage`].

use std::sync::Arc;

use super::{FileData, MAX_MEMORY_FILE_LEN, MemInode, MemoryStorage, PendingWrite};
use crate::error::{IoError, IoResult};
use crate::faults::{self, FaultOp};
use crate::storage::StorageFile;

#[derive(Debug)]
pub(super) struct MemFile {
    pub(super) storage: MemoryStorage,
    pub(super) inode: Arc<MemInode>,
    pub(super) path: String,
    pub(super) writable: bool,
}

impl MemFile {
    fn writable(&self, op: &'static str) -> IoResult<()> {
        if !self.writable {
            return Err(IoError::errno(op, &self.path, libc::EBADF));
        }
        self.storage.shared.poison.check()
    }

    fn end(&self, op: &'static str, offset: u64, len: usize) -> IoResult<usize> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= MAX_MEMORY_FILE_LEN => Ok(end as usize),
            _ => Err(IoError::errno(op, &self.path, libc::EFBIG)),
        }
    }
}

impl StorageFile for MemFile {
    fn path(&self) -> &str {
        &self.path
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> IoResult<()> {
        self.storage.fault(FaultOp::Read, "read", &self.path)?;
        let cut = faults::short_read(&self.storage.shared.faults, buf.len());
        let data = self.inode.data.read();
        let src = usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(buf.len())?))
            .and_then(|range| data.current.get(range))
            .ok_or_else(|| IoError::unexpected_eof(&self.path))?;
        // An injected short read: the first transfer delivers a prefix, then the rest is
        // read again (or fails, as the plan says) — like the local backends do.
        let prefix = cut.map_or(0, |c| c.prefix.min(buf.len()));
        // `src` has exactly `buf.len()` bytes (the range above), so both halves split alike.
        let (head, tail) = buf.split_at_mut(prefix);
        let (src_head, src_tail) = src.split_at(prefix);
        head.copy_from_slice(src_head);
        if let Some(errno) = cut.and_then(|c| c.then_errno) {
            return Err(IoError::errno("read", &self.path, errno));
        }
        tail.copy_from_slice(src_tail);
        self.storage.shared.stats.add_read(buf.len());
        Ok(())
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> IoResult<()> {
        let _change = self.storage.change();
        self.writable("write")?;
        self.storage.fault(FaultOp::Write, "write", &self.path)?;
        let start = self.end("write", offset, buf.len())? - buf.len();
        let short = self
            .storage
            .shared
            .faults
            .as_ref()
            .and_then(|f| f.take_short_write(buf.len()));
        let buf = match short {
            Some(n) => buf.get(..n).unwrap_or(buf),
            None => buf,
        };
        let end = start + buf.len();
        let mut data = self.inode.data.write();
        if data.current.len() < end {
            data.current.resize(end, 0);
        }
        if let Some(dst) = data.current.get_mut(start..end) {
            dst.copy_from_slice(buf);
        }
        data.version = super::next_version();
        data.pending.push(PendingWrite::Write {
            offset: start,
            data: buf.to_vec(),
        });
        if short.is_some() {
            return Err(IoError::errno("write", &self.path, libc::EIO));
        }
        self.storage.shared.stats.add_write(buf.len());
        Ok(())
    }

    fn sync(&self) -> IoResult<()> {
        let _change = self.storage.change();
        self.storage.shared.poison.check()?;
        self.storage.sync_fault("sync", &self.path)?;
        let mut data = self.inode.data.write();
        let FileData {
            current,
            durable,
            pending,
            ..
        } = &mut *data;
        durable.clone_from(current);
        pending.clear();
        self.storage.shared.stats.add_sync();
        Ok(())
    }

    fn len(&self) -> IoResult<u64> {
        Ok(self.inode.data.read().current.len() as u64)
    }

    fn set_len(&self, len: u64) -> IoResult<()> {
        let _change = self.storage.change();
        self.writable("set_len")?;
        self.storage.fault(FaultOp::Write, "set_len", &self.path)?;
        let len = self.end("set_len", len, 0)?;
        let mut data = self.inode.data.write();
        data.current.resize(len, 0);
        data.version = super::next_version();
        data.pending.push(PendingWrite::SetLen(len));
        Ok(())
    }

    fn preallocate(&self, offset: u64, len: u64) -> IoResult<()> {
        let _change = self.storage.change();
        self.writable("preallocate")?;
        self.storage
            .fault(FaultOp::Write, "preallocate", &self.path)?;
        // Nothing to reserve in memory; only the range is checked.
        match offset.checked_add(len) {
            Some(end) if end <= MAX_MEMORY_FILE_LEN => Ok(()),
            _ => Err(IoError::errno("preallocate", &self.path, libc::EFBIG)),
        }
    }
}
