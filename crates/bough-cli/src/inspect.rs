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
use crate::walk;
use bough::check::{PartitionFiles, check_data_file, page_type_name};

mod file;
mod manifest;

use file::file;
use manifest::{current_term, manifest};

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

fn report(ctx: &Ctx, text: &str, doc: Json, c: u8) -> CliResult<u8> {
    if ctx.json {
        output::print_json(&doc)?;
    } else {
        println!("{text}");
    }
    Ok(c)
}
