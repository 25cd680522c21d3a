//! One HTTP/1.1 connection: read heads and bodies under limits and timeouts,
//! route, serve the request here or forward it to the stream's owner shard
//! (the connection stays; live SSE follows the owner's relay or, when it
//! cannot, moves with its connection), answer, and repeat (keep-alive and
//! pipelining).

use crate::affinity::Affinity;
use crate::catchup::send_streamed;
use crate::ctx::Ctx;
use crate::edge_limits::{BODY_READ, FORWARDED_ROOM, HEAD_READ, KEPT_READ_ROOM};
use crate::forward;
use crate::handlers::Reply;
use crate::mesh::envelope::Delivered;
use crate::mesh::Message;
use crate::route;
use crate::send::send;
use crate::serve::{admit, answered, last, refusal, respond};
use futures_lite::AsyncReadExt;
use glommio::net::TcpStream;
use sluice::budget::Reserved;
use sluice::http::chunked::{ChunkedDecoder, BODY_MEMORY, BODY_TOO_LARGE};
use sluice::http::cors::{finish, Cors};
use sluice::http::error::HttpError;
use sluice::http::inbuf::InBuf;
use sluice::http::peer::is_loopback;
use sluice::http::request::BodyKind;
use sluice::http::response::Rendered;
use sluice::http::url::parse_target;
use sluice::http::{headers as h, parse_head, Head, HeadError, Method, Response};
use sluice_shards::core::Error;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// The answer to a request that arrives on an open connection after SIGTERM.
const STOPPING: Error = Error::Unavailable("server is stopping; retry on a new connection");
/// The interim answer to `Expect: 100-continue`.
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// Counts a connection for the connection limit while alive.
struct ConnGuard(Rc<Ctx>);

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let open = self.0.connections.get();
        debug_assert!(open > 0, "a connection is counted once and uncounted once");
        self.0.connections.set(open - 1);
    }
}

/// Turns away a connection over the limit: 503, and it closes.
pub async fn turn_away(ctx: Rc<Ctx>, mut sock: TcpStream, cors: Cors) {
    end_with(&ctx, &mut sock, Error::Unavailable("too many connections").into(), &cors).await;
}

