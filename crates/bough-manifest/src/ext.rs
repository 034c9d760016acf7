//! Extensions: tagged byte strings at the end of snapshot and log payloads, so later
//! versions can add fields without a format-version bump.
//!
//! Tags are strictly increasing within a record. An even tag is optional: a reader that does
//! not know it skips it, and a writer that rewrites the manifest drops it, so even tags may
//! only carry information that is safe to lose. An odd tag is must-understand: a reader that
//! does not know it refuses the record. To add a field, pick a tag (odd unless losing it is
//! harmless), add a `pub const` here, list it in [`KNOWN`], and give the structures typed
//! accessors built on [`get`] and [`set`].

/// An extension list: `(tag, bytes)` pairs, tags strictly increasing.
pub type Extensions = Vec<(u64, Vec<u8>)>;

/// Every tag this version understands. Decoding keeps these, skips other even tags and
/// refuses other odd tags; encoding refuses tags not listed here.
pub const KNOWN: &[u64] = &[
    ORIGIN,
    MERGE_BASES,
    VERSION,
    STAGING,
    INCARNATION,
    POLICY,
    LOG,
    HISTORY,
];

/// Tag of the branch-origin extension (odd: must be understood). See `BranchOrigin`.
pub const ORIGIN: u64 = 1;

/// Tag of the merge-bases extension (odd: GC must protect the bases' pages, so a reader that
/// cannot interpret it must refuse). See `MergeBase`.
pub const MERGE_BASES: u64 = 3;

/// Tag of the commit-version extension (odd: a reader that dropped it would rewrite the
/// manifest without it and restart the branch's versions at 0, so it must be understood).
/// Snapshot records only. See `crate::version`.
pub const VERSION: u64 = 5;

/// Tag of the staging mark (even: a reader that drops it sees an ordinary branch, and no
/// data is lost). See `bough_manifest::staging_purpose`.
pub const STAGING: u64 = 6;

/// Tag of the incarnation extension (odd: every page of the branch's own files is checked
/// against it, so a reader that dropped it would write pages no one can read). See
/// `crate::incarnation`.
pub const INCARNATION: u64 = 7;

/// Tag of the branch-policy extension: protection and expiry (odd: a reader that dropped it
/// would let a protected branch be deleted or keep an expired one). See `BranchPolicy`.
pub const POLICY: u64 = 11;

/// Tag of the log-reference extension (odd: a reader that ignored it would lose the
/// acknowledged writes after the checkpoint, and GC would delete the log that holds them).
/// See `LogRef`.
pub const LOG: u64 = 9;

/// Tag of a history point's time (even: a point without it cannot be placed in time and
/// is not used, so losing it loses no data). History points only. See `crate::history`.
pub const HISTORY: u64 = 8;

/// Whether this version understands `tag`.
pub fn is_known(tag: u64) -> bool {
    KNOWN.contains(&tag)
}

/// Whether a tag must be understood by every reader.
pub fn is_mandatory(tag: u64) -> bool {
    tag & 1 == 1
}

/// The bytes stored under `tag`.
pub fn get(exts: &[(u64, Vec<u8>)], tag: u64) -> Option<&[u8]> {
    exts.binary_search_by_key(&tag, |(t, _)| *t)
        .ok()
        .and_then(|i| exts.get(i))
        .map(|(_, v)| v.as_slice())
}

/// Stores `value` under `tag`, keeping tags sorted; returns the previous value.
pub fn set(exts: &mut Extensions, tag: u64, value: Vec<u8>) -> Option<Vec<u8>> {
    match exts.binary_search_by_key(&tag, |(t, _)| *t) {
        Ok(i) => exts
            .get_mut(i)
            .map(|(_, old)| std::mem::replace(old, value)),
        Err(i) => {
            exts.insert(i, (tag, value));
            None
        }
    }
}

/// Removes `tag`; returns its value.
pub fn remove(exts: &mut Extensions, tag: u64) -> Option<Vec<u8>> {
    exts.binary_search_by_key(&tag, |(t, _)| *t)
        .ok()
        .map(|i| exts.remove(i).1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_remove_keep_order() {
        let mut e = Extensions::new();
        assert_eq!(set(&mut e, 4, vec![4]), None);
        assert_eq!(set(&mut e, 2, vec![2]), None);
        assert_eq!(set(&mut e, 4, vec![5]), Some(vec![4]));
        assert_eq!(e, vec![(2, vec![2]), (4, vec![5])]);
        assert_eq!(get(&e, 4), Some(&[5u8][..]));
        assert_eq!(get(&e, 3), None);
        assert_eq!(remove(&mut e, 2), Some(vec![2]));
        assert_eq!(remove(&mut e, 2), None);
        assert!(is_mandatory(1) && !is_mandatory(2));
    }
}
