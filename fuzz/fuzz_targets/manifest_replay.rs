//! Manifest replay under torn writes and bit rot.
//!
//! The input builds a valid manifest file (a snapshot and up to 8 log records), which must
//! replay to the state of applying every record. The image is then damaged (truncated,
//! extended with zeros, bits flipped); replay must never panic, and when it succeeds its
//! state must be that of a prefix of the records, ending at that prefix's offset. A pure
//! truncation has exactly one right answer: the records wholly inside the kept bytes.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use bough_manifest::{
    BranchFileMapping, BranchFileRange, BranchName, FREE_SLOT_BIT, LogRecord, ManifestState,
    NO_PAGE, PageAddr, PageId, Snapshot, encode_log, encode_snapshot, replay, slot_is_valid,
};
use libfuzzer_sys::fuzz_target;

const MAX_LOGS: usize = 8;
const BRANCHES: &[&str] = &["main", "dev", "feature-x", "a_b", "Release-2"];

#[derive(Debug, Arbitrary)]
struct Ids {
    root: Option<u16>,
    ttl_root: Option<u16>,
    free_head: Option<u16>,
    /// (id, slot kind, file id or free link, page index) — normalised into strictly
    /// increasing ids below the high-water mark and valid mapping slots.
    mapping: Vec<(u16, u8, u16, u16)>,
}

#[derive(Debug, Arbitrary)]
struct SnapshotPlan {
    branch: u8,
    term: u64,
    page_size_log: u8,
    dict: Vec<u8>,
    mapping_root: Option<(u16, u16)>,
    next_page_id: u16,
    max_file_id: u16,
    /// (branch, term, share of max_file_id)
    ranges: Vec<(u8, u8, u16)>,
    ids: Ids,
}

#[derive(Debug, Arbitrary)]
struct LogPlan {
    grow_pages: u8,
    grow_files: u8,
    ranges: Vec<(u8, u8, u16)>,
    checkpoint: Option<Option<(u16, u16)>>,
    ids: Ids,
}

#[derive(Debug, Arbitrary)]
enum Damage {
    Truncate(u32),
    ZeroExtend(u8),
    Flip(Vec<(u32, u8)>),
    TruncateAndFlip(u32, Vec<(u32, u8)>),
}

#[derive(Debug, Arbitrary)]
struct Input {
    snapshot: SnapshotPlan,
    logs: Vec<LogPlan>,
    damage: Damage,
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = Input::arbitrary(&mut Unstructured::new(data)) else {
        return;
    };
    check(input);
});

fn branch(i: u8) -> BranchName {
    BranchName::new(BRANCHES[usize::from(i) % BRANCHES.len()]).expect("valid branch")
}

fn addr(file_id: u16, page: u16) -> PageAddr {
    PageAddr::new(u64::from(file_id), u32::from(page).max(1)).expect("in range")
}

fn id_below(raw: u16, next: PageId) -> Option<PageId> {
    (next > 0).then(|| PageId::from(raw) % next)
}

/// Ranges strictly increasing by `max_file_id`, none above `max_file_id`.
fn ranges(plan: &[(u8, u8, u16)], max_file_id: u64) -> BranchFileMapping {
    let mut out: Vec<BranchFileRange> = Vec::new();
    for &(b, term, share) in plan.iter().take(4) {
        let top = max_file_id * u64::from(share) / u64::from(u16::MAX);
        if out.last().is_none_or(|last| top > last.max_file_id) {
            out.push(BranchFileRange {
                branch: branch(b),
                term: u64::from(term),
                incarnation: u64::from(b).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                max_file_id: top,
            });
        }
    }
    BranchFileMapping::from_ranges(out).expect("increasing")
}

/// Roots, free head and mapping changes valid under `next`.
fn ids(plan: &Ids, next: PageId) -> (PageId, PageId, Option<PageId>, Vec<(PageId, u64)>) {
    let root = plan.root.and_then(|r| id_below(r, next)).unwrap_or(NO_PAGE);
    let ttl_root = plan
        .ttl_root
        .and_then(|r| id_below(r, next))
        .unwrap_or(NO_PAGE);
    let free_head = plan.free_head.and_then(|r| id_below(r, next));
    let mut mapping: Vec<(PageId, u64)> = plan
        .mapping
        .iter()
        .take(64)
        .filter_map(|&(id, kind, file, page)| {
            let id = id_below(id, next)?;
            let slot = match kind % 3 {
                // Unmapped.
                0 => 0,
                // Where the page lives.
                1 => addr(file, page).to_u64(),
                // On the free chain: the next free id + 1, or 0 at the end of the chain.
                _ => FREE_SLOT_BIT | id_below(file, next).map_or(0, |n| u64::from(n) + 1),
            };
            debug_assert!(slot_is_valid(slot));
            Some((id, slot))
        })
        .collect();
    mapping.sort_by_key(|&(id, _)| id);
    mapping.dedup_by_key(|&mut (id, _)| id);
    (root, ttl_root, free_head, mapping)
}

