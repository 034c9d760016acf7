//! Point-in-time branches (ARCHITECTURE.md, "Point in time"): the state of a branch at any
//! instant inside the history window, read from its history points
//! (`history_<stamp>_<branch>_<term>`, written by its heads) and the log they name; a new
//! branch or a restore made from it; and the pruning of points the window no longer needs.

use super::*;
use crate::error::{CatalogError, CatalogResult};
use bough_manifest::{HISTORY, LOG, LogRef, MERGE_BASES, POLICY, history_stamp, log_refs};
use bough_names::HistoryName;
use bough_tree::buffer::WriteBuffer;
use bough_tree::wal::read_span;

/// What the history point after the one a read starts from says (for the newest point:
/// the branch now).
#[derive(Clone, Copy)]
struct Next<'a> {
    /// Its first log reference (where it left the log).
    log: Option<&'a LogRef>,
    /// The branch's version just before it.
    before: u64,
}

/// A history point as a read needs it.
struct ReadPoint {
    state: bough_manifest::ManifestState,
    stamp: bough_manifest::HistoryStamp,
    refs: Vec<LogRef>,
}

/// A branch's state at an instant.
#[derive(Debug)]
pub struct PointInTime {
    /// The history point it starts from.
    pub point: HistoryName,
    /// The point's tree (no `LOG`, no history time, no merge bases, no policy).
    pub snapshot: Snapshot,
    /// The logged commits after the point, up to the instant.
    pub commits: WriteBuffer,
    /// The branch's commit version at the instant.
    pub version: u64,
}

impl Partition {
    /// The history points of `branch`, oldest first: by term, then stamp. That is the
    /// order they were written in: a term's head is fenced before the next term's writes
    /// anything, and a head's stamps grow. (Stamps alone are not: a new term's head may
    /// take a millisecond the old one had already moved past.)
    pub fn history_points(&self, branch: &BranchName) -> CatalogResult<Vec<HistoryName>> {
        let mut out: Vec<HistoryName> = self
            .storage()
            .list(self.files.dir())?
            .iter()
            .filter_map(|n| match classify(n) {
                FileKind::History(h) if h.branch == *branch => Some(h),
                _ => None,
            })
            .collect();
        out.sort_by_key(|h| (h.term, h.stamp));
        Ok(out)
    }

    /// The state of branch `head` (its current head: its incarnation, and the version its
    /// state has now) at store-clock instant `at_ms`, which must lie in
    /// `[now_ms - window_ms, now_ms]`: the newest history point at or before it, and the
    /// commits its log holds up to it.
    pub fn state_at(
        &self,
        head: &Head,
        at_ms: u64,
        now_ms: u64,
        window_ms: u64,
    ) -> CatalogResult<PointInTime> {
        let (branch, incarnation) = (head.branch(), head.incarnation());
        let refuse = |why: String| CatalogError::HistoryNotKept {
            branch: branch.to_string(),
            at_ms,
            why,
        };
        if window_ms == 0 {
            return Err(refuse(
                "the store keeps no history (history_window_ms is 0)".into(),
            ));
        }
        if at_ms > now_ms {
            return Err(refuse(format!("it is after now ({now_ms} ms)")));
        }
        let oldest = now_ms.saturating_sub(window_ms);
        if at_ms < oldest {
            return Err(refuse(format!(
                "it is before the history window, which begins at {oldest} ms \
                 (history_window_ms = {window_ms})"
            )));
        }
        let points = self.history_points(branch)?;
        // In written order a branch's point times never go back (the store clock is
        // monotonic), and a stamp is never below its time: every point up to the last one
        // stamped at or before the instant has its time there too, and the answer is that
        // one or a later point whose stamp was raised past the instant. So the read starts
        // there and goes forward to the first point after the instant (the answer's
        // successor), reading a few points whatever the history's length.
        let from = points.iter().rposition(|h| h.stamp <= at_ms).unwrap_or(0);
        let mut chosen: Option<(HistoryName, ReadPoint)> = None;
        let mut successor: Option<ReadPoint> = None;
        for p in points.iter().skip(from) {
            let Some(rp) = self.read_point(p, incarnation, &refuse)? else {
                continue;
            };
            if rp.stamp.time_ms > at_ms {
                successor = Some(rp);
                break;
            }
            chosen = Some((p.clone(), rp));
        }
        // What follows the answer: its successor point, or the branch now.
        let next = match &successor {
            Some(s) => Next {
                log: s.refs.last(),
                before: s.stamp.before,
            },
            None => Next {
                log: None,
                before: head.version(),
            },
        };
        if chosen.is_none() {
            // Only points of another life of the name from `from` on: an earlier point of
            // this one (all earlier points' times are at or before the instant).
            for p in points.iter().take(from).rev() {
                if let Some(rp) = self.read_point(p, incarnation, &refuse)? {
                    chosen = Some((p.clone(), rp));
                    break;
                }
            }
        }
        let Some((point, rp)) = chosen else {
            return Err(refuse(match successor {
                Some(s) => format!("its oldest kept state is at {} ms", s.stamp.time_ms),
                None => "it has no history point (none written since it was created or the \
                         window began)"
                    .into(),
            }));
        };
        self.materialize(point, rp.state, rp.stamp.time_ms, &rp.refs, next, at_ms)
    }

