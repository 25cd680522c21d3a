//! Tail buffers kept from one flush to the next.
//!
//! A stream's unflushed tail is a `Vec` its appends extend; the flush
//! freezes it, writes it to the stream files and drops it. For a stream
//! taking large appends that means every byte lands in memory the kernel
//! just handed over: a page fault, a page zeroed, then the copy (measured:
//! 29 minor faults per 64 KiB append, about a fifth of the server's CPU in
//! a large-append fill). The flush instead hands the buffers it finished
//! with to the next capture, which gives them to the streams whose tails
//! were large: their pages stay mapped and are only ever written by the
//! copy.
//!
//! Bounded: only buffers of at least [`MIN_SPARE_TAIL`] are kept, in all
//! at most twice the shard's `--flush-bytes` of capacity (a tail that
//! grew by doubling to hold one flush's bytes may have twice their room),
//! and only until the next capture: what it does not take is given back.
//! Only a flush that `--flush-bytes` set off keeps any (one the interval set
//! off, such as the last after a burst, gives them back), and a shard with
//! nothing to flush for an interval gives back all, so a shard that went
//! quiet holds no memory here.

use crate::core::limits::MIN_SPARE_TAIL;

/// Buffers a flush finished with, for the next capture.
#[derive(Debug)]
pub struct Spares {
    kept: Vec<Vec<u8>>,
    /// Capacity of `kept` in bytes.
    bytes: usize,
    /// Most capacity kept at once.
    limit: usize,
}

impl Spares {
    pub fn new(limit: usize) -> Spares {
        Spares { kept: Vec::new(), bytes: 0, limit }
    }

    /// A kept buffer (empty, its capacity at least [`MIN_SPARE_TAIL`]), if any.
    pub fn take(&mut self) -> Option<Vec<u8>> {
        let b = self.kept.pop()?;
        self.bytes -= b.capacity();
        debug_assert!(b.is_empty() && b.capacity() >= MIN_SPARE_TAIL);
        Some(b)
    }

    /// Replaces what is kept with `finished` (buffers a flush wrote): the
    /// ones the last capture did not take are given back, and of the new
    /// ones those large enough, within the limit, are kept.
    pub fn refill(&mut self, finished: impl Iterator<Item = Vec<u8>>) {
        self.kept.clear();
        self.bytes = 0;
        for mut b in finished {
            if b.capacity() >= MIN_SPARE_TAIL && self.bytes + b.capacity() <= self.limit {
                b.clear();
                self.bytes += b.capacity();
                self.kept.push(b);
            }
        }
        assert!(self.bytes <= self.limit, "spare tail buffers within their limit");
    }

    /// Capacity kept, in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_large_buffers_within_the_limit_for_one_flush() {
        let mut s = Spares::new(3 * MIN_SPARE_TAIL);
        let big = |n: usize| vec![7u8; n * MIN_SPARE_TAIL];
        s.refill([big(1), vec![1u8; 100], big(2), big(1)].into_iter());
        // The small one is dropped, and the last one would pass the limit.
        assert_eq!(s.bytes(), 3 * MIN_SPARE_TAIL);
        let b = s.take().expect("a kept buffer");
        assert!(b.is_empty() && b.capacity() >= 2 * MIN_SPARE_TAIL);
        assert_eq!(s.bytes(), MIN_SPARE_TAIL);
        // What the capture did not take goes at the next refill.
        s.refill(std::iter::empty());
        assert_eq!((s.bytes(), s.take()), (0, None));
    }
}
