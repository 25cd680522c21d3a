//! Reads: catch-up GET, long-poll, and the shared batch reader that SSE uses.
//! Offset reads return bytes (JSON streams: a JSON array); record-aware reads
//! (JSON record coordinates) return whole records as NDJSON or envelopes.

use super::stream::{missing, JSON_RECORDS};
use super::Reply;
use crate::shard::Ctx;
use crate::sse::SseRequest;
use sluice::http::url::Target;
use sluice::http::{Head, Response};
use sluice_shards::core::cursor::next_cursor;
use sluice_shards::core::json::render_array;
use sluice_shards::core::records::{self, RecordQuery, RecordRefusal};
use sluice_shards::offset::{Offset, OffsetQuery};
use sluice_shards::signal::Signal;
use sluice_shards::store::StreamKey;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Most bytes one response carries unless `max_bytes` says less; the client
/// continues from Stream-Next-Offset. Always at least one whole message.
pub const READ_CHUNK: u64 = 8 << 20;

/// How much one batch may hold.
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    pub bytes: u64,
    /// `max_bytes` was given: cut exactly (at a UTF-8 boundary for text).
    pub exact: bool,
    pub records: Option<u64>,
}

impl Limit {
    pub const DEFAULT: Limit = Limit { bytes: READ_CHUNK, exact: false, records: None };
}

/// How a batch is rendered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Bytes as stored; JSON streams as a JSON array.
    Offsets,
    /// One record per line (`application/x-ndjson`).
    Records,
    /// `{"record":N,"value":...}` per line.
    Envelope,
}

/// Stream bytes read for one response.
pub struct Batch {
    /// Stored bytes (for JSON streams: messages each followed by `,`).
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
    pub records: (usize, usize, usize),
}

/// Where a read starts.
pub enum Start {
    At(u64),
    Refused(Response),
}

fn text(content_type: &str) -> bool {
    sluice_shards::core::media_type(content_type).starts_with("text/")
}

/// Resolves where a read starts for a live stream and renews its TTL.
pub fn resolve(ctx: &Ctx, key: &StreamKey, q: OffsetQuery, rq: Option<&RecordQuery>, now: u64) -> Start {
    let mut st = ctx.shard.store.borrow_mut();
    let Some(e) = st.live(key, now) else {
        drop(st);
        return Start::Refused(missing(ctx, key));
    };
    e.state.lifetime.touch(now);
    let s = &e.state;
    let bad = |why| Start::Refused(Response::error(400, why));
    let gone = |s: &sluice_shards::core::StreamState| {
        Start::Refused(
            Response::error(410, "data before the earliest retained offset is gone; use /bootstrap")
                .header("stream-record-first", s.first_message.to_string())
                .header("stream-record-next", s.visible.messages.to_string()),
        )
    };
    if let Some(rq) = rq {
        if !s.json {
            return bad("record coordinates need an application/json stream");
        }
        return match records::resolve(s, rq.start) {
            Ok(r) => Start::At(s.record_offset(r).expect("resolved within [F, N]")),
            Err(RecordRefusal::Gone) => gone(s),
            Err(RecordRefusal::Beyond) => Start::Refused(
                Response::error(400, "record is beyond the record tail")
                    .header("stream-record-next", s.visible.messages.to_string()),
            ),
        };
    }
    match q {
        OffsetQuery::Start => Start::At(s.retained),
        OffsetQuery::Now => Start::At(s.visible.tail),
        OffsetQuery::At(Offset(o)) if o > s.visible.tail => bad("offset is beyond the stream tail"),
        OffsetQuery::At(Offset(o)) if o < s.retained => gone(s),
        OffsetQuery::At(Offset(o)) if s.json && !s.is_boundary(o) => {
            bad("offset is not a message boundary of this JSON stream")
        }
        OffsetQuery::At(Offset(o)) => Start::At(o),
    }
}

/// Reads visible bytes from `from` within `limit`. With `max_bytes` on a
/// text stream the cut never splits a UTF-8 character: a trailing partial
/// character is left for the next read, and a limit smaller than the first
/// character returns that whole character.
pub async fn read_batch(ctx: &Ctx, key: &StreamKey, from: u64, limit: Limit) -> Option<Batch> {
    let mut b = read_span(ctx, key, from, limit).await?;
    if limit.exact && text(&b.content_type) {
        if let Some(width) = trim_to_char_boundary(&mut b) {
            b = read_span(ctx, key, from, Limit { bytes: width, ..limit }).await?;
        }
    }
    Some(b)
}

