//! A single-threaded wake-everyone notification used inside one shard.
//!
//! Waiters register a waker and are all woken by `notify`; each re-checks its
//! own condition. Generation counting means a notify between a check and the
//! wait is never missed. A waiter dropped before the notify (a long-poll
//! that timed out, a reader that left) takes its waker out with it: a waker
//! keeps its task's memory alive, and a signal notified rarely (shutdown)
//! would otherwise hold one for every task that ever waited on it.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub struct Signal {
    generation: Cell<u64>,
    /// Registered waiters and their slot numbers (few per signal: a
    /// linear search costs less memory per stream than a map).
    wakers: RefCell<Vec<(u64, Waker)>>,
    next_slot: Cell<u64>,
}

impl Signal {
    /// The current generation; pass it to `changed` to wait for the next notify.
    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// Wakes every waiter. The emptied list keeps its room: the next wave
    /// (a group commit's appends, an event's subscribers) registers without
    /// growing it again (a realloc per doubling, each a trip through glibc's
    /// bins); a stream's signal itself goes when no reader holds it.
    pub fn notify(&self) {
        self.generation.set(self.generation.get() + 1);
        let mut woken = std::mem::take(&mut *self.wakers.borrow_mut());
        for (_, w) in woken.drain(..) {
            w.wake();
        }
        let mut wakers = self.wakers.borrow_mut();
        if wakers.is_empty() {
            *wakers = woken;
        }
    }

    /// Resolves once the generation moves past `seen`.
    pub fn changed(&self, seen: u64) -> Changed<'_> {
        Changed { signal: self, seen, slot: None }
    }

    /// Waiters registered now (pending `changed` futures that were polled).
    pub fn waiters(&self) -> usize {
        self.wakers.borrow().len()
    }
}

pub struct Changed<'a> {
    signal: &'a Signal,
    seen: u64,
    /// Where this waiter's waker is registered, once polled.
    slot: Option<u64>,
}

impl Future for Changed<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let signal = this.signal;
        if signal.generation.get() != this.seen {
            this.slot = None;
            return Poll::Ready(());
        }
        let mut wakers = signal.wakers.borrow_mut();
        let Some(slot) = this.slot else {
            // A first poll: not registered yet, so no search (a commit's
            // hundreds of appends would make it quadratic).
            let slot = signal.next_slot.get();
            signal.next_slot.set(slot + 1);
            this.slot = Some(slot);
            wakers.push((slot, cx.waker().clone()));
            return Poll::Pending;
        };
        match wakers.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, w)) if w.will_wake(cx.waker()) => {}
            Some((_, w)) => *w = cx.waker().clone(),
            None => wakers.push((slot, cx.waker().clone())),
        }
        Poll::Pending
    }
}

impl Drop for Changed<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            let mut wakers = self.signal.wakers.borrow_mut();
            if let Some(i) = wakers.iter().position(|(s, _)| *s == slot) {
                wakers.swap_remove(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_dropped_waiter_leaves_no_waker() {
        let signal = Signal::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        for _ in 0..1000 {
            let mut w = std::pin::pin!(signal.changed(signal.generation()));
            assert!(w.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
            assert!(w.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
            assert_eq!(signal.waiters(), 1, "a waiter polled twice holds one slot");
        }
        assert_eq!(signal.waiters(), 0, "timed-out waiters took their wakers with them");
        assert_eq!(Arc::strong_count(&count), 2, "no clone of the waker is left");
    }

    #[test]
    fn notify_wakes_every_waiter_once_and_resolves_them() {
        let signal = Signal::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let seen = signal.generation();
        let mut a = Box::pin(signal.changed(seen));
        let mut b = Box::pin(signal.changed(seen));
        let mut cx = Context::from_waker(&waker);
        assert!(a.as_mut().poll(&mut cx).is_pending() && b.as_mut().poll(&mut cx).is_pending());
        signal.notify();
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        assert_eq!(signal.waiters(), 0);
        assert!(signal.wakers.borrow().capacity() >= 2, "the emptied list keeps its room");
        assert!(a.as_mut().poll(&mut cx).is_ready() && b.as_mut().poll(&mut cx).is_ready());
        // A waiter created after the notify waits for the next one.
        let mut c = Box::pin(signal.changed(signal.generation()));
        assert!(c.as_mut().poll(&mut cx).is_pending());
    }
}
