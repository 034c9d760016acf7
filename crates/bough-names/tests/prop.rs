//! Property tests: format -> parse is the identity on valid names, and
//! classify -> format is the identity on every name classify recognises.

use bough_names::{
    ArchiveName, BranchName, CurrentTermName, DataFileName, FileKind, HistoryName, LogFileName,
    ManifestName, PartitionDir, TableName, TableOpName, TagFileName, TmpName, TmpTarget,
    TornTailName, VersionName, VersionTarget, classify, classify_dir, parse_file_name,
};
use proptest::prelude::*;

const CASES: u32 = 2000;

/// Reference model of the branch rules, written independently of the crate.
fn model_branch_ok(s: &str) -> bool {
    let alphabet = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let reserved = s != "main" && s.eq_ignore_ascii_case("main");
    let segments_ok = s
        .split('_')
        .all(|seg| !seg.is_empty() && !seg.chars().all(|c| c.is_ascii_digit()));
    !s.is_empty() && s.len() <= 64 && alphabet && !reserved && segments_ok && !s.starts_with('-')
}

/// Reference model of the table rules.
fn model_table_ok(s: &str) -> bool {
    let alphabet = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    !s.is_empty()
        && s.len() <= 128
        && alphabet
        && !s.starts_with('.')
        && !s.starts_with('-')
        && !s.ends_with('.')
        && !s.contains("..")
}

fn word() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9-]{1,8}".prop_filter("all digits", |w| !w.bytes().all(|b| b.is_ascii_digit()))
}

fn branch() -> impl Strategy<Value = BranchName> {
    prop_oneof![
        1 => Just(BranchName::main()),
        8 => prop::collection::vec(word(), 1..5)
            .prop_filter_map("invalid branch", |ws| BranchName::new(&ws.join("_")).ok()),
        1 => "[a-z]{64}".prop_filter_map("invalid branch", |s| BranchName::new(&s).ok()),
    ]
}

fn table() -> impl Strategy<Value = TableName> {
    prop::collection::vec("[a-zA-Z0-9_-]{1,12}", 1..5)
        .prop_filter_map("invalid table", |ps| TableName::new(&ps.join(".")).ok())
}

fn num() -> impl Strategy<Value = u64> {
    prop_oneof![0..20u64, Just(u64::MAX), any::<u64>()]
}

fn target() -> impl Strategy<Value = TmpTarget> {
    prop_oneof![
        (branch(), num()).prop_map(|(b, t)| ManifestName::new(b, t).into()),
        (branch(), num(), num()).prop_map(|(b, t, ts)| ArchiveName::new(b, t, ts).into()),
        (num(), branch(), num()).prop_map(|(f, b, t)| DataFileName::new(f, b, t).into()),
        branch().prop_map(|b| CurrentTermName::new(b).into()),
        branch().prop_map(|b| TagFileName::new(b).into()),
        (num(), branch(), num()).prop_map(|(s, b, t)| HistoryName::new(s, b, t).into()),
        (num(), any::<bool>()).prop_map(|(s, end)| if end {
            TableOpName::outcome(s).into()
        } else {
            TableOpName::intent(s).into()
        }),
        (branch(), num(), num(), num()).prop_map(|(b, t, o, n)| TornTailName::new(
            ManifestName::new(b, t),
            o,
            n
        )
        .into()),
    ]
}

fn file_kind() -> impl Strategy<Value = FileKind> {
    prop_oneof![
        4 => target().prop_map(FileKind::from),
        1 => (num(), branch(), num()).prop_map(|(l, b, t)| FileKind::Log(LogFileName::new(l, b, t))),
        1 => (num(), branch(), num()).prop_map(|(s, b, t)| FileKind::History(HistoryName::new(s, b, t))),
        2 => (target(), num()).prop_map(|(t, n)| FileKind::Tmp(TmpName::new(t, n))),
        1 => Just(FileKind::Lock),
        1 => Just(FileKind::GcLease),
        2 => (version_target(), num()).prop_map(|(t, n)| FileKind::Version(VersionName::new(t, n))),
    ]
}

fn version_target() -> impl Strategy<Value = VersionTarget> {
    prop_oneof![
        (branch(), num()).prop_map(|(b, t)| ManifestName::new(b, t).into()),
        branch().prop_map(|b| CurrentTermName::new(b).into()),
        Just(VersionTarget::GcLease),
    ]
}

/// Strings near the grammar: a store prefix, then the grammar's alphabet,
/// then maybe a temp suffix.
fn near_grammar() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec![
            "",
            "manifest_",
            "data_",
            "tableop_",
            "wal_",
            "CURRENT_TERM.",
            "tag_",
            "LOCK",
            "GC_LEASE",
        ]),
        "[a-zA-Z0-9_.-]{0,24}",
        prop::sample::select(vec![
            "",
            ".tmp",
            ".0.tmp",
            ".7.tmp",
            ".v0",
            ".v12",
            ".v",
            ".torn.0.0",
            ".torn.4096",
        ]),
    )
        .prop_map(|(p, body, s)| format!("{p}{body}{s}"))
}

