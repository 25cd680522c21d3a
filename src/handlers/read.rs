//! Reads: catch-up GET, long-poll, and the shared batch reader that SSE uses.
//! Offset reads return the stored bytes: for JSON streams the canonical NDJSON
//! on the bucketed surface, a JSON array of whole messages on the base surface.
//! Record-aware reads (JSON record coordinates) return whole records as NDJSON
//! or envelopes.

use super::lookup::{bucket_exists, json_stream};
use super::refusal::{read_failed, refusal};
use super::Reply;
use crate::catchup::{char_width, piece, unfinished_char, Catchup};
use crate::ctx::Ctx;
use crate::route::Surface;
use sluice::http::cors::Cors;
use sluice::http::headers as h;
use sluice::http::url::Target;
use sluice::http::{Head, Method, Response};
use sluice_shards::core::coordinates::{self, RecordQuery};
use sluice_shards::core::cursor::{cursor_in_range, next_cursor};
use sluice_shards::core::int::parse_uint;
use sluice_shards::core::json::{record_value, render_array, NDJSON, RECORD_END};
use sluice_shards::core::Error;
use sluice_shards::offset::{Offset, OffsetQuery};
use sluice_shards::signal::Signal;
use sluice_shards::store::StreamKey;
use std::rc::Rc;
use std::time::{Duration, Instant};

pub use sluice_shards::store::reads::Limit;

/// How a batch is rendered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Bytes as stored (for JSON streams the canonical NDJSON).
    Bytes,
    /// Whole JSON messages as one JSON array (the base surface).
    Array,
    /// Whole records from a record-aware read, one per line (`application/x-ndjson`).
    Records,
    /// `{"record":N,"value":...}` per line.
    Envelope,
}

/// Stream bytes read for one response.
pub struct Batch {
    /// Stored bytes (for JSON streams: NDJSON records, each ending in `\n`).
    pub data: Vec<u8>,
    /// Length of each message in `data` (the first and last may be partial).
    pub lengths: Vec<u32>,
    pub end: u64,
    pub up_to_date: bool,
    /// Closed, and this batch reaches the final tail.
    pub closed: bool,
    pub json: bool,
    pub content_type: String,
    pub etag: String,
    /// Record ordinals: first retained, first in batch, after the batch.
    pub records: (u64, u64, u64),
}

/// Whether a read cut by `max_bytes` must end on a UTF-8 character boundary.
fn utf8(content_type: &str) -> bool {
    sluice_shards::core::media_type(content_type).starts_with("text/") || sluice_shards::core::is_json(content_type)
}

/// Resolves where a read starts for a live stream and renews its TTL.
pub async fn resolve(
    ctx: &Ctx,
    key: &StreamKey,
    surface: Surface,
    q: OffsetQuery,
    rq: Option<&RecordQuery>,
    now: u64,
) -> Result<u64, Error> {
    let record = {
        let mut st = ctx.shard.store.borrow_mut();
        let e = st.live(key, now).ok_or(Error::NoStream)?;
        e.state.lifetime.touch(now);
        match rq {
            Some(_) if !e.state.json => {
                return Err(Error::Invalid("record coordinates need an application/json stream"))
            }
            Some(rq) => Some(coordinates::resolve(&e.state, rq.start)?),
            None => None,
        }
    };
    if let Some(r) = record {
        return ctx.shard.record_offset(key, r).await.map_err(|e| read_failed(ctx, key, e));
    }
    let (from, check_boundary) = {
        let mut st = ctx.shard.store.borrow_mut();
        let s = &st.live(key, now).ok_or(Error::NoStream)?.state;
        match q {
            OffsetQuery::Start => (s.retained, false),
            OffsetQuery::Now => (s.visible.tail, false),
            OffsetQuery::At(Offset(o)) if o > s.visible.tail => {
                return Err(Error::Invalid("offset is beyond the stream tail"))
            }
            OffsetQuery::At(Offset(o)) if o < s.retained => {
                return Err(Error::Trimmed("data before the earliest retained offset is gone; use /bootstrap"))
            }
            OffsetQuery::At(Offset(o)) => (o, s.json && surface == Surface::Base),
        }
    };
    if check_boundary {
        let p = ctx.shard.point(key, from).await.map_err(|e| read_failed(ctx, key, e))?;
        if p.record.is_none() {
            return Err(Error::Invalid("offset is not a message boundary of this JSON stream"));
        }
    }
    Ok(from)
}

