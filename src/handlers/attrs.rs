//! Stream attributes (extension section 5): `GET`/`PUT {stream}/attrs`.

use super::lookup::bucket_exists;
use super::refusal::refusal;
use crate::ctx::Ctx;
use crate::edge_limits::MAX_ATTRS_BYTES;
use sluice::http::error::HttpError;
use sluice::http::headers as h;
use sluice::http::{Head, Method, Response};
use sluice_shards::core::Error;
use sluice_shards::store::StreamKey;
use std::rc::Rc;

pub async fn attrs(ctx: &Rc<Ctx>, head: &Head, key: &StreamKey, body: &[u8]) -> Response {
    let done = match head.method {
        Method::Get => read(ctx, key),
        Method::Put => replace(ctx, head, key, body).await,
        _ => return HttpError::MethodNotAllowed.into(),
    };
    done.unwrap_or_else(|e| refusal(ctx, key, e))
}

fn read(ctx: &Ctx, key: &StreamKey) -> Result<Response, Error> {
    bucket_exists(ctx, key)?;
    let now = ctx.now_ms();
    let mut st = ctx.shard.store.borrow_mut();
    let e = st.live(key, now).ok_or(Error::NoStream)?;
    let body = if e.state.attrs().is_empty() { b"{}".to_vec() } else { e.state.attrs().to_vec() };
    Ok(Response::new(200).header(h::CONTENT_TYPE, "application/json").with_body(body))
}

async fn replace(ctx: &Ctx, head: &Head, key: &StreamKey, body: &[u8]) -> Result<Response, Error> {
    if !head.header(h::CONTENT_TYPE).is_some_and(sluice_shards::core::is_json) {
        return Err(Error::Invalid("attributes need Content-Type: application/json"));
    }
    let attrs = canonical_attrs(body)?;
    bucket_exists(ctx, key)?;
    ctx.shard.set_attrs(key, attrs, ctx.now_ms()).await?;
    Ok(Response::new(204))
}

/// Validates an attribute object and keeps only `title` and `metadata`.
/// `{}` (or no fields) is stored as no attributes.
pub fn canonical_attrs(raw: &[u8]) -> Result<Vec<u8>, Error> {
    let bad = Error::Invalid;
    if raw.len() > MAX_ATTRS_BYTES {
        return Err(bad("attribute object exceeds 16 KiB"));
    }
    let v: serde_json::Value = serde_json::from_slice(raw).map_err(|_| bad("attributes are not valid JSON"))?;
    let obj = v.as_object().ok_or(bad("attributes must be a JSON object"))?;
    let mut out = serde_json::Map::new();
    if let Some(title) = obj.get("title") {
        if !title.is_string() {
            return Err(bad("attribute 'title' must be a string"));
        }
        out.insert("title".into(), title.clone());
    }
    if let Some(meta) = obj.get("metadata") {
        if !meta.is_object() {
            return Err(bad("attribute 'metadata' must be an object"));
        }
        out.insert("metadata".into(), meta.clone());
    }
    if out.is_empty() {
        return Ok(Vec::new());
    }
    Ok(serde_json::to_vec(&serde_json::Value::Object(out)).expect("serializable"))
}
