//! `/v1/tokens?stream=PATH|bucket=ID`: the scope a read token is minted
//! for, read off the query (minting is `handlers::tokens`).

use super::Route;
use sluice::http::url::{parse_target, Target};
use sluice::http::Head;
use sluice_shards::core::Error;

const NO_SCOPE: Error = Error::Invalid("name what the read token reads: ?stream=/bucket/stream or ?bucket=ID");
const BAD_STREAM: Error = Error::Invalid("stream must be a stream path such as /orders/s1 or /v1/stream/s1");

/// What a read token may read: a bucket, or one stream of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadScope {
    pub bucket: String,
    pub stream: Option<String>,
}

/// Routes `/v1/tokens`: the scope the query names.
pub fn route(head: &Head, t: &Target<'_>) -> Route {
    match (t.param("stream"), t.param("bucket")) {
        (Some(path), None) => match parse_target(path).map(|p| super::route(head, &p)) {
            Ok(Route::Stream(k, sub)) if sub.is_empty() => {
                Route::Tokens(ReadScope { bucket: k.bucket().to_string(), stream: Some(k.stream().to_string()) })
            }
            _ => Route::Bad(BAD_STREAM),
        },
        (None, Some(bucket)) if sluice_shards::ids::valid_bucket_id(bucket) => {
            Route::Tokens(ReadScope { bucket: bucket.to_string(), stream: None })
        }
        (None, Some(_)) => Route::Bad(Error::Invalid("invalid bucket id (must match ^[a-z0-9_-]{4,64}$)")),
        _ => Route::Bad(NO_SCOPE),
    }
}