/// A valid name with one random edit, to probe the edges of the grammar.
fn mutated_name() -> impl Strategy<Value = String> {
    (
        file_kind(),
        any::<prop::sample::Index>(),
        0..3u8,
        prop::sample::select(vec!['_', '0', '1', '.', 'a', 'M', '-', '/', 'é']),
    )
        .prop_map(|(k, idx, op, ch)| {
            let mut chars: Vec<char> = k.to_string().chars().collect();
            let at = idx.index(chars.len() + 1);
            match op {
                0 => chars.insert(at, ch),
                1 if at < chars.len() => {
                    chars.remove(at);
                }
                _ if at < chars.len() => chars[at] = ch,
                _ => chars.push(ch),
            }
            chars.into_iter().collect()
        })
}

/// Whatever classify recognises must format back to the very same bytes, and
/// every typed parser must accept exactly the names classify gives its kind.
fn check_classify(s: &str) -> Result<(), TestCaseError> {
    let kind = classify(s);
    prop_assert_eq!(kind.to_string(), s);
    match parse_file_name(s) {
        Ok(parsed) => prop_assert_eq!(&parsed, &kind),
        Err(_) => prop_assert_eq!(&kind, &FileKind::Unknown(s.to_owned())),
    }
    let typed = [
        ManifestName::parse(s).ok().map(FileKind::Manifest),
        ArchiveName::parse(s).ok().map(FileKind::Archive),
        DataFileName::parse(s).ok().map(FileKind::Data),
        LogFileName::parse(s).ok().map(FileKind::Log),
        HistoryName::parse(s).ok().map(FileKind::History),
        CurrentTermName::parse(s).ok().map(FileKind::CurrentTerm),
        TmpName::parse(s).ok().map(FileKind::Tmp),
        TableOpName::parse(s).ok().map(FileKind::TableOp),
        VersionName::parse(s).ok().map(FileKind::Version),
        TornTailName::parse(s).ok().map(FileKind::TornTail),
        TagFileName::parse(s).ok().map(FileKind::Tag),
    ];
    let accepted: Vec<FileKind> = typed.into_iter().flatten().collect();
    match &kind {
        FileKind::Unknown(_) | FileKind::Lock | FileKind::GcLease => {
            prop_assert!(accepted.is_empty(), "{:?}", accepted)
        }
        known => prop_assert_eq!(accepted, vec![known.clone()]),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn format_then_parse_is_identity(kind in file_kind()) {
        let text = kind.to_string();
        prop_assert_eq!(&classify(&text), &kind);
        match &kind {
            FileKind::Manifest(n) => prop_assert_eq!(&ManifestName::parse(&text)?, n),
            FileKind::Archive(n) => prop_assert_eq!(&ArchiveName::parse(&text)?, n),
            FileKind::Data(n) => prop_assert_eq!(&DataFileName::parse(&text)?, n),
            FileKind::Log(n) => prop_assert_eq!(&LogFileName::parse(&text)?, n),
            FileKind::History(n) => prop_assert_eq!(&HistoryName::parse(&text)?, n),
            FileKind::CurrentTerm(n) => prop_assert_eq!(&CurrentTermName::parse(&text)?, n),
            FileKind::Tmp(n) => prop_assert_eq!(&TmpName::parse(&text)?, n),
            FileKind::Version(n) => prop_assert_eq!(&VersionName::parse(&text)?, n),
            FileKind::TornTail(n) => prop_assert_eq!(&TornTailName::parse(&text)?, n),
            FileKind::Tag(n) => prop_assert_eq!(&TagFileName::parse(&text)?, n),
            FileKind::TableOp(n) => prop_assert_eq!(&TableOpName::parse(&text)?, n),
            FileKind::Lock | FileKind::GcLease | FileKind::Unknown(_) => {}
        }
    }

    #[test]
    fn partition_dir_round_trip(t in table(), p in any::<u32>()) {
        let dir = PartitionDir::new(t, p);
        let text = dir.to_string();
        prop_assert_eq!(PartitionDir::parse(&text)?, dir.clone());
        prop_assert_eq!(classify_dir(&text), Some(dir));
    }

    #[test]
    fn classify_arbitrary_unicode(s in any::<String>()) {
        check_classify(&s)?;
    }

    #[test]
    fn classify_near_grammar(s in near_grammar()) {
        check_classify(&s)?;
    }

    #[test]
    fn classify_mutated_names(s in mutated_name()) {
        check_classify(&s)?;
    }

    #[test]
    fn classify_dir_is_exact(s in "[a-zA-Z0-9_./-]{0,20}") {
        if let Some(dir) = classify_dir(&s) {
            prop_assert_eq!(dir.to_string(), s);
        }
    }

    #[test]
    fn branch_rules_match_model(s in "[a-zA-Z0-9_ .-]{0,70}|(?i:main)|[0-9_]{1,6}") {
        let got = BranchName::new(&s);
        prop_assert_eq!(got.is_ok(), model_branch_ok(&s), "{:?} -> {:?}", s, got);
        if let Ok(b) = got {
            prop_assert_eq!(b.as_str(), s.as_str());
            prop_assert_eq!(b.is_main(), s == "main");
        }
    }

    #[test]
    fn table_rules_match_model(s in "[a-zA-Z0-9_./\\\\-]{0,140}|\\.{1,3}") {
        let got = TableName::new(&s);
        prop_assert_eq!(got.is_ok(), model_table_ok(&s), "{:?} -> {:?}", s, got);
    }

    #[test]
    fn identifiers_never_panic(s in any::<String>()) {
        let _ = BranchName::new(&s);
        let _ = TableName::new(&s);
        let _ = classify_dir(&s);
    }
}
