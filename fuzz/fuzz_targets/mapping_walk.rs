//! Walks of the page-mapping radix tree over checksummed mapping pages: whatever the pages
//! say — children pointing at themselves, an ancestor or a sibling's subtree, crafted
//! levels, slots past the id space, bytes that are no node at all — every walk ends, never
//! panics, reads each page at most once (a point lookup at most one page per level), and
//! either succeeds or fails with `Corruption`.
//!
//! The checksum is no defence against a buggy writer or a crafted file, so the pages are
//! sealed with a *valid* frame checksum and opened through the same frame and decoder the
//! engine uses: the fuzzer reaches the walk itself, not the checksum check in front of it.
#![no_main]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arbitrary::{Arbitrary, Unstructured};
use bough_io::layout::FRAME_HEADER_LEN;
use bough_io::{ErrorKind, FileSalt, open_page, seal_page};
use bough_manifest::PageAddr;
use bough_tree::error::{TreeError, TreeResult};
use bough_tree::mapping::{MappingTable, NodeSource, walk_radix};
use bough_tree::page::kind;
use bough_tree::page::mapping::MappingNode;
use libfuzzer_sys::fuzz_target;

const PAGE_SIZE: usize = 4096;
const FILE_ID: u64 = 7;

#[derive(Debug, Arbitrary)]
enum SlotValue {
    /// The address of page `n` of the set (modulo its size).
    Page(u8),
    /// Any raw value.
    Raw(u64),
}

#[derive(Debug, Arbitrary)]
enum PageSpec {
    /// A well-formed node: its level and its non-zero slots.
    Node {
        level: u8,
        slots: Vec<(u16, SlotValue)>,
    },
    /// Any payload bytes.
    Bytes(Vec<u8>),
}

#[derive(Debug, Arbitrary)]
struct Input {
    /// Slots per node: small, so that deep trees fit in a fuzz input.
    fanout: u8,
    /// Which page is the root.
    root: u8,
    pages: Vec<PageSpec>,
    /// Logical ids to look up one by one.
    lookups: Vec<u32>,
}

/// The pages, sealed and opened as the engine does, counting reads.
struct Pages {
    frames: HashMap<u64, Vec<u8>>,
    fanout: usize,
    salt: FileSalt,
    reads: AtomicU64,
}

impl NodeSource for Pages {
    fn mapping_node(&self, addr: PageAddr) -> TreeResult<Arc<MappingNode>> {
        let (file, offset) = self.locate(addr);
        let frame = self
            .frames
            .get(&addr.to_u64())
            .ok_or_else(|| TreeError::corruption(file.clone(), offset, "no such page"))?;
        // Only pages that exist count: the bound is "each of the n pages read at most once".
        self.reads.fetch_add(1, Ordering::Relaxed);
        let (t, payload) = open_page(frame, self.salt, addr.page_index(), &file, offset)?;
        if t != kind::MAPPING {
            return Err(TreeError::corruption(file, offset, "not a mapping page"));
        }
        MappingNode::decode(payload, self.fanout)
            .map(Arc::new)
            .map_err(|e| TreeError::corruption(file, offset, e.0))
    }

    fn locate(&self, addr: PageAddr) -> (String, u64) {
        (
            format!("data_{}_main_1", addr.file_id()),
            u64::from(addr.page_index()) * PAGE_SIZE as u64,
        )
    }
}

fn addr_of(i: usize) -> PageAddr {
    PageAddr::new(FILE_ID, i as u32 + 1).expect("a small page index")
}

fn build(input: &Input) -> Option<(Pages, PageAddr)> {
    // No pages: nothing to walk (and no page a walk could read).
    if input.pages.is_empty() {
        return None;
    }
    let n = input.pages.len().min(64);
    let fanout = 1 + usize::from(input.fanout % 16);
    let salt = FileSalt::from_raw(0x5EED);
    let mut frames = HashMap::new();
    for (i, spec) in input.pages.iter().take(n).enumerate() {
        let payload = match spec {
            PageSpec::Node { level, slots } => {
                let mut node = MappingNode::empty(*level % 12, fanout);
                for (at, v) in slots.iter().take(64) {
                    node.slots[usize::from(*at) % fanout] = match v {
                        SlotValue::Page(p) => addr_of(usize::from(*p) % n).to_u64(),
                        SlotValue::Raw(r) => *r,
                    };
                }
                // Hostile on purpose: the walk must refuse what the writer never writes.
                node.encode_unchecked()
            }
            PageSpec::Bytes(b) => b.clone(),
        };
        let mut frame = vec![0u8; PAGE_SIZE];
        let len = payload.len().min(PAGE_SIZE - FRAME_HEADER_LEN);
        frame[FRAME_HEADER_LEN..FRAME_HEADER_LEN + len].copy_from_slice(&payload[..len]);
        let addr = addr_of(i);
        seal_page(&mut frame, salt, addr.page_index(), kind::MAPPING, len).ok()?;
        frames.insert(addr.to_u64(), frame);
    }
    let pages = Pages {
        frames,
        fanout,
        salt,
        reads: AtomicU64::new(0),
    };
    Some((pages, addr_of(usize::from(input.root) % n)))
}

fn must_be_corruption(what: &str, r: TreeResult<()>) {
    if let Err(e) = r {
        assert!(
            e.kind() == ErrorKind::Corruption,
            "{what} failed with a non-corruption error: {e}"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = Input::arbitrary(&mut Unstructured::new(data)) else {
        return;
    };
    let Some((pages, root)) = build(&input) else {
        return;
    };
    let n = pages.frames.len() as u64;
    // The walk reads each page at most once.
    let mut visited = 0u64;
    must_be_corruption(
        "walk_radix",
        walk_radix(root, pages.fanout, &pages, &mut |_, _| {
            visited += 1;
            Ok(true)
        }),
    );
    assert!(visited <= n, "visited {visited} nodes of {n} pages");
    assert!(
        pages.reads.load(Ordering::Relaxed) <= n,
        "a page was read twice"
    );

    let view = MappingTable::new(pages.fanout, root, 0, None).view();
    pages.reads.store(0, Ordering::Relaxed);
    let mut last = None;
    must_be_corruption(
        "for_each_slot",
        view.for_each_slot(&pages, &mut |id, _| {
            assert!(last.is_none_or(|l| id > l), "slots out of id order");
            last = Some(id);
        }),
    );
    assert!(pages.reads.load(Ordering::Relaxed) <= n);
    pages.reads.store(0, Ordering::Relaxed);
    must_be_corruption(
        "for_each_node_addr",
        view.for_each_node_addr(&pages, &mut |_| {}),
    );
    assert!(pages.reads.load(Ordering::Relaxed) <= n);

    // A lookup descends one path: one read per level, at most nine levels.
    for &id in input.lookups.iter().take(16) {
        pages.reads.store(0, Ordering::Relaxed);
        must_be_corruption("raw", view.raw(id, &pages).map(|_| ()));
        assert!(pages.reads.load(Ordering::Relaxed) <= 9);
    }
});
