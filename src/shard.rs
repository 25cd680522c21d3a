//! One shard's runtime on its pinned executor: recovery, the cross-shard mesh
//! (forwarded requests, handoffs, bucket messages),
//! bucket replication at start, and the accept loop on its SO_REUSEPORT socket.

use crate::auth::Access;
use crate::config::Config;
use crate::conn;
use crate::mesh::{BucketRep, BucketReq, Message, Pending};
use glommio::channels::channel_mesh::{Full, MeshBuilder, Senders};
use glommio::net::{TcpListener, TcpStream};
use glommio::{Latency, Shares};
use sluice_shards::every::Every;
use sluice_shards::log::LogConfig;
use sluice_shards::storage::Storage;
use sluice_shards::store::{FlushConfig, Shard, ShardConfig};
use sluice_shards::tasks::{spawn, spawn_into};
use sluice_shards::tick::period;
use sluice_shards::woken::Woken;
use std::cell::Cell;
use std::os::fd::{FromRawFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// What every task on this shard shares.
pub struct Ctx {
    pub id: usize,
    pub shards: usize,
    pub cfg: Config,
    pub shard: Shard,
    pub senders: Senders<Message>,
    pub pending: Rc<Pending>,
    pub connections: Cell<usize>,
    pub in_flight: Cell<usize>,
    /// Task queue for SSE delivery (fewer shares than request handling).
    pub sse_queue: glommio::TaskQueueHandle,
    /// Task queue for cross-shard messages (more shares: peers wait on them).
    pub mesh_queue: glommio::TaskQueueHandle,
    /// Forwarded requests and answers queued per destination shard.
    pub outbox: crate::forward::Outbox,
    /// This shard's forwarded requests awaiting answers.
    pub waiting: crate::forward::Waiting,
    /// Live SSE relays: pumps for own streams, feeds of remote ones.
    pub relays: crate::relay::Relays,
    /// Set (and notified) when shutdown begins: parked readers stop waiting.
    pub stopping: sluice_shards::signal::Signal,
    pub waiters: Cell<usize>,
    /// This shard's part of `--max-body-memory`.
    pub bodies: Rc<crate::budget::BodyBudget>,
    /// Access control: who may do what, decided before routing to an owner.
    pub gate: crate::auth::Gate,
    /// Counters and histograms for /v1/metrics.
    pub metrics: crate::metrics::ShardMetrics,
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
            pending: Rc::new(Pending::default()),
            connections: Cell::new(0),
            in_flight: Cell::new(0),
            stopping: sluice_shards::signal::Signal::default(),
            sse_queue: glommio::executor().create_task_queue(Shares::Static(250), Latency::NotImportant, "sse"),
            // Handoffs, forwarded batches and bucket messages get their own
            // queue so a busy shard still picks them up promptly.
            mesh_queue: glommio::executor().create_task_queue(Shares::Static(1000), Latency::NotImportant, "mesh"),
            outbox: crate::forward::Outbox::new(shards),
            waiting: crate::forward::Waiting::default(),
            relays: crate::relay::Relays::default(),
            waiters: Cell::new(0),
            bodies,
            gate: crate::auth::Gate::new(access),
            metrics: crate::metrics::ShardMetrics::default(),
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

    /// Sends `req` to shard `to` (or handles it here) and waits for the reply
    /// (`PEER_GONE` when that shard is shutting down).
    pub async fn ask(self: &Rc<Self>, to: usize, req: BucketReq) -> BucketRep {
        if to == self.id {
            return crate::handlers::bucket::serve_request(self, req).await;
        }
        self.metrics.cross_shard.set(self.metrics.cross_shard.get() + 1);
        let id = self.pending.open();
        if self.senders.send_to(to, Message::Request { from: self.id, id, req }).await.is_err() {
            return BucketRep::Done(Err(PEER_GONE));
        }
        self.pending.wait(id).await
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

/// What a shard's recovery did, for the start event.
pub struct Recovered {
    /// Log replay time.
    pub replay: Duration,
    /// Torn-tail bytes zeroed.
    pub torn_bytes: u64,
}

/// Start-up coordination with the main thread.
pub struct Startup {
    /// Heartbeat for the executor watchdog.
    pub pulse: Arc<crate::watchdog::Pulse>,
    /// Recovery's outcome, or why the shard cannot start.
    pub ready: mpsc::Sender<Result<Recovered, String>>,
    pub synced: Arc<AtomicUsize>,
    /// Shards whose in-flight requests have all been answered after SIGTERM.
    pub drained: Arc<AtomicUsize>,
    pub shutdown: Arc<AtomicBool>,
    /// Access control shared by every shard (tokens reloaded on SIGHUP).
    pub access: Arc<crate::auth::Access>,
    /// SIGHUPs received, turned into `Ctx::reload` notifications.
    pub reloads: Arc<crate::reload::Reloads>,
    /// Webhook keys and this shard's link to the delivery threads.
    pub subs: crate::subscriptions::Boot,
}

pub async fn run(id: usize, cfg: Config, fd: RawFd, mesh: MeshBuilder<Message, Full>, start: Startup) {
    start.pulse.register_current_thread();
    let pulse = start.pulse.clone();
    spawn(async move {
        loop {
            pulse.beat();
            glommio::timer::sleep(period(crate::watchdog::BEAT)).await;
        }
    })
    .detach();
    let listener = unsafe { TcpListener::from_raw_fd(fd) };
    let (senders, receivers) = match mesh.join().await {
        Ok(pair) => pair,
        Err(e) => {
            let _ = start.ready.send(Err(format!("shard {id}: cannot join the cross-shard mesh: {e}")));
            return;
        }
    };
    let recovering = std::time::Instant::now();
    let shard = match Shard::open(id, shard_config(id, &cfg)).await {
        Ok(s) => s,
        Err(e) => {
            let _ = start.ready.send(Err(format!("shard {id}: {e}")));
            return;
        }
    };
    let ctx = Ctx::new(id, cfg, shard, senders, start.access.clone(), start.subs);
    let shards = ctx.shards;
    ctx.metrics.recovery.set(recovering.elapsed());
    let torn = ctx.shard.log.stats.torn_bytes.get();
    if torn > 0 {
        tracing::warn!(shard = id, torn_bytes = torn, "recovery zeroed a torn tail (a write never acknowledged)");
    }
    spawn(crate::reload::watch(ctx.clone(), start.reloads.clone())).detach();
    let tq = ctx.mesh_queue;
    let mut receivers = receivers;
    for (_, rx) in receivers.streams() {
        let ctx = ctx.clone();
        spawn_into(
            async move {
                while let Some(msg) = rx.recv().await {
                    on_message(&ctx, msg);
                }
            },
            tq,
        )
        .detach();
    }
    // Tell every shard about the buckets whose home is here.
    let home: Vec<(String, u64)> =
        ctx.shard.store.borrow().home_buckets.iter().map(|(b, at)| (b.clone(), *at)).collect();
    for (bucket, created_ms) in home {
        ctx.ask_all(|| BucketReq::Added { bucket: bucket.clone(), created_ms }).await;
    }
    // Count every recovered fork against its source, wherever that lives.
    let parents: Vec<(usize, u64)> = ctx
        .shard
        .store
        .borrow()
        .streams
        .values()
        .filter_map(|e| e.state.fork.as_ref().map(|f| (f.parent_shard as usize, f.parent_handle)))
        .collect();
    for (shard, handle) in parents {
        ctx.ask(shard, BucketReq::ForkRef { handle }).await;
    }
    // Subscriptions owned here: patterns registered on every shard before any client.
    crate::subscriptions::persist::recover(&ctx).await;
    start.synced.fetch_add(1, Ordering::SeqCst);
    while start.synced.load(Ordering::SeqCst) < shards {
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
    ctx.shard.purge_tombstones().await;
    background(&ctx);
    let _ = start.ready.send(Ok(Recovered { replay: ctx.metrics.recovery.get(), torn_bytes: torn }));
    if crate::fatal::injected_panic(id) {
        spawn(async move {
            glommio::timer::sleep(Duration::from_millis(200)).await;
            panic!("injected fault: shard {id} panics while serving");
        })
        .detach();
    }
    accept_loop(&ctx, listener, &start.shutdown).await;
    ctx.stopping.notify();
    drain(&ctx, &start.drained).await;
}

/// Shard `id`'s store settings, from the command line.
fn shard_config(id: usize, cfg: &Config) -> ShardConfig {
    ShardConfig {
        open_files: cfg.open_files,
        log: LogConfig {
            dir: cfg.data_dir.join(format!("shard-{id}")),
            segment_size: cfg.segment_bytes,
            fsync: cfg.fsync,
        },
        max_producers: cfg.max_producers,
        flush: FlushConfig { bytes: cfg.flush_bytes, every: cfg.flush_interval },
        shards: cfg.shards,
        storage: Storage::Real,
    }
}

/// Starts a serving shard's background tasks: the reactor tick, fork
/// releases, the expiry sweep and the flusher.
fn background(ctx: &Rc<Ctx>) {
    sluice_shards::tick::spawn_reactor_tick();
    spawn(release_pump(ctx.clone())).detach();
    spawn(sweeper(ctx.clone())).detach();
    spawn(crate::subscriptions::wake::ticker(ctx.clone())).detach();
    spawn(crate::subscriptions::persist::run(ctx.clone())).detach();
    let flusher = ctx.clone();
    spawn(async move { flusher.shard.flush_loop().await }).detach();
    if ctx.cfg.tier.tier_url.is_some() {
        let publisher = ctx.clone();
        spawn(async move { crate::tier::progress::publish(publisher.id, &publisher.shard).await }).detach();
    }
}

/// A one-shard server without listener or peers, with its background tasks,
/// on the data dir `cfg` names (created if missing; `cfg.shards` must be 1):
/// the request-level fuzz target drives the real handlers through it,
/// request by request (`conn::admit`, `conn::respond`). Call it inside a
/// glommio executor.
pub async fn alone(cfg: Config) -> Result<Rc<Ctx>, String> {
    assert_eq!(cfg.shards, 1, "a shard alone is the only shard");
    let access = Arc::new(Access::from_config(&cfg)?);
    let (senders, _) = MeshBuilder::<Message, Full>::full(1, 1)
        .join()
        .await
        .map_err(|e| format!("cannot join a one-shard mesh: {e}"))?;
    let shard_cfg = shard_config(0, &cfg);
    let dir = &shard_cfg.log.dir;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let shard = Shard::open(0, shard_cfg).await?;
    let mut boots = crate::subscriptions::boot(&cfg.data_dir, 1, cfg.allow_local_webhooks)?;
    let ctx = Ctx::new(0, cfg, shard, senders, access, boots.remove(0));
    background(&ctx);
    Ok(ctx)
}

/// Deletes expired streams that nobody accessed, now and then (the flusher
/// then gives their space back).
async fn sweeper(ctx: Rc<Ctx>) {
    loop {
        glommio::timer::sleep(period(SWEEP_EVERY)).await;
        ctx.shard.sweep_expired(ctx.now_ms()).await;
    }
}

/// How often a shard deletes expired streams that nobody accessed.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// How often the accept loop looks whether the server is stopping.
const SHUTDOWN_POLL: Duration = Duration::from_millis(50);

/// Sends the fork releases that deletes and expiries queue up.
async fn release_pump(ctx: Rc<Ctx>) {
    let signal = ctx.shard.store.borrow().release_signal.clone();
    loop {
        let seen = signal.generation();
        let batch = std::mem::take(&mut ctx.shard.store.borrow_mut().releases);
        for (shard, handle) in batch {
            ctx.ask(shard as usize, BucketReq::ForkRelease { handle }).await;
        }
        if ctx.shard.store.borrow().releases.is_empty() {
            signal.changed(seen).await;
        }
    }
}

fn on_message(ctx: &Rc<Ctx>, msg: Message) {
    match msg {
        Message::Handoff { fd, buffered } => {
            let sock = unsafe { TcpStream::from_raw_fd(fd) };
            if ctx.connections.get() >= ctx.cfg.max_connections {
                // Handed-off connections count against the limit like accepted ones.
                spawn(conn::refuse(ctx.clone(), sock, ctx.gate.cors(None))).detach();
                return;
            }
            spawn(conn::serve(ctx.clone(), sock, buffered)).detach();
        }
        Message::Request { from, id, req } => {
            let ctx = ctx.clone();
            spawn(async move {
                let rep = crate::handlers::bucket::serve_request(&ctx, req).await;
                let _ = ctx.senders.send_to(from, Message::Reply { id, rep }).await;
            })
            .detach();
        }
        Message::Reply { id, rep } => ctx.pending.complete(id, rep),
        Message::Batch(batch) => crate::forward::receive(ctx, batch),
    }
}

async fn accept_loop(ctx: &Rc<Ctx>, listener: TcpListener, shutdown: &AtomicBool) {
    let warn = Every::default();
    // Checked here too: a failing accept is ready at once, every time, and
    // `or` would never get to the check below.
    while !shutdown.load(Ordering::Relaxed) {
        // The accept is polled only when it woke (`Woken`): the shutdown
        // check below wakes this task 20 times a second, and each poll of a
        // pending glommio accept keeps one more waker reference until a
        // client connects (an idle shard panicked after 32,768 of them).
        let accept = Woken::new(async { Some(listener.accept().await) });
        let accepted = futures_lite::future::or(accept, async {
            while !shutdown.load(Ordering::Relaxed) {
                glommio::timer::sleep(period(SHUTDOWN_POLL)).await;
            }
            None
        })
        .await;
        match accepted {
            None => return,
            Some(Ok(sock)) => {
                if ctx.connections.get() >= ctx.cfg.max_connections {
                    // Over the limit: refuse cleanly; existing clients are unaffected.
                    spawn(conn::refuse(ctx.clone(), sock, ctx.gate.cors(None))).detach();
                    continue;
                }
                spawn(conn::serve(ctx.clone(), sock, Vec::new())).detach();
            }
            Some(Err(e)) => {
                if let Some(held) = warn.allow(std::time::Instant::now()) {
                    tracing::warn!(shard = ctx.id, error = %e, repeats = held, "accept failed");
                }
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// After accepting stops (parked readers were told to reconnect, new
/// requests are refused): let in-flight requests finish within
/// `--drain-timeout`, then make the log durable. A shard that has drained
/// keeps serving its peers until every shard has: a request another shard
/// forwarded here counts there, and is answered before this shard exits.
async fn drain(ctx: &Rc<Ctx>, drained: &AtomicUsize) {
    let deadline = std::time::Instant::now() + ctx.cfg.drain_timeout;
    until(deadline, || ctx.in_flight.get() == 0).await;
    drained.fetch_add(1, Ordering::SeqCst);
    until(deadline, || drained.load(Ordering::SeqCst) >= ctx.shards).await;
    let _ = ctx.shard.log.durable(ctx.shard.log.assigned()).await;
}

/// Polls `done` every [`DRAIN_POLL`] until it holds or `deadline` passes.
async fn until(deadline: std::time::Instant, done: impl Fn() -> bool) {
    while !done() && std::time::Instant::now() < deadline {
        glommio::timer::sleep(DRAIN_POLL).await;
    }
}

/// How often a draining shard looks at its in-flight requests and its peers.
const DRAIN_POLL: Duration = Duration::from_millis(5);