/// Reads visible bytes from `from` within `limit`: whole messages when
/// `whole_json` applies (at least one), otherwise cut at the limit. On a
/// text or JSON stream a cut never splits a UTF-8 character: a trailing
/// partial character is left for the next read, and a limit smaller than
/// the first character returns that whole character.
pub async fn read_batch(ctx: &Ctx, key: &StreamKey, from: u64, limit: Limit) -> Result<Batch, Error> {
    let mut b = read_span(ctx, key, from, limit).await?;
    let cut = limit.exact || b.end - from == limit.bytes;
    if cut && utf8(&b.content_type) {
        if let Some(width) = trim_to_char_boundary(&mut b) {
            b = read_span(ctx, key, from, Limit { bytes: width, ..limit }).await?;
        }
    }
    Ok(b)
}

async fn read_span(ctx: &Ctx, key: &StreamKey, from: u64, limit: Limit) -> Result<Batch, Error> {
    let span = ctx.shard.read_span(key, from, limit).await.map_err(|e| read_failed(ctx, key, e))?;
    let st = ctx.shard.store.borrow();
    let e = st.streams.get(key).filter(|e| !e.state.deleted).ok_or(Error::NoStream)?;
    let s = &e.state;
    let end = span.end;
    // The visible state may have moved on during the read: judge by the tail it had.
    let up_to_date = end == s.visible.tail;
    let closed = up_to_date && s.visible.closed;
    let etag = span_etag(ctx.id, s.handle, from, end, closed);
    Ok(Batch {
        data: span.data,
        lengths: span.lengths,
        end,
        up_to_date,
        closed,
        json: s.json,
        content_type: s.content_type.to_string(),
        etag,
        records: (s.first_message, span.first, span.next),
    })
}

/// The ETag of the stored bytes `[from, end)` of stream incarnation `handle`.
fn span_etag(shard: usize, handle: u64, from: u64, end: u64, closed: bool) -> String {
    format!("\"{shard}.{handle}.{from}.{end}{}\"", if closed { ".c" } else { "" })
}

/// Plans a streamed catch-up ([`crate::catchup`]) when the visible bytes
/// after `from` are more than one read (`--max-read-bytes`) holds; `None`
/// leaves the read to a whole response. A cut at `--max-response-bytes`
/// ends at the last message (append) boundary inside the response, as a
/// whole response does; only a single message longer than the limit is
/// cut inside, and on a text or JSON stream never inside a UTF-8 character.
/// Returns the plan with its ETag.
async fn plan_catchup(ctx: &Ctx, key: &StreamKey, from: u64) -> Result<Option<(Catchup, String)>, Error> {
    let (tail, closed, handle, content_type) = {
        let st = ctx.shard.store.borrow();
        let s = &st.streams.get(key).filter(|e| !e.state.deleted).ok_or(Error::NoStream)?.state;
        (s.visible.tail, s.visible.closed, s.handle, s.content_type.clone())
    };
    if tail - from <= ctx.cfg.max_read_bytes {
        return Ok(None);
    }
    let mut end = tail.min(from + ctx.cfg.max_response_bytes);
    if end < tail {
        let (_, start) = ctx.shard.locate(key, end).await.map_err(|e| read_failed(ctx, key, e))?;
        if start > from {
            end = start;
        }
    }
    if end < tail && utf8(&content_type) {
        let back = (end - from).min(4);
        let limit = Limit { bytes: back, exact: true, whole_json: false, records: None };
        let last = ctx.shard.read_span(key, end - back, limit).await.map_err(|e| read_failed(ctx, key, e))?;
        end -= unfinished_char(&last.data) as u64;
    }
    let (up_to_date, closed) = (end == tail, end == tail && closed);
    let etag = span_etag(ctx.id, handle, from, end, closed);
    let mut head = Response::new(200)
        .header(h::CONTENT_TYPE, content_type.to_string())
        .header(h::STREAM_NEXT_OFFSET, Offset(end))
        .header(h::ETAG, etag.clone())
        .header(h::CACHE_CONTROL, if up_to_date { "no-cache" } else { CACHEABLE });
    if up_to_date {
        head.set(h::STREAM_UP_TO_DATE, "true");
    }
    if closed {
        head.set(h::STREAM_CLOSED, "true");
    }
    head.head_length = Some((end - from) as usize);
    let first = ctx.shard.read_span(key, from, piece(ctx, from, end)).await.map_err(|e| read_failed(ctx, key, e))?;
    assert!(from < first.end && first.end <= end, "a streamed response's first piece is inside it");
    Ok(Some((Catchup { key: key.to_owned(), from, end, head, first }, etag)))
}

