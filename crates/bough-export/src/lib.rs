//! Bough: the export stream (version 1) — a branch's entries in key order, streamed, each
//! record checksummed, with a trailer that counts them and checksums the whole stream. The
//! format is specified in `docs/format.md` ("Export stream (version 1)"); stores move across
//! incompatible format versions by `bough export` from the old and `bough import` into the
//! new (the commands live in `bough-cli`).
//!
//! A crate of its own, with no I/O beyond `Read`/`Write` and no dependency on the engine, so
//! the fuzz target `export_stream` (in `fuzz/`) builds the very reader `bough import` uses
//! without building the store. The reader never allocates from a length it has not bounded:
//! keys and values grow only as their bytes arrive.
//!
//! ```text
//! header   magic "BOUGHEXP" · version u32 = 1 · flags u32 = 0 · exported_at_ms u64 ·
//!          source_version u64 · partition (u8 len + bytes) · branch (u8 len + bytes) ·
//!          checksum u64
//! entry    kind u8 = 1 · key_len u32 · value_len u32 · timestamp u64 · expire_at u64 ·
//!          key · value · checksum u64
//! trailer  kind u8 = 2 · count u64 · stream_checksum u64 · checksum u64
//! ```
//!
//! Integers are little-endian; every checksum is CRC-64/NVME through
//! `bough_manifest::checksum` with its own domain tag.

// Library code returns errors, never panics on input (tests may unwrap).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing
    )
)]

use std::io::{self, Read, Write};

use bough_manifest::checksum::{Checksum, Domain, checksum};

/// First bytes of every export stream.
pub const MAGIC: [u8; 8] = *b"BOUGHEXP";
/// The version this code writes and reads.
pub const VERSION: u32 = 1;
/// Longest key a stream may carry (the largest page size / 8 is 8 KiB; this bound only
/// keeps a corrupt length from allocating).
pub const MAX_KEY_LEN: u32 = 64 * 1024;
/// Longest value a stream may carry: the store's largest value (1 GiB; `bough-cli` checks
/// at compile time that the two agree). Values grow as their bytes arrive, so a corrupt
/// length near this bound allocates nothing up front.
pub const MAX_VALUE_LEN: u32 = 1 << 30;

const KIND_ENTRY: u8 = 1;
const KIND_TRAILER: u8 = 2;
const HEADER_FIXED: usize = 32;
const ENTRY_FIXED: usize = 25;
/// Bytes of the trailer record.
pub const TRAILER_LEN: usize = 25;

const D_HEADER: Domain = Domain::Other("bough/export-header");
const D_ENTRY: Domain = Domain::Other("bough/export-entry");
const D_STREAM: Domain = Domain::Other("bough/export-stream");
const D_TRAILER: Domain = Domain::Other("bough/export-trailer");

/// What the header says about the stream's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportHeader {
    /// When the export started (ms since the epoch).
    pub exported_at_ms: u64,
    /// The commit version of the branch that was exported.
    pub source_version: u64,
    /// The source partition (`table.partition`).
    pub partition: String,
    /// The source branch.
    pub branch: String,
}

/// One key with its value and metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportEntry {
    /// The key (1 ..= [`MAX_KEY_LEN`] bytes).
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// The user timestamp.
    pub timestamp: u64,
    /// Expiry in ms since the epoch; 0 = never.
    pub expire_at: u64,
}

/// Why a stream was refused, with the byte offset where it went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamError {
    /// Offset of the record or field at fault.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

impl std::fmt::Display for StreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "export stream, byte {}: {}", self.offset, self.reason)
    }
}

impl ExportHeader {
    /// The header's bytes.
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        let part = self.partition.as_bytes();
        let branch = self.branch.as_bytes();
        if part.is_empty() || part.len() > 255 || branch.is_empty() || branch.len() > 255 {
            return Err("partition and branch names must be 1 to 255 bytes".into());
        }
        let mut b = Vec::with_capacity(HEADER_FIXED + part.len() + branch.len() + 10);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&VERSION.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&self.exported_at_ms.to_le_bytes());
        b.extend_from_slice(&self.source_version.to_le_bytes());
        b.push(part.len() as u8);
        b.extend_from_slice(part);
        b.push(branch.len() as u8);
        b.extend_from_slice(branch);
        let sum = checksum(D_HEADER, &b);
        b.extend_from_slice(&sum.to_le_bytes());
        Ok(b)
    }
}

