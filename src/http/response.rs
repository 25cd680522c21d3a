//! Responses: status, headers and a body, rendered into one write buffer.

use super::date;
use super::headers as h;
use super::shelf::{put_back, Shelf};
use crate::edge_limits::{FIELDS_ROOM, KEPT_FIELD_LISTS, KEPT_RESPONSES, KEPT_RESPONSE_ROOM, LARGE_BODY};
#[cfg(test)]
use sluice_shards::offset::MAX_OFFSET;
use sluice_shards::offset::{Offset, OFFSET_WIDTH};
use std::borrow::Cow;
use std::io::Write as _;

/// A header value: fixed text costs no allocation, an offset or a number
/// is written into the value itself (a durable append's answer then costs
/// no String), other computed text owns its String.
#[derive(Clone, Debug)]
pub enum Value {
    Text(Cow<'static, str>),
    Short(Short),
}

/// Text of at most [`SHORT_VALUE`] bytes held inline.
#[derive(Clone, Copy, Debug)]
pub struct Short {
    bytes: [u8; SHORT_VALUE],
    len: u8,
}

/// The longest value held inline: an offset token, or a `u64` in decimal.
pub const SHORT_VALUE: usize = OFFSET_WIDTH;
const _: () = assert!(SHORT_VALUE >= 20 && SHORT_VALUE <= u8::MAX as usize, "a u64 in decimal fits");

impl Short {
    fn of(text: &[u8]) -> Short {
        assert!(text.len() <= SHORT_VALUE && text.is_ascii(), "a short value is at most {SHORT_VALUE} ascii bytes");
        let mut bytes = [0; SHORT_VALUE];
        bytes[..text.len()].copy_from_slice(text);
        Short { bytes, len: text.len() as u8 }
    }
}

impl std::ops::Deref for Value {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            Value::Text(t) => t,
            // SAFETY: `Short::of` takes ASCII only (asserted), which is UTF-8.
            Value::Short(s) => unsafe { std::str::from_utf8_unchecked(&s.bytes[..s.len as usize]) },
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        **self == **other
    }
}

impl From<&'static str> for Value {
    fn from(t: &'static str) -> Value {
        Value::Text(Cow::Borrowed(t))
    }
}

impl From<String> for Value {
    fn from(t: String) -> Value {
        Value::Text(Cow::Owned(t))
    }
}

impl From<Offset> for Value {
    fn from(o: Offset) -> Value {
        Value::Short(Short::of(&o.render()))
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        let mut digits = [0u8; SHORT_VALUE];
        let mut room = &mut digits[..];
        write!(room, "{n}").expect("a u64 in decimal fits");
        let len = SHORT_VALUE - room.len();
        Value::Short(Short::of(&digits[..len]))
    }
}

/// A response's header fields, in order.
pub type Fields = Vec<(&'static str, Value)>;

thread_local! {
    /// The header lists of responses this thread rendered, emptied, for its
    /// next responses: a request on a shard then allocates none for them
    /// (a list that grew beyond the usual room is freed).
    static FIELD_LISTS: Shelf<Fields> = const { Shelf::new(KEPT_FIELD_LISTS, FIELDS_ROOM) };
    /// The buffers of responses this thread sent, emptied, for its next
    /// responses and forwarded requests ([`Rendered`], [`buffer`]).
    static SENT: Shelf<Vec<u8>> = const { Shelf::new(KEPT_RESPONSES, KEPT_RESPONSE_ROOM) };
}

/// A header list: one the thread kept, or a new one.
fn fields() -> Fields {
    FIELD_LISTS.with(Shelf::take).unwrap_or_else(|| Vec::with_capacity(FIELDS_ROOM))
}

/// A buffer of at least `room` bytes for a response or a forwarded
/// request: one a sent response left on this thread, or a new one.
pub fn buffer(room: usize) -> Vec<u8> {
    let mut b = SENT.with(Shelf::take).unwrap_or_default();
    b.reserve(room);
    b
}

pub struct Response {
    pub status: u16,
    pub headers: Fields,
    pub body: Vec<u8>,
    /// For HEAD: the Content-Length to announce without a body.
    pub head_length: Option<usize>,
    /// Whether the head carries `Date`, written when it is rendered from
    /// the shard's copy for the current second (no String per response).
    pub dated: bool,
}

pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        412 => "Precondition Failed",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        507 => "Insufficient Storage",
        _ => "Unknown",
    }
}

impl Response {
    pub fn new(status: u16) -> Self {
        Response { status, headers: fields(), body: Vec::new(), head_length: None, dated: false }
    }