fn build(input: &Input) -> (Snapshot, Vec<LogRecord>) {
    let p = &input.snapshot;
    let next_page_id = PageId::from(p.next_page_id);
    let max_file_id = u64::from(p.max_file_id);
    let (root, ttl_root, free_head, overlay) = ids(&p.ids, next_page_id);
    let mut snapshot = Snapshot::empty(branch(p.branch), p.term, 4096 << (p.page_size_log % 5));
    snapshot.meta.root = root;
    snapshot.meta.ttl_root = ttl_root;
    snapshot.meta.branch_file_ranges = ranges(&p.ranges, max_file_id);
    snapshot.max_file_id = max_file_id;
    snapshot.dict = p.dict.iter().copied().take(512).collect();
    snapshot.mapping_root = p.mapping_root.map_or(PageAddr::NONE, |(f, pg)| addr(f, pg));
    snapshot.next_page_id = next_page_id;
    snapshot.free_head = free_head;
    snapshot.overlay = overlay;

    let mut logs = Vec::new();
    let (mut next, mut max_file) = (next_page_id, max_file_id);
    for (i, l) in input.logs.iter().take(MAX_LOGS).enumerate() {
        next = next.saturating_add(PageId::from(l.grow_pages));
        max_file += u64::from(l.grow_files);
        let (root, ttl_root, free_head, changes) = ids(&l.ids, next);
        logs.push(LogRecord {
            seq: i as u64 + 1,
            root,
            ttl_root,
            max_file_id: max_file,
            branch_file_ranges: ranges(&l.ranges, max_file),
            checkpoint: l
                .checkpoint
                .map(|c| c.map_or(PageAddr::NONE, |(f, pg)| addr(f, pg))),
            next_page_id: next,
            free_head,
            changes,
            extensions: Vec::new(),
        });
    }
    (snapshot, logs)
}

fn check(input: Input) {
    let (snapshot, logs) = build(&input);

    // The image, the offset where each record starts (plus the end), and the state after
    // each prefix of records.
    let mut image = encode_snapshot(&snapshot).expect("valid snapshot encodes");
    let mut offsets = vec![0u64, image.len() as u64];
    let mut states = vec![ManifestState::from_snapshot(snapshot)];
    for log in logs {
        image.extend(encode_log(&log).expect("valid log record encodes"));
        offsets.push(image.len() as u64);
        let mut state = states.last().expect("non-empty").clone();
        state.apply(log).expect("valid log record applies");
        states.push(state);
    }

    let whole = replay(&image).expect("an intact manifest replays");
    assert_eq!(whole.records, states.len());
    assert_eq!(&whole.state, states.last().expect("non-empty"));
    assert_eq!(whole.end_offset, image.len() as u64);
    assert_eq!(whole.dropped_tail, None);

    let mut damaged = image.clone();
    let mut truncated_only = None;
    match &input.damage {
        Damage::Truncate(len) => {
            let len = *len as usize % (image.len() + 1);
            damaged.truncate(len);
            truncated_only = Some(len as u64);
        }
        Damage::ZeroExtend(blocks) => {
            damaged.resize(image.len() + usize::from(*blocks) * 512, 0);
            let r = replay(&damaged).expect("zeros after the last record are a clean end");
            assert_eq!(r.records, states.len());
            assert_eq!(r.end_offset, image.len() as u64);
            assert_eq!(r.dropped_tail, None);
            return;
        }
        Damage::Flip(flips) => flip(&mut damaged, flips),
        Damage::TruncateAndFlip(len, flips) => {
            damaged.truncate(*len as usize % (image.len() + 1));
            flip(&mut damaged, flips);
        }
    }

    match replay(&damaged) {
        Ok(r) => {
            assert!(
                (1..=states.len()).contains(&r.records),
                "replay applied {} records of {}",
                r.records,
                states.len()
            );
            assert_eq!(
                r.state,
                states[r.records - 1],
                "replay state is not a prefix's"
            );
            assert_eq!(
                r.end_offset, offsets[r.records],
                "end offset of a {}-record prefix",
                r.records
            );
            if let Some(len) = truncated_only {
                let whole_records = offsets[1..].iter().filter(|&&o| o <= len).count();
                assert_eq!(r.records, whole_records, "truncated at {len}");
            }
        }
        Err(e) => {
            if let Some(len) = truncated_only {
                // Only a missing or torn snapshot makes a truncated manifest unreadable.
                assert!(
                    len < offsets[1],
                    "truncated at {len} (snapshot ends at {}): {e}",
                    offsets[1]
                );
            }
        }
    }
}

fn flip(image: &mut [u8], flips: &[(u32, u8)]) {
    if image.is_empty() {
        return;
    }
    for &(pos, bit) in flips.iter().take(8) {
        let i = pos as usize % image.len();
        image[i] ^= 1 << (bit % 8);
    }
}