impl ExportEntry {
    /// The entry record's bytes.
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        let (k, v) = (self.key.len(), self.value.len());
        if k == 0 || k > MAX_KEY_LEN as usize {
            return Err(format!("key of {k} bytes is outside 1..={MAX_KEY_LEN}"));
        }
        if v > MAX_VALUE_LEN as usize {
            return Err(format!("value of {v} bytes is above {MAX_VALUE_LEN}"));
        }
        let mut b = Vec::with_capacity(ENTRY_FIXED + k + v + 8);
        b.push(KIND_ENTRY);
        b.extend_from_slice(&(k as u32).to_le_bytes());
        b.extend_from_slice(&(v as u32).to_le_bytes());
        b.extend_from_slice(&self.timestamp.to_le_bytes());
        b.extend_from_slice(&self.expire_at.to_le_bytes());
        b.extend_from_slice(&self.key);
        b.extend_from_slice(&self.value);
        let sum = checksum(D_ENTRY, &b);
        b.extend_from_slice(&sum.to_le_bytes());
        Ok(b)
    }
}

/// Writes a stream: the header on creation, entries in strictly increasing key order, the
/// trailer on [`finish`](Self::finish).
#[derive(Debug)]
pub struct StreamWriter<W: Write> {
    w: W,
    stream: Checksum,
    count: u64,
    bytes: u64,
    last: Option<Vec<u8>>,
}

fn io_err(e: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e)
}

impl<W: Write> StreamWriter<W> {
    /// Starts a stream.
    pub fn new(mut w: W, header: &ExportHeader) -> io::Result<Self> {
        let h = header.encode().map_err(io_err)?;
        w.write_all(&h)?;
        let mut stream = Checksum::new(D_STREAM);
        stream.update(&h);
        Ok(StreamWriter {
            w,
            stream,
            count: 0,
            bytes: h.len() as u64,
            last: None,
        })
    }

    /// Appends an entry.
    pub fn entry(&mut self, e: &ExportEntry) -> io::Result<()> {
        if self.last.as_ref().is_some_and(|l| *l >= e.key) {
            return Err(io_err(
                "entries must come in strictly increasing key order".into(),
            ));
        }
        let b = e.encode().map_err(io_err)?;
        self.w.write_all(&b)?;
        self.stream.update(&b);
        self.count += 1;
        self.bytes += b.len() as u64;
        self.last = Some(e.key.clone());
        Ok(())
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Entries written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Writes the trailer and flushes; returns the writer and the entry count.
    pub fn finish(mut self) -> io::Result<(W, u64)> {
        let mut t = Vec::with_capacity(TRAILER_LEN);
        t.push(KIND_TRAILER);
        t.extend_from_slice(&self.count.to_le_bytes());
        t.extend_from_slice(&self.stream.finish().to_le_bytes());
        let sum = checksum(D_TRAILER, &t);
        t.extend_from_slice(&sum.to_le_bytes());
        self.w.write_all(&t)?;
        self.w.flush()?;
        Ok((self.w, self.count))
    }
}

/// Reads a stream, verifying as it goes: [`next`](Self::next) yields entries and returns
/// `None` only after a trailer whose count and checksums match, followed by the end.
#[derive(Debug)]
pub struct StreamReader<R: Read> {
    r: R,
    stream: Checksum,
    offset: u64,
    count: u64,
    last: Option<Vec<u8>>,
    done: bool,
}

impl<R: Read> StreamReader<R> {
    fn fail<T>(&self, at: u64, reason: impl Into<String>) -> Result<T, StreamError> {
        Err(StreamError {
            offset: at,
            reason: reason.into(),
        })
    }

    fn read(&mut self, buf: &mut [u8], what: &str) -> Result<(), StreamError> {
        let at = self.offset;
        match read_full(&mut self.r, buf) {
            Ok(n) if n == buf.len() => {
                self.offset += n as u64;
                Ok(())
            }
            Ok(n) => self.fail(
                at + n as u64,
                format!("the stream ends inside {what}: it was cut short (no trailer)"),
            ),
            Err(e) => self.fail(at, format!("read error in {what}: {e}")),
        }
    }

    fn read_vec(&mut self, len: usize, what: &str) -> Result<Vec<u8>, StreamError> {
        let at = self.offset;
        let mut v = Vec::with_capacity(len.min(1 << 20));
        match (&mut self.r).take(len as u64).read_to_end(&mut v) {
            Ok(n) if n == len => {
                self.offset += n as u64;
                Ok(v)
            }
            Ok(n) => self.fail(
                at + n as u64,
                format!("the stream ends inside {what}: it was cut short (no trailer)"),
            ),
            Err(e) => self.fail(at, format!("read error in {what}: {e}")),
        }
    }

