//! The one integer grammar for every integer header and query value
//! (Content-Length included): ASCII digits only, no sign, no spaces, no
//! fraction or exponent, and the value must fit in 64 bits.

/// Parses an unsigned decimal integer; `None` for anything else, overflow included.
pub fn parse_uint(v: &str) -> Option<u64> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

/// As `parse_uint`, and without leading zeros (`0` itself is fine): for
/// values the protocol pins to a canonical spelling.
pub fn parse_canonical_uint(v: &str) -> Option<u64> {
    if v.len() > 1 && v.starts_with('0') {
        return None;
    }
    parse_uint(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_only() {
        assert_eq!(parse_uint("0"), Some(0));
        assert_eq!(parse_uint("0042"), Some(42));
        assert_eq!(parse_uint("18446744073709551615"), Some(u64::MAX));
        for bad in ["", "+5", "-1", " 5", "5 ", "5.0", "1e3", "0x10", "18446744073709551616", "٣"] {
            assert_eq!(parse_uint(bad), None, "{bad:?}");
        }
        assert_eq!(parse_canonical_uint("0"), Some(0));
        assert_eq!(parse_canonical_uint("10"), Some(10));
        assert_eq!(parse_canonical_uint("010"), None);
    }
}
