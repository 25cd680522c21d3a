//! Sending to peer shards in batches: envelopes for one peer queue in the
//! shard's outbox, and one flusher task per peer sends them as a single
//! mesh message, so a busy shard pays one channel message and one wake-up
//! per batch. Forwarded requests a stopping peer cannot take are answered
//! 503 here.

use crate::ctx::Ctx;
use crate::mesh::envelope::{Delivered, Envelope};
use crate::mesh::{Message, PeerGone};
use sluice::http::response::Rendered;
use sluice_shards::core::Error;
use std::rc::Rc;

/// Queues `env` for shard `to`, starting its flusher if none is running.
pub fn push(ctx: &Rc<Ctx>, to: usize, env: Envelope) {
    debug_assert_ne!(to, ctx.id, "a shard never forwards to itself");
    if ctx.outbox.queue(to, env) {
        sluice_shards::tasks::spawn_into(flush(ctx.clone(), to), ctx.mesh_queue).detach();
    }
}

/// Sends everything queued for `to` as batches until the queue stays empty.
/// The flusher runs after the tasks that queued, so one batch gathers every
/// request queued in the same scheduling round (and while a send waits).
async fn flush(ctx: Rc<Ctx>, to: usize) {
    loop {
        let batch = ctx.outbox.take(to);
        if batch.is_empty() {
            return;
        }
        let msg = Message::Batch { from: ctx.id, envelopes: batch };
        if let Err(PeerGone(Some(lost))) = ctx.link.send_to(to, msg).await {
            // The peer is gone (shutting down): its requests cannot be served.
            if let Message::Batch { envelopes: lost, .. } = *lost {
                for env in lost {
                    if let Envelope::Forward(f) = env {
                        let _ = ctx.waiting.complete(f.id, unavailable(&ctx, "shard is shutting down"));
                    }
                }
            }
        }
    }
}

/// A 503 that ends the connection, for a request its owner cannot answer.
pub fn unavailable(ctx: &Ctx, why: &'static str) -> Delivered {
    let resp = sluice::http::cors::finish(Error::Unavailable(why).into(), &ctx.gate.cors(None));
    Delivered::Response(Rendered::new(resp, true))
}
