//! A transaction: the head state a commit may change ([`HeadState`], cloned at its start so a
//! failed commit leaves the head as it was) and the pages it stages in memory before any
//! byte is written.

use super::*;
use crate::error::{TreeError, TreeResult};

/// The data file a head appends to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Active {
    pub(super) file_id: FileId,
    pub(super) next_index: u32,
}

/// What a transaction may change; cloned at its start (cheaply) so a failed commit leaves
/// the head exactly as it was.
#[derive(Debug, Clone)]
pub(crate) struct HeadState {
    pub(super) root: PageId,
    pub(super) ttl_root: PageId,
    pub(super) mapping: MappingTable,
    pub(super) ranges: BranchFileMapping,
    pub(super) max_file_id: FileId,
    pub(super) active: Option<Active>,
    /// The last file of this (branch, term), to be continued by the first commit that
    /// needs a page (see [`Head::resume_last_file`]): taken into `active` then.
    pub(super) resume: Option<Active>,
}

/// A page staged for writing.
#[derive(Debug)]
pub(crate) struct StagedPage {
    pub(super) addr: PageAddr,
    pub(super) kind: u8,
    /// Shared with the staged leaf's cached page: a checkpoint stages tens of thousands of
    /// leaves, and a copy of each (two allocations and copies) was a tenth of its time.
    pub(super) payload: Arc<[u8]>,
}

pub(crate) struct Txn<'a> {
    pub(super) ctx: TreeCtx<'a>,
    pub(super) st: HeadState,
    pub(super) pages: Vec<StagedPage>,
    pub(super) staged: HashMap<PageAddr, CachedPage>,
    pub(super) new_files: Vec<FileId>,
    /// Whether leaves being written belong to the TTL index.
    pub(super) ttl_tree: bool,
}

impl Txn<'_> {
    pub(super) fn fetch(&self) -> Fetch<'_> {
        Fetch {
            files: self.ctx.files,
            ranges: &self.st.ranges,
            staged: Some(&self.staged),
            kept: None,
        }
    }

    pub(super) fn next_addr(&mut self) -> TreeResult<PageAddr> {
        let need_new = self
            .st
            .active
            .is_none_or(|a| a.next_index >= self.ctx.cfg.file_pages)
            || (self.ctx.cfg.file_per_commit && self.new_files.is_empty());
        if need_new && !self.ctx.cfg.file_per_commit && self.st.resume.is_some() {
            self.st.active = self.st.resume.take();
        } else if need_new {
            let id = self.st.max_file_id + 1;
            self.st
                .ranges
                .extend_own(self.ctx.branch, self.ctx.term, self.ctx.incarnation, id)
                .map_err(|e| TreeError::InvalidArgument {
                    what: format!("cannot allocate file id {id}: {e}"),
                })?;
            self.st.max_file_id = id;
            self.st.active = Some(Active {
                file_id: id,
                next_index: 1,
            });
            self.new_files.push(id);
        }
        let a = self
            .st
            .active
            .as_mut()
            .ok_or_else(|| TreeError::InvalidArgument {
                what: "no active data file".into(),
            })?;
        let addr =
            PageAddr::new(a.file_id, a.next_index).ok_or_else(|| TreeError::InvalidArgument {
                what: format!(
                    "page address out of range: file {} page {}",
                    a.file_id, a.next_index
                ),
            })?;
        a.next_index += 1;
        Ok(addr)
    }

    pub(super) fn stage_page(
        &mut self,
        page_kind: u8,
        payload: Arc<[u8]>,
        cached: CachedPage,
    ) -> TreeResult<PageAddr> {
        let addr = self.next_addr()?;
        self.staged.insert(addr, cached);
        self.pages.push(StagedPage {
            addr,
            kind: page_kind,
            payload,
        });
        Ok(addr)
    }

    pub(super) fn map(&mut self, id: PageId, addr: PageAddr) -> TreeResult<()> {
        let src = Fetch {
            files: self.ctx.files,
            ranges: &self.st.ranges,
            staged: Some(&self.staged),
            kept: None,
        };
        self.st.mapping.map(id, addr, &src)
    }

    pub(super) fn alloc(&mut self) -> TreeResult<PageId> {
        let src = Fetch {
            files: self.ctx.files,
            ranges: &self.st.ranges,
            staged: Some(&self.staged),
            kept: None,
        };
        self.st.mapping.alloc(&src)
    }
}

