//! Operations over every partition of a table at once (branch create, delete, archive).

use super::*;

impl Store {
    /// Creates `name` from `from` on every partition of `table`, all or nothing: if any
    /// partition fails, the branches created so far are deleted again and every
    /// per-partition error is reported.
    pub fn create_branch_global(&self, table: &str, name: &str, from: &str) -> Result<()> {
        BranchName::new(name)?;
        BranchName::new(from)?;
        let parts = self.partitions_of(table)?;
        let mut done = Vec::new();
        let mut errors = Vec::new();
        // The kind shared by every failure (`Io` when they differ).
        let mut kind = None;
        for p in &parts {
            match self.partition(table, *p)?.create_branch(name, from) {
                Ok(_) => done.push(*p),
                Err(e) => {
                    kind = match kind {
                        None => Some(e.kind()),
                        Some(k) if k == e.kind() => Some(k),
                        Some(_) => Some(ErrorKind::Io),
                    };
                    errors.push(e.to_string());
                }
            }
        }
        if errors.is_empty() {
            return Ok(());
        }
        for p in done {
            if let Err(e) = self.partition(table, p)?.delete_branch(name) {
                errors.push(format!("rollback: {e}"));
            }
        }
        Err(Error::new(
            kind.unwrap_or(ErrorKind::Io),
            format!(
                "creating branch {name} on table {table} failed: {}",
                errors.join("; ")
            ),
        ))
    }

    /// Deletes `name` on every partition of `table` that has it.
    pub fn delete_branch_global(&self, table: &str, name: &str) -> Result<()> {
        for p in self.partitions_of(table)? {
            match self.partition(table, p)?.delete_branch(name) {
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                other => other?,
            }
        }
        Ok(())
    }

    /// Archives `branch` on every partition of `table` with one shared timestamp.
    pub fn archive_global(&self, table: &str, branch: &str) -> Result<u64> {
        let ts = self.inner.clock.now_ms();
        for p in self.partitions_of(table)? {
            self.partition(table, p)?.branch(branch)?.archive_at(ts)?;
        }
        Ok(ts)
    }
}