    /// Reads and checks the header.
    pub fn open(r: R) -> Result<(Self, ExportHeader), StreamError> {
        let mut s = StreamReader {
            r,
            stream: Checksum::new(D_STREAM),
            offset: 0,
            count: 0,
            last: None,
            done: false,
        };
        let mut fixed = [0u8; HEADER_FIXED];
        s.read(&mut fixed, "the header")?;
        if fixed[..8] != MAGIC {
            return s.fail(0, "not a Bough export stream (bad magic)");
        }
        let version = u32_at(&fixed, 8);
        if version != VERSION {
            return s.fail(
                8,
                format!("export version {version}; this bough reads version {VERSION}"),
            );
        }
        if u32_at(&fixed, 12) != 0 {
            return s.fail(12, "unknown header flags");
        }
        let mut all = fixed.to_vec();
        let mut names = Vec::new();
        for what in ["the partition name", "the branch name"] {
            let mut len = [0u8; 1];
            s.read(&mut len, what)?;
            if len[0] == 0 {
                return s.fail(s.offset - 1, format!("{what} is empty"));
            }
            let bytes = s.read_vec(usize::from(len[0]), what)?;
            all.push(len[0]);
            all.extend_from_slice(&bytes);
            names.push(String::from_utf8(bytes).map_err(|_| StreamError {
                offset: s.offset,
                reason: format!("{what} is not UTF-8"),
            })?);
        }
        let mut sum = [0u8; 8];
        s.read(&mut sum, "the header checksum")?;
        if u64::from_le_bytes(sum) != checksum(D_HEADER, &all) {
            return s.fail(all.len() as u64, "header checksum mismatch");
        }
        all.extend_from_slice(&sum);
        s.stream.update(&all);
        let branch = names.pop().unwrap_or_default();
        let partition = names.pop().unwrap_or_default();
        let header = ExportHeader {
            exported_at_ms: u64_at(&fixed, 16),
            source_version: u64_at(&fixed, 24),
            partition,
            branch,
        };
        Ok((s, header))
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next entry; `None` after a valid trailer at the end of the stream.
    pub fn next_entry(&mut self) -> Result<Option<ExportEntry>, StreamError> {
        if self.done {
            return Ok(None);
        }
        let start = self.offset;
        let mut kind = [0u8; 1];
        self.read(&mut kind, "a record")?;
        match kind[0] {
            KIND_ENTRY => {}
            KIND_TRAILER => {
                let mut rest = [0u8; TRAILER_LEN - 1];
                self.read(&mut rest, "the trailer")?;
                let mut t = vec![KIND_TRAILER];
                t.extend_from_slice(&rest);
                if u64_at(&t, 17) != checksum(D_TRAILER, t.get(..17).unwrap_or_default()) {
                    return self.fail(start, "trailer checksum mismatch");
                }
                let count = u64_at(&t, 1);
                if count != self.count {
                    return self.fail(
                        start,
                        format!(
                            "the trailer counts {count} entries but the stream holds {}",
                            self.count
                        ),
                    );
                }
                if u64_at(&t, 9) != self.stream.finish() {
                    return self.fail(
                        start,
                        "stream checksum mismatch: records were changed, dropped or reordered",
                    );
                }
                let mut extra = [0u8; 1];
                match read_full(&mut self.r, &mut extra) {
                    Ok(0) => {}
                    Ok(_) => return self.fail(self.offset, "bytes after the trailer"),
                    Err(e) => return self.fail(self.offset, format!("read error: {e}")),
                }
                self.done = true;
                return Ok(None);
            }
            k => {
                return self.fail(
                    start,
                    format!("unknown record kind {k} (not an entry or trailer)"),
                );
            }
        }
        let mut fixed = [0u8; ENTRY_FIXED];
        fixed[0] = KIND_ENTRY;
        let mut rest = [0u8; ENTRY_FIXED - 1];
        self.read(&mut rest, "an entry header")?;
        fixed[1..].copy_from_slice(&rest);
        let (klen, vlen) = (u32_at(&fixed, 1), u32_at(&fixed, 5));
        if klen == 0 || klen > MAX_KEY_LEN {
            return self.fail(
                start + 1,
                format!("key length {klen} is outside 1..={MAX_KEY_LEN}"),
            );
        }
        if vlen > MAX_VALUE_LEN {
            return self.fail(
                start + 5,
                format!("value length {vlen} is above {MAX_VALUE_LEN}"),
            );
        }
        let key = self.read_vec(klen as usize, "a key")?;
        let value = self.read_vec(vlen as usize, "a value")?;
        let mut sum = [0u8; 8];
        self.read(&mut sum, "an entry checksum")?;
        let mut c = Checksum::new(D_ENTRY);
        c.update(&fixed).update(&key).update(&value);
        if u64::from_le_bytes(sum) != c.finish() {
            return self.fail(start, format!("entry {} checksum mismatch", self.count));
        }
        if self.last.as_ref().is_some_and(|l| *l >= key) {
            return self.fail(start, format!("entry {} is out of key order", self.count));
        }
        self.stream
            .update(&fixed)
            .update(&key)
            .update(&value)
            .update(&sum);
        self.count += 1;
        self.last = Some(key.clone());
        Ok(Some(ExportEntry {
            key,
            value,
            timestamp: u64_at(&fixed, 9),
            expire_at: u64_at(&fixed, 17),
        }))
    }
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        let (_, rest) = buf.split_at_mut(n);
        match r.read(rest) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    // Callers pass fixed-size records; a short one reads as zero and fails its checksum.
    let mut a = [0u8; 4];
    if let Some(field) = b.get(at..at + 4) {
        a.copy_from_slice(field);
    }
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(field) = b.get(at..at + 8) {
        a.copy_from_slice(field);
    }
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (ExportHeader, Vec<ExportEntry>) {
        let h = ExportHeader {
            exported_at_ms: 5,
            source_version: 9,
            partition: "t.0".into(),
            branch: "main".into(),
        };
        let e = vec![
            ExportEntry {
                key: b"a".to_vec(),
                value: b"1".to_vec(),
                timestamp: 1,
                expire_at: 0,
            },
            ExportEntry {
                key: b"b".to_vec(),
                value: vec![7; 20_000],
                timestamp: 2,
                expire_at: 99,
            },
            ExportEntry {
                key: vec![0xff, 0],
                value: vec![],
                timestamp: 3,
                expire_at: 0,
            },
        ];
        (h, e)
    }

    fn write(h: &ExportHeader, es: &[ExportEntry]) -> Vec<u8> {
        let mut w = StreamWriter::new(Vec::new(), h).unwrap();
        for e in es {
            w.entry(e).unwrap();
        }
        w.finish().unwrap().0
    }

    fn read_all(bytes: &[u8]) -> Result<(ExportHeader, Vec<ExportEntry>), StreamError> {
        let (mut r, h) = StreamReader::open(bytes)?;
        let mut out = Vec::new();
        while let Some(e) = r.next_entry()? {
            out.push(e);
        }
        Ok((h, out))
    }

    #[test]
    fn round_trip() {
        let (h, es) = sample();
        let bytes = write(&h, &es);
        assert_eq!(read_all(&bytes).unwrap(), (h.clone(), es));
        assert!(read_all(&write(&h, &[])).unwrap().1.is_empty());
    }

    #[test]
    fn every_flipped_byte_and_every_cut_is_caught() {
        let (h, es) = sample();
        let bytes = write(&h, &es[..1]);
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(read_all(&b).is_err(), "flip at {i} not caught");
        }
        let bytes = write(&h, &es);
        for cut in [0, 7, 40, bytes.len() / 2, bytes.len() - 25, bytes.len() - 1] {
            let e = read_all(&bytes[..cut]).unwrap_err();
            assert!(
                e.reason.contains("cut short") || e.reason.contains("magic"),
                "{cut}: {e}"
            );
        }
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(
            read_all(&extra)
                .unwrap_err()
                .reason
                .contains("after the trailer")
        );
    }

