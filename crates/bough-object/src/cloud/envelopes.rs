//! Envelope objects (manifests, `CURRENT_TERM`, the GC lease, other small files): reading
//! them with their version, conditional writes (If-Match / If-None-Match, or numbered claims),
//! settling an ambiguous outcome by reading the writer token back, and uploading a whole file.

use super::*;

impl Inner {
    /// Reads an envelope object and remembers its version.
    pub(super) fn fetch_doc(&self, path: &str) -> IoResult<Doc> {
        if self.claims_for(kind_of(path)) {
            let c = self.claims_get(path)?;
            let doc = Doc {
                etag: c.meta.etag,
                sealed: c.env.sealed(),
                payload: Arc::new(c.env.payload),
                chain: c.chain,
            };
            self.docs.lock().insert(path.to_string(), doc.clone());
            return Ok(doc);
        }
        let (env, meta) = self
            .get_envelope(path)?
            .ok_or_else(|| IoError::NotFound { path: path.into() })?;
        let sealed = env.sealed();
        let doc = Doc {
            etag: meta.etag,
            payload: Arc::new(env.payload),
            sealed,
            chain: 0,
        };
        self.docs.lock().insert(path.to_string(), doc.clone());
        Ok(doc)
    }

    /// The envelope object at `key`, `None` when there is none. Without atomic PUTs (the fs
    /// service) a read can meet a write in progress: it is read again a few times before
    /// being called damage.
    pub(super) fn get_envelope(
        &self,
        key: &str,
    ) -> IoResult<Option<(Envelope, crate::object::ObjectMeta)>> {
        let mut torn = 0;
        loop {
            let (bytes, meta) = match self
                .retry
                .simple("get", || get_full(self.store.as_ref(), key))
            {
                Ok(got) => got,
                Err(e) if is_not_found(&e) => return Ok(None),
                Err(e) => return Err(obj_err(key, e)),
            };
            match Envelope::decode(&bytes) {
                Ok(env) => {
                    self.stats.add_read(bytes.len());
                    return Ok(Some((env, meta)));
                }
                Err(_) if !self.atomic_put && torn < 8 => {
                    torn += 1;
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Err(r) => return Err(r.at(key)),
            }
        }
    }

    /// A conditional write of an envelope object: If-Match `etag`, or If-None-Match when
    /// `etag` is `None`. A lost or unresolved outcome is settled by reading back.
    pub(super) fn put_cond(
        &self,
        path: &str,
        env: &Envelope,
        etag: Option<&str>,
    ) -> IoResult<Cond> {
        if self.claims_for(kind_of(path)) {
            return self.claims_put_cond(path, env, etag);
        }
        let body = env.encode();
        let out = self.retry.run("put_cond", || match etag {
            Some(e) => self.store.put_if_match(path, &body, e),
            None => self.store.put_if_absent(path, &body),
        });
        match out.result {
            Ok(new) => {
                self.count_upload(body.len());
                Ok(Cond::Won(new))
            }
            Err(ObjectError::PreconditionFailed { .. }) => self.read_back(path, env.token),
            Err(e) if out.maybe_applied || e.may_have_applied() => {
                // Out of retries, and an attempt may have landed: look before answering.
                match self.read_back(path, env.token) {
                    Ok(Cond::Won(etag)) => Ok(Cond::Won(etag)),
                    _ => Err(obj_err(path, e)),
                }
            }
            Err(e) => Err(obj_err(path, e)),
        }
    }

    pub(super) fn read_back(&self, path: &str, token: u128) -> IoResult<Cond> {
        self.counters.read_backs.fetch_add(1, Ordering::Relaxed);
        match self
            .retry
            .simple("get", || get_full(self.store.as_ref(), path))
        {
            Ok((bytes, meta)) => {
                let env = Envelope::decode(&bytes).map_err(|r| r.at(path))?;
                if env.token == token {
                    tracing::debug!(path, "conditional write landed on an earlier attempt");
                    self.count_upload(bytes.len());
                    Ok(Cond::Won(meta.etag))
                } else {
                    Ok(Cond::Lost(Some((env, meta.etag))))
                }
            }
            Err(e) if is_not_found(&e) => Ok(Cond::Lost(None)),
            Err(e) => Err(obj_err(path, e)),
        }
    }

    /// The ETag of a version we just wrote, asking the store if the write did not say.
    pub(super) fn etag_after(&self, path: &str, etag: Option<Etag>) -> IoResult<Option<Etag>> {
        match etag {
            Some(e) => Ok(Some(e)),
            None => Ok(self.head_of(path)?.etag),
        }
    }

    /// Metadata of the object a path names (the newest version with numbered claims).
    pub(super) fn head_of(&self, path: &str) -> IoResult<crate::object::ObjectMeta> {
        if self.claims_for(kind_of(path)) {
            return self.claims_head(path);
        }
        self.retry
            .simple("head", || self.store.head(path))
            .map_err(|e| obj_err(path, e))
    }

    /// Uploads the whole contents of an envelope file (a new version of its object).
    pub(super) fn upload_envelope(
        &self,
        path: &str,
        kind: Kind,
        payload: &[u8],
        create_new: bool,
    ) -> IoResult<()> {
        let env = Envelope {
            flags: 0,
            token: self.token(),
            payload: payload.to_vec(),
        };
        match kind {
            Kind::Data | Kind::Log => {
                Err(invalid(path, "data and log files are not envelope objects"))
            }
            Kind::GcLease => Err(invalid(
                path,
                "the GC lease is written only by acquiring and renewing it",
            )),
            Kind::Manifest | Kind::CurrentTerm => {
                let known = self.docs.lock().get(path).cloned();
                if kind == Kind::Manifest && !create_new {
                    if !self.owned.lock().contains(path) {
                        return Err(self.fenced(
                            path,
                            "this process did not create this manifest; writing it needs a new \
                             term (take the branch over)",
                        ));
                    }
                    if known.as_ref().is_some_and(|d| d.sealed) {
                        return Err(self.fenced(path, "sealed by a newer owner"));
                    }
                }
                let etag = if create_new {
                    None
                } else {
                    known.as_ref().and_then(|d| d.etag.clone())
                };
                // A commit that only appended to the version this instance wrote or read
                // uploads just the appended bytes, as the next version of the chain.
                let append_to = known.as_ref().filter(|d| {
                    kind == Kind::Manifest
                        && etag.is_some()
                        && d.chain < claims::MAX_CHAIN
                        && payload.len() > d.payload.len()
                        && payload.starts_with(&d.payload)
                });
                let wire = match append_to {
                    Some(d) => Envelope {
                        flags: FLAG_APPEND,
                        token: env.token,
                        payload: AppendPayload::encode(
                            d.payload.len() as u64,
                            payload.get(d.payload.len()..).unwrap_or_default(),
                        ),
                    },
                    None => env.clone(),
                };
                let chain = append_to.map_or(0, |d| d.chain + 1);
                let outcome = match self.put_cond(path, &wire, etag.as_deref()) {
                    Ok(c) => c,
                    Err(e) => {
                        self.unresolved(path, kind, &e);
                        return Err(e);
                    }
                };
                match outcome {
                    Cond::Won(e) => {
                        let etag = self.etag_after(path, e)?;
                        self.docs.lock().insert(
                            path.to_string(),
                            Doc {
                                etag,
                                payload: Arc::new(env.payload),
                                sealed: false,
                                chain,
                            },
                        );
                        if kind == Kind::Manifest {
                            self.owned.lock().insert(path.to_string());
                        }
                        Ok(())
                    }
                    Cond::Lost(theirs) => {
                        if create_new {
                            if let Some((theirs, etag)) = theirs {
                                self.remember(path, theirs, etag);
                            }
                            return Err(IoError::AlreadyExists { path: path.into() });
                        }
                        if kind == Kind::CurrentTerm
                            && let Some((t, etag)) = &theirs
                            && t.payload == env.payload
                            && !t.sealed()
                        {
                            // Someone wrote exactly this record (a recovery finishing the
                            // same step): the state we wanted holds.
                            let (t, etag) = (t.clone(), etag.clone());
                            self.remember(path, t, etag);
                            return Ok(());
                        }
                        match theirs {
                            Some((t, etag)) => {
                                self.remember(path, t, etag);
                                Err(self.fenced(path, "changed by another writer"))
                            }
                            None => {
                                self.docs.lock().remove(path);
                                Err(self.fenced(path, "deleted by a newer owner"))
                            }
                        }
                    }
                }
            }
            Kind::Other => {
                let body = env.encode();
                let r = if create_new {
                    match self.put_cond(path, &env, None)? {
                        Cond::Won(_) => Ok(()),
                        Cond::Lost(_) => Err(IoError::AlreadyExists { path: path.into() }),
                    }
                } else {
                    let r = self
                        .retry
                        .simple("put", || self.store.put(path, &body))
                        .map_err(|e| obj_err(path, e));
                    if r.is_ok() {
                        self.count_upload(body.len());
                    }
                    r.map(|_| ())
                };
                if r.is_ok() {
                    self.docs.lock().insert(
                        path.to_string(),
                        Doc {
                            etag: None,
                            payload: Arc::new(env.payload),
                            sealed: false,
                            chain: 0,
                        },
                    );
                }
                r
            }
        }
    }

    pub(super) fn remember(&self, path: &str, env: Envelope, etag: Option<Etag>) {
        self.docs.lock().insert(
            path.to_string(),
            Doc {
                etag,
                sealed: env.sealed(),
                payload: Arc::new(env.payload),
                // Unknown here: the next write of this instance starts a FULL version.
                chain: claims::MAX_CHAIN,
            },
        );
    }
}
