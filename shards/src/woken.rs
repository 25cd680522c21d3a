//! Polls an inner future only after its own waker fired.
//!
//! glommio 0.9's one-shot I/O futures (accept, connect, every file
//! operation) push a clone of the task's waker onto their source each time
//! they are polled, and keep them all until the operation completes. A task
//! that races such a future against something that wakes it periodically
//! (`or(accept, sleep-loop)`) or that polls several of them together
//! re-polls the pending operation on every unrelated wake, and the clones
//! pile up: a task's reference count is an `i16`, so 32,768 re-polls panic
//! the executor ("Waker invariant broken"). [`Woken`] gives the inner future
//! a waker of its own and skips the poll while that waker has not fired, so
//! an operation holds one clone per completion, however often its task
//! wakes. [`join_all`] runs several such futures at once that way.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// A future polled only when it asked to be (see the module header).
pub struct Woken<F> {
    inner: Pin<Box<F>>,
    gate: Arc<Gate>,
    waker: Waker,
}

/// Whether the inner future's waker fired since its last poll, and the
/// outer task's waker to pass that on to.
struct Gate {
    fired: AtomicBool,
    outer: Mutex<Option<Waker>>,
}

impl Wake for Gate {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::Release);
        if let Some(w) = self.outer.lock().expect("the gate's lock is never poisoned").as_ref() {
            w.wake_by_ref();
        }
    }
}

impl<F: Future> Woken<F> {
    pub fn new(inner: F) -> Self {
        // Fired from the start: the first poll always reaches the inner future.
        let gate = Arc::new(Gate { fired: AtomicBool::new(true), outer: Mutex::new(None) });
        Woken { inner: Box::pin(inner), waker: Waker::from(gate.clone()), gate }
    }
}

impl<F: Future> Future for Woken<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        {
            let mut outer = this.gate.outer.lock().expect("the gate's lock is never poisoned");
            match outer.as_ref() {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => *outer = Some(cx.waker().clone()),
            }
        }
        if !this.gate.fired.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        this.inner.as_mut().poll(&mut Context::from_waker(&this.waker))
    }
}

/// Runs `futures` concurrently on this executor; results in order. Each is
/// polled only when it woke ([`Woken`]): re-polling a pending file operation
/// whenever another one completes would pile up waker references.
pub async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Woken<F>> = futures.into_iter().map(Woken::new).collect();
    let mut out: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in futures.iter_mut().zip(out.iter_mut()).filter(|(_, o)| o.is_none()) {
            match Pin::new(f).poll(cx) {
                Poll::Ready(v) => *o = Some(v),
                Poll::Pending => pending = true,
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter().map(|o| o.expect("every future finished")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// Counts its polls; pending until `ready` is set, and wakes nobody by
    /// itself (its waker is kept for the test to fire).
    struct Probe {
        polls: Rc<Cell<u32>>,
        ready: Rc<Cell<bool>>,
        waker: Rc<std::cell::RefCell<Option<Waker>>>,
    }

    impl Future for Probe {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.set(self.polls.get() + 1);
            *self.waker.borrow_mut() = Some(cx.waker().clone());
            if self.ready.get() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }
    }

    #[test]
    fn unrelated_wakes_do_not_poll_the_inner_future() {
        let (polls, ready, waker) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(false)), Rc::default());
        let probe = Probe { polls: polls.clone(), ready: ready.clone(), waker: Rc::clone(&waker) };
        let mut woken = std::pin::pin!(Woken::new(probe));
        let outer = Waker::noop();
        let mut cx = Context::from_waker(outer);
        for _ in 0..100_000 {
            assert!(woken.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(polls.get(), 1, "only the first poll reaches a future that never woke");
        ready.set(true);
        let inner: Waker = waker.borrow().clone().expect("the probe kept its waker");
        inner.wake();
        assert!(woken.as_mut().poll(&mut cx).is_ready());
        assert_eq!(polls.get(), 2, "its own wake lets the next poll through");
    }

    #[test]
    fn an_inner_wake_reaches_the_outer_task() {
        struct Flag(AtomicBool);
        impl Wake for Flag {
            fn wake(self: Arc<Self>) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let flag = Arc::new(Flag(AtomicBool::new(false)));
        let outer = Waker::from(flag.clone());
        let (polls, ready, waker) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(false)), Rc::default());
        let mut woken = std::pin::pin!(Woken::new(Probe { polls, ready, waker: Rc::clone(&waker) }));
        assert!(woken.as_mut().poll(&mut Context::from_waker(&outer)).is_pending());
        assert!(!flag.0.load(Ordering::SeqCst));
        waker.borrow().clone().expect("the probe kept its waker").wake();
        assert!(flag.0.load(Ordering::SeqCst), "the outer task is woken with the inner future");
    }

    /// The pattern that panicked an idle shard, in glommio itself: a pending
    /// accept raced against a task that keeps waking. 40,000 wakes would
    /// overflow the task's 16-bit reference count if each re-poll of the
    /// accept kept a waker (it does without `Woken`: measured, it panics).
    #[test]
    fn a_pending_accept_survives_many_unrelated_wakes() {
        crate::tick::block_on(|| async {
            let listener = glommio::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let mut accept = std::pin::pin!(Woken::new(listener.accept()));
            let mut wakes = 0u32;
            std::future::poll_fn(|cx| {
                assert!(accept.as_mut().poll(cx).is_pending(), "nobody connects");
                wakes += 1;
                if wakes == 40_000 {
                    return Poll::Ready(());
                }
                cx.waker().wake_by_ref();
                Poll::Pending
            })
            .await;
        });
    }
}
