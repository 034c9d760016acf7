//! Bough: branches, terms and archives of each partition
