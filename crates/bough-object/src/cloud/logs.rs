//! Log files (`wal_*`) on an object store. Objects cannot be appended to, so a log file is
//! a sequence of immutable *segments* `<log>.seg<n>` (`n` = 0, 1, … with no gap), each
//! created with create-if-absent: creating the file uploads an empty segment 0 (so a file
//! exists from its creation, as on a disk, and a name is never taken twice), and each
//! `sync` uploads the bytes written since the last one as the next segment. Offsets in the
//! log are offsets in the concatenation of its segments, so a manifest's `LOG` reference
//! means the same bytes on every backend.
//!
//! **Fencing.** A new term replays the previous term's logs, then (before sealing the
//! previous manifest) creates a *fence* segment ([`FENCE`]) right after the last one it
//! read in each of them. From then on the old writer's next segment fails its
//! precondition, so it can acknowledge no commit the new term did not replay. If the fence
//! finds its number taken (the old writer logged one more commit), the takeover starts over
//! and reads it.

use super::*;

/// Most segments one log file may have (a guard against hostile listings).
pub(super) const MAX_SEGMENTS: u32 = 1 << 20;

/// Largest log file held or read back (the log writer seals files far below this).
const MAX_LOG_BYTES: u64 = 1 << 32;

const SEGMENT_INFIX: &str = ".seg";

/// The bytes of a fence segment: never a segment the log writer uploads (those are empty,
/// or records from a 4 KiB boundary padded to one, so a multiple of 4 KiB long).
pub(super) const FENCE: &[u8; 16] = b"BOUGH-LOG-FENCE\n";

/// The object key of segment `n` of the log file at `path`.
pub(super) fn segment_key(path: &str, n: u32) -> String {
    format!("{path}{SEGMENT_INFIX}{n}")
}

/// The log file name and number of segment object name `name`, if it is one: a log file
/// name, `.seg`, and a decimal number below [`MAX_SEGMENTS`] with no leading zero.
pub(super) fn parse_segment(name: &str) -> Option<(&str, u32)> {
    let (log, n) = name.rsplit_once(SEGMENT_INFIX)?;
    let digits_ok = !n.is_empty()
        && n.len() <= 7
        && n.bytes().all(|b| b.is_ascii_digit())
        && (n.len() == 1 || !n.starts_with('0'));
    if !digits_ok {
        return None;
    }
    let n: u32 = n.parse().ok().filter(|&n| n < MAX_SEGMENTS)?;
    matches!(parse_file_name(log), Ok(FileKind::Log(_))).then_some((log, n))
}

/// An open log file: the bytes of its segments, then what was written since.
#[derive(Debug)]
pub(super) struct LogFile {
    state: Mutex<LogState>,
}

#[derive(Debug, Default)]
struct LogState {
    bytes: Vec<u8>,
    /// Bytes already in segments (immutable from then on).
    synced: u64,
    /// The number of the next segment.
    next: u32,
    /// A fence segment ends the file: a newer term took the branch over.
    fenced: bool,
}

/// The sizes of a log file's segments in number order, as listed.
struct Segments(Vec<u64>);

impl LogFile {
    pub(super) fn read_at(&self, path: &str, offset: u64, buf: &mut [u8]) -> IoResult<()> {
        let st = self.state.lock();
        let src = usize::try_from(offset)
            .ok()
            .and_then(|o| st.bytes.get(o..o.checked_add(buf.len())?))
            .ok_or_else(|| IoError::unexpected_eof(path))?;
        buf.copy_from_slice(src);
        Ok(())
    }

