//! The console at `/v1/ui`: one static page built into the binary
//! (`console.html`: no build step, no external assets), and the operator
//! data it shows beside `/v1/metrics`, `GET /v1/ui/streams` (every
//! bucket's streams). The page holds nothing secret, so it is served to
//! anyone the mode lets in; it takes a token (`#token=` or a form field)
//! and sends it with `fetch` as `Authorization`: the listing and the
//! metrics need `operator`, a stream's records and live tail `read` on
//! its bucket.

use super::bucket::{json, listing};
use crate::ctx::Ctx;
use crate::edge_limits::MAX_CONSOLE_BUCKETS;
use crate::route::Page;
use sluice::http::error::HttpError;
use sluice::http::url::Target;
use sluice::http::{headers as h, Method, Response};
use sluice_shards::core::Error;
use sluice_shards::ids::BUILTIN_BUCKET;
use std::rc::Rc;

/// The page, as built into the binary.
const PAGE: &str = include_str!("console.html");
/// Inline script and style only; requests to this origin only; no framing.
const POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                      img-src data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

pub async fn serve(ctx: &Rc<Ctx>, method: Method, page: Page) -> Response {
    if !matches!(method, Method::Get | Method::Head) {
        return HttpError::MethodNotAllowed.into();
    }
    match page {
        Page::Console => Response::new(200)
            .header(h::CONTENT_TYPE, "text/html; charset=utf-8")
            .header(h::CACHE_CONTROL, "no-cache")
            .header(h::CONTENT_SECURITY_POLICY, POLICY)
            .with_body(PAGE.as_bytes().to_vec()),
        Page::Streams => streams(ctx).await.map(|body| json(200, &body)).unwrap_or_else(Response::from),
    }
}

/// Every bucket (the built-in one first, then by name) with its streams.
async fn streams(ctx: &Rc<Ctx>) -> Result<serde_json::Value, Error> {
    let mut names: Vec<String> = ctx.shard.store.borrow().buckets.keys().cloned().collect();
    names.sort();
    let total = names.len() + 1;
    let everything = Target { segments: Default::default(), query: Vec::new() };
    let mut buckets = Vec::new();
    for name in std::iter::once(BUILTIN_BUCKET.to_string()).chain(names).take(MAX_CONSOLE_BUCKETS) {
        match listing(ctx, &name, &everything).await {
            Ok(b) => buckets.push(b),
            // Deleted meanwhile.
            Err(Error::NoBucket) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(serde_json::json!({ "buckets": buckets, "bucket_count": total }))
}
