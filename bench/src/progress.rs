//! Live progress: per-thread counters (one cache line each, so client threads
//! never share a line) and a printer thread that writes one line per second
//! to stderr.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[repr(align(128))]
#[derive(Default)]
pub struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Counters for one phase: `done[i]` and `errors[i]` belong to thread i.
pub struct Progress {
    pub done: Vec<Counter>,
    pub errors: Vec<Counter>,
    phase: Mutex<String>,
    stop: AtomicBool,
}

impl Progress {
    pub fn new(threads: usize) -> Arc<Progress> {
        Arc::new(Progress {
            done: (0..threads).map(|_| Counter::default()).collect(),
            errors: (0..threads).map(|_| Counter::default()).collect(),
            phase: Mutex::new(String::new()),
            stop: AtomicBool::new(false),
        })
    }

    pub fn set_phase(&self, phase: &str) {
        *self.phase.lock().expect("phase lock") = phase.to_string();
    }

    /// (done, errors) summed over threads.
    pub fn totals(&self) -> (u64, u64) {
        (self.done.iter().map(Counter::get).sum(), self.errors.iter().map(Counter::get).sum())
    }

    /// Prints `[  3s] phase: 12345/s (total 40000) errors 0` every second
    /// until [`Progress::finish`].
    pub fn spawn_printer(self: &Arc<Self>, unit: &'static str) -> JoinHandle<()> {
        let p = self.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            let mut last = p.totals().0;
            let mut next = start + Duration::from_secs(1);
            while !p.stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                if Instant::now() < next {
                    continue;
                }
                next += Duration::from_secs(1);
                let (done, errors) = p.totals();
                let phase = p.phase.lock().expect("phase lock").clone();
                eprintln!(
                    "[{:>4}s] {phase}: {} {unit}/s (total {done}) errors {errors}",
                    start.elapsed().as_secs(),
                    done - last,
                );
                last = done;
            }
        })
    }

    pub fn finish(&self, printer: JoinHandle<()>) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = printer.join();
    }
}
