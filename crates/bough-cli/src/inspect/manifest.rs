//! `bough inspect manifest`: a manifest's (or `CURRENT_TERM`'s) records, state, ranges and
//! extensions, and what a file that is not a manifest is instead.

use super::*;

pub(crate) fn ranges_json(r: &BranchFileMapping) -> Json {
    let mut lo = 0u64;
    Json::Array(
        r.iter()
            .map(|x| {
                let v = json!({"first_file_id": lo, "max_file_id": x.max_file_id, "branch": x.branch.as_str(), "term": x.term});
                lo = x.max_file_id + 1;
                v
            })
            .collect(),
    )
}

pub(crate) fn ranges_text(r: &BranchFileMapping) -> Vec<String> {
    let mut lo = 0u64;
    r.iter()
        .map(|x| {
            let s = format!(
                "file ids {lo}..={}  written by {} term {}  (data_<id>_{}_{})",
                x.max_file_id, x.branch, x.term, x.branch, x.term
            );
            lo = x.max_file_id + 1;
            s
        })
        .collect()
}

pub(crate) fn extensions(exts: &[(u64, Vec<u8>)]) -> (Vec<String>, Vec<Json>) {
    let mut text = Vec::new();
    let mut docs = Vec::new();
    for (tag, bytes) in exts {
        let (name, detail, doc) = match *tag {
            ORIGIN => match BranchOrigin::decode(bytes) {
                Ok(o) => {
                    let parent = o
                        .parent
                        .as_ref()
                        .map_or("none".to_string(), |(b, t)| format!("{b} term {t}"));
                    (
                        "ORIGIN",
                        format!(
                            "parent {parent}, fork version {}, created {}",
                            o.fork_version,
                            output::time(o.created_at_ms)
                        ),
                        json!({"parent": o.parent.as_ref().map(|(b, _)| b.as_str()), "parent_term": o.parent.as_ref().map(|(_, t)| *t), "fork_version": o.fork_version, "created_at_ms": o.created_at_ms}),
                    )
                }
                Err(e) => (
                    "ORIGIN",
                    format!("does not decode: {e}"),
                    json!({"error": e.to_string()}),
                ),
            },
            bough_manifest::MERGE_BASES => match merge_bases(&[(*tag, bytes.clone())]) {
                Ok(bases) => {
                    let list: Vec<String> = bases
                        .iter()
                        .map(|b| {
                            format!(
                                "{} (recorded {}, root {}, mapping root {})",
                                b.branch,
                                output::time(b.recorded_at_ms),
                                root(b.state.meta.root),
                                b.state.mapping_root
                            )
                        })
                        .collect();
                    let docs: Vec<Json> = bases
                        .iter()
                        .map(|b| json!({"branch": b.branch.as_str(), "recorded_at_ms": b.recorded_at_ms, "root": b.state.meta.root, "mapping_root": b.state.mapping_root.to_string()}))
                        .collect();
                    (
                        "MERGE_BASES",
                        format!("{}: {}", list.len(), list.join("; ")),
                        Json::Array(docs),
                    )
                }
                Err(e) => (
                    "MERGE_BASES",
                    format!("does not decode: {e}"),
                    json!({"error": e.to_string()}),
                ),
            },
            bough_manifest::VERSION => match bough_manifest::decode_version(bytes) {
                Ok(v) => ("VERSION", format!("commit version {v}"), json!(v)),
                Err(e) => (
                    "VERSION",
                    format!("does not decode: {e}"),
                    json!({"error": e.to_string()}),
                ),
            },
            _ => (
                "unknown",
                format!("{} bytes", bytes.len()),
                json!({"bytes": bytes.len()}),
            ),
        };
        text.push(format!("tag {tag} {name}: {detail}"));
        docs.push(json!({"tag": tag, "name": name, "value": doc}));
    }
    (text, docs)
}

pub(crate) fn root(id: u32) -> String {
    if id == bough_manifest::NO_PAGE {
        "none".into()
    } else {
        id.to_string()
    }
}

