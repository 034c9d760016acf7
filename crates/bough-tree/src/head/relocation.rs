//! Relocation (compaction and re-home): rewriting the live pages of victim files into the
//! head's own file, and counting live pages per file to choose victims.

use super::*;
use crate::error::{TreeError, TreeResult};

/// Finds, for each mapping node stored in a victim file, one logical id below it (the
/// checked walk: a hostile mapping page is a `Corruption`, never a loop or a wrapped id).
pub(crate) fn collect_mapping_touches(
    mapping: &MappingView,
    src: &dyn NodeSource,
    victims: &[FileId],
    fanout: u64,
    out: &mut Vec<PageId>,
) -> TreeResult<()> {
    walk_radix(mapping.root(), mapping.fanout(), src, &mut |pos, _| {
        if victims.contains(&pos.addr.file_id()) {
            let id = pos
                .first_chunk
                .checked_mul(fanout)
                .and_then(|id| u32::try_from(id).ok())
                .ok_or_else(|| {
                    let (file, offset) = src.locate(pos.addr);
                    TreeError::corruption(file, offset, "mapping node beyond the id space")
                })?;
            out.push(id);
        }
        Ok(true)
    })
}

impl Head {
    /// Rewrites every live page of the given files into the active file (same logical ids,
    /// new addresses), so those files stop being referenced by this head.
    pub fn relocate_files(&mut self, victims: &[FileId], now_ms: u64) -> TreeResult<u64> {
        if victims.is_empty() {
            return Ok(0);
        }
        self.finish_background()?;
        self.give_up_resume_of(victims);
        let snap = self.snapshot();
        let fetch = snap.fetch();
        // Tree and overflow pages: found through the mapping slots.
        let mut moves: Vec<(PageId, PageAddr)> = Vec::new();
        snap.mapping.for_each_slot(&fetch, &mut |id, raw| {
            if let Some(Slot::Page(a)) = Slot::decode(raw)
                && victims.contains(&a.file_id())
            {
                moves.push((id, a));
            }
        })?;
        // Mapping pages: touching one slot under a node forces the checkpoint to rewrite
        // every node on that path.
        let mut touch: Vec<PageId> = Vec::new();
        let fan = snap.mapping.fanout() as u64;
        collect_mapping_touches(&snap.mapping, &fetch, victims, fan, &mut touch)?;
        let moved = moves.len() as u64;
        let files = self.files.clone();
        let ranges = snap.ranges.clone();
        let relocate = move |txn: &mut Txn<'_>, _: &mut Applied| {
            for (id, addr) in moves {
                let h = files.handle(&ranges, addr.file_id())?;
                let (k, payload, offset) = files.read_raw(&h, addr.page_index())?;
                let cached = if k == kind::OVERFLOW {
                    CachedPage::Tree(Node::Leaf(payload.clone().into()))
                } else {
                    files.decode(&h.path, offset, k, payload.clone())?
                };
                let new = txn.stage_page(k, payload.into(), cached)?;
                txn.map(id, new)?;
            }
            for id in touch {
                let src = Fetch {
                    files: txn.ctx.files,
                    ranges: &txn.st.ranges,
                    staged: Some(&txn.staged),
                    kept: None,
                };
                let raw = txn.st.mapping.current().raw(id, &src)?;
                txn.st.mapping.set_raw(id, raw, &src)?;
            }
            Ok(())
        };
        if self.relocation_keeps_buffer()? {
            self.relocate_keeping_buffer(now_ms, relocate)?;
        } else {
            self.commit_inner(&[], true, now_ms, relocate)?;
        }
        Ok(moved)
    }

    /// Whether a relocation may leave the write buffer as it is: it holds writes, and the
    /// record can name the `LOG` in force unchanged (the head appends to a log of its own,
    /// has not yet to take its parent's tree, and no fork or staged extension waits for a
    /// record that absorbs the buffer). Otherwise the relocation's record checkpoints the
    /// buffer, as every record used to.
    fn relocation_keeps_buffer(&self) -> TreeResult<bool> {
        Ok(!self.log.buffer.is_empty()
            && self.log.fork_base.is_none()
            && self.pending_ext.is_empty()
            && !self.forks_waiting()
            && !self.inherits_log()?
            && !self.refs_in_force()?.is_empty())
    }

    /// Writes a relocation in one manifest record that keeps the write buffer
    /// (ARCHITECTURE.md, "Compaction under load"): moving pages changes no content, so the
    /// record's tree holds what the tree held, at the same `covered` version, and its
    /// `LOG` is the one in force. Recovery replays the same log records on top of it.
    /// Compaction thus never turns a large checkpoint into a small one.
    fn relocate_keeping_buffer(
        &mut self,
        now_ms: u64,
        relocate: impl FnOnce(&mut Txn<'_>, &mut Applied) -> TreeResult<()>,
    ) -> TreeResult<()> {
        self.check_poisoned()?;
        let payload = bough_manifest::encode_log_refs(&self.refs_in_force()?);
        let mut applied = Applied::default();
        let ctx = self.tree_ctx();
        let staged = commit::stage(&ctx, self.state.clone(), &[], true, &mut applied, relocate)?;
        let commit::Staged {
            st,
            pages,
            new_files,
            staged,
            checkpoint,
            changes,
        } = staged;
        if let Err(e) = self.write_pages(&st, &pages, &new_files, now_ms) {
            self.skip_file_ids(&new_files);
            return Err(e);
        }
        let record = commit::record_of(
            &st,
            self.seq + 1,
            checkpoint,
            changes,
            vec![(bough_manifest::LOG, payload)],
        );
        if let Err(e) = self.append_record(&record, "a relocation") {
            self.skip_file_ids(&new_files);
            return Err(e);
        }
        self.seq += 1;
        self.state = st;
        self.keep_written(&pages, staged);
        self.publish();
        let version = self.version();
        self.write_history_point(now_ms, version)?;
        Ok(())
    }

    /// Live pages per file id of this head (tree, overflow and mapping pages).
    pub fn live_pages_per_file(&self) -> TreeResult<HashMap<FileId, u64>> {
        let mut live: HashMap<FileId, u64> = HashMap::new();
        self.snapshot()
            .for_each_page(&mut |a| *live.entry(a.file_id()).or_default() += 1)?;
        Ok(live)
    }
}
