//! Data commands: `put`, `get`, `del`, `scan`, `load`.

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::ops::Bound;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use bough::{Branch, KeyValue, PutOptions, ScanOptions, WriteBatch, WriteReport};
use clap::{Args, ValueEnum};
use serde_json::{Map, Value as Json, json};

use crate::TargetArgs;
use crate::ctx::{Ctx, open_target};
use crate::error::{CliError, CliResult};
use crate::output::{self, Progress};
use crate::target::{Target, resolve};

/// `bough put`.
#[derive(Debug, Args)]
pub struct PutArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// The key (bytes as given; hex with --hex).
    key: OsString,
    /// The value (or --value-file).
    #[arg(required_unless_present = "value_file")]
    value: Option<OsString>,
    /// Read the value from a file (`-`: stdin).
    #[arg(long, value_name = "FILE", conflicts_with = "value")]
    value_file: Option<PathBuf>,
    /// Expire after this many milliseconds.
    #[arg(long, value_name = "MS")]
    ttl: Option<u64>,
    /// Expire at this time (ms since the epoch).
    #[arg(long, value_name = "MS", conflicts_with = "ttl")]
    expire_at: Option<u64>,
    /// User timestamp for last-writer-wins (default: now, in ms).
    #[arg(long, value_name = "N")]
    ts: Option<u64>,
    /// KEY and VALUE are hex.
    #[arg(long, short = 'x')]
    hex: bool,
}

/// `bough get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// The key.
    key: OsString,
    /// KEY is hex and the value is printed as hex.
    #[arg(long, short = 'x')]
    hex: bool,
    /// Write the value's bytes as they are, with no newline.
    #[arg(long, conflicts_with = "hex")]
    raw: bool,
}

/// `bough del`.
#[derive(Debug, Args)]
pub struct DelArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// The key.
    key: OsString,
    /// Delete as of this user timestamp (a newer entry survives).
    #[arg(long, value_name = "N")]
    ts: Option<u64>,
    /// KEY is hex.
    #[arg(long, short = 'x')]
    hex: bool,
}

/// `bough scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// First key (inclusive unless --from-exclusive).
    #[arg(long, value_name = "KEY")]
    from: Option<OsString>,
    /// Start after --from instead of at it.
    #[arg(long, requires = "from")]
    from_exclusive: bool,
    /// Stop before this key (exclusive).
    #[arg(long, value_name = "KEY")]
    to: Option<OsString>,
    /// Most entries printed.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Keys only.
    #[arg(long)]
    keys_only: bool,
    /// Keys (also --from/--to) and values in hex.
    #[arg(long, short = 'x')]
    hex: bool,
    /// Also print each entry's timestamp and expiry.
    #[arg(long, short = 'l')]
    long: bool,
}

/// Input format of `load`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoadFormat {
    /// JSON lines if the first line starts with `{`, otherwise TSV.
    Auto,
    /// KEY<TAB>VALUE lines with escapes.
    Tsv,
    /// One JSON object per line.
    Jsonl,
}

/// `bough load`.
#[derive(Debug, Args)]
pub struct LoadArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Input file, or `-` for stdin.
    #[arg(value_name = "FILE|-")]
    input: PathBuf,
    /// Input format.
    #[arg(long, value_enum, default_value_t = LoadFormat::Auto)]
    format: LoadFormat,
    /// Entries per write batch.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    batch: usize,
    /// Expire every loaded entry after this many ms (unless the line says otherwise).
    #[arg(long, value_name = "MS")]
    ttl: Option<u64>,
    /// All or nothing: load into a staging branch and merge it into the target at the end.
    /// Without it, an interrupted load keeps the batches committed so far.
    #[arg(long)]
    atomic: bool,
}

/// Deletes an atomic load's staging branch when the load stops before merging it (an
/// error; a kill leaves it for the next writer's open, which removes it).
struct Staging<'a> {
    part: &'a bough::PartitionHandle,
    name: String,
    branch: Branch,
    merged: bool,
}

impl Drop for Staging<'_> {
    fn drop(&mut self) {
        if !self.merged {
            let _ = self.part.delete_branch(&self.name);
        }
    }
}

fn arg_bytes(s: &OsString, hex: bool, what: &str) -> CliResult<Vec<u8>> {
    if hex {
        let text = s
            .to_str()
            .ok_or_else(|| CliError::usage(format!("{what} is not hex")))?;
        output::unhex(text).map_err(|e| CliError::usage(format!("{what}: {e}")))
    } else {
        Ok(s.as_bytes().to_vec())
    }
}

fn target_of(t: &TargetArgs) -> CliResult<Target> {
    resolve(&t.target, t.branch.as_deref(), &[])
}

fn write(branch: &Branch, batch: WriteBatch) -> CliResult<()> {
    branch.write_blocking(batch).map_err(CliError::from)
}

