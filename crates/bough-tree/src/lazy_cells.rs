//! [`LazyCells`]: a fixed number of write-once cells, allocated in groups of
//! [`GROUP`] as they are first touched, so a structure kept for every tree version (see
//! [`crate::btree::TopNodes`]) costs a few hundred bytes for a small or rarely read tree
//! and only grows where lookups go.

use std::sync::OnceLock;

/// Cells allocated together.
pub const GROUP: usize = 16;

/// `GROUPS × GROUP` write-once cells, read without a lock (see the module docs).
#[derive(Debug)]
pub struct LazyCells<T, const GROUPS: usize> {
    groups: [OnceLock<Box<[OnceLock<T>; GROUP]>>; GROUPS],
}

impl<T, const GROUPS: usize> Default for LazyCells<T, GROUPS> {
    fn default() -> Self {
        LazyCells {
            groups: std::array::from_fn(|_| OnceLock::new()),
        }
    }
}

impl<T, const GROUPS: usize> LazyCells<T, GROUPS> {
    /// How many cells there are.
    pub const CELLS: usize = GROUPS * GROUP;

    /// Cell `i` (its group allocated on first touch); `None` past the last cell.
    pub fn cell(&self, i: usize) -> Option<&OnceLock<T>> {
        let group = self.groups.get(i / GROUP)?;
        group
            .get_or_init(|| Box::new(std::array::from_fn(|_| OnceLock::new())))
            .get(i % GROUP)
    }

    /// Cells set so far.
    pub fn filled(&self) -> usize {
        self.groups
            .iter()
            .filter_map(OnceLock::get)
            .map(|g| g.iter().filter(|c| c.get().is_some()).count())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_written_once_and_allocated_by_group() {
        let cells: LazyCells<u32, 2> = LazyCells::default();
        assert_eq!(LazyCells::<u32, 2>::CELLS, 32);
        assert!(cells.cell(32).is_none());
        assert_eq!(cells.groups.iter().filter(|g| g.get().is_some()).count(), 0);
        let c = cells.cell(17).expect("a cell");
        assert!(c.set(7).is_ok());
        assert!(c.set(8).is_err());
        assert_eq!(cells.cell(17).and_then(OnceLock::get), Some(&7));
        assert_eq!(cells.groups.iter().filter(|g| g.get().is_some()).count(), 1);
        assert_eq!(cells.filled(), 1);
    }
}