    /// A short plain-text error.
    pub(super) fn error(status: u16, why: &str) -> Self {
        let mut r = Response::new(status);
        r.set(h::CONTENT_TYPE, "text/plain; charset=utf-8");
        r.body = format!("{why}\n").into_bytes();
        r
    }

    pub fn header(mut self, name: &'static str, value: impl Into<Value>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub fn set(&mut self, name: &'static str, value: impl Into<Value>) {
        self.headers.push((name, value.into()));
    }

    pub fn with_body(mut self, body: Vec<u8>) -> Self {
        self.body = body;
        self
    }

    /// Whether the body is sent (not for 1xx/204/304, nor for HEAD).
    pub fn sends_body(&self) -> bool {
        !(matches!(self.status, 204 | 304) || (100..200).contains(&self.status)) && self.head_length.is_none()
    }

    /// Renders status line, headers and body (no body for 204/304 or HEAD).
    pub fn render(&self, out: &mut Vec<u8>, close: bool) {
        self.render_head(out, close);
        if self.sends_body() {
            out.extend_from_slice(&self.body);
        }
    }

    /// At least the rendered head's size: the headers, plus room for the
    /// status line, content-length and connection lines.
    pub fn head_capacity(&self) -> usize {
        128 + date::FIELD_BYTES + self.headers.iter().map(|(n, v)| n.len() + v.len() + 4).sum::<usize>()
    }

    /// Renders the header fields, `Date` included when the response is dated.
    pub fn render_fields(&self, out: &mut Vec<u8>) {
        for (n, v) in &self.headers {
            for part in [n.as_bytes(), b": ", v.as_bytes(), b"\r\n"] {
                out.extend_from_slice(part);
            }
        }
        if self.dated {
            date::render_field(out);
        }
    }

