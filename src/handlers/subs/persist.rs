//! Making subscription changes durable: one persister task per shard writes
//! the current state of every changed subscription as a journal record (or
//! its tombstone), in order, and wakes the requests waiting for it. A change
//! is acknowledged only after its record is durable. Recovery, which reads
//! the states back, is `manage::recover`.

use crate::ctx::Ctx;
use crate::subscriptions::model::SubError;
use crate::subscriptions::stored;
use sluice_shards::log::Record;
use std::rc::Rc;

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
            let state = ctx.subs.owned.borrow().get(&id).map(stored::encode);
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
