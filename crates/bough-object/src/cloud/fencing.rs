//! Who may write: the services a store can live on, how terms are fenced (compare-and-swap
//! or numbered claims), sealing the previous term, and giving a term up when a manifest
//! upload's outcome stays unknown.

use super::*;

/// Why a service cannot hold a Bough store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No atomic create-if-absent: data objects, new manifests and numbered claims could be
    /// overwritten. Nothing can be fenced without it.
    NoConditionalCreate { service: String },
    /// Compare-and-swap fencing was asked for, but the service has no If-Match.
    NoCompareAndSwap { service: String },
    /// PUTs may be observed half-done (accepted only with `test_only`).
    NoAtomicPut { service: String },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NoConditionalCreate { service } => write!(
                f,
                "object store {service} has no atomic conditional create (If-None-Match), \
                 which every fencing mode needs"
            ),
            Refusal::NoCompareAndSwap { service } => write!(
                f,
                "object store {service} has no compare-and-swap (If-Match on the ETag), which \
                 `fencing = \"compare_and_swap\"` needs (use `auto` or `numbered_claims`)"
            ),
            Refusal::NoAtomicPut { service } => write!(
                f,
                "object store {service} does not publish PUTs atomically (tests only: set \
                 `test_only = true`)"
            ),
        }
    }
}

/// How this store fences terms (see [`FencingMode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fencing {
    /// Single objects, updated with If-Match.
    CompareAndSwap,
    /// Numbered versions, each created with create-if-absent.
    NumberedClaims,
}

/// The fencing a service with `g` gets when `wanted` is asked for, or why it cannot hold
/// a store. `test_only` accepts a service whose PUTs are not atomic.
pub fn select_fencing(
    service: &str,
    g: &Guarantees,
    wanted: FencingMode,
    test_only: bool,
) -> Result<Fencing, Refusal> {
    let service = service.to_string();
    if !g.atomic_put && !test_only {
        return Err(Refusal::NoAtomicPut { service });
    }
    if !g.conditional_create {
        return Err(Refusal::NoConditionalCreate { service });
    }
    match wanted {
        FencingMode::CompareAndSwap if !g.compare_and_swap => {
            Err(Refusal::NoCompareAndSwap { service })
        }
        FencingMode::CompareAndSwap => Ok(Fencing::CompareAndSwap),
        FencingMode::NumberedClaims => Ok(Fencing::NumberedClaims),
        FencingMode::Auto if g.compare_and_swap => Ok(Fencing::CompareAndSwap),
        FencingMode::Auto => Ok(Fencing::NumberedClaims),
    }
}

/// Checks that a store can hold a Bough store with automatic fencing, and which fencing
/// it gets.
pub fn check_guarantees(store: &dyn ObjectStore) -> Result<Fencing, Refusal> {
    select_fencing(
        store.service(),
        &store.guarantees(),
        FencingMode::Auto,
        false,
    )
}

impl Inner {
    pub(super) fn fenced(&self, path: &str, why: &str) -> IoError {
        self.counters.fenced.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(path, why, "write refused: a newer owner holds this branch");
        IoError::Fenced {
            what: format!("{path}: {why}"),
        }
    }

    /// A conditional write of a manifest or `CURRENT_TERM` failed without a known outcome:
    /// what this instance remembers of the object may be stale, so it is forgotten (the
    /// next reader fetches it). For a manifest this also ends the ownership of its term:
    /// the head is poisoned, and writing the term again after a reopen could reuse data
    /// file names the failed commit uploaded, or overwrite a commit that did land. A reopen
    /// takes the branch over at a new term instead.
    pub(super) fn unresolved(&self, path: &str, kind: Kind, e: &IoError) {
        self.docs.lock().remove(path);
        if kind == Kind::Manifest && self.owned.lock().remove(path) {
            self.counters.burnt_terms.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                manifest = path,
                error = %e,
                "manifest upload outcome unknown: this term is given up; reopen to continue at a new term"
            );
        }
    }

    /// Before creating `manifest_<b>_<t>`, seals `manifest_<b>_<t-1>` if this instance read
    /// it: after that, its writer can no longer commit, so the state the new manifest
    /// starts from is final.
    pub(super) fn seal_predecessor(&self, path: &str) -> IoResult<()> {
        let dir = parent_of(path);
        let name = path.rsplit('/').next().unwrap_or(path);
        let Ok(FileKind::Manifest(m)) = parse_file_name(name) else {
            return Ok(());
        };
        if m.term == 0 {
            return Ok(());
        }
        let prev_name = ManifestName::new(m.branch.clone(), m.term - 1).to_string();
        let prev = if dir.is_empty() {
            prev_name
        } else {
            format!("{dir}/{prev_name}")
        };
        let Some(doc) = self.docs.lock().get(&prev).cloned() else {
            return Ok(());
        };
        // The logs first: once fenced, the old writer cannot acknowledge a commit this
        // takeover did not replay (`cloud/logs.rs`).
        self.fence_logs(dir, m.branch.as_str(), m.term - 1)?;
        if doc.sealed {
            return Ok(());
        }
        let Some(etag) = doc.etag.clone() else {
            return Ok(());
        };
        let env = Envelope {
            flags: FLAG_SEALED,
            token: self.token(),
            payload: doc.payload.as_ref().clone(),
        };
        match self.put_cond(&prev, &env, Some(&etag))? {
            Cond::Won(e) => {
                let etag = self.etag_after(&prev, e)?;
                self.docs.lock().insert(
                    prev.clone(),
                    Doc {
                        etag,
                        payload: doc.payload,
                        sealed: true,
                        chain: 0,
                    },
                );
                self.owned.lock().remove(&prev);
                tracing::info!(manifest = %prev, "sealed the previous term's manifest");
                Ok(())
            }
            Cond::Lost(Some((t, _))) if !t.sealed() => {
                // The previous owner committed after we read its state: our new term would
                // miss that commit. Forget what we read; the takeover must start over.
                self.docs.lock().remove(&prev);
                Err(IoError::Locked {
                    path: format!("{prev} (its owner committed during the takeover; retry it)"),
                })
            }
            Cond::Lost(_) => {
                self.docs.lock().remove(&prev);
                Err(self.fenced(&prev, "another process took this branch over first"))
            }
        }
    }

    /// Whether data and log files of the manifest's lineage may be created here.
    pub(super) fn owns_lineage_of(&self, path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        let (branch, term) = match parse_file_name(name) {
            Ok(FileKind::Data(d)) => (d.branch, d.term),
            Ok(FileKind::Log(l)) => (l.branch, l.term),
            _ => return true,
        };
        let m = ManifestName::new(branch, term).to_string();
        let dir = parent_of(path);
        let m = if dir.is_empty() {
            m
        } else {
            format!("{dir}/{m}")
        };
        self.owned.lock().contains(&m)
    }
}
