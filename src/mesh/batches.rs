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
    pub fn take(&self, to: usize) -> Vec<Envelope> {
        let batch = std::mem::take(&mut *self.queues[to].borrow_mut());
        if batch.is_empty() {
            self.flushing[to].set(false);
        }
        batch
    }
}
