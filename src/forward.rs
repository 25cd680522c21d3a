//! Cross-shard request forwarding (Seastar's `submit_to`): the shard that
//! accepted a connection keeps it, sends each parsed request (head and body)
//! for a stream owned elsewhere to the owner, and writes back the response
//! bytes the owner renders; and the receiving end of every batch (requests
//! to serve here, answers, relayed SSE events). Batches go out through
//! `outbox`.

use crate::ctx::Ctx;
use crate::mesh::envelope::{Answer, Answered, Delivered, Envelope, Forward};
use crate::mesh::relays::Subscription;
use crate::outbox::push;
use crate::relay;
use std::rc::Rc;
use std::time::Instant;

/// Sends a request to its owner shard and waits for the rendered response.
/// `head` is the request's head as received.
pub async fn submit(ctx: &Rc<Ctx>, owner: usize, head: Vec<u8>, body: Vec<u8>, started: Instant) -> Delivered {
    let (id, reply) = ctx.waiting.open();
    push(ctx, owner, Envelope::Forward(Forward { from: ctx.id, id, head, body, started }));
    reply.await
}

/// Answers forwarded requests until none is queued, parks, and ends when
/// enough others are parked (see `mesh::answerers`).
async fn answerer(ctx: Rc<Ctx>) {
    loop {
        while let Some(Forward { from, id, head, body, started }) = ctx.answerers.next() {
            let (answered, body) = crate::serve::answer(&ctx, from, head, body, started).await;
            push(&ctx, from, Envelope::Answer(Answer { id, answered, body }));
        }
        if !ctx.answerers.park().await {
            return;
        }
    }
}

/// Serves a batch that arrived from shard `from`; the emptied batch may
/// become the queue of what goes back to `from` (`Outbox::recycle`).
pub fn receive(ctx: &Rc<Ctx>, from: usize, mut batch: Vec<Envelope>) {
    for env in batch.drain(..) {
        match env {
            Envelope::Answer(Answer { id, answered, body }) => {
                // Allocated here: freed here, not in the owner's arena.
                drop(body);
                let delivered = match answered {
                    Answered::Response(r) => Delivered::Response(r),
                    Answered::Move => Delivered::Move,
                    Answered::Live { owner, key, handle, pump, bytes, from } => {
                        // Counted before any event that follows in this batch.
                        let feed = relay::subscribe(ctx, &key, handle, pump);
                        Delivered::Live(Subscription { owner, key, feed, start: bytes, from })
                    }
                };
                if let Err(Delivered::Live(sub)) = ctx.waiting.complete(id, delivered) {
                    relay::unsubscribe(ctx, sub.owner, &sub.key, &sub.feed);
                }
            }
            Envelope::Forward(f) => {
                if ctx.answerers.queue(f) {
                    sluice_shards::tasks::spawn(answerer(ctx.clone())).detach();
                }
            }
            Envelope::Event { key, handle, event } => relay::deliver(ctx, &key, handle, Some(event)),
            Envelope::Gone { key, handle } => relay::deliver(ctx, &key, handle, None),
            Envelope::Leave { from, key, handle, pump } => relay::leave(ctx, from, &key, handle, pump),
        }
    }
    ctx.outbox.recycle(from, batch);
}
