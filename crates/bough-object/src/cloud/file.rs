//! An open file of a [`CloudStorage`](super::CloudStorage): a shared buffer while it is
//! written, an uploaded object after.

use super::*;

use super::data::DataObject;

/// An open file of a [`CloudStorage`].
#[derive(Debug)]
pub(super) struct CloudFile {
    pub(super) inner: Arc<Inner>,
    pub(super) path: String,
    pub(super) writable: bool,
    pub(super) body: FileBody,
}

#[derive(Debug)]
pub(super) enum FileBody {
    /// A buffer shared by every handle of the file.
    Buf(Arc<Buf>),
    /// An uploaded data object of this length.
    Sealed(u64),
    /// A log file: segments, then the bytes written since the last sync.
    Log(Arc<LogFile>),
}

impl CloudFile {
    pub(super) fn check_writable(&self, op: &'static str) -> IoResult<()> {
        if !self.writable {
            return Err(IoError::errno(op, &self.path, libc::EBADF));
        }
        Ok(())
    }

    /// This file as an uploaded object of `len` bytes.
    fn object(&self, len: u64) -> DataObject<'_> {
        DataObject {
            path: &self.path,
            len,
        }
    }

    pub(super) fn sealed_error(&self) -> IoError {
        IoError::InvalidArgument {
            what: format!(
                "{}: a data object is written once; it was already uploaded",
                self.path
            ),
        }
    }
}

impl StorageFile for CloudFile {
    fn path(&self) -> &str {
        &self.path
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> IoResult<()> {
        match &self.body {
            FileBody::Log(l) => l.read_at(&self.path, offset, buf)?,
            FileBody::Sealed(len) => {
                self.inner.read_data(self.object(*len), offset, buf)?;
            }
            FileBody::Buf(b) => {
                let st = b.state.read();
                match &*st {
                    BufState::Open(data) => {
                        let end = offset.checked_add(buf.len() as u64);
                        if end.is_none_or(|e| e > data.len() as u64) {
                            return Err(IoError::unexpected_eof(&self.path));
                        }
                        let o = offset as usize;
                        let src = data
                            .get(o..o + buf.len())
                            .ok_or_else(|| IoError::unexpected_eof(&self.path))?;
                        buf.copy_from_slice(src);
                    }
                    BufState::Uploaded { len } => {
                        let len = *len;
                        drop(st);
                        self.inner.read_data(self.object(len), offset, buf)?;
                    }
                }
            }
        }
        self.inner.stats.add_read(buf.len());
        Ok(())
    }

    fn write_at(&self, offset: u64, buf: &[u8]) -> IoResult<()> {
        self.check_writable("write")?;
        if let FileBody::Log(l) = &self.body {
            return l.write_at(&self.path, offset, buf);
        }
        let FileBody::Buf(b) = &self.body else {
            return Err(self.sealed_error());
        };
        let mut st = b.state.write();
        let BufState::Open(data) = &mut *st else {
            return Err(self.sealed_error());
        };
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= bough_io::memory::MAX_MEMORY_FILE_LEN)
            .ok_or_else(|| IoError::errno("write", &self.path, libc::EFBIG))?;
        if buf.is_empty() {
            return Ok(());
        }
        if (data.len() as u64) < end {
            data.resize(end as usize, 0);
        }
        if let Some(dst) = data.get_mut(offset as usize..end as usize) {
            dst.copy_from_slice(buf);
        }
        Ok(())
    }

    fn sync(&self) -> IoResult<()> {
        if let FileBody::Log(l) = &self.body {
            return match self.writable {
                true => self.inner.sync_log(&self.path, l),
                false => Ok(()),
            };
        }
        let FileBody::Buf(b) = &self.body else {
            return Ok(());
        };
        if !self.writable {
            return Ok(());
        }
        if b.kind == Kind::Data {
            let mut st = b.state.write();
            let BufState::Open(data) = &*st else {
                return Ok(());
            };
            self.inner.upload_data(&self.path, data)?;
            // The bytes are durable in the store: keep a cached copy if it fits, then free
            // the memory.
            if let Err(e) = self.inner.cache.insert(&self.path, data) {
                tracing::warn!(path = %self.path, error = %e, "could not cache an uploaded data file");
            }
            let len = data.len() as u64;
            *st = BufState::Uploaded { len };
            drop(st);
            self.inner.pending.lock().remove(&self.path);
            return Ok(());
        }
        let payload = match &*b.state.read() {
            BufState::Open(data) => data.clone(),
            BufState::Uploaded { .. } => return Ok(()),
        };
        self.inner
            .upload_envelope(&self.path, b.kind, &payload, false)
    }

    fn len(&self) -> IoResult<u64> {
        Ok(match &self.body {
            FileBody::Log(l) => l.len(),
            FileBody::Sealed(len) => *len,
            FileBody::Buf(b) => match &*b.state.read() {
                BufState::Open(d) => d.len() as u64,
                BufState::Uploaded { len } => *len,
            },
        })
    }

    fn set_len(&self, len: u64) -> IoResult<()> {
        self.check_writable("set_len")?;
        if let FileBody::Log(l) = &self.body {
            return l.set_len(&self.path, len);
        }
        let FileBody::Buf(b) = &self.body else {
            return Err(self.sealed_error());
        };
        let mut st = b.state.write();
        match &mut *st {
            BufState::Open(d) => {
                d.resize(len as usize, 0);
                Ok(())
            }
            BufState::Uploaded { len: l } if *l == len => Ok(()),
            BufState::Uploaded { .. } => Err(self.sealed_error()),
        }
    }

    fn preallocate(&self, _offset: u64, _len: u64) -> IoResult<()> {
        // Nothing to reserve: the file lives in memory until it is uploaded.
        self.check_writable("preallocate")
    }
}
