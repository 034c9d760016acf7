//! Golden names: one example of every kind of name the store writes, as formatted and as
//! classified. Any change to this table is a format change (docs/format.md, "Names"):
//! stores written before it would no longer be read the same way.

use std::fmt::Write as _;

use bough_names::{
    ArchiveName, BranchName, CurrentTermName, DataFileName, FileKind, HistoryName, LogFileName,
    ManifestName, PartitionDir, TableName, TableOpName, TagFileName, TmpName, TornTailName,
    VersionName, VersionTarget, classify,
};

fn b(s: &str) -> BranchName {
    BranchName::new(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// `name -> kind` per line; every name must classify to a known kind and format back.
fn table(names: &[String]) -> String {
    let mut out = String::new();
    for n in names {
        let kind = classify(n);
        assert!(kind.is_known(), "{n:?} is not recognised");
        assert_eq!(&kind.to_string(), n, "formatting {n:?} does not round-trip");
        let what = match &kind {
            FileKind::Manifest(m) => format!("manifest branch={} term={}", m.branch, m.term),
            FileKind::Archive(a) => format!(
                "archive branch={} term={} ts={}",
                a.branch, a.term, a.timestamp
            ),
            FileKind::Data(d) => format!(
                "data file_id={} branch={} term={}",
                d.file_id, d.branch, d.term
            ),
            FileKind::Log(l) => format!(
                "log log_id={} branch={} term={}",
                l.log_id, l.branch, l.term
            ),
            FileKind::History(h) => format!(
                "history stamp={} branch={} term={}",
                h.stamp, h.branch, h.term
            ),
            FileKind::CurrentTerm(c) => format!("current-term branch={}", c.branch),
            FileKind::Tmp(t) => format!("tmp target={} nonce={}", t.target, t.nonce),
            FileKind::Lock => "lock".to_string(),
            FileKind::GcLease => "gc-lease".to_string(),
            FileKind::Version(v) => format!("version target={} version={}", v.target, v.version),
            FileKind::TornTail(t) => format!(
                "torn-tail manifest={} offset={} n={}",
                t.manifest, t.offset, t.n
            ),
            FileKind::Tag(t) => format!("tag name={}", t.tag),
            FileKind::TableOp(t) => format!("table-op seq={} part={:?}", t.seq, t.part),
            FileKind::Unknown(u) => format!("unknown {u}"),
        };
        let _ = writeln!(out, "{n:<40} {what}");
    }
    out
}

#[test]
fn every_kind_of_name() {
    let main = BranchName::main();
    let names: Vec<String> = vec![
        PartitionDir::new(
            TableName::new("orders.eu").unwrap_or_else(|e| panic!("{e}")),
            3,
        )
        .to_string(),
        ManifestName::new(main.clone(), 5).to_string(),
        ManifestName::new(b("release_v2"), 7).to_string(),
        ArchiveName::new(b("v"), 1, 2).to_string(),
        DataFileName::new(10, b("feature"), 5).to_string(),
        CurrentTermName::new(b("feature")).to_string(),
        LogFileName::new(4, b("feature"), 5).to_string(),
        HistoryName::new(1_700_000_000_123, b("feature"), 5).to_string(),
        TmpName::new(ManifestName::new(main.clone(), 5), 42).to_string(),
        TmpName::new(CurrentTermName::new(main.clone()), 3).to_string(),
        "LOCK".to_string(),
        "GC_LEASE".to_string(),
        VersionName::new(ManifestName::new(main.clone(), 5), 3).to_string(),
        VersionName::new(CurrentTermName::new(b("feature")), 12).to_string(),
        VersionName::new(VersionTarget::GcLease, 0).to_string(),
        TornTailName::new(ManifestName::new(main.clone(), 5), 8192, 0).to_string(),
        TagFileName::new(b("release_v2")).to_string(),
        TmpName::new(TagFileName::new(b("v1")), 9).to_string(),
        TableOpName::intent(7).to_string(),
        TableOpName::outcome(7).to_string(),
    ];
    // The partition directory is not a file name: it is checked on its own.
    let dir = &names[0];
    assert_eq!(
        PartitionDir::parse(dir).map(|d| d.to_string()).as_deref(),
        Ok(dir.as_str())
    );
    insta::assert_snapshot!(format!("partition-dir {dir}\n{}", table(&names[1..])));
}