pub(crate) fn state_json(s: &ManifestState) -> Json {
    json!({
        "branch": s.meta.branch.as_str(),
        "term": s.meta.term,
        "root": s.meta.root,
        "ttl_root": s.meta.ttl_root,
        "max_file_id": s.max_file_id,
        "page_size": s.page_size,
        "mapping_root": s.mapping_root.to_string(),
        "next_page_id": s.next_page_id,
        "free_head": s.free_head,
        "overlay_entries": s.overlay.len(),
        "branch_file_ranges": ranges_json(&s.meta.branch_file_ranges),
        "extensions": extensions(&s.extensions).1,
        "last_seq": s.last_seq,
    })
}

/// `bough inspect manifest`.
pub(crate) fn manifest(ctx: &Ctx, arg: &str, verbose: bool) -> CliResult<u8> {
    let path = resolve_path(ctx, arg)?;
    let bytes = std::fs::read(&path)
        .map_err(|e| CliError::not_found(format!("cannot read {}: {e}", path.display())))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let shown = path.display().to_string();
    let kind = classify(&name);
    if let FileKind::CurrentTerm(ct) = &kind {
        return current_term(ctx, &shown, ct.branch.as_str(), &bytes);
    }
    not_a_manifest(&kind, &bytes, &shown)?;
    let mut rows = Vec::new();
    let mut records = Vec::new();
    let mut details: Vec<String> = Vec::new();
    let mut off = 0usize;
    let mut idx = 0usize;
    let mut stop = String::new();
    while off < bytes.len() {
        let rest = &bytes[off..];
        if rest.iter().take(HEADER_LEN).all(|&b| b == 0) {
            stop = format!("zeros at offset {off}: end of the log");
            break;
        }
        let Some(h) = RecordHeader::parse(rest) else {
            stop = format!(
                "{} stray bytes at offset {off} (a torn append?)",
                rest.len()
            );
            break;
        };
        let covered = if h.payload_len <= MAX_RECORD_PAYLOAD {
            rest.get(8..HEADER_LEN + h.payload_len as usize)
        } else {
            None
        };
        let computed = covered.map(|c| checksum(Domain::ManifestRecord, c));
        let sum_ok = computed == Some(h.checksum);
        let decoded = decode_record(&bytes, off as u64);
        let (kind, seq, detail, doc) = match &decoded {
            Ok(Record::Snapshot(s)) => (
                "snapshot",
                "-".to_string(),
                format!(
                    "branch {} term {}, max file id {}, page size {}, mapping root {}, next page id {}, {} ranges, {} overlay entries, {} extensions",
                    s.meta.branch,
                    s.meta.term,
                    s.max_file_id,
                    s.page_size,
                    s.mapping_root,
                    s.next_page_id,
                    s.meta.branch_file_ranges.len(),
                    s.overlay.len(),
                    s.extensions.len()
                ),
                json!({"branch": s.meta.branch.as_str(), "term": s.meta.term, "max_file_id": s.max_file_id, "page_size": s.page_size, "mapping_root": s.mapping_root.to_string(), "next_page_id": s.next_page_id, "ranges": s.meta.branch_file_ranges.len(), "overlay_entries": s.overlay.len(), "extensions": s.extensions.iter().map(|(t, _)| *t).collect::<Vec<_>>()}),
            ),
            Ok(Record::Log(l)) => {
                if verbose {
                    for (id, slot) in &l.changes {
                        details.push(format!("  record {idx}: page {id} -> {}", slot_text(*slot)));
                    }
                }
                (
                    "log",
                    l.seq.to_string(),
                    format!(
                        "max file id {}, {} ranges, checkpoint {}, next page id {}, {} changes, {} extensions",
                        l.max_file_id,
                        l.branch_file_ranges.len(),
                        l.checkpoint.map_or("-".into(), |a| a.to_string()),
                        l.next_page_id,
                        l.changes.len(),
                        l.extensions.len()
                    ),
                    json!({"seq": l.seq, "max_file_id": l.max_file_id, "ranges": l.branch_file_ranges.len(), "checkpoint": l.checkpoint.map(|a| a.to_string()), "next_page_id": l.next_page_id, "changes": l.changes.len(), "extensions": l.extensions.iter().map(|(t, _)| *t).collect::<Vec<_>>()}),
                )
            }
            Err(e) => (
                "?",
                "-".into(),
                format!("does not decode: {}", e.reason),
                json!({"error": e.reason.to_string()}),
            ),
        };
        rows.push(vec![
            idx.to_string(),
            off.to_string(),
            kind.to_string(),
            seq,
            if sum_ok { "ok".into() } else { "BAD".into() },
            root(h.root),
            root(h.ttl_root),
            h.payload_len.to_string(),
            detail,
        ]);
        records.push(json!({
            "index": idx, "offset": off, "kind": kind, "checksum_ok": sum_ok,
            "stored_checksum": format!("{:#018x}", h.checksum),
            "computed_checksum": computed.map(|c| format!("{c:#018x}")),
            "version": h.version, "root": h.root, "ttl_root": h.ttl_root,
            "payload_len": h.payload_len, "record": doc,
        }));
        if !sum_ok || decoded.is_err() {
            stop = format!("record {idx} at offset {off} is not intact; replay stops before it");
            break;
        }
        off += record_len(h.payload_len) as usize;
        idx += 1;
    }
    if stop.is_empty() {
        stop = format!("end of file at offset {}", bytes.len());
    }
    let replayed = replay(&bytes);
    if ctx.json {
        let (state, error) = match &replayed {
            Ok(r) => (
                Some(
                    json!({"records_applied": r.records, "end_offset": r.end_offset, "dropped_tail": r.dropped_tail, "state": state_json(&r.state)}),
                ),
                None,
            ),
            Err(e) => (
                None,
                Some(json!({"offset": e.offset, "reason": e.reason.to_string()})),
            ),
        };
        output::print_json(
            &json!({"path": shown, "bytes": bytes.len(), "records": records, "stop": stop, "replay": state, "error": error}),
        )?;
    } else {
        println!(
            "{shown}: {} bytes, {} records read",
            bytes.len(),
            rows.len()
        );
        print!(
            "{}",
            output::table(
                &[
                    "#", "OFFSET", "KIND", "SEQ", "CHECKSUM", "ROOT", "TTL", "PAYLOAD", "CONTENTS"
                ],
                &rows
            )
        );
        println!("stop: {stop}");
        for d in &details {
            println!("{d}");
        }
        match &replayed {
            Ok(r) => {
                let s = &r.state;
                println!(
                    "state after replay ({} records applied, next append at offset {}{}):",
                    r.records,
                    r.end_offset,
                    r.dropped_tail
                        .map_or(String::new(), |t| format!(", tail dropped at {t}"))
                );
                println!("  branch         {} term {}", s.meta.branch, s.meta.term);
                println!(
                    "  root           {}  (ttl root {})",
                    root(s.meta.root),
                    root(s.meta.ttl_root)
                );
                println!("  mapping root   {}", s.mapping_root);
                println!("  overlay        {} entries", s.overlay.len());
                println!(
                    "  next page id   {}  (free head {})",
                    s.next_page_id,
                    s.free_head.map_or("none".into(), |f| f.to_string())
                );
                println!(
                    "  max file id    {}  (page size {})",
                    s.max_file_id, s.page_size
                );
                println!("  ranges");
                for l in ranges_text(&s.meta.branch_file_ranges) {
                    println!("    {l}");
                }
                let (ext, _) = extensions(&s.extensions);
                println!(
                    "  extensions{}",
                    if ext.is_empty() { "     none" } else { "" }
                );
                for e in ext {
                    println!("    {e}");
                }
                if verbose {
                    println!("  overlay entries");
                    for (id, slot) in &s.overlay {
                        println!("    page {id} -> {}", slot_text(*slot));
                    }
                }
            }
            Err(e) => println!("replay fails at offset {}: {}", e.offset, e.reason),
        }
    }
    match replayed {
        // A dropped tail is a torn append or a damaged acknowledged record: not fine.
        Ok(r) => match r.dropped_tail {
            None => Ok(code::OK),
            Some(off) => {
                if !ctx.json {
                    eprintln!(
                        "warning: {shown}: {}",
                        bough_manifest::dropped_tail_finding(off)
                    );
                }
                Ok(code::CORRUPT)
            }
        },
        Err(e) => {
            if !ctx.json {
                eprintln!(
                    "error: {shown} is damaged at offset {}: {}",
                    e.offset, e.reason
                );
            }
            Ok(code::CORRUPT)
        }
    }
}

