//! The per-shard state every task on a shard shares ([`Ctx`]): the store,
//! the link to its peers and the reply table, the per-destination outbox, the relays,
//! the access gate, the metrics and the subscriptions. Typed only by the
//! modules below it; what a shard does with it lives above.

use crate::auth::{Access, Gate};
use crate::config::Config;
use crate::mesh::answerers::Answerers;
use crate::mesh::batches::Outbox;
use crate::mesh::envelope::Delivered;
use crate::mesh::relays::Relays;
use crate::mesh::replies::Replies;
use crate::mesh::{BucketRep, BucketReq, Link, Message};
use crate::metrics::ShardMetrics;
use glommio::{Latency, Shares};
use sluice_shards::store::Shard;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

/// What every task on this shard shares.
pub struct Ctx {
    pub id: usize,
    pub shards: usize,
    pub cfg: Config,
    pub shard: Shard,
    /// Where messages to peer shards go.
    pub link: Link,
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
    /// Requests other shards forwarded here, and the tasks answering them.
    pub answerers: Answerers,
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
    /// How this shard serves a bucket request addressed to itself.
    serve_here: ServeHere,
}

/// How a shard serves a bucket request addressed to itself (the handlers'
/// `serve_request`, handed in by the runtime that builds the [`Ctx`]:
/// serving one may ask other shards in turn).
pub type ServeHere = for<'a> fn(&'a Rc<Ctx>, BucketReq) -> Pin<Box<dyn Future<Output = BucketRep> + 'a>>;

/// The answer when a peer shard cannot take a request (it is stopping).
pub const PEER_GONE: sluice_shards::core::Error =
    sluice_shards::core::Error::Unavailable("peer shard unavailable; retry");

impl Ctx {
    /// A recovered shard's context, before any task runs on it.
    pub fn new(
        id: usize,
        cfg: Config,
        shard: Shard,
        link: Link,
        access: Arc<Access>,
        subs: crate::subscriptions::Boot,
        serve_here: ServeHere,
    ) -> Rc<Ctx> {
        let shards = cfg.shards;
        let bodies = crate::budget::BodyBudget::new(cfg.body_memory_per_shard());
        Rc::new(Ctx {
            id,
            shards,
            cfg,
            shard,
            link,
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
            answerers: Answerers::default(),
            relays: Relays::default(),
            waiters: Cell::new(0),
            bodies,
            gate: Gate::new(access),
            metrics: ShardMetrics::default(),
            reload: sluice_shards::signal::Signal::default(),
            subs: crate::subscriptions::Local::new(subs),
            rng: Cell::new(seed(id)),
            serve_here,
        })
    }

    /// Counts a request in flight: shutdown waits for it.
    pub fn request_started(&self) {
        self.in_flight.set(self.in_flight.get() + 1);
    }

    /// A request counted by [`Ctx::request_started`] was answered.
    pub fn request_done(&self) {
        let n = self.in_flight.get();
        debug_assert!(n > 0, "a request in flight is answered once");
        self.in_flight.set(n - 1);
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

    /// Sends `req` to shard `to` (or handles it here) and waits for the reply
    /// (`PEER_GONE` when that shard is shutting down).
    pub async fn ask(self: &Rc<Self>, to: usize, req: BucketReq) -> BucketRep {
        if to == self.id {
            return (self.serve_here)(self, req).await;
        }
        self.metrics.cross_shard.set(self.metrics.cross_shard.get() + 1);
        let (id, reply) = self.pending.open();
        if self.link.send_to(to, Message::Request { from: self.id, id, req }).await.is_err() {
            return BucketRep::Done(Err(PEER_GONE));
        }
        reply.await
    }

    /// Asks every shard and collects the replies in shard order.
    pub async fn ask_all(self: &Rc<Self>, make: impl Fn() -> BucketReq) -> Vec<BucketRep> {
        let mut out = Vec::with_capacity(self.shards);
        for to in 0..self.shards {
            out.push(self.ask(to, make()).await);
        }
        out
    }
}

/// A per-shard, per-start random seed (never zero, as xorshift needs).
fn seed(id: usize) -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    (nanos ^ 0x9e37_79b9_7f4a_7c15).rotate_left(id as u32 * 7) | 1
}
