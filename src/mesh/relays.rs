//! The relays' state on one shard (see `relay` for what runs on it): the
//! owner's pumps, the subscriber shards' feeds of remote streams, and a
//! relayed subscription as its connection holds it.

use sluice_shards::signal::Signal;
use sluice_shards::store::StreamKey;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::rc::Rc;

/// One encoded SSE event covering `[from, end)` of a stream.
pub struct Event {
    pub from: u64,
    pub end: u64,
    pub closed: bool,
    pub bytes: Vec<u8>,
}

/// Relay state of one shard: pumps for its own streams, and the recent events
/// of remote streams its subscribers follow.
#[derive(Default)]
pub struct Relays {
    pub pumps: RefCell<HashMap<Box<StreamKey>, Rc<Pump>>>,
    pub feeds: RefCell<HashMap<Box<StreamKey>, Rc<Feed>>>,
    /// The id the next pump gets.
    pub next_pump: Cell<u64>,
}

/// Owner side: where the next event starts and who receives it.
pub struct Pump {
    /// This pump among the pumps the owner ran (a pump that ended and the
    /// one started after it for the same stream are two).
    pub id: u64,
    /// The stream incarnation pumped (a deleted and re-created stream is another).
    pub handle: u64,
    pub pos: Cell<u64>,
    /// Subscribers per shard.
    pub subscribers: RefCell<Vec<usize>>,
    /// Offsets where a subscriber joined after `pos`: events are cut there,
    /// so every subscriber finds an event starting at its offset.
    pub cuts: RefCell<BTreeSet<u64>>,
}

/// Subscriber side: a remote stream's recent events.
pub struct Feed {
    /// The stream incarnation followed.
    pub handle: u64,
    /// The owner's pump that feeds it.
    pub pump: u64,
    pub events: RefCell<VecDeque<Rc<Event>>>,
    /// Encoded bytes held in `events`.
    pub held: Cell<usize>,
    pub signal: Rc<Signal>,
    pub subscribers: Cell<usize>,
    /// The stream was deleted (or its owner stopped): subscribers end.
    pub gone: Cell<bool>,
}

/// A relayed SSE read handed to its connection: the feed it counts on, the
/// bytes to send first and the offset its events start at.
pub struct Subscription {
    pub owner: usize,
    pub key: Box<StreamKey>,
    pub feed: Rc<Feed>,
    pub start: Vec<u8>,
    pub from: u64,
}
