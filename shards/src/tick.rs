//! The reactor tick: one task per executor that keeps a timer armed, so the
//! executor never sleeps longer than [`REACTOR_TICK`].
//!
//! glommio 0.9's run loop can park with a task still queued. Its
//! `run_task_queues` checks for preemption (a completion waiting in the
//! latency ring) before running anything; when one is there it returns
//! "nothing ran", the loop then consumes that completion, finds no new
//! event, and parks. The queued task waits for the next event: with no I/O
//! in flight and no timer, forever. Measured here: about one run in ten of
//! `fork_simulation` (64 seeds) stalled, each time with the task queue
//! active at the park (glommio instrumented locally), and a run with a
//! 1 s timer task took 654 ms for one step instead of hanging. A timer at
//! every park bounds such a stall to one tick; an idle shard pays one
//! wake-up per tick. A serving shard starts it with its background tasks;
//! tests that drive a shard without the server run on [`block_on`].
//!
//! Every periodic task takes its period from [`period`], which a test-only
//! setting ([`set_time_scale`]) can shorten, so that a test sees in seconds
//! what a server sees in days of timer periods.

use crate::tuning::{MAX_TIME_SCALE, REACTOR_TICK};
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// How many times faster than real time periodic tasks run (1 in service).
static TIME_SCALE: AtomicU32 = AtomicU32::new(1);

/// Sets the time scale for the whole process; call before any executor starts.
pub fn set_time_scale(scale: u32) {
    assert!((1..=MAX_TIME_SCALE).contains(&scale), "time scale {scale} out of 1..={MAX_TIME_SCALE}");
    TIME_SCALE.store(scale, Ordering::Relaxed);
}

/// The period a periodic task sleeps: `base`, divided by the time scale.
pub fn period(base: Duration) -> Duration {
    base / TIME_SCALE.load(Ordering::Relaxed)
}

/// Spawns the tick on the current executor (call once per executor, first).
pub fn spawn_reactor_tick() {
    crate::tasks::spawn(async {
        loop {
            glommio::timer::sleep(period(REACTOR_TICK)).await;
        }
    })
    .detach();
}

/// Runs `make()`'s future to completion on a fresh glommio executor (its own
/// thread) with the tick and a shard's cap on io_uring workers
/// ([`crate::iowq`]), and returns its output; a panic inside panics here.
pub fn block_on<T, Fut>(make: impl FnOnce() -> Fut + Send + 'static) -> T
where
    T: Send + 'static,
    Fut: Future<Output = T> + 'static,
{
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            crate::iowq::cap_workers();
            spawn_reactor_tick();
            make().await
        })
        .expect("a glommio executor starts")
        .join()
        .expect("the executor's future ran to completion")
}
