//! The reserved `/v1/stream/__ds/...` surface: routing, the JSON answers
//! and refusals (`{ "error": { "code", "message" } }`), reading a
//! subscription, and the JWK Set of the webhook signing keys. Changes are in
//! `manage` (subscriptions, membership) and `settle` (callbacks, pull-wake).

use super::limits::MAX_BODY_BYTES;
use super::manage::{add_streams, create, delete, remove_stream};
use super::model::{Delivery, SubError, Subscription};
use super::settle::{claim, release, settle};
use crate::ctx::Ctx;
use crate::route::subs::{Action, SubRoute};
use sluice::http::{headers as h, Head, Method, Response};
use sluice_shards::core::ttl::format_rfc3339;
use std::rc::Rc;

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
    #[test]
    fn percent_encoding() {
        assert_eq!(super::super::model::percent_encode("a/b c"), "a%2Fb%20c");
    }
}
