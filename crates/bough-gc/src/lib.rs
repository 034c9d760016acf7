//! Bough: reachability-complete garbage collection of data files
