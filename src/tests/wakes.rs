//! A waker that counts its wakes, for tests that poll futures by hand.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Wake, Waker};

/// How many times a [`counting`] waker was woken.
pub struct Wakes(AtomicUsize);

impl Wakes {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A waker and its count of wakes.
pub fn counting() -> (Waker, Arc<Wakes>) {
    let wakes = Arc::new(Wakes(AtomicUsize::new(0)));
    (Waker::from(wakes.clone()), wakes)
}
