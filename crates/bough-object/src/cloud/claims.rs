//! Numbered claims: compare-and-swap built from create-if-absent, for services without
//! If-Match (opendal's memory and fs services; any service with `fencing =
//! "numbered_claims"`).
//!
//! An object that changes by compare-and-swap — a manifest, a `CURRENT_TERM` record, the
//! GC lease — is kept as numbered versions `<name>.v<n>`, each created with create-if-absent
//! and never rewritten. The highest version is the object's content. Its "ETag" is `v<n>`:
//!
//! - **Create** (If-None-Match): no version may exist; create `v0`.
//! - **Swap** from `v<n>` (If-Match): create `v<n+1>`. Of racing writers exactly one
//!   creates it; the others get "precondition failed", exactly as with If-Match.
//! - **Validity check.** A version number can be free again after its object was deleted,
//!   so a stale writer could fill such a hole. After creating `v<n+1>` the writer lists the
//!   versions: `v<n>` must still be there. Versions are only ever deleted in ascending
//!   order (and the highest one last), so whenever `v<k>` is missing every version below it
//!   is missing too: a writer that finds its predecessor present built on a version nobody
//!   has removed, and its claim is real. A writer that finds it gone removes its own version
//!   and has lost (`precondition failed`).
//! - **Clean-up.** After a successful swap the versions below the new one are deleted, in
//!   ascending order, stopping at the first failure so the order holds.
//! - **Reads** list the versions and get the highest; a version deleted in between (a newer
//!   one replaced it) makes the read list again.
//!
//! The listing must be strongly consistent (S3, GCS and Azure listings are; the in-process
//! stores trivially are).

use std::sync::atomic::Ordering;

use bough_io::{IoError, IoResult};
use bough_names::parse_file_name;

use super::{Cond, Inner, get_full, obj_err};
use crate::envelope::Envelope;
use crate::object::{ObjectError, ObjectMeta};
use crate::retry::is_not_found;

/// How often a read starts over because the version it listed was replaced meanwhile.
const READ_ROUNDS: usize = 16;

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

    /// The newest version of `path` and its metadata (`etag` = `v<n>`).
    pub(super) fn claims_get(&self, path: &str) -> IoResult<(Vec<u8>, ObjectMeta)> {
        for _ in 0..READ_ROUNDS {
            let Some(&n) = self.versions(path)?.last() else {
                return Err(IoError::NotFound { path: path.into() });
            };
            let key = version_key(path, n);
            match self
                .retry
                .simple("get", || get_full(self.store.as_ref(), &key))
            {
                Ok((bytes, mut meta)) => {
                    meta.key = path.to_string();
                    meta.etag = Some(version_tag(n));
                    return Ok((bytes, meta));
                }
                // Replaced by a newer version and cleaned up meanwhile: list again.
                Err(e) if is_not_found(&e) => continue,
                Err(e) => return Err(obj_err(path, e)),
            }
        }
        Err(IoError::Locked {
            path: format!("{path} (its versions kept changing while it was read)"),
        })
    }

    /// Metadata of the newest version of `path`.
    pub(super) fn claims_head(&self, path: &str) -> IoResult<ObjectMeta> {
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
            Ok((bytes, meta)) => {
                let env = Envelope::decode(&bytes).map_err(|r| IoError::corruption(path, 0, r))?;
                Ok(Cond::Lost(Some((env, meta.etag))))
            }
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
        // Validity: the version this one builds on must still exist (see the module docs).
        let versions = self.versions(path)?;
        if n > 0 && !versions.contains(&(n - 1)) {
            tracing::warn!(
                path,
                version = n,
                "a numbered claim filled a hole; withdrawn"
            );
            self.retry
                .simple("delete", || self.store.delete(&key))
                .map_err(|e| obj_err(path, e))?;
            return self.claims_lost(path);
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
