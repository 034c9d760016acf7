//! Which (branch, term) lineage allocated a file id: the seed's `BranchFileMapping`.
//!
//! A branch view holds one entry per lineage it can reach, sorted by the highest file id each
//! allocated. Because lineages in one view allocate disjoint, increasing id ranges, entry `i`
//! owns the ids `(max[i-1], max[i]]` (entry 0 owns `0..=max[0]`), and a binary search answers
//! "who wrote file N" — which is also the file's name (`data_<N>_<branch>_<term>`).
//!
//! Each entry also names the *incarnation* of its branch: a random id chosen when the branch
//! (name) was created, hashed into the page checksums of every file the lineage writes. A
//! page written by one incarnation of a name never validates when read through an entry of
//! another, even if a file name were ever reused.

use bough_names::{BranchName, FileId, Term};

/// One lineage's file-id range: the ids above the previous entry's `max_file_id` up to and
/// including this `max_file_id` were allocated by `(branch, term)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchFileRange {
    /// The branch that allocated the ids.
    pub branch: BranchName,
    /// The branch's term when it allocated them.
    pub term: Term,
    /// The incarnation of the branch that allocated them (its id from branch creation).
    pub incarnation: u64,
    /// The highest id of the range.
    pub max_file_id: FileId,
}

/// Why a [`BranchFileMapping`] refused a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeError {
    /// Ranges must be strictly increasing by `max_file_id`.
    NotIncreasing {
        /// `max_file_id` of the entry before.
        previous: FileId,
        /// The offending `max_file_id`.
        found: FileId,
    },
    /// The own lineage's maximum cannot go down (ids once allocated stay allocated).
    WouldLower {
        /// The current maximum.
        current: FileId,
        /// The requested one.
        requested: FileId,
    },
}

impl std::fmt::Display for RangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RangeError::NotIncreasing { previous, found } => write!(
                f,
                "branch file range max {found} is not above the previous entry's {previous}"
            ),
            RangeError::WouldLower { current, requested } => write!(
                f,
                "cannot lower the own range's max file id from {current} to {requested}"
            ),
        }
    }
}

impl std::error::Error for RangeError {}

/// Ranges sorted strictly increasing by `max_file_id` (the type keeps that invariant).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BranchFileMapping(Vec<BranchFileRange>);

impl BranchFileMapping {
    /// An empty mapping.
    pub fn new() -> Self {
        BranchFileMapping(Vec::new())
    }

    /// Wraps `ranges`, which must be strictly increasing by `max_file_id`.
    pub fn from_ranges(ranges: Vec<BranchFileRange>) -> Result<Self, RangeError> {
        for pair in ranges.windows(2) {
            if let [a, b] = pair
                && b.max_file_id <= a.max_file_id
            {
                return Err(RangeError::NotIncreasing {
                    previous: a.max_file_id,
                    found: b.max_file_id,
                });
            }
        }
        Ok(BranchFileMapping(ranges))
    }

    /// The lineage that allocated `file_id`: the first entry whose `max_file_id >= file_id`,
    /// or `None` if `file_id` is above every entry.
    pub fn resolve(&self, file_id: FileId) -> Option<&BranchFileRange> {
        let i = self.0.partition_point(|r| r.max_file_id < file_id);
        self.0.get(i)
    }

    /// Records that the own lineage `(branch, term)` of incarnation `incarnation` has
    /// allocated ids up to `max_file_id`.
    ///
    /// If the last entry is that lineage its maximum is raised (never lowered); otherwise
    /// a new entry is pushed, whose maximum must be above the last entry's (a new lineage's ids
    /// start above everything it can see).
    pub fn extend_own(
        &mut self,
        branch: &BranchName,
        term: Term,
        incarnation: u64,
        max_file_id: FileId,
    ) -> Result<(), RangeError> {
        match self.0.last_mut() {
            Some(last)
                if last.branch == *branch
                    && last.term == term
                    && last.incarnation == incarnation =>
            {
                if max_file_id < last.max_file_id {
                    return Err(RangeError::WouldLower {
                        current: last.max_file_id,
                        requested: max_file_id,
                    });
                }
                last.max_file_id = max_file_id;
            }
            Some(last) if max_file_id <= last.max_file_id => {
                return Err(RangeError::NotIncreasing {
                    previous: last.max_file_id,
                    found: max_file_id,
                });
            }
            _ => self.0.push(BranchFileRange {
                branch: branch.clone(),
                term,
                incarnation,
                max_file_id,
            }),
        }
        Ok(())
    }

    /// Drops the entries that no referenced file id falls in (the seed's "Entry Removal"),
    /// always keeping the writer's own lineage `keep`.
    ///
    /// `referenced` must yield every file id the manifest still references (mapping table,
    /// archives being written, …); order and duplicates do not matter. Removing an entry
    /// widens the next entry's range downwards over ids nobody references, so every
    /// referenced id still resolves to the same lineage. Ids above the last entry are ignored.
    pub fn retain_referenced(
        &mut self,
        referenced: impl Iterator<Item = FileId>,
        keep: (&BranchName, Term),
    ) {
        let mut used = vec![false; self.0.len()];
        for id in referenced {
            let i = self.0.partition_point(|r| r.max_file_id < id);
            if let Some(flag) = used.get_mut(i) {
                *flag = true;
            }
        }
        let mut flags = used.into_iter();
        self.0.retain(|r| {
            let used = flags.next().unwrap_or(false);
            used || (r.branch == *keep.0 && r.term == keep.1)
        });
    }

    /// The entries, in increasing `max_file_id` order.
    pub fn as_slice(&self) -> &[BranchFileRange] {
        &self.0
    }

