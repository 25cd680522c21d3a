//! Stream attributes (extension section 5): `GET`/`PUT {stream}/attrs`.

use super::stream::{missing, store_error};
use crate::shard::Ctx;
use sluice::http::headers as h;
use sluice::http::{Head, Method, Response};
use sluice_shards::store::StreamKey;
use std::rc::Rc;

/// Largest encoded attribute object (spec section 5.1).
const MAX_ATTRS: usize = 16 * 1024;

pub async fn attrs(ctx: &Rc<Ctx>, head: &Head, key: &StreamKey, body: Vec<u8>) -> Response {
    match head.method {
        Method::Get => {
            let now = ctx.now_ms();
            let mut st = ctx.shard.store.borrow_mut();
            if !st.bucket_exists(&key.0) {
                return Response::error(404, "bucket not found");
            }
            match st.live(key, now) {
                Some(e) => {
                    let body = if e.state.attrs.is_empty() { b"{}".to_vec() } else { e.state.attrs.clone() };
                    Response::new(200).header(h::CONTENT_TYPE, "application/json").with_body(body)
                }
                None => {
                    drop(st);
                    missing(ctx, key)
                }
            }
        }
        Method::Put => {
            let json = head.header(h::CONTENT_TYPE).is_some_and(sluice_shards::core::is_json);
            if !json {
                return Response::error(400, "attributes need Content-Type: application/json");
            }
            let attrs = match canonical_attrs(&body) {
                Ok(a) => a,
                Err(why) => return Response::error(400, why),
            };
            if !ctx.shard.store.borrow().bucket_exists(&key.0) {
                return Response::error(404, "bucket not found");
            }
            match ctx.shard.set_attrs(key, attrs, ctx.now_ms()).await {
                Ok(()) => Response::new(204),
                Err(e) => store_error(ctx, key, e),
            }
        }
        _ => Response::error(405, "method not allowed"),
    }
}

/// Validates an attribute object and keeps only `title` and `metadata`.
/// `{}` (or no fields) is stored as no attributes.
pub fn canonical_attrs(raw: &[u8]) -> Result<Vec<u8>, &'static str> {
    if raw.len() > MAX_ATTRS {
        return Err("attribute object exceeds 16 KiB");
    }
    let v: serde_json::Value = serde_json::from_slice(raw).map_err(|_| "attributes are not valid JSON")?;
    let obj = v.as_object().ok_or("attributes must be a JSON object")?;
    let mut out = serde_json::Map::new();
    if let Some(title) = obj.get("title") {
        if !title.is_string() {
            return Err("attribute 'title' must be a string");
        }
        out.insert("title".into(), title.clone());
    }
    if let Some(meta) = obj.get("metadata") {
        if !meta.is_object() {
            return Err("attribute 'metadata' must be an object");
        }
        out.insert("metadata".into(), meta.clone());
    }
    if out.is_empty() {
        return Ok(Vec::new());
    }
    Ok(serde_json::to_vec(&serde_json::Value::Object(out)).expect("serializable"))
}
