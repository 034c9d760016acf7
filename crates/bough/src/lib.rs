//! Bough: an embedded key-value storage engine with git-like branches
