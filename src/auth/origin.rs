//! Cross-site writes: a browser sends `Origin` (and `Sec-Fetch-Site`) with
//! every state-changing request, `mode: 'no-cors'` included, and executes
//! it whatever CORS later lets the page read. So CORS alone cannot stop a
//! page the user opens from appending to, closing or deleting streams on a
//! sluice it can reach; this check refuses such a request before it has
//! any effect. Reads stay as CORS says.

use sluice::http::cors::{Cors, CorsPolicy};
use sluice::http::{headers as h, Head, Method};

/// Where a state-changing request comes from, as the browser says.
#[derive(Debug, PartialEq, Eq)]
pub enum Site {
    /// No browser marks, or a page of sluice's own origin.
    Same,
    /// Another origin (`None`: `Sec-Fetch-Site` says cross-site, no usable `Origin`).
    Cross(Option<String>),
}

/// Whether `head` is a write from another web origin.
pub fn site(head: &Head) -> Site {
    if !matches!(head.method, Method::Post | Method::Put | Method::Delete) {
        return Site::Same;
    }
    match head.header(h::ORIGIN) {
        Some(origin) if same_origin(origin, head.header(h::HOST)) => Site::Same,
        Some(origin) => Site::Cross(Some(origin.to_string())),
        None => match head.header(h::SEC_FETCH_SITE) {
            Some(s) if s.eq_ignore_ascii_case("cross-site") || s.eq_ignore_ascii_case("same-site") => Site::Cross(None),
            _ => Site::Same,
        },
    }
}

/// `origin` names the host the request was sent to (a page sluice served).
fn same_origin(origin: &str, host: Option<&str>) -> bool {
    let rest = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
    matches!((rest, host), (Some(r), Some(h)) if r.eq_ignore_ascii_case(h))
}

/// Whether a cross-origin write may go on: its origin is listed in
/// `--cors-origins`, or `--cors-origins '*'` was given, or (no flag) it
/// carries a valid bearer token, which a page cannot know. Loopback trust
/// alone never admits one.
pub fn allowed(policy: &CorsPolicy, explicit: bool, cors: &Cors, authenticated: bool) -> bool {
    match (policy, explicit) {
        (CorsPolicy::Any, true) => true,
        (CorsPolicy::Origins(_), true) => matches!(cors, Cors::Origin(_)),
        (_, false) => authenticated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice::http::parse_head;

    fn head(raw: &str) -> Head {
        parse_head(raw.as_bytes(), 4096, 16).unwrap()
    }

    #[test]
    fn writes_with_another_origin_are_cross_site() {
        let post = |extra: &str| head(&format!("POST /v1/stream/x HTTP/1.1\r\nHost: 127.0.0.1:4437\r\n{extra}\r\n"));
        assert_eq!(site(&post("")), Site::Same, "no browser marks");
        assert_eq!(site(&post("Origin: http://127.0.0.1:4437\r\n")), Site::Same, "sluice's own page");
        assert_eq!(site(&post("Origin: http://evil.example\r\n")), Site::Cross(Some("http://evil.example".into())));
        assert_eq!(site(&post("Origin: null\r\n")), Site::Cross(Some("null".into())));
        assert_eq!(site(&post("Sec-Fetch-Site: cross-site\r\n")), Site::Cross(None));
        assert_eq!(site(&post("Sec-Fetch-Site: same-origin\r\n")), Site::Same);
        let get = head("GET /v1/stream/x HTTP/1.1\r\nHost: a\r\nOrigin: http://evil.example\r\n\r\n");
        assert_eq!(site(&get), Site::Same, "reads are CORS's business");
    }

    #[test]
    fn only_a_listed_origin_an_explicit_star_or_a_token_lets_one_through() {
        let listed = CorsPolicy::Origins(vec!["http://app.example".into()]);
        assert!(allowed(&listed, true, &Cors::Origin("http://app.example".into()), false));
        assert!(!allowed(&listed, true, &Cors::Denied, true), "a token does not make an unlisted origin listed");
        assert!(allowed(&CorsPolicy::Any, true, &Cors::Any, false));
        assert!(!allowed(&CorsPolicy::Any, false, &Cors::Any, false), "the default * is for reads");
        assert!(allowed(&CorsPolicy::Any, false, &Cors::Any, true));
    }
}
