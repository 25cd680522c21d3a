//! Request rendering: URL paths for the two surfaces and whole HTTP/1.1
//! requests rendered once into bytes that the hot loops send as they are.

use crate::args::{Config, Surface};
use std::io::Write;

/// The bucket the bucket surface benchmarks in.
pub const BUCKET: &str = "bench";

/// The path prefix before stream ids on the configured surface.
pub fn path_base(cfg: &Config) -> String {
    match cfg.surface {
        Surface::V1 => "/v1/stream/".into(),
        Surface::Bucket => format!("/{BUCKET}/"),
    }
}

/// Renders a request into `out` (cleared first). `content_type` and a body
/// add their headers; no body and no content type means no framing headers.
pub fn render(out: &mut Vec<u8>, method: &str, path: &str, host: &str, content_type: Option<&str>, body: &[u8]) {
    out.clear();
    let _ = write!(out, "{method} {path} HTTP/1.1\r\nhost: {host}\r\n");
    if let Some(ct) = content_type {
        let _ = write!(out, "content-type: {ct}\r\n");
    }
    if !body.is_empty() || matches!(method, "POST" | "PUT") {
        let _ = write!(out, "content-length: {}\r\n", body.len());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
}

/// A request as a fresh vector.
pub fn rendered(method: &str, path: &str, host: &str, content_type: Option<&str>, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + body.len());
    render(&mut out, method, path, host, content_type, body);
    out
}

/// A printable body of `len` bytes (no line breaks, so SSE keeps it whole).
pub fn filler(len: usize) -> Vec<u8> {
    (0..len).map(|i| b'a' + (i % 26) as u8).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_framing() {
        let r = rendered("POST", "/v1/stream/a", "h:1", Some("text/plain"), b"xy");
        assert_eq!(
            r,
            b"POST /v1/stream/a HTTP/1.1\r\nhost: h:1\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nxy"
        );
        let r = rendered("GET", "/v1/healthz", "h:1", None, b"");
        assert_eq!(r, b"GET /v1/healthz HTTP/1.1\r\nhost: h:1\r\n\r\n");
        assert_eq!(filler(28)[26..], *b"ab");
    }
}
