//! Per-destination queues of envelopes: what a shard has queued for each
//! peer and whether that peer's flusher task runs (see `outbox`).

use super::envelope::Envelope;
use crate::edge_limits::KEPT_BATCH_ROOM;
use std::cell::{Cell, RefCell};

/// Per-destination queues of envelopes waiting for their flusher.
pub struct Outbox {
    queues: Vec<RefCell<Vec<Envelope>>>,
    flushing: Vec<Cell<bool>>,
}

impl Outbox {
    pub fn new(shards: usize) -> Outbox {
        Outbox {
            queues: (0..shards).map(|_| RefCell::new(Vec::new())).collect(),
            flushing: (0..shards).map(|_| Cell::new(false)).collect(),
        }
    }

    /// Queues `env` for shard `to`; true if no flusher runs for `to` yet
    /// (the caller starts one, which is then counted as running).
    pub fn queue(&self, to: usize, env: Envelope) -> bool {
        self.queues[to].borrow_mut().push(env);
        !self.flushing[to].replace(true)
    }

    /// Everything queued for `to`; when nothing is, its flusher is done.
    pub fn take(&self, to: usize) -> Vec<Envelope> {
        let batch = std::mem::take(&mut *self.queues[to].borrow_mut());
        if batch.is_empty() {
            self.flushing[to].set(false);
        }
        batch
    }

    /// Takes an emptied batch that came from shard `from` as the queue back
    /// to it when it has more room than that queue (what is queued moves
    /// into it): requests and answers then travel in the same few buffers,
    /// without an allocation and a realloc per doubling for each batch.
    /// Room above [`KEPT_BATCH_ROOM`] is let go.
    pub fn recycle(&self, from: usize, mut emptied: Vec<Envelope>) {
        assert!(emptied.is_empty(), "only an emptied batch is recycled");
        let mut queue = self.queues[from].borrow_mut();
        if emptied.capacity() > queue.capacity() && emptied.capacity() <= KEPT_BATCH_ROOM {
            emptied.append(&mut queue);
            *queue = emptied;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::envelope::{Answer, Answered};

    fn answer(id: u64) -> Envelope {
        Envelope::Answer(Answer { id, answered: Answered::Move, body: Vec::new() })
    }

    fn ids(batch: &[Envelope]) -> Vec<u64> {
        batch.iter().map(|e| if let Envelope::Answer(a) = e { a.id } else { unreachable!() }).collect()
    }

    #[test]
    fn an_emptied_batch_becomes_the_queue_back_with_what_was_queued() {
        let outbox = Outbox::new(2);
        assert!(outbox.queue(1, answer(1)), "the first envelope starts a flusher");
        assert!(!outbox.queue(1, answer(2)), "one flusher per peer");
        let emptied: Vec<Envelope> = Vec::with_capacity(64);
        outbox.recycle(1, emptied);
        assert_eq!(outbox.queues[1].borrow().capacity(), 64, "the larger room is kept");
        let batch = outbox.take(1);
        assert_eq!(ids(&batch), [1, 2], "queued envelopes moved over in order");
        assert_eq!(batch.capacity(), 64);
        // A smaller room, or one above the limit, is let go.
        outbox.queue(1, answer(3));
        outbox.recycle(1, Vec::with_capacity(KEPT_BATCH_ROOM + 1));
        assert!(outbox.queues[1].borrow().capacity() <= KEPT_BATCH_ROOM, "room above the limit is let go");
        outbox.queues[1].borrow_mut().reserve_exact(16);
        let room = outbox.queues[1].borrow().capacity();
        outbox.recycle(1, Vec::with_capacity(room - 1));
        assert_eq!(outbox.queues[1].borrow().capacity(), room);
        assert_eq!(ids(&outbox.take(1)), [3]);
        assert!(outbox.take(1).is_empty(), "nothing queued: the flusher is done");
        assert!(outbox.queue(1, answer(4)), "and the next envelope starts one again");
    }
}
