//! A one-value channel whose receiver is both a `Future` (any executor) and blockable
//! (plain threads), so the API needs no particular async runtime.
//!
//! Why not `tokio::sync::oneshot`: its `blocking_recv` panics when called on a thread that
//! runs an async runtime, and the `_blocking` twins of the API are called from such threads
//! (a `#[tokio::main]` program's setup code, a current-thread runtime's tests); a storage
//! call must return, not panic, there. This one waits on a condition variable wherever it
//! is called, in about sixty lines.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::{Condvar, Mutex};

#[derive(Debug)]
struct State<T> {
    value: Option<T>,
    waker: Option<Waker>,
    sender_gone: bool,
}

#[derive(Debug)]
struct Inner<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

/// Sending half.
///
/// ```
/// let (tx, rx) = bough::oneshot::channel();
/// std::thread::spawn(move || tx.send(42));
/// assert_eq!(rx.wait(), Some(42));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Sender<T>(Arc<Inner<T>>);

/// Receiving half.
///
/// ```
/// // Awaited on any executor, or waited for on a plain thread.
/// let (tx, rx) = bough::oneshot::channel();
/// tx.send("done");
/// assert_eq!(bough::oneshot::block_on(rx), Some("done"));
/// let (tx, rx) = bough::oneshot::channel::<u8>();
/// drop(tx);
/// assert_eq!(rx.wait(), None, "the sender went away");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Receiver<T>(Arc<Inner<T>>);

/// A new channel.
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let inner = Arc::new(Inner {
        state: Mutex::new(State {
            value: None,
            waker: None,
            sender_gone: false,
        }),
        ready: Condvar::new(),
    });
    (Sender(inner.clone()), Receiver(inner))
}

impl<T> Sender<T> {
    /// Delivers the value.
    pub fn send(self, value: T) {
        let mut s = self.0.state.lock();
        s.value = Some(value);
        if let Some(w) = s.waker.take() {
            w.wake();
        }
        self.0.ready.notify_all();
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut s = self.0.state.lock();
        s.sender_gone = true;
        if let Some(w) = s.waker.take() {
            w.wake();
        }
        self.0.ready.notify_all();
    }
}

impl<T> Receiver<T> {
    /// Blocks until the value arrives; `None` if the sender went away without sending.
    pub fn wait(self) -> Option<T> {
        let mut s = self.0.state.lock();
        loop {
            if let Some(v) = s.value.take() {
                return Some(v);
            }
            if s.sender_gone {
                return None;
            }
            self.0.ready.wait(&mut s);
        }
    }
}

impl<T> Future for Receiver<T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.0.state.lock();
        if let Some(v) = s.value.take() {
            return Poll::Ready(Some(v));
        }
        if s.sender_gone {
            return Poll::Ready(None);
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Runs a future to completion on the current thread (the blocking API and examples).
pub fn block_on<F: Future>(fut: F) -> F::Output {
    struct ThreadWaker(std::thread::Thread);
    impl std::task::Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}
