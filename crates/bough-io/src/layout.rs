//! Data-file layout: the header page (page 0) and the frame every other page carries. Pure
//! functions on byte slices; the byte tables are in `docs/format.md ("Data files")`.
//!
//! Every page's checksum covers its own address (the file's identity salt and the page
//! index), so a page that is intact but sits in the wrong file or at the wrong position
//! (a misdirected write, a renamed file) fails validation like a torn or rotten one.

use bough_manifest::checksum::{Checksum, Domain, checksum};
use bough_names::{BranchName, FileId, MAX_BRANCH_LEN, Term};

use crate::error::{IoError, IoResult};
use crate::storage::StorageFile;

/// Bytes of the frame header in front of every page payload.
pub const FRAME_HEADER_LEN: usize = 16;
/// Smallest page size.
pub const MIN_PAGE_SIZE: u32 = 4096;
/// Largest page size.
pub const MAX_PAGE_SIZE: u32 = 65536;
/// Magic of a data file, at bytes 12..16.
pub const DATA_FILE_MAGIC: [u8; 4] = *b"BGDF";
/// The data-file header version this crate writes and reads.
pub const DATA_FILE_VERSION: u32 = 2;
/// The page frame version this crate writes and reads.
pub const FRAME_VERSION: u8 = 2;

// Header field offsets.
const H_CHECKSUM: usize = 0;
const H_VERSION: usize = 8;
const H_MAGIC: usize = 12;
const H_PAGE_SIZE: usize = 16;
const H_RESERVED: usize = 20;
const H_FILE_ID: usize = 24;
const H_TERM: usize = 32;
const H_CREATED: usize = 40;
const H_INCARNATION: usize = 48;
const H_BRANCH_LEN: usize = 56;
const H_BRANCH: usize = 57;

// Frame field offsets.
const F_CHECKSUM: usize = 0;
const F_TYPE: usize = 8;
const F_VERSION: usize = 9;
const F_RESERVED: usize = 10;
const F_LEN: usize = 12;

// The longest branch fits the length byte and the smallest page.
const _: () = assert!(MAX_BRANCH_LEN <= u8::MAX as usize);
const _: () = assert!(H_BRANCH + MAX_BRANCH_LEN <= MIN_PAGE_SIZE as usize);

/// Whether `page_size` is a power of two in `MIN_PAGE_SIZE..=MAX_PAGE_SIZE`.
pub fn validate_page_size(page_size: u32) -> IoResult<()> {
    if page_size.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&page_size) {
        Ok(())
    } else {
        Err(IoError::InvalidArgument {
            what: format!(
                "page size {page_size}: must be a power of two from {MIN_PAGE_SIZE} to \
                 {MAX_PAGE_SIZE}"
            ),
        })
    }
}

/// Byte offset of page `page_index` in a file of `page_size` pages.
pub fn page_offset(page_index: u32, page_size: u32) -> u64 {
    u64::from(page_index) * u64::from(page_size)
}

/// Largest payload of a page of `page_size` bytes.
pub fn max_payload(page_size: u32) -> usize {
    (page_size as usize).saturating_sub(FRAME_HEADER_LEN)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        a.copy_from_slice(s);
    }
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = buf.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

/// The identity of one data file hashed into every page checksum:
/// `checksum(Domain::Page, file_id LE ‖ term LE ‖ incarnation LE ‖ branch bytes)`. Computed
/// once per file. The incarnation (the writing branch's id from its creation) makes a page of
/// one incarnation of a name fail validation when read as a page of another, even under the
/// same file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileSalt(u64);

impl FileSalt {
    /// The salt of data file (`file_id`, `branch`, `term`) written by incarnation
    /// `incarnation` of the branch.
    pub fn new(file_id: FileId, branch: &BranchName, term: Term, incarnation: u64) -> Self {
        let salt = Checksum::new(Domain::Page)
            .update(&file_id.to_le_bytes())
            .update(&term.to_le_bytes())
            .update(&incarnation.to_le_bytes())
            .update(branch.as_str().as_bytes())
            .finish();
        FileSalt(salt)
    }

