//! Routing: what a parsed request addresses ([`Route`]), the shard that
//! serves it, and the URL surface it came through. Pure: no shard state.

pub mod subs;
pub mod tokens;

use crate::subscriptions::RESERVED;
use sluice::http::url::Target;
use sluice::http::{Head, Method};
use sluice_shards::core::Error;
use sluice_shards::ids::{stream_shard, valid_bucket_id, validate_stream_id, BUILTIN_BUCKET, RESERVED_STREAM_ID};
use sluice_shards::store::StreamKey;
use std::borrow::Cow;
use subs::SubRoute;
pub use tokens::ReadScope;

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
    Stream(Box<StreamKey>, Vec<String>),
    /// `/v1/ui...`: the console and its data.
    Ui(Page),
    /// `/v1/tokens`: mint a signed read token for this scope.
    Tokens(ReadScope),
    /// `/v1/stream/__ds/...`: the reserved subscription APIs.
    Subs(SubRoute),
    Bad(Error),
    NotFound,
}

impl Route {
    /// The shard that must serve this request, if it is stream-scoped.
    pub fn owner(&self, shards: usize) -> Option<usize> {
        match self {
            Route::Stream(k, _) => Some(stream_shard(k.bucket(), k.stream(), shards)),
            Route::Subs(r) => r.owner(shards),
            _ => None,
        }
    }

    /// The `route` label of the request metrics (a small fixed set).
    /// A stream's own requests are labelled by operation (a fixed set), so
    /// appends, catch-up reads and long waits land in their own series.
    pub fn label(&self, method: Method, target: &Target<'_>) -> &'static str {
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
    pub fn of(t: &Target<'_>) -> Surface {
        if t.segments.first().is_some_and(|s| s == "v1") {
            Surface::Base
        } else {
            Surface::Bucketed
        }
    }
}

pub fn route(head: &Head, t: &Target<'_>) -> Route {
    let seg = &t.segments;
    match seg.first().map(Cow::as_ref) {
        None => Route::NotFound,
        Some("v1") => match seg.get(1).map(Cow::as_ref) {
            Some("healthz") if seg.len() == 2 => Route::Health,
            Some("metrics") if seg.len() == 2 => Route::Metrics,
            Some("tokens") if seg.len() == 2 => tokens::route(head, t),
            Some("ui") => ui_route(&seg[2..]),
            Some("stream") if seg.len() >= 3 && seg[2] == RESERVED => Route::Subs(SubRoute::parse(&seg[3..])),
            Some("stream") if seg.len() >= 3 => {
                let id: Cow<str> = if seg.len() == 3 { Cow::Borrowed(&seg[2]) } else { seg[2..].join("/").into() };
                match validate_stream_id(BUILTIN_BUCKET, &id) {
                    Ok(()) => Route::Stream(StreamKey::boxed(BUILTIN_BUCKET, &id), Vec::new()),
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
                    Ok(()) => Route::Stream(
                        StreamKey::boxed(bucket, &seg[1]),
                        seg[2..].iter().map(|s| s.to_string()).collect(),
                    ),
                    Err(e) => Route::Bad(e),
                },
                _ => Route::NotFound,
            }
        }
    }
}

/// What under `/v1/ui` a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    /// `/v1/ui`: the page.
    Console,
    /// `/v1/ui/streams`: the buckets and their streams, as JSON.
    Streams,
}

/// Routes the segments after `/v1/ui`.
fn ui_route(rest: &[Cow<str>]) -> Route {
    match rest {
        [] => Route::Ui(Page::Console),
        [s] if s == "streams" => Route::Ui(Page::Streams),
        _ => Route::NotFound,
    }
}
