//! Reading one data file page by page: its header against the identity its name promises,
//! every page's checksum and layout. Through [`Storage`], so it runs on every backend and
//! on a read-only open.

use std::collections::BTreeMap;

use bough_io::layout::max_payload;
use bough_io::{DataFileHeader, MAX_PAGE_SIZE, MIN_PAGE_SIZE, OpenOptions, Storage, open_page};
use bough_names::DataFileName;
use bough_tree::page::index::IndexNode;
use bough_tree::page::kind;
use bough_tree::page::leaf::LeafView;
use bough_tree::page::mapping::{MappingNode, fanout};

/// Bytes read per request while scanning a file (whole pages).
const SCAN_CHUNK: usize = 256 << 10;

/// What reading a data file page by page found.
///
/// ```
/// use std::sync::Arc;
/// use bough::io::{MemoryStorage, Storage};
/// use bough::{Options, Store};
///
/// let mem = MemoryStorage::new();
/// let store = Store::builder(Options::in_memory()).memory(mem.clone()).open()?;
/// let main = store.partition("orders", 0)?.branch("main")?;
/// main.put_blocking("a", "1")?;
/// main.checkpoint_blocking()?;
/// let storage: Arc<dyn Storage> = Arc::new(mem);
/// use bough::check::check_data_file;
/// use bough_names::{FileKind, classify};
/// let name = storage
///     .list("orders.0")?
///     .into_iter()
///     .find_map(|n| match classify(&n) {
///         FileKind::Data(d) => Some(d),
///         _ => None,
///     })
///     .unwrap();
/// let found = check_data_file(&*storage, "orders.0", &name);
/// assert!(found.pages > 0 && found.bad.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Default, Clone)]
pub struct DataFileCheck {
    /// The header, or why it is unusable (`None`: not read).
    pub header: Option<Result<DataFileHeader, String>>,
    /// File length in bytes.
    pub len: u64,
    /// Pages after the header.
    pub pages: u64,
    /// Good pages by page type.
    pub by_type: BTreeMap<u8, u64>,
    /// Bad pages: (index, file offset, why).
    pub bad: Vec<(u32, u64, String)>,
    /// Bytes past the last whole page.
    pub partial_tail: u64,
}

/// The name of a page type.
pub fn page_type_name(t: u8) -> &'static str {
    match t {
        kind::LEAF => "leaf",
        kind::INDEX => "index",
        kind::OVERFLOW => "overflow",
        kind::MAPPING => "mapping",
        kind::TTL_LEAF => "ttl-leaf",
        _ => "unknown",
    }
}

fn check_payload(t: u8, payload: &[u8], page_size: u32) -> Result<(), String> {
    let r = match t {
        kind::LEAF | kind::TTL_LEAF => LeafView::new(payload).and_then(|v| v.entries()).map(|_| ()),
        kind::INDEX => IndexNode::decode(payload).map(|_| ()),
        kind::MAPPING => MappingNode::decode(payload, fanout(max_payload(page_size))).map(|_| ()),
        kind::OVERFLOW => Ok(()),
        other => return Err(format!("unknown page type {other}")),
    };
    r.map_err(|e| format!("{} page does not decode: {e}", page_type_name(t)))
}

/// Reads data file `name` of partition `dir` page by page.
pub fn check_data_file(storage: &dyn Storage, dir: &str, name: &DataFileName) -> DataFileCheck {
    let mut out = DataFileCheck::default();
    let path = format!("{dir}/{name}");
    let f = match storage.open(&path, OpenOptions::read()) {
        Ok(f) => f,
        Err(e) => {
            out.header = Some(Err(format!("cannot open: {e}")));
            return out;
        }
    };
    out.len = match f.len() {
        Ok(n) => n,
        Err(e) => {
            out.header = Some(Err(format!("cannot read its length: {e}")));
            return out;
        }
    };
    if out.len < u64::from(MIN_PAGE_SIZE) {
        out.header = Some(Err(format!(
            "file of {} bytes is too short for a header",
            out.len
        )));
        return out;
    }
    let mut first = vec![0u8; MIN_PAGE_SIZE as usize];
    let header = f
        .read_at(0, &mut first)
        .and_then(|()| DataFileHeader::peek_page_size(&first, &path))
        .and_then(|ps| {
            if u64::from(ps) > out.len {
                return Err(bough_io::IoError::corruption(
                    &path,
                    0,
                    format!("page size {ps} but the file holds {} bytes", out.len),
                ));
            }
            let mut page = first.clone();
            page.resize(ps as usize, 0);
            if let Some(rest) = page.get_mut(MIN_PAGE_SIZE as usize..)
                && !rest.is_empty()
            {
                f.read_at(u64::from(MIN_PAGE_SIZE), rest)?;
            }
            let h = DataFileHeader::decode(&page, &path)?;
            h.verify_identity(&path, name.file_id, &name.branch, name.term)?;
            Ok(h)
        });
    let header = match header {
        Ok(h) => h,
        Err(e) => {
            out.header = Some(Err(e.to_string()));
            return out;
        }
    };
    let ps = header.page_size;
    // The header decoded, so its page size is one the format allows.
    debug_assert!((MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&ps));
    let salt = header.salt();
    out.header = Some(Ok(header));
    out.pages = (out.len / u64::from(ps)).saturating_sub(1);
    out.partial_tail = out.len % u64::from(ps);
    let per_chunk = (SCAN_CHUNK / ps as usize).max(1) as u64;
    let mut buf = Vec::new();
    let mut i = 1u64;
    while i <= out.pages {
        let n = per_chunk.min(out.pages + 1 - i);
        buf.resize(n as usize * ps as usize, 0);
        let offset = i * u64::from(ps);
        if let Err(e) = f.read_at(offset, &mut buf) {
            let idx = u32::try_from(i).unwrap_or(u32::MAX);
            out.bad.push((idx, offset, format!("read failed: {e}")));
            break;
        }
        for (k, page) in buf.chunks_exact(ps as usize).enumerate() {
            let at = i + k as u64;
            let Ok(idx) = u32::try_from(at) else {
                return out;
            };
            let offset = at * u64::from(ps);
            match open_page(page, salt, idx, &path, offset) {
                Ok((t, payload)) => match check_payload(t, payload, ps) {
                    Ok(()) => *out.by_type.entry(t).or_default() += 1,
                    Err(why) => out.bad.push((idx, offset, why)),
                },
                Err(e) => out.bad.push((idx, offset, e.to_string())),
            }
        }
        i += n;
    }
    out
}
