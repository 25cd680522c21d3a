//! Backup holds: while the backup (the binary's `tier` module, on its own
//! thread) copies a shard's files to the object store, the shard gives
//! nothing back. A flush's clean-up (unlinking files the checkpoint dooms,
//! hole punches, journal reclamation) is then queued for a later flush,
//! exactly as when it fails, so the checkpoint the backup read and every file
//! and segment it needs stay whole until the copy is confirmed remotely.
//!
//! Protocol (Dekker-style, sequentially consistent atomics, never a lock a
//! shard could block on): a clean-up announces itself ([`begin_clean_up`])
//! and backs off when the shard is held; [`Hold::acquire`] marks the shard
//! held, then waits for clean-ups already running to end.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock};

/// One shard's hold state.
#[derive(Default)]
pub struct Hold {
    held: AtomicBool,
    cleaning: AtomicU32,
}

/// A running clean-up; ends when dropped.
pub struct Cleaning(Arc<Hold>);

impl Drop for Cleaning {
    fn drop(&mut self) {
        self.0.cleaning.fetch_sub(1, SeqCst);
    }
}

/// The held state of a shard; released when dropped.
pub struct Held(Arc<Hold>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.held.store(false, SeqCst);
    }
}

impl Hold {
    /// Holds the shard: waits (polling, off the shard threads) until no
    /// clean-up runs; none starts until the result is dropped.
    pub fn acquire(self: &Arc<Hold>) -> Held {
        self.held.store(true, SeqCst);
        while self.cleaning.load(SeqCst) > 0 {
            std::thread::sleep(crate::tuning::HOLD_POLL);
        }
        Held(self.clone())
    }
}

/// Shard `shard`'s hold (created on first use; process-wide).
pub fn of(shard: usize) -> Arc<Hold> {
    static HOLDS: OnceLock<Mutex<Vec<Arc<Hold>>>> = OnceLock::new();
    let mut all = HOLDS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    while all.len() <= shard {
        all.push(Arc::default());
    }
    all[shard].clone()
}

/// Announces a clean-up on `shard`: `None` while the backup holds it.
pub fn begin_clean_up(shard: usize) -> Option<Cleaning> {
    let hold = of(shard);
    hold.cleaning.fetch_add(1, SeqCst);
    let cleaning = Cleaning(hold);
    (!cleaning.0.held.load(SeqCst)).then_some(cleaning)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_held_shard_refuses_clean_ups_until_released() {
        let hold = of(200);
        let held = hold.acquire();
        assert!(begin_clean_up(200).is_none());
        assert!(begin_clean_up(201).is_some(), "holds are per shard");
        drop(held);
        assert!(begin_clean_up(200).is_some());
    }

    #[test]
    fn acquiring_waits_for_a_running_clean_up() {
        let cleaning = begin_clean_up(202).expect("not held");
        let hold = of(202);
        let waiter = std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let _held = hold.acquire();
            started.elapsed()
        });
        std::thread::sleep(Duration::from_millis(50));
        drop(cleaning);
        assert!(waiter.join().unwrap() >= Duration::from_millis(40));
    }
}
