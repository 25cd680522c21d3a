//! Request heads: httparse does the tokenizing; this module applies sluice's
//! limits and extracts what the router and body reader need.

use super::error::HttpError;
use super::headers as h;
use super::shelf::{put_back, Shelf};
use crate::edge_limits::{KEPT_HEADS, KEPT_HEAD_ROOM, MAX_HEADERS_RANGE, MAX_HEAD_BYTES_RANGE};
use sluice_shards::core::int::parse_uint;
use sluice_shards::core::Error;
use std::mem::MaybeUninit;
use std::ops::Range;

/// Request methods sluice serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Head,
    Put,
    Post,
    Delete,
    Options,
    Other,
}

/// How the request body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyKind {
    None,
    Length(u64),
    Chunked,
}

/// A parsed request head.
#[derive(Debug)]
pub struct Head {
    pub method: Method,
    /// The raw request target (path and query, still percent-encoded),
    /// then every header name (lower-cased) and value (trimmed), back to
    /// back in one buffer: one allocation per head, not one per string.
    fields: String,
    /// Bytes of `fields` that are the target.
    target_len: usize,
    /// Byte ranges of each header's name and value in `fields`, in order.
    headers: Spans,
    /// One bit per header name present ([`name_bit`]): most lookups are of
    /// headers a request does not carry (an append asks for a dozen), and
    /// those end here without a scan.
    present: u64,
    pub body: BodyKind,
    pub expect_continue: bool,
    /// HTTP/1.0 without keep-alive, or `Connection: close`.
    pub close: bool,
    /// Bytes the head occupied in the read buffer.
    pub len: usize,
}

impl Head {
    /// The raw request target (path and query, still percent-encoded).
    pub fn target(&self) -> &str {
        &self.fields[..self.target_len]
    }

    /// The first value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.values(name).next()
    }

    /// Every value of header `name` (lower-case), in order.
    pub fn values<'a, 'n>(&'a self, name: &'n str) -> impl Iterator<Item = &'a str> + use<'a, 'n> {
        let maybe = self.present & name_bit(name.as_bytes()) != 0;
        let headers = if maybe { &self.headers[..] } else { &[] };
        headers.iter().filter(move |(n, _)| self.at(n) == name).map(|(_, v)| self.at(v))
    }

    /// How many header fields the head carries.
    pub fn header_count(&self) -> usize {
        self.headers.len()
    }

    fn at(&self, r: &Range<u32>) -> &str {
        &self.fields[r.start as usize..r.end as usize]
    }
}

thread_local! {
    /// Emptied fields of this thread's finished heads, for its next ones.
    static HEADS: Shelf<String> = const { Shelf::new(KEPT_HEADS, KEPT_HEAD_ROOM) };
}

impl Drop for Head {
    fn drop(&mut self) {
        put_back(&HEADS, std::mem::take(&mut self.fields));
    }
}

/// Header fields held without an allocation: an append from a client
/// library carries three to eight (host, content type and length, user
/// agent, accept, connection...).
pub const INLINE_HEADERS: usize = 8;

/// Each header's name and value as byte ranges of a head's `fields` (a
/// head is at most `--max-head-bytes`, below 4 GiB: u32 positions).
type Spans = smallvec::SmallVec<[(Range<u32>, Range<u32>); INLINE_HEADERS]>;
const _: () = assert!(*MAX_HEAD_BYTES_RANGE.end() <= u32::MAX as u64, "head positions fit in u32");

/// A header name's bit in [`Head`]'s presence mask: from its length and
/// two of its bytes, so that the names sluice asks for mostly differ.
fn name_bit(name: &[u8]) -> u64 {
    let (len, last, mid) =
        (name.len(), name.last().copied().unwrap_or(0), name.get(name.len() / 2).copied().unwrap_or(0));
    1 << ((len * 5 + last as usize * 3 + mid as usize) % 64)
}

/// Why a head could not be accepted (yet).
#[derive(Debug, PartialEq, Eq)]
pub enum HeadError {
    /// More bytes are needed.
    Partial,
    /// The head is refused.
    Refused(HttpError),
}

const HEAD_TOO_LARGE: HeadError = HeadError::Refused(HttpError::HeadTooLarge("request head too large"));

fn bad(why: &'static str) -> HeadError {
    HeadError::Refused(Error::Invalid(why).into())
}

/// Header slots httparse may fill: the most `--max-headers` allows.
const HEADER_SLOTS: usize = *MAX_HEADERS_RANGE.end() as usize;

