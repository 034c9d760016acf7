//! The staging mark of a branch: the `STAGING` extension of snapshot records.
//!
//! A staging branch holds the work of one command (an `import`, an atomic `load`) until it
//! is merged into its target and deleted. A process killed in between leaves it behind; the
//! mark says so durably, so listings report it and the next writer removes it instead of
//! keeping it (and the files only it references) forever.
//!
//! Payload: 1 to [`MAX_STAGING_LEN`] bytes of UTF-8, what the branch stages (e.g. `import
//! into orders.0@main`). The tag is even (optional): a binary that does not know it sees an
//! ordinary branch, which loses no data.

use crate::ext::{self, Extensions};

pub use crate::ext::STAGING;

/// Longest `STAGING` payload.
pub const MAX_STAGING_LEN: usize = 200;

/// What the branch of this extension list stages: `Ok(None)` for an ordinary branch,
/// `Err` with the reason for a payload that is empty, too long or not UTF-8.
pub fn staging_purpose(exts: &[(u64, Vec<u8>)]) -> Result<Option<String>, String> {
    let Some(bytes) = ext::get(exts, STAGING) else {
        return Ok(None);
    };
    if bytes.is_empty() || bytes.len() > MAX_STAGING_LEN {
        return Err(format!(
            "staging extension of {} bytes (1 to {MAX_STAGING_LEN} allowed)",
            bytes.len()
        ));
    }
    std::str::from_utf8(bytes)
        .map(|s| Some(s.to_string()))
        .map_err(|e| format!("staging extension is not UTF-8: {e}"))
}

/// Marks an extension list as a staging branch's; `purpose` is cut to
/// [`MAX_STAGING_LEN`] bytes (at a character boundary) and an empty one becomes `staging`.
pub fn set_staging(exts: &mut Extensions, purpose: &str) {
    let mut end = purpose.len().min(MAX_STAGING_LEN);
    while !purpose.is_char_boundary(end) {
        end -= 1;
    }
    let text = match &purpose[..end] {
        "" => "staging",
        t => t,
    };
    ext::set(exts, STAGING, text.as_bytes().to_vec());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_bad_payloads() {
        let mut exts = Vec::new();
        assert_eq!(staging_purpose(&exts), Ok(None));
        set_staging(&mut exts, "import into t.0@main");
        assert_eq!(
            staging_purpose(&exts),
            Ok(Some("import into t.0@main".into()))
        );
        set_staging(&mut exts, &"é".repeat(150));
        let long = staging_purpose(&exts).expect("valid").expect("marked");
        assert_eq!(long.len(), MAX_STAGING_LEN);
        set_staging(&mut exts, "");
        assert_eq!(staging_purpose(&exts), Ok(Some("staging".into())));
        for bad in [vec![], vec![0xff, 0xfe], vec![b'a'; MAX_STAGING_LEN + 1]] {
            let exts = vec![(STAGING, bad)];
            assert!(staging_purpose(&exts).is_err());
        }
    }
}
