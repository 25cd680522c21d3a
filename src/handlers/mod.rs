//! Routing and the protocol's HTTP surface: maps requests onto shard
//! operations and shard outcomes onto status codes and headers.

pub mod attrs;
pub mod batch;
pub mod bootstrap;
pub mod bucket;
pub mod fork;
pub mod read;
pub mod refuse;
pub mod snapshot;
pub mod stream;
pub mod tokens;
pub mod ui;

use crate::auth::cors::Cors;
use crate::shard::Ctx;
use crate::sse::SseRequest;
use crate::subscriptions::routes::SubRoute;
use sluice::http::url::Target;
use sluice::http::{date, headers as h};
use sluice::http::{Head, Method, Response};
use sluice_shards::core::Error;
use sluice_shards::ids::{stream_shard, valid_bucket_id, validate_stream_id, BUILTIN_BUCKET, RESERVED_STREAM_ID};
use sluice_shards::store::StreamKey;
use std::rc::Rc;

/// What a request addresses.
#[derive(Debug)]
pub enum Route {
    /// `GET /v1/healthz`: liveness and readiness (any answer comes after
    /// recovery); also the HTTP ceiling for benchmarks.
    Health,
    /// `GET /v1/metrics`: Prometheus text format.
    Metrics,
    Bucket(String),
    BucketList(String),
    /// A stream and the sub-resource path after it (bucketed surface only).
    Stream(StreamKey, Vec<String>),
    /// `/v1/ui...`: the console and its data.
    Ui(ui::Page),
    /// `/v1/tokens`: mint a signed read token for this scope.
    Tokens(crate::auth::signed::ReadScope),
    /// `/v1/stream/__ds/...`: the reserved subscription APIs.
    Subs(SubRoute),
    Bad(Error),
    NotFound,
}

impl Route {
    /// The shard that must serve this request, if it is stream-scoped.
    pub fn owner(&self, shards: usize) -> Option<usize> {
        match self {
            Route::Stream((b, s), _) => Some(stream_shard(b, s, shards)),
            Route::Subs(r) => r.owner(shards),
            _ => None,
        }
    }

    /// The `route` label of the request metrics (a small fixed set).
    /// A stream's own requests are labelled by operation (a fixed set), so
    /// appends, catch-up reads and long waits land in their own series.
    pub fn label(&self, method: Method, target: &Target) -> &'static str {
        match self {
            Route::Health => "healthz",
            Route::Metrics => "metrics",
            Route::Tokens(_) => "tokens",
            Route::Ui(_) => "ui",
            Route::Bucket(_) => "bucket",
            Route::BucketList(_) => "bucket_streams",
            Route::Stream(_, sub) => match sub.first().map(String::as_str) {
                None => match (method, target.param("live")) {
                    (Method::Post, _) => "append",
                    (Method::Put, _) => "create",
                    (Method::Delete, _) => "delete",
                    (Method::Head, _) => "metadata",
                    (Method::Get, Some("long-poll")) => "read_long_poll",
                    (Method::Get, Some("sse")) => "read_sse",
                    (Method::Get, _) => "read",
                    _ => "stream_other",
                },
                Some("attrs") => "attrs",
                Some("snapshot") => "snapshot",
                Some("retention") => "retention",
                Some("bootstrap") => "bootstrap",
                Some("append-batch") => "append_batch",
                Some(_) => "stream_other",
            },
            Route::Subs(_) => "subscriptions",
            Route::Bad(_) => "bad_request",
            Route::NotFound => "not_found",
        }
    }
}

/// The URL surface a request came through; it decides how JSON streams read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Surface {
    /// `/v1/stream/{stream_id}`: the base protocol, JSON reads are JSON arrays.
    Base,
    /// `/{bucket_id}/{stream_id}`: the extensions, JSON reads are canonical NDJSON.
    Bucketed,
}

impl Surface {
    pub fn of(t: &Target) -> Surface {
        if t.segments.first().is_some_and(|s| s == "v1") {
            Surface::Base
        } else {
            Surface::Bucketed
        }
    }
}

/// How a request is answered.
pub enum Reply {
    Full(Response),
    Sse(SseRequest),
    /// A long catch-up read of a byte stream, streamed from the store.
    Catchup(crate::catchup::Catchup),
}

pub fn route(head: &Head, t: &Target) -> Route {
    let seg = &t.segments;
    match seg.first().map(String::as_str) {
        None => Route::NotFound,
        Some("v1") => match seg.get(1).map(String::as_str) {
            Some("healthz") if seg.len() == 2 => Route::Health,
            Some("metrics") if seg.len() == 2 => Route::Metrics,
            Some("tokens") if seg.len() == 2 => tokens::route(head, t),
            Some("ui") => ui::route(&seg[2..]),
            Some("stream") if seg.len() >= 3 && seg[2] == crate::subscriptions::RESERVED => {
                Route::Subs(SubRoute::parse(&seg[3..]))
            }
            Some("stream") if seg.len() >= 3 => {
                let id = seg[2..].join("/");
                match validate_stream_id(BUILTIN_BUCKET, &id) {
                    Ok(()) => Route::Stream((BUILTIN_BUCKET.to_string(), id), Vec::new()),
                    Err(e) => Route::Bad(e),
                }
            }
            _ => Route::NotFound,
        },
        Some(bucket) => {
            if !valid_bucket_id(bucket) {
                return Route::Bad(Error::Invalid("invalid bucket id (must match ^[a-z0-9_-]{4,64}$)"));
            }
            match seg.len() {
                1 => Route::Bucket(bucket.to_string()),
                2 if seg[1] == RESERVED_STREAM_ID => Route::BucketList(bucket.to_string()),
                2..=4 => match validate_stream_id(bucket, &seg[1]) {
                    Ok(()) => Route::Stream((bucket.to_string(), seg[1].clone()), seg[2..].to_vec()),
                    Err(e) => Route::Bad(e),
                },
                _ => Route::NotFound,
            }
        }
    }
}