    /// A salt from its raw value (tests, tools).
    pub fn from_raw(raw: u64) -> Self {
        FileSalt(raw)
    }

    /// The raw value.
    pub fn get(self) -> u64 {
        self.0
    }
}

/// The header page (page 0) of a data file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFileHeader {
    /// Header version, [`DATA_FILE_VERSION`].
    pub version: u32,
    /// Page size of the file, a valid page size (see [`validate_page_size`]).
    pub page_size: u32,
    /// Id of the file within its branch.
    pub file_id: FileId,
    /// Branch that wrote the file.
    pub branch: BranchName,
    /// Term of the writer that created the file.
    pub term: Term,
    /// Incarnation of the branch that created the file (hashed into every page checksum).
    pub incarnation: u64,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
}

impl DataFileHeader {
    /// A current-version header.
    pub fn new(
        page_size: u32,
        file_id: FileId,
        branch: BranchName,
        term: Term,
        incarnation: u64,
        created_at_ms: u64,
    ) -> Self {
        DataFileHeader {
            version: DATA_FILE_VERSION,
            page_size,
            file_id,
            branch,
            term,
            incarnation,
            created_at_ms,
        }
    }

    /// The page salt of this file.
    pub fn salt(&self) -> FileSalt {
        FileSalt::new(self.file_id, &self.branch, self.term, self.incarnation)
    }

    /// The header page, exactly `page_size` bytes.
    ///
    /// # Panics
    ///
    /// If `page_size` is not a valid page size: headers are built by the engine from a
    /// validated configuration, and [`decode`](Self::decode) never yields one.
    pub fn encode(&self) -> Vec<u8> {
        assert!(
            validate_page_size(self.page_size).is_ok(),
            "DataFileHeader::encode with invalid page size {}",
            self.page_size
        );
        let mut page = vec![0u8; self.page_size as usize];
        let branch = self.branch.as_str().as_bytes();
        put(&mut page, H_VERSION, &self.version.to_le_bytes());
        put(&mut page, H_MAGIC, &DATA_FILE_MAGIC);
        put(&mut page, H_PAGE_SIZE, &self.page_size.to_le_bytes());
        put(&mut page, H_FILE_ID, &self.file_id.to_le_bytes());
        put(&mut page, H_TERM, &self.term.to_le_bytes());
        put(&mut page, H_CREATED, &self.created_at_ms.to_le_bytes());
        put(&mut page, H_INCARNATION, &self.incarnation.to_le_bytes());
        // A `BranchName` is at most MAX_BRANCH_LEN (≤ 255) bytes, checked at compile time.
        put(&mut page, H_BRANCH_LEN, &[branch.len() as u8]);
        put(&mut page, H_BRANCH, branch);
        let sum = checksum(
            Domain::DataFileHeader,
            page.get(H_VERSION..).unwrap_or_default(),
        );
        put(&mut page, H_CHECKSUM, &sum.to_le_bytes());
        page
    }

    /// Reads the page size of a header without validating the rest, so a reader knows how
    /// many bytes [`decode`](Self::decode) needs. `bytes` is the start of the file.
    pub fn peek_page_size(bytes: &[u8], path: &str) -> IoResult<u32> {
        if bytes.len() < H_BRANCH {
            return Err(IoError::corruption(
                path,
                bytes.len() as u64,
                format!("data-file header truncated at {} bytes", bytes.len()),
            ));
        }
        if bytes.get(H_MAGIC..H_MAGIC + 4) != Some(&DATA_FILE_MAGIC[..]) {
            return Err(IoError::corruption(
                path,
                H_MAGIC as u64,
                "bad magic: not a data file",
            ));
        }
        let page_size = u32_at(bytes, H_PAGE_SIZE);
        validate_page_size(page_size).map_err(|_| {
            IoError::corruption(
                path,
                H_PAGE_SIZE as u64,
                format!("invalid page size {page_size}"),
            )
        })?;
        Ok(page_size)
    }

