//! Page identities: logical page ids (what the B+tree stores) and packed physical addresses
//! (where the mapping table says a logical page currently lives).

use bough_names::FileId;

/// A logical page id, as stored in B+tree index pages. Stable while the page moves.
pub type PageId = u32;

/// The logical page id that means "no page" (an empty tree, an absent root).
pub const NO_PAGE: PageId = u32::MAX;

/// Bits of a [`PageAddr`] that hold the page index inside its data file.
pub const PAGE_INDEX_BITS: u32 = 24;

/// Largest page index a [`PageAddr`] can hold (`2^24 - 1`).
pub const MAX_PAGE_INDEX: u32 = (1 << PAGE_INDEX_BITS) - 1;

/// Largest file id a [`PageAddr`] can hold (`2^39 - 1`): bit 63 stays clear so a mapping
/// slot can tell an address from a free-chain link ([`FREE_SLOT_BIT`]).
pub const MAX_ADDR_FILE_ID: FileId = (1 << (63 - PAGE_INDEX_BITS)) - 1;

/// The physical location of a page: `file_id << 24 | page_index`.
///
/// Page index 0 of every data file is that file's header page, so no real page lives there;
/// that frees the value 0 to mean "no page" ([`PageAddr::NONE`]), and any other value whose
/// page index is 0 is invalid. A `PageAddr` can only be built through checked constructors,
/// so holding one means it is either `NONE` or a valid address.
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PageAddr(u64);

impl PageAddr {
    /// No page: an unmapped logical id, or an absent mapping root.
    pub const NONE: PageAddr = PageAddr(0);

    /// The address of page `page_index` of data file `file_id`; `None` if the file id needs
    /// more than 39 bits or the page index is 0 (the header page) or needs more than 24 bits.
    pub fn new(file_id: FileId, page_index: u32) -> Option<PageAddr> {
        if file_id > MAX_ADDR_FILE_ID || page_index == 0 || page_index > MAX_PAGE_INDEX {
            return None;
        }
        Some(PageAddr(file_id << PAGE_INDEX_BITS | u64::from(page_index)))
    }

    /// The data file holding the page (0 for [`PageAddr::NONE`]).
    pub fn file_id(self) -> FileId {
        self.0 >> PAGE_INDEX_BITS
    }

    /// The page's index inside its data file (0 only for [`PageAddr::NONE`]).
    pub fn page_index(self) -> u32 {
        // Masked to 24 bits, so the cast is lossless.
        (self.0 & u64::from(MAX_PAGE_INDEX)) as u32
    }

    /// Whether this is [`PageAddr::NONE`].
    pub fn is_none(self) -> bool {
        self.0 == 0
    }

    /// The packed on-disk value.
    pub fn to_u64(self) -> u64 {
        self.0
    }

    /// Unpacks an on-disk value: 0 is [`PageAddr::NONE`]; any other value with page index 0
    /// is invalid (`None`).
    pub fn from_u64(value: u64) -> Option<PageAddr> {
        let addr = PageAddr(value);
        if value != 0 && (addr.page_index() == 0 || value & FREE_SLOT_BIT != 0) {
            return None;
        }
        Some(addr)
    }
}

impl std::fmt::Display for PageAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_none() {
            f.write_str("none")
        } else {
            write!(f, "{}:{}", self.file_id(), self.page_index())
        }
    }
}

/// Bit 63 of a mapping slot marks a free logical id (see [`slot_is_valid`]).
pub const FREE_SLOT_BIT: u64 = 1 << 63;

/// Whether a raw mapping-table slot is well-formed. A slot (in manifest overlays and log
/// changes, and in mapping pages) is one of:
/// - `0`: unmapped;
/// - a [`PageAddr`] (bit 63 clear, page index ≠ 0): where the page lives;
/// - [`FREE_SLOT_BIT`] | (next free id + 1, or 0 for the end of the chain), the upper bits
///   otherwise zero: the id is on the free chain.
pub fn slot_is_valid(raw: u64) -> bool {
    if raw & FREE_SLOT_BIT != 0 {
        raw & !FREE_SLOT_BIT <= u64::from(u32::MAX)
    } else {
        PageAddr::from_u64(raw).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_and_unpacks() {
        let a = PageAddr::new(5, 7).expect("valid");
        assert_eq!(a.to_u64(), 5 << 24 | 7);
        assert_eq!((a.file_id(), a.page_index()), (5, 7));
        let max = PageAddr::new(MAX_ADDR_FILE_ID, MAX_PAGE_INDEX).expect("valid");
        assert_eq!(max.to_u64(), u64::MAX >> 1);
        assert_eq!(PageAddr::from_u64(u64::MAX >> 1), Some(max));
        // Bit 63 belongs to free-chain links, never to an address.
        assert_eq!(PageAddr::from_u64(u64::MAX), None);
        assert_eq!(PageAddr::new(0, 1).map(PageAddr::to_u64), Some(1));
    }

    #[test]
    fn rejects_out_of_range_and_header_page() {
        assert_eq!(PageAddr::new(1, 0), None);
        assert_eq!(PageAddr::new(MAX_ADDR_FILE_ID + 1, 1), None);
        assert_eq!(PageAddr::new(1, MAX_PAGE_INDEX + 1), None);
        assert_eq!(PageAddr::from_u64(1 << 24), None);
        assert_eq!(PageAddr::from_u64(0), Some(PageAddr::NONE));
        assert!(PageAddr::NONE.is_none());
        assert!(!PageAddr::new(0, 1).expect("valid").is_none());
    }
}
