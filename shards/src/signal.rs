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
    /// The waiters registered since the last notify.
    waiters: RefCell<Slots>,
}

/// Registered wakers by slot: a waiter keeps its slot's index, so it takes
/// its waker out in O(1) (a thousand SSE subscribers each dropping a wait
/// on the shard's stop signal after every event made a search quadratic).
#[derive(Default)]
struct Slots {
    wakers: Vec<Option<Waker>>,
    /// Slots given up since the last notify, to be taken again.
    free: Vec<usize>,
}

impl Slots {
    fn take(&mut self, waker: Waker) -> usize {
        match self.free.pop() {
            Some(slot) => {
                debug_assert!(self.wakers[slot].is_none(), "a free slot holds no waker");
                self.wakers[slot] = Some(waker);
                slot
            }
            None => {
                self.wakers.push(Some(waker));
                self.wakers.len() - 1
            }
        }
    }

    fn give_up(&mut self, slot: usize) {
        let waker = self.wakers[slot].take();
        assert!(waker.is_some(), "a waiter gives up a slot it holds, once");
        self.free.push(slot);
    }
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
        let mut woken = {
            let mut slots = self.waiters.borrow_mut();
            slots.free.clear();
            std::mem::take(&mut slots.wakers)
        };
        for w in woken.drain(..).flatten() {
            w.wake();
        }
        let mut slots = self.waiters.borrow_mut();
        if slots.wakers.is_empty() {
            slots.wakers = woken;
        }
    }

    /// Resolves once the generation moves past `seen`.
    pub fn changed(&self, seen: u64) -> Changed<'_> {
        Changed { signal: self, seen, slot: None }
    }

    /// Waiters registered now (pending `changed` futures that were polled).
    pub fn waiters(&self) -> usize {
        let slots = self.waiters.borrow();
        slots.wakers.len() - slots.free.len()
    }
}

pub struct Changed<'a> {
    signal: &'a Signal,
    seen: u64,
    /// Where this waiter's waker is registered, once polled; it stays
    /// registered until the generation moves past `seen` (a notify takes
    /// every slot) or the waiter is dropped.
    slot: Option<usize>,
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
        let mut slots = signal.waiters.borrow_mut();
        match this.slot {
            None => this.slot = Some(slots.take(cx.waker().clone())),
            Some(slot) => {
                let w = slots.wakers[slot].as_mut().expect("a registered waiter's slot holds its waker");
                if !w.will_wake(cx.waker()) {
                    *w = cx.waker().clone();
                }
            }
        }
        Poll::Pending
    }
}

impl Drop for Changed<'_> {
    fn drop(&mut self) {
        // After a notify the slot is no longer this waiter's.
        if let Some(slot) = self.slot.filter(|_| self.signal.generation.get() == self.seen) {
            self.signal.waiters.borrow_mut().give_up(slot);
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
        assert!(signal.waiters.borrow().wakers.capacity() >= 2, "the emptied list keeps its room");
        assert!(a.as_mut().poll(&mut cx).is_ready() && b.as_mut().poll(&mut cx).is_ready());
        // A waiter created after the notify waits for the next one.
        let mut c = Box::pin(signal.changed(signal.generation()));
        assert!(c.as_mut().poll(&mut cx).is_pending());
    }

    #[test]
    fn waiters_leave_in_any_order_and_a_late_drop_frees_no_one_elses_slot() {
        let signal = Signal::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let seen = signal.generation();
        let mut waiting: Vec<_> = (0..100).map(|_| Box::pin(signal.changed(seen))).collect();
        for w in &mut waiting {
            assert!(w.as_mut().poll(&mut cx).is_pending());
        }
        // Every third leaves, from the middle out: the rest stay registered.
        let mut i = 0;
        waiting.retain(|_| {
            i += 1;
            i % 3 != 0
        });
        assert_eq!(signal.waiters(), 67);
        // Newcomers take the slots given up.
        let mut more: Vec<_> = (0..40).map(|_| Box::pin(signal.changed(seen))).collect();
        for w in &mut more {
            assert!(w.as_mut().poll(&mut cx).is_pending());
            assert!(w.as_mut().poll(&mut cx).is_pending(), "polled again: the same slot");
        }
        assert_eq!(signal.waiters(), 107);
        assert_eq!(signal.waiters.borrow().wakers.len(), 107, "33 slots were taken again");
        signal.notify();
        assert_eq!(count.0.load(Ordering::SeqCst), 107, "every registered waiter woken once");
        // Waiters of the next generation, then the old ones dropped unpolled:
        // their slots are not theirs any more, and nobody else's is freed.
        let next = signal.generation();
        let mut late: Vec<_> = (0..5).map(|_| Box::pin(signal.changed(next))).collect();
        for w in &mut late {
            assert!(w.as_mut().poll(&mut cx).is_pending());
        }
        drop(waiting);
        drop(more);
        assert_eq!(signal.waiters(), 5);
        signal.notify();
        assert_eq!(count.0.load(Ordering::SeqCst), 112);
        for w in &mut late {
            assert!(w.as_mut().poll(&mut cx).is_ready());
        }
        drop(late);
        assert_eq!(signal.waiters(), 0);
        assert_eq!(Arc::strong_count(&count), 2, "no clone of the waker is left");
    }
}
