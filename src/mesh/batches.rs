//! Per-destination queues of envelopes: what a shard has queued for each
//! peer and whether that peer's flusher task runs (see `outbox`).

use super::envelope::Envelope;
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
    /// The batch leaves for the peer, so the queue starts again with room
    /// for as many envelopes as this batch had: the next one fills it
    /// without a realloc per doubling.
    pub fn take(&self, to: usize) -> Vec<Envelope> {
        let mut queue = self.queues[to].borrow_mut();
        if queue.is_empty() {
            self.flushing[to].set(false);
            return Vec::new();
        }
        let room = queue.len();
        std::mem::replace(&mut *queue, Vec::with_capacity(room))
    }
}
