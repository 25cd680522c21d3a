//! Which mappings of tiered bytes the reading thread may still be using
//! (see [`super::fetch`]), so a pack whose bytes moved (pack compaction, see
//! [`super::compact`]) is deleted only once no read can still reach it.
//!
//! The mapping has an epoch. A read takes a lease at the current epoch while
//! it holds the mapping's read lock, and drops it when it and its fetches
//! are done. The backup thread changes the mapping under its write lock and
//! advances the epoch there too, so every read that saw the old mapping
//! holds a lease below the new epoch; once none is held, no read can still
//! fetch from the packs the old mapping named.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub struct Leases {
    /// The current epoch, and the leases held by epoch.
    state: Mutex<(u64, BTreeMap<u64, usize>)>,
}

/// A read's hold on the mapping of its epoch; released when dropped.
pub struct Lease {
    leases: Arc<Leases>,
    epoch: u64,
}

impl Leases {
    /// A lease at the current epoch.
    pub fn take(self: &Arc<Self>) -> Lease {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let epoch = s.0;
        *s.1.entry(epoch).or_default() += 1;
        Lease { leases: self.clone(), epoch }
    }

    /// Starts a new epoch (call it with the mapping's write lock held,
    /// after changing the mapping); returns it.
    pub fn advance(&self) -> u64 {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.0 += 1;
        s.0
    }

    /// Whether a lease older than `epoch` is still held.
    pub fn held_before(&self, epoch: u64) -> bool {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.1.range(..epoch).next().is_some()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut s = self.leases.state.lock().unwrap_or_else(|p| p.into_inner());
        let n = s.1.get_mut(&self.epoch).expect("a held lease is counted");
        *n -= 1;
        if *n == 0 {
            s.1.remove(&self.epoch);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_epoch_is_clear_once_every_older_lease_is_dropped() {
        let l = Arc::new(Leases::default());
        let (a, b) = (l.take(), l.take());
        let e = l.advance();
        assert!(l.held_before(e), "reads of the old mapping are in flight");
        let c = l.take();
        assert_eq!(c.epoch, e, "a read after the change holds the new epoch");
        drop(a);
        assert!(l.held_before(e));
        drop(b);
        assert!(!l.held_before(e), "no read of the old mapping is left");
        assert!(l.held_before(e + 1), "the new epoch's read is still held");
        drop(c);
        assert!(!l.held_before(u64::MAX));
    }
}
