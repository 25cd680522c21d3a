//! Reads: catch-up GET, long-poll, and the shared batch reader that SSE uses.

use super::Reply;
use crate::http::url::Target;
use crate::http::{Head, Response};
use crate::shard::Ctx;
use crate::sse::SseRequest;
use sluice_shards::core::cursor::next_cursor;
use sluice_shards::core::json::render_array;
use sluice_shards::offset::{Offset, OffsetQuery};
use sluice_shards::signal::Signal;
use sluice_shards::store::StreamKey;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Most bytes one catch-up response carries; the client continues from
/// Stream-Next-Offset. Always at least one whole message.
pub const READ_CHUNK: u64 = 8 << 20;

/// Stream bytes read for one response.
pub struct Batch {
    /// Stored bytes (for JSON streams: messages each followed by `,`).
    pub data: Vec<u8>,
    pub end: u64,
    pub up_to_date: bool,
    /// Closed, and this batch reaches the final tail.
    pub closed: bool,
    pub json: bool,
    pub content_type: String,
    pub etag: String,
}

/// Where a read starts, resolved against the visible tail.
pub enum Start {
    At(u64),
    Missing,
    Invalid(&'static str),
}

/// Resolves the offset query for a live stream and renews its TTL.
pub fn resolve(ctx: &Ctx, key: &StreamKey, q: OffsetQuery, now: u64) -> Start {
    let mut st = ctx.shard.store.borrow_mut();
    if !st.bucket_exists(&key.0) {
        return Start::Missing;
    }
    let Some(e) = st.live(key, now) else {
        return Start::Missing;
    };
    e.state.lifetime.touch(now);
    let s = &e.state;
    match q {
        OffsetQuery::Start => Start::At(0),
        OffsetQuery::Now => Start::At(s.visible.tail),
        OffsetQuery::At(Offset(o)) if o > s.visible.tail => Start::Invalid("offset is beyond the stream tail"),
        OffsetQuery::At(Offset(o)) if s.json && !s.is_boundary(o) => {
            Start::Invalid("offset is not a message boundary of this JSON stream")
        }
        OffsetQuery::At(Offset(o)) => Start::At(o),
    }
}

/// Reads visible bytes from `from`, at most about `limit` bytes.
pub async fn read_batch(ctx: &Ctx, key: &StreamKey, from: u64, limit: u64) -> Option<Batch> {
    let (parts, mut batch) = {
        let st = ctx.shard.store.borrow();
        let e = st.streams.get(key)?;
        let s = &e.state;
        let mut parts = Vec::new();
        let mut end = from;
        let mut i = s.message_at(from);
        while i < s.visible.messages {
            let m = s.messages[i];
            let skip = from.saturating_sub(m.offset);
            if end > from && end - from + u64::from(m.len) > limit {
                break;
            }
            parts.push((m.shard, m.segment, m.pos + skip, m.len - skip as u32));
            end = m.offset + u64::from(m.len);
            i += 1;
        }
        let up_to_date = end == s.visible.tail;
        let closed = up_to_date && s.visible.closed;
        let etag = format!("\"{}.{}.{}.{}{}\"", ctx.id, s.handle, from, end, if closed { ".c" } else { "" });
        let batch = Batch {
            data: Vec::new(),
            end,
            up_to_date,
            closed,
            json: s.json,
            content_type: s.content_type.clone(),
            etag,
        };
        (parts, batch)
    };
    match ctx.shard.read_messages(&parts).await {
        Ok(data) => batch.data = data,
        Err(e) => {
            eprintln!("sluice: shard {}: read failed: {e}", ctx.id);
            return None;
        }
    }
    Some(batch)
}

/// The body of a batch as the client sees it.
pub fn render_body(b: &Batch) -> Vec<u8> {
    if b.json {
        let mut out = Vec::with_capacity(b.data.len() + 2);
        render_array(&b.data, &mut out);
        out
    } else {
        b.data.clone()
    }
}

fn read_response(b: &Batch, cache: &'static str) -> Response {
    let mut r = Response::new(200)
        .header("content-type", b.content_type.clone())
        .header("stream-next-offset", Offset(b.end).to_string())
        .header("cache-control", cache);
    if b.up_to_date {
        r.set("stream-up-to-date", "true");
    }
    if b.closed {
        r.set("stream-closed", "true");
    }
    r.body = render_body(b);
    r
}

/// Parses `offset` and `live`, enforcing one non-empty offset.
pub fn parse_read_query(t: &Target) -> Result<(Option<OffsetQuery>, Option<&str>), &'static str> {
    let offsets: Vec<&str> = t.query.iter().filter(|(k, _)| k == "offset").map(|(_, v)| v.as_str()).collect();
    if offsets.len() > 1 {
        return Err("offset given more than once");
    }
    let offset = match offsets.first() {
        None => None,
        Some(v) => Some(OffsetQuery::parse(v).ok_or("malformed offset")?),
    };
    let live = t.param("live");
    match live {
        None | Some("long-poll") | Some("sse") => {}
        Some(_) => return Err("live must be long-poll or sse"),
    }
    if live.is_some() && offset.is_none() {
        return Err("live reads need an offset");
    }
    Ok((offset, live))
}

