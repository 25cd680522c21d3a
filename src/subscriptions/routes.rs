//! The reserved `/v1/stream/__ds/...` surface: subscriptions (PUT, GET,
//! DELETE), explicit membership, webhook callbacks, pull-wake claim, ack
//! and release, and the JWK Set of the webhook signing keys. Answers are
//! JSON; refusals are `{ "error": { "code", "message" } }`.

use super::glob;
use super::limits::{
    MAX_ACKS, MAX_BODY_BYTES, MAX_EXPLICIT_STREAMS, MAX_SUBSCRIPTIONS_PER_SHARD, MAX_SUBSCRIPTION_ID_BYTES,
    MAX_WORKER_BYTES,
};
use super::mesh::SubsReq;
use super::model::{normalize_path, parse_streams, Ack, Config, Delivery, SubError, Subscription};
use super::{owner_shard, persist, wake};
use crate::mesh::{BucketRep, BucketReq};
use crate::shard::Ctx;
use sluice::http::{headers as h, Head, Method, Response};
use sluice_shards::core::ttl::format_rfc3339;
use sluice_shards::ids::{stream_shard, BUILTIN_BUCKET};
use std::rc::Rc;

/// What a `__ds` request addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubRoute {
    /// `__ds/jwks.json`
    Jwks,
    /// `__ds/subscriptions/{id}[/...]`
    Sub { id: String, action: Action },
    /// Anything else under `__ds`: reserved, not a stream.
    Reserved,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Base,
    Streams,
    Stream(String),
    Callback,
    Claim,
    Ack,
    Release,
}

impl SubRoute {
    /// Routes the segments after `/v1/stream/__ds`.
    pub fn parse(rest: &[String]) -> SubRoute {
        let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
        let (id, tail) = match rest.as_slice() {
            ["jwks.json"] => return SubRoute::Jwks,
            ["subscriptions", id, tail @ ..] if !id.is_empty() && id.len() <= MAX_SUBSCRIPTION_ID_BYTES => (id, tail),
            _ => return SubRoute::Reserved,
        };
        let action = match tail {
            [] => Action::Base,
            ["streams"] => Action::Streams,
            ["streams", path @ ..] => Action::Stream(path.join("/")),
            ["callback"] => Action::Callback,
            ["claim"] => Action::Claim,
            ["ack"] => Action::Ack,
            ["release"] => Action::Release,
            _ => return SubRoute::Reserved,
        };
        SubRoute::Sub { id: id.to_string(), action }
    }

    /// The shard that serves it (subscriptions live on their owner).
    pub fn owner(&self, shards: usize) -> Option<usize> {
        match self {
            SubRoute::Sub { id, .. } => Some(owner_shard(id, shards)),
            _ => None,
        }
    }
}

fn json(status: u16, v: serde_json::Value) -> Response {
    Response::new(status).header(h::CONTENT_TYPE, "application/json").with_body(v.to_string().into_bytes())
}

fn refusal(e: SubError) -> Response {
    let mut err = serde_json::json!({ "code": e.code, "message": e.message });
    if let Some(holder) = e.holder {
        err["current_holder"] = holder.into();
    }
    json(e.status, serde_json::json!({ "error": err }))
}

fn body_json(body: &[u8]) -> Result<serde_json::Value, SubError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(SubError::new(413, "INVALID_REQUEST", "body is larger than 256 KiB"));
    }
    if body.is_empty() {
        return Ok(serde_json::json!({}));
    }
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|_| SubError::invalid("body must be JSON"))?;
    if v.is_object() {
        Ok(v)
    } else {
        Err(SubError::invalid("body must be a JSON object"))
    }
}

/// `http://host` of the request (callback and JWKS URLs point back here).
fn base_url(head: &Head) -> String {
    format!("http://{}", head.header(h::HOST).unwrap_or("localhost"))
}

pub async fn serve(ctx: &Rc<Ctx>, head: &Head, route: SubRoute, body: Vec<u8>) -> Response {
    let (id, action) = match route {
        SubRoute::Jwks => return jwks(ctx, head.method),
        SubRoute::Reserved => {
            return refusal(SubError::invalid(
                "stream ids starting with '__ds/' are reserved for the subscription APIs",
            ))
        }
        SubRoute::Sub { id, action } => (id, action),
    };
    let done = match (action, head.method) {
        (Action::Base, Method::Put) => create(ctx, head, &id, &body).await,
        (Action::Base, Method::Get) => read(ctx, head, &id),
        (Action::Base, Method::Delete) => delete(ctx, &id).await,
        (Action::Streams, Method::Post) => add_streams(ctx, &id, &body).await,
        (Action::Stream(path), Method::Delete) => remove_stream(ctx, &id, &path).await,
        (Action::Callback, Method::Post) => settle(ctx, head, &id, &body, false).await,
        (Action::Ack, Method::Post) => settle(ctx, head, &id, &body, true).await,
        (Action::Claim, Method::Post) => claim(ctx, &id, &body).await,
        (Action::Release, Method::Post) => release(ctx, head, &id, &body).await,
        _ => Err(SubError::new(405, "INVALID_REQUEST", "method not allowed on this resource")),
    };
    done.unwrap_or_else(refusal)
}

