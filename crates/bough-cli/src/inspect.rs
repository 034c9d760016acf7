//! `bough inspect manifest` and `bough inspect file`: what a file holds, byte-level.

use std::path::{Path, PathBuf};

use bough::BranchOrigin;
use bough_manifest::checksum::{Domain, checksum};
use bough_manifest::{
    BranchFileMapping, CurrentTerm, HEADER_LEN, MAX_RECORD_PAYLOAD, ManifestState, ORIGIN, Record,
    RecordHeader, decode_record, merge_bases, record_len, replay,
};
use bough_names::{FileKind, classify, classify_dir};
use clap::Subcommand;
use serde_json::{Value as Json, json};

use crate::ctx::Ctx;
use crate::error::{CliError, CliResult, code};
use crate::output;
use crate::walk::{self, PartitionFiles, check_data_file, page_type_name};

/// `bough inspect ...`.
#[derive(Debug, Subcommand)]
pub enum InspectCmd {
    /// Decode every record of a manifest or archive (or a CURRENT_TERM file), verify the
    /// checksums, and print the state after replay: roots, mapping root, ranges, overlay,
    /// extensions.
    #[command(
        after_help = "PATH is a path, TABLE.PART/NAME, or a file name found in the store.\n\nExamples:\n  bough inspect manifest bough-data/orders.0/manifest_main_0\n  bough inspect manifest orders.0/manifest_main_0 -v"
    )]
    Manifest {
        /// The file.
        path: String,
        /// Also list the overlay and every log record's mapping changes.
        #[arg(long, short = 'v')]
        verbose: bool,
    },
    /// What a file is, by its name; for data files the header (who wrote it), a page-by-page
    /// check, and which manifests and archives reference it.
    #[command(
        after_help = "Examples:\n  bough inspect file data_1_main_0\n  bough inspect file bough-data/orders.0/data_3_feature_0"
    )]
    File {
        /// A file name (searched in every partition), TABLE.PART/NAME, or a path.
        name_or_path: String,
    },
}

/// Runs an inspect command; the exit code is 5 when the file is damaged.
pub fn inspect(ctx: &Ctx, cmd: InspectCmd) -> CliResult<u8> {
    match cmd {
        InspectCmd::Manifest { path, verbose } => manifest(ctx, &path, verbose),
        InspectCmd::File { name_or_path } => file(ctx, &name_or_path),
    }
}

fn resolve_path(ctx: &Ctx, arg: &str) -> CliResult<PathBuf> {
    if Path::new(arg).is_file() {
        return Ok(PathBuf::from(arg));
    }
    let root = ctx.root()?;
    let (root, dir, name) = walk::locate(&root, arg)?;
    Ok(root.join(dir).join(name))
}

fn ranges_json(r: &BranchFileMapping) -> Json {
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

fn ranges_text(r: &BranchFileMapping) -> Vec<String> {
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

fn extensions(exts: &[(u64, Vec<u8>)]) -> (Vec<String>, Vec<Json>) {
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

fn root(id: u32) -> String {
    if id == bough_manifest::NO_PAGE {
        "none".into()
    } else {
        id.to_string()
    }
}

fn state_json(s: &ManifestState) -> Json {
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
fn manifest(ctx: &Ctx, arg: &str, verbose: bool) -> CliResult<u8> {
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
fn not_a_manifest(kind: &FileKind, bytes: &[u8], shown: &str) -> CliResult<()> {
    let data_header = bytes.get(12..16) == Some(&bough_io::layout::DATA_FILE_MAGIC[..]);
    let what = match kind {
        FileKind::Manifest(_) | FileKind::Archive(_) | FileKind::CurrentTerm(_) => return Ok(()),
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

fn slot_text(raw: u64) -> String {
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

fn current_term(ctx: &Ctx, shown: &str, branch: &str, bytes: &[u8]) -> CliResult<u8> {
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

/// `bough inspect file`.
fn file(ctx: &Ctx, arg: &str) -> CliResult<u8> {
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

fn report(ctx: &Ctx, text: &str, doc: Json, c: u8) -> CliResult<u8> {
    if ctx.json {
        output::print_json(&doc)?;
    } else {
        println!("{text}");
    }
    Ok(c)
}

fn data_file(
    ctx: &Ctx,
    root: &Path,
    dir: &str,
    name: &str,
    d: &bough_names::DataFileName,
    size: u64,
    shown: &str,
) -> CliResult<u8> {
    let path = root.join(dir).join(name);
    let check = check_data_file(&path, d);
    let storage = walk::storage(root)?;
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
        .filter_map(|(n, r)| r.as_ref().err().map(|e| (n.clone(), e.clone())))
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
