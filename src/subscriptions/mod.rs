//! Subscriptions (PROTOCOL.md sections 6-7): consumers subscribe to streams
//! by pattern or explicit list and are woken by a signed webhook or a wake
//! event in a stream they pull from. Each subscription lives on one shard
//! (hash of its id, like a stream); every shard keeps a trie of all
//! subscriptions' patterns, so an append costs O(path segments) to match
//! and one mesh message per interested owner shard. Webhooks are sent from
//! delivery threads off the shard cores.
//!
//! This folder holds the state and its rules (no shard runtime); the
//! requests, messages and background tasks that change it are
//! `handlers::subs`.

pub mod backoff;
pub mod bounds;
pub mod delivery;
pub mod glob;
pub mod model;
pub mod signing;
pub mod stored;
pub mod target;

use model::Subscription;
use signing::Keys;
use sluice_shards::ids::{stream_shard, BUILTIN_BUCKET};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// The reserved prefix under `/v1/stream/`.
pub const RESERVED: &str = "__ds";

/// The shard that owns subscription `id`.
pub fn owner_shard(id: &str, shards: usize) -> usize {
    stream_shard(BUILTIN_BUCKET, &format!("{RESERVED}/subscriptions/{id}"), shards)
}

/// What a shard starts with: the signing keys and its link to the delivery threads.
pub struct Boot {
    pub keys: Arc<Keys>,
    pub link: delivery::Link,
    pub allow_local: bool,
}

/// Loads (or creates) the keys and starts the delivery threads: one `Boot` per shard.
pub fn boot(
    data_dir: &std::path::Path,
    shards: usize,
    allow_local: bool,
) -> Result<Vec<Boot>, crate::start_error::StartError> {
    let keys = Arc::new(Keys::prepare(data_dir)?);
    let links = delivery::start(shards, keys.clone(), allow_local);
    Ok(links.into_iter().map(|link| Boot { keys: keys.clone(), link, allow_local }).collect())
}

/// A shard's subscription state.
pub struct Local {
    pub keys: Arc<Keys>,
    pub link: delivery::Link,
    pub allow_local: bool,
    /// Subscriptions this shard owns.
    pub owned: RefCell<HashMap<String, Subscription>>,
    /// Owned subscriptions with an open wake (the ticker looks only at these).
    pub waking: RefCell<BTreeSet<String>>,
    /// Every subscription's patterns and explicit streams, server-wide.
    pub trie: RefCell<glob::Trie>,
    /// Deliveries handed to the delivery threads whose outcome is not read yet.
    pub in_flight: std::cell::Cell<usize>,
    /// Notified when a wake opens or a lease is extended (the ticker recomputes its deadline).
    pub wakes: sluice_shards::signal::Signal,
    /// Writes changed subscriptions to the journal.
    pub persist: Persister,
}

impl Local {
    pub fn new(boot: Boot) -> Local {
        Local {
            keys: boot.keys,
            link: boot.link,
            allow_local: boot.allow_local,
            owned: RefCell::default(),
            waking: RefCell::default(),
            in_flight: std::cell::Cell::new(0),
            trie: RefCell::default(),
            wakes: sluice_shards::signal::Signal::default(),
            persist: Persister::default(),
        }
    }
}

/// Subscription messages between shards: index changes (to every shard),
/// appends that match a subscription (to its owner), and wake events
/// written into a pull-wake stream (to the stream's owner).
#[derive(Debug)]
pub enum SubsReq {
    /// To every shard: register (or drop) `patterns` of subscription `id` owned by `owner`.
    Index { id: String, owner: usize, patterns: Vec<String>, add: bool },
    /// To a subscription's owner: stream `path` (matching them) now ends at `tail`.
    Appended { ids: Vec<String>, path: String, tail: u64 },
    /// To a subscription's owner: stream `path` (linked to them) was deleted.
    Deleted { ids: Vec<String>, path: String },
    /// To a wake stream's owner: append this JSON wake event.
    WakeEvent { stream: String, event: Vec<u8> },
}

/// The persister's queue and progress on one shard.
#[derive(Default)]
pub struct Persister {
    pub dirty: RefCell<BTreeSet<String>>,
    /// Requests made, requests durable, and the last request a failed batch covered.
    pub requested: Cell<u64>,
    pub durable: Cell<u64>,
    pub failed_through: Cell<u64>,
    pub kick: sluice_shards::signal::Signal,
    pub done: sluice_shards::signal::Signal,
}
