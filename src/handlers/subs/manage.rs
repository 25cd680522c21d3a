//! Managing subscriptions on their owner shard: create (idempotent by the
//! configuration hash, backfilled with matching streams at their tails),
//! delete (a tombstone), explicit membership, the pattern index on every
//! shard, and the tails recovery refreshes.

use super::answers::{base_url, body_json, json, render};
use super::{persist, wake};
use crate::ctx::Ctx;
use crate::mesh::{BucketRep, BucketReq};
use crate::subscriptions::bounds::{MAX_BODY_BYTES, MAX_EXPLICIT_STREAMS, MAX_SUBSCRIPTIONS_PER_SHARD};
use crate::subscriptions::glob;
use crate::subscriptions::model::{normalize_path, parse_streams, Config, SubError, Subscription};
use crate::subscriptions::SubsReq;
use sluice::http::{Head, Response};
use sluice_shards::ids::{stream_shard, BUILTIN_BUCKET};
use std::rc::Rc;

/// A subscription's trie registrations: its pattern and explicit streams.
pub fn registrations(sub: &Subscription) -> Vec<String> {
    let explicit = sub.links.iter().filter(|(_, l)| l.explicit).map(|(p, _)| p);
    sub.config.pattern.iter().chain(explicit).cloned().collect()
}

pub async fn index(ctx: &Rc<Ctx>, id: &str, patterns: Vec<String>, add: bool) {
    let owner = ctx.id;
    ctx.ask_all(|| BucketReq::Subs(SubsReq::Index { id: id.to_string(), owner, patterns: patterns.clone(), add }))
        .await;
}

/// The current tail of every stream on the base surface under `prefix`.
async fn tails_under(ctx: &Rc<Ctx>, prefix: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for rep in ctx
        .ask_all(|| BucketReq::List {
            bucket: BUILTIN_BUCKET.into(),
            prefix: prefix.to_string(),
            after: String::new(),
            limit: usize::MAX,
        })
        .await
    {
        if let BucketRep::Listing(l) = rep {
            out.extend(l.into_iter().map(|s| (s.stream_id, s.tail)));
        }
    }
    out
}

/// The tail of one stream, if it exists.
async fn tail_of(ctx: &Rc<Ctx>, path: &str) -> Option<u64> {
    let owner = stream_shard(BUILTIN_BUCKET, path, ctx.shards);
    let req = BucketReq::List { bucket: BUILTIN_BUCKET.into(), prefix: path.into(), after: String::new(), limit: 1 };
    match ctx.ask(owner, req).await {
        BucketRep::Listing(l) => l.into_iter().find(|s| s.stream_id == path).map(|s| s.tail),
        _ => None,
    }
}

/// Links explicit streams: existing ones from their current tail, missing ones from their start.
async fn link_explicit(ctx: &Rc<Ctx>, id: &str, streams: &[String]) {
    for path in streams {
        let tail = tail_of(ctx, path).await;
        if let Some(sub) = ctx.subs.owned.borrow_mut().get_mut(id) {
            sub.link(path, true, tail, tail.unwrap_or(0));
        }
    }
}

/// Brings a recovered subscription's tails up to date; streams that match
/// its pattern and are not linked appeared while it was down (all new).
pub async fn refresh_tails(ctx: &Rc<Ctx>, id: &str) {
    let Some((pattern, explicit)) = ctx.subs.owned.borrow().get(id).map(|s| {
        (
            s.config.pattern.clone(),
            s.links.iter().filter(|(_, l)| l.explicit).map(|(p, _)| p.clone()).collect::<Vec<_>>(),
        )
    }) else {
        return;
    };
    if let Some(pattern) = pattern {
        for (path, tail) in tails_under(ctx, &glob::literal_prefix(&pattern)).await {
            if glob::matches(&pattern, &path) && !path.starts_with("__ds/") {
                if let Some(sub) = ctx.subs.owned.borrow_mut().get_mut(id) {
                    sub.link(&path, false, None, tail);
                }
            }
        }
    }
    for path in explicit {
        let tail = tail_of(ctx, &path).await.unwrap_or(0);
        if let Some(sub) = ctx.subs.owned.borrow_mut().get_mut(id) {
            sub.link(&path, true, None, tail);
        }
    }
}

