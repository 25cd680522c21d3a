//! Serving a request on its owner shard: access control's answer before
//! any body is read ([`admit`]), the handlers' reply finished for the wire
//! ([`respond`]), the answer to a request another shard forwarded
//! ([`answer`]), and the count and access-log line of every answered
//! request ([`answered`]).

use crate::ctx::Ctx;
use crate::handlers::{self, Reply};
use crate::mesh::envelope::Answered;
use crate::relay::{self, Start};
use crate::route::Route;
use sluice::http::cors::{finish, Cors};
use sluice::http::error::HttpError;
use sluice::http::response::Rendered;
use sluice::http::url::{parse_target, Target};
use sluice::http::{headers as h, parse_head, Head, Response};
use std::rc::Rc;
use std::time::Instant;

/// Access control's answer to a parsed, routed request, finished for the
/// wire: a refusal or a CORS preflight, given before any body is read.
/// `None`: serve it. (The request-level fuzz target calls it as `serve` does.)
pub fn admit(ctx: &Ctx, loopback: bool, head: &Head, route: &Route, cors: &Cors) -> Option<Response> {
    let answer = ctx.gate.admit(loopback, head, route, cors)?;
    Some(finish(fit_to_method(head, answer), cors))
}

/// Serves a request on this (its owner) shard; the response is finished
/// (common headers, HEAD length) and ready to render. (The request-level
/// fuzz target calls it as `serve` does.)
pub async fn respond(ctx: &Rc<Ctx>, head: &Head, target: &Target<'_>, route: Route, body: &[u8]) -> Reply {
    // Shutdown waits for in-flight requests; parked long-polls are woken
    // by it and answer 204 at once.
    ctx.request_started();
    let reply = handlers::handle(ctx, head, target, route, body).await;
    ctx.request_done();
    match reply {
        Reply::Full(resp) => {
            // CORS follows the request's Origin wherever it is answered.
            let cors = ctx.gate.cors(head.header(h::ORIGIN));
            Reply::Full(finish(fit_to_method(head, resp), &cors))
        }
        Reply::Catchup(mut c) => {
            c.head = finish(c.head, &ctx.gate.cors(head.header(h::ORIGIN)));
            Reply::Catchup(c)
        }
        sse => sse,
    }
}

/// The refusal of a parsed request that ends its connection (a bad target,
/// a bad or oversized body): without a body if it was a HEAD. (The fuzz
/// target checks it as `serve` sends it.)
pub fn refusal(head: &Head, e: impl Into<HttpError>) -> Response {
    let e: HttpError = e.into();
    fit_to_method(head, e.into())
}

/// HEAD: announce the length, send no body.
fn fit_to_method(head: &Head, mut resp: Response) -> Response {
    if head.method == sluice::http::Method::Head && resp.head_length.is_none() {
        resp.head_length = Some(resp.body.len());
    }
    resp
}

/// Serves a request forwarded by shard `from`, which holds its connection,
/// received it at `started` (it is counted and logged here), and parsed,
/// routed and admitted the head it sent as received (`request`). A whole
/// response is rendered into `request`'s buffer, and `body` is handed back:
/// both go back to the shard that allocated them.
pub async fn answer(
    ctx: &Rc<Ctx>,
    from: usize,
    request: Vec<u8>,
    body: Vec<u8>,
    started: Instant,
) -> (Answered, Vec<u8>) {
    let head = parse_head(&request, ctx.cfg.max_head_bytes, ctx.cfg.max_headers)
        .expect("the accepting shard parsed this head under the same limits");
    debug_assert_eq!(head.len, request.len(), "a forwarded head is the head alone");
    let target = parse_target(head.target()).expect("the accepting shard parsed this target");
    let route = crate::route::route(&head, &target);
    let label = route.label(head.method, &target);
    let answer = match respond(ctx, &head, &target, route, &body).await {
        Reply::Full(resp) => {
            answered(ctx, Some(&head), label, resp.status, started);
            Answered::Response(Rendered::into_buffer(resp, last(ctx, &head), request))
        }
        Reply::Sse(sse) => match relay::join(ctx, from, sse) {
            Start::Live { key, handle, pump, bytes, from } => {
                answered(ctx, Some(&head), label, 200, started);
                Answered::Live { owner: ctx.id, key, handle, pump, bytes, from }
            }
            // The replayed request is counted where it is served.
            Start::Move => Answered::Move,
        },
        // Streamed where the stream lives: the connection moves there.
        Reply::Catchup(_) => Answered::Move,
    };
    (answer, body)
}

/// Whether a response is the last on its connection: the client asked,
/// or the server is stopping (a client then reconnects, to another server
/// or to this one restarted; a parked long-poll's 204 says where to resume).
pub fn last(ctx: &Ctx, head: &Head) -> bool {
    head.close || ctx.stopping()
}

/// Counts an answered request and, with `--access-log`, logs one line for it.
/// `head` is `None` when the request head itself was refused.
pub fn answered(ctx: &Ctx, head: Option<&Head>, route: &'static str, status: u16, started: Instant) {
    let took = started.elapsed();
    ctx.metrics.request(route, status, took);
    if ctx.cfg.access_log {
        let (method, target) = head.map_or(("-".to_string(), "-"), |h| (format!("{:?}", h.method), h.target()));
        // Read tokens travel in the query string (`?token=`): never logged.
        let target = sluice::http::url::redact(target);
        tracing::info!(
            target: "sluice::access",
            shard = ctx.id,
            method = %method.to_ascii_uppercase(),
            target = %target,
            status,
            micros = took.as_micros() as u64
        );
    }
}
