//! File and directory names: parsing and formatting are exact inverses.
//!
//! Two directions from one input:
//! - the input as a string: whatever `classify` (and each typed parser) accepts must format
//!   back to exactly the input, and every parser must agree with `classify` on the kind;
//! - the input as structured data: every name built from valid parts must format to a
//!   string that `classify` maps back to the same value.
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use bough_names::{
    ArchiveName, BranchName, CurrentTermName, DataFileName, FileKind, ManifestName, PartitionDir,
    TableName, TagFileName, TmpName, TmpTarget, classify, classify_dir, parse_file_name,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        check_string(s);
    }
    if let Ok(parts) = Parts::arbitrary(&mut Unstructured::new(data)) {
        check_built(&parts);
    }
});

fn check_string(s: &str) {
    let kind = classify(s);
    assert_eq!(
        kind.to_string(),
        s,
        "classify({s:?}) = {kind:?} formats differently"
    );
    match parse_file_name(s) {
        Ok(parsed) => assert_eq!(
            parsed, kind,
            "parse_file_name and classify disagree on {s:?}"
        ),
        Err(_) => assert!(
            !kind.is_known(),
            "classify knows {s:?} but parse_file_name refuses it"
        ),
    }
    if let FileKind::Unknown(kept) = &kind {
        assert_eq!(kept, s);
    }

    // Each typed parser accepts exactly the names `classify` gives its kind.
    let expect = |parsed: Option<FileKind>, what: &str| match parsed {
        Some(parsed) => {
            assert_eq!(
                parsed.to_string(),
                s,
                "{what}::parse({s:?}) formats differently"
            );
            assert_eq!(parsed, kind, "{what}::parse and classify disagree on {s:?}");
        }
        None => assert!(
            !same_variant(&kind, what),
            "classify({s:?}) = {kind:?} but {what}::parse refuses it"
        ),
    };
    expect(
        ManifestName::parse(s).ok().map(FileKind::Manifest),
        "ManifestName",
    );
    expect(
        ArchiveName::parse(s).ok().map(FileKind::Archive),
        "ArchiveName",
    );
    expect(
        DataFileName::parse(s).ok().map(FileKind::Data),
        "DataFileName",
    );
    expect(
        CurrentTermName::parse(s).ok().map(FileKind::CurrentTerm),
        "CurrentTermName",
    );
    expect(TmpName::parse(s).ok().map(FileKind::Tmp), "TmpName");
    expect(TagFileName::parse(s).ok().map(FileKind::Tag), "TagFileName");

    match classify_dir(s) {
        Some(dir) => {
            assert_eq!(
                dir.to_string(),
                s,
                "classify_dir({s:?}) formats differently"
            );
            assert_eq!(PartitionDir::parse(s).ok(), Some(dir));
        }
        None => assert!(PartitionDir::parse(s).is_err()),
    }
    if let Ok(branch) = BranchName::new(s) {
        assert_eq!(branch.as_str(), s);
        assert_eq!(branch.to_string(), s);
    }
    if let Ok(table) = TableName::new(s) {
        assert_eq!(table.as_str(), s);
    }
}

fn same_variant(kind: &FileKind, what: &str) -> bool {
    matches!(
        (kind, what),
        (FileKind::Manifest(_), "ManifestName")
            | (FileKind::Archive(_), "ArchiveName")
            | (FileKind::Data(_), "DataFileName")
            | (FileKind::CurrentTerm(_), "CurrentTermName")
            | (FileKind::Tmp(_), "TmpName")
            | (FileKind::Tag(_), "TagFileName")
    )
}

/// Raw parts of a name; the strings become names only when they validate.
#[derive(Debug, Arbitrary)]
struct Parts {
    branch: String,
    table: String,
    term: u64,
    file_id: u64,
    timestamp: u64,
    nonce: u64,
    partition: u32,
    tmp_of: u8,
}

fn branch_from(raw: &str) -> BranchName {
    BranchName::new(raw).unwrap_or_else(|_| {
        // Keep only branch characters so most inputs still yield a usable, varied name.
        let cleaned: String = raw
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .take(64)
            .collect();
        BranchName::new(&cleaned).unwrap_or_else(|_| BranchName::main())
    })
}

fn check_built(p: &Parts) {
    let branch = branch_from(&p.branch);
    let manifest = ManifestName::new(branch.clone(), p.term);
    let archive = ArchiveName::new(branch.clone(), p.term, p.timestamp);
    let data = DataFileName::new(p.file_id, branch.clone(), p.term);
    let current = CurrentTermName::new(branch.clone());
    let tag = TagFileName::new(branch.clone());
    let target: TmpTarget = match p.tmp_of % 5 {
        0 => manifest.clone().into(),
        1 => archive.clone().into(),
        2 => data.clone().into(),
        3 => tag.clone().into(),
        _ => current.clone().into(),
    };
    let tmp = TmpName::new(target, p.nonce);

    for kind in [
        FileKind::Manifest(manifest),
        FileKind::Archive(archive),
        FileKind::Data(data),
        FileKind::CurrentTerm(current),
        FileKind::Tag(tag),
        FileKind::Tmp(tmp),
        FileKind::Lock,
    ] {
        let name = kind.to_string();
        assert_eq!(
            classify(&name),
            kind,
            "{kind:?} formats to {name:?}, which classifies differently"
        );
    }

    if let Ok(table) = TableName::new(&p.table) {
        let dir = PartitionDir::new(table, p.partition);
        let name = dir.to_string();
        assert_eq!(
            classify_dir(&name),
            Some(dir),
            "partition dir {name:?} does not round-trip"
        );
    }
}
