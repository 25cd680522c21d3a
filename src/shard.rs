//! One shard's runtime on its pinned executor: recovery, the cross-shard mesh
//! (forwarded requests, handoffs, bucket messages),
//! bucket replication at start, and the accept loop on its SO_REUSEPORT socket.

use crate::auth::Access;
use crate::config::Config;
use crate::conn;
use crate::ctx::Ctx;
use crate::edge_limits::{ACCEPT_RETRY, DRAIN_POLL, INJECTED_PANIC_AFTER, SHUTDOWN_POLL, SWEEP_EVERY, SYNC_POLL};
use crate::handlers::bucket::{serve_here, serve_request};
use crate::mesh::{BucketReq, Link, Message};
use crate::start_error::StartError;
use glommio::channels::channel_mesh::{Full, MeshBuilder};
use glommio::net::{TcpListener, TcpStream};
use sluice_shards::every::Every;
use sluice_shards::log::LogConfig;
use sluice_shards::storage::Storage;
use sluice_shards::store::{FlushConfig, Shard, ShardConfig};
use sluice_shards::tasks::{spawn, spawn_into};
use sluice_shards::tick::period;
use sluice_shards::woken::Woken;
use std::os::fd::{FromRawFd, RawFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

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
    pub ready: mpsc::Sender<Result<Recovered, StartError>>,
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
    let pulse = start.pulse.clone();
    spawn(async move {
        loop {
            pulse.beat();
            glommio::timer::sleep(period(crate::edge_limits::BEAT)).await;
        }
    })
    .detach();
    let listener = unsafe { TcpListener::from_raw_fd(fd) };
    let (senders, receivers) = match mesh.join().await {
        Ok(pair) => pair,
        Err(e) => {
            let _ = start.ready.send(Err(format!("shard {id}: cannot join the cross-shard mesh: {e}").into()));
            return;
        }
    };
    // Messages are addressed by shard id: the mesh must number its peers so.
    assert_eq!(senders.peer_id(), id, "shard {id} is peer {} of the mesh", senders.peer_id());
    let recovering = std::time::Instant::now();
    let shard = match Shard::open(id, shard_config(id, &cfg)).await {
        Ok(s) => s,
        Err(e) => {
            let _ = start.ready.send(Err(format!("shard {id}: {e}").into()));
            return;
        }
    };
    let ctx = Ctx::new(id, cfg, shard, Link::Mesh(senders), start.access.clone(), start.subs, serve_here);
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
        .filter_map(|e| e.state.fork().map(|f| (f.parent_shard as usize, f.parent_handle)))
        .collect();
    for (shard, handle) in parents {
        ctx.ask(shard, BucketReq::ForkRef { handle }).await;
    }
    // Subscriptions owned here: patterns registered on every shard before any client.
    crate::handlers::subs::manage::recover(&ctx).await;
    start.synced.fetch_add(1, Ordering::SeqCst);
    while start.synced.load(Ordering::SeqCst) < shards {
        glommio::timer::sleep(SYNC_POLL).await;
    }
    ctx.shard.purge_tombstones().await;
    background(&ctx);
    let _ = start.ready.send(Ok(Recovered { replay: ctx.metrics.recovery.get(), torn_bytes: torn }));
    if crate::fatal::injected_panic(id) {
        spawn(async move {
            glommio::timer::sleep(INJECTED_PANIC_AFTER).await;
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
        flush: FlushConfig {
            bytes: cfg.flush_bytes,
            every: cfg.flush_interval,
            free_spacing: sluice_shards::tuning::CHECKPOINT_FREE_SPACING,
            sync_once: sluice_shards::tuning::SYNC_ONCE_STREAMS,
            place_from: sluice_shards::tuning::PLACE_FROM,
            bundle_max: sluice_shards::tuning::BUNDLE_MAX,
            slice: sluice_shards::tuning::FLUSH_SLICE,
        },
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
    spawn(crate::handlers::subs::wake::ticker(ctx.clone())).detach();
    spawn(crate::handlers::subs::persist::run(ctx.clone())).detach();
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
/// request by request (`serve::admit`, `serve::respond`). Call it inside a
/// glommio executor.
pub async fn alone(cfg: Config) -> Result<Rc<Ctx>, StartError> {
    assert_eq!(cfg.shards, 1, "a shard alone is the only shard");
    let access = Arc::new(Access::from_config(&cfg)?);
    let (senders, _) = MeshBuilder::<Message, Full>::full(1, 1)
        .join()
        .await
        .map_err(|e| format!("cannot join a one-shard mesh: {e}"))?;
    let mut boots = crate::subscriptions::boot(&cfg.data_dir, 1, cfg.allow_local_webhooks)?;
    let ctx = detached(0, cfg, Link::Mesh(senders), access, boots.remove(0)).await?;
    background(&ctx);
    Ok(ctx)
}

/// Shard `id` of `cfg.shards`, recovered from the data dir `cfg` names
/// (its directory created if missing), with its context sending to its
/// peers through `link`: no listener, and no task of its own runs yet.
/// [`alone`] serves one; the two-shard mesh test (`tests::pair`) runs two
/// on one executor.
pub(crate) async fn detached(
    id: usize,
    cfg: Config,
    link: Link,
    access: Arc<Access>,
    subs: crate::subscriptions::Boot,
) -> Result<Rc<Ctx>, StartError> {
    let shard_cfg = shard_config(id, &cfg);
    let dir = &shard_cfg.log.dir;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let shard = Shard::open(id, shard_cfg).await?;
    Ok(Ctx::new(id, cfg, shard, link, access, subs, serve_here))
}

/// Deletes expired streams that nobody accessed, now and then (the flusher
/// then gives their space back), and dismisses the answerers of forwarded
/// requests when none came since the last sweep.
async fn sweeper(ctx: Rc<Ctx>) {
    loop {
        glommio::timer::sleep(period(SWEEP_EVERY)).await;
        ctx.shard.sweep_expired(ctx.now_ms()).await;
        ctx.answerers.dismiss_if_idle();
    }
}

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

/// Serves a message from a peer shard (the mesh receive loop's body; the
/// two-shard mesh test delivers its held messages here).
pub(crate) fn on_message(ctx: &Rc<Ctx>, msg: Message) {
    match msg {
        Message::Handoff { fd, buffered } => {
            let sock = unsafe { TcpStream::from_raw_fd(fd) };
            if ctx.connections.get() >= ctx.cfg.max_connections {
                // Handed-off connections count against the limit like accepted ones.
                spawn(conn::turn_away(ctx.clone(), sock, ctx.gate.cors(None))).detach();
                return;
            }
            spawn(conn::serve(ctx.clone(), sock, buffered)).detach();
        }
        Message::Request { from, id, req } => {
            let ctx = ctx.clone();
            spawn(async move {
                let rep = serve_request(&ctx, req).await;
                let _ = ctx.link.send_to(from, Message::Reply { id, rep }).await;
            })
            .detach();
        }
        Message::Reply { id, rep } => {
            // A reply nobody waits for any more (its asker was dropped) is let go.
            let _ = ctx.pending.complete(id, rep);
        }
        Message::Batch { from, envelopes } => crate::forward::receive(ctx, from, envelopes),
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
                    // Over the limit: turned away cleanly; existing clients are unaffected.
                    spawn(conn::turn_away(ctx.clone(), sock, ctx.gate.cors(None))).detach();
                    continue;
                }
                spawn(conn::serve(ctx.clone(), sock, Vec::new())).detach();
            }
            Some(Err(e)) => {
                if let Some(held) = warn.allow(std::time::Instant::now()) {
                    tracing::warn!(shard = ctx.id, error = %e, repeats = held, "accept failed");
                }
                glommio::timer::sleep(ACCEPT_RETRY).await;
            }
        }
    }
}

/// After accepting stops (parked readers were told to reconnect, new
/// requests are refused): let in-flight requests finish within
/// `--drain-timeout`, then make the log durable and stop cleanly (a last
/// flush and checkpoint, which the next start trusts). A shard that has drained
/// keeps serving its peers until every shard has: a request another shard
/// forwarded here counts there, and is answered before this shard exits.
async fn drain(ctx: &Rc<Ctx>, drained: &AtomicUsize) {
    let deadline = std::time::Instant::now() + ctx.cfg.drain_timeout;
    until(deadline, || ctx.in_flight.get() == 0).await;
    drained.fetch_add(1, Ordering::SeqCst);
    until(deadline, || drained.load(Ordering::SeqCst) >= ctx.shards).await;
    let _ = ctx.shard.log.durable(ctx.shard.log.assigned()).await;
    if let Err(error) = ctx.shard.stop_clean().await {
        tracing::warn!(shard = ctx.shard.id, error = ?error, "not stopped cleanly: the next start checks every stream file");
    }
}

/// Polls `done` every [`DRAIN_POLL`] until it holds or `deadline` passes.
async fn until(deadline: std::time::Instant, done: impl Fn() -> bool) {
    while !done() && std::time::Instant::now() < deadline {
        glommio::timer::sleep(DRAIN_POLL).await;
    }
}
