//! The owner side's answerers: tasks that serve forwarded requests and are
//! kept between them. A forwarded request goes to a parked answerer, woken
//! for it, rather than to a task spawned for it (each such task was an
//! allocation of its whole future, 2.5 KiB, too large for glibc's
//! per-thread caches: a trip through its bins per forwarded append). An
//! answerer is started whenever none is parked, so a request never waits
//! behind busy ones (a long-poll holds its answerer for its whole wait);
//! up to [`KEPT_ANSWERERS`] stay parked and the rest end, and a shard that
//! got no forwarded request between two sweeps dismisses its parked ones
//! ([`Answerers::dismiss_if_idle`]): an idle shard keeps none.

use super::envelope::Forward;
use crate::edge_limits::KEPT_ANSWERERS;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Forwarded requests not yet taken, and the answerers parked for them.
#[derive(Default)]
pub struct Answerers {
    queue: RefCell<VecDeque<Forward>>,
    /// Parked answerers by slot, the latest parked last (woken first:
    /// its memory is the most likely still in cache).
    parked: RefCell<Vec<(u64, Waker)>>,
    next_slot: Cell<u64>,
    /// Whether a request was queued since the last dismissal check.
    busy: Cell<bool>,
    /// Dismissals so far: an answerer woken by one ends.
    dismissals: Cell<u64>,
}

impl Answerers {
    /// Queues `request`, waking a parked answerer for it; true if none was
    /// parked (the caller starts one).
    pub fn queue(&self, request: Forward) -> bool {
        self.busy.set(true);
        self.queue.borrow_mut().push_back(request);
        let parked = self.parked.borrow_mut().pop();
        match parked {
            Some((_, waker)) => {
                waker.wake();
                false
            }
            None => true,
        }
    }

    /// The next request to answer.
    pub fn next(&self) -> Option<Forward> {
        self.queue.borrow_mut().pop_front()
    }

    /// Parks an answerer until a request is queued for it: true then, false
    /// at once when enough are parked already (this one ends).
    pub fn park(&self) -> Park<'_> {
        Park { answerers: self, slot: None, dismissals: self.dismissals.get() }
    }

    /// Ends every parked answerer if no request was queued since the last
    /// call (the shard's sweep calls it), so an idle shard keeps none.
    pub fn dismiss_if_idle(&self) {
        if self.busy.replace(false) || !self.queue.borrow().is_empty() {
            return;
        }
        self.dismissals.set(self.dismissals.get() + 1);
        let parked = std::mem::take(&mut *self.parked.borrow_mut());
        for (_, waker) in parked {
            waker.wake();
        }
    }

    /// Answerers parked now.
    #[cfg(test)]
    fn parked(&self) -> usize {
        self.parked.borrow().len()
    }
}

/// An answerer waiting for work (see [`Answerers::park`]).
pub struct Park<'a> {
    answerers: &'a Answerers,
    /// Its place among the parked, once parked.
    slot: Option<u64>,
    /// Dismissals when it parked.
    dismissals: u64,
}

impl Future for Park<'_> {
    type Output = bool;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let a = self.answerers;
        let mut parked = a.parked.borrow_mut();
        let Some(slot) = self.slot else {
            if !a.queue.borrow().is_empty() {
                return Poll::Ready(true);
            }
            if parked.len() >= KEPT_ANSWERERS {
                return Poll::Ready(false);
            }
            let slot = a.next_slot.get();
            a.next_slot.set(slot + 1);
            parked.push((slot, cx.waker().clone()));
            self.slot = Some(slot);
            return Poll::Pending;
        };
        match parked.iter_mut().find(|(s, _)| *s == slot) {
            // Still parked: polled without being picked.
            Some((_, w)) => {
                if !w.will_wake(cx.waker()) {
                    *w = cx.waker().clone();
                }
                Poll::Pending
            }
            // Picked by `queue` or dismissed, either of which took it off
            // the list; dismissed with nothing queued, it ends.
            None => {
                self.slot = None;
                let dismissed = a.dismissals.get() != self.dismissals && a.queue.borrow().is_empty();
                Poll::Ready(!dismissed)
            }
        }
    }
}

impl Drop for Park<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            self.answerers.parked.borrow_mut().retain(|(s, _)| *s != slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::wakes::counting;
    use std::time::Instant;

    fn request(id: u64) -> Forward {
        Forward { from: 1, id, head: Vec::new(), body: Vec::new(), started: Instant::now() }
    }

    #[test]
    fn a_request_wakes_a_parked_answerer_or_asks_for_one() {
        let a = Answerers::default();
        let (waker, wakes) = counting();
        let mut cx = Context::from_waker(&waker);
        assert!(a.queue(request(1)), "none parked: start one");
        let mut park = Box::pin(a.park());
        assert_eq!(park.as_mut().poll(&mut cx), Poll::Ready(true), "work is queued: no parking");
        assert_eq!(a.next().map(|f| f.id), Some(1));
        let mut park = Box::pin(a.park());
        assert!(park.as_mut().poll(&mut cx).is_pending());
        assert!(park.as_mut().poll(&mut cx).is_pending(), "polled without being picked");
        assert_eq!(a.parked(), 1, "parked once");
        assert!(!a.queue(request(2)), "the parked answerer takes it");
        assert_eq!(wakes.get(), 1);
        assert_eq!(a.parked(), 0);
        assert_eq!(park.as_mut().poll(&mut cx), Poll::Ready(true));
        assert_eq!(a.next().map(|f| f.id), Some(2));
        assert!(a.next().is_none());
    }

    #[test]
    fn an_idle_shard_dismisses_its_parked_answerers() {
        let a = Answerers::default();
        let (waker, wakes) = counting();
        let mut cx = Context::from_waker(&waker);
        assert!(a.queue(request(1)));
        assert_eq!(a.next().map(|f| f.id), Some(1));
        let mut park = Box::pin(a.park());
        assert!(park.as_mut().poll(&mut cx).is_pending());
        a.dismiss_if_idle();
        assert_eq!((a.parked(), wakes.get()), (1, 0), "a request since the last check: kept");
        a.dismiss_if_idle();
        assert_eq!((a.parked(), wakes.get()), (0, 1), "none since: woken to end");
        assert_eq!(park.as_mut().poll(&mut cx), Poll::Ready(false));
        // Picked for a request just before a dismissal, it answers it.
        let mut park = Box::pin(a.park());
        assert!(park.as_mut().poll(&mut cx).is_pending());
        a.busy.set(false);
        a.dismissals.set(a.dismissals.get() + 1);
        assert!(!a.queue(request(2)));
        assert_eq!(park.as_mut().poll(&mut cx), Poll::Ready(true), "work queued: it stays");
    }

    #[test]
    fn parked_answerers_are_bounded_and_leave_no_slot_when_dropped() {
        let a = Answerers::default();
        let (waker, _) = counting();
        let mut cx = Context::from_waker(&waker);
        let mut kept: Vec<_> = (0..KEPT_ANSWERERS).map(|_| Box::pin(a.park())).collect();
        for p in &mut kept {
            assert!(p.as_mut().poll(&mut cx).is_pending());
        }
        let mut extra = Box::pin(a.park());
        assert_eq!(extra.as_mut().poll(&mut cx), Poll::Ready(false), "one more than kept ends");
        drop(kept);
        assert_eq!(a.parked(), 0, "a dropped answerer's slot goes with it");
        assert!(a.queue(request(3)), "and a request then starts a new one");
    }
}