/// Cache-Control of a read that is not at the tail: its bytes never change.
const CACHEABLE: &str = "public, max-age=60, stale-while-revalidate=300";

/// Drops a trailing partial JSON record when a whole one comes before it:
/// SSE on NDJSON prefers to end at a record boundary (base protocol, SSE
/// `max_bytes`), and still makes progress with a partial record alone.
pub fn trim_to_record(b: &mut Batch) {
    if b.lengths.len() < 2 || b.data.last() == Some(&RECORD_END) {
        return;
    }
    let cut = b.lengths.pop().expect("two pieces") as usize;
    b.data.truncate(b.data.len() - cut);
    b.end -= cut as u64;
    b.up_to_date = false;
    b.closed = false;
}

/// Drops a trailing partial UTF-8 character. When not even the first
/// character is complete, returns its width so the caller reads it whole.
fn trim_to_char_boundary(b: &mut Batch) -> Option<u64> {
    let valid = match std::str::from_utf8(&b.data) {
        Ok(_) => return None,
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => return None,
    };
    if valid == 0 {
        return Some(char_width(*b.data.first()?) as u64);
    }
    let cut = b.data.len() - valid;
    b.data.truncate(valid);
    b.end -= cut as u64;
    if let Some(last) = b.lengths.last_mut() {
        *last -= cut as u32;
    }
    b.up_to_date = false;
    b.closed = false;
    None
}

/// The JSON values of a batch of whole records (without their newlines).
pub fn messages(b: &Batch) -> impl Iterator<Item = &[u8]> {
    let mut at = 0usize;
    b.lengths.iter().map(move |len| {
        let m = &b.data[at..at + *len as usize];
        at += *len as usize;
        record_value(m)
    })
}

/// One envelope line body: `{"record":N,"value":<message>}`.
pub fn envelope(record: u64, value: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("{{\"record\":{record},\"value\":").as_bytes());
    out.extend_from_slice(value);
    out.push(b'}');
}

/// The body of a batch as the client sees it.
/// Takes the bytes out of the batch when they are sent as stored.
pub fn render_body(b: &mut Batch, view: View) -> Vec<u8> {
    let mut out = Vec::new();
    match view {
        View::Bytes | View::Records => return std::mem::take(&mut b.data),
        View::Array => render_array(&b.data, &mut out),
        View::Envelope => {
            for (i, m) in messages(b).enumerate() {
                envelope(b.records.1 + i as u64, m, &mut out);
                out.push(b'\n');
            }
        }
    }
    out
}

/// The ETag of a batch as `view` renders it: the canonical bytes keep the
/// batch's tag, other renderings of the same bytes get their own.
fn representation_etag(etag: &str, view: View) -> String {
    let suffix = match view {
        View::Bytes | View::Records => return etag.to_string(),
        View::Array => ".array",
        View::Envelope => ".envelope",
    };
    let bare = etag.strip_suffix('"').unwrap_or(etag);
    format!("{bare}{suffix}\"")
}

/// The media type of a rendered batch of a stream with `content_type`.
pub fn content_type(content_type: &str, json: bool, view: View) -> String {
    match view {
        View::Bytes if json => NDJSON.into(),
        View::Bytes | View::Array => content_type.into(),
        View::Records => NDJSON.into(),
        View::Envelope => "application/vnd.durable-stream-records+ndjson".into(),
    }
}

fn read_response(mut b: Batch, view: View, cache: &'static str) -> Response {
    let mut r = Response::new(200)
        .header(h::CONTENT_TYPE, content_type(&b.content_type, b.json, view))
        .header(h::STREAM_NEXT_OFFSET, Offset(b.end))
        .header(h::CACHE_CONTROL, cache);
    if b.up_to_date {
        r.set(h::STREAM_UP_TO_DATE, "true");
    }
    if b.closed {
        r.set(h::STREAM_CLOSED, "true");
    }
    if view.record_aware() {
        r.set(h::STREAM_RECORD_FIRST, b.records.0);
        r.set(h::STREAM_RECORD_START, b.records.1);
        r.set(h::STREAM_RECORD_NEXT, b.records.2);
    }
    r.body = render_body(&mut b, view);
    r
}

