//! The `Authorization` header: exactly one, scheme `Bearer` (any case), and
//! a token in RFC 6750's b64token syntax no longer than [`MAX_TOKEN_BYTES`].

use crate::edge_limits::MAX_TOKEN_BYTES;

/// What the request's `Authorization` headers hold.
#[derive(Debug, PartialEq, Eq)]
pub enum Credential<'a> {
    None,
    /// More than one `Authorization` header (400: the header is not a list).
    Repeated,
    /// Another scheme (`Basic ...`) or a malformed bearer token.
    Malformed(&'static str),
    Bearer(&'a str),
}

/// Reads the credential from the request's `Authorization` header values.
pub fn credential<'a>(mut values: impl Iterator<Item = &'a str>) -> Credential<'a> {
    let Some(value) = values.next() else {
        return Credential::None;
    };
    if values.next().is_some() {
        return Credential::Repeated;
    }
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Credential::Malformed("Authorization must use the Bearer scheme");
    }
    let token = token.trim_start_matches(' ');
    if token.is_empty() {
        return Credential::Malformed("empty bearer token");
    }
    if token.len() > MAX_TOKEN_BYTES {
        return Credential::Malformed("bearer token too long");
    }
    if !b64token(token) {
        return Credential::Malformed("malformed bearer token");
    }
    Credential::Bearer(token)
}

/// `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
fn b64token(t: &str) -> bool {
    let body = t.trim_end_matches('=');
    !body.is_empty()
        && body.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers<'a>(values: &'a [&'a str]) -> impl Iterator<Item = &'a str> {
        values.iter().copied()
    }

    #[test]
    fn accepts_bearer_in_any_case() {
        assert_eq!(credential(headers(&["Bearer abc.DEF-123_~+/=="])), Credential::Bearer("abc.DEF-123_~+/=="));
        assert_eq!(credential(headers(&["bearer abc"])), Credential::Bearer("abc"));
        assert_eq!(credential(headers(&["BEARER   abc"])), Credential::Bearer("abc"));
        assert_eq!(credential(headers(&[])), Credential::None);
        let long = "a".repeat(MAX_TOKEN_BYTES);
        assert!(matches!(credential([format!("Bearer {long}").as_str()].into_iter()), Credential::Bearer(_)));
    }

    #[test]
    fn hostile_values() {
        let malformed = |v: &str| matches!(credential(headers(&[v])), Credential::Malformed(_));
        assert_eq!(credential(headers(&["Bearer a", "Bearer a"])), Credential::Repeated);
        assert_eq!(credential(headers(&["Bearer a", ""])), Credential::Repeated);
        for v in [
            "",
            "Bearer",
            "Bearer ",
            "Basic dXNlcjpwYXNz",
            "Bearerabc",
            "Token abc",
            "Bearer a b",
            "Bearer a, Bearer b",
            "Bearer ==",
            "Bearer a=b",
            "Bearer tökén",
            "Bearer a\tb",
            "Bearer \u{0}",
        ] {
            assert!(malformed(v), "{v:?} should be malformed");
        }
        assert!(malformed(&format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES + 1))));
    }
}
