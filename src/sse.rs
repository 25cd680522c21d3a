//! Server-Sent Events: catch-up then live tail, one `data` event per read
//! batch immediately followed by its `control` event, base64 for binary
//! streams, and a clean close after the stream's final control event.

use crate::handlers::read::{park, read_batch, render_body, READ_CHUNK};
use crate::http::Response;
use crate::shard::Ctx;
use base64::Engine;
use futures_lite::AsyncWriteExt;
use glommio::net::TcpStream;
use sluice_shards::core::cursor::next_cursor;
use sluice_shards::core::media_type;
use sluice_shards::offset::Offset;
use sluice_shards::store::StreamKey;
use std::rc::Rc;
use std::time::Instant;

pub struct SseRequest {
    pub key: StreamKey,
    pub from: u64,
    pub cursor: Option<String>,
}

/// Whether SSE data for this content type travels as base64.
pub fn is_binary(content_type: &str) -> bool {
    let m = media_type(content_type);
    !(m.starts_with("text/") || m == "application/json")
}

/// Appends one `data` event, splitting the payload on CR, LF and CRLF so no
/// payload byte can start a new event.
pub fn encode_data_event(payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(b"event: data\n");
    let mut line_start = 0;
    let mut i = 0;
    while i <= payload.len() {
        let at_end = i == payload.len();
        if at_end || payload[i] == b'\n' || payload[i] == b'\r' {
            out.extend_from_slice(b"data:");
            let line = &payload[line_start..i];
            if line.first() == Some(&b' ') {
                // Parsers strip one leading space: keep the payload's own.
                out.push(b' ');
            }
            out.extend_from_slice(line);
            out.push(b'\n');
            if !at_end && payload[i] == b'\r' && payload.get(i + 1) == Some(&b'\n') {
                i += 1;
            }
            line_start = i + 1;
        }
        i += 1;
    }
    out.push(b'\n');
}

/// Appends one `control` event.
pub fn encode_control(next: u64, cursor: Option<u64>, up_to_date: bool, closed: bool, out: &mut Vec<u8>) {
    let mut json = format!("{{\"streamNextOffset\":\"{}\"", Offset(next));
    if let Some(c) = cursor {
        json.push_str(&format!(",\"streamCursor\":\"{c}\""));
    }
    if up_to_date {
        json.push_str(",\"upToDate\":true");
    }
    if closed {
        json.push_str(",\"streamClosed\":true");
    }
    json.push('}');
    out.extend_from_slice(b"event: control\ndata:");
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(b"\n\n");
}

pub async fn run(ctx: &Rc<Ctx>, sock: &mut TcpStream, req: SseRequest) {
    let Some(content_type) = ctx.shard.store.borrow().streams.get(&req.key).map(|e| e.state.content_type.clone())
    else {
        return;
    };
    let binary = is_binary(&content_type);
    let mut head = Response::new(200)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .header("stream-data-content-type", content_type.clone());
    if binary {
        head.set("stream-sse-data-encoding", "base64");
    }
    let mut out = Vec::with_capacity(4096);
    render_stream_head(crate::handlers::finish(head), &mut out);
    if sock.write_all(&out).await.is_err() {
        return;
    }
    let deadline = Instant::now() + ctx.cfg.sse_reconnect;
    let mut offset = req.from;
    let mut announced = false;
    let cursor = || next_cursor(ctx.now_ms(), req.cursor.as_deref(), ctx.random());
    loop {
        out.clear();
        let (signal, seen, tail, closed) = {
            let st = ctx.shard.store.borrow();
            let Some(e) = st.streams.get(&req.key) else {
                return;
            };
            (e.signal.clone(), e.signal.generation(), e.state.visible.tail, e.state.visible.closed)
        };
        if tail > offset {
            let Some(b) = read_batch(ctx, &req.key, offset, READ_CHUNK).await else {
                return;
            };
            let body = render_body(&b);
            if binary {
                let b64 = base64::engine::general_purpose::STANDARD.encode(&body);
                encode_data_event(b64.as_bytes(), &mut out);
            } else {
                encode_data_event(&body, &mut out);
            }
            let c = (!b.closed).then(cursor);
            encode_control(b.end, c, b.up_to_date, b.closed, &mut out);
            offset = b.end;
            announced = true;
            if sock.write_all(&out).await.is_err() || b.closed {
                return;
            }
            continue;
        }
        if closed {
            encode_control(offset, None, true, true, &mut out);
            let _ = sock.write_all(&out).await;
            return;
        }
        if !announced {
            encode_control(offset, Some(cursor()), true, false, &mut out);
            announced = true;
            if sock.write_all(&out).await.is_err() {
                return;
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        park(ctx, &signal, seen, left).await;
    }
}

/// Status line and headers for a body that ends when the connection closes.
fn render_stream_head(r: Response, out: &mut Vec<u8>) {
    out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    for (n, v) in &r.headers {
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"connection: close\r\n\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_lines_split_on_every_line_break() {
        let mut out = Vec::new();
        encode_data_event(b"a\r\n\r\nevent: control\rdata: x\n b", &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "event: data\ndata:a\ndata:\ndata:event: control\ndata:data: x\ndata:  b\n\n"
        );
    }

    #[test]
    fn control_fields() {
        let mut out = Vec::new();
        encode_control(5, Some(7), true, false, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "event: control\ndata:{\"streamNextOffset\":\"0000000000000000_0000000000000005\",\"streamCursor\":\"7\",\"upToDate\":true}\n\n"
        );
        let mut out = Vec::new();
        encode_control(5, None, true, true, &mut out);
        assert!(String::from_utf8(out).unwrap().contains("\"streamClosed\":true}"));
    }

    #[test]
    fn binary_detection() {
        assert!(is_binary("application/octet-stream"));
        assert!(is_binary("image/png"));
        assert!(!is_binary("text/plain; charset=utf-8"));
        assert!(!is_binary("application/json"));
    }
}
