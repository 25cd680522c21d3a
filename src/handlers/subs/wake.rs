//! Waking consumers, on the subscription's owner shard: opening a wake
//! when linked streams have unacknowledged data, sending it (a webhook job
//! for the delivery threads, or a wake event appended to the pull-wake
//! stream), the ticker that applies delivery outcomes, fires retries on
//! the backoff schedule and expires leases; and the append hook that tells
//! owner shards about appends their subscriptions match.

use crate::ctx::Ctx;
use crate::mesh::BucketReq;
use crate::subscriptions::backoff::retry_delay_ms;
use crate::subscriptions::bounds::OUTCOME_POLL;
use crate::subscriptions::delivery::{Job, Outcome};
use crate::subscriptions::model::{Delivery, Subscription};
use crate::subscriptions::SubsReq;
use sluice_shards::ids::{stream_shard, BUILTIN_BUCKET};
use sluice_shards::store::StreamKey;
use sluice_shards::tasks::spawn;
use sluice_shards::tick::period;
use std::collections::BTreeMap;
use std::rc::Rc;

/// A fresh wake id.
fn wake_id() -> String {
    let r = crate::subscriptions::signing::random32();
    let hex: String = r[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("w_{hex}")
}

/// Called after a durable append or create of `key` ending at `tail`: tells
/// the owner shard of every matching subscription (never waits for them).
pub fn notify_append(ctx: &Rc<Ctx>, key: &StreamKey, tail: u64) {
    tell_owners(ctx, key, move |ids, path| SubsReq::Appended { ids, path, tail });
}

/// Called after a durable delete of `key`: its links are dropped (or, for
/// explicit members, start over).
pub fn notify_delete(ctx: &Rc<Ctx>, key: &StreamKey) {
    tell_owners(ctx, key, |ids, path| SubsReq::Deleted { ids, path });
}

fn tell_owners(ctx: &Rc<Ctx>, key: &StreamKey, message: impl Fn(Vec<String>, String) -> SubsReq + 'static) {
    if key.bucket() != BUILTIN_BUCKET {
        return;
    }
    let interested = ctx.subs.trie.borrow().matching(key.stream());
    if interested.is_empty() {
        return;
    }
    let mut by_owner: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (id, owner) in interested {
        by_owner.entry(owner).or_default().push(id);
    }
    let (ctx, path) = (ctx.clone(), key.stream().to_string());
    spawn(async move {
        for (owner, ids) in by_owner {
            ctx.ask(owner, BucketReq::Subs(message(ids, path.clone()))).await;
        }
    })
    .detach();
}

/// Opens a wake for subscription `id` if none is open and work is pending;
/// returns whether one is open afterwards because of this call.
pub fn maybe_wake(ctx: &Rc<Ctx>, id: &str) -> bool {
    let mut owned = ctx.subs.owned.borrow_mut();
    let Some(sub) = owned.get_mut(id) else { return false };
    if sub.wake.is_some() || !sub.pending() {
        return false;
    }
    let generation = sub.open_wake(wake_id());
    super::persist::soon(ctx, id);
    ctx.subs.waking.borrow_mut().insert(id.to_string());
    ctx.subs.wakes.notify();
    match &sub.config.delivery {
        Delivery::Webhook { .. } => dispatch(ctx, sub),
        Delivery::PullWake { wake_stream } => {
            let event = serde_json::json!({
                "type": "wake",
                "subscription_id": sub.id,
                "wake_id": sub.wake.as_ref().map(|w| w.id.clone()),
                "generation": generation,
                "stream": sub.first_pending(),
                "ts": ctx.now_ms(),
            });
            write_wake_event(ctx, wake_stream.clone(), event.to_string().into_bytes());
        }
    }
    true
}

/// Appends a wake event to a pull-wake stream (on its shard, in the background).
fn write_wake_event(ctx: &Rc<Ctx>, stream: String, event: Vec<u8>) {
    let ctx = ctx.clone();
    spawn(async move {
        let owner = stream_shard(BUILTIN_BUCKET, &stream, ctx.shards);
        let rep = ctx.ask(owner, BucketReq::Subs(SubsReq::WakeEvent { stream: stream.clone(), event })).await;
        if let crate::mesh::BucketRep::Done(Err(e)) = rep {
            tracing::warn!(stream = %stream, error = ?e, "cannot write a pull-wake event (create the wake stream)");
        }
    })
    .detach();
}

/// The webhook notification body of the current wake.
pub fn notification(ctx: &Ctx, sub: &Subscription) -> Vec<u8> {
    let w = sub.wake.as_ref().expect("a wake is open");
    serde_json::json!({
        "subscription_id": sub.id,
        "wake_id": w.id,
        "generation": sub.generation,
        "streams": sub.stream_infos(true),
        "callback_url": sub.action_url("callback"),
        "callback_token": ctx.subs.keys.token(&sub.id, sub.incarnation, sub.generation),
    })
    .to_string()
    .into_bytes()
}

/// Hands the current wake of a webhook subscription to the delivery threads
/// (or schedules a retry when their queue is full).
fn dispatch(ctx: &Ctx, sub: &mut Subscription) {
    let Delivery::Webhook { url } = &sub.config.delivery else { unreachable!("only webhooks are dispatched") };
    let job = Job {
        shard: ctx.id,
        id: sub.id.clone(),
        incarnation: sub.incarnation,
        generation: sub.generation,
        url: url.clone(),
        body: notification(ctx, sub),
    };
    sub.retry_at = None;
    if ctx.subs.link.submit(job) {
        sub.in_flight = true;
        ctx.subs.in_flight.set(ctx.subs.in_flight.get() + 1);
    } else {
        schedule_retry(ctx, sub);
    }
}

fn schedule_retry(ctx: &Ctx, sub: &mut Subscription) {
    sub.retries += 1;
    let unit = (ctx.random() >> 11) as f64 / (1u64 << 53) as f64;
    sub.retry_at = Some(ctx.now_ms() + retry_delay_ms(sub.retries, unit));
    // The schedule survives a restart.
    super::persist::soon(ctx, &sub.id);
}

/// Ends the current wake of `id` (done, released or expired) and opens the
/// next one if work remains; returns whether it did.
pub fn finish_wake(ctx: &Rc<Ctx>, id: &str) -> bool {
    if let Some(sub) = ctx.subs.owned.borrow_mut().get_mut(id) {
        sub.close_wake();
    }
    ctx.subs.waking.borrow_mut().remove(id);
    super::persist::soon(ctx, id);
    maybe_wake(ctx, id)
}

/// A delivery came back.
fn apply_outcome(ctx: &Rc<Ctx>, o: Outcome) {
    let done = {
        let mut owned = ctx.subs.owned.borrow_mut();
        let Some(sub) = owned.get_mut(&o.id) else { return };
        // A deleted namesake or an older wake: nothing to advance.
        if sub.incarnation != o.incarnation || sub.generation != o.generation || sub.wake.is_none() {
            return;
        }
        sub.in_flight = false;
        match o.result {
            Ok(true) => {
                sub.ack_snapshot();
                true
            }
            Ok(false) => {
                sub.retries = 0;
                sub.extend_lease(ctx.now_ms());
                super::persist::soon(ctx, &sub.id);
                false
            }
            Err(why) => {
                schedule_retry(ctx, sub);
                tracing::info!(subscription = %sub.id, retries = sub.retries, reason = %why, "webhook delivery failed; retrying");
                false
            }
        }
    };
    if done {
        finish_wake(ctx, &o.id);
    }
}

/// The shard's subscription ticker: delivery outcomes, due retries and
/// expired leases. It sleeps until the next deadline, or until a change
/// (`Local::wakes`) or, while deliveries are out, the next outcome poll:
/// a wake that waits for a worker costs nothing.
pub async fn ticker(ctx: Rc<Ctx>) {
    let mut rescan = true;
    let mut deadline: Option<std::time::Instant> = None;
    loop {
        let seen = ctx.subs.wakes.generation();
        while let Ok(o) = ctx.subs.link.outcomes.try_recv() {
            ctx.subs.in_flight.set(ctx.subs.in_flight.get() - 1);
            apply_outcome(&ctx, o);
            rescan = true;
        }
        let now = std::time::Instant::now();
        if rescan || deadline.is_some_and(|d| now >= d) {
            deadline = scan(&ctx).map(|in_ms| now + std::time::Duration::from_millis(in_ms));
            rescan = false;
        }
        let poll = (ctx.subs.in_flight.get() > 0).then(|| now + OUTCOME_POLL);
        match deadline.into_iter().chain(poll).min() {
            None => ctx.subs.wakes.changed(seen).await,
            Some(at) => {
                let nap = glommio::timer::sleep(period(at.saturating_duration_since(now)));
                futures_lite::future::or(nap, ctx.subs.wakes.changed(seen)).await;
            }
        }
        rescan |= ctx.subs.wakes.generation() != seen;
    }
}

/// Fires due retries and ends expired leases of the open wakes; returns the
/// milliseconds until the next retry or lease end, if any.
fn scan(ctx: &Rc<Ctx>) -> Option<u64> {
    let now = ctx.now_ms();
    let mut next: Option<u64> = None;
    let ids: Vec<String> = ctx.subs.waking.borrow().iter().cloned().collect();
    for id in ids {
        let expired = {
            let mut owned = ctx.subs.owned.borrow_mut();
            let Some(sub) = owned.get_mut(&id) else {
                ctx.subs.waking.borrow_mut().remove(&id);
                continue;
            };
            if sub.retry_at.is_some_and(|at| now >= at) {
                dispatch(ctx, sub);
            }
            let expired = sub.lease_expired(now);
            let lease = sub.wake.as_ref().and_then(|w| w.lease_until);
            for at in sub.retry_at.into_iter().chain(lease).filter(|_| !expired) {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
            expired
        };
        if expired {
            finish_wake(ctx, &id);
        }
    }
    next.map(|at| at.saturating_sub(now))
}