/// Serves a connection, starting with bytes already read (after a handoff).
pub async fn serve(ctx: Rc<Ctx>, mut sock: TcpStream, buffered: Vec<u8>) {
    let mut buf = InBuf::from_vec(buffered);
    ctx.connections.set(ctx.connections.get() + 1);
    let guard = ConnGuard(ctx.clone());
    let _ = sock.set_nodelay(true);
    // Every write goes through `send`: a peer that takes too few bytes of a
    // response for the idle timeout is reset rather than held forever.
    let loopback = sock.peer_addr().is_ok_and(|a| is_loopback(a.ip()));
    let mut affinity = Affinity::default();
    loop {
        // Room a chunked body's reads needed goes once its request is done.
        buf.trim(KEPT_READ_ROOM);
        let head = match read_head(&ctx, &mut sock, &mut buf).await {
            Ok(Some(h)) => h,
            Ok(None) => return,
            Err(e) => {
                let resp: Response = e.into();
                answered(&ctx, None, "invalid", resp.status, Instant::now());
                end_with(&ctx, &mut sock, resp, &ctx.gate.cors(None)).await;
                return;
            }
        };
        let started = Instant::now();
        let cors = ctx.gate.cors(head.header(h::ORIGIN));
        let target = match parse_target(head.target()) {
            Ok(t) => t,
            Err(e) => {
                let resp = refusal(&head, e);
                answered(&ctx, Some(&head), "bad_request", resp.status, started);
                end_with(&ctx, &mut sock, resp, &cors).await;
                return;
            }
        };
        let route = route::route(&head, &target);
        let label = route.label(head.method, &target);
        if ctx.stopping() {
            // Draining: only requests received before the stop are served.
            let resp = refusal(&head, STOPPING);
            answered(&ctx, Some(&head), label, resp.status, started);
            end_with(&ctx, &mut sock, resp, &cors).await;
            return;
        }
        // Every request is decided here, parsed and routed, before any
        // cross-shard work: access control answers refusals and preflights.
        if let Some(answer) = admit(&ctx, loopback, &head, &route, &cors) {
            // A body is never read for a refusal: the connection closes instead.
            answered(&ctx, Some(&head), label, answer.status, started);
            let close = head.close || head.body != BodyKind::None;
            let rendered = Rendered::new(answer, close);
            if !write(&ctx, &mut sock, &rendered).await || close {
                return;
            }
            buf.consume(head.len);
            continue;
        }
        let owner = route.owner(ctx.shards).filter(|&o| o != ctx.id);
        if let (Some(owner), true) = (owner, affinity.moves_to(owner)) {
            // Its requests keep going to one other shard: serve them there.
            handoff(&ctx, sock, buf.into_vec(), owner).await;
            return;
        }
        if owner.is_some() {
            ctx.metrics.cross_shard.set(ctx.metrics.cross_shard.get() + 1);
        }
        let remote_sse = owner.is_some() && target.param("live") == Some("sse");
        if let (Some(owner), true) = (owner, remote_sse && head.body != BodyKind::None) {
            // An SSE read with a body cannot be replayed: move the connection.
            handoff(&ctx, sock, buf.into_vec(), owner).await;
            return;
        }
        // A remote SSE read that the owner cannot relay, and a long catch-up
        // (streamed where its stream lives), are replayed on the owner.
        let remote_get = owner.is_some() && head.method == Method::Get && head.body == BodyKind::None;
        let replay = (remote_sse || remote_get).then(|| buf.data()[..head.len].to_vec());
        // A forwarded request travels as its head's bytes (see `Forward`),
        // in a buffer its answer comes back in.
        let forwarded = owner.map(|owner| {
            let mut request = sluice::http::response::buffer(head.len.max(FORWARDED_ROOM));
            request.extend_from_slice(&buf.data()[..head.len]);
            (owner, request)
        });
        // A body served here that came whole with its head is read where it
        // lies; any other is read into its own buffer, whose budget
        // reservation lives until its request is answered.
        let lying = if forwarded.is_none() { whole_in(&ctx, &buf, &head) } else { None };
        let read = match lying {
            Some(_) => Ok((Vec::new(), None)),
            None => read_body(&ctx, &mut sock, &mut buf, &head).await,
        };
        let (body, _reserved) = match read {
            Ok(b) => b,
            Err(e) => {
                let resp = refusal(&head, e);
                answered(&ctx, Some(&head), label, resp.status, started);
                end_with(&ctx, &mut sock, resp, &cors).await;
                return;
            }
        };
        let close = head.close;
        let rendered = match forwarded {
            Some((owner, request)) => {
                // Shutdown waits for this connection's forwarded request too.
                ctx.request_started();
                // Only its bytes travel: the parsed forms are freed here, on
                // the arena they came from (the target borrows the head).
                drop(target);
                drop((route, head));
                let delivered = forward::submit(&ctx, owner, request, body, started).await;
                ctx.request_done();
                match delivered {
                    Delivered::Response(r) => r,
                    Delivered::Live(sub) => {
                        return live(guard, async move { crate::relay::follow(&ctx, &mut sock, sub).await })
                    }
                    Delivered::Move => {
                        let mut bytes = replay.unwrap_or_default();
                        bytes.extend_from_slice(buf.data());
                        handoff(&ctx, sock, bytes, owner).await;
                        return;
                    }
                }
            }
            None => {
                let lies = lying.map(|n| &buf.data()[head.len..head.len + n]);
                let reply = respond(&ctx, &head, &target, route, lies.unwrap_or(&body)).await;
                if let Some(n) = lying {
                    buf.consume(head.len + n);
                }
                match reply {
                    Reply::Full(resp) => {
                        answered(&ctx, Some(&head), label, resp.status, started);
                        Rendered::new(resp, last(&ctx, &head))
                    }
                    Reply::Sse(sse) => {
                        answered(&ctx, Some(&head), label, 200, started);
                        return live(guard, async move { crate::sse::run(&ctx, &mut sock, sse).await });
                    }
                    Reply::Catchup(c) => {
                        answered(&ctx, Some(&head), label, 200, started);
                        let last = last(&ctx, &head);
                        if !send_streamed(&ctx, &mut sock, c, last).await || last {
                            return;
                        }
                        continue;
                    }
                }
            }
        };
        if !write(&ctx, &mut sock, &rendered).await || close || ctx.stopping() {
            return;
        }
    }
}