    /// Validates and decodes a header page. `bytes` starts at file offset 0 and holds at
    /// least the page (more is ignored).
    pub fn decode(bytes: &[u8], path: &str) -> IoResult<DataFileHeader> {
        let page_size = Self::peek_page_size(bytes, path)?;
        let Some(page) = bytes.get(..page_size as usize) else {
            return Err(IoError::corruption(
                path,
                bytes.len() as u64,
                format!(
                    "header page truncated: {} of {page_size} bytes",
                    bytes.len()
                ),
            ));
        };
        let stored = u64_at(page, H_CHECKSUM);
        let computed = checksum(
            Domain::DataFileHeader,
            page.get(H_VERSION..).unwrap_or_default(),
        );
        if stored != computed {
            return Err(IoError::corruption(
                path,
                H_CHECKSUM as u64,
                format!(
                    "header checksum mismatch: stored {stored:#018x}, computed {computed:#018x}"
                ),
            ));
        }
        let version = u32_at(page, H_VERSION);
        if version != DATA_FILE_VERSION {
            return Err(IoError::corruption(
                path,
                H_VERSION as u64,
                format!("unsupported data-file version {version}"),
            ));
        }
        if u32_at(page, H_RESERVED) != 0 {
            return Err(IoError::corruption(
                path,
                H_RESERVED as u64,
                "reserved header field is not zero",
            ));
        }
        let branch_len = usize::from(page.get(H_BRANCH_LEN).copied().unwrap_or_default());
        let branch_end = H_BRANCH + branch_len;
        let branch = page
            .get(H_BRANCH..branch_end)
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|s| BranchName::new(s).ok())
            .ok_or_else(|| {
                IoError::corruption(path, H_BRANCH_LEN as u64, "invalid branch name in header")
            })?;
        let padding = page.get(branch_end..).unwrap_or_default();
        if let Some(i) = padding.iter().position(|&b| b != 0) {
            return Err(IoError::corruption(
                path,
                (branch_end + i) as u64,
                "header padding is not zero",
            ));
        }
        Ok(DataFileHeader {
            version,
            page_size,
            file_id: u64_at(page, H_FILE_ID),
            branch,
            term: u64_at(page, H_TERM),
            incarnation: u64_at(page, H_INCARNATION),
            created_at_ms: u64_at(page, H_CREATED),
        })
    }

    /// Reads and decodes the header of an open data file (one read for the smallest page
    /// size, a second for the rest of a larger header page). A file too short to hold a
    /// header is `Corruption`.
    pub fn read_from(file: &dyn StorageFile) -> IoResult<DataFileHeader> {
        let path = file.path();
        let len = file.len()?;
        let first = u64::from(MIN_PAGE_SIZE);
        if len < first {
            return Err(IoError::corruption(
                path,
                len,
                format!("file of {len} bytes is too short for a data-file header"),
            ));
        }
        let mut buf = vec![0u8; MIN_PAGE_SIZE as usize];
        file.read_at(0, &mut buf)?;
        let page_size = Self::peek_page_size(&buf, path)?;
        if page_size > MIN_PAGE_SIZE {
            if len < u64::from(page_size) {
                return Err(IoError::corruption(
                    path,
                    len,
                    format!("file of {len} bytes is shorter than its {page_size}-byte header"),
                ));
            }
            // Bounded: page_size was validated (≤ MAX_PAGE_SIZE).
            buf.resize(page_size as usize, 0);
            if let Some(rest) = buf.get_mut(MIN_PAGE_SIZE as usize..) {
                file.read_at(first, rest)?;
            }
        }
        Self::decode(&buf, path)
    }

    /// Checks that the header names the file the caller expected to open; a mismatch means
    /// the file was misplaced or renamed.
    pub fn verify_identity(
        &self,
        path: &str,
        file_id: FileId,
        branch: &BranchName,
        term: Term,
    ) -> IoResult<()> {
        if self.file_id == file_id && &self.branch == branch && self.term == term {
            return Ok(());
        }
        Err(IoError::corruption(
            path,
            0,
            format!(
                "misplaced or renamed file: header says file {} of branch {} term {}, \
                 expected file {file_id} of branch {} term {term}",
                self.file_id,
                self.branch.as_str(),
                self.term,
                branch.as_str()
            ),
        ))
    }

    /// Checks that the file was written by the incarnation the reader's branch file range
    /// names: a file of another incarnation under the same name (a name deleted and created
    /// again, a directory restored from a copy) is not the file the reader references.
    pub fn verify_incarnation(&self, path: &str, incarnation: u64) -> IoResult<()> {
        if self.incarnation == incarnation {
            return Ok(());
        }
        Err(IoError::corruption(
            path,
            H_INCARNATION as u64,
            format!(
                "data file of another incarnation of branch {}: header says {:#018x}, the \
                 referencing manifest expects {incarnation:#018x}",
                self.branch.as_str(),
                self.incarnation
            ),
        ))
    }
}