pub async fn get(ctx: &Rc<Ctx>, head: &Head, t: &Target, key: &StreamKey) -> Reply {
    let (offset, live) = match parse_read_query(t) {
        Ok(q) => q,
        Err(why) => return Reply::Full(Response::error(400, why)),
    };
    let q = offset.unwrap_or(OffsetQuery::Start);
    let now = ctx.now_ms();
    let from = match resolve(ctx, key, q, now) {
        Start::At(o) => o,
        Start::Missing => return Reply::Full(super::stream::missing(ctx, key)),
        Start::Invalid(why) => return Reply::Full(Response::error(400, why)),
    };
    let cursor = || next_cursor(ctx.now_ms(), t.param("cursor"), ctx.random()).to_string();
    match live {
        Some("sse") => Reply::Sse(SseRequest { key: key.clone(), from, cursor: t.param("cursor").map(str::to_string) }),
        Some(_) => Reply::Full(long_poll(ctx, key, from, &cursor).await),
        None => {
            let Some(b) = read_batch(ctx, key, from, READ_CHUNK).await else {
                return Reply::Full(Response::error(404, "stream not found"));
            };
            if q == OffsetQuery::Now {
                return Reply::Full(read_response(&b, "no-store"));
            }
            if head.header("if-none-match") == Some(b.etag.as_str()) {
                return Reply::Full(Response::new(304).header("etag", b.etag.clone()));
            }
            let cache = if b.up_to_date { "no-cache" } else { "public, max-age=60, stale-while-revalidate=300" };
            let r = read_response(&b, cache).header("etag", b.etag.clone());
            Reply::Full(r)
        }
    }
}

/// Parks until the stream grows past `from`, closes, or the timeout passes.
async fn long_poll(ctx: &Rc<Ctx>, key: &StreamKey, from: u64, cursor: &dyn Fn() -> String) -> Response {
    let deadline = Instant::now() + ctx.cfg.long_poll_timeout;
    loop {
        let (signal, seen, tail, closed) = {
            let st = ctx.shard.store.borrow();
            let Some(e) = st.streams.get(key) else {
                return Response::error(404, "stream not found");
            };
            (e.signal.clone(), e.signal.generation(), e.state.visible.tail, e.state.visible.closed)
        };
        if tail > from {
            let Some(b) = read_batch(ctx, key, from, READ_CHUNK).await else {
                return Response::error(404, "stream not found");
            };
            return read_response(&b, "no-cache").header("stream-cursor", cursor());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if closed || left.is_zero() {
            let mut r = Response::new(204)
                .header("stream-next-offset", Offset(tail).to_string())
                .header("stream-up-to-date", "true")
                .header("stream-cursor", cursor())
                .header("cache-control", "no-cache");
            if closed {
                r.set("stream-closed", "true");
            }
            return r;
        }
        if ctx.waiters.get() >= ctx.cfg.max_waiters {
            return Response::error(503, "too many parked readers (--max-waiters)").header("retry-after", "1");
        }
        park(ctx, &signal, seen, left).await;
    }
}

/// Waits for a stream's signal or the timeout, counted against --max-waiters.
pub async fn park(ctx: &Ctx, signal: &Rc<Signal>, seen: u64, timeout: Duration) {
    ctx.waiters.set(ctx.waiters.get() + 1);
    futures_lite::future::or(signal.changed(seen), glommio::timer::sleep(timeout)).await;
    ctx.waiters.set(ctx.waiters.get() - 1);
}
