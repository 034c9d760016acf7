//! Directories and listings: object stores have no directories, so a partition exists when an
//! object lives under its prefix or this instance created it; listed names are checked.

use super::*;

impl Inner {
    /// Whether `dir` exists: created here, or some object lives under it.
    pub(super) fn dir_exists(&self, dir: &str) -> IoResult<bool> {
        if dir.is_empty() || self.dirs.lock().contains(dir) {
            return Ok(true);
        }
        let page = self
            .retry
            .simple("list", || {
                self.store.list(&format!("{dir}/"), true, None, 1)
            })
            .map_err(|e| obj_err(dir, e))?;
        let exists = !page.objects.is_empty() || !page.prefixes.is_empty();
        if exists {
            self.dirs.lock().insert(dir.to_string());
        }
        Ok(exists)
    }

    /// The file name an object of `dir` lists as: a version becomes the name of its
    /// object, the GC lease is hidden (it is the cloud tier's, not a store file). An object
    /// of the other fencing mode means the prefix was written in that mode: refused, since
    /// the two modes must never share a prefix.
    pub(super) fn listed_name(&self, dir: &str, name: &str) -> IoResult<Option<String>> {
        let claims = self.fencing == Fencing::NumberedClaims;
        let mode_error = |what: &str| IoError::InvalidArgument {
            what: format!(
                "{dir}/{name}: {what}; this prefix was written with the other fencing mode \
                 (set `fencing` to match it)"
            ),
        };
        Ok(match parse_file_name(name) {
            Ok(FileKind::GcLease) if !claims => None,
            // Manifests are chains of versions in either mode.
            Ok(FileKind::Version(v)) if matches!(v.target, VersionTarget::Manifest(_)) => {
                Some(v.target.to_string())
            }
            Ok(FileKind::Version(v)) if claims => match v.target {
                VersionTarget::GcLease => None,
                t => Some(t.to_string()),
            },
            Ok(FileKind::Version(_)) => {
                return Err(mode_error(
                    "a numbered version, but this store fences by compare-and-swap",
                ));
            }
            Ok(FileKind::Manifest(_)) => {
                return Err(IoError::InvalidArgument {
                    what: format!(
                        "{dir}/{name}: a manifest kept as one object, an older layout of this \
                         tier (manifests are chains of numbered versions now); it cannot be \
                         read or fenced here"
                    ),
                });
            }
            Ok(FileKind::CurrentTerm(_) | FileKind::GcLease) if claims => {
                return Err(mode_error(
                    "a single swapped object, but this store fences by numbered claims",
                ));
            }
            _ => Some(name.to_string()),
        })
    }
}
