//! Stream offsets: opaque, fixed-width tokens that sort lexicographically.
//!
//! An offset is the count of stream bytes before a position, rendered as
//! `0000000000000000_` followed by sixteen zero-padded decimal digits: the
//! first field is a reserved epoch (always zero today), the second the byte
//! position, so byte order equals numeric order. This is the shape the
//! public conformance suite and the reference clients exchange. Clients may
//! also send the sentinels `-1` (stream start) and `now` (tail).

use std::fmt;

/// Width of a rendered offset token.
pub const OFFSET_WIDTH: usize = 33;
const EPOCH: &[u8; 17] = b"0000000000000000_";
pub use crate::core::limits::MAX_OFFSET;

/// A byte position in a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Offset(pub u64);

/// What a client asked for in an `offset` query parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffsetQuery {
    /// `-1`: the first retained byte.
    Start,
    /// `now`: the current tail.
    Now,
    /// A token the server handed out earlier.
    At(Offset),
}

impl Offset {
    /// Parses a rendered token; anything else is `None`.
    pub fn parse(token: &str) -> Option<Offset> {
        let b = token.as_bytes();
        if b.len() != OFFSET_WIDTH || &b[..17] != EPOCH || !b[17..].iter().all(u8::is_ascii_digit) {
            return None;
        }
        token[17..].parse().ok().map(Offset)
    }

    /// Renders the token into a fixed-size buffer without allocating.
    pub fn render(self) -> [u8; OFFSET_WIDTH] {
        let mut out = [b'0'; OFFSET_WIDTH];
        out[16] = b'_';
        let mut v = self.0;
        for slot in out[17..].iter_mut().rev() {
            *slot = b'0' + (v % 10) as u8;
            v /= 10;
        }
        out
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.render();
        f.write_str(std::str::from_utf8(&r).expect("digits are ascii"))
    }
}

impl OffsetQuery {
    /// Parses the `offset` query value.
    pub fn parse(value: &str) -> Option<OffsetQuery> {
        match value {
            "-1" => Some(OffsetQuery::Start),
            "now" => Some(OffsetQuery::Now),
            v => Offset::parse(v).map(OffsetQuery::At),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_is_fixed_width_and_sorts() {
        let a = Offset(9).to_string();
        let b = Offset(10).to_string();
        assert_eq!(a, "0000000000000000_0000000000000009");
        assert!(a < b);
        assert_eq!(Offset(MAX_OFFSET).to_string().len(), OFFSET_WIDTH);
    }

    #[test]
    fn parse_round_trips_and_rejects_garbage() {
        assert_eq!(Offset::parse("0000000000000000_0000000000000042"), Some(Offset(42)));
        assert_eq!(Offset::parse(&Offset(77).to_string()), Some(Offset(77)));
        for bad in [
            "",
            "42",
            "0000000000000042",
            "0000000000000000_000000000000004x",
            "0000000000000001_0000000000000000",
            "0000000000000000-0000000000000000",
        ] {
            assert_eq!(Offset::parse(bad), None, "{bad}");
        }
        assert_eq!(OffsetQuery::parse("-1"), Some(OffsetQuery::Start));
        assert_eq!(OffsetQuery::parse("now"), Some(OffsetQuery::Now));
        assert_eq!(OffsetQuery::parse("-2"), None);
    }
}