    /// Renders status line and headers only (the body is written separately).
    pub fn render_head(&self, out: &mut Vec<u8>, close: bool) {
        // Straight into the output buffer: no String per header or per head.
        let _ = write!(out, "HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        self.render_fields(out);
        let bodyless = matches!(self.status, 204 | 304) || (100..200).contains(&self.status);
        if !bodyless {
            let len = self.head_length.unwrap_or(self.body.len());
            let _ = write!(out, "content-length: {len}\r\n");
        }
        if close {
            out.extend_from_slice(b"connection: close\r\n");
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// Response bytes: the head (with small bodies rendered inline) and a large
/// body kept in its own buffer so it is never copied.
pub struct Rendered {
    pub head: Vec<u8>,
    pub body: Vec<u8>,
}

impl Rendered {
    /// Renders a finished response for a connection (`close`: last response
    /// on it), into a buffer a sent response left ([`buffer`]).
    pub fn new(resp: Response, close: bool) -> Rendered {
        Rendered::into_buffer(resp, close, buffer(0))
    }

    /// [`Rendered::new`] into `head` (a forwarded request's buffer, which
    /// so goes back to the shard that allocated it).
    pub fn into_buffer(resp: Response, close: bool, mut head: Vec<u8>) -> Rendered {
        let inline = resp.body.len() < LARGE_BODY || !resp.sends_body();
        head.clear();
        head.reserve(resp.head_capacity() + if inline { resp.body.len() } else { 0 });
        if inline {
            resp.render(&mut head, close);
        } else {
            resp.render_head(&mut head, close);
        }
        let Response { headers, body, .. } = resp;
        put_back(&FIELD_LISTS, headers);
        Rendered { head, body: if inline { Vec::new() } else { body } }
    }
}

impl Drop for Rendered {
    /// Sent (or dropped): its head's buffer is the thread's next response's.
    fn drop(&mut self) {
        put_back(&SENT, std::mem::take(&mut self.head));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offsets and numbers are held inline (no String per answer), read and
    /// compare as the text they render, and render as such.
    #[test]
    fn offsets_and_numbers_are_inline_values() {
        let next = Value::from(Offset(5));
        assert!(matches!(next, Value::Short(_)));
        assert_eq!(&*next, "0000000000000000_0000000000000005");
        assert_eq!(&*Value::from(Offset(MAX_OFFSET)), Offset(MAX_OFFSET).to_string());
        for n in [0, 7, 10, 1 << 53, u64::MAX] {
            let v = Value::from(n);
            assert!(matches!(v, Value::Short(_)));
            assert_eq!(&*v, n.to_string());
        }
        assert_eq!(Value::from(2u64), Value::from("2"), "compared as text");
        assert_ne!(Value::from(2u64), Value::from("20"));
        let mut out = Vec::new();
        Response::new(204)
            .header(h::STREAM_NEXT_OFFSET, Offset(9))
            .header(h::PRODUCER_SEQ, 3u64)
            .render_fields(&mut out);
        assert_eq!(out, b"stream-next-offset: 0000000000000000_0000000000000009\r\nproducer-seq: 3\r\n");
    }

    /// Every status sluice answers with has its reason phrase (a 401 once
    /// went out as "401 Unknown").
    #[test]
    fn every_status_sent_has_a_reason_phrase() {
        let errors = [400, 401, 403, 404, 405, 408, 409, 410, 412, 413, 415, 429, 431, 500, 501, 503, 507];
        for status in [100, 200, 201, 204, 304, 307].into_iter().chain(errors) {
            assert_ne!(reason(status), "Unknown", "{status}");
        }
    }

    #[test]
    fn renders_lengths_and_bodyless_statuses() {
        let mut out = Vec::new();
        Response::error(404, "stream not found").render(&mut out, false);
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with("HTTP/1.1 404 Not Found\r\n"));
        assert!(s.contains("content-length: 17\r\n"));
        assert!(s.ends_with("\r\n\r\nstream not found\n"));
        let mut out = Vec::new();
        Response::new(204).header("stream-next-offset", "1").render(&mut out, true);
        let s = String::from_utf8(out).unwrap();
        assert!(!s.contains("content-length"));
        assert!(s.contains("connection: close"));
        let mut out = Vec::new();
        let mut r = Response::new(200);
        r.head_length = Some(42);
        r.render(&mut out, false);
        assert!(String::from_utf8(out).unwrap().ends_with("content-length: 42\r\n\r\n"));
    }

    /// A response is rendered into the buffer the thread's last sent
    /// response left, to the same bytes; a forwarded request's buffer taken
    /// from the shelf is one such buffer too.
    #[test]
    fn a_response_reuses_the_last_sent_ones_buffer() {
        let resp = || Response::new(204).header(h::STREAM_NEXT_OFFSET, Offset(9));
        let first = Rendered::new(resp(), false);
        let (expected, at) = (first.head.clone(), first.head.as_ptr());
        drop(first);
        let again = Rendered::new(resp(), false);
        assert_eq!((&again.head, again.head.as_ptr()), (&expected, at), "same bytes, same allocation");
        drop(again);
        let request = buffer(expected.len());
        assert_eq!(request.as_ptr(), at, "a forwarded request's buffer");
        assert!(request.is_empty());
        let large = Rendered::new(Response::new(200).with_body(vec![b'x'; KEPT_RESPONSE_ROOM]), false);
        let large_at = large.head.as_ptr();
        drop(large);
        let next = buffer(0);
        assert_ne!(next.as_ptr(), large_at, "a buffer beyond the room kept is freed");
    }

    /// A rendered response's header list is the next response's on the
    /// thread; one that grew beyond the usual room is not kept.
    #[test]
    fn a_rendered_responses_header_list_is_reused() {
        let first = Response::new(204).header(h::STREAM_NEXT_OFFSET, Offset(1));
        let at = first.headers.as_ptr();
        let _ = Rendered::new(first, false);
        let next = Response::new(200);
        assert!(next.headers.is_empty(), "kept emptied");
        assert_eq!((next.headers.as_ptr(), next.headers.capacity()), (at, FIELDS_ROOM), "the same list");
        let mut grown = Response::new(200);
        for _ in 0..=FIELDS_ROOM {
            grown.set(h::CACHE_CONTROL, "no-store");
        }
        let grown_at = grown.headers.as_ptr();
        let _ = Rendered::new(next, false);
        let _ = Rendered::new(grown, false);
        assert_eq!(Response::new(200).headers.as_ptr(), at, "a grown list is let go, not kept on top");
        assert_ne!(at, grown_at);
    }

    #[test]
    fn head_capacity_covers_the_rendered_head() {
        for status in [100, 200, 204, 431, 507, 999] {
            let mut r = Response::new(status).header(h::ACCESS_CONTROL_EXPOSE_HEADERS, h::exposed());
            r.dated = true;
            r.set(h::STREAM_NEXT_OFFSET, "0000000000000000_0000000000000005");
            r.head_length = Some(usize::MAX);
            let mut out = Vec::new();
            r.render_head(&mut out, true);
            assert!(out.len() <= r.head_capacity(), "{status}: {} > {}", out.len(), r.head_capacity());
        }
    }
}