fn page_checksum(page: &[u8], salt: FileSalt, page_index: u32) -> u64 {
    Checksum::new(Domain::Page)
        .update(&salt.get().to_le_bytes())
        .update(&page_index.to_le_bytes())
        .update(page.get(F_TYPE..).unwrap_or_default())
        .finish()
}

fn check_frame_args(len: usize, page_index: u32) -> IoResult<()> {
    let size = u32::try_from(len).unwrap_or(0);
    validate_page_size(size).map_err(|_| IoError::InvalidArgument {
        what: format!("page buffer of {len} bytes is not a valid page size"),
    })?;
    if page_index == 0 {
        return Err(IoError::InvalidArgument {
            what: "page 0 is the file header, not a framed page".into(),
        });
    }
    Ok(())
}

/// Seals a page in place: `buf` is the whole page (a valid page size) whose payload the
/// caller already wrote at `buf[FRAME_HEADER_LEN..][..payload_len]`. Writes the frame header,
/// zeroes the bytes after the payload and stores the checksum.
pub fn seal_page(
    buf: &mut [u8],
    salt: FileSalt,
    page_index: u32,
    page_type: u8,
    payload_len: usize,
) -> IoResult<()> {
    check_frame_args(buf.len(), page_index)?;
    if page_type == 0 {
        return Err(IoError::InvalidArgument {
            what: "page type 0 is reserved (never valid)".into(),
        });
    }
    if payload_len > buf.len() - FRAME_HEADER_LEN {
        return Err(IoError::InvalidArgument {
            what: format!(
                "payload of {payload_len} bytes does not fit a {}-byte page",
                buf.len()
            ),
        });
    }
    put(buf, F_TYPE, &[page_type]);
    put(buf, F_VERSION, &[FRAME_VERSION]);
    put(buf, F_RESERVED, &[0, 0]);
    put(buf, F_LEN, &(payload_len as u32).to_le_bytes());
    if let Some(padding) = buf.get_mut(FRAME_HEADER_LEN + payload_len..) {
        padding.fill(0);
    }
    let sum = page_checksum(buf, salt, page_index);
    put(buf, F_CHECKSUM, &sum.to_le_bytes());
    Ok(())
}