/// A parsed read request.
pub struct ReadQuery<'a> {
    pub offset: Option<OffsetQuery>,
    pub live: Option<&'a str>,
    pub records: Option<RecordQuery>,
    pub limit: Limit,
}

impl ReadQuery<'_> {
    /// How the read renders on `surface` for a stream that is (not) JSON.
    pub fn view(&self, surface: Surface, json: bool) -> View {
        match self.records {
            None if json && surface == Surface::Base => View::Array,
            None => View::Bytes,
            Some(RecordQuery { envelope: true, .. }) => View::Envelope,
            Some(_) => View::Records,
        }
    }
}

impl View {
    /// A record-aware read (JSON record coordinates): whole records with
    /// `Stream-Record-*` headers and control fields.
    pub fn record_aware(self) -> bool {
        matches!(self, View::Records | View::Envelope)
    }
}

/// A live SSE read, planned by `get` and run by `sse` (or joined to a relay).
pub struct SseRequest {
    pub key: Box<StreamKey>,
    pub from: u64,
    pub cursor: Option<String>,
    pub view: View,
    pub limit: Limit,
    /// CORS headers for the request's Origin.
    pub cors: Cors,
}

/// Parses `offset`, `live`, `max_bytes` and the record parameters. One
/// response reads at most `max_read` bytes (`--max-read-bytes`; whole JSON
/// messages: at least one); the client continues from Stream-Next-Offset.
pub fn parse_read_query<'a>(t: &'a Target<'_>, surface: Surface, max_read: u64) -> Result<ReadQuery<'a>, Error> {
    let bad = |why| Err(Error::Invalid(why));
    let offsets: Vec<&str> = t.query.iter().filter(|(k, _)| k == "offset").map(|(_, v)| v.as_ref()).collect();
    if offsets.len() > 1 {
        return bad("offset given more than once");
    }
    let offset = match offsets.first() {
        None => None,
        Some(v) => Some(OffsetQuery::parse(v).ok_or(Error::Invalid("malformed offset"))?),
    };
    let records = coordinates::parse(|k| t.param(k))?;
    let live = t.param("live");
    match live {
        None | Some("long-poll") | Some("sse") => {}
        Some(_) => return bad("live must be long-poll or sse"),
    }
    if live.is_some() && offset.is_none() && records.is_none() {
        return bad("live reads need an offset");
    }
    if t.param("cursor").is_some_and(|c| !cursor_in_range(c)) {
        return bad("cursor is beyond the largest cursor");
    }
    let mut limit = Limit {
        bytes: max_read,
        exact: false,
        whole_json: surface == Surface::Base,
        records: records.and_then(|r| r.max_records),
    };
    if let Some(m) = t.param("max_bytes") {
        let n = parse_uint(m).filter(|n| *n > 0).ok_or(Error::Invalid("max_bytes must be a positive integer"))?;
        limit.bytes = n.min(max_read);
        limit.exact = true;
    }
    Ok(ReadQuery { offset, live, records, limit })
}

pub async fn get(ctx: &Rc<Ctx>, head: &Head, t: &Target<'_>, key: &StreamKey) -> Reply {
    match read(ctx, head, t, key).await {
        Ok(reply) => reply,
        Err(e) => Reply::Full(refusal(ctx, key, e)),
    }
}

