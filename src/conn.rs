//! One HTTP/1.1 connection: read heads and bodies under limits and timeouts,
//! route, hand the connection to the owner shard when the stream lives
//! elsewhere, answer, and repeat (keep-alive and pipelining).

use crate::handlers::{self, Reply};
use crate::mesh::Message;
use crate::metrics::answered;
use crate::shard::Ctx;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use sluice::http::body::{ChunkedDecoder, BODY_TOO_LARGE};
use sluice::http::request::BodyKind;
use sluice::http::url::parse_target;
use sluice::http::{parse_head, Head, HeadError, Response};
use sluice_shards::core::Error;
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Read sizes: small for request heads (most requests are a few hundred
/// bytes), larger while a body is arriving. The buffer space is zeroed before
/// each read, so a read never asks for much more than it expects.
const HEAD_READ: usize = 8 * 1024;
const BODY_READ: usize = 256 * 1024;

/// Counts a connection for the connection limit while alive.
struct ConnGuard(Rc<Ctx>);

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.0.connections.set(self.0.connections.get() - 1);
    }
}

/// Answers a connection over the limit with 503 and closes it.
pub async fn refuse(mut sock: TcpStream) {
    let mut out = Vec::new();
    handlers::finish(Error::Unavailable("too many connections").into()).render(&mut out, true);
    let _ = sock.write_all(&out).await;
}

/// Serves a connection, starting with bytes already read (after a handoff).
pub async fn serve(ctx: Rc<Ctx>, mut sock: TcpStream, mut buf: Vec<u8>) {
    ctx.connections.set(ctx.connections.get() + 1);
    let guard = ConnGuard(ctx.clone());
    let _ = sock.set_nodelay(true);
    // A peer that takes no bytes of a response for the idle timeout is gone
    // (or attacking): drop it rather than hold its connection forever.
    let _ = sock.set_write_timeout(Some(ctx.cfg.idle_timeout));
    let mut out = Vec::with_capacity(4096);
    loop {
        let head = match read_head(&ctx, &mut sock, &mut buf).await {
            Ok(Some(h)) => h,
            Ok(None) => return,
            Err(e) => {
                let resp: Response = e.into();
                answered(&ctx, None, "invalid", resp.status, Instant::now());
                send(&mut sock, &mut out, resp, true).await;
                return;
            }
        };
        let started = Instant::now();
        let target = match parse_target(&head.target) {
            Ok(t) => t,
            Err(e) => {
                let resp: Response = e.into();
                answered(&ctx, Some(&head), "bad_request", resp.status, started);
                send(&mut sock, &mut out, resp, true).await;
                return;
            }
        };
        let route = handlers::route(&head, &target);
        let label = route.label();
        if let Some(owner) = route.owner(ctx.shards) {
            if owner != ctx.id {
                ctx.metrics.cross_shard.set(ctx.metrics.cross_shard.get() + 1);
                handoff(&ctx, sock, buf, owner).await;
                return;
            }
        }
        let body = match read_body(&ctx, &mut sock, &mut buf, &head).await {
            Ok(b) => b,
            Err(e) => {
                let resp: Response = e.into();
                answered(&ctx, Some(&head), label, resp.status, started);
                send(&mut sock, &mut out, resp, true).await;
                return;
            }
        };
        // Shutdown waits for in-flight requests; parked long-polls are woken
        // by it and answer 204 at once.
        ctx.in_flight.set(ctx.in_flight.get() + 1);
        let reply = handlers::handle(&ctx, &head, &target, route, body).await;
        ctx.in_flight.set(ctx.in_flight.get() - 1);
        match reply {
            Reply::Full(resp) => {
                answered(&ctx, Some(&head), label, resp.status, started);
                let mut resp = resp;
                if head.method == sluice::http::Method::Head && resp.head_length.is_none() {
                    // HEAD: announce the length, send no body.
                    resp.head_length = Some(resp.body.len());
                }
                if !send(&mut sock, &mut out, resp, head.close).await || head.close {
                    return;
                }
            }
            Reply::Sse(sse) => {
                answered(&ctx, Some(&head), label, 200, started);
                // Live fan-out runs in its own task queue with fewer shares,
                // so appends are not queued behind a thousand subscribers.
                let queue = ctx.sse_queue;
                let task = async move {
                    let _guard = guard;
                    let sse_open = &ctx.metrics.sse;
                    sse_open.set(sse_open.get() + 1);
                    crate::sse::run(&ctx, &mut sock, sse).await;
                    sse_open.set(sse_open.get() - 1);
                };
                if let Ok(t) = glommio::spawn_local_into(task, queue) {
                    t.detach();
                }
                return;
            }
        }
    }
}

/// Renders and writes a response; false if the peer is gone.
async fn send(sock: &mut TcpStream, out: &mut Vec<u8>, resp: Response, close: bool) -> bool {
    out.clear();
    let resp = handlers::finish(resp);
    if resp.body.len() < LARGE_BODY || !resp.sends_body() {
        resp.render(out, close);
        return sock.write_all(out).await.is_ok();
    }
    // Large bodies (catch-up reads) go out from their own buffer, uncopied.
    resp.render_head(out, close);
    sock.write_all(out).await.is_ok() && sock.write_all(&resp.body).await.is_ok()
}

