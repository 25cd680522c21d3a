//! What the store counts without scanning its streams: how many streams each
//! bucket holds, and which streams are due to expire, by deadline. A bucket's
//! metadata (`GET /{bucket}`) and the sweep of expired streams then cost the
//! streams that are due, not every stream of the shard.
//!
//! The deadline queue is lazy: a stream is queued under the deadline it had
//! when queued, and a touch (which only moves a sliding TTL's deadline later)
//! leaves it there; whoever finds it due looks at its lifetime as it stands
//! and requeues it if it has not expired. So every held stream with a
//! lifetime is queued at or before its true deadline.

use std::collections::{BTreeSet, HashMap};

/// `queued_ms` of a stream that is not queued (it never expires).
pub const NOT_QUEUED: u64 = u64::MAX;

#[derive(Default)]
pub struct Census {
    per_bucket: HashMap<String, u64>,
    /// `(deadline_ms, handle)` of every held stream that can expire.
    due: BTreeSet<(u64, u64)>,
}

impl Census {
    /// A stream of `bucket` is held; returns the deadline it is queued
    /// under ([`NOT_QUEUED`] when it never expires).
    pub fn added(&mut self, bucket: &str, handle: u64, deadline_ms: Option<u64>) -> u64 {
        match self.per_bucket.get_mut(bucket) {
            Some(n) => *n += 1,
            None => {
                self.per_bucket.insert(bucket.to_string(), 1);
            }
        }
        self.queue(handle, deadline_ms)
    }

    /// A stream added as `(bucket, handle)` and queued under `queued_ms` is gone.
    pub fn removed(&mut self, bucket: &str, handle: u64, queued_ms: u64) {
        let n = self.per_bucket.get_mut(bucket).expect("a removed stream was counted in its bucket");
        assert!(*n > 0, "a bucket's stream count went below zero");
        *n -= 1;
        if *n == 0 {
            self.per_bucket.remove(bucket);
        }
        if queued_ms != NOT_QUEUED {
            let was = self.due.remove(&(queued_ms, handle));
            debug_assert!(was, "a queued stream is in the deadline queue");
        }
    }

    /// Moves a due stream that was touched meanwhile to its new deadline;
    /// returns the deadline it is queued under now.
    pub fn requeue(&mut self, handle: u64, queued_ms: u64, deadline_ms: Option<u64>) -> u64 {
        let was = self.due.remove(&(queued_ms, handle));
        debug_assert!(was, "a requeued stream was queued");
        self.queue(handle, deadline_ms)
    }

    fn queue(&mut self, handle: u64, deadline_ms: Option<u64>) -> u64 {
        match deadline_ms {
            Some(at) if at != NOT_QUEUED => {
                self.due.insert((at, handle));
                at
            }
            _ => NOT_QUEUED,
        }
    }

    /// Streams held in `bucket`, expired ones included.
    pub fn streams(&self, bucket: &str) -> u64 {
        self.per_bucket.get(bucket).copied().unwrap_or(0)
    }

    /// `(queued deadline, handle)` of the streams queued at or before `now_ms`:
    /// every stream expired at `now_ms` is among them.
    pub fn due(&self, now_ms: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.due.range(..=(now_ms, u64::MAX)).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_follow_adds_and_removes_and_a_bucket_at_zero_is_forgotten() {
        let mut c = Census::default();
        let q1 = c.added("a", 1, None);
        let q2 = c.added("a", 2, Some(50));
        c.added("b", 3, None);
        assert_eq!((q1, q2), (NOT_QUEUED, 50));
        assert_eq!((c.streams("a"), c.streams("b"), c.streams("c")), (2, 1, 0));
        c.removed("a", 1, q1);
        c.removed("a", 2, q2);
        assert_eq!(c.streams("a"), 0);
        assert!(!c.per_bucket.contains_key("a"), "an empty bucket costs nothing");
        assert_eq!(c.due(u64::MAX - 1).count(), 0, "a removed stream leaves the queue");
    }

    #[test]
    fn due_is_every_stream_queued_at_or_before_now_in_deadline_order() {
        let mut c = Census::default();
        c.added("a", 7, Some(30));
        c.added("a", 8, Some(10));
        c.added("a", 9, Some(31));
        c.added("a", 10, Some(u64::MAX));
        assert_eq!(c.due(30).collect::<Vec<_>>(), vec![(10, 8), (30, 7)]);
        let moved = c.requeue(8, 10, Some(40));
        assert_eq!(moved, 40);
        assert_eq!(c.due(30).collect::<Vec<_>>(), vec![(30, 7)]);
        assert_eq!(c.due(u64::MAX - 1).count(), 3, "a deadline of u64::MAX is never queued");
    }

    #[test]
    #[should_panic(expected = "counted in its bucket")]
    fn removing_a_stream_never_added_is_a_bug() {
        Census::default().removed("a", 1, NOT_QUEUED);
    }
}
