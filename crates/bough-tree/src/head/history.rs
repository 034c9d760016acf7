//! History points (ARCHITECTURE.md, "Point in time"): while the store keeps a history
//! window, every manifest record a head makes durable is followed, before the operation
//! returns, by a history point `history_<stamp>_<branch>_<term>` — one snapshot record of
//! the state the record produced, with its time in the `HISTORY` extension. A branch at
//! instant `t` is then the newest point at or before `t` plus a replay of the `LOG` it
//! names up to the last commit at or before `t`: commits after a manifest record go to the
//! file that record names until the next record (which has its own point).
//!
//! The point's overlay is the manifest's own (the mapping slots changed since its last
//! mapping checkpoint), tracked here as the records go by, exactly as replay computes it.

use std::collections::BTreeMap;

use super::*;
use crate::error::{TreeError, TreeResult};
use bough_manifest::{HistoryStamp, LogRecord, MERGE_BASES, POLICY, set_history_stamp};
use bough_names::HistoryName;

/// Names tried for one point before giving up: a stamp is taken when a millisecond
/// already holds a point, so only a clock far behind the directory's points runs out.
const STAMP_TRIES: u64 = 64;

/// What a head that writes history points tracks.
#[derive(Debug, Default)]
pub(crate) struct HistoryTrack {
    /// The overlay of the manifest's current state (slot changes since the last mapping
    /// checkpoint), as replay computes it.
    overlay: BTreeMap<PageId, u64>,
    /// The stamp of the last point this head wrote.
    last_stamp: u64,
}

impl HistoryTrack {
    /// Tracking from the overlay of the state a head opened at.
    pub(super) fn new(overlay: BTreeMap<PageId, u64>) -> Self {
        HistoryTrack {
            overlay,
            last_stamp: 0,
        }
    }

    /// Follows one appended record, as `ManifestState::apply` does.
    pub(super) fn follow(&mut self, log: &LogRecord) {
        if log.checkpoint.is_some() {
            self.overlay.clear();
        }
        self.overlay.extend(log.changes.iter().copied());
    }

    /// Follows a manifest replaced by one snapshot record (its overlay).
    pub(super) fn replaced(&mut self, overlay: &[(PageId, u64)]) {
        self.overlay = overlay.iter().copied().collect();
    }
}

impl Head {
    /// Writes the history point of the state the last durable manifest record produced,
    /// at store-clock time `now_ms`; `before` is the branch's version before that record.
    /// Nothing when the store keeps no history. A failure fails the operation (its state is
    /// durable, like a commit whose acknowledgement was lost); a read then refuses the
    /// instants it leaves unaccounted for (`HistoryStamp::before`), never answers them
    /// with an older state. Returns the point's name (`None` without history).
    pub fn write_history_point(
        &mut self,
        now_ms: u64,
        before: u64,
    ) -> TreeResult<Option<HistoryName>> {
        let Some(track) = self.history.as_ref() else {
            return Ok(None);
        };
        let mut snapshot = self.durable_snapshot();
        snapshot.overlay = track.overlay.iter().map(|(&id, &raw)| (id, raw)).collect();
        // As for archives: a point pins no merge base (the branch a point-in-time read
        // makes starts with bases of its own), and protection is the branch's, not its
        // history's.
        bough_manifest::ext::remove(&mut snapshot.extensions, MERGE_BASES);
        bough_manifest::ext::remove(&mut snapshot.extensions, POLICY);
        set_history_stamp(
            &mut snapshot.extensions,
            HistoryStamp {
                time_ms: now_ms,
                before,
            },
        );
        self.check_snapshot_invariants(&snapshot)?;
        let bytes = encode_snapshot(&snapshot).map_err(|e| TreeError::InvalidArgument {
            what: format!("cannot encode a history point of {}: {e}", self.branch),
        })?;
        let first = now_ms.max(track.last_stamp.saturating_add(1));
        for stamp in first..first.saturating_add(STAMP_TRIES) {
            let name = HistoryName::new(stamp, self.branch.clone(), self.term);
            match self
                .files
                .storage()
                .create_new(&self.files.path_of(&name.to_string()), &bytes)
            {
                Ok(()) => {
                    if let Some(t) = self.history.as_mut() {
                        t.last_stamp = stamp;
                    }
                    return Ok(Some(name));
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(TreeError::InvalidArgument {
            what: format!(
                "no free history point name for {} term {} from stamp {first} on",
                self.branch, self.term
            ),
        })
    }
}