/// Runs a live SSE response, which keeps the connection (and its slot) to
/// the end, in its own task queue with fewer shares, so appends are not
/// queued behind a thousand subscribers.
fn live(guard: ConnGuard, response: impl std::future::Future<Output = ()> + 'static) {
    let queue = guard.0.sse_queue;
    let task = async move {
        let open = &guard.0.metrics.sse;
        open.set(open.get() + 1);
        response.await;
        open.set(open.get() - 1);
    };
    sluice_shards::tasks::spawn_into(task, queue).detach();
}

/// Writes rendered response bytes; false if the peer is gone or stalled.
async fn write(ctx: &Ctx, sock: &mut TcpStream, r: &Rendered) -> bool {
    let idle = ctx.cfg.idle_timeout;
    send(sock, &r.head, idle).await && (r.body.is_empty() || send(sock, &r.body, idle).await)
}

/// Writes an error response that ends the connection.
async fn end_with(ctx: &Ctx, sock: &mut TcpStream, resp: Response, cors: &Cors) {
    let _ = write(ctx, sock, &Rendered::new(finish(resp, cors), true)).await;
}

/// Reads until a full head is buffered. `Ok(None)`: the peer closed or idled out.
async fn read_head(ctx: &Ctx, sock: &mut TcpStream, buf: &mut InBuf) -> Result<Option<Head>, HttpError> {
    // The request timeout runs from the request's first byte, not from the
    // start of the keep-alive idle wait before it.
    let mut request = Limit::new(ctx.cfg.request_timeout);
    loop {
        if !buf.is_empty() {
            match parse_head(buf.data(), ctx.cfg.max_head_bytes, ctx.cfg.max_headers) {
                Ok(h) => return Ok(Some(h)),
                Err(HeadError::Partial) => {}
                Err(HeadError::Refused(e)) => return Err(e),
            }
        }
        // An idle keep-alive connection waits up to the idle timeout; a
        // request that has started must arrive within the request timeout.
        let idle = buf.is_empty();
        let limit = if idle { ctx.cfg.idle_timeout } else { request.left() };
        match read_more(sock, buf, limit, HEAD_READ).await {
            Ok(()) if idle => request = Limit::new(ctx.cfg.request_timeout),
            Ok(()) => {}
            Err(Ended::Closed) => return Ok(None),
            Err(Ended::TimedOut) if buf.is_empty() => return Ok(None),
            Err(Ended::TimedOut) => return Err(HttpError::Timeout("request head not received in time")),
        }
    }
}

/// A time limit whose clock starts at its first use: a head or body that
/// arrives whole with the read before it never reads the clock for it.
struct Limit {
    since: Option<Instant>,
    limit: Duration,
}

impl Limit {
    fn new(limit: Duration) -> Limit {
        Limit { since: None, limit }
    }

    /// What is left of the limit (all of it at the first use).
    fn left(&mut self) -> Duration {
        self.limit.saturating_sub(self.since.get_or_insert_with(Instant::now).elapsed())
    }
}

/// Why a read brought no data.
enum Ended {
    Closed,
    TimedOut,
}

/// One read of at most `want` bytes appended to `buf`.
async fn read_more(sock: &mut TcpStream, buf: &mut InBuf, limit: Duration, want: usize) -> Result<(), Ended> {
    let got = read_into(sock, buf.room(want), limit).await?;
    buf.filled(got);
    Ok(())
}

/// One read into `into` within `limit`: how many bytes came, or why none.
async fn read_into(sock: &mut TcpStream, into: &mut [u8], limit: Duration) -> Result<usize, Ended> {
    if limit.is_zero() {
        return Err(Ended::TimedOut);
    }
    let _ = sock.set_read_timeout(Some(limit));
    match sock.read(into).await {
        Ok(0) => Err(Ended::Closed),
        Ok(n) => Ok(n),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock) => {
            Err(Ended::TimedOut)
        }
        Err(_) => Err(Ended::Closed),
    }
}