/// Validates a page read from file offset `offset` as page `page_index` of the file with
/// `salt`, and returns its type and payload. Any mismatch (torn or rotten bytes, a page of
/// another file or position, an all-zero page) is `Corruption` naming `path` and the offset.
pub fn open_page<'a>(
    buf: &'a [u8],
    salt: FileSalt,
    page_index: u32,
    path: &str,
    offset: u64,
) -> IoResult<(u8, &'a [u8])> {
    check_frame_args(buf.len(), page_index)?;
    let at = |field: usize| offset.saturating_add(field as u64);
    let stored = u64_at(buf, F_CHECKSUM);
    let computed = page_checksum(buf, salt, page_index);
    if stored != computed {
        let reason = if buf.iter().all(|&b| b == 0) {
            format!("page {page_index} is all zeros (never written)")
        } else {
            format!(
                "page {page_index} checksum mismatch (torn, corrupt, or from another file or \
                 position): stored {stored:#018x}, computed {computed:#018x}"
            )
        };
        return Err(IoError::corruption(path, at(F_CHECKSUM), reason));
    }
    // check_frame_args validated the buffer as a whole page, so the frame fields exist.
    let byte = |at: usize| buf.get(at).copied().unwrap_or_default();
    let page_type = byte(F_TYPE);
    if page_type == 0 {
        return Err(IoError::corruption(path, at(F_TYPE), "page type 0"));
    }
    if byte(F_VERSION) != FRAME_VERSION {
        return Err(IoError::corruption(
            path,
            at(F_VERSION),
            format!("unsupported page frame version {}", byte(F_VERSION)),
        ));
    }
    if byte(F_RESERVED) != 0 || byte(F_RESERVED + 1) != 0 {
        return Err(IoError::corruption(
            path,
            at(F_RESERVED),
            "reserved frame field is not zero",
        ));
    }
    let len = u32_at(buf, F_LEN) as usize;
    let payload = buf
        .get(FRAME_HEADER_LEN..)
        .and_then(|p| p.get(..len))
        .ok_or_else(|| {
            IoError::corruption(
                path,
                at(F_LEN),
                format!("payload length {len} exceeds the page"),
            )
        })?;
    Ok((page_type, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn main() -> BranchName {
        BranchName::main()
    }

    #[test]
    fn header_round_trips_and_checks_identity() {
        let h = DataFileHeader::new(8192, 7, main(), 3, 0xfeed, 1_700_000_000_000);
        let bytes = h.encode();
        assert_eq!(bytes.len(), 8192);
        let d = DataFileHeader::decode(&bytes, "f").expect("decode");
        assert_eq!(d, h);
        assert!(d.verify_identity("f", 7, &main(), 3).is_ok());
        let e = d
            .verify_identity("f", 7, &main(), 4)
            .expect_err("wrong term");
        assert!(e.to_string().contains("misplaced or renamed file"), "{e}");
        assert!(d.verify_incarnation("f", 0xfeed).is_ok());
        let e = d
            .verify_incarnation("f", 0xbeef)
            .expect_err("another incarnation");
        assert_eq!(e.kind(), crate::ErrorKind::Corruption);
        assert!(DataFileHeader::decode(&bytes[..4096], "f").is_err());
    }

    #[test]
    fn frames_round_trip_and_reject_misuse() {
        let salt = FileSalt::new(1, &main(), 0, 42);
        let mut page = vec![0xAAu8; 4096];
        page[16..21].copy_from_slice(b"hello");
        seal_page(&mut page, salt, 5, 2, 5).expect("seal");
        assert!(page[21..].iter().all(|&b| b == 0), "tail zeroed");
        let (ty, payload) = open_page(&page, salt, 5, "f", 5 * 4096).expect("open");
        assert_eq!((ty, payload), (2, &b"hello"[..]));
        assert!(open_page(&page, salt, 6, "f", 0).is_err());
        // The same file name written by another incarnation of the branch does not validate.
        assert!(open_page(&page, FileSalt::new(1, &main(), 0, 43), 5, "f", 0).is_err());
        assert!(seal_page(&mut page, salt, 0, 2, 5).is_err());
        assert!(seal_page(&mut page, salt, 1, 0, 5).is_err());
        assert!(seal_page(&mut page, salt, 1, 1, 4081).is_err());
        assert!(seal_page(&mut page[..4000], salt, 1, 1, 1).is_err());
        let zero = vec![0u8; 4096];
        let e = open_page(&zero, salt, 1, "f", 4096).expect_err("zero page");
        assert_eq!(e.kind(), crate::ErrorKind::Corruption);
    }

    #[test]
    fn page_sizes() {
        assert!(validate_page_size(4096).is_ok());
        assert!(validate_page_size(65536).is_ok());
        for bad in [0, 2048, 4097, 131072, 12288] {
            assert!(validate_page_size(bad).is_err(), "{bad}");
        }
        assert_eq!(page_offset(3, 4096), 12288);
    }
}
