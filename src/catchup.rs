//! Long catch-up reads of byte streams, streamed: one response covers up to
//! `--max-response-bytes` of the stream, its head announces the whole
//! length, and the body follows in pieces of `--max-read-bytes` read from
//! the store as the socket takes them. A reader of a long stream pays one
//! round trip per response, not one per piece, and memory holds one piece.
//!
//! Only bytes below the visible tail as of the request are sent, and those
//! never change: the response is whole however the stream grows meanwhile.
//! The first piece is read before the head is sent, so a response whose
//! start cannot be read (a damaged file; bytes in an object store that does
//! not answer) is refused with its status. A later piece that cannot be read
//! (the stream deleted under the reader, a damaged file) resets the
//! connection: the length is already promised, so the client sees a cut
//! response and reads again from its last offset.

use crate::ctx::Ctx;
use crate::send::{reset, send};
use glommio::net::TcpStream;
use sluice::http::Response;
use sluice_shards::store::reads::{Limit, Span};
use sluice_shards::store::StreamKey;

/// A planned streamed response: `head` announces `end - from` bytes, the
/// first piece of which (up to `first.end`) is read already.
pub struct Catchup {
    pub key: Box<StreamKey>,
    pub from: u64,
    pub end: u64,
    pub head: Response,
    pub first: Span,
}

/// What one piece of a streamed response reads at `pos`, up to `end`.
pub fn piece(ctx: &Ctx, pos: u64, end: u64) -> Limit {
    Limit { bytes: (end - pos).min(ctx.cfg.max_read_bytes), exact: true, whole_json: false, records: None }
}

/// The length of the UTF-8 character that byte `lead` starts (1 for
/// ASCII and for bytes that start none).
pub fn char_width(lead: u8) -> usize {
    match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

/// Trailing bytes of `bytes` that start a UTF-8 character they do not finish.
pub fn unfinished_char(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(4) {
        let b = bytes[bytes.len() - back];
        if b & 0xC0 != 0x80 {
            return if char_width(b) > back { back } else { 0 };
        }
    }
    0
}

/// Sends the head, then the body piece by piece; false when the connection
/// is done (the peer left or stalled, or a piece could not be read).
pub async fn send_streamed(ctx: &Ctx, sock: &mut TcpStream, c: Catchup, close: bool) -> bool {
    let idle = ctx.cfg.idle_timeout;
    assert_eq!(c.head.head_length, Some((c.end - c.from) as usize), "the head announces the streamed length");
    let mut head = Vec::with_capacity(c.head.head_capacity());
    c.head.render_head(&mut head, close);
    if !send(sock, &head, idle).await {
        return false;
    }
    if !send(sock, &c.first.data, idle).await {
        return false;
    }
    let mut pos = c.first.end;
    // One buffer for every piece: each read lands in pages already mapped.
    let mut buf = c.first.data;
    while pos < c.end {
        let span = match ctx.shard.read_span_into(&c.key, pos, piece(ctx, pos, c.end), std::mem::take(&mut buf)).await {
            Ok(s) if s.end > pos && s.end <= c.end => s,
            Ok(s) => {
                tracing::warn!(key = %c.key, at = pos, end = s.end, "streamed read cut short: the stream changed under it");
                reset(sock);
                return false;
            }
            Err(e) => {
                tracing::warn!(key = %c.key, at = pos, error = %e, "streamed read failed part-way");
                reset(sock);
                return false;
            }
        };
        if !send(sock, &span.data, idle).await {
            return false;
        }
        pos = span.end;
        buf = span.data;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::unfinished_char;

    #[test]
    fn unfinished_characters_are_found_at_the_end_only() {
        let s = "aé€😀".as_bytes();
        assert_eq!(unfinished_char(s), 0);
        assert_eq!(unfinished_char(&s[..s.len() - 1]), 3);
        assert_eq!(unfinished_char(&s[..s.len() - 3]), 1);
        assert_eq!(unfinished_char(&s[..s.len() - 4]), 0);
        assert_eq!(unfinished_char(&s[..2]), 1);
        assert_eq!(unfinished_char(b""), 0);
        assert_eq!(unfinished_char(&[0x80, 0x80]), 0);
    }
}
