//! Request-target decoding: percent-decoded path segments and query pairs.
//!
//! Segments are split on raw `/` before decoding, so `%2F` inside a segment
//! stays part of that segment (and is then refused by the id rules). A
//! segment or query part with nothing to decode is borrowed from the raw
//! target, and up to [`INLINE_SEGMENTS`] segments are held inline: a
//! request's target with nothing to decode costs no allocation.

use sluice_shards::core::Error;
use std::borrow::Cow;

const BAD_PERCENT: Error = Error::Invalid("invalid percent-encoding in URL");
const NOT_UTF8: Error = Error::Invalid("URL is not valid UTF-8 after decoding");
const NOT_ABSOLUTE: Error = Error::Invalid("request target must start with '/'");

/// Path segments held without an allocation: a stream's path has two to
/// four (`/v1/stream/{id}`, `/{bucket}/{stream}/attrs`).
pub const INLINE_SEGMENTS: usize = 4;

/// A target's path segments, the first [`INLINE_SEGMENTS`] inline.
pub type Segments<'a> = smallvec::SmallVec<[Cow<'a, str>; INLINE_SEGMENTS]>;

/// A decoded request target, borrowing from the raw one where it can.
#[derive(Debug, PartialEq, Eq)]
pub struct Target<'a> {
    pub segments: Segments<'a>,
    pub query: Vec<(Cow<'a, str>, Cow<'a, str>)>,
}

impl Target<'_> {
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_ref())
    }
}

/// Percent-decodes `s`; with `plus`, `+` means space (query strings).
/// Borrowed when there is nothing to decode.
pub fn percent_decode(s: &str, plus: bool) -> Result<Cow<'_, str>, Error> {
    if !s.bytes().any(|c| c == b'%' || (plus && c == b'+')) {
        return Ok(Cow::Borrowed(s));
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = b.get(i + 1..i + 3).ok_or(BAD_PERCENT)?;
                let hi = (hex[0] as char).to_digit(16).ok_or(BAD_PERCENT)?;
                let lo = (hex[1] as char).to_digit(16).ok_or(BAD_PERCENT)?;
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            b'+' if plus => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map(Cow::Owned).map_err(|_| NOT_UTF8)
}

/// Splits and decodes a request target.
pub fn parse_target(target: &str) -> Result<Target<'_>, Error> {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, q),
        None => (target, ""),
    };
    let path = path.strip_prefix('/').ok_or(NOT_ABSOLUTE)?;
    let mut segments = Segments::new();
    if !path.is_empty() {
        for seg in path.split('/') {
            segments.push(percent_decode(seg, false)?);
        }
    }
    let mut pairs = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        pairs.push((percent_decode(k, true)?, percent_decode(v, true)?));
    }
    Ok(Target { segments, query: pairs })
}

/// Query parameters whose values are credentials: never logged.
const SECRET_PARAMS: [&str; 2] = ["token", "access_token"];

/// `target` (raw, as received) fit for a log line: the value of every
/// query parameter named like a credential (`token`, `access_token`, in
/// any case or percent-encoding) replaced by `REDACTED`.
pub fn redact(target: &str) -> std::borrow::Cow<'_, str> {
    let Some((path, query)) = target.split_once('?') else {
        return target.into();
    };
    let secret = |k: &str| {
        let name = percent_decode(k, true).unwrap_or(Cow::Borrowed(k));
        SECRET_PARAMS.iter().any(|s| name.eq_ignore_ascii_case(s))
    };
    if !query.split('&').any(|p| secret(p.split_once('=').map_or(p, |(k, _)| k))) {
        return target.into();
    }
    let pairs: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if secret(k) => format!("{k}=REDACTED"),
            _ => p.to_string(),
        })
        .collect();
    format!("{path}?{}", pairs.join("&")).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream's path is held inline; a longer one spills and keeps every
    /// segment in order.
    #[test]
    fn short_paths_take_no_allocation() {
        let t = parse_target("/v1/stream/chat/run-1?offset=-1").unwrap();
        assert!(!t.segments.spilled());
        assert_eq!(&t.segments[..], ["v1", "stream", "chat", "run-1"]);
        let long = parse_target("/v1/stream/a/b/c%2Fd").unwrap();
        assert!(long.segments.spilled());
        assert_eq!(&long.segments[..], ["v1", "stream", "a", "b", "c/d"]);
    }

    #[test]
    fn credentials_are_redacted_for_logs() {
        assert_eq!(redact("/a/b?offset=-1&live=sse"), "/a/b?offset=-1&live=sse");
        assert_eq!(redact("/a/b?offset=-1&token=sr1.x.y&live=sse"), "/a/b?offset=-1&token=REDACTED&live=sse");
        assert_eq!(redact("/a?Access_Token=z&%74oken=q"), "/a?Access_Token=REDACTED&%74oken=REDACTED");
        assert_eq!(redact("/a?tokens=1&x=token"), "/a?tokens=1&x=token");
        assert_eq!(redact("/a?token"), "/a?token");
    }

    #[test]
    fn decodes_segments_and_query() {
        let t = parse_target("/b%20k/s%2Fx?offset=0000000000000001&live=long-poll&a+b=c%26d").unwrap();
        assert_eq!(&t.segments[..], ["b k", "s/x"]);
        assert_eq!(t.param("offset"), Some("0000000000000001"));
        assert_eq!(t.param("a b"), Some("c&d"));
        assert_eq!(t.param("live"), Some("long-poll"));
        assert!(parse_target("/").unwrap().segments.is_empty());
        let plain = parse_target("/v1/stream/a?offset=-1").unwrap();
        assert!(plain.segments.iter().all(|s| matches!(s, Cow::Borrowed(_))), "nothing to decode: borrowed");
        assert!(matches!(plain.query[0], (Cow::Borrowed("offset"), Cow::Borrowed("-1"))));
        assert!(matches!(parse_target("/a?b=c+d").unwrap().query[0].1, Cow::Owned(_)), "+ decodes in a query");
        assert!(matches!(parse_target("/a+b").unwrap().segments[0], Cow::Borrowed("a+b")), "not in a path");
    }

    #[test]
    fn rejects_bad_encoding() {
        assert_eq!(parse_target("/a%zz"), Err(BAD_PERCENT));
        assert_eq!(parse_target("/a%2"), Err(BAD_PERCENT));
        assert_eq!(parse_target("/a%ff"), Err(NOT_UTF8));
        assert_eq!(parse_target("a"), Err(NOT_ABSOLUTE));
    }
}
