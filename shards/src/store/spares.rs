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
//! Bounded: only a large flush (one that `--flush-bytes` of journal set
//! off) keeps buffers and gives them out, only those of at least
//! [`MIN_SPARE_TAIL`], in all at most [`FLUSH_BACKLOG`] x `--flush-bytes`
//! of capacity (the bound on the unflushed bytes themselves; a tail that
//! grew by doubling past one flush's bytes has up to twice their room), and
//! only until the next capture. Any other
//! flush, such as the last after a burst, and a shard with nothing to
//! flush for an interval, give everything back, so a shard that went quiet
//! holds no memory here or in its streams' tails.

#[cfg(doc)]
use crate::tuning::FLUSH_BACKLOG;
use crate::tuning::MIN_SPARE_TAIL;

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

    /// Hands every kept buffer to a capture's pass (`super::pass`).
    pub fn lend(&mut self) -> Spares {
        let kept = std::mem::take(&mut self.kept);
        Spares { kept, bytes: std::mem::replace(&mut self.bytes, 0), limit: self.limit }
    }

    /// Takes back what a pass did not give out; the next refill drops it.
    pub fn put_back(&mut self, lent: Spares) {
        self.kept.extend(lent.kept);
        self.bytes += lent.bytes;
        assert!(self.bytes <= self.limit, "spare tail buffers within their limit");
    }

    /// Whether a finished buffer is large enough to keep.
    pub fn worth_keeping(b: &Vec<u8>) -> bool {
        b.capacity() >= MIN_SPARE_TAIL
    }

    /// After a flush, with `finished` the buffers it wrote: what the last
    /// capture did not take is dropped; with `keep` (a large flush) the
    /// finished buffers large enough are kept within the limit, and
    /// otherwise they are dropped too and the memory returned to the
    /// system (allocated among other data, the allocator would keep their
    /// pages: measured, RSS 46 MiB instead of 25 after 10M small messages
    /// in 10 streams). Returns whether it gave memory back.
    pub fn refill(&mut self, finished: impl Iterator<Item = Vec<u8>>, keep: bool) -> bool {
        let mut dropped = !self.kept.is_empty();
        self.kept.clear();
        self.bytes = 0;
        for mut b in finished {
            let large = Spares::worth_keeping(&b);
            if keep && large && self.bytes + b.capacity() <= self.limit {
                b.clear();
                self.bytes += b.capacity();
                self.kept.push(b);
            } else {
                dropped |= large;
            }
        }
        assert!(self.bytes <= self.limit, "spare tail buffers within their limit");
        let give_back = dropped && !keep;
        if give_back {
            crate::heap::give_back();
        }
        give_back
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
        let gave_back = s.refill([big(1), vec![1u8; 100], big(2), big(1)].into_iter(), true);
        assert!(!gave_back, "a large flush keeps its memory");
        // The small one is dropped, and the last one would pass the limit.
        assert_eq!(s.bytes(), 3 * MIN_SPARE_TAIL);
        let b = s.take().expect("a kept buffer");
        assert!(b.is_empty() && b.capacity() >= 2 * MIN_SPARE_TAIL);
        assert_eq!(s.bytes(), MIN_SPARE_TAIL);
        // What the capture did not take goes at the next refill, and
        // nothing is kept from a flush that is not large.
        assert!(s.refill([big(1)].into_iter(), false), "dropped buffers' memory goes back");
        assert_eq!((s.bytes(), s.take()), (0, None));
        assert!(!s.refill(std::iter::empty(), false), "nothing dropped, nothing to give back");
    }
}