impl PageSink for Txn<'_> {
    fn stage(&mut self, page_kind: u8, payload: Vec<u8>) -> TreeResult<PageAddr> {
        let cap = max_payload(self.ctx.files.page_size());
        let payload: Arc<[u8]> = payload.into();
        let cached = match page_kind {
            kind::MAPPING => CachedPage::Mapping(Arc::new(
                MappingNode::decode(&payload, fanout(cap))
                    .map_err(|e| TreeError::InvalidArgument { what: e.0.into() })?,
            )),
            _ => CachedPage::Tree(Node::Leaf(Arc::clone(&payload))),
        };
        self.stage_page(page_kind, payload, cached)
    }
}

impl TreeRead for Txn<'_> {
    fn node(&self, id: PageId) -> TreeResult<Node> {
        let fetch = self.fetch();
        let addr = self.st.mapping.current().addr(id, &fetch)?;
        tree_node(fetch.page(addr)?, &fetch, addr)
    }

    fn overflow(&self, first: PageId, pages: u32, len: u64) -> TreeResult<Vec<u8>> {
        self.fetch()
            .overflow(self.st.mapping.current(), first, pages, len)
    }

    fn locate_page(&self, id: PageId) -> (String, u64) {
        let fetch = self.fetch();
        match self.st.mapping.current().addr(id, &fetch) {
            Ok(addr) => fetch.locate(addr),
            Err(_) => (self.ctx.files.dir().to_string(), u64::from(id)),
        }
    }
}

impl TreeWrite for Txn<'_> {
    fn payload_capacity(&self) -> usize {
        max_payload(self.ctx.files.page_size())
    }

    fn put_leaf(&mut self, id: Option<PageId>, payload: Vec<u8>) -> TreeResult<PageId> {
        let id = match id {
            Some(id) => id,
            None => self.alloc()?,
        };
        let payload: Arc<[u8]> = payload.into();
        let cached = CachedPage::Tree(Node::Leaf(Arc::clone(&payload)));
        let leaf_kind = if self.ttl_tree {
            kind::TTL_LEAF
        } else {
            kind::LEAF
        };
        let addr = self.stage_page(leaf_kind, payload, cached)?;
        self.map(id, addr)?;
        Ok(id)
    }

    fn put_index(&mut self, id: Option<PageId>, node: IndexNode) -> TreeResult<PageId> {
        let id = match id {
            Some(id) => id,
            None => self.alloc()?,
        };
        let payload = node.encode().into();
        let addr = self.stage_page(
            kind::INDEX,
            payload,
            CachedPage::Tree(Node::Index(Arc::new(node))),
        )?;
        self.map(id, addr)?;
        Ok(id)
    }

    fn free(&mut self, id: PageId) -> TreeResult<()> {
        let src = Fetch {
            files: self.ctx.files,
            ranges: &self.st.ranges,
            staged: Some(&self.staged),
            kept: None,
        };
        self.st.mapping.free(id, &src)
    }

    fn put_overflow(&mut self, value: &[u8]) -> TreeResult<(PageId, u32)> {
        let cap = self.payload_capacity();
        let pages = u32::try_from(value.len().div_ceil(cap).max(1)).map_err(|_| {
            TreeError::InvalidArgument {
                what: "value too large".into(),
            }
        })?;
        let first = self.st.mapping.alloc_run(pages)?;
        for (i, chunk) in value.chunks(cap).enumerate() {
            let payload: Arc<[u8]> = chunk.into();
            let cached = CachedPage::Tree(Node::Leaf(Arc::clone(&payload)));
            let addr = self.stage_page(kind::OVERFLOW, payload, cached)?;
            self.map(first + i as u32, addr)?;
        }
        Ok((first, pages))
    }

    fn free_overflow(&mut self, first: PageId, pages: u32) -> TreeResult<()> {
        for i in 0..pages {
            self.free(first + i)?;
        }
        Ok(())
    }
}

/// The addresses of the leaves (key tree and TTL index) among staged pages, when data
/// pages are cached at all.
pub(crate) fn leaf_addrs(
    pages: &[StagedPage],
    cache_data_pages: bool,
) -> std::collections::HashSet<PageAddr> {
    pages
        .iter()
        .filter(|p| cache_data_pages && matches!(p.kind, kind::LEAF | kind::TTL_LEAF))
        .map(|p| p.addr)
        .collect()
}
