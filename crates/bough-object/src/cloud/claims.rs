//! Numbered claims: compare-and-swap built from create-if-absent. Manifests use it on every
//! service (as chains, below); `CURRENT_TERM` and the GC lease on services without If-Match
//! (opendal's memory and fs services; any service with `fencing = "numbered_claims"`).
//!
//! Such an object is kept as numbered versions `<name>.v<n>`, each created with
//! create-if-absent and never rewritten. Its "ETag" is `v<n>` of the highest version:
//!
//! - **Create** (If-None-Match): no version may exist; create `v0`.
//! - **Swap** from `v<n>` (If-Match): create `v<n+1>`. Of racing writers exactly one
//!   creates it; the others get "precondition failed", exactly as with If-Match.
//! - **Manifest chains.** A manifest version is FULL (the whole file) or APPEND (only what
//!   one commit appended, [`AppendPayload`]): the file is the newest FULL version with the
//!   APPEND versions above it applied, so a commit uploads only its record. A FULL version
//!   comes at the latest after [`MAX_CHAIN`] APPEND versions. Every other object's versions
//!   are FULL, and its content is the highest version.
//! - **Validity check.** A version number can be free again after its object was deleted,
//!   so a stale writer could fill such a hole. Versions are only ever deleted in ascending
//!   order (and the highest one last), so whenever `v<k>` is missing every version below it
//!   is missing too: a writer that finds its predecessor `v<n>` present after creating
//!   `v<n+1>` built on a version nobody has removed, and its claim is real (an APPEND checks
//!   with one HEAD, a FULL version lists, which its clean-up needs anyway). A writer that
//!   finds it gone removes its own version and has lost (`precondition failed`).
//! - **Clean-up.** After a FULL version is created the versions below it are deleted, in
//!   ascending order, stopping at the first failure so the order holds.
//! - **Reads** list the versions and walk down from the highest to the nearest FULL one; a
//!   version deleted in between (a newer FULL one replaced it) makes the read list again.
//!
//! The listing must be strongly consistent (S3, GCS and Azure listings are; the in-process
//! stores trivially are).

use std::sync::atomic::Ordering;

use bough_io::{IoError, IoResult};
use bough_names::parse_file_name;

use super::{Cond, Inner, Kind, get_full, kind_of, obj_err};
use crate::envelope::{AppendPayload, ENVELOPE_HEADER, Envelope, EnvelopeError};
use crate::object::{ObjectError, ObjectMeta};
use crate::retry::is_not_found;

/// How often a read starts over because the version it listed was replaced meanwhile.
const READ_ROUNDS: usize = 16;

/// The most APPEND versions a manifest chain may hold above its newest FULL version: the
/// next commit after that many writes a FULL version, so a read takes at most this many
/// GETs more than one.
pub(super) const MAX_CHAIN: u32 = 32;

/// How far a read walks down a chain before calling it damage (writers keep it within
/// [`MAX_CHAIN`]; a store written with a larger bound is still read).
const MAX_WALK: usize = 1024;

/// The longest file a chain may assemble to (the limit of files held in memory).
const MAX_ASSEMBLED: u64 = bough_io::memory::MAX_MEMORY_FILE_LEN;

/// A claims object read whole.
pub(super) struct Claimed {
    /// The content as one envelope: the whole file, sealed if the chain ends sealed, with
    /// the writer token of its newest version.
    pub env: Envelope,
    /// Metadata of the whole content, keyed by the object's name: `etag` = `v<n>` of the
    /// newest version, `size` = envelope header + the whole file; the other fields are the
    /// newest FULL version's.
    pub meta: ObjectMeta,
    /// APPEND versions above the newest FULL one.
    pub chain: u32,
}

/// The key of version `n` of `path`.
pub(super) fn version_key(path: &str, n: u64) -> String {
    format!("{path}{}{n}", bough_names::VERSION_INFIX)
}

/// The "ETag" of version `n`.
fn version_tag(n: u64) -> String {
    format!("v{n}")
}

fn parse_tag(etag: &str) -> Option<u64> {
    let digits = etag.strip_prefix('v')?;
    if digits.is_empty() || (digits.len() > 1 && digits.starts_with('0')) {
        return None;
    }
    digits.parse().ok()
}

impl Inner {
    /// The version numbers of `path`, ascending.
    pub(super) fn versions(&self, path: &str) -> IoResult<Vec<u64>> {
        let prefix = format!("{path}{}", bough_names::VERSION_INFIX);
        let base = path.rsplit('/').next().unwrap_or(path);
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self
                .retry
                .simple("list", || {
                    self.store.list(&prefix, false, after.as_deref(), 1000)
                })
                .map_err(|e| obj_err(path, e))?;
            for o in &page.objects {
                let name = o.key.rsplit('/').next().unwrap_or(&o.key);
                if let Ok(bough_names::FileKind::Version(v)) = parse_file_name(name)
                    && v.target.to_string() == base
                {
                    out.push(v.version);
                }
            }
            match page.next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        out.sort_unstable();
        Ok(out)
    }