/// Writes a batch and says how much of it last-writer-wins let through.
fn write_counted(branch: &Branch, batch: WriteBatch) -> CliResult<WriteReport> {
    branch.write_counted_blocking(batch).map_err(CliError::from)
}

/// `bough put`.
pub fn put(ctx: &Ctx, a: PutArgs) -> CliResult<()> {
    let t = target_of(&a.target)?;
    let key = arg_bytes(&a.key, a.hex, "KEY")?;
    let value = match (&a.value, &a.value_file) {
        (_, Some(path)) => read_input_all(path)?,
        (Some(v), None) => arg_bytes(v, a.hex, "VALUE")?,
        (None, None) => return Err(CliError::usage("give VALUE or --value-file")),
    };
    let store = ctx.open(true)?;
    let (_, branch) = open_target(&store, &t, true)?;
    let mut b = WriteBatch::new();
    b.put_with(
        key.clone(),
        value,
        PutOptions {
            timestamp: a.ts,
            expire_at: a.expire_at,
            ttl_ms: a.ttl,
        },
    );
    let r = write_counted(&branch, b)?;
    store.close()?;
    if ctx.json {
        output::print_json(&json!({
            "ok": true, "target": t.label(), "applied": r.applied > 0, "superseded": r.superseded > 0,
        }))?;
    } else if r.superseded > 0 {
        // Not an error (last writer wins is the rule), but the value did not change.
        eprintln!(
            "note: key \"{}\" in {} was not changed: the stored entry has a newer timestamp (last writer wins)",
            output::show(&key, a.hex),
            t.label()
        );
    }
    Ok(())
}

fn read_input_all(path: &PathBuf) -> CliResult<Vec<u8>> {
    if path.as_os_str() == "-" {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut v)
            .map_err(|e| CliError::io(format!("stdin: {e}")))?;
        Ok(v)
    } else {
        std::fs::read(path)
            .map_err(|e| CliError::not_found(format!("cannot read {}: {e}", path.display())))
    }
}

/// `bough get`.
pub fn get(ctx: &Ctx, a: GetArgs) -> CliResult<()> {
    let t = target_of(&a.target)?;
    let key = arg_bytes(&a.key, a.hex, "KEY")?;
    let store = ctx.open_read_only()?;
    let (_, branch) = open_target(&store, &t, false)?;
    let Some(v) = branch.get_blocking(&key)? else {
        return Err(CliError::not_found(format!(
            "key \"{}\" not found in {}",
            output::show(&key, a.hex),
            t.label()
        )));
    };
    let mut out = std::io::stdout().lock();
    let w = |r: std::io::Result<()>| r.map_err(|e| CliError::io(format!("stdout: {e}")));
    if ctx.json {
        let mut m = Map::new();
        output::put_bytes(&mut m, "key", &key, a.hex);
        output::put_bytes(&mut m, "value", &v.value, a.hex);
        m.insert("timestamp".into(), json!(v.timestamp));
        m.insert("expire_at".into(), json!(v.expire_at));
        output::print_json(&Json::Object(m))?;
    } else if a.raw {
        w(out.write_all(&v.value))?;
    } else {
        w(writeln!(out, "{}", output::show(&v.value, a.hex)))?;
    }
    Ok(())
}

/// `bough del`.
pub fn del(ctx: &Ctx, a: DelArgs) -> CliResult<()> {
    let t = target_of(&a.target)?;
    let key = arg_bytes(&a.key, a.hex, "KEY")?;
    let store = ctx.open(false)?;
    let (_, branch) = open_target(&store, &t, false)?;
    let existed = branch.get_blocking(&key)?.is_some();
    let mut b = WriteBatch::new();
    match a.ts {
        Some(ts) => b.delete_at(key, ts),
        None => b.delete(key),
    };
    write(&branch, b)?;
    store.close()?;
    if ctx.json {
        output::print_json(&json!({"ok": true, "target": t.label(), "existed": existed}))?;
    }
    Ok(())
}

/// One entry as a JSON object (the format `load` reads back).
pub fn entry_json(kv: &KeyValue, hex: bool, keys_only: bool) -> Json {
    let mut m = Map::new();
    output::put_bytes(&mut m, "key", &kv.key, hex);
    if !keys_only {
        output::put_bytes(&mut m, "value", &kv.value.value, hex);
        m.insert("timestamp".into(), json!(kv.value.timestamp));
        if let Some(e) = kv.value.expire_at {
            m.insert("expire_at".into(), json!(e));
        }
    }
    Json::Object(m)
}