    #[test]
    fn dropped_and_reordered_records_are_caught() {
        let (h, es) = sample();
        let full = write(&h, &es);
        let hlen = h.encode().unwrap().len();
        let e0 = es[0].encode().unwrap().len();
        // Drop the first entry: the stream checksum and count no longer match.
        let mut dropped = full[..hlen].to_vec();
        dropped.extend_from_slice(&full[hlen + e0..]);
        assert!(read_all(&dropped).is_err());
        // Out of order entries are refused by the writer and the reader.
        let mut w = StreamWriter::new(Vec::new(), &h).unwrap();
        w.entry(&es[1]).unwrap();
        assert!(w.entry(&es[0]).is_err());
        let mut swapped = full[..hlen].to_vec();
        let e1 = es[1].encode().unwrap();
        swapped.extend_from_slice(&e1);
        swapped.extend_from_slice(&es[0].encode().unwrap());
        assert!(read_all(&swapped).unwrap_err().reason.contains("order"));
    }

    /// The fuzz target's seeds are real `bough export` outputs behind two control bytes;
    /// they must stay valid streams, or the fuzzer starts from nothing but noise.
    #[test]
    fn the_fuzz_seeds_are_valid_streams() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/export_stream");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            assert_eq!(bytes[..2], [0x7f, 0], "{}: control bytes", path.display());
            let (h, _) =
                read_all(&bytes[2..]).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(!h.branch.is_empty());
            seen += 1;
        }
        assert!(seen >= 2, "only {seen} seeds in {}", dir.display());
    }

    #[test]
    fn header_is_checked() {
        let (h, _) = sample();
        let mut b = write(&h, &[]);
        b[8] = 2;
        assert!(read_all(&b).unwrap_err().reason.contains("version 2"));
        assert!(
            read_all(b"NOTBOUGH-and-some-more-bytes-here-to-fill")
                .unwrap_err()
                .reason
                .contains("magic")
        );
    }
}
