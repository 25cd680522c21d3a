//! Executor watchdog: a guard against an executor that sleeps in
//! `io_uring_enter` past its own timers (a lost wake-up seen under CPU
//! pressure on these VMs; cf. glommio#326). Each shard bumps a heartbeat from
//! a timer; a plain thread checks the heartbeats and, when one stops moving,
//! interrupts that executor thread with a no-op signal so the syscall returns
//! (EINTR) and the reactor looks at its completions again.

use crate::edge_limits::WATCHDOG_CHECK;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The signal used to kick a stuck executor (its handler does nothing).
const KICK: libc::c_int = libc::SIGUSR1;

/// Per-shard heartbeat and thread id, shared with the watchdog thread.
#[derive(Default)]
pub struct Pulse {
    beats: AtomicU64,
    thread: AtomicU64,
}

impl Pulse {
    /// Called once on the executor thread.
    pub fn register_current_thread(&self) {
        self.thread.store(unsafe { libc::pthread_self() } as u64, Ordering::SeqCst);
    }

    pub fn beat(&self) {
        self.beats.fetch_add(1, Ordering::Relaxed);
    }
}

extern "C" fn ignore(_: libc::c_int) {}

/// Installs the no-op handler (without SA_RESTART, so blocking calls return
/// EINTR) and starts the watchdog thread over `pulses`; `alive` runs after
/// every check in which every shard beat (systemd's watchdog hears of it).
pub fn start(pulses: Vec<Arc<Pulse>>, alive: impl Fn() + Send + 'static) {
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = ignore as *const () as usize;
        sa.sa_flags = 0;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(KICK, &sa, std::ptr::null_mut());
    }
    std::thread::Builder::new()
        .name("watchdog".into())
        .spawn(move || {
            let mut seen: Vec<u64> = vec![0; pulses.len()];
            loop {
                std::thread::sleep(sluice_shards::tick::period(WATCHDOG_CHECK));
                let mut all_beat = true;
                for (p, last) in pulses.iter().zip(seen.iter_mut()) {
                    let now = p.beats.load(Ordering::Relaxed);
                    let thread = p.thread.load(Ordering::SeqCst);
                    if now == *last {
                        all_beat = false;
                        if thread != 0 {
                            unsafe { libc::pthread_kill(thread as libc::pthread_t, KICK) };
                        }
                    }
                    *last = now;
                }
                if all_beat {
                    alive();
                }
            }
        })
        .expect("spawn the watchdog thread");
}
