//! A single-threaded wake-everyone notification used inside one shard.
//!
//! Waiters register a waker and are all woken by `notify`; each re-checks its
//! own condition. Generation counting means a notify between a check and the
//! wait is never missed.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub struct Signal {
    generation: Cell<u64>,
    wakers: RefCell<Vec<Waker>>,
}

impl Signal {
    /// The current generation; pass it to `changed` to wait for the next notify.
    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// Wakes every waiter.
    pub fn notify(&self) {
        self.generation.set(self.generation.get() + 1);
        for w in self.wakers.borrow_mut().drain(..) {
            w.wake();
        }
    }

    /// Resolves once the generation moves past `seen`.
    pub fn changed(&self, seen: u64) -> Changed<'_> {
        Changed { signal: self, seen }
    }
}

pub struct Changed<'a> {
    signal: &'a Signal,
    seen: u64,
}

impl Future for Changed<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.signal.generation.get() != self.seen {
            return Poll::Ready(());
        }
        let mut wakers = self.signal.wakers.borrow_mut();
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}
