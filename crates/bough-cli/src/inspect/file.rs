//! `bough inspect file`: a data file's header and pages, each checked.

use super::*;

/// `bough inspect file`.
pub(crate) fn file(ctx: &Ctx, arg: &str) -> CliResult<u8> {
    if !Path::new(arg).exists()
        && let Some(p) = classify_dir(arg)
    {
        let root = ctx.require_store()?;
        let is_dir = root.join(arg).is_dir();
        let text = format!(
            "{arg}: partition directory of table {} partition {}{}",
            p.table,
            p.partition,
            if is_dir { "" } else { " (not in this store)" }
        );
        return report(
            ctx,
            &text,
            json!({"name": arg, "kind": "partition_dir", "table": p.table.as_str(), "partition": p.partition, "exists": is_dir}),
            code::OK,
        );
    }
    let (root, dir, name) = walk::locate(&ctx.root()?, arg)?;
    let path = root.join(&dir).join(&name);
    let kind = classify(&name);
    let size = std::fs::metadata(&path).map_or(0, |m| m.len());
    // A path is shown as the whole (absolute) path; a name found in the store as
    // TABLE.PART/NAME.
    let shown = if Path::new(arg).is_file() {
        path.display().to_string()
    } else {
        format!("{dir}/{name}")
    };
    let base = format!("{shown} ({})", output::size(size));
    match kind {
        FileKind::Data(d) => data_file(ctx, &root, &dir, &name, &d, size, &shown),
        FileKind::Log(l) => report(
            ctx,
            &format!(
                "{base}: write-ahead log file {} of branch {} term {}",
                l.log_id, l.branch, l.term
            ),
            json!({"path": path.display().to_string(), "kind": "log", "branch": l.branch.as_str(), "term": l.term, "log_id": l.log_id}),
            code::OK,
        ),
        FileKind::Manifest(m) => {
            let storage = walk::storage(&root)?;
            let r = walk::read_manifest(storage.as_ref(), &format!("{dir}/{name}"));
            let text = match &r {
                Ok(s) => format!(
                    "{base}: manifest of branch {} term {}: {} log records after the snapshot; `bough inspect manifest {dir}/{name}` decodes it",
                    m.branch, m.term, s.last_seq
                ),
                Err(e) => format!(
                    "{base}: manifest of branch {} term {}, damaged: {e}",
                    m.branch, m.term
                ),
            };
            let c = if r.is_ok() { code::OK } else { code::CORRUPT };
            report(
                ctx,
                &text,
                json!({"path": path.display().to_string(), "kind": "manifest", "branch": m.branch.as_str(), "term": m.term, "ok": r.is_ok()}),
                c,
            )
        }
        FileKind::Archive(a) => {
            let storage = walk::storage(&root)?;
            let r = walk::read_manifest(storage.as_ref(), &format!("{dir}/{name}"));
            let text = format!(
                "{base}: archive of branch {} term {}, taken {}{}",
                a.branch,
                a.term,
                output::time(a.timestamp),
                r.as_ref()
                    .err()
                    .map_or(String::new(), |e| format!(", damaged: {e}"))
            );
            let c = if r.is_ok() { code::OK } else { code::CORRUPT };
            report(
                ctx,
                &text,
                json!({"path": path.display().to_string(), "kind": "archive", "branch": a.branch.as_str(), "term": a.term, "timestamp_ms": a.timestamp, "ok": r.is_ok()}),
                c,
            )
        }
        FileKind::History(h) => {
            let storage = walk::storage(&root)?;
            let r = walk::read_manifest(storage.as_ref(), &format!("{dir}/{name}"));
            let text = format!(
                "{base}: history point of branch {} term {} at {}{}; `bough inspect manifest {dir}/{name}` decodes it",
                h.branch,
                h.term,
                output::time(h.stamp),
                r.as_ref()
                    .err()
                    .map_or(String::new(), |e| format!(", damaged: {e}"))
            );
            let c = if r.is_ok() { code::OK } else { code::CORRUPT };
            report(
                ctx,
                &text,
                json!({"path": path.display().to_string(), "kind": "history", "branch": h.branch.as_str(), "term": h.term, "stamp_ms": h.stamp, "ok": r.is_ok()}),
                c,
            )
        }
        FileKind::Tag(t) => {
            let storage = walk::storage(&root)?;
            let r = walk::read_manifest(storage.as_ref(), &format!("{dir}/{name}"));
            let text = format!(
                "{base}: tag {}{}; `bough inspect manifest {dir}/{name}` decodes it",
                t.tag,
                r.as_ref()
                    .err()
                    .map_or(String::new(), |e| format!(", damaged: {e}"))
            );
            let c = if r.is_ok() { code::OK } else { code::CORRUPT };
            report(
                ctx,
                &text,
                json!({"path": path.display().to_string(), "kind": "tag", "tag": t.tag.as_str(), "ok": r.is_ok()}),
                c,
            )
        }
        FileKind::CurrentTerm(ct) => {
            let bytes = std::fs::read(&path)
                .map_err(|e| CliError::io(format!("{}: {e}", path.display())))?;
            current_term(ctx, &path.display().to_string(), ct.branch.as_str(), &bytes)
        }
        FileKind::Tmp(t) => report(
            ctx,
            &format!(
                "{base}: temporary file of {}: left by an interrupted write; never live data, safe to delete when no writer runs",
                t.target
            ),
            json!({"path": path.display().to_string(), "kind": "tmp", "target": t.target.to_string()}),
            code::OK,
        ),
        FileKind::TableOp(t) => {
            let bytes = std::fs::read(&path)
                .map_err(|e| CliError::io(format!("{}: {e}", path.display())))?;
            let (text, ok) = match bough_manifest::decode_table_op(&bytes, t.seq) {
                Ok(bough_manifest::TableOpRecord::Intent(i)) => (
                    format!(
                        "{base}: table-wide operation {}: {:?} of branch {} on table {} (source {:?}, partitions {:?}, at {})",
                        t.seq,
                        i.kind,
                        i.branch,
                        i.table,
                        i.other,
                        i.partitions,
                        output::time(i.timestamp)
                    ),
                    true,
                ),
                Ok(bough_manifest::TableOpRecord::Outcome(o)) => (
                    format!(
                        "{base}: outcome of table-wide operation {}: {:?}{}",
                        t.seq,
                        o.result,
                        if o.detail.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", o.detail)
                        }
                    ),
                    true,
                ),
                Err(e) => (
                    format!(
                        "{base}: branch-registry record {t}, damaged at offset {}: {}",
                        e.offset, e.reason
                    ),
                    false,
                ),
            };
            report(
                ctx,
                &text,
                json!({"path": path.display().to_string(), "kind": "table_op", "seq": t.seq, "ok": ok}),
                if ok { code::OK } else { code::CORRUPT },
            )
        }
        FileKind::Lock => report(
            ctx,
            &format!("{base}: the store lock"),
            json!({"kind": "lock"}),
            code::OK,
        ),
        FileKind::GcLease => report(
            ctx,
            &format!("{base}: a partition's GC lease (object stores only)"),
            json!({"path": path.display().to_string(), "kind": "gc_lease"}),
            code::OK,
        ),
        FileKind::Version(v) => report(
            ctx,
            &format!(
                "{base}: version {} of {} (object stores without If-Match only)",
                v.version, v.target
            ),
            json!({"path": path.display().to_string(), "kind": "version", "target": v.target.to_string(), "version": v.version}),
            code::OK,
        ),
        FileKind::TornTail(t) => report(
            ctx,
            &format!(
                "{base}: the tail of {} from offset {}, kept aside when the engine appended over it: {}; evidence only (never read as data, never deleted by GC), delete it once seen",
                t.manifest,
                t.offset,
                bough_manifest::dropped_tail_finding(t.offset)
            ),
            json!({"path": path.display().to_string(), "kind": "torn_tail", "manifest": t.manifest.to_string(), "offset": t.offset, "n": t.n}),
            code::OK,
        ),
        FileKind::Unknown(_) => report(
            ctx,
            &format!("{base}: not a Bough file name; Bough ignores it"),
            json!({"path": path.display().to_string(), "kind": "unknown"}),
            code::OK,
        ),
    }
}