/// The length of the request's body when all of it is in `buf` behind
/// its head and within `--max-body-bytes` (a larger one is refused by
/// [`read_body`]).
fn whole_in(ctx: &Ctx, buf: &InBuf, head: &Head) -> Option<usize> {
    match head.body {
        BodyKind::Length(n) if n <= ctx.cfg.max_body_bytes && (buf.data().len() - head.len) as u64 >= n => {
            Some(n as usize)
        }
        _ => None,
    }
}

/// Reads the request body (if any), consuming head and body from `buf`,
/// with its reservation of this shard's `--max-body-memory` part: taken
/// before any body byte is buffered, and to be held as long as the body is.
async fn read_body(
    ctx: &Ctx,
    sock: &mut TcpStream,
    buf: &mut InBuf,
    head: &Head,
) -> Result<(Vec<u8>, Option<Reserved>), HttpError> {
    let limit = ctx.cfg.max_body_bytes;
    let mut deadline = Limit::new(ctx.cfg.request_timeout);
    const TOO_SLOW: HttpError = HttpError::Timeout("request body not received in time");
    const CUT_SHORT: HttpError = HttpError::Stream(Error::Invalid("connection closed mid-body"));
    match head.body {
        BodyKind::None => {
            buf.consume(head.len);
            Ok((Vec::new(), None))
        }
        BodyKind::Length(n) => {
            if n > limit {
                return Err(BODY_TOO_LARGE.into());
            }
            let reserved = ctx.bodies.reserve(n).ok_or(BODY_MEMORY)?;
            // The body is read into its own buffer, allocated once.
            let n = n as usize;
            let have = (buf.data().len() - head.len).min(n);
            let mut body = Vec::with_capacity(n);
            body.extend_from_slice(&buf.data()[head.len..head.len + have]);
            buf.consume(head.len + have);
            if head.expect_continue && have < n {
                let _ = send(sock, CONTINUE, ctx.cfg.idle_timeout).await;
            }
            // Zeroed once, then filled by reads of at most BODY_READ.
            body.resize(n, 0);
            let mut filled = have;
            while filled < n {
                let piece = &mut body[filled..n.min(filled + BODY_READ)];
                match read_into(sock, piece, deadline.left()).await {
                    Ok(got) => filled += got,
                    Err(Ended::Closed) => return Err(CUT_SHORT),
                    Err(Ended::TimedOut) => return Err(TOO_SLOW),
                }
            }
            Ok((body, Some(reserved)))
        }
        BodyKind::Chunked => {
            if head.expect_continue {
                let _ = send(sock, CONTINUE, ctx.cfg.idle_timeout).await;
            }
            let mut reserved = ctx.bodies.reserve(0).ok_or(BODY_MEMORY)?;
            let mut dec = ChunkedDecoder::new(limit);
            let mut body = Vec::new();
            buf.consume(head.len);
            loop {
                // The decoder adds at most what `buf` holds: room for that is
                // reserved first, growing by doubling up to the body limit.
                let need = (body.len() + buf.data().len()).min(limit as usize);
                if need > body.capacity() {
                    let room = (body.capacity() * 2).clamp(need, limit as usize);
                    if !reserved.cover(room as u64) {
                        return Err(BODY_MEMORY.into());
                    }
                    body.reserve_exact(room - body.len());
                }
                let used = dec.feed(buf.data(), &mut body)?;
                buf.consume(used);
                if dec.is_done() {
                    return Ok((body, Some(reserved)));
                }
                match read_more(sock, buf, deadline.left(), BODY_READ).await {
                    Ok(()) => {}
                    Err(Ended::Closed) => return Err(CUT_SHORT),
                    Err(Ended::TimedOut) => return Err(TOO_SLOW),
                }
            }
        }
    }
}

/// Moves the connection (fd plus unprocessed bytes) to its owner shard.
async fn handoff(ctx: &Ctx, sock: TcpStream, buf: Vec<u8>, owner: usize) {
    let fd = unsafe { libc::dup(sock.as_raw_fd()) };
    drop(sock);
    if fd < 0 {
        return;
    }
    if ctx.link.send_to(owner, Message::Handoff { fd, buffered: buf }).await.is_err() {
        // The owner is gone (shutting down): close our copy.
        unsafe { libc::close(fd) };
    }
}
