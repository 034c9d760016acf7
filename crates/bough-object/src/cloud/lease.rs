//! The GC lease of a partition: one process at a time deletes data objects in a partition.
//!
//! `<partition>/GC_LEASE` is an envelope object (kept as numbered versions on services
//! without If-Match) whose payload is a [`LeaseRecord`]: who holds the lease and until
//! when. It changes only by conditional writes:
//!
//! - **Acquire**: create it (If-None-Match) when there is none; otherwise replace it with
//!   If-Match on the version read, and only if that version is released or expired by the
//!   acquirer's clock. Of racing acquirers exactly one wins.
//! - **Renew**: before each deletion, once half the lease has passed, the holder replaces
//!   its own version (If-Match). If anyone else wrote the lease meanwhile the swap fails:
//!   the lease is lost and the holder deletes nothing more (`Fenced`).
//! - **Release**: the holder writes the record with the RELEASED flag (If-Match), so the
//!   next GC need not wait for the expiry.
//!
//! A lease is a promise about time: the holder checks it before every deletion and renews
//! while more than half of it is left, so a deletion happens at most half a lease after a
//! successful check. Clocks of the processes must agree to well within that (the default
//! lease is 60 s).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bough_io::{IoError, IoResult};
use bough_names::GC_LEASE_FILE;
use parking_lot::Mutex;

use super::{Cond, Inner, check_path};
use crate::envelope::{ENVELOPE_HEADER, Envelope};
use crate::object::Etag;

/// Payload length of a lease record.
pub const LEASE_RECORD_LEN: usize = 40;
const MAGIC: &[u8; 4] = b"BGCL";
const VERSION: u16 = 1;
/// Flag: the holder gave the lease up.
pub const LEASE_RELEASED: u16 = 1;

/// Who holds a partition's GC lease, and until when (the payload of `GC_LEASE`).
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | magic `BGCL` |
/// | 4 | 2 | version = 1 (u16 LE) |
/// | 6 | 2 | flags: bit 0 = RELEASED; other bits zero |
/// | 8 | 16 | holder: unique token of this acquisition (u128 LE) |
/// | 24 | 8 | acquired at, ms since the epoch (u64 LE) |
/// | 32 | 8 | expires at, ms since the epoch (u64 LE) |
///
/// The envelope around it carries the checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseRecord {
    /// The acquisition's token (unique per acquisition, kept by renewals).
    pub holder: u128,
    /// When it was acquired.
    pub acquired_ms: u64,
    /// When it lapses unless renewed.
    pub expires_ms: u64,
    /// Given up by its holder.
    pub released: bool,
}

/// Why a lease record is refused: one variant per check.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseRecordError {
    /// Not [`LEASE_RECORD_LEN`] bytes.
    WrongLength(usize),
    /// Bytes 0..4 are not the lease magic.
    BadMagic,
    /// A version this build does not read.
    UnknownVersion(u16),
    /// Flag bits this build does not know.
    UnknownFlags(u16),
}

impl LeaseRecordError {
    /// The byte of the record (the envelope's payload) the failed check read.
    pub fn offset(&self) -> u64 {
        match self {
            LeaseRecordError::WrongLength(_) | LeaseRecordError::BadMagic => 0,
            LeaseRecordError::UnknownVersion(_) => 4,
            LeaseRecordError::UnknownFlags(_) => 6,
        }
    }
}

impl std::fmt::Display for LeaseRecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeaseRecordError::WrongLength(n) => {
                write!(f, "lease record of {n} bytes, expected {LEASE_RECORD_LEN}")
            }
            LeaseRecordError::BadMagic => f.write_str("bad lease magic"),
            LeaseRecordError::UnknownVersion(v) => write!(f, "unknown lease version {v}"),
            LeaseRecordError::UnknownFlags(x) => write!(f, "unknown lease flags {x:#x}"),
        }
    }
}

impl std::error::Error for LeaseRecordError {}

impl LeaseRecord {
    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(LEASE_RECORD_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        let flags = if self.released { LEASE_RELEASED } else { 0 };
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&self.holder.to_le_bytes());
        out.extend_from_slice(&self.acquired_ms.to_le_bytes());
        out.extend_from_slice(&self.expires_ms.to_le_bytes());
        out
    }

    /// Parses a record; the error says what is wrong (and [`LeaseRecordError::offset`]
    /// where).
    pub fn decode(b: &[u8]) -> Result<LeaseRecord, LeaseRecordError> {
        if b.len() != LEASE_RECORD_LEN {
            return Err(LeaseRecordError::WrongLength(b.len()));
        }
        if b.get(0..4) != Some(&MAGIC[..]) {
            return Err(LeaseRecordError::BadMagic);
        }
        // The length was checked above: every fixed field below is there.
        let byte = |at: usize| b.get(at).copied().unwrap_or_default();
        let version = u16::from_le_bytes([byte(4), byte(5)]);
        if version != VERSION {
            return Err(LeaseRecordError::UnknownVersion(version));
        }
        let flags = u16::from_le_bytes([byte(6), byte(7)]);
        if flags & !LEASE_RELEASED != 0 {
            return Err(LeaseRecordError::UnknownFlags(flags));
        }
        let mut h = [0u8; 16];
        if let Some(holder) = b.get(8..24) {
            h.copy_from_slice(holder);
        }
        let u64_at = |o: usize| {
            let mut x = [0u8; 8];
            if let Some(field) = b.get(o..o + 8) {
                x.copy_from_slice(field);
            }
            u64::from_le_bytes(x)
        };
        Ok(LeaseRecord {
            holder: u128::from_le_bytes(h),
            acquired_ms: u64_at(24),
            expires_ms: u64_at(32),
            released: flags & LEASE_RELEASED != 0,
        })
    }
}

