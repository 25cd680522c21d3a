//! `POST /v1/tokens?stream=PATH|bucket=ID[&ttl=DUR]`: mints a signed read
//! token (see `auth::signed`) for one stream or one bucket. The caller
//! needs read on that bucket itself, so a token never grants more than its
//! minter holds; the answer is JSON with the token and its expiry.

use super::bucket::json;
use crate::ctx::Ctx;
use crate::edge_limits::{DEFAULT_READ_TOKEN_TTL, MAX_READ_TOKEN_TTL, MIN_READ_TOKEN_TTL};
use crate::route::ReadScope;
use sluice::http::error::HttpError;
use sluice::http::url::Target;
use sluice::http::{headers as h, Head, Method, Response};
use sluice::units::parse_duration;
use sluice_shards::core::Error;

const BAD_TTL: Error = Error::Invalid("ttl must be a duration between 1s and 1h");
const NO_TOKENS: Error = Error::NotFound("read tokens exist only with --tokens (without them no read needs one)");

/// Mints the token (POST only).
pub fn mint(ctx: &Ctx, head: &Head, t: &Target<'_>, scope: &ReadScope) -> Response {
    if head.method != Method::Post {
        return HttpError::MethodNotAllowed.into();
    }
    let ttl = match t.param("ttl").map(parse_duration) {
        None => DEFAULT_READ_TOKEN_TTL,
        Some(Ok(d)) if (MIN_READ_TOKEN_TTL..=MAX_READ_TOKEN_TTL).contains(&d) => d,
        Some(_) => return BAD_TTL.into(),
    };
    let Some((token, expires_ms)) = ctx.gate.mint(scope, ttl) else {
        return NO_TOKENS.into();
    };
    let body = serde_json::json!({
        "token": token,
        "bucket": scope.bucket,
        "stream": scope.stream,
        "expires_at_ms": expires_ms,
        "ttl_ms": ttl.as_millis() as u64,
    });
    let mut r = json(200, &body);
    r.set(h::CACHE_CONTROL, "no-store");
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice::units::format_duration;

    #[test]
    fn the_ttl_refusal_names_the_limits() {
        let Error::Invalid(why) = BAD_TTL else { panic!("BAD_TTL is a 400") };
        let range =
            format!("between {} and {}", format_duration(MIN_READ_TOKEN_TTL), format_duration(MAX_READ_TOKEN_TTL));
        assert!(why.contains(&range), "{why} / {range}");
    }
}
