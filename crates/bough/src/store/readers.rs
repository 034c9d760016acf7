//! The store's reader threads: where an async read goes when its first try, from cached pages
//! only on the caller's executor thread (`bough_tree::cache_only`), needed storage.
//!
//! A warm read is answered on the caller's thread with no hand-off; a cold one costs a hand-off
//! to a thread that may wait for the device or the network, so no executor thread ever does.

use std::sync::mpsc;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::oneshot;

type ReadJob = Box<dyn FnOnce() + Send>;

/// Reader threads, started on first use. Their queue closes when the store is dropped; a
/// thread finishes the read it is running and exits.
#[derive(Debug, Default)]
pub(crate) struct Readers {
    queue: OnceLock<Mutex<mpsc::Sender<ReadJob>>>,
}

impl Readers {
    /// Runs `read` on a reader thread; resolves to its result.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        threads: usize,
        read: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (tx, rx) = oneshot::channel();
        let job: ReadJob = Box::new(move || tx.send(read()));
        let queue = self.queue.get_or_init(|| Mutex::new(start(threads)));
        queue.lock().send(job).map_err(|_| Error::closed())?;
        rx.await.unwrap_or_else(|| Err(Error::closed()))
    }
}

fn start(threads: usize) -> mpsc::Sender<ReadJob> {
    let (tx, rx) = mpsc::channel::<ReadJob>();
    let rx = Arc::new(Mutex::new(rx));
    for i in 0..threads.max(1) {
        let rx = rx.clone();
        // A thread that cannot start leaves the others; with none, reads fail as closed.
        let _ = std::thread::Builder::new()
            .name(format!("bough-read-{i}"))
            .spawn(move || {
                loop {
                    // The lock is held only while waiting for the next job, not while running it.
                    let next = rx.lock().recv();
                    match next {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                }
            });
    }
    tx
}