/// Refuses a file that is not a manifest before decoding it as one, so a data file is not
/// reported as a manifest "damaged at offset 0".
pub(crate) fn not_a_manifest(kind: &FileKind, bytes: &[u8], shown: &str) -> CliResult<()> {
    let data_header = bytes.get(12..16) == Some(&bough_io::layout::DATA_FILE_MAGIC[..]);
    let what = match kind {
        FileKind::Manifest(_)
        | FileKind::Archive(_)
        | FileKind::History(_)
        | FileKind::Tag(_)
        | FileKind::CurrentTerm(_) => return Ok(()),
        FileKind::Tmp(t) if !matches!(t.target, bough_names::TmpTarget::Data(_)) => return Ok(()),
        // A kept-aside torn tail holds manifest bytes: decoded like a manifest.
        FileKind::Version(_) | FileKind::TornTail(_) => return Ok(()),
        FileKind::Data(d) => format!(
            "data file {} of branch {} term {}",
            d.file_id, d.branch, d.term
        ),
        FileKind::Log(l) => format!(
            "write-ahead log file {} of branch {} term {}",
            l.log_id, l.branch, l.term
        ),
        FileKind::Tmp(_) => "a data file being written (a temporary file)".into(),
        FileKind::Lock => "the store lock".into(),
        FileKind::TableOp(t) => {
            format!("branch-registry record {t} (`bough inspect {t}` decodes it)")
        }
        FileKind::GcLease => "a GC lease".into(),
        FileKind::Unknown(_) if data_header => "a data file (by its header)".into(),
        FileKind::Unknown(_) if decode_record(bytes, 0).is_err() => {
            "not a Bough file name, and no manifest record decodes at its start".into()
        }
        FileKind::Unknown(_) => return Ok(()),
    };
    Err(
        CliError::usage(format!("{shown} is not a manifest: {what}")).hint(format!(
            "`bough inspect file {shown}` tells what a file is (and checks data files page by page)"
        )),
    )
}