    /// Writes into the part not uploaded yet; bytes already in a segment never change.
    pub(super) fn write_at(&self, path: &str, offset: u64, buf: &[u8]) -> IoResult<()> {
        let mut st = self.state.lock();
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= MAX_LOG_BYTES)
            .ok_or_else(|| IoError::errno("write", path, libc::EFBIG))?;
        if offset < st.synced {
            return Err(immutable(path, offset));
        }
        if buf.is_empty() {
            return Ok(());
        }
        let (o, e) = (offset as usize, end as usize);
        if st.bytes.len() < e {
            st.bytes.resize(e, 0);
        }
        if let Some(dst) = st.bytes.get_mut(o..e) {
            dst.copy_from_slice(buf);
        }
        Ok(())
    }

    pub(super) fn set_len(&self, path: &str, len: u64) -> IoResult<()> {
        let mut st = self.state.lock();
        if len < st.synced || len > MAX_LOG_BYTES {
            return Err(immutable(path, len));
        }
        st.bytes.resize(len as usize, 0);
        Ok(())
    }

    pub(super) fn len(&self) -> u64 {
        self.state.lock().bytes.len() as u64
    }
}

fn immutable(path: &str, offset: u64) -> IoError {
    IoError::InvalidArgument {
        what: format!(
            "{path}: offset {offset} lies in an uploaded log segment, which is never rewritten"
        ),
    }
}

impl Inner {
    /// Lists the segments of the log file at `path`. A gap in their numbers is
    /// `Corruption` naming the missing segment; none at all is `NotFound`.
    fn log_segments(&self, path: &str) -> IoResult<Segments> {
        let numbers = self.segment_numbers(path)?;
        if numbers.is_empty() {
            return Err(IoError::NotFound { path: path.into() });
        }
        let mut sizes = Vec::with_capacity(numbers.len());
        for (want, (n, size)) in numbers.into_iter().enumerate() {
            if n as usize != want {
                return Err(IoError::corruption(
                    segment_key(path, want as u32),
                    0,
                    format!("log segment {want} is missing, segment {n} exists"),
                ));
            }
            sizes.push(size);
        }
        Ok(Segments(sizes))
    }

    /// Every segment of `path` in the store, by number, with its size.
    fn segment_numbers(&self, path: &str) -> IoResult<BTreeMap<u32, u64>> {
        let prefix = format!("{path}{SEGMENT_INFIX}");
        let name = path.rsplit('/').next().unwrap_or(path);
        let mut out = BTreeMap::new();
        let mut after: Option<String> = None;
        loop {
            let page = self
                .retry
                .simple("list", || {
                    self.store.list(&prefix, true, after.as_deref(), 1000)
                })
                .map_err(|e| obj_err(path, e))?;
            for o in page.objects {
                let key_name = o.key.rsplit('/').next().unwrap_or(&o.key);
                if let Some((log, n)) = parse_segment(key_name)
                    && log == name
                {
                    out.insert(n, o.size);
                }
            }
            if out.len() > MAX_SEGMENTS as usize {
                return Err(IoError::corruption(
                    path,
                    0,
                    format!("log file has more than {MAX_SEGMENTS} segments"),
                ));
            }
            match page.next {
                Some(n) => after = Some(n),
                None => return Ok(out),
            }
        }
    }

    /// Downloads segment `n` of `path`, which the listing says is `size` bytes.
    fn get_segment(&self, path: &str, n: u32, size: u64) -> IoResult<Vec<u8>> {
        let key = segment_key(path, n);
        let (body, _) = self
            .retry
            .simple("get", || get_full(self.store.as_ref(), &key))
            .map_err(|e| obj_err(&key, e))?;
        if body.len() as u64 != size {
            return Err(IoError::corruption(
                key,
                0,
                format!("segment is {} bytes, listed as {size}", body.len()),
            ));
        }
        Ok(body)
    }

