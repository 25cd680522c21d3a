//! Settling wakes: webhook callbacks and pull-wake claim, ack and release,
//! each fenced by its token, wake id and generation against the current
//! wake, and answered once durable.

use super::answers::{body_json, json};
use super::{persist, wake};
use crate::ctx::Ctx;
use crate::subscriptions::bounds::{MAX_ACKS, MAX_WORKER_BYTES};
use crate::subscriptions::model::{Ack, Delivery, SubError, Subscription};
use sluice::http::{headers as h, Head, Response};
use std::rc::Rc;

fn bearer(head: &Head) -> Option<&str> {
    head.header(h::AUTHORIZATION)?.strip_prefix("Bearer ")
}

/// The wake fields of a callback, ack or release body.
struct Settle {
    wake_id: Option<String>,
    generation: Option<u64>,
    acks: Vec<Ack>,
    done: bool,
}

fn parse_settle(body: &[u8]) -> Result<Settle, SubError> {
    let v = body_json(body)?;
    let mut acks = Vec::new();
    if let Some(list) = v["acks"].as_array() {
        if list.len() > MAX_ACKS {
            return Err(SubError::invalid("at most 1000 acks per request"));
        }
        for a in list {
            let stream = a["stream"]
                .as_str()
                .or(a["path"].as_str())
                .ok_or_else(|| SubError::invalid("an ack needs stream and offset"))?;
            let offset = a["offset"].as_str().ok_or_else(|| SubError::invalid("an ack needs stream and offset"))?;
            acks.push(Ack { stream: stream.trim_matches('/').to_string(), offset: offset.to_string() });
        }
    } else if !v["acks"].is_null() {
        return Err(SubError::invalid("acks must be an array"));
    }
    Ok(Settle {
        wake_id: v["wake_id"].as_str().map(str::to_string),
        generation: v["generation"].as_u64(),
        acks,
        done: v["done"] == serde_json::json!(true),
    })
}

/// Verifies the bearer token and the wake it names against the current wake.
fn fence(ctx: &Ctx, head: &Head, sub: &Subscription, s: &Settle) -> Result<(), SubError> {
    let token =
        bearer(head).ok_or_else(|| SubError::new(401, "TOKEN_INVALID", "missing Authorization: Bearer <token>"))?;
    let generation = ctx.subs.keys.token_generation(token, &sub.id, sub.incarnation);
    sub.fence(generation, s.wake_id.as_deref(), s.generation)
}

/// A webhook callback (`pull` false) or a pull-wake ack (`pull` true):
/// acks move cursors and extend the lease; `done` ends the wake.
pub(super) async fn settle(
    ctx: &Rc<Ctx>,
    head: &Head,
    id: &str,
    body: &[u8],
    pull: bool,
) -> Result<Response, SubError> {
    let s = parse_settle(body)?;
    {
        let mut owned = ctx.subs.owned.borrow_mut();
        let sub = owned.get_mut(id).ok_or_else(SubError::not_found)?;
        if pull != matches!(sub.config.delivery, Delivery::PullWake { .. }) {
            return Err(SubError::invalid(if pull {
                "subscription is not pull-wake"
            } else {
                "subscription is not a webhook"
            }));
        }
        fence(ctx, head, sub, &s)?;
        sub.apply_acks(&s.acks)?;
        sub.extend_lease(ctx.now_ms());
        // The ticker sleeps until the next lease end.
        ctx.subs.wakes.notify();
    }
    let next_wake = s.done && wake::finish_wake(ctx, id);
    persist::durable(ctx, id).await?;
    Ok(json(200, serde_json::json!({ "ok": true, "next_wake": next_wake })))
}

pub(super) async fn claim(ctx: &Rc<Ctx>, id: &str, body: &[u8]) -> Result<Response, SubError> {
    let v = body_json(body)?;
    let worker = v["worker"]
        .as_str()
        .filter(|w| !w.is_empty() && w.len() <= MAX_WORKER_BYTES)
        .ok_or_else(|| SubError::invalid("worker must be a non-empty string of at most 256 bytes"))?
        .to_string();
    {
        let owned = ctx.subs.owned.borrow();
        let sub = owned.get(id).ok_or_else(SubError::not_found)?;
        if !matches!(sub.config.delivery, Delivery::PullWake { .. }) {
            return Err(SubError::invalid("subscription is not pull-wake"));
        }
        if let Some(holder) = sub.wake.as_ref().and_then(|w| w.holder.clone()) {
            let mut e = SubError::new(409, "ALREADY_CLAIMED", "another worker holds the wake");
            e.holder = Some(holder);
            return Err(e);
        }
        if sub.wake.is_none() && !sub.pending() {
            return Err(SubError::new(409, "NO_PENDING_WORK", "no stream has unacknowledged data"));
        }
    }
    wake::maybe_wake(ctx, id);
    {
        let mut owned = ctx.subs.owned.borrow_mut();
        let sub = owned.get_mut(id).ok_or_else(SubError::not_found)?;
        sub.extend_lease(ctx.now_ms());
        // The ticker sleeps until the next lease end.
        ctx.subs.wakes.notify();
        let w = sub.wake.as_mut().expect("a wake is open after maybe_wake with pending work");
        w.holder = Some(worker);
    }
    persist::durable(ctx, id).await?;
    let owned = ctx.subs.owned.borrow();
    // Deleted while the claim was being made durable.
    let sub = owned.get(id).ok_or_else(SubError::not_found)?;
    let wake_id = sub.wake.as_ref().map(|w| w.id.clone());
    Ok(json(
        200,
        serde_json::json!({
            "wake_id": wake_id,
            "generation": sub.generation,
            "token": ctx.subs.keys.token(&sub.id, sub.incarnation, sub.generation),
            "streams": sub.stream_infos(true),
            "lease_ttl_ms": sub.config.lease_ttl_ms,
        }),
    ))
}

pub(super) async fn release(ctx: &Rc<Ctx>, head: &Head, id: &str, body: &[u8]) -> Result<Response, SubError> {
    let s = parse_settle(body)?;
    {
        let owned = ctx.subs.owned.borrow();
        let sub = owned.get(id).ok_or_else(SubError::not_found)?;
        if !matches!(sub.config.delivery, Delivery::PullWake { .. }) {
            return Err(SubError::invalid("subscription is not pull-wake"));
        }
        fence(ctx, head, sub, &s)?;
    }
    wake::finish_wake(ctx, id);
    persist::durable(ctx, id).await?;
    Ok(Response::new(204))
}