    /// Reads history point `p`: `None` when it belongs to another incarnation of the name
    /// (an earlier life whose deletion was cut short); a point pruned since the listing is
    /// refused with `refuse` (the window moved past it: an older point would be wrong).
    fn read_point(
        &self,
        p: &HistoryName,
        incarnation: u64,
        refuse: &dyn Fn(String) -> CatalogError,
    ) -> CatalogResult<Option<ReadPoint>> {
        let path = self.files.path_of(&p.to_string());
        let bytes = match self.storage().read_file(&path, MAX_MANIFEST_BYTES) {
            Ok(b) => b,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(refuse(format!(
                    "history point {p} was pruned meanwhile (the window moved past it)"
                )));
            }
            Err(e) => return Err(e.into()),
        };
        let r = replay(&bytes).map_err(|e| CatalogError::record(path.clone(), e))?;
        if r.records != 1 {
            return Err(CatalogError::corruption(
                path,
                0,
                "a history point holds exactly one snapshot record",
            ));
        }
        if state_incarnation(&r.state, &path)? != incarnation {
            return Ok(None);
        }
        let stamp = history_stamp(&r.state.extensions)
            .map_err(|e| CatalogError::corruption(&path, 0, format!("HISTORY: {e}")))?
            .ok_or_else(|| CatalogError::corruption(&path, 0, "no HISTORY extension"))?;
        let refs = log_refs(&r.state.extensions)
            .map_err(|e| CatalogError::corruption(&path, 0, format!("LOG extension: {e}")))?
            .unwrap_or_default();
        Ok(Some(ReadPoint {
            state: r.state,
            stamp,
            refs,
        }))
    }

    /// The state of history point `point` (replayed as `state`, its time `time`, its
    /// `LOG` references `refs`) at `at_ms`. The log is read up to where the next point
    /// left it (`next.log`), since a record that changes content takes a version of its
    /// own with no log record, and the log skips it there. Every state change between the
    /// two points must be accounted for: the log must reach the version the next point
    /// (or the branch now) had before it, `next.before`; if it does not, a change whose
    /// point was never written lies after the last commit the log holds, and instants from
    /// that commit on are refused, never answered with the state before it.
    fn materialize(
        &self,
        point: HistoryName,
        state: bough_manifest::ManifestState,
        time: u64,
        refs: &[LogRef],
        next: Next<'_>,
        at_ms: u64,
    ) -> CatalogResult<PointInTime> {
        let end = next.log.map(|n| (&n.file, n.start));
        let span = read_span(self.storage().as_ref(), self.files.dir(), refs, at_ms, end)?;
        let reached = span.reached.unwrap_or_else(|| state.version());
        if span.skips || next.before > reached {
            let since = span.last_clock.unwrap_or(time);
            if at_ms >= since {
                return Err(CatalogError::HistoryNotKept {
                    branch: point.branch.to_string(),
                    at_ms,
                    why: format!(
                        "the branch changed after version {reached} (after {since} ms) with no history \
                         point (its write failed), so its state from then until its next point \
                         cannot be told"
                    ),
                });
            }
        }
        let commits = span.commits;
        let mut snapshot = state.to_snapshot();
        let version = commits.last_version().unwrap_or_else(|| state.version());
        for tag in [LOG, HISTORY, MERGE_BASES, POLICY] {
            bough_manifest::ext::remove(&mut snapshot.extensions, tag);
        }
        bough_manifest::set_commit_version(&mut snapshot.extensions, state.version());
        Ok(PointInTime {
            point,
            snapshot,
            commits,
            version,
        })
    }

    /// Creates branch `name` as `from` was at `at_ms` (inside the history window of
    /// `window_ms` before `now_ms`). `from` is the source branch's head, so its log is not
    /// appended to meanwhile. The branch is created in one step from the whole state (see
    /// [`Partition::whole_state`]): a crash leaves it whole or absent.
    pub fn branch_at(
        &self,
        from: &Head,
        name: &BranchName,
        at_ms: u64,
        now_ms: u64,
        window_ms: u64,
    ) -> CatalogResult<Head> {
        let term = self.check_new_name(name)?;
        let pit = self.state_at(from, at_ms, now_ms, window_ms)?;
        // Its first merge base with `from` is that state (commits included).
        let origin = BranchOrigin {
            parent: Some((from.branch().clone(), pit.point.term)),
            fork_version: pit.version,
            created_at_ms: now_ms,
        };
        let (snapshot, staging) = self.whole_state(pit, now_ms)?;
        let head = self.create_checkpointed(snapshot, name, term, origin);
        self.drop_staging(staging);
        head
    }

    /// Restores `head`'s branch to its state at `at_ms` in place, keeping the current state
    /// as branch `backup` (as [`Partition::restore`] does for an archive), in one step from
    /// the whole state (see [`Partition::whole_state`]). The caller must drop `head` (it is
    /// fenced) and use the returned one.
    pub fn restore_at(
        &self,
        head: &mut Head,
        at_ms: u64,
        backup: &BranchName,
        now_ms: u64,
        window_ms: u64,
    ) -> CatalogResult<Head> {
        Self::refuse_if_head_protected(head, "restoring it to an earlier instant")?;
        let pit = self.state_at(head, at_ms, now_ms, window_ms)?;
        let (snapshot, staging) = self.whole_state(pit, now_ms)?;
        let restored = self.restore_snapshot(head, snapshot, backup, now_ms);
        self.drop_staging(staging);
        restored
    }

    /// The state at an instant as one checkpointed snapshot: the point's tree itself when
    /// no logged commit follows it; else that tree with the commits applied in a staging
    /// branch (`pitr-<random>`, marked `STAGING`), whose checkpointed state it returns with
    /// the staging head. A branch or restore made from it then takes one step, so a crash
    /// never leaves it with the point's tree and not the commits (the staging branch of a
    /// crashed operation is removed at the next writing open, as every staging branch).
    fn whole_state(
        &self,
        pit: PointInTime,
        now_ms: u64,
    ) -> CatalogResult<(Snapshot, Option<(BranchName, Head)>)> {
        let mut commits = pit.commits;
        let Some((_, muts)) = commits.frozen_batch() else {
            return Ok((pit.snapshot, None));
        };
        let name =
            BranchName::new(&format!("pitr-{:016x}", (self.incarnations.0)())).map_err(|e| {
                CatalogError::InvalidArgument {
                    what: format!("staging branch name: {e}"),
                }
            })?;
        let term = self.check_new_name(&name)?;
        let origin = BranchOrigin {
            parent: None,
            fork_version: pit.version,
            created_at_ms: now_ms,
        };
        let purpose = format!("the state of {} at a point in time", pit.point.branch);
        let mut staging = self.create_from(
            ForkPoint::checkpointed(pit.snapshot),
            &name,
            term,
            origin,
            Some(&purpose),
            None,
        )?;
        let built = staging
            .commit_direct(&muts, now_ms)
            .and_then(|_| staging.fork_point(now_ms));
        match built {
            Ok(fork) => Ok((fork.snapshot, Some((name, staging)))),
            Err(e) => {
                self.drop_staging(Some((name, staging)));
                Err(e.into())
            }
        }
    }

    /// Deletes a staging branch [`Partition::whole_state`] made (what it wrote stays while
    /// the state made from it references it). A failure leaves it to the next writing
    /// open, which removes every staging branch.
    fn drop_staging(&self, staging: Option<(BranchName, Head)>) {
        let Some((name, mut head)) = staging else {
            return;
        };
        if let Err(e) = self.delete_branch(&name) {
            tracing::warn!(branch = %name, error = %e, "could not delete a point-in-time staging branch");
        }
        head.retire();
    }

    /// Deletes the history points no instant of the window needs any more: of each
    /// branch's points (in written order), those before the last one stamped at or before
    /// the window's start. A stamp is never below its point's time, so that point's time
    /// is at or before every instant of the window, and a read at any of them picks it or
    /// a later point. Returns how many were deleted.
    pub fn prune_history(&self, now_ms: u64, window_ms: u64) -> CatalogResult<usize> {
        let cutoff = now_ms.saturating_sub(window_ms);
        let mut by_branch: HashMap<BranchName, Vec<HistoryName>> = HashMap::new();
        for n in self.storage().list(self.files.dir())? {
            // Parse only the names that can be history points: a partition of many branches
            // lists two files per branch.
            if !n.starts_with(bough_names::HISTORY_PREFIX) {
                continue;
            }
            if let FileKind::History(h) = classify(&n) {
                by_branch.entry(h.branch.clone()).or_default().push(h);
            }
        }
        let mut doomed = Vec::new();
        for (_, mut points) in by_branch {
            // Written order (see `history_points`).
            points.sort_by_key(|h| (h.term, h.stamp));
            // With no history window every point goes; else those before the newest point
            // stamped at or before the cutoff.
            let keep_from = if window_ms == 0 {
                points.len()
            } else {
                points.iter().rposition(|h| h.stamp <= cutoff).unwrap_or(0)
            };
            doomed.extend(points.into_iter().take(keep_from));
        }
        for h in &doomed {
            match self.storage().delete(&self.files.path_of(&h.to_string())) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        if !doomed.is_empty() {
            self.storage().sync_dir(self.files.dir())?;
        }
        Ok(doomed.len())
    }
}

