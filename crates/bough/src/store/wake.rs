//! [`Wake`]: what wakes the maintenance thread besides its tick — the store closing, and
//! a large checkpoint of a write buffer ([`bough_tree::head::CheckpointNotice`]), after
//! which the branch is compacted and its partition collected at once (ARCHITECTURE.md,
//! "Compaction under load").

use std::time::Instant;

use bough_names::BranchName;
use parking_lot::{Condvar, Mutex};

/// Most (partition, branch) pairs waiting for a pass after their checkpoint; past it a
/// checkpoint's garbage waits for the tick (a limit on what a burst of notices holds).
pub(super) const MAX_DUE: usize = 1024;

/// The maintenance thread's bell.
#[derive(Debug, Default)]
pub(super) struct Wake {
    state: Mutex<WakeState>,
    rung: Condvar,
}

#[derive(Debug, Default)]
struct WakeState {
    stop: bool,
    /// Branches (by partition directory) whose checkpoint left garbage since the last pass.
    due: Vec<(String, BranchName)>,
}

/// Why the maintenance thread woke.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Woken {
    /// The store is closing.
    Stop,
    /// The tick's time came.
    Tick,
    /// These branches checkpointed a full buffer.
    Checkpointed(Vec<(String, BranchName)>),
}

impl Wake {
    /// The store is closing: the thread ends at its next wait.
    pub(super) fn stop(&self) {
        self.state.lock().stop = true;
        self.rung.notify_all();
    }

    /// `branch` of partition `dir` installed a large checkpoint.
    pub(super) fn checkpointed(&self, dir: &str, branch: &BranchName) {
        let mut s = self.state.lock();
        if s.due.len() < MAX_DUE && !s.due.iter().any(|(d, b)| d == dir && b == branch) {
            s.due.push((dir.to_string(), branch.clone()));
        }
        drop(s);
        self.rung.notify_all();
    }

    /// Waits for the store to close, a checkpoint notice, or `deadline` (the next tick).
    pub(super) fn wait(&self, deadline: Instant) -> Woken {
        let mut s = self.state.lock();
        loop {
            if s.stop {
                return Woken::Stop;
            }
            if !s.due.is_empty() {
                return Woken::Checkpointed(std::mem::take(&mut s.due));
            }
            if self.rung.wait_until(&mut s, deadline).timed_out() {
                return if s.stop { Woken::Stop } else { Woken::Tick };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn notices_come_once_per_branch_and_closing_wins() {
        let w = Wake::default();
        let soon = || Instant::now() + Duration::from_millis(5);
        assert_eq!(w.wait(soon()), Woken::Tick);
        let main = BranchName::main();
        w.checkpointed("t.0", &main);
        w.checkpointed("t.0", &main);
        w.checkpointed("t.1", &main);
        assert_eq!(
            w.wait(soon()),
            Woken::Checkpointed(vec![
                ("t.0".into(), main.clone()),
                ("t.1".into(), main.clone())
            ])
        );
        assert_eq!(w.wait(soon()), Woken::Tick);
        for i in 0..MAX_DUE + 10 {
            w.checkpointed(&format!("t.{i}"), &main);
        }
        w.stop();
        assert_eq!(
            w.wait(soon()),
            Woken::Stop,
            "closing comes before the notices"
        );
    }

    #[test]
    fn a_notice_wakes_a_waiting_thread_before_its_tick() {
        let w = std::sync::Arc::new(Wake::default());
        let waiter = {
            let w = w.clone();
            std::thread::spawn(move || w.wait(Instant::now() + Duration::from_secs(600)))
        };
        std::thread::sleep(Duration::from_millis(20));
        w.checkpointed("t.0", &BranchName::main());
        let woken = waiter.join().expect("the waiter");
        assert_eq!(
            woken,
            Woken::Checkpointed(vec![("t.0".into(), BranchName::main())])
        );
    }
}
