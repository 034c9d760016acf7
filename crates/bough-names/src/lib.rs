//! Bough: names of every file and directory the store writes, with nom parsers