pub(crate) fn slot_text(raw: u64) -> String {
    if raw == 0 {
        return "unmapped".into();
    }
    if raw & bough_manifest::FREE_SLOT_BIT != 0 {
        let next = raw & 0xFFFF_FFFF;
        return if next == 0 {
            "free (end of chain)".into()
        } else {
            format!("free, next {}", next - 1)
        };
    }
    match bough_manifest::PageAddr::from_u64(raw) {
        Some(a) => format!("file {} page {}", a.file_id(), a.page_index()),
        None => format!("invalid {raw:#x}"),
    }
}

pub(crate) fn current_term(ctx: &Ctx, shown: &str, branch: &str, bytes: &[u8]) -> CliResult<u8> {
    match CurrentTerm::decode(bytes) {
        Ok(ct) => {
            if ctx.json {
                output::print_json(
                    &json!({"path": shown, "kind": "current_term", "branch": branch, "term": ct.term, "deleted": ct.deleted, "first_term": ct.first_term, "incarnation": format!("{:#018x}", ct.incarnation)}),
                )?;
            } else {
                println!(
                    "{shown}: CURRENT_TERM of branch {branch}: term {}, incarnation {:#018x}{}",
                    ct.term,
                    ct.incarnation,
                    if ct.deleted {
                        " (deleted: a tombstone)"
                    } else {
                        ""
                    }
                );
            }
            Ok(code::OK)
        }
        Err(e) => {
            if ctx.json {
                output::print_json(
                    &json!({"path": shown, "kind": "current_term", "error": {"offset": e.offset, "reason": e.reason.to_string()}}),
                )?;
            } else {
                println!(
                    "{shown}: CURRENT_TERM of branch {branch} does not decode at offset {}: {}",
                    e.offset, e.reason
                );
            }
            Ok(code::CORRUPT)
        }
    }
}
