//! Spawning tasks on the current executor, counted: every task sluice
//! starts goes through here, so `live()` is the number of this executor's
//! tasks that have not finished. A soak run watches it stay flat.

use glommio::Task;
use glommio::TaskQueueHandle;
use std::cell::Cell;
use std::future::Future;

thread_local! {
    static LIVE: Cell<u64> = const { Cell::new(0) };
}

/// Tasks started on this thread's executor that have not finished.
pub fn live() -> u64 {
    LIVE.with(Cell::get)
}

/// Counts a task from its creation to the drop of its future (finished or
/// cancelled alike).
struct Counted;

impl Counted {
    fn new() -> Self {
        LIVE.with(|n| n.set(n.get() + 1));
        Counted
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        LIVE.with(|n| {
            assert!(n.get() > 0, "a task finished that was never counted");
            n.set(n.get() - 1)
        });
    }
}

fn counted<T>(fut: impl Future<Output = T>) -> impl Future<Output = T> {
    let guard = Counted::new();
    async move {
        let out = fut.await;
        drop(guard);
        out
    }
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
