//! Matching replies to their askers over the mesh: each request gets an id
//! and a slot in the table; the reply with that id fills the slot and wakes
//! its asker. One table kind serves bucket requests (`Ctx::pending`) and
//! forwarded requests (`Ctx::waiting`). A slot is an entry of one map, not a
//! channel: a forwarded append costs no allocation here.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Where a request's reply stands.
enum Slot<T> {
    /// Not yet arrived; the asker's waker once it has waited.
    Waiting(Option<Waker>),
    Filled(T),
}

/// Requests of this shard awaiting their replies.
pub struct Replies<T> {
    next_id: Cell<u64>,
    slots: RefCell<HashMap<u64, Slot<T>>>,
}

impl<T> Default for Replies<T> {
    fn default() -> Self {
        Replies { next_id: Cell::new(0), slots: RefCell::default() }
    }
}

impl<T> Replies<T> {
    /// A new request id and the reply to it, to be awaited.
    pub fn open(&self) -> (u64, Reply<'_, T>) {
        let id = self.next_id.get() + 1;
        self.next_id.set(id);
        let fresh = self.slots.borrow_mut().insert(id, Slot::Waiting(None)).is_none();
        debug_assert!(fresh, "reply ids are never reused");
        (id, Reply { table: self, id })
    }

    /// Hands a reply to its asker; gives it back if the asker is gone.
    pub fn complete(&self, id: u64, reply: T) -> Result<(), T> {
        let mut slots = self.slots.borrow_mut();
        let Some(slot) = slots.get_mut(&id) else {
            return Err(reply);
        };
        let Slot::Waiting(waker) = std::mem::replace(slot, Slot::Filled(reply)) else {
            unreachable!("a request is answered once");
        };
        drop(slots);
        if let Some(w) = waker {
            w.wake();
        }
        Ok(())
    }

    /// Requests waiting for a reply (or holding one not yet taken).
    #[cfg(test)]
    fn open_slots(&self) -> usize {
        self.slots.borrow().len()
    }
}

/// The reply to one request; dropped before it arrives, the asker is gone
/// and the reply is given back to whoever completes it.
pub struct Reply<'a, T> {
    table: &'a Replies<T>,
    id: u64,
}

impl<T> Future for Reply<'_, T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut slots = self.table.slots.borrow_mut();
        let slot = slots.get_mut(&self.id).expect("a reply's slot lives until it is taken");
        match slot {
            Slot::Waiting(waker) => {
                if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            Slot::Filled(_) => match slots.remove(&self.id) {
                Some(Slot::Filled(reply)) => Poll::Ready(reply),
                _ => unreachable!("the slot was filled"),
            },
        }
    }
}

impl<T> Drop for Reply<'_, T> {
    fn drop(&mut self) {
        // Taken (the slot is gone) or given up: either way no slot stays.
        self.table.slots.borrow_mut().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::wakes::counting;

    #[test]
    fn a_reply_reaches_its_asker_before_or_after_it_waits() {
        let table = Replies::<&str>::default();
        let (waker, wakes) = counting();
        let mut cx = Context::from_waker(&waker);
        // Arrives before the asker waits.
        let (id, mut early) = table.open();
        assert_eq!(table.complete(id, "early"), Ok(()));
        assert_eq!(Pin::new(&mut early).poll(&mut cx), Poll::Ready("early"));
        // Arrives while it waits: woken once.
        let (id, mut late) = table.open();
        assert!(Pin::new(&mut late).poll(&mut cx).is_pending());
        assert!(Pin::new(&mut late).poll(&mut cx).is_pending());
        assert_eq!(table.complete(id, "late"), Ok(()));
        assert_eq!(wakes.get(), 1);
        assert_eq!(Pin::new(&mut late).poll(&mut cx), Poll::Ready("late"));
        drop((early, late));
        assert_eq!(table.open_slots(), 0, "taken replies leave no slot");
    }

    #[test]
    fn a_reply_to_a_gone_asker_is_given_back() {
        let table = Replies::<&str>::default();
        let (id, reply) = table.open();
        drop(reply);
        assert_eq!(table.complete(id, "lost"), Err("lost"));
        assert_eq!(table.complete(id + 1, "unknown"), Err("unknown"), "no such request");
        assert_eq!(table.open_slots(), 0);
    }
}
