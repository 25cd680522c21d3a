//! Spawning tasks on the current executor, counted: every task sluice
//! starts goes through here, so `live()` is the number of this executor's
//! tasks that have not finished. A soak run watches it stay flat.

use glommio::Task;
use glommio::TaskQueueHandle;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

thread_local! {
    static LIVE: Cell<u64> = const { Cell::new(0) };
}

/// Tasks started on this thread's executor that have not finished.
pub fn live() -> u64 {
    LIVE.with(Cell::get)
}

pin_project_lite::pin_project! {
    /// A task's future, counted from its creation to its drop (finished or
    /// cancelled alike). A struct, not an `async` block around the future:
    /// such a block keeps the future it was given and the one it awaits,
    /// which made every task twice its size (a forwarded append's 8 KiB).
    struct Counted<F> {
        #[pin]
        fut: F,
        live: Live,
    }
}

/// One count in `LIVE`, taken back when dropped (after the future: fields
/// drop in order).
struct Live;

impl Live {
    fn new() -> Self {
        LIVE.with(|n| n.set(n.get() + 1));
        Live
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        LIVE.with(|n| {
            assert!(n.get() > 0, "a task finished that was never counted");
            n.set(n.get() - 1)
        });
    }
}

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().fut.poll(cx)
    }
}

fn counted<F: Future>(fut: F) -> Counted<F> {
    Counted { fut, live: Live::new() }
}

/// `glommio::spawn_local`, counted.
pub fn spawn<T: 'static>(fut: impl Future<Output = T> + 'static) -> Task<T> {
    glommio::spawn_local(counted(fut))
}

/// `glommio::spawn_local_into`, counted; the queue must exist.
pub fn spawn_into<T: 'static>(fut: impl Future<Output = T> + 'static, queue: TaskQueueHandle) -> Task<T> {
    glommio::spawn_local_into(counted(fut), queue).expect("the task queue exists")
}

#[cfg(test)]
mod tests {
    use crate::signal::Signal;
    use std::rc::Rc;

    /// The count costs a task no size: the future is held once.
    #[test]
    fn a_counted_future_is_the_size_of_its_future() {
        let fut = async {
            let held = [1u8; 1024];
            std::future::ready(()).await;
            held.len()
        };
        let size = std::mem::size_of_val(&fut);
        assert!(size >= 1024);
        let counted = super::counted(fut);
        assert_eq!(std::mem::size_of_val(&counted), size);
    }

    #[test]
    fn live_counts_running_tasks_and_forgets_finished_ones() {
        crate::tick::block_on(|| async {
            let before = super::live();
            let go = Rc::new(Signal::default());
            let waiting = super::spawn({
                let go = go.clone();
                async move { go.changed(0).await }
            });
            assert_eq!(super::live(), before + 1);
            go.notify();
            waiting.await;
            assert_eq!(super::live(), before, "a finished task is no longer counted");
            let cancelled = super::spawn(std::future::pending::<()>());
            assert_eq!(super::live(), before + 1);
            cancelled.cancel().await;
            assert_eq!(super::live(), before, "a cancelled task is no longer counted");
        });
    }
}