/// `bough scan`.
pub fn scan(ctx: &Ctx, a: ScanArgs) -> CliResult<()> {
    let t = target_of(&a.target)?;
    let from = a
        .from
        .as_ref()
        .map(|k| arg_bytes(k, a.hex, "--from"))
        .transpose()?;
    let to =
        a.to.as_ref()
            .map(|k| arg_bytes(k, a.hex, "--to"))
            .transpose()?;
    let store = ctx.open_read_only()?;
    let (_, branch) = open_target(&store, &t, false)?;
    let view = branch.read_view()?;
    let mut begin = match from {
        Some(k) if a.from_exclusive => Bound::Excluded(k),
        Some(k) => Bound::Included(k),
        None => Bound::Unbounded,
    };
    let mut left = a.limit.unwrap_or(usize::MAX);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let w = |r: std::io::Result<()>| r.map_err(|e| CliError::io(format!("stdout: {e}")));
    while left > 0 {
        let page = view.scan(&ScanOptions {
            begin: begin.clone(),
            end: to.clone().map_or(Bound::Unbounded, Bound::Excluded),
            limit: left.min(1024),
            keys_only: a.keys_only,
            ..ScanOptions::default()
        })?;
        left -= page.entries.len();
        for kv in &page.entries {
            if ctx.json {
                let line = entry_json(kv, a.hex, a.keys_only);
                w(writeln!(out, "{line}"))?;
                continue;
            }
            let key = output::show(&kv.key, a.hex);
            let mut line = if a.keys_only {
                key
            } else {
                format!("{key}\t{}", output::show(&kv.value.value, a.hex))
            };
            if a.long {
                let exp = kv.value.expire_at.map_or("-".into(), output::time);
                line = format!("{line}\tts={}\texpires={exp}", kv.value.timestamp);
            }
            w(writeln!(out, "{line}"))?;
        }
        match page.next {
            Some(n) => begin = Bound::Included(n),
            None => break,
        }
    }
    w(out.flush())?;
    Ok(())
}

/// One parsed input line of `load`.
struct Line {
    key: Vec<u8>,
    value: Vec<u8>,
    opts: PutOptions,
}

fn parse_tsv(text: &str) -> Result<Line, String> {
    let (k, v) = text
        .split_once('\t')
        .ok_or("expected KEY<TAB>VALUE (no tab found)")?;
    Ok(Line {
        key: output::unescape(k).map_err(|e| format!("key: {e}"))?,
        value: output::unescape(v).map_err(|e| format!("value: {e}"))?,
        opts: PutOptions::default(),
    })
}

fn parse_jsonl(text: &str) -> Result<Line, String> {
    let v: Json = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Json::Object(m) = v else {
        return Err("expected a JSON object".into());
    };
    let num = |name: &str| -> Result<Option<u64>, String> {
        match m.get(name) {
            None | Some(Json::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| format!("`{name}` must be a non-negative integer")),
        }
    };
    let key = output::get_bytes(&m, "key")?.ok_or("missing `key` (or `key_hex`)")?;
    let value = output::get_bytes(&m, "value")?.ok_or("missing `value` (or `value_hex`)")?;
    Ok(Line {
        key,
        value,
        opts: PutOptions {
            timestamp: num("timestamp")?.or(num("ts")?),
            expire_at: num("expire_at")?,
            ttl_ms: num("ttl_ms")?,
        },
    })
}

