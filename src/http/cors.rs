//! CORS: which web origins may call sluice from a browser (`--cors-origins`),
//! the headers each response carries for the request's `Origin`, and preflights;
//! and [`finish`], the headers every response carries.

use super::error::HttpError;
use super::response::Value;
use super::{headers as h, Response};
use crate::edge_limits::{MAX_ORIGINS, MAX_ORIGIN_BYTES};
use crate::start_error::StartError;

/// The origins allowed to read responses in a browser.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CorsPolicy {
    /// `*`: any origin (the default without `--tokens`).
    Any,
    /// These origins only (lower-case `scheme://host[:port]`); empty means none
    /// (the default with `--tokens`).
    Origins(Vec<String>),
}

impl CorsPolicy {
    /// Parses `*` or a comma-separated list of `http(s)://host[:port]` origins.
    pub fn parse(s: &str) -> Result<CorsPolicy, StartError> {
        if s.trim() == "*" {
            return Ok(CorsPolicy::Any);
        }
        let mut list = Vec::new();
        for o in s.split(',').map(str::trim) {
            let (scheme, rest) = o.split_once("://").unwrap_or(("", o));
            let host_ok = !rest.is_empty()
                && rest.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
            if !matches!(scheme, "http" | "https") || !host_ok || o.len() > MAX_ORIGIN_BYTES {
                return Err(
                    format!("'{o}' is not an origin (http://host[:port] or https://host[:port], no path)").into()
                );
            }
            list.push(o.to_ascii_lowercase());
        }
        if list.len() > MAX_ORIGINS {
            return Err(format!("more than {MAX_ORIGINS} origins").into());
        }
        Ok(CorsPolicy::Origins(list))
    }

    /// The CORS answer for a request carrying `origin`.
    pub fn answer(&self, origin: Option<&str>) -> Cors {
        match self {
            CorsPolicy::Any => Cors::Any,
            CorsPolicy::Origins(list) => match origin {
                Some(o) if list.iter().any(|l| l.eq_ignore_ascii_case(o)) => Cors::Origin(o.to_string()),
                _ => Cors::Denied,
            },
        }
    }
}

/// What one response tells the browser.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cors {
    /// `access-control-allow-origin: *`.
    Any,
    /// The request's origin is listed: echo it (and `vary: origin`).
    Origin(String),
    /// No CORS grant (and `vary: origin`, since another origin may get one).
    Denied,
}

impl Cors {
    /// Adds the CORS headers to a response.
    pub fn apply(&self, r: &mut Response) {
        let allow: Value = match self {
            Cors::Any => "*".into(),
            Cors::Origin(o) => o.clone().into(),
            Cors::Denied => {
                r.set(h::VARY, h::ORIGIN);
                return;
            }
        };
        if matches!(self, Cors::Origin(_)) {
            r.set(h::VARY, h::ORIGIN);
        }
        r.set(h::ACCESS_CONTROL_ALLOW_ORIGIN, allow);
        r.set(h::ACCESS_CONTROL_EXPOSE_HEADERS, h::exposed());
    }

    /// The answer to an `OPTIONS` preflight: the allowed methods and
    /// headers for a granted origin, 403 otherwise.
    pub fn preflight(&self) -> Response {
        if *self == Cors::Denied {
            return HttpError::Forbidden("origin not allowed (see --cors-origins)").into();
        }
        Response::new(204)
            .header(h::ACCESS_CONTROL_ALLOW_METHODS, "GET, POST, PUT, DELETE, HEAD, OPTIONS")
            .header(h::ACCESS_CONTROL_ALLOW_HEADERS, h::allowed())
            .header(h::ACCESS_CONTROL_MAX_AGE, "86400")
    }
}

/// Headers every response carries: `Date`, browser hardening and the request's CORS answer.
pub fn finish(mut r: Response, cors: &Cors) -> Response {
    r.dated = true;
    r.set(h::X_CONTENT_TYPE_OPTIONS, "nosniff");
    r.set(h::CROSS_ORIGIN_RESOURCE_POLICY, "cross-origin");
    cors.apply(&mut r);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(c: &Cors) -> Vec<(&'static str, String)> {
        let mut r = Response::new(200);
        c.apply(&mut r);
        r.headers.into_iter().map(|(n, v)| (n, (*v).to_owned())).collect()
    }

    #[test]
    fn parse() {
        assert_eq!(CorsPolicy::parse("*"), Ok(CorsPolicy::Any));
        assert_eq!(
            CorsPolicy::parse("https://App.example.com, http://localhost:3000"),
            Ok(CorsPolicy::Origins(vec!["https://app.example.com".into(), "http://localhost:3000".into()]))
        );
        assert_eq!(CorsPolicy::parse("http://[::1]:8080"), Ok(CorsPolicy::Origins(vec!["http://[::1]:8080".into()])));
        for bad in
            ["", "example.com", "ftp://x", "https://", "https://x/path", "https://x,", "*,https://x", "https://x y"]
        {
            assert!(CorsPolicy::parse(bad).is_err(), "{bad:?} should be refused");
        }
        let many = vec!["http://a"; MAX_ORIGINS + 1].join(",");
        assert!(CorsPolicy::parse(&many).unwrap_err().to_string().contains("more than"));
        assert!(CorsPolicy::parse(&format!("http://{}", "a".repeat(MAX_ORIGIN_BYTES))).is_err());
    }

    #[test]
    fn answers_per_origin() {
        let any = CorsPolicy::Any;
        assert_eq!(any.answer(None), Cors::Any);
        assert_eq!(any.answer(Some("https://evil.example")), Cors::Any);
        let list = CorsPolicy::parse("https://app.example").unwrap();
        assert_eq!(list.answer(Some("https://APP.example")), Cors::Origin("https://APP.example".into()));
        assert_eq!(list.answer(Some("https://app.example.evil")), Cors::Denied);
        assert_eq!(list.answer(None), Cors::Denied);
        assert_eq!(CorsPolicy::Origins(Vec::new()).answer(Some("https://app.example")), Cors::Denied);
    }

    #[test]
    fn headers_and_preflights() {
        let h = headers(&Cors::Any);
        assert!(h.contains(&("access-control-allow-origin", "*".into())));
        assert!(!h.iter().any(|(n, _)| *n == "vary"));
        let h = headers(&Cors::Origin("https://a.example".into()));
        assert!(h.contains(&("access-control-allow-origin", "https://a.example".into())));
        assert!(h.contains(&("vary", "origin".into())));
        let h = headers(&Cors::Denied);
        assert_eq!(h, vec![("vary", "origin".to_string())]);
        assert_eq!(Cors::Any.preflight().status, 204);
        assert_eq!(Cors::Origin("https://a.example".into()).preflight().status, 204);
        assert_eq!(Cors::Denied.preflight().status, 403);
    }
}
