//! Cross-shard request forwarding (Seastar's `submit_to`): the shard that
//! accepted a connection keeps it, sends each parsed request (head and body)
//! for a stream owned elsewhere to the owner, and writes back the response
//! bytes the owner renders. Requests and answers for one peer shard queue in
//! a per-destination outbox that one flusher task sends as a single batch
//! message, so a busy shard pays one channel message and one wake-up per batch.
//! The same batches carry relayed SSE events (see `relay`).

use crate::ctx::Ctx;
use crate::mesh::Message;
use crate::relay;
use crate::route::Route;
use glommio::channels::local_channel::{self, LocalSender};
use sluice::http::url::Target;
use sluice::http::{Head, Response};
use sluice_shards::core::Error;
use sluice_shards::store::StreamKey;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

/// A request travelling to the owner shard of its stream.
pub struct Forward {
    /// The accepting shard and its id for the answer.
    pub from: usize,
    pub id: u64,
    pub head: Head,
    pub target: Target,
    pub route: Route,
    pub body: Vec<u8>,
    /// When the accepting shard had the whole head (request latency starts there).
    pub started: Instant,
}

/// The owner's answer travelling back to the accepting shard.
pub struct Answer {
    pub id: u64,
    pub answered: Answered,
}

/// How the owner answered a forwarded request.
pub enum Answered {
    /// A whole response.
    Response(Rendered),
    /// A live SSE read joined the owner's relay: write `bytes` (head and
    /// first control event), then follow the stream's relayed events from `from`.
    Live { owner: usize, key: StreamKey, handle: u64, bytes: Vec<u8>, from: u64 },
    /// Move the connection to the owner and replay the request there.
    Move,
}

/// Response bytes: the head (with small bodies rendered inline) and a large
/// body kept in its own buffer so it is never copied.
pub struct Rendered {
    pub head: Vec<u8>,
    pub body: Vec<u8>,
}

/// Bodies at least this large are written without copying them behind the head.
const LARGE_BODY: usize = 64 * 1024;

impl Rendered {
    /// Renders a finished response for a connection (`close`: last response on it).
    pub fn new(resp: Response, close: bool) -> Rendered {
        let inline = resp.body.len() < LARGE_BODY || !resp.sends_body();
        let mut head = Vec::with_capacity(resp.head_capacity() + if inline { resp.body.len() } else { 0 });
        if inline {
            resp.render(&mut head, close);
            return Rendered { head, body: Vec::new() };
        }
        resp.render_head(&mut head, close);
        Rendered { head, body: resp.body }
    }
}

/// One item of a batch between two shards.
pub enum Envelope {
    /// Boxed: a request is large next to an answer, and batches move both.
    Forward(Box<Forward>),
    Answer(Answer),
    /// A live event of a stream (incarnation `handle`) the receiver has SSE subscribers for.
    Event {
        key: StreamKey,
        handle: u64,
        event: relay::Event,
    },
    /// That stream is gone: its relayed subscribers end.
    Gone {
        key: StreamKey,
        handle: u64,
    },
    /// A relayed subscriber on shard `from` ended.
    Leave {
        from: usize,
        key: StreamKey,
        handle: u64,
    },
}

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
}

/// Queues `env` for shard `to`, starting its flusher if none is running.
pub fn push(ctx: &Rc<Ctx>, to: usize, env: Envelope) {
    debug_assert_ne!(to, ctx.id, "a shard never forwards to itself");
    ctx.outbox.queues[to].borrow_mut().push(env);
    if !ctx.outbox.flushing[to].replace(true) {
        sluice_shards::tasks::spawn_into(flush(ctx.clone(), to), ctx.mesh_queue).detach();
    }
}

