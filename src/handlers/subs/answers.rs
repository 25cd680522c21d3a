//! The JSON of the reserved `__ds` surface: answers, refusals
//! (`{ "error": { "code", "message" } }`), request bodies, and a
//! subscription as the protocol shows it.

use crate::ctx::Ctx;
use crate::subscriptions::bounds::MAX_BODY_BYTES;
use crate::subscriptions::model::{Delivery, SubError, Subscription};
use sluice::http::{headers as h, Head, Response};
use sluice_shards::core::ttl::format_rfc3339;

pub(super) fn json(status: u16, v: serde_json::Value) -> Response {
    Response::new(status).header(h::CONTENT_TYPE, "application/json").with_body(v.to_string().into_bytes())
}

pub(super) fn refusal(e: SubError) -> Response {
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

/// A subscription as the protocol shows it.
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