    /// Iterates the entries in increasing `max_file_id` order.
    pub fn iter(&self) -> std::slice::Iter<'_, BranchFileRange> {
        self.0.iter()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The highest `max_file_id` of any entry.
    pub fn max_file_id(&self) -> Option<FileId> {
        self.0.last().map(|r| r.max_file_id)
    }

    /// Unwraps the entries.
    pub fn into_vec(self) -> Vec<BranchFileRange> {
        self.0
    }
}

impl<'a> IntoIterator for &'a BranchFileMapping {
    type Item = &'a BranchFileRange;
    type IntoIter = std::slice::Iter<'a, BranchFileRange>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> BranchName {
        BranchName::new(s).expect("valid name")
    }

    fn mapping(entries: &[(&str, Term, FileId)]) -> BranchFileMapping {
        BranchFileMapping::from_ranges(
            entries
                .iter()
                .map(|&(b, term, max_file_id)| BranchFileRange {
                    branch: name(b),
                    term,
                    incarnation: 7,
                    max_file_id,
                })
                .collect(),
        )
        .expect("sorted")
    }

    fn lineages(m: &BranchFileMapping) -> Vec<(String, Term, FileId)> {
        m.iter()
            .map(|r| (r.branch.as_str().to_owned(), r.term, r.max_file_id))
            .collect()
    }

    fn who(m: &BranchFileMapping, id: FileId) -> Option<(&str, Term)> {
        m.resolve(id).map(|r| (r.branch.as_str(), r.term))
    }

    #[test]
    fn resolve_on_boundaries() {
        let m = mapping(&[("main", 3, 10), ("feature", 0, 20), ("feature", 2, 25)]);
        assert_eq!(who(&m, 0), Some(("main", 3)));
        assert_eq!(who(&m, 10), Some(("main", 3)));
        assert_eq!(who(&m, 11), Some(("feature", 0)));
        assert_eq!(who(&m, 20), Some(("feature", 0)));
        assert_eq!(who(&m, 21), Some(("feature", 2)));
        assert_eq!(who(&m, 25), Some(("feature", 2)));
        assert_eq!(who(&m, 26), None);
        assert_eq!(who(&BranchFileMapping::new(), 0), None);
    }

    #[test]
    fn from_ranges_requires_strictly_increasing() {
        let r = |max_file_id| BranchFileRange {
            branch: name("main"),
            term: 0,
            incarnation: 7,
            max_file_id,
        };
        assert_eq!(
            BranchFileMapping::from_ranges(vec![r(5), r(5)]),
            Err(RangeError::NotIncreasing {
                previous: 5,
                found: 5
            })
        );
        assert!(BranchFileMapping::from_ranges(vec![r(5), r(4)]).is_err());
        assert!(BranchFileMapping::from_ranges(vec![r(4), r(5)]).is_ok());
    }

    #[test]
    fn extend_own_raises_or_pushes() {
        let main = name("main");
        let feature = name("feature");
        let mut m = BranchFileMapping::new();
        m.extend_own(&main, 1, 7, 0).expect("first entry");
        m.extend_own(&main, 1, 7, 4).expect("raise");
        m.extend_own(&main, 1, 7, 4).expect("same value is fine");
        assert_eq!(lineages(&m), vec![("main".into(), 1, 4)]);

        assert_eq!(
            m.extend_own(&main, 1, 7, 3),
            Err(RangeError::WouldLower {
                current: 4,
                requested: 3
            })
        );
        // A new lineage (new term, or a fork) must start above everything visible.
        assert_eq!(
            m.extend_own(&main, 2, 7, 4),
            Err(RangeError::NotIncreasing {
                previous: 4,
                found: 4
            })
        );
        assert!(m.extend_own(&feature, 0, 7, 2).is_err());
        m.extend_own(&main, 2, 7, 5).expect("new term");
        m.extend_own(&feature, 0, 7, 9).expect("fork");
        m.extend_own(&feature, 0, 7, 12).expect("raise");
        assert_eq!(
            lineages(&m),
            vec![
                ("main".into(), 1, 4),
                ("main".into(), 2, 5),
                ("feature".into(), 0, 12)
            ]
        );
    }

    #[test]
    fn retain_referenced_drops_unreferenced_entries_only() {
        let m0 = mapping(&[
            ("main", 0, 10),
            ("main", 1, 20),
            ("feature", 0, 30),
            ("feature", 1, 40),
        ]);
        let feature = name("feature");

        // Ids in (10, 20] and (30, 40] are referenced; main/0 and feature/0 are not, but
        // feature/0 is the writer's own lineage.
        let mut m = m0.clone();
        m.retain_referenced([15, 40, 33, 15].into_iter(), (&feature, 0));
        assert_eq!(
            lineages(&m),
            vec![
                ("main".into(), 1, 20),
                ("feature".into(), 0, 30),
                ("feature".into(), 1, 40)
            ]
        );
        // Every referenced id still resolves to its original lineage.
        for id in [15, 40, 33] {
            assert_eq!(m.resolve(id), m0.resolve(id));
        }

        // Boundary ids count for the entry they end; ids past the end are ignored.
        let mut m = m0.clone();
        m.retain_referenced([10, 11, 99].into_iter(), (&feature, 7));
        assert_eq!(
            lineages(&m),
            vec![("main".into(), 0, 10), ("main".into(), 1, 20)]
        );

        // Nothing referenced: only the own lineage survives.
        let mut m = m0.clone();
        m.retain_referenced(std::iter::empty(), (&feature, 1));
        assert_eq!(lineages(&m), vec![("feature".into(), 1, 40)]);
    }
}