/// Sends everything queued for `to` as batches until the queue stays empty.
/// The flusher runs after the tasks that queued, so one batch gathers every
/// request queued in the same scheduling round (and while a send waits).
async fn flush(ctx: Rc<Ctx>, to: usize) {
    loop {
        let batch = std::mem::take(&mut *ctx.outbox.queues[to].borrow_mut());
        if batch.is_empty() {
            ctx.outbox.flushing[to].set(false);
            return;
        }
        if let Err(e) = ctx.senders.send_to(to, Message::Batch(batch)).await {
            // The peer is gone (shutting down): its requests cannot be served.
            use glommio::{GlommioError, ResourceType};
            if let GlommioError::Closed(ResourceType::Channel(Message::Batch(lost))) = e {
                for env in lost {
                    if let Envelope::Forward(f) = env {
                        let _ = ctx.waiting.complete(f.id, unavailable(&ctx, "shard is shutting down"));
                    }
                }
            }
        }
    }
}

/// Forwarded requests of this shard awaiting their answers.
#[derive(Default)]
pub struct Waiting {
    next_id: Cell<u64>,
    slots: RefCell<HashMap<u64, LocalSender<Delivered>>>,
}

/// An answer as its connection receives it.
pub enum Delivered {
    Response(Rendered),
    Live(relay::Subscription),
    Move,
}

impl Waiting {
    /// Hands an answer to its connection; gives it back if the connection is gone.
    fn complete(&self, id: u64, delivered: Delivered) -> Result<(), Delivered> {
        use glommio::{GlommioError, ResourceType};
        let Some(tx) = self.slots.borrow_mut().remove(&id) else {
            return Err(delivered);
        };
        match tx.try_send(delivered) {
            Ok(()) => Ok(()),
            Err(
                GlommioError::Closed(ResourceType::Channel(d)) | GlommioError::WouldBlock(ResourceType::Channel(d)),
            ) => Err(d),
            // try_send fails only as closed or full, both carrying the item.
            Err(_) => Ok(()),
        }
    }
}

/// A 503 that ends the connection, for a request its owner cannot answer.
fn unavailable(ctx: &Ctx, why: &'static str) -> Delivered {
    let resp = sluice::http::cors::finish(Error::Unavailable(why).into(), &ctx.gate.cors(None));
    Delivered::Response(Rendered::new(resp, true))
}

/// Sends a request to its owner shard and waits for the rendered response.
pub async fn submit(
    ctx: &Rc<Ctx>,
    owner: usize,
    head: Head,
    target: Target,
    route: Route,
    body: Vec<u8>,
    started: Instant,
) -> Delivered {
    let id = ctx.waiting.next_id.get() + 1;
    ctx.waiting.next_id.set(id);
    let (tx, rx) = local_channel::new_bounded(1);
    ctx.waiting.slots.borrow_mut().insert(id, tx);
    push(ctx, owner, Envelope::Forward(Box::new(Forward { from: ctx.id, id, head, target, route, body, started })));
    rx.recv().await.unwrap_or_else(|| unavailable(ctx, "owner shard did not answer"))
}

/// Serves a batch that arrived from another shard.
pub fn receive(ctx: &Rc<Ctx>, batch: Vec<Envelope>) {
    for env in batch {
        match env {
            Envelope::Answer(Answer { id, answered }) => {
                let delivered = match answered {
                    Answered::Response(r) => Delivered::Response(r),
                    Answered::Move => Delivered::Move,
                    Answered::Live { owner, key, handle, bytes, from } => {
                        // Counted before any event that follows in this batch.
                        let feed = relay::subscribe(ctx, &key, handle);
                        Delivered::Live(relay::Subscription { owner, key, feed, start: bytes, from })
                    }
                };
                if let Err(Delivered::Live(sub)) = ctx.waiting.complete(id, delivered) {
                    relay::unsubscribe(ctx, sub.owner, &sub.key, &sub.feed);
                }
            }
            Envelope::Forward(f) => {
                let ctx = ctx.clone();
                sluice_shards::tasks::spawn(async move {
                    let Forward { from, id, head, target, route, body, started } = *f;
                    let answered = crate::conn::answer(&ctx, from, head, target, route, body, started).await;
                    push(&ctx, from, Envelope::Answer(Answer { id, answered }));
                })
                .detach();
            }
            Envelope::Event { key, handle, event } => relay::deliver(ctx, &key, handle, Some(event)),
            Envelope::Gone { key, handle } => relay::deliver(ctx, &key, handle, None),
            Envelope::Leave { from, key, handle } => relay::leave(ctx, from, &key, handle),
        }
    }
}
