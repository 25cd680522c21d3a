//! The reserved `/v1/stream/__ds/...` surface: routing, the JSON answers
//! and refusals (`{ "error": { "code", "message" } }`), reading a
//! subscription, and the JWK Set of the webhook signing keys. Changes are in
//! `manage` (subscriptions, membership) and `settle` (callbacks, pull-wake).

use super::limits::{MAX_BODY_BYTES, MAX_SUBSCRIPTION_ID_BYTES};
use super::manage::{add_streams, create, delete, remove_stream};
use super::model::{Delivery, SubError, Subscription};
use super::owner_shard;
use super::settle::{claim, release, settle};
use crate::shard::Ctx;
use sluice::http::{headers as h, Head, Method, Response};
use sluice_shards::core::ttl::format_rfc3339;
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

pub(super) fn json(status: u16, v: serde_json::Value) -> Response {
    Response::new(status).header(h::CONTENT_TYPE, "application/json").with_body(v.to_string().into_bytes())
}

fn refusal(e: SubError) -> Response {
    let mut err = serde_json::json!({ "code": e.code, "message": e.message });
    if let Some(holder) = e.holder {
        err["current_holder"] = holder.into();
    }
    json(e.status, serde_json::json!({ "error": err }))
}

pub(super) fn body_json(body: &[u8]) -> Result<serde_json::Value, SubError> {
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
pub(super) fn base_url(head: &Head) -> String {
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
pub(super) fn render(ctx: &Ctx, head: &Head, sub: &Subscription) -> serde_json::Value {
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