pub(crate) fn data_file(
    ctx: &Ctx,
    root: &Path,
    dir: &str,
    name: &str,
    d: &bough_names::DataFileName,
    size: u64,
    shown: &str,
) -> CliResult<u8> {
    let path = root.join(dir).join(name);
    let storage = walk::storage(root)?;
    let check = check_data_file(storage.as_ref(), dir, d);
    let pf = PartitionFiles::open(&storage, dir)?;
    let (held, _) = pf.held();
    let mut refs: Vec<(String, usize)> = Vec::new();
    let mut ref_errors = Vec::new();
    for h in &held {
        match pf.pages_of(&h.snapshot) {
            Ok(pages) => {
                if let Some(p) = pages.get(name) {
                    refs.push((h.label.clone(), p.len()));
                }
            }
            Err(e) => ref_errors.push(format!("{}: {e}", h.label)),
        }
    }
    let damaged: Vec<(String, String)> = pf
        .manifests
        .iter()
        .filter_map(|(n, r)| r.as_ref().err().map(|e| (n.clone(), e.message.clone())))
        .collect();
    let header = check.header.as_ref();
    let bad = header.is_none_or(|h| h.is_err()) || !check.bad.is_empty();
    if ctx.json {
        let h = match header {
            Some(Ok(h)) => {
                json!({"version": h.version, "page_size": h.page_size, "file_id": h.file_id, "branch": h.branch.as_str(), "term": h.term, "created_at_ms": h.created_at_ms})
            }
            Some(Err(e)) => json!({"error": e}),
            None => Json::Null,
        };
        output::print_json(&json!({
            "path": path.display().to_string(), "kind": "data", "bytes": size,
            "file_id": d.file_id, "branch": d.branch.as_str(), "term": d.term,
            "header": h, "pages": check.pages,
            "pages_by_type": check.by_type.iter().map(|(t, n)| (page_type_name(*t).to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
            "bad_pages": check.bad.iter().map(|(i, o, w)| json!({"page": i, "offset": o, "reason": w})).collect::<Vec<_>>(),
            "referenced_by": refs.iter().map(|(l, n)| json!({"by": l, "pages": n})).collect::<Vec<_>>(),
            "reference_errors": ref_errors,
        }))?;
    } else {
        println!(
            "{shown}: data file {} of branch {} term {} ({})",
            d.file_id,
            d.branch,
            d.term,
            output::size(size)
        );
        match header {
            Some(Ok(h)) => println!(
                "header     version {}, page size {}, written by {} term {} as file {}, created {}",
                h.version,
                h.page_size,
                h.branch,
                h.term,
                h.file_id,
                output::time(h.created_at_ms)
            ),
            Some(Err(e)) => println!("header     BAD: {e}"),
            None => println!("header     unreadable"),
        }
        let types: Vec<String> = check
            .by_type
            .iter()
            .map(|(t, n)| format!("{n} {}", page_type_name(*t)))
            .collect();
        println!(
            "pages      {} after the header: {}{}",
            check.pages,
            if types.is_empty() {
                "none intact".into()
            } else {
                types.join(", ")
            },
            if check.bad.is_empty() {
                String::new()
            } else {
                format!(", {} BAD", check.bad.len())
            }
        );
        for (i, o, w) in &check.bad {
            println!("  page {i} (offset {o}): {w}");
        }
        if check.partial_tail > 0 {
            println!("  {} bytes past the last whole page", check.partial_tail);
        }
        if refs.is_empty() {
            println!(
                "references none: no manifest, archive or merge base uses it (GC may delete it)"
            );
        } else {
            println!("references");
            for (l, n) in &refs {
                println!(
                    "  {l}: {}",
                    if *n == 1 {
                        "1 page".to_string()
                    } else {
                        format!("{n} pages")
                    }
                );
            }
        }
        for e in &ref_errors {
            println!("  (could not follow {e})");
        }
        for (n, e) in &damaged {
            println!("  (could not read {n}: {e})");
        }
    }
    Ok(if bad { code::CORRUPT } else { code::OK })
}