async fn read(ctx: &Rc<Ctx>, head: &Head, t: &Target<'_>, key: &StreamKey) -> Result<Reply, Error> {
    let surface = Surface::of(t);
    let q = parse_read_query(t, surface, ctx.cfg.max_read_bytes)?;
    let offset = q.offset.unwrap_or(OffsetQuery::Start);
    let now = ctx.now_ms();
    bucket_exists(ctx, key)?;
    let from = resolve(ctx, key, surface, offset, q.records.as_ref(), now).await?;
    let view = q.view(surface, json_stream(ctx, key));
    let cursor = || next_cursor(ctx.now_ms(), t.param("cursor"), ctx.random()).to_string();
    let reply = match q.live {
        Some("sse") => Reply::Sse(SseRequest {
            key: key.to_owned(),
            from,
            cursor: t.param("cursor").map(str::to_string),
            view,
            limit: q.limit,
            cors: ctx.gate.cors(head.header(sluice::http::headers::ORIGIN)),
        }),
        Some(_) => Reply::Full(long_poll(ctx, key, from, view, q.limit, &cursor).await?),
        None => {
            let streamable = view == View::Bytes && !q.limit.exact && head.method == Method::Get;
            if let Some((c, etag)) = if streamable { plan_catchup(ctx, key, from).await? } else { None } {
                if head.header(h::IF_NONE_MATCH) == Some(etag.as_str()) {
                    return Ok(Reply::Full(Response::new(304).header(h::ETAG, etag)));
                }
                return Ok(Reply::Catchup(c));
            }
            let mut b = read_batch(ctx, key, from, q.limit).await?;
            b.etag = representation_etag(&b.etag, view);
            if offset == OffsetQuery::Now && q.records.is_none() {
                return Ok(Reply::Full(read_response(b, view, "no-store")));
            }
            if head.header(h::IF_NONE_MATCH) == Some(b.etag.as_str()) {
                return Ok(Reply::Full(Response::new(304).header(h::ETAG, b.etag.clone())));
            }
            let cache = if b.up_to_date { "no-cache" } else { CACHEABLE };
            let etag = b.etag.clone();
            Reply::Full(read_response(b, view, cache).header(h::ETAG, etag))
        }
    };
    Ok(reply)
}

/// More parked readers than --max-waiters.
pub const TOO_MANY_WAITERS: Error = Error::Unavailable("too many parked readers (--max-waiters)");

/// Parks until the stream grows past `from`, closes, or the timeout passes.
async fn long_poll(
    ctx: &Rc<Ctx>,
    key: &StreamKey,
    from: u64,
    view: View,
    limit: Limit,
    cursor: &dyn Fn() -> String,
) -> Result<Response, Error> {
    let deadline = Instant::now() + ctx.cfg.long_poll_timeout;
    loop {
        ctx.shard.settle(key).await.map_err(Error::Log)?;
        let (signal, seen, tail, closed, records) = {
            let mut st = ctx.shard.store.borrow_mut();
            let e = st.streams.get_mut(key).filter(|e| !e.state.deleted).ok_or(Error::NoStream)?;
            let (signal, seen) = e.park();
            let s = &e.state;
            let records = s.json.then_some((s.first_message, s.visible.messages));
            (signal, seen, s.visible.tail, s.visible.closed, records)
        };
        if tail > from {
            let b = read_batch(ctx, key, from, limit).await?;
            return Ok(read_response(b, view, "no-cache").header(h::STREAM_CURSOR, cursor()));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if closed || left.is_zero() || ctx.stopping() {
            let mut r = Response::new(204)
                .header(h::STREAM_NEXT_OFFSET, Offset(tail))
                .header(h::STREAM_UP_TO_DATE, "true")
                .header(h::STREAM_CURSOR, cursor())
                .header(h::CACHE_CONTROL, "no-cache");
            if closed {
                r.set(h::STREAM_CLOSED, "true");
            }
            if let (Some((first, next)), true) = (records, view.record_aware()) {
                r.set(h::STREAM_RECORD_FIRST, first);
                r.set(h::STREAM_RECORD_START, next);
                r.set(h::STREAM_RECORD_NEXT, next);
            }
            return Ok(r);
        }
        if ctx.waiters.get() >= ctx.cfg.max_waiters {
            return Err(TOO_MANY_WAITERS);
        }
        let parked = &ctx.metrics.long_polls;
        parked.set(parked.get() + 1);
        park(ctx, &signal, seen, left).await;
        parked.set(parked.get() - 1);
    }
}

/// Waits for a stream's signal, the timeout or shutdown, counted against
/// --max-waiters.
pub async fn park(ctx: &Ctx, signal: &Rc<Signal>, seen: u64, timeout: Duration) {
    if ctx.stopping() {
        return;
    }
    ctx.waiters.set(ctx.waiters.get() + 1);
    let woken = futures_lite::future::or(signal.changed(seen), ctx.stopping.changed(0));
    futures_lite::future::or(woken, glommio::timer::sleep(timeout)).await;
    ctx.waiters.set(ctx.waiters.get() - 1);
}