async fn read_span(ctx: &Ctx, key: &StreamKey, from: u64, limit: Limit) -> Option<Batch> {
    let (parts, mut batch) = {
        let st = ctx.shard.store.borrow();
        let e = st.streams.get(key)?;
        let s = &e.state;
        let whole_messages = s.json;
        let mut parts = Vec::new();
        let mut lengths = Vec::new();
        let mut end = from;
        let first = s.message_at(from);
        let mut i = first;
        while i < s.visible.messages {
            let m = s.messages[i];
            let skip = from.saturating_sub(m.offset);
            let mut len = u64::from(m.len) - skip;
            let room = limit.bytes.saturating_sub(end - from);
            if limit.records.is_some_and(|n| (i - first) as u64 >= n) {
                break;
            }
            if len > room {
                if limit.exact && !whole_messages {
                    // max_bytes on a byte stream: cut exactly at the limit.
                    if room == 0 {
                        break;
                    }
                    len = room;
                } else if end > from {
                    // Otherwise whole messages only, but at least one.
                    break;
                }
            }
            parts.push((m.shard, m.segment, m.pos + skip, len as u32));
            lengths.push(len as u32);
            end = m.offset + skip + len;
            i += 1;
            if len < u64::from(m.len) - skip {
                break;
            }
        }
        let up_to_date = end == s.visible.tail;
        let closed = up_to_date && s.visible.closed;
        let etag = format!("\"{}.{}.{}.{}{}\"", ctx.id, s.handle, from, end, if closed { ".c" } else { "" });
        let next_record = s.messages[..s.visible.messages].partition_point(|m| m.offset < end);
        let batch = Batch {
            data: Vec::new(),
            lengths,
            end,
            up_to_date,
            closed,
            json: s.json,
            content_type: s.content_type.clone(),
            etag,
            records: (s.first_message, first, next_record),
        };
        (parts, batch)
    };
    match ctx.shard.read_messages(&parts).await {
        Ok(data) => batch.data = data,
        Err(e) => {
            tracing::error!(shard = ctx.id, error = %e, "read failed");
            return None;
        }
    }
    Some(batch)
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
        let width = match b.data.first()? {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            _ => 4,
        };
        return Some(width);
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

/// The messages of a batch without JSON's trailing commas.
pub fn messages(b: &Batch) -> impl Iterator<Item = &[u8]> {
    let mut at = 0usize;
    b.lengths.iter().map(move |len| {
        let m = &b.data[at..at + *len as usize];
        at += *len as usize;
        m.strip_suffix(b",").unwrap_or(m)
    })
}

/// One envelope line body: `{"record":N,"value":<message>}`.
pub fn envelope(record: usize, value: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(format!("{{\"record\":{record},\"value\":").as_bytes());
    out.extend_from_slice(value);
    out.push(b'}');
}

/// The body of a batch as the client sees it.
/// Takes the bytes out of the batch when they are sent as stored.
pub fn render_body(b: &mut Batch, view: View) -> Vec<u8> {
    if view == View::Offsets && !b.json {
        return std::mem::take(&mut b.data);
    }
    let mut out = Vec::with_capacity(b.data.len() + 2);
    match view {
        View::Offsets => render_array(&b.data, &mut out),
        View::Records => {
            for m in messages(b) {
                out.extend_from_slice(m);
                out.push(b'\n');
            }
        }
        View::Envelope => {
            for (i, m) in messages(b).enumerate() {
                envelope(b.records.1 + i, m, &mut out);
                out.push(b'\n');
            }
        }
    }
    out
}

fn content_type(b: &Batch, view: View) -> String {
    match view {
        View::Offsets => b.content_type.clone(),
        View::Records => "application/x-ndjson".into(),
        View::Envelope => "application/vnd.durable-stream-records+ndjson".into(),
    }
}

fn read_response(mut b: Batch, view: View, cache: &'static str) -> Response {
    let mut r = Response::new(200)
        .header("content-type", content_type(&b, view))
        .header("stream-next-offset", Offset(b.end).to_string())
        .header("cache-control", cache);
    if b.up_to_date {
        r.set("stream-up-to-date", "true");
    }
    if b.closed {
        r.set("stream-closed", "true");
    }
    if b.json {
        r.set("stream-extensions", JSON_RECORDS);
        if view != View::Offsets {
            r.set("stream-record-first", b.records.0.to_string());
            r.set("stream-record-start", b.records.1.to_string());
            r.set("stream-record-next", b.records.2.to_string());
        }
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
    pub fn view(&self) -> View {
        match self.records {
            None => View::Offsets,
            Some(RecordQuery { envelope: true, .. }) => View::Envelope,
            Some(_) => View::Records,
        }
    }
}

/// Parses `offset`, `live`, `max_bytes` and the record parameters.
pub fn parse_read_query(t: &Target) -> Result<ReadQuery<'_>, &'static str> {
    let offsets: Vec<&str> = t.query.iter().filter(|(k, _)| k == "offset").map(|(_, v)| v.as_str()).collect();
    if offsets.len() > 1 {
        return Err("offset given more than once");
    }
    let offset = match offsets.first() {
        None => None,
        Some(v) => Some(OffsetQuery::parse(v).ok_or("malformed offset")?),
    };
    let records = records::parse(|k| t.param(k))?;
    let live = t.param("live");
    match live {
        None | Some("long-poll") | Some("sse") => {}
        Some(_) => return Err("live must be long-poll or sse"),
    }
    if live.is_some() && offset.is_none() && records.is_none() {
        return Err("live reads need an offset");
    }
    let mut limit = Limit { records: records.and_then(|r| r.max_records), ..Limit::DEFAULT };
    if let Some(m) = t.param("max_bytes") {
        let n: u64 = m.parse().ok().filter(|n| *n > 0).ok_or("max_bytes must be a positive integer")?;
        limit.bytes = n.min(READ_CHUNK);
        limit.exact = true;
    }
    Ok(ReadQuery { offset, live, records, limit })
}

pub async fn get(ctx: &Rc<Ctx>, head: &Head, t: &Target, key: &StreamKey) -> Reply {
    let q = match parse_read_query(t) {
        Ok(q) => q,
        Err(why) => return Reply::Full(Response::error(400, why)),
    };
    let offset = q.offset.unwrap_or(OffsetQuery::Start);
    let now = ctx.now_ms();
    if !ctx.shard.store.borrow().bucket_exists(&key.0) {
        return Reply::Full(Response::error(404, "bucket not found"));
    }
    let from = match resolve(ctx, key, offset, q.records.as_ref(), now) {
        Start::At(o) => o,
        Start::Refused(r) => return Reply::Full(r),
    };
    let view = q.view();
    let cursor = || next_cursor(ctx.now_ms(), t.param("cursor"), ctx.random()).to_string();
    match q.live {
        Some("sse") => Reply::Sse(SseRequest {
            key: key.clone(),
            from,
            cursor: t.param("cursor").map(str::to_string),
            view,
            limit: q.limit,
        }),
        Some(_) => Reply::Full(long_poll(ctx, key, from, view, q.limit, &cursor).await),
        None => {
            let Some(b) = read_batch(ctx, key, from, q.limit).await else {
                return Reply::Full(missing(ctx, key));
            };
            if offset == OffsetQuery::Now && q.records.is_none() {
                return Reply::Full(read_response(b, view, "no-store"));
            }
            if head.header("if-none-match") == Some(b.etag.as_str()) {
                return Reply::Full(Response::new(304).header("etag", b.etag.clone()));
            }
            let cache = if b.up_to_date { "no-cache" } else { "public, max-age=60, stale-while-revalidate=300" };
            let etag = b.etag.clone();
            Reply::Full(read_response(b, view, cache).header("etag", etag))
        }
    }
}

/// Parks until the stream grows past `from`, closes, or the timeout passes.
async fn long_poll(
    ctx: &Rc<Ctx>,
    key: &StreamKey,
    from: u64,
    view: View,
    limit: Limit,
    cursor: &dyn Fn() -> String,
) -> Response {
    let deadline = Instant::now() + ctx.cfg.long_poll_timeout;
    loop {
        let (signal, seen, tail, closed, records) = {
            let st = ctx.shard.store.borrow();
            let Some(e) = st.streams.get(key).filter(|e| !e.state.deleted) else {
                drop(st);
                return missing(ctx, key);
            };
            let s = &e.state;
            let records = s.json.then_some((s.first_message, s.visible.messages));
            (e.signal.clone(), e.signal.generation(), s.visible.tail, s.visible.closed, records)
        };
        if tail > from {
            let Some(b) = read_batch(ctx, key, from, limit).await else {
                return missing(ctx, key);
            };
            return read_response(b, view, "no-cache").header("stream-cursor", cursor());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if closed || left.is_zero() || ctx.stopping() {
            let mut r = Response::new(204)
                .header("stream-next-offset", Offset(tail).to_string())
                .header("stream-up-to-date", "true")
                .header("stream-cursor", cursor())
                .header("cache-control", "no-cache");
            if closed {
                r.set("stream-closed", "true");
            }
            if let (Some((first, next)), true) = (records, view != View::Offsets) {
                r.set("stream-extensions", JSON_RECORDS);
                r.set("stream-record-first", first.to_string());
                r.set("stream-record-start", next.to_string());
                r.set("stream-record-next", next.to_string());
            }
            return r;
        }
        if ctx.waiters.get() >= ctx.cfg.max_waiters {
            return Response::error(503, "too many parked readers (--max-waiters)").header("retry-after", "1");
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