    /// Downloads the log file at `path` (its segments up to a fence), at most `max_len`
    /// bytes, and notes how many segments this instance read (where a takeover fences).
    fn read_log(&self, path: &str, max_len: u64) -> IoResult<LogState> {
        let segments = self.log_segments(path)?;
        let limit = max_len.min(MAX_LOG_BYTES);
        let listed: u64 = segments.0.iter().sum();
        let mut bytes = Vec::with_capacity(listed.min(limit) as usize);
        let mut fenced = false;
        let mut count = 0u32;
        for (n, &size) in segments.0.iter().enumerate() {
            if (bytes.len() as u64).saturating_add(size) > limit && size != FENCE.len() as u64 {
                return Err(IoError::corruption(
                    path,
                    max_len,
                    format!("log file is over {max_len} bytes, the limit"),
                ));
            }
            let body = self.get_segment(path, n as u32, size)?;
            if body.as_slice() == FENCE.as_slice() {
                fenced = true;
                break;
            }
            bytes.extend_from_slice(&body);
            count += 1;
        }
        self.stats.add_read(bytes.len());
        self.log_seen
            .lock()
            .entry(path.to_string())
            .and_modify(|s| *s = (*s).min(count))
            .or_insert(count);
        Ok(LogState {
            synced: bytes.len() as u64,
            bytes,
            next: count,
            fenced,
        })
    }

    /// Opens the log file at `path`: shared with a handle already open for writing here,
    /// else read from its segments (or new, when created).
    pub(super) fn open_log(&self, path: &str, opts: OpenOptions) -> IoResult<Arc<LogFile>> {
        let creating = opts.create || opts.create_new;
        let writable = opts.write || creating;
        if let Some(l) = self.live_log(path) {
            if opts.create_new {
                return Err(IoError::AlreadyExists { path: path.into() });
            }
            return Ok(l);
        }
        if writable && !self.owns_lineage_of(path) {
            return Err(self.fenced(
                path,
                "this process does not own the term this log file belongs to",
            ));
        }
        if creating && !self.dir_exists(parent_of(path))? {
            return Err(IoError::NotFound {
                path: parent_of(path).into(),
            });
        }
        let state = match self.read_log(path, MAX_LOG_BYTES) {
            Ok(_) if opts.create_new => {
                return Err(IoError::AlreadyExists { path: path.into() });
            }
            Ok(st) => st,
            Err(e) if creating && e.kind() == bough_io::ErrorKind::NotFound => {
                // The file exists once its empty first segment does: a manifest may name
                // it before any record is appended.
                self.upload_data(&segment_key(path, 0), &[])?;
                LogState {
                    next: 1,
                    ..LogState::default()
                }
            }
            Err(e) => return Err(e),
        };
        let log = Arc::new(LogFile {
            state: Mutex::new(state),
        });
        if writable {
            self.logs
                .lock()
                .insert(path.to_string(), Arc::downgrade(&log));
        }
        Ok(log)
    }

    pub(super) fn live_log(&self, path: &str) -> Option<Arc<LogFile>> {
        self.logs.lock().get(path).and_then(Weak::upgrade)
    }

    /// Uploads what was written since the last sync as the next segment. A segment number
    /// already taken means a newer term fenced the file: `Fenced`, and every later sync
    /// fails too. The caller (the log writer) never retries a failed sync.
    pub(super) fn sync_log(&self, path: &str, log: &LogFile) -> IoResult<()> {
        let mut st = log.state.lock();
        if st.fenced {
            return Err(self.fenced(path, "a newer term took this branch over"));
        }
        if st.bytes.len() as u64 <= st.synced {
            return Ok(());
        }
        let key = segment_key(path, st.next);
        let from = st.synced as usize;
        let tail = st.bytes.get(from..).unwrap_or_default();
        match self.upload_data(&key, tail) {
            Ok(()) => {
                st.synced = st.bytes.len() as u64;
                st.next += 1;
                Ok(())
            }
            Err(IoError::AlreadyExists { .. }) => {
                st.fenced = true;
                Err(self.fenced(path, "a newer term took this branch over"))
            }
            Err(e) => Err(e),
        }
    }