impl Partition {
    /// Writes the first history point of a new manifest (a new branch, a restore, a
    /// repair) before `CURRENT_TERM` names it: if it cannot be written, the manifest goes
    /// again, durably, so the operation fails whole and can be retried (and no state of the
    /// branch is left without its point, which would make a read at a later instant take an
    /// older state). Returns the point, for [`Partition::name_term`].
    pub(crate) fn first_history_point(
        &self,
        head: &mut Head,
        now_ms: u64,
        before: u64,
    ) -> CatalogResult<Option<HistoryName>> {
        match head.write_history_point(now_ms, before) {
            Ok(point) => Ok(point),
            Err(e) => {
                let path = head.manifest_path().to_string();
                let _ = self
                    .storage()
                    .delete(&path)
                    .and_then(|()| self.storage().sync_dir(self.files.dir()));
                Err(e.into())
            }
        }
    }

    /// Points `CURRENT_TERM` at the new manifest `head` wrote, whose first history point
    /// is `point`. When that fails and the manifest went again (the term never became the
    /// branch's), the point goes too: a point of a state the branch never had would be read
    /// as its state after that instant.
    pub(crate) fn name_term(
        &self,
        head: &Head,
        incarnation: u64,
        point: Option<HistoryName>,
        entry: RecordEntry,
    ) -> CatalogResult<()> {
        let Err(e) = self.point_current_term(head, incarnation, entry) else {
            return Ok(());
        };
        let gone = matches!(
            self.storage().file_len(head.manifest_path()),
            Err(ref g) if g.kind() == ErrorKind::NotFound
        );
        if let (true, Some(p)) = (gone, point) {
            let _ = self
                .storage()
                .delete(&self.files.path_of(&p.to_string()))
                .and_then(|()| self.storage().sync_dir(self.files.dir()));
        }
        Err(e)
    }
}