    /// The content of `path`: its newest version, or for a manifest chain the newest FULL
    /// version with the APPEND versions above it applied in order (`etag` = `v<top>`).
    ///
    /// A version missing below an APPEND — replaced by a newer FULL version and cleaned up
    /// while this read ran — makes it list again. A gap that stays means the versions above
    /// it are a stale writer's hole fill it has not withdrawn yet (versions are deleted
    /// only in ascending order, so a valid chain has no gap): they are ignored.
    pub(super) fn claims_get(&self, path: &str) -> IoResult<Claimed> {
        let mut versions = self.versions(path)?;
        for _ in 0..READ_ROUNDS {
            let Some(&top) = versions.last() else {
                return Err(IoError::NotFound { path: path.into() });
            };
            let mut appends: Vec<(u64, Envelope)> = Vec::new();
            let mut n = top;
            let found = loop {
                let got = if versions.binary_search(&n).is_ok() {
                    self.get_envelope(&version_key(path, n))?
                } else {
                    None
                };
                let Some((env, meta)) = got else {
                    break Err(n);
                };
                if !env.appended() {
                    break Ok((env, meta));
                }
                if appends.len() >= MAX_WALK {
                    return Err(IoError::corruption(
                        version_key(path, n),
                        0,
                        format!("more than {MAX_WALK} APPEND versions above the last FULL one"),
                    ));
                }
                let Some(below) = n.checked_sub(1) else {
                    // The flags field (offset 14) says APPEND.
                    return Err(IoError::corruption(
                        version_key(path, n),
                        14,
                        "version 0 is an APPEND: it has nothing to append to",
                    ));
                };
                appends.push((n, env));
                n = below;
            };
            let (base, mut meta) = match found {
                Ok(b) => b,
                Err(missing) => {
                    let again = self.versions(path)?;
                    if again == versions {
                        // A lasting gap: what lies above it is no valid claim.
                        tracing::warn!(path, version = missing, "versions above a gap ignored");
                        versions.retain(|&v| v < missing);
                    } else {
                        versions = again;
                    }
                    continue;
                }
            };
            let token = appends.first().map_or(base.token, |(_, e)| e.token);
            let chain = appends.len() as u32;
            let mut env = base;
            if env.sealed() {
                // A sealed version is final: nothing valid builds on it.
                appends.clear();
            }
            for (v, a) in appends.iter().rev() {
                let key = version_key(path, *v);
                let p = AppendPayload::decode(&a.payload).map_err(|r| r.at(&key))?;
                let at = env.payload.len() as u64;
                if p.offset != at {
                    return Err(EnvelopeError::AppendMisplaced {
                        offset: p.offset,
                        file_end: at,
                    }
                    .at(&key));
                }
                let end = at
                    .checked_add(p.len)
                    .filter(|&e| e <= MAX_ASSEMBLED)
                    .ok_or_else(|| EnvelopeError::AppendTooLong { len: p.len, at }.at(&key))?;
                env.payload.extend_from_slice(p.bytes);
                env.payload.resize(end as usize, 0);
            }
            env.token = token;
            meta.key = path.to_string();
            meta.etag = Some(version_tag(top));
            meta.size = (ENVELOPE_HEADER + env.payload.len()) as u64;
            return Ok(Claimed { env, meta, chain });
        }
        Err(IoError::Locked {
            path: format!("{path} (its versions kept changing while it was read)"),
        })
    }

    /// Metadata of the newest version of `path` (for a manifest chain, of the whole file).
    pub(super) fn claims_head(&self, path: &str) -> IoResult<ObjectMeta> {
        if kind_of(path) == Kind::Manifest {
            return Ok(self.claims_get(path)?.meta);
        }
        for _ in 0..READ_ROUNDS {
            let Some(&n) = self.versions(path)?.last() else {
                return Err(IoError::NotFound { path: path.into() });
            };
            let key = version_key(path, n);
            match self.retry.simple("head", || self.store.head(&key)) {
                Ok(mut meta) => {
                    meta.key = path.to_string();
                    meta.etag = Some(version_tag(n));
                    return Ok(meta);
                }
                Err(e) if is_not_found(&e) => continue,
                Err(e) => return Err(obj_err(path, e)),
            }
        }
        Err(IoError::Locked {
            path: format!("{path} (its versions kept changing while it was read)"),
        })
    }

    /// What holds `path` now, for a writer that lost.
    fn claims_lost(&self, path: &str) -> IoResult<Cond> {
        match self.claims_get(path) {
            Ok(c) => Ok(Cond::Lost(Some((c.env, c.meta.etag)))),
            Err(e) if e.kind() == bough_io::ErrorKind::NotFound => Ok(Cond::Lost(None)),
            Err(e) => Err(e),
        }
    }