    /// The whole log file at `path` (at most `max_len` bytes).
    pub(super) fn read_log_file(&self, path: &str, max_len: u64) -> IoResult<Vec<u8>> {
        if let Some(l) = self.live_log(path) {
            let st = l.state.lock();
            if st.bytes.len() as u64 > max_len {
                return Err(IoError::corruption(
                    path,
                    max_len,
                    format!(
                        "log file is {} bytes, longer than the limit",
                        st.bytes.len()
                    ),
                ));
            }
            return Ok(st.bytes.clone());
        }
        Ok(self.read_log(path, max_len)?.bytes)
    }

    /// The length of the log file at `path`: the bytes of its segments before a fence
    /// (only a segment of a fence's length is fetched, to tell).
    pub(super) fn log_len(&self, path: &str) -> IoResult<u64> {
        if let Some(l) = self.live_log(path) {
            return Ok(l.len());
        }
        let mut len = 0u64;
        for (n, &size) in self.log_segments(path)?.0.iter().enumerate() {
            if size == FENCE.len() as u64
                && self.get_segment(path, n as u32, size)?.as_slice() == FENCE.as_slice()
            {
                break;
            }
            len = len.saturating_add(size);
        }
        Ok(len)
    }

    /// Deletes every segment of the log file at `path`, highest first, so a crash midway
    /// leaves a prefix (still a readable log, and still unreferenced).
    pub(super) fn delete_log(&self, path: &str) -> IoResult<()> {
        let numbers = self.segment_numbers(path)?;
        for n in numbers.keys().rev() {
            let key = segment_key(path, *n);
            self.retry
                .simple("delete", || self.store.delete(&key))
                .map_err(|e| obj_err(&key, e))?;
        }
        self.log_seen.lock().remove(path);
        self.logs.lock().remove(path);
        Ok(())
    }

    /// Fences every log file of `(branch, term)` in `dir` that this instance read: a
    /// [`FENCE`] segment after the last one read. `Locked` (the takeover starts over) when
    /// that number is taken by another segment: the old writer logged a commit after the
    /// read, which the new term must replay first.
    pub(super) fn fence_logs(&self, dir: &str, branch: &str, term: u64) -> IoResult<()> {
        let seen: Vec<(String, u32)> = self
            .log_seen
            .lock()
            .iter()
            .filter(|(p, _)| parent_of(p) == dir && log_of(p, branch, term))
            .map(|(p, n)| (p.clone(), *n))
            .collect();
        for (path, n) in seen {
            let key = segment_key(&path, n);
            let out = self.upload_data(&key, FENCE);
            self.log_seen.lock().remove(&path);
            match out {
                Ok(()) => {
                    tracing::info!(log = %path, segment = n, "fenced the previous term's log")
                }
                Err(IoError::AlreadyExists { .. }) => {
                    return Err(IoError::Locked {
                        path: format!(
                            "{path} (its writer logged a commit during the takeover; retry it)"
                        ),
                    });
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Whether `path` names a log file of `(branch, term)`.
fn log_of(path: &str, branch: &str, term: u64) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    matches!(parse_file_name(name), Ok(FileKind::Log(l)) if l.branch.as_str() == branch && l.term == term)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_round_trip_and_refuse_lookalikes() {
        let log = "wal_3_main_7";
        assert_eq!(segment_key("p/wal_3_main_7", 12), "p/wal_3_main_7.seg12");
        assert_eq!(parse_segment("wal_3_main_7.seg0"), Some((log, 0)));
        assert_eq!(parse_segment("wal_3_main_7.seg12"), Some((log, 12)));
        for bad in [
            "wal_3_main_7.seg",
            "wal_3_main_7.seg01",
            "wal_3_main_7.seg-1",
            "wal_3_main_7.seg1x",
            "wal_3_main_7.seg99999999",
            "data_3_main_7.seg0",
            "wal_3_main_7",
        ] {
            assert_eq!(parse_segment(bad), None, "{bad}");
        }
    }
}
