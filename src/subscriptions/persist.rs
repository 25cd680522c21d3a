//! Making subscription changes durable: one persister task per shard writes
//! the current state of every changed subscription as a journal record (or
//! its tombstone), in order, and wakes the requests waiting for it. A change
//! is acknowledged only after its record is durable. Recovery reads the
//! states back, re-registers their patterns on every shard and refreshes
//! tails from the streams' shards.

use super::model::SubError;
use super::{record, wake};
use crate::ctx::Ctx;
use sluice_shards::log::Record;
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::rc::Rc;

/// The persister's queue and progress on one shard.
#[derive(Default)]
pub struct Persister {
    dirty: RefCell<BTreeSet<String>>,
    /// Requests made, requests durable, and the last request a failed batch covered.
    requested: Cell<u64>,
    durable: Cell<u64>,
    failed_through: Cell<u64>,
    kick: sluice_shards::signal::Signal,
    done: sluice_shards::signal::Signal,
}

/// Queues subscription `id` for writing without waiting (background changes:
/// wakes opened, delivery outcomes, expiries).
pub fn soon(ctx: &Ctx, id: &str) -> u64 {
    let p = &ctx.subs.persist;
    p.dirty.borrow_mut().insert(id.to_string());
    p.requested.set(p.requested.get() + 1);
    p.kick.notify();
    p.requested.get()
}

/// Writes subscription `id`'s current state (or tombstone) and waits until it is durable.
pub async fn durable(ctx: &Ctx, id: &str) -> Result<(), SubError> {
    let mine = soon(ctx, id);
    let p = &ctx.subs.persist;
    while p.durable.get() < mine {
        let seen = p.done.generation();
        if p.durable.get() >= mine {
            break;
        }
        p.done.changed(seen).await;
    }
    if p.failed_through.get() >= mine {
        return Err(SubError::new(
            503,
            "INVALID_REQUEST",
            "the journal is unavailable; the change was not made durable",
        ));
    }
    Ok(())
}

/// The persister task.
pub async fn run(ctx: Rc<Ctx>) {
    let p = &ctx.subs.persist;
    loop {
        let seen = p.kick.generation();
        if p.dirty.borrow().is_empty() {
            p.kick.changed(seen).await;
            continue;
        }
        let upto = p.requested.get();
        let ids = std::mem::take(&mut *p.dirty.borrow_mut());
        let mut ok = true;
        for id in ids {
            let state = ctx.subs.owned.borrow().get(&id).map(record::encode);
            let rec = match state {
                Some(state) => Record::SubscriptionPut { id, state },
                None if ctx.shard.store.borrow().subscriptions.contains_key(&id) => Record::SubscriptionDelete { id },
                None => continue,
            };
            if let Err(e) = ctx.shard.log_meta(rec).await {
                tracing::warn!(shard = ctx.id, error = ?e, "cannot make a subscription change durable");
                ok = false;
            }
        }
        if !ok {
            p.failed_through.set(upto);
        }
        p.durable.set(upto);
        p.done.notify();
    }
}

/// At start, before any client: loads the subscriptions this shard owns,
/// registers their patterns everywhere, refreshes tails and resumes wakes
/// (a retry keeps its schedule; an in-flight delivery is sent again).
pub async fn recover(ctx: &Rc<Ctx>) {
    let states: Vec<(String, Vec<u8>)> =
        ctx.shard.store.borrow().subscriptions.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let now = ctx.now_ms();
    for (id, bytes) in states {
        let Some(mut sub) = record::decode(&bytes) else {
            tracing::warn!(shard = ctx.id, subscription = %id, "a subscription record does not decode; skipped");
            continue;
        };
        if sub.wake.is_some() && sub.retry_at.is_none() && sub.wake.as_ref().is_some_and(|w| w.lease_until.is_none()) {
            if let super::model::Delivery::Webhook { .. } = sub.config.delivery {
                sub.retry_at = Some(now);
            }
        }
        let patterns = super::manage::registrations(&sub);
        let has_wake = sub.wake.is_some();
        ctx.subs.owned.borrow_mut().insert(id.clone(), sub);
        super::manage::index(ctx, &id, patterns, true).await;
        super::manage::refresh_tails(ctx, &id).await;
        if has_wake {
            ctx.subs.waking.borrow_mut().insert(id.clone());
            ctx.subs.wakes.notify();
        } else {
            wake::maybe_wake(ctx, &id);
        }
    }
}