#[derive(Debug)]
struct Held {
    etag: Option<Etag>,
    record: LeaseRecord,
}

/// The state of one held lease, shared by the guard and the storage's registry.
#[derive(Debug)]
pub(super) struct LeaseState {
    path: String,
    dir: String,
    ttl_ms: u64,
    held: Mutex<Held>,
    lost: AtomicBool,
    released: AtomicBool,
}

/// A held GC lease of one partition. Data objects of the partition can be deleted through
/// the [`CloudStorage`](crate::CloudStorage) while it is held (and only then); each deletion
/// checks and, when due, renews it. Released when dropped.
#[derive(Debug)]
pub struct GcLease {
    inner: Arc<Inner>,
    state: Arc<LeaseState>,
}

impl Inner {
    /// Claims the GC lease of `dir` (see the module docs).
    pub(super) fn acquire_gc_lease(self: &Arc<Self>, dir: &str) -> IoResult<GcLease> {
        check_path(dir, false)?;
        if dir.is_empty() {
            return Err(IoError::InvalidArgument {
                what: "a GC lease belongs to a partition directory, not the root".into(),
            });
        }
        let path = format!("{dir}/{GC_LEASE_FILE}");
        if let Some(s) = self
            .leases
            .lock()
            .get(dir)
            .and_then(std::sync::Weak::upgrade)
            && !s.lost.load(Ordering::Acquire)
            && !s.released.load(Ordering::Acquire)
        {
            return Err(IoError::Locked {
                path: format!("{path} (held by another GC of this process)"),
            });
        }
        let now = (self.clock)();
        let current = match self.fetch_doc(&path) {
            Ok(d) => Some(d),
            Err(e) if e.kind() == bough_io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let etag = match &current {
            None => None,
            Some(doc) => {
                // The record is the envelope's payload: its offsets are past the header.
                let rec = LeaseRecord::decode(&doc.payload).map_err(|r| {
                    IoError::corruption(&path, ENVELOPE_HEADER as u64 + r.offset(), r.to_string())
                })?;
                if !rec.released && now < rec.expires_ms {
                    return Err(IoError::Locked {
                        path: format!(
                            "{path} (another process collects garbage here; its lease runs \
                             {} ms more)",
                            rec.expires_ms - now
                        ),
                    });
                }
                Some(doc.etag.clone().ok_or_else(|| IoError::Unsupported {
                    what: format!("{path}: the store reported no ETag to swap the lease on"),
                })?)
            }
        };
        let record = LeaseRecord {
            holder: self.token(),
            acquired_ms: now,
            expires_ms: now.saturating_add(self.gc_lease_ms),
            released: false,
        };
        let etag = match self.write_lease(&path, &record, etag.as_deref())? {
            Some(e) => e,
            None => {
                return Err(IoError::Locked {
                    path: format!("{path} (another process took the GC lease first)"),
                });
            }
        };
        tracing::info!(lease = %path, expires_ms = record.expires_ms, "GC lease acquired");
        let state = Arc::new(LeaseState {
            path,
            dir: dir.to_string(),
            ttl_ms: self.gc_lease_ms,
            held: Mutex::new(Held {
                etag: Some(etag),
                record,
            }),
            lost: AtomicBool::new(false),
            released: AtomicBool::new(false),
        });
        self.leases
            .lock()
            .insert(dir.to_string(), Arc::downgrade(&state));
        Ok(GcLease {
            inner: self.clone(),
            state,
        })
    }

    /// Writes a lease record conditionally; `Some(new etag)` if it is now the lease's
    /// content, `None` if someone else's write won.
    fn write_lease(
        &self,
        path: &str,
        record: &LeaseRecord,
        etag: Option<&str>,
    ) -> IoResult<Option<Etag>> {
        let env = Envelope {
            flags: 0,
            token: self.token(),
            payload: record.encode(),
        };
        match self.put_cond(path, &env, etag)? {
            Cond::Won(e) => {
                let e = self.etag_after(path, e)?;
                self.remember(path, env, e.clone());
                e.map(Some).ok_or_else(|| IoError::Unsupported {
                    what: format!("{path}: the store reported no ETag for the lease"),
                })
            }
            Cond::Lost(theirs) => {
                match theirs {
                    Some((t, e)) => self.remember(path, t, e),
                    None => {
                        self.docs.lock().remove(path);
                    }
                }
                Ok(None)
            }
        }
    }

    /// Before deleting a data object of `dir`: the lease of `dir` must be held by this
    /// instance (renewed when due).
    pub(super) fn check_gc_lease(&self, dir: &str, path: &str) -> IoResult<()> {
        let state = self
            .leases
            .lock()
            .get(dir)
            .and_then(std::sync::Weak::upgrade);
        match state {
            Some(s) => self.check_state(&s),
            None => Err(IoError::Locked {
                path: format!(
                    "{path}: data objects are deleted only by a GC holding the partition's \
                     lease"
                ),
            }),
        }
    }

    fn check_state(&self, s: &LeaseState) -> IoResult<()> {
        if s.released.load(Ordering::Acquire) {
            return Err(IoError::Locked {
                path: format!("{}: the GC lease was released", s.path),
            });
        }
        if s.lost.load(Ordering::Acquire) {
            return Err(self.lease_lost(s));
        }
        let mut held = s.held.lock();
        let now = (self.clock)();
        // Renew once half the lease has passed, so a deletion happens while at least half
        // of it is left.
        if now < held.record.expires_ms && held.record.expires_ms - now > s.ttl_ms / 2 {
            return Ok(());
        }
        let record = LeaseRecord {
            expires_ms: now.saturating_add(s.ttl_ms),
            ..held.record
        };
        match self.write_lease(&s.path, &record, held.etag.as_deref()) {
            Ok(Some(etag)) => {
                held.etag = Some(etag);
                held.record = record;
                tracing::debug!(lease = %s.path, expires_ms = record.expires_ms, "GC lease renewed");
                Ok(())
            }
            Ok(None) => {
                s.lost.store(true, Ordering::Release);
                Err(self.lease_lost(s))
            }
            // Unknown whether the renewal landed: delete nothing on an uncertain lease.
            Err(e) => Err(e),
        }
    }

    fn lease_lost(&self, s: &LeaseState) -> IoError {
        self.counters.fenced.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(lease = %s.path, "GC lease lost to another process; deleting nothing more");
        IoError::Fenced {
            what: format!(
                "{}: the GC lease of {} passed to another process",
                s.path, s.dir
            ),
        }
    }
}

impl GcLease {
    /// The partition directory the lease covers.
    pub fn dir(&self) -> &str {
        &self.state.dir
    }