/// Parses a head from the front of `buf`, enforcing `max_head` bytes and `max_headers`.
///
/// httparse's header slots live on the stack, uninitialised: a request
/// costs no allocation or zeroing for them (a heap `Vec` of 64 zeroed slots
/// was 2 KiB per request, large enough to make glibc consolidate its fast
/// bins on every pooled append).
///
/// The head's fields go into a buffer an earlier head on this thread left
/// ([`HEADS`]): a request allocates none for them.
pub fn parse_head(buf: &[u8], max_head: usize, max_headers: usize) -> Result<Head, HeadError> {
    assert!(max_headers <= HEADER_SLOTS, "--max-headers {max_headers} above its range");
    let mut slots = [const { MaybeUninit::<httparse::Header>::uninit() }; HEADER_SLOTS];
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(buf, &mut slots[..max_headers]) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return if buf.len() >= max_head { Err(HEAD_TOO_LARGE) } else { Err(HeadError::Partial) };
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HeadError::Refused(HttpError::HeadTooLarge("too many headers")))
        }
        Err(_) => return Err(bad("malformed request head")),
    };
    if len > max_head {
        return Err(HEAD_TOO_LARGE);
    }
    let method = match req.method.unwrap_or("") {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "PUT" => Method::Put,
        "POST" => Method::Post,
        "DELETE" => Method::Delete,
        "OPTIONS" => Method::Options,
        _ => Method::Other,
    };
    let http10 = req.version == Some(0);
    let mut headers = Spans::with_capacity(req.headers.len());
    let mut fields = HEADS.with(Shelf::take).unwrap_or_default();
    fields.reserve(len);
    fields.push_str(req.path.unwrap_or("/"));
    let target_len = fields.len();
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut expect_continue = false;
    let mut close = http10;
    let mut present = 0;
    for field in req.headers.iter() {
        let value = std::str::from_utf8(field.value).map_err(|_| bad("header value is not UTF-8"))?.trim();
        let start = fields.len();
        fields.push_str(field.name);
        fields[start..].make_ascii_lowercase();
        let name = start..fields.len();
        present |= name_bit(fields[name.clone()].as_bytes());
        fields.push_str(value);
        headers.push((name.start as u32..name.end as u32, name.end as u32..fields.len() as u32));
        match &fields[name] {
            h::CONTENT_LENGTH => {
                let v = parse_uint(value).ok_or_else(|| bad("invalid Content-Length"))?;
                if length.is_some_and(|l| l != v) {
                    return Err(bad("conflicting Content-Length headers"));
                }
                length = Some(v);
            }
            h::TRANSFER_ENCODING => {
                if value.eq_ignore_ascii_case("chunked") {
                    chunked = true;
                } else if !value.eq_ignore_ascii_case("identity") {
                    return Err(HeadError::Refused(Error::NotImplemented("unsupported Transfer-Encoding").into()));
                }
            }
            h::EXPECT => expect_continue = value.eq_ignore_ascii_case("100-continue"),
            h::CONNECTION => {
                for token in value.split(',').map(str::trim) {
                    if token.eq_ignore_ascii_case("close") {
                        close = true;
                    } else if token.eq_ignore_ascii_case("keep-alive") {
                        close = false;
                    }
                }
            }
            _ => {}
        }
    }
    if chunked && length.is_some() {
        return Err(bad("both Content-Length and chunked Transfer-Encoding"));
    }
    let body = match (chunked, length) {
        (true, _) => BodyKind::Chunked,
        (false, Some(0)) | (false, None) => BodyKind::None,
        (false, Some(n)) => BodyKind::Length(n),
    };
    Ok(Head { method, fields, target_len, headers, present, body, expect_continue, close, len })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A head of up to [`INLINE_HEADERS`] fields keeps them inline; a longer
    /// one spills, and every field is still found.
    #[test]
    fn a_typical_head_keeps_its_fields_inline() {
        let fields: Vec<String> = (0..=INLINE_HEADERS).map(|i| format!("x-f{i}: v{i}\r\n")).collect();
        let head = |n: usize| format!("POST /v1/stream/s HTTP/1.1\r\n{}\r\n", fields[..n].concat());
        let short = parse_head(head(INLINE_HEADERS).as_bytes(), 1 << 16, 64).unwrap();
        assert!(!short.headers.spilled());
        let long = parse_head(head(INLINE_HEADERS + 1).as_bytes(), 1 << 16, 64).unwrap();
        assert!(long.headers.spilled());
        for i in 0..=INLINE_HEADERS {
            assert_eq!(long.header(&format!("x-f{i}")), Some(format!("v{i}").as_str()));
        }
        assert_eq!(long.target(), "/v1/stream/s");
    }

    /// A head is parsed into the buffer the thread's last finished head
    /// left, and reads as one parsed afresh.
    #[test]
    fn a_head_reuses_the_last_heads_buffer() {
        let first = parse_head(b"POST /v1/stream/a HTTP/1.1\r\nX-Long: 0123456789abcdef\r\n\r\n", 1024, 16).unwrap();
        let at = first.fields.as_ptr();
        drop(first);
        let raw = b"GET /v1/stream/b?offset=-1 HTTP/1.1\r\nHost: x\r\n\r\n";
        let again = parse_head(raw, 1024, 16).unwrap();
        assert_eq!(again.fields.as_ptr(), at, "no allocation for a head that fits");
        let fresh = parse_head(raw, 1024, 16).unwrap();
        assert_eq!(
            (again.method, again.target(), again.header("host")),
            (fresh.method, fresh.target(), fresh.header("host"))
        );
        assert_eq!((again.len, again.header_count()), (fresh.len, fresh.header_count()));
    }

    #[test]
    fn parses_a_simple_head() {
        let raw =
            b"POST /v1/stream/a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello";
        let h = parse_head(raw, 1024, 16).unwrap();
        assert_eq!(h.method, Method::Post);
        assert_eq!(h.target(), "/v1/stream/a");
        assert_eq!(h.body, BodyKind::Length(5));
        assert_eq!(h.header("content-type"), Some("text/plain"));
        assert_eq!(h.header("host"), Some("x"));
        assert_eq!(h.header("content-length"), Some("5"));
        assert_eq!(h.header("x-absent"), None);
        assert_eq!(&raw[h.len..], b"hello");
        assert!(!h.close);
        let h = parse_head(b"GET / HTTP/1.1\r\nX-Mixed-CASE:  spaced value \r\nA: b\r\n\r\n", 1024, 16).unwrap();
        assert_eq!(h.header("x-mixed-case"), Some("spaced value"));
        assert_eq!((h.header("a"), h.header("ab"), h.header_count()), (Some("b"), None, 2));
    }

    /// The presence mask never hides a header: each of sluice's header
    /// names, alone in a head, is found under its name and under no other.
    #[test]
    fn every_named_header_is_found_and_no_other() {
        for (name, _) in h::TABLE {
            let value = if *name == h::TRANSFER_ENCODING { "identity" } else { "1" };
            let head = parse_head(format!("GET / HTTP/1.1\r\n{name}: {value}\r\n\r\n").as_bytes(), 4096, 8).unwrap();
            for (other, _) in h::TABLE {
                let want = (other == name).then_some(value);
                assert_eq!(head.header(other), want, "{other} in a head carrying {name}");
            }
        }
        // The mask's bits spread the names: most absent ones end the lookup.
        let bits: std::collections::HashSet<u64> = h::TABLE.iter().map(|(n, _)| name_bit(n.as_bytes())).collect();
        assert!(bits.len() * 2 > h::TABLE.len(), "{} bits for {} names", bits.len(), h::TABLE.len());
    }

    #[test]
    fn partial_and_limits() {
        assert_eq!(parse_head(b"GET / HTTP/1.1\r\nHo", 1024, 16).unwrap_err(), HeadError::Partial);
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n", "a".repeat(100));
        assert_eq!(parse_head(big.as_bytes(), 64, 16).unwrap_err(), HEAD_TOO_LARGE);
        let many = format!("GET / HTTP/1.1\r\n{}\r\n", "A: b\r\n".repeat(5));
        assert!(matches!(parse_head(many.as_bytes(), 1024, 4), Err(HeadError::Refused(HttpError::HeadTooLarge(_)))));
    }

    #[test]
    fn body_framing_rules() {
        let h = parse_head(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 1024, 8).unwrap();
        assert_eq!(h.body, BodyKind::Chunked);
        let both = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n";
        assert!(matches!(parse_head(both, 1024, 8), Err(HeadError::Refused(HttpError::Stream(Error::Invalid(_))))));
        let gz = b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n";
        assert!(matches!(
            parse_head(gz, 1024, 8),
            Err(HeadError::Refused(HttpError::Stream(Error::NotImplemented(_))))
        ));
        for length in ["-1", "+5", " 5x", "5.0", "18446744073709551616"] {
            let raw = format!("POST / HTTP/1.1\r\nContent-Length: {length}\r\n\r\n");
            assert_eq!(parse_head(raw.as_bytes(), 1024, 8).unwrap_err(), bad("invalid Content-Length"), "{length}");
        }
        assert!(matches!(
            parse_head(b"\x00\x01garbage\r\n\r\n", 1024, 8),
            Err(HeadError::Refused(HttpError::Stream(Error::Invalid(_))))
        ));
    }

    #[test]
    fn connection_semantics() {
        let h = parse_head(b"GET / HTTP/1.0\r\n\r\n", 1024, 8).unwrap();
        assert!(h.close);
        let h = parse_head(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 1024, 8).unwrap();
        assert!(!h.close);
        let h = parse_head(b"GET / HTTP/1.1\r\nConnection: close\r\nExpect: 100-continue\r\n\r\n", 1024, 8).unwrap();
        assert!(h.close && h.expect_continue);
    }
}
