//! Server-Sent Events: catch-up then live tail, one `data` event per read
//! batch immediately followed by its `control` event, base64 for binary
//! streams, and a clean close after the stream's final control event.

use crate::ctx::Ctx;
use crate::handlers::read::{self, envelope, messages, park, read_batch, render_body, Batch, SseRequest, View};
use crate::send::send;
use base64::Engine;
use futures_lite::AsyncReadExt;
use glommio::net::TcpStream;
use sluice::http::headers as h;
use sluice::http::Response;
use sluice::sse_wire::{encode_control, encode_data_event, is_binary, Control};
use sluice_shards::core::cursor::next_cursor;
use sluice_shards::signal::Signal;
use sluice_shards::store::{SharedEvent, StreamKey};
use std::rc::Rc;
use std::time::{Duration, Instant};

pub async fn run(ctx: &Rc<Ctx>, sock: &mut TcpStream, req: SseRequest) {
    let Some((mut out, binary, json)) = start(ctx, &req) else {
        return;
    };
    let record_aware = json && req.view.record_aware();
    if !send(sock, &out, ctx.cfg.idle_timeout).await {
        return;
    }
    // The connection now lives as long as the SSE response: no read timeout
    // (reads only probe for the client going away).
    let _ = sock.set_read_timeout(None);
    let deadline = Instant::now() + ctx.cfg.sse_reconnect;
    let mut offset = req.from;
    let mut announced = false;
    let cursor = || next_cursor(ctx.now_ms(), req.cursor.as_deref(), ctx.random());
    loop {
        // Stopping: end here, after a whole event; the client resumes from
        // the last control event's offset on another server or this one.
        if ctx.stopping() {
            return;
        }
        out.clear();
        let (signal, seen, tail, closed, shared) = {
            let mut st = ctx.shard.store.borrow_mut();
            let Some(e) = st.streams.get_mut(&req.key) else {
                return;
            };
            let (signal, seen) = e.park();
            let s = &e.state;
            (signal, seen, s.visible.tail, s.visible.closed, e.shared_event.clone())
        };
        // Readers of the stored bytes at the tail share one encoded event
        // (read and encoded once), as long as their cursor is the interval's.
        let interval = next_cursor(ctx.now_ms(), None, 0);
        let cursor_now = cursor();
        let shareable = req.view == View::Bytes && !req.limit.exact && cursor_now == interval;
        if let Some(ev) = shared.filter(|ev| {
            shareable && ev.from == offset && ev.end == tail && ev.closed == closed && ev.cursor == interval
        }) {
            offset = ev.end;
            announced = true;
            if !send(sock, &ev.bytes, ctx.cfg.idle_timeout).await || ev.closed {
                return;
            }
            continue;
        }
        if tail > offset {
            // A failed read (logged by read_batch) or a vanished stream ends
            // the event stream after its last complete event; the client
            // reconnects from the last control event's offset.
            let Ok(mut b) = read_batch(ctx, &req.key, offset, req.limit).await else { return };
            if json && req.view == View::Bytes && req.limit.exact {
                read::trim_to_record(&mut b);
            }
            encode_data(&mut b, req.view, binary, &mut out);
            let control = Control {
                next: b.end,
                cursor: (!b.closed).then_some(cursor_now),
                up_to_date: b.up_to_date,
                closed: b.closed,
                records: record_aware.then_some((b.records.0, b.records.2)),
            };
            encode_control(control, &mut out);
            if shareable && b.up_to_date {
                share(
                    ctx,
                    &req.key,
                    SharedEvent { from: offset, end: b.end, closed: b.closed, cursor: interval, bytes: out.clone() },
                );
            }
            offset = b.end;
            announced = true;
            if !send(sock, &out, ctx.cfg.idle_timeout).await || b.closed {
                return;
            }
            continue;
        }
        let records = if record_aware { records_at(ctx, &req.key) } else { None };
        if closed {
            encode_control(
                Control { next: offset, up_to_date: true, closed: true, records, ..Control::default() },
                &mut out,
            );
            let _ = send(sock, &out, ctx.cfg.idle_timeout).await;
            return;
        }
        if !announced {
            let c = Control { next: offset, cursor: Some(cursor()), up_to_date: true, records, ..Control::default() };
            encode_control(c, &mut out);
            announced = true;
            if !send(sock, &out, ctx.cfg.idle_timeout).await {
                return;
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        if !wait(ctx, sock, &signal, seen, left).await {
            return;
        }
    }
}

/// The response head of an SSE read (nothing yet sent), and whether the
/// stream is binary (base64 events) and JSON; None if the stream is gone.
pub fn start(ctx: &Ctx, req: &SseRequest) -> Option<(Vec<u8>, bool, bool)> {
    let (content_type, json) =
        ctx.shard.store.borrow().streams.get(&*req.key).map(|e| (e.state.content_type.clone(), e.state.json))?;
    let binary = is_binary(&content_type);
    let data_type = match req.view {
        View::Envelope => "application/vnd.durable-stream-record+json".to_string(),
        view => read::content_type(&content_type, json, view),
    };
    let mut head = Response::new(200)
        .header(h::CONTENT_TYPE, "text/event-stream")
        .header(h::CACHE_CONTROL, "no-cache")
        .header(h::STREAM_DATA_CONTENT_TYPE, data_type);
    if binary {
        head.set(h::STREAM_SSE_DATA_ENCODING, "base64");
    }
    if json {
        head.set(h::STREAM_EXTENSIONS, crate::handlers::stream::JSON_RECORDS);
    }
    let mut out = Vec::with_capacity(4096);
    render_stream_head(sluice::http::cors::finish(head, &req.cors), &mut out);
    Some((out, binary, json))
}

/// Appends the `data` event(s) of a read batch in `view` to `out`.
pub fn encode_data(b: &mut Batch, view: View, binary: bool, out: &mut Vec<u8>) {
    match view {
        View::Envelope => {
            for (i, m) in messages(b).enumerate() {
                let mut line = Vec::with_capacity(m.len() + 32);
                envelope(b.records.1 + i as u64, m, &mut line);
                encode_data_event(&line, out);
            }
        }
        view => {
            let body = render_body(b, view);
            if binary {
                let b64 = base64::engine::general_purpose::STANDARD.encode(&body);
                encode_data_event(b64.as_bytes(), out);
            } else {
                encode_data_event(&body, out);
            }
        }
    }
}

/// Parks until `signal` moves past `seen` or `left` passes; false if the
/// client went away (EOF or reset, noticed at once) or shutdown began.
pub async fn wait(ctx: &Ctx, sock: &mut TcpStream, signal: &Rc<Signal>, seen: u64, left: Duration) -> bool {
    let mut probe = [0u8; 1];
    let gone = futures_lite::future::or(
        async {
            park(ctx, signal, seen, left).await;
            false
        },
        async { !matches!(sock.read(&mut probe).await, Ok(n) if n > 0) },
    )
    .await;
    !gone && !ctx.stopping()
}

/// Publishes an encoded event for the other readers of the stream.
fn share(ctx: &Ctx, key: &StreamKey, ev: SharedEvent) {
    if let Some(e) = ctx.shard.store.borrow_mut().streams.get_mut(key) {
        e.shared_event = Some(Rc::new(ev));
    }
}

/// First retained and next record of a stream.
fn records_at(ctx: &Ctx, key: &StreamKey) -> Option<(u64, u64)> {
    ctx.shard.store.borrow().streams.get(key).map(|e| (e.state.first_message, e.state.visible.messages))
}

/// Status line and headers for a body that ends when the connection closes.
fn render_stream_head(r: Response, out: &mut Vec<u8>) {
    out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    r.render_fields(out);
    out.extend_from_slice(b"connection: close\r\n\r\n");
}