/// Headers every response carries: `Date`, browser hardening and the request's CORS answer.
pub fn finish(mut r: Response, cors: &Cors) -> Response {
    r.set(h::DATE, date::now());
    r.set(h::X_CONTENT_TYPE_OPTIONS, "nosniff");
    r.set(h::CROSS_ORIGIN_RESOURCE_POLICY, "cross-origin");
    cors.apply(&mut r);
    r
}

/// Gathers every shard's snapshot and renders them.
async fn metrics(ctx: &Rc<Ctx>) -> Response {
    let mut shards = Vec::with_capacity(ctx.shards);
    for rep in ctx.ask_all(|| crate::mesh::BucketReq::Metrics).await {
        match rep {
            crate::mesh::BucketRep::Metrics(s) => shards.push(*s),
            _ => return Error::Unavailable("a shard did not answer").into(),
        }
    }
    let body = crate::metrics::render(&shards);
    Response::new(200).header(h::CONTENT_TYPE, crate::metrics::CONTENT_TYPE).with_body(body.into_bytes())
}

/// Serves an admitted request (preflights are answered by the access gate).
pub async fn handle(ctx: &Rc<Ctx>, head: &Head, t: &Target, route: Route, body: Vec<u8>) -> Reply {
    if let Route::Stream(key, _) = &route {
        // Responses, reads and refusals alike, observe only durable state.
        if let Err(e) = ctx.shard.settle(key).await {
            return Reply::Full(refuse::refuse(ctx, key, Error::Log(e)));
        }
    }
    let resp = match route {
        // The accept loops start only after every shard has recovered, so
        // any answer here means the server is ready.
        Route::Health => match head.method {
            Method::Get | Method::Head => {
                // 200 with "degraded: ..." while the object store fails (issue 27).
                Response::new(200).header(h::CONTENT_TYPE, "text/plain").with_body(crate::tier::status::health_body())
            }
            _ => Error::MethodNotAllowed.into(),
        },
        Route::Metrics => match head.method {
            Method::Get | Method::Head => Box::pin(metrics(ctx)).await,
            _ => Error::MethodNotAllowed.into(),
        },
        Route::Tokens(scope) => tokens::mint(ctx, head, t, &scope),
        Route::Ui(page) => Box::pin(ui::serve(ctx, head.method, page)).await,
        Route::Bad(e) => e.into(),
        Route::NotFound => Error::NotFound("no such resource").into(),
        Route::Bucket(b) => Box::pin(bucket::bucket(ctx, head.method, &b)).await,
        Route::Subs(r) => Box::pin(crate::subscriptions::routes::serve(ctx, head, r, body)).await,
        Route::BucketList(b) => match head.method {
            Method::Get => Box::pin(bucket::list(ctx, &b, t)).await,
            _ => Error::MethodNotAllowed.into(),
        },
        Route::Stream(key, sub) => {
            let json_before = stream::json_stream(ctx, &key);
            let reply = stream_operation(ctx, head, t, &key, &sub, body).await;
            return advertise_records(reply, json_before || stream::json_stream(ctx, &key));
        }
    };
    Reply::Full(resp)
}

/// A request to a stream or one of its sub-resources.
async fn stream_operation(
    ctx: &Rc<Ctx>,
    head: &Head,
    t: &Target,
    key: &StreamKey,
    sub: &[String],
    body: Vec<u8>,
) -> Reply {
    if sub.is_empty() {
        return stream::stream(ctx, head, t, key, body).await;
    }
    // Boxed: see `stream::stream`.
    Box::pin(sub_resource(ctx, head, t, key, sub, body)).await
}

/// A request to one of a stream's sub-resources (bucketed surface).
async fn sub_resource(ctx: &Rc<Ctx>, head: &Head, t: &Target, key: &StreamKey, sub: &[String], body: Vec<u8>) -> Reply {
    if !ctx.shard.store.borrow().bucket_exists(&key.0) {
        return Reply::Full(Error::NoBucket.into());
    }
    let sub: Vec<&str> = sub.iter().map(String::as_str).collect();
    let resp = match sub.as_slice() {
        ["attrs"] => attrs::attrs(ctx, head, key, body).await,
        ["snapshot", rest @ ..] if rest.len() <= 1 => {
            snapshot::snapshot(ctx, head, t, key, rest.first().copied(), body).await
        }
        ["retention", rest @ ..] if rest.len() <= 1 => {
            snapshot::retention(ctx, head, t, key, rest.first().copied()).await
        }
        ["bootstrap"] => bootstrap::bootstrap(ctx, head, t, key).await,
        ["append-batch"] => batch::append_batch(ctx, head, key, &body).await,
        _ => Error::NotFound("no such stream sub-resource").into(),
    };
    Reply::Full(resp)
}

/// Every response about a JSON stream, refusals included, names the JSON
/// record coordinates extension (`Stream-Extensions`); no other does.
fn advertise_records(reply: Reply, json: bool) -> Reply {
    match reply {
        Reply::Full(mut r) if json && !r.headers.iter().any(|(n, _)| *n == h::STREAM_EXTENSIONS) => {
            r.set(h::STREAM_EXTENSIONS, stream::JSON_RECORDS);
            Reply::Full(r)
        }
        other => other,
    }
}