pub(super) async fn create(ctx: &Rc<Ctx>, head: &Head, id: &str, body: &[u8]) -> Result<Response, SubError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(SubError::new(413, "INVALID_REQUEST", "body is larger than 256 KiB"));
    }
    let config = Config::parse(body, ctx.subs.allow_local)?;
    let exists = {
        let owned = ctx.subs.owned.borrow();
        match owned.get(id) {
            Some(existing) if existing.config_hash != config.hash() => {
                return Err(SubError::new(
                    409,
                    "SUBSCRIPTION_ALREADY_EXISTS",
                    "subscription exists with a different configuration",
                ))
            }
            Some(_) => true,
            None if owned.len() >= MAX_SUBSCRIPTIONS_PER_SHARD => {
                return Err(SubError::new(409, "INVALID_REQUEST", "too many subscriptions on this shard"))
            }
            None => false,
        }
    };
    if exists {
        // Confirmed only once durable (a concurrent create may still be on its way).
        persist::durable(ctx, id).await?;
        let owned = ctx.subs.owned.borrow();
        let sub = owned.get(id).ok_or_else(SubError::not_found)?;
        return Ok(json(200, render(ctx, head, sub)));
    }
    let incarnation = u64::from_le_bytes(crate::subscriptions::signing::random32()[..8].try_into().expect("8 bytes"));
    let sub = Subscription::new(id, config.clone(), base_url(head), ctx.now_ms(), incarnation);
    ctx.subs.owned.borrow_mut().insert(id.to_string(), sub);
    // Index first, then backfill: an append in between is seen by both, and
    // linking keeps the larger tail.
    index(ctx, id, config.pattern.iter().chain(&config.streams).cloned().collect(), true).await;
    if let Some(pattern) = &config.pattern {
        for (path, tail) in tails_under(ctx, &glob::literal_prefix(pattern)).await {
            if glob::matches(pattern, &path) && !path.starts_with("__ds/") {
                if let Some(sub) = ctx.subs.owned.borrow_mut().get_mut(id) {
                    sub.link(&path, false, Some(tail), tail);
                }
            }
        }
    }
    link_explicit(ctx, id, &config.streams).await;
    wake::maybe_wake(ctx, id);
    if let Err(e) = persist::durable(ctx, id).await {
        // Not durable: the subscription was never made.
        let removed = ctx.subs.owned.borrow_mut().remove(id);
        if let Some(sub) = removed {
            ctx.subs.waking.borrow_mut().remove(id);
            index(ctx, id, registrations(&sub), false).await;
        }
        return Err(e);
    }
    let owned = ctx.subs.owned.borrow();
    let sub = owned.get(id).ok_or_else(SubError::not_found)?;
    Ok(json(201, render(ctx, head, sub)))
}

pub(super) async fn delete(ctx: &Rc<Ctx>, id: &str) -> Result<Response, SubError> {
    let removed = ctx.subs.owned.borrow_mut().remove(id);
    ctx.subs.waking.borrow_mut().remove(id);
    if let Some(sub) = removed {
        persist::durable(ctx, id).await?;
        index(ctx, id, registrations(&sub), false).await;
    }
    Ok(Response::new(204))
}

pub(super) async fn add_streams(ctx: &Rc<Ctx>, id: &str, body: &[u8]) -> Result<Response, SubError> {
    let v = body_json(body)?;
    let streams = parse_streams(&v["streams"])?;
    if streams.is_empty() {
        return Err(SubError::invalid("streams must be a non-empty array of stream paths"));
    }
    let new: Vec<String> = {
        let owned = ctx.subs.owned.borrow();
        let sub = owned.get(id).ok_or_else(SubError::not_found)?;
        let new: Vec<String> = streams.into_iter().filter(|p| !sub.links.get(p).is_some_and(|l| l.explicit)).collect();
        let explicit = sub.links.values().filter(|l| l.explicit).count();
        if explicit + new.len() > MAX_EXPLICIT_STREAMS {
            return Err(SubError::invalid("a subscription follows at most 1000 explicit streams"));
        }
        new
    };
    index(ctx, id, new.clone(), true).await;
    link_explicit(ctx, id, &new).await;
    wake::maybe_wake(ctx, id);
    persist::durable(ctx, id).await?;
    Ok(Response::new(204))
}

pub(super) async fn remove_stream(ctx: &Rc<Ctx>, id: &str, path: &str) -> Result<Response, SubError> {
    let path = normalize_path(path)?;
    let was_explicit = {
        let mut owned = ctx.subs.owned.borrow_mut();
        let sub = owned.get_mut(id).ok_or_else(SubError::not_found)?;
        let was = sub.links.get(&path).is_some_and(|l| l.explicit);
        sub.unlink_explicit(&path);
        was
    };
    if was_explicit {
        persist::durable(ctx, id).await?;
        index(ctx, id, vec![path], false).await;
    }
    Ok(Response::new(204))
}

/// At start, before any client: loads the subscriptions this shard owns,
/// registers their patterns everywhere, refreshes tails and resumes wakes
/// (a retry keeps its schedule; an in-flight delivery is sent again).
pub async fn recover(ctx: &Rc<Ctx>) {
    let states: Vec<(String, Vec<u8>)> =
        ctx.shard.store.borrow().subscriptions.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let now = ctx.now_ms();
    for (id, bytes) in states {
        let Some(mut sub) = crate::subscriptions::stored::decode(&bytes) else {
            tracing::warn!(shard = ctx.id, subscription = %id, "a subscription record does not decode; skipped");
            continue;
        };
        if sub.wake.is_some() && sub.retry_at.is_none() && sub.wake.as_ref().is_some_and(|w| w.lease_until.is_none()) {
            if let crate::subscriptions::model::Delivery::Webhook { .. } = sub.config.delivery {
                sub.retry_at = Some(now);
            }
        }
        let patterns = registrations(&sub);
        let has_wake = sub.wake.is_some();
        ctx.subs.owned.borrow_mut().insert(id.clone(), sub);
        index(ctx, &id, patterns, true).await;
        refresh_tails(ctx, &id).await;
        if has_wake {
            ctx.subs.waking.borrow_mut().insert(id.clone());
            ctx.subs.wakes.notify();
        } else {
            wake::maybe_wake(ctx, &id);
        }
    }
}
