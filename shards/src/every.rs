//! A repeated warning, logged at most once per interval: a fault that
//! repeats (a flush retried every few milliseconds, accepts failing for
//! want of descriptors) must not fill the disk with its log.

pub use crate::tuning::WARN_EVERY;
use std::cell::Cell;
use std::time::Instant;

/// When a warning was last let through and how many were held back since.
#[derive(Default)]
pub struct Every {
    last: Cell<Option<Instant>>,
    held: Cell<u64>,
}

impl Every {
    /// Whether to log now; if so, how many were held back since the last one.
    pub fn allow(&self, now: Instant) -> Option<u64> {
        match self.last.get() {
            Some(at) if now.duration_since(at) < WARN_EVERY => {
                self.held.set(self.held.get() + 1);
                None
            }
            _ => {
                self.last.set(Some(now));
                Some(self.held.replace(0))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn one_warning_per_interval_with_the_count_held_back() {
        let e = Every::default();
        let t = Instant::now();
        assert_eq!(e.allow(t), Some(0));
        for i in 1..=1000 {
            assert_eq!(e.allow(t + Duration::from_millis(i)), None);
        }
        assert_eq!(e.allow(t + WARN_EVERY), Some(1000));
        assert_eq!(e.allow(t + WARN_EVERY + Duration::from_millis(1)), None);
    }
}
