//! The HTTP answer to each protocol error: its status code, its reason as a
//! short text body, and the headers the error itself carries. This is the
//! only place that maps an error to a status; headers that need a stream's
//! current state (tails, record coordinates) are added by the handlers.

use super::headers as h;
use super::Response;
use sluice_shards::core::Error;
use sluice_shards::log::LogError;

/// The status code of an error.
pub fn status(e: &Error) -> u16 {
    match e {
        Error::Invalid(_) | Error::UnsupportedHeader(_) | Error::RecordBeyondTail => 400,
        Error::Unauthenticated | Error::InvalidToken(_) => 401,
        Error::StaleEpoch { .. } | Error::InsufficientScope(_) | Error::Forbidden(_) => 403,
        Error::NoBucket | Error::NoStream | Error::NotFound(_) => 404,
        Error::MethodNotAllowed => 405,
        Error::Timeout(_) => 408,
        Error::Conflict(_)
        | Error::Closed
        | Error::ContentTypeMismatch
        | Error::SeqRegression
        | Error::ProducerGap { .. }
        | Error::BucketBusy => 409,
        Error::Gone | Error::Trimmed(_) => 410,
        Error::RecordMismatch => 412,
        Error::TooLarge(_) => 413,
        Error::HeadTooLarge(_) => 431,
        Error::Damaged(_) => 500,
        Error::NotImplemented(_) => 501,
        Error::ReadFailed | Error::Unavailable(_) | Error::Log(LogError::Failed(_)) => 503,
        Error::Log(LogError::NoSpace) => 507,
    }
}

impl From<Error> for Response {
    fn from(e: Error) -> Response {
        let mut r = Response::error(status(&e), &e.reason());
        match e {
            Error::StaleEpoch { current } => r.set(h::PRODUCER_EPOCH, current.to_string()),
            Error::ProducerGap { expected, received } => {
                r.set(h::PRODUCER_EXPECTED_SEQ, expected.to_string());
                r.set(h::PRODUCER_RECEIVED_SEQ, received.to_string());
            }
            Error::Closed => r.set(h::STREAM_CLOSED, "true"),
            Error::ReadFailed | Error::Unavailable(_) | Error::Log(LogError::NoSpace) => r.set(h::RETRY_AFTER, "1"),
            // RFC 6750 challenges.
            Error::Unauthenticated => r.set(h::WWW_AUTHENTICATE, "Bearer realm=\"sluice\""),
            Error::InvalidToken(_) => r.set(h::WWW_AUTHENTICATE, "Bearer realm=\"sluice\", error=\"invalid_token\""),
            Error::InsufficientScope(_) => {
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
        assert_eq!(status(&Error::Log(LogError::NoSpace)), 507);
        assert_eq!(status(&Error::Log(LogError::Failed("x".into()))), 503);
        assert_eq!(status(&Error::ReadFailed), 503);
        let r = Response::from(Error::Damaged("stream b/s: damaged".into()));
        assert_eq!((r.status, &r.body[..]), (500, &b"stream b/s: damaged\n"[..]));
        assert!(!r.headers.iter().any(|(n, _)| *n == h::RETRY_AFTER), "retrying does not mend damage");
    }
}
