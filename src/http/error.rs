//! The HTTP answer to each refusal, the protocol's errors and the edge's own
//! ([`HttpError`]): its status code, its reason as a short text body, and
//! the headers the error itself carries. This is the
//! only place that maps an error to a status; headers that need a stream's
//! current state (tails, record coordinates) are added by the handlers.

use super::headers as h;
use super::Response;
use sluice_shards::core::Error;
use sluice_shards::log::LogError;
use std::borrow::Cow;

/// Every refusal the HTTP edge answers: the protocol's, about a stream or a
/// bucket, or the edge's own (the request itself, and access control).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The protocol core or the store refused.
    Stream(Error),
    /// The request head exceeds a limit.
    HeadTooLarge(&'static str),
    /// The method is not served on this resource.
    MethodNotAllowed,
    /// The request did not arrive in time.
    Timeout(&'static str),
    /// Access control: no bearer token was presented.
    Unauthenticated,
    /// Access control: the bearer token is malformed, unknown or revoked.
    InvalidToken(&'static str),
    /// Access control: the token lacks the action (which one is named).
    InsufficientScope(&'static str),
    /// Access control: refused whatever the credentials (protected mode, CORS origin).
    Forbidden(&'static str),
}

impl From<Error> for HttpError {
    fn from(e: Error) -> HttpError {
        HttpError::Stream(e)
    }
}

impl HttpError {
    /// A short, human-readable reason (one line).
    pub fn reason(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            HttpError::Stream(e) => return e.reason(),
            HttpError::HeadTooLarge(why)
            | HttpError::Timeout(why)
            | HttpError::InvalidToken(why)
            | HttpError::InsufficientScope(why)
            | HttpError::Forbidden(why) => why,
            HttpError::MethodNotAllowed => "method not allowed",
            HttpError::Unauthenticated => "bearer token required",
        })
    }
}

/// The status code of a refusal.
pub fn status(e: &HttpError) -> u16 {
    match e {
        HttpError::Unauthenticated | HttpError::InvalidToken(_) => 401,
        HttpError::InsufficientScope(_) | HttpError::Forbidden(_) => 403,
        HttpError::MethodNotAllowed => 405,
        HttpError::Timeout(_) => 408,
        HttpError::HeadTooLarge(_) => 431,
        HttpError::Stream(e) => stream_status(e),
    }
}

/// The status code of a protocol error.
pub fn stream_status(e: &Error) -> u16 {
    match e {
        Error::Invalid(_) | Error::UnsupportedHeader(_) | Error::RecordBeyondTail => 400,
        Error::StaleEpoch { .. } => 403,
        Error::NoBucket | Error::NoStream | Error::NotFound(_) => 404,
        Error::Conflict(_)
        | Error::Closed
        | Error::ContentTypeMismatch
        | Error::SeqRegression
        | Error::ProducerGap { .. }
        | Error::BucketBusy => 409,
        Error::Gone | Error::Trimmed(_) => 410,
        Error::RecordMismatch => 412,
        Error::TooLarge(_) => 413,
        Error::Damaged(_) => 500,
        Error::NotImplemented(_) => 501,
        Error::ReadFailed | Error::Unavailable(_) | Error::Log(LogError::Failed(_)) => 503,
        Error::Log(LogError::NoSpace | LogError::Unconfirmed) => 507,
    }
}

impl From<Error> for Response {
    fn from(e: Error) -> Response {
        HttpError::Stream(e).into()
    }
}

impl From<HttpError> for Response {
    fn from(e: HttpError) -> Response {
        let mut r = Response::error(status(&e), &e.reason());
        match e {
            HttpError::Stream(Error::StaleEpoch { current }) => r.set(h::PRODUCER_EPOCH, current),
            HttpError::Stream(Error::ProducerGap { expected, received }) => {
                r.set(h::PRODUCER_EXPECTED_SEQ, expected);
                r.set(h::PRODUCER_RECEIVED_SEQ, received);
            }
            HttpError::Stream(Error::Closed) => r.set(h::STREAM_CLOSED, "true"),
            HttpError::Stream(
                Error::ReadFailed | Error::Unavailable(_) | Error::Log(LogError::NoSpace | LogError::Unconfirmed),
            ) => r.set(h::RETRY_AFTER, "1"),
            // RFC 6750 challenges.
            HttpError::Unauthenticated => r.set(h::WWW_AUTHENTICATE, "Bearer realm=\"sluice\""),
            HttpError::InvalidToken(_) => {
                r.set(h::WWW_AUTHENTICATE, "Bearer realm=\"sluice\", error=\"invalid_token\"")
            }
            HttpError::InsufficientScope(_) => {
                r.set(h::WWW_AUTHENTICATE, "Bearer realm=\"sluice\", error=\"insufficient_scope\"")
            }
            _ => {}
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_render_status_reason_and_their_own_headers() {
        let r = Response::from(Error::ProducerGap { expected: 2, received: 5 });
        assert_eq!(r.status, 409);
        assert_eq!(r.body, b"producer sequence gap\n");
        assert!(r.headers.contains(&(h::PRODUCER_EXPECTED_SEQ, "2".into())));
        assert!(r.headers.contains(&(h::PRODUCER_RECEIVED_SEQ, "5".into())));
        let r = Response::from(Error::StaleEpoch { current: 7 });
        assert_eq!((r.status, r.headers.contains(&(h::PRODUCER_EPOCH, "7".into()))), (403, true));
        assert_eq!(Response::from(Error::Invalid("nope")).body, b"nope\n");
        assert_eq!(status(&Error::Log(LogError::NoSpace).into()), 507);
        let r = Response::from(Error::Log(LogError::Unconfirmed));
        assert_eq!(
            (r.status, &r.body[..]),
            (507, &b"object store behind: local data at --local-bytes; retry later\n"[..])
        );
        assert!(r.headers.contains(&(h::RETRY_AFTER, "1".into())), "the store may confirm soon");
        assert_eq!(status(&Error::Log(LogError::Failed("x".into())).into()), 503);
        assert_eq!(status(&Error::ReadFailed.into()), 503);
        let r = Response::from(Error::Damaged("stream b/s: damaged".into()));
        assert_eq!((r.status, &r.body[..]), (500, &b"stream b/s: damaged\n"[..]));
        assert!(!r.headers.iter().any(|(n, _)| *n == h::RETRY_AFTER), "retrying does not mend damage");
    }
}
