//! Routing and the protocol's HTTP surface: maps requests onto shard
//! operations and shard outcomes onto status codes and headers.

pub mod attrs;
pub mod batch;
pub mod bootstrap;
pub mod bucket;
pub mod fork;
pub mod lookup;
pub mod read;
pub mod refusal;
pub mod snapshot;
pub mod stream;
pub mod subs;
pub mod tokens;
pub mod ui;

use crate::ctx::Ctx;
use crate::route::Route;
use read::SseRequest;
use sluice::http::error::HttpError;
use sluice::http::headers as h;
use sluice::http::url::Target;
use sluice::http::{Head, Method, Response};
use sluice_shards::core::Error;
use sluice_shards::store::StreamKey;
use std::rc::Rc;

/// How a request is answered.
pub enum Reply {
    Full(Response),
    Sse(SseRequest),
    /// A long catch-up read of a byte stream, streamed from the store.
    Catchup(crate::catchup::Catchup),
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
pub async fn handle(ctx: &Rc<Ctx>, head: &Head, t: &Target<'_>, route: Route, body: &[u8]) -> Reply {
    let resp = match route {
        // The accept loops start only after every shard has recovered, so
        // any answer here means the server is ready.
        Route::Health => match head.method {
            Method::Get | Method::Head => {
                // 200 with "degraded: ..." while the object store fails (issue 27).
                Response::new(200).header(h::CONTENT_TYPE, "text/plain").with_body(crate::tier::status::health_body())
            }
            _ => HttpError::MethodNotAllowed.into(),
        },
        Route::Metrics => match head.method {
            Method::Get | Method::Head => Box::pin(metrics(ctx)).await,
            _ => HttpError::MethodNotAllowed.into(),
        },
        Route::Tokens(scope) => tokens::mint(ctx, head, t, &scope),
        Route::Ui(page) => Box::pin(ui::serve(ctx, head.method, page)).await,
        Route::Bad(e) => e.into(),
        Route::NotFound => Error::NotFound("no such resource").into(),
        Route::Bucket(b) => Box::pin(bucket::bucket(ctx, head.method, &b)).await,
        Route::Subs(r) => Box::pin(crate::handlers::subs::routes::serve(ctx, head, r, body)).await,
        Route::BucketList(b) => match head.method {
            Method::Get => Box::pin(bucket::list(ctx, &b, t)).await,
            _ => HttpError::MethodNotAllowed.into(),
        },
        Route::Stream(key, sub) => {
            // Responses, reads and refusals alike, observe only durable state.
            let json_before = match ctx.shard.settle(&key).await {
                Ok(settled) => settled.json,
                Err(e) => return Reply::Full(refusal::refusal(ctx, &key, Error::Log(e))),
            };
            let reply = stream_operation(ctx, head, t, &key, &sub, body).await;
            // A stream's mode is fixed while it lives: only a PUT (a create
            // or fork) can have made a JSON stream where there was none.
            let json = json_before || (head.method == Method::Put && lookup::json_stream(ctx, &key));
            return advertise_records(reply, json);
        }
    };
    Reply::Full(resp)
}

/// A request to a stream or one of its sub-resources.
async fn stream_operation(
    ctx: &Rc<Ctx>,
    head: &Head,
    t: &Target<'_>,
    key: &StreamKey,
    sub: &[String],
    body: &[u8],
) -> Reply {
    if sub.is_empty() {
        return stream::stream(ctx, head, t, key, body).await;
    }
    // Boxed: see `stream::stream`.
    Box::pin(sub_resource(ctx, head, t, key, sub, body)).await
}

/// A request to one of a stream's sub-resources (bucketed surface).
async fn sub_resource(
    ctx: &Rc<Ctx>,
    head: &Head,
    t: &Target<'_>,
    key: &StreamKey,
    sub: &[String],
    body: &[u8],
) -> Reply {
    if !ctx.shard.store.borrow().bucket_exists(key.bucket()) {
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
        ["append-batch"] => batch::append_batch(ctx, head, key, body).await,
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