fn jwks(ctx: &Ctx, method: Method) -> Response {
    if !matches!(method, Method::Get | Method::Head) {
        return refusal(SubError::new(405, "INVALID_REQUEST", "method not allowed on this resource"));
    }
    Response::new(200)
        .header(h::CONTENT_TYPE, "application/jwk-set+json")
        .header(h::CACHE_CONTROL, "public, max-age=300")
        .with_body(ctx.subs.keys.jwks().to_string().into_bytes())
}

/// A subscription as GET and PUT show it.
fn render(ctx: &Ctx, head: &Head, sub: &Subscription) -> serde_json::Value {
    let c = &sub.config;
    let mut v = serde_json::json!({
        "id": sub.id,
        "subscription_id": sub.id,
        "type": if matches!(c.delivery, Delivery::Webhook { .. }) { "webhook" } else { "pull-wake" },
        "streams": sub.stream_infos(false),
        "lease_ttl_ms": c.lease_ttl_ms,
        "created_at": format_rfc3339(sub.created_ms),
        "status": if sub.retries > 0 { "failed" } else { "active" },
        "generation": sub.generation,
    });
    if let Some(p) = &c.pattern {
        v["pattern"] = p.clone().into();
    }
    if let Some(d) = &c.description {
        v["description"] = d.clone().into();
    }
    match &c.delivery {
        Delivery::Webhook { url } => {
            v["webhook"] = serde_json::json!({
                "url": url,
                "signing": {
                    "alg": "ed25519",
                    "kid": ctx.subs.keys.kid,
                    "jwks_url": format!("{}/v1/stream/__ds/jwks.json", base_url(head)),
                },
            });
        }
        Delivery::PullWake { wake_stream } => v["wake_stream"] = wake_stream.clone().into(),
    }
    if let Some(at) = sub.retry_at {
        v["next_attempt_at"] = format_rfc3339(at).into();
    }
    v
}

fn read(ctx: &Ctx, head: &Head, id: &str) -> Result<Response, SubError> {
    let owned = ctx.subs.owned.borrow();
    let sub = owned.get(id).ok_or_else(SubError::not_found)?;
    Ok(json(200, render(ctx, head, sub)))
}

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

async fn create(ctx: &Rc<Ctx>, head: &Head, id: &str, body: &[u8]) -> Result<Response, SubError> {
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
    let incarnation = u64::from_le_bytes(super::signing::random32()[..8].try_into().expect("8 bytes"));
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
        if let Some(sub) = ctx.subs.owned.borrow_mut().remove(id) {
            ctx.subs.waking.borrow_mut().remove(id);
            index(ctx, id, registrations(&sub), false).await;
        }
        return Err(e);
    }
    let owned = ctx.subs.owned.borrow();
    let sub = owned.get(id).ok_or_else(SubError::not_found)?;
    Ok(json(201, render(ctx, head, sub)))
}

async fn delete(ctx: &Rc<Ctx>, id: &str) -> Result<Response, SubError> {
    let removed = ctx.subs.owned.borrow_mut().remove(id);
    ctx.subs.waking.borrow_mut().remove(id);
    if let Some(sub) = removed {
        persist::durable(ctx, id).await?;
        index(ctx, id, registrations(&sub), false).await;
    }
    Ok(Response::new(204))
}

async fn add_streams(ctx: &Rc<Ctx>, id: &str, body: &[u8]) -> Result<Response, SubError> {
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

async fn remove_stream(ctx: &Rc<Ctx>, id: &str, path: &str) -> Result<Response, SubError> {
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
async fn settle(ctx: &Rc<Ctx>, head: &Head, id: &str, body: &[u8], pull: bool) -> Result<Response, SubError> {
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
    }
    let next_wake = s.done && wake::finish_wake(ctx, id);
    persist::durable(ctx, id).await?;
    Ok(json(200, serde_json::json!({ "ok": true, "next_wake": next_wake })))
}

async fn claim(ctx: &Rc<Ctx>, id: &str, body: &[u8]) -> Result<Response, SubError> {
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

async fn release(ctx: &Rc<Ctx>, head: &Head, id: &str, body: &[u8]) -> Result<Response, SubError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(path: &str) -> SubRoute {
        let segs: Vec<String> = path.split('/').map(str::to_string).collect();
        SubRoute::parse(&segs)
    }

    #[test]
    fn routes() {
        assert_eq!(parse("jwks.json"), SubRoute::Jwks);
        assert_eq!(parse("subscriptions/s1"), SubRoute::Sub { id: "s1".into(), action: Action::Base });
        assert_eq!(
            parse("subscriptions/s1/streams/a/b"),
            SubRoute::Sub { id: "s1".into(), action: Action::Stream("a/b".into()) }
        );
        assert_eq!(parse("subscriptions/s1/claim"), SubRoute::Sub { id: "s1".into(), action: Action::Claim });
        assert_eq!(parse("subscriptions/s1/nope"), SubRoute::Reserved);
        assert_eq!(parse("anything"), SubRoute::Reserved);
        assert_eq!(super::super::model::percent_encode("a/b c"), "a%2Fb%20c");
    }
}