    /// A conditional write of an envelope object kept as numbered versions: the next
    /// version after `etag` (`v<n>`), or `v0` when `etag` is `None` and no version exists.
    pub(super) fn claims_put_cond(
        &self,
        path: &str,
        env: &Envelope,
        etag: Option<&str>,
    ) -> IoResult<Cond> {
        let n = match etag {
            Some(tag) => match parse_tag(tag).and_then(|p| p.checked_add(1)) {
                Some(n) => n,
                // Not a version tag of ours (a mode change on a live prefix): no match.
                None => return self.claims_lost(path),
            },
            None => {
                if !self.versions(path)?.is_empty() {
                    return self.claims_lost(path);
                }
                0
            }
        };
        let key = version_key(path, n);
        let body = env.encode();
        let out = self
            .retry
            .run("put_if_absent", || self.store.put_if_absent(&key, &body));
        let created = match out.result {
            Ok(_) => true,
            Err(e) => {
                let lost_race = matches!(e, ObjectError::PreconditionFailed { .. });
                if !(lost_race || out.maybe_applied || e.may_have_applied()) {
                    return Err(obj_err(path, e));
                }
                // A 412 after a timeout, or a timeout with no answer: the version is ours
                // if it carries our token.
                self.counters.read_backs.fetch_add(1, Ordering::Relaxed);
                match self
                    .retry
                    .simple("get", || get_full(self.store.as_ref(), &key))
                {
                    Ok((bytes, _)) => Envelope::decode(&bytes).is_ok_and(|t| t.token == env.token),
                    Err(nf) if is_not_found(&nf) && lost_race => false,
                    Err(nf) if is_not_found(&nf) => return Err(obj_err(path, e)),
                    Err(other) => return Err(obj_err(path, other)),
                }
            }
        };
        if !created {
            return self.claims_lost(path);
        }
        if env.appended() {
            // Validity of an APPEND: its predecessor must still exist. Nothing below it may
            // be cleaned up (the chain needs it), so one HEAD instead of a listing.
            let prev = version_key(path, n.saturating_sub(1));
            let valid = n > 0
                && match self.retry.simple("head", || self.store.head(&prev)) {
                    Ok(_) => true,
                    Err(e) if is_not_found(&e) => false,
                    Err(e) => return Err(obj_err(path, e)),
                };
            if !valid {
                return self.withdraw(path, &key, n);
            }
            self.count_upload(body.len());
            return Ok(Cond::Won(Some(version_tag(n))));
        }
        // Validity: the version this one builds on must still exist (see the module docs).
        let versions = self.versions(path)?;
        if n > 0 && !versions.contains(&(n - 1)) {
            return self.withdraw(path, &key, n);
        }
        self.count_upload(body.len());
        // Clean-up in ascending order, stopping at the first failure.
        for &old in versions.iter().filter(|&&v| v < n) {
            let k = version_key(path, old);
            if let Err(e) = self.retry.simple("delete", || self.store.delete(&k)) {
                tracing::debug!(path, version = old, error = %e, "old version not removed yet");
                break;
            }
        }
        Ok(Cond::Won(Some(version_tag(n))))
    }

    /// Removes version `n` (at `key`), which filled a hole: the writer lost.
    fn withdraw(&self, path: &str, key: &str, n: u64) -> IoResult<Cond> {
        tracing::warn!(
            path,
            version = n,
            "a numbered claim filled a hole; withdrawn"
        );
        self.retry
            .simple("delete", || self.store.delete(key))
            .map_err(|e| obj_err(path, e))?;
        self.claims_lost(path)
    }

    /// Deletes every version of `path`, ascending and the highest last, until none is left
    /// (a writer may add one while this runs; it is removed in the next round).
    pub(super) fn claims_delete(&self, path: &str) -> IoResult<()> {
        for _ in 0..READ_ROUNDS {
            let versions = self.versions(path)?;
            if versions.is_empty() {
                return Ok(());
            }
            for v in versions {
                let k = version_key(path, v);
                self.retry
                    .simple("delete", || self.store.delete(&k))
                    .map_err(|e| obj_err(path, e))?;
            }
        }
        Err(IoError::Locked {
            path: format!("{path} (versions kept appearing while it was deleted)"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_keys() {
        assert_eq!(
            version_key("t.0/manifest_main_5", 3),
            "t.0/manifest_main_5.v3"
        );
        assert_eq!(parse_tag("v0"), Some(0));
        assert_eq!(parse_tag("v12"), Some(12));
        assert_eq!(parse_tag("v012"), None);
        assert_eq!(parse_tag("\"abc\""), None);
        assert_eq!(parse_tag("v"), None);
    }
}