/// `bough load`.
pub fn load(ctx: &Ctx, a: LoadArgs) -> CliResult<()> {
    let t = target_of(&a.target)?;
    if a.batch == 0 {
        return Err(CliError::usage("--batch must be at least 1"));
    }
    let (reader, total): (Box<dyn BufRead>, Option<u64>) = if a.input.as_os_str() == "-" {
        (Box::new(std::io::stdin().lock()), None)
    } else {
        let f = std::fs::File::open(&a.input)
            .map_err(|e| CliError::not_found(format!("cannot open {}: {e}", a.input.display())))?;
        let len = f.metadata().ok().map(|m| m.len());
        (Box::new(std::io::BufReader::with_capacity(1 << 20, f)), len)
    };
    let store = ctx.open(true)?;
    let (part, target) = open_target(&store, &t, true)?;
    let mut staging = if a.atomic {
        let name = format!("load-{}-{}", std::process::id(), output::now_ms());
        let purpose = format!("load --atomic into {}", t.label());
        Some(Staging {
            branch: part.create_staging_branch(&name, &t.branch, &purpose)?,
            part: &part,
            name,
            merged: false,
        })
    } else {
        None
    };
    let branch = staging.as_ref().map_or(&target, |s| &s.branch).clone();
    let mut progress = Progress::new(format!("load {}", t.label()), ctx.progress, total);
    let mut format = a.format;
    let mut batch = WriteBatch::new();
    let mut keys: HashSet<Vec<u8>> = HashSet::new();
    let mut batch_bytes = 0usize;
    let (mut loaded, mut bytes_in) = (0u64, 0u64);
    let mut superseded = 0u64;
    let mut line_no = 0u64;
    let mut buf = Vec::new();
    let mut reader = reader;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| CliError::io(format!("reading {}: {e}", a.input.display())))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        bytes_in += n as u64;
        while buf.last().is_some_and(|&b| b == b'\n' || b == b'\r') {
            buf.pop();
        }
        if buf.is_empty() {
            continue;
        }
        let text = std::str::from_utf8(&buf).map_err(|_| {
            CliError::usage(format!(
                "{}:{line_no}: not UTF-8; write binary bytes as \\xNN (TSV) or key_hex/value_hex (JSON)",
                a.input.display()
            ))
        })?;
        if format == LoadFormat::Auto {
            format = if text.starts_with('{') {
                LoadFormat::Jsonl
            } else {
                LoadFormat::Tsv
            };
        }
        let parsed = match format {
            LoadFormat::Jsonl => parse_jsonl(text),
            _ => parse_tsv(text),
        };
        let mut line = parsed.map_err(|e| {
            CliError::usage(format!("{}:{line_no}: {e}", a.input.display())).hint(if a.atomic {
                "nothing was loaded (--atomic); fix the line and load the file again".to_string()
            } else {
                format!(
                    "{loaded} entries before this line were loaded; fix the line and load the rest"
                )
            })
        })?;
        if line.opts.ttl_ms.is_none() && line.opts.expire_at.is_none() {
            line.opts.ttl_ms = a.ttl;
        }
        // A batch holds each key once: a repeated key starts a new batch (the later wins).
        if keys.contains(&line.key) || batch.len() >= a.batch || batch_bytes >= 8 << 20 {
            let n = batch.len() as u64;
            let r = write_counted(&branch, std::mem::take(&mut batch))
                .map_err(|e| load_hint(e, loaded, a.atomic))?;
            loaded += n;
            superseded += r.superseded;
            keys.clear();
            batch_bytes = 0;
        }
        batch_bytes += line.key.len() + line.value.len();
        keys.insert(line.key.clone());
        batch.put_with(line.key, line.value, line.opts);
        progress.tick(loaded + batch.len() as u64, bytes_in);
    }
    if !batch.is_empty() {
        let n = batch.len() as u64;
        let r = write_counted(&branch, batch).map_err(|e| load_hint(e, loaded, a.atomic))?;
        loaded += n;
        superseded += r.superseded;
    }
    if let Some(stage) = staging.as_mut() {
        part.merge(
            &stage.name,
            &t.branch,
            bough::MergeOptions {
                policy: bough::ConflictPolicy::Theirs,
                fast_forward: true,
                ..Default::default()
            },
        )
        .map_err(|e| load_hint(e.into(), 0, true))?;
        stage.merged = true;
        // Merged: a failed cleanup loses nothing (the next writer's open removes it).
        let _ = part.delete_branch(&stage.name);
    }
    drop(staging);
    let counts = WriteReport {
        applied: loaded - superseded,
        superseded,
    };
    progress.finish();
    let elapsed = progress.elapsed();
    store.close()?;
    if ctx.json {
        output::print_json(&json!({
            "target": t.label(),
            "loaded": loaded,
            "applied": counts.applied,
            "superseded": counts.superseded,
            "bytes": bytes_in,
            "seconds": elapsed.as_secs_f64(),
        }))?;
    } else {
        println!(
            "loaded {} ({}) into {} in {:.1?} ({}): {}",
            output::plural(loaded, "entry", "entries"),
            output::size(bytes_in),
            t.label(),
            elapsed,
            output::rate(loaded, elapsed),
            crate::export::applied_text(counts)
        );
    }
    Ok(())
}

fn load_hint(e: CliError, loaded_before: u64, atomic: bool) -> CliError {
    if atomic {
        return e.or_hint("nothing was loaded (--atomic); load the file again");
    }
    e.or_hint(format!(
        "the {loaded_before} entries before the failing batch were loaded"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_lines_parse() {
        let l = parse_tsv("a\\tb\tv\\x00").unwrap();
        assert_eq!((l.key, l.value), (b"a\tb".to_vec(), b"v\0".to_vec()));
        assert!(parse_tsv("no tab").is_err());
        let l = parse_jsonl(r#"{"key":"k","value_hex":"00ff","timestamp":7,"ttl_ms":5}"#).unwrap();
        assert_eq!((l.key, l.value), (b"k".to_vec(), vec![0, 0xff]));
        assert_eq!((l.opts.timestamp, l.opts.ttl_ms), (Some(7), Some(5)));
        assert!(parse_jsonl(r#"{"key":"k"}"#).is_err());
        assert!(parse_jsonl(r#"{"key":1,"value":"v"}"#).is_err());
        assert!(parse_jsonl("[1]").is_err());
    }
}
