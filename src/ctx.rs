//! The per-shard state every task on a shard shares ([`Ctx`]): the store,
//! the mesh senders and reply table, the per-destination outbox, the relays,
//! the access gate, the metrics and the subscriptions. Typed only by the
//! modules below it; what a shard does with it lives above.

use crate::auth::{Access, Gate};
use crate::config::Config;
use crate::mesh::batches::Outbox;
use crate::mesh::envelope::Delivered;
use crate::mesh::relays::Relays;
use crate::mesh::replies::Replies;
use crate::mesh::{BucketRep, Message};
use crate::metrics::ShardMetrics;
use glommio::channels::channel_mesh::Senders;
use glommio::{Latency, Shares};
use sluice_shards::store::Shard;
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

/// What every task on this shard shares.
pub struct Ctx {
    pub id: usize,
    pub shards: usize,
    pub cfg: Config,
    pub shard: Shard,
    pub senders: Senders<Message>,
    pub pending: Replies<BucketRep>,
    pub connections: Cell<usize>,
    pub in_flight: Cell<usize>,
    /// Task queue for SSE delivery (fewer shares than request handling).
    pub sse_queue: glommio::TaskQueueHandle,
    /// Task queue for cross-shard messages (more shares: peers wait on them).
    pub mesh_queue: glommio::TaskQueueHandle,
    /// Forwarded requests and answers queued per destination shard.
    pub outbox: Outbox,
    /// This shard's forwarded requests awaiting answers.
    pub waiting: Replies<Delivered>,
    /// Live SSE relays: pumps for own streams, feeds of remote ones.
    pub relays: Relays,
    /// Set (and notified) when shutdown begins: parked readers stop waiting.
    pub stopping: sluice_shards::signal::Signal,
    pub waiters: Cell<usize>,
    /// This shard's part of `--max-body-memory`.
    pub bodies: Rc<crate::budget::BodyBudget>,
    /// Access control: who may do what, decided before routing to an owner.
    pub gate: crate::auth::Gate,
    /// Counters and histograms for /v1/metrics.
    pub metrics: ShardMetrics,
    /// Notified once per SIGHUP (see `reload`): wait with
    /// `ctx.reload.changed(seen)` to re-read reloadable settings.
    pub reload: sluice_shards::signal::Signal,
    /// Subscriptions owned here, the server-wide pattern trie, webhook delivery.
    pub subs: crate::subscriptions::Local,
    rng: Cell<u64>,
}

/// The answer when a peer shard cannot take a request (it is stopping).
pub const PEER_GONE: sluice_shards::core::Error =
    sluice_shards::core::Error::Unavailable("peer shard unavailable; retry");

impl Ctx {
    /// A recovered shard's context, before any task runs on it.
    pub fn new(
        id: usize,
        cfg: Config,
        shard: Shard,
        senders: Senders<Message>,
        access: Arc<Access>,
        subs: crate::subscriptions::Boot,
    ) -> Rc<Ctx> {
        let shards = cfg.shards;
        let bodies = crate::budget::BodyBudget::new(cfg.body_memory_per_shard());
        Rc::new(Ctx {
            id,
            shards,
            cfg,
            shard,
            senders,
            pending: Replies::default(),
            connections: Cell::new(0),
            in_flight: Cell::new(0),
            stopping: sluice_shards::signal::Signal::default(),
            sse_queue: glommio::executor().create_task_queue(Shares::Static(250), Latency::NotImportant, "sse"),
            // Handoffs, forwarded batches and bucket messages get their own
            // queue so a busy shard still picks them up promptly.
            mesh_queue: glommio::executor().create_task_queue(Shares::Static(1000), Latency::NotImportant, "mesh"),
            outbox: Outbox::new(shards),
            waiting: Replies::default(),
            relays: Relays::default(),
            waiters: Cell::new(0),
            bodies,
            gate: Gate::new(access),
            metrics: ShardMetrics::default(),
            reload: sluice_shards::signal::Signal::default(),
            subs: crate::subscriptions::Local::new(subs),
            rng: Cell::new(seed(id)),
        })
    }

    /// Whether shutdown has begun.
    pub fn stopping(&self) -> bool {
        self.stopping.generation() > 0
    }

    /// Wall-clock milliseconds (the protocol core never reads the clock itself).
    pub fn now_ms(&self) -> u64 {
        sluice::http::date::unix_ms()
    }

    /// Cheap xorshift randomness for cursor jitter.
    pub fn random(&self) -> u64 {
        let mut x = self.rng.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.set(x);
        x
    }
}

/// A per-shard, per-start random seed (never zero, as xorshift needs).
fn seed(id: usize) -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    (nanos ^ 0x9e37_79b9_7f4a_7c15).rotate_left(id as u32 * 7) | 1
}
