//! A storage backend that refuses every change: what a read-only store opens through, so
//! no code path of a reader — recovery, GC, expiry, a tail truncation — can modify or
//! delete a byte, whatever the layers above it try.

use std::sync::Arc;

use crate::error::{IoError, IoResult};
use crate::stats::IoStats;
use crate::storage::{BackendKind, FileStamp, OpenOptions, Storage, StorageFile};

/// Wraps a backend: reads go through, every write, create, rename, delete or truncation
/// fails with [`IoError::ReadOnly`] (kind `InvalidArgument`). A file's `sync` goes through:
/// it changes no byte, and a reader uses it to make durable the manifest bytes it read
/// before a writer's own `fdatasync` of them finished.
#[derive(Debug, Clone)]
pub struct ReadOnlyStorage {
    inner: Arc<dyn Storage>,
}

impl ReadOnlyStorage {
    /// A read-only view of `inner`.
    pub fn new(inner: Arc<dyn Storage>) -> Self {
        ReadOnlyStorage { inner }
    }
}

fn refuse<T>(op: &'static str, path: &str) -> IoResult<T> {
    Err(IoError::ReadOnly {
        op,
        path: path.to_string(),
    })
}

impl Storage for ReadOnlyStorage {
    fn kind(&self) -> BackendKind {
        self.inner.kind()
    }

    fn open(&self, path: &str, opts: OpenOptions) -> IoResult<Arc<dyn StorageFile>> {
        if opts.write || opts.create || opts.create_new {
            return refuse("open for writing", path);
        }
        let file = self.inner.open(path, OpenOptions::read())?;
        Ok(Arc::new(ReadOnlyFile { inner: file }))
    }

    fn read_file(&self, path: &str, max_len: u64) -> IoResult<Vec<u8>> {
        self.inner.read_file(path, max_len)
    }

    fn write_atomic(&self, path: &str, _bytes: &[u8]) -> IoResult<()> {
        refuse("replace", path)
    }

    fn write_atomic_entry_unsynced(&self, path: &str, _bytes: &[u8]) -> IoResult<()> {
        refuse("replace", path)
    }

    fn stage_atomic(&self, path: &str, _bytes: &[u8]) -> IoResult<crate::Staged> {
        refuse("replace", path)
    }

    fn install_staged(&self, staged: crate::Staged) -> IoResult<()> {
        refuse("replace", staged.path())
    }

    fn create_new(&self, path: &str, _bytes: &[u8]) -> IoResult<()> {
        refuse("create", path)
    }

    fn delete(&self, path: &str) -> IoResult<()> {
        refuse("delete", path)
    }

    fn list(&self, dir: &str) -> IoResult<Vec<String>> {
        self.inner.list(dir)
    }

    fn list_dirs(&self) -> IoResult<Vec<String>> {
        self.inner.list_dirs()
    }

    fn create_dir(&self, dir: &str) -> IoResult<()> {
        refuse("create directory", dir)
    }

    fn remove_dir(&self, dir: &str) -> IoResult<()> {
        refuse("remove directory", dir)
    }

    fn sync_dir(&self, dir: &str) -> IoResult<()> {
        refuse("sync directory", dir)
    }

    fn file_len(&self, path: &str) -> IoResult<u64> {
        self.inner.file_len(path)
    }

    fn cheap_stamp(&self, path: &str) -> IoResult<Option<FileStamp>> {
        self.inner.cheap_stamp(path)
    }

    fn stats(&self) -> &IoStats {
        self.inner.stats()
    }
}

/// A file of a [`ReadOnlyStorage`].
#[derive(Debug)]
struct ReadOnlyFile {
    inner: Arc<dyn StorageFile>,
}

impl StorageFile for ReadOnlyFile {
    fn path(&self) -> &str {
        self.inner.path()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> IoResult<()> {
        self.inner.read_at(offset, buf)
    }

    fn read_batch(&self, reqs: &mut [(u64, &mut [u8])]) -> IoResult<()> {
        self.inner.read_batch(reqs)
    }

    fn write_at(&self, _offset: u64, _buf: &[u8]) -> IoResult<()> {
        refuse("write", self.inner.path())
    }

    fn write_batch(&self, _reqs: &[(u64, &[u8])]) -> IoResult<()> {
        refuse("write", self.inner.path())
    }

    fn sync(&self) -> IoResult<()> {
        self.inner.sync()
    }

    fn len(&self) -> IoResult<u64> {
        self.inner.len()
    }

    fn set_len(&self, _len: u64) -> IoResult<()> {
        refuse("truncate", self.inner.path())
    }

    fn preallocate(&self, _offset: u64, _len: u64) -> IoResult<()> {
        refuse("preallocate", self.inner.path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorKind, MemoryStorage};

    #[test]
    fn every_change_is_refused_and_reads_go_through() {
        let mem = MemoryStorage::new();
        mem.create_dir("p").expect("dir");
        mem.create_new("p/a", b"hello").expect("create");
        let ro = ReadOnlyStorage::new(Arc::new(mem.clone()));
        assert_eq!(ro.read_file("p/a", 100).expect("read"), b"hello");
        assert_eq!(ro.list("p").expect("list"), vec!["a".to_string()]);
        let refused = [
            ro.write_atomic("p/a", b"x").err(),
            ro.create_new("p/b", b"x").err(),
            ro.delete("p/a").err(),
            ro.create_dir("q").err(),
            ro.remove_dir("p").err(),
            ro.sync_dir("p").err(),
            ro.open("p/a", OpenOptions::write_create()).err(),
        ];
        for e in refused {
            let e = e.expect("refused");
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
            assert!(e.to_string().contains("read-only"), "{e}");
        }
        let f = ro.open("p/a", OpenOptions::read()).expect("open");
        assert!(f.write_at(0, b"x").is_err());
        assert!(f.set_len(0).is_err());
        assert!(f.preallocate(0, 4096).is_err());
        f.sync().expect("a sync changes nothing and is allowed");
        let mut buf = [0u8; 5];
        f.read_at(0, &mut buf).expect("read");
        assert_eq!(&buf, b"hello");
        assert_eq!(mem.read_file("p/a", 100).expect("read"), b"hello");
        assert!(!mem.list_dirs().expect("dirs").contains(&"q".to_string()));
    }
}