    /// How long the lease lasts without renewal (ms).
    pub fn ttl_ms(&self) -> u64 {
        self.state.ttl_ms
    }

    /// The record as last written by this holder.
    pub fn record(&self) -> LeaseRecord {
        self.state.held.lock().record
    }

    /// Checks that the lease is still held, renewing it when half of it has passed;
    /// `Fenced` once another process took it over.
    pub fn check(&self) -> IoResult<()> {
        self.inner.check_state(&self.state)
    }

    /// Gives the lease up (best effort: a failed release just lets it expire).
    pub fn release(&self) {
        if self.state.released.swap(true, Ordering::AcqRel)
            || self.state.lost.load(Ordering::Acquire)
        {
            return;
        }
        let held = self.state.held.lock();
        let record = LeaseRecord {
            released: true,
            ..held.record
        };
        match self
            .inner
            .write_lease(&self.state.path, &record, held.etag.as_deref())
        {
            Ok(Some(_)) => tracing::info!(lease = %self.state.path, "GC lease released"),
            Ok(None) => {
                tracing::warn!(lease = %self.state.path, "GC lease was lost before its release")
            }
            Err(e) => {
                tracing::warn!(lease = %self.state.path, error = %e, "GC lease release failed; it expires instead")
            }
        }
    }
}

impl Drop for GcLease {
    fn drop(&mut self) {
        self.release();
        let mut leases = self.inner.leases.lock();
        if leases
            .get(&self.state.dir)
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(&self.state)))
        {
            leases.remove(&self.state.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trip_and_damage() {
        let r = LeaseRecord {
            holder: 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10,
            acquired_ms: 1_700_000_000_000,
            expires_ms: 1_700_000_060_000,
            released: true,
        };
        let b = r.encode();
        assert_eq!(b.len(), LEASE_RECORD_LEN);
        assert_eq!(LeaseRecord::decode(&b), Ok(r));
        assert!(LeaseRecord::decode(&b[..39]).is_err());
        let mut bad = b.clone();
        bad[0] ^= 1;
        assert!(LeaseRecord::decode(&bad).is_err());
        let mut bad = b.clone();
        bad[6] = 2;
        assert!(LeaseRecord::decode(&bad).is_err());
        let mut bad = b;
        bad[4] = 9;
        assert!(LeaseRecord::decode(&bad).is_err());
    }
}