/// Bodies at least this large are written without copying them behind the head.
const LARGE_BODY: usize = 64 * 1024;

/// Reads until a full head is buffered. `Ok(None)`: the peer closed or idled out.
async fn read_head(ctx: &Ctx, sock: &mut TcpStream, buf: &mut Vec<u8>) -> Result<Option<Head>, Error> {
    // The request timeout runs from the request's first byte, not from the
    // start of the keep-alive idle wait before it.
    let mut started = std::time::Instant::now();
    loop {
        if !buf.is_empty() {
            match parse_head(buf, ctx.cfg.max_head_bytes, ctx.cfg.max_headers) {
                Ok(h) => return Ok(Some(h)),
                Err(HeadError::Partial) => {}
                Err(HeadError::Refused(e)) => return Err(e),
            }
        }
        // An idle keep-alive connection waits up to the idle timeout; a
        // request that has started must arrive within the request timeout.
        let limit = if buf.is_empty() {
            ctx.cfg.idle_timeout
        } else {
            ctx.cfg.request_timeout.saturating_sub(started.elapsed())
        };
        let idle = buf.is_empty();
        match read_more(sock, buf, limit, HEAD_READ).await {
            ReadOutcome::Data if idle => started = std::time::Instant::now(),
            ReadOutcome::Data => {}
            ReadOutcome::Closed => return Ok(None),
            ReadOutcome::TimedOut if buf.is_empty() => return Ok(None),
            ReadOutcome::TimedOut => return Err(Error::Timeout("request head not received in time")),
        }
    }
}

enum ReadOutcome {
    Data,
    Closed,
    TimedOut,
}

async fn read_more(sock: &mut TcpStream, buf: &mut Vec<u8>, limit: Duration, want: usize) -> ReadOutcome {
    if limit.is_zero() {
        return ReadOutcome::TimedOut;
    }
    let _ = sock.set_read_timeout(Some(limit));
    let start = buf.len();
    buf.resize(start + want, 0);
    let r = sock.read(&mut buf[start..]).await;
    match r {
        Ok(0) => {
            buf.truncate(start);
            ReadOutcome::Closed
        }
        Ok(n) => {
            buf.truncate(start + n);
            ReadOutcome::Data
        }
        Err(e) => {
            buf.truncate(start);
            if e.kind() == std::io::ErrorKind::TimedOut || e.kind() == std::io::ErrorKind::WouldBlock {
                ReadOutcome::TimedOut
            } else {
                ReadOutcome::Closed
            }
        }
    }
}

/// Reads the request body (if any), consuming head and body from `buf`.
async fn read_body(ctx: &Ctx, sock: &mut TcpStream, buf: &mut Vec<u8>, head: &Head) -> Result<Vec<u8>, Error> {
    let limit = ctx.cfg.max_body_bytes;
    let started = std::time::Instant::now();
    let deadline = ctx.cfg.request_timeout;
    const TOO_SLOW: Error = Error::Timeout("request body not received in time");
    const CUT_SHORT: Error = Error::Invalid("connection closed mid-body");
    match head.body {
        BodyKind::None => {
            buf.drain(..head.len);
            Ok(Vec::new())
        }
        BodyKind::Length(n) => {
            if n > limit {
                return Err(BODY_TOO_LARGE);
            }
            let need = head.len + n as usize;
            if head.expect_continue && buf.len() < need {
                let _ = sock.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await;
            }
            while buf.len() < need {
                let want = (need - buf.len()).min(BODY_READ);
                match read_more(sock, buf, deadline.saturating_sub(started.elapsed()), want).await {
                    ReadOutcome::Data => {}
                    ReadOutcome::Closed => return Err(CUT_SHORT),
                    ReadOutcome::TimedOut => return Err(TOO_SLOW),
                }
            }
            let body = buf[head.len..need].to_vec();
            buf.drain(..need);
            Ok(body)
        }
        BodyKind::Chunked => {
            if head.expect_continue {
                let _ = sock.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await;
            }
            let mut dec = ChunkedDecoder::new(limit);
            let mut body = Vec::new();
            buf.drain(..head.len);
            loop {
                let used = dec.feed(buf, &mut body)?;
                buf.drain(..used);
                if dec.is_done() {
                    return Ok(body);
                }
                match read_more(sock, buf, deadline.saturating_sub(started.elapsed()), BODY_READ).await {
                    ReadOutcome::Data => {}
                    ReadOutcome::Closed => return Err(CUT_SHORT),
                    ReadOutcome::TimedOut => return Err(TOO_SLOW),
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
    if ctx.senders.send_to(owner, Message::Handoff { fd, buffered: buf }).await.is_err() {
        // The owner is gone (shutting down): close our copy.
        unsafe { libc::close(fd) };
    }
}
