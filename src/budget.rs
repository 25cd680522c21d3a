//! A shard's part of `--max-body-memory`: a request body reserves its size
//! here before any of its bytes are buffered (a chunked body as it grows),
//! and gives it back when its reservation drops: received and answered,
//! refused, failed, or its connection gone, so no path leaks budget. Shards
//! share nothing: each owns `--max-body-memory / --shards` and counts it in
//! a plain cell on its own thread.

use std::cell::Cell;
use std::rc::Rc;

/// The bytes request bodies may still take on this shard.
pub struct BodyBudget {
    free: Cell<u64>,
}

impl BodyBudget {
    pub fn new(bytes: u64) -> Rc<BodyBudget> {
        Rc::new(BodyBudget { free: Cell::new(bytes) })
    }

    /// A reservation of `n` bytes, or None when fewer are free.
    pub fn reserve(self: &Rc<Self>, n: u64) -> Option<Reserved> {
        let mut r = Reserved { budget: self.clone(), bytes: 0 };
        r.cover(n).then_some(r)
    }
}

/// Bytes held for one body, given back on drop.
pub struct Reserved {
    budget: Rc<BodyBudget>,
    bytes: u64,
}

impl Reserved {
    /// Grows the reservation to at least `n` bytes; false (and unchanged)
    /// when the budget lacks the difference.
    pub fn cover(&mut self, n: u64) -> bool {
        let more = n.saturating_sub(self.bytes);
        let free = self.budget.free.get();
        if more > free {
            return false;
        }
        self.budget.free.set(free - more);
        self.bytes += more;
        true
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        self.budget.free.set(self.budget.free.get() + self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_take_and_give_back() {
        let b = BodyBudget::new(100);
        let mut one = b.reserve(60).expect("fits");
        assert!(b.reserve(41).is_none(), "over what is free");
        assert!(!one.cover(101), "a refused growth changes nothing");
        assert!(one.cover(70) && one.cover(50), "growth takes the difference; shrinking nothing");
        let two = b.reserve(30).expect("the rest");
        assert!(b.reserve(1).is_none());
        drop(one);
        assert!(b.reserve(70).is_some(), "a dropped reservation gives everything back");
        drop(two);
        assert!(b.reserve(100).is_some());
    }
}
