//! Every header name sluice reads or writes, defined once in one table
//! (lower-case, as rendered), and the CORS header lists generated from it.

use std::sync::OnceLock;

/// Who sends a header, which decides the CORS lists it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Sent by clients: listed in `access-control-allow-headers`.
    Request,
    /// Sent by sluice: listed in `access-control-expose-headers`.
    Response,
    /// Both directions: in both lists.
    Both,
    /// HTTP framing, caching and CORS machinery: in neither list.
    Transport,
}

macro_rules! header_table {
    ($($(#[$doc:meta])* $name:ident = $value:literal, $role:ident;)*) => {
        $($(#[$doc])* pub const $name: &str = $value;)*
        /// Every header name with its role.
        pub const TABLE: &[(&str, Role)] = &[$(($value, Role::$role)),*];
    };
}

header_table! {
    CONTENT_TYPE = "content-type", Both;
    CONTENT_LENGTH = "content-length", Transport;
    TRANSFER_ENCODING = "transfer-encoding", Transport;
    CONNECTION = "connection", Transport;
    EXPECT = "expect", Transport;
    HOST = "host", Transport;
    DATE = "date", Transport;
    AUTHORIZATION = "authorization", Request;
    WWW_AUTHENTICATE = "www-authenticate", Response;
    ORIGIN = "origin", Transport;
    SEC_FETCH_SITE = "sec-fetch-site", Transport;
    VARY = "vary", Transport;
    IF_NONE_MATCH = "if-none-match", Request;
    ETAG = "etag", Response;
    LOCATION = "location", Response;
    CACHE_CONTROL = "cache-control", Transport;
    RETRY_AFTER = "retry-after", Response;
    X_CONTENT_TYPE_OPTIONS = "x-content-type-options", Transport;
    CROSS_ORIGIN_RESOURCE_POLICY = "cross-origin-resource-policy", Transport;
    CONTENT_SECURITY_POLICY = "content-security-policy", Transport;
    ACCESS_CONTROL_ALLOW_ORIGIN = "access-control-allow-origin", Transport;
    ACCESS_CONTROL_ALLOW_METHODS = "access-control-allow-methods", Transport;
    ACCESS_CONTROL_ALLOW_HEADERS = "access-control-allow-headers", Transport;
    ACCESS_CONTROL_EXPOSE_HEADERS = "access-control-expose-headers", Transport;
    ACCESS_CONTROL_MAX_AGE = "access-control-max-age", Transport;
    // Base protocol.
    STREAM_NEXT_OFFSET = "stream-next-offset", Response;
    STREAM_CURSOR = "stream-cursor", Response;
    STREAM_UP_TO_DATE = "stream-up-to-date", Response;
    STREAM_CLOSED = "stream-closed", Both;
    STREAM_TTL = "stream-ttl", Both;
    STREAM_EXPIRES_AT = "stream-expires-at", Both;
    STREAM_SEQ = "stream-seq", Request;
    STREAM_SSE_DATA_ENCODING = "stream-sse-data-encoding", Response;
    STREAM_DATA_CONTENT_TYPE = "stream-data-content-type", Response;
    PRODUCER_ID = "producer-id", Request;
    PRODUCER_EPOCH = "producer-epoch", Both;
    PRODUCER_SEQ = "producer-seq", Both;
    PRODUCER_EXPECTED_SEQ = "producer-expected-seq", Response;
    PRODUCER_RECEIVED_SEQ = "producer-received-seq", Response;
    STREAM_FORKED_FROM = "stream-forked-from", Request;
    STREAM_FORK_OFFSET = "stream-fork-offset", Request;
    STREAM_FORK_SUB_OFFSET = "stream-fork-sub-offset", Request;
    // Extensions.
    STREAM_EXTENSIONS = "stream-extensions", Response;
    STREAM_ATTRS = "stream-attrs", Request;
    STREAM_SNAPSHOT_OFFSET = "stream-snapshot-offset", Response;
    STREAM_SNAPSHOT_DIGEST = "stream-snapshot-digest", Response;
    STREAM_SNAPSHOT_MATCH = "stream-snapshot-match", Request;
    STREAM_RETAINED_OFFSET = "stream-retained-offset", Response;
    STREAM_RECORD_FIRST = "stream-record-first", Response;
    STREAM_RECORD_START = "stream-record-start", Response;
    STREAM_RECORD_NEXT = "stream-record-next", Response;
    STREAM_RECORD_MATCH = "stream-record-match", Request;
}

fn list(pick: impl Fn(Role) -> bool) -> String {
    TABLE.iter().filter(|(_, role)| pick(*role)).map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
}

/// `access-control-expose-headers`: every header sluice sends to clients.
pub fn exposed() -> &'static str {
    static LIST: OnceLock<String> = OnceLock::new();
    LIST.get_or_init(|| list(|r| matches!(r, Role::Response | Role::Both)))
}

/// `access-control-allow-headers`: every header clients may send.
pub fn allowed() -> &'static str {
    static LIST: OnceLock<String> = OnceLock::new();
    LIST.get_or_init(|| list(|r| matches!(r, Role::Request | Role::Both)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_lower_case_tokens() {
        let mut seen = std::collections::HashSet::new();
        for (name, _) in TABLE {
            assert!(seen.insert(*name), "{name} listed twice");
            assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'), "{name}");
        }
    }

    #[test]
    fn cors_lists_follow_the_roles() {
        let exposed: Vec<&str> = exposed().split(", ").collect();
        let allowed: Vec<&str> = allowed().split(", ").collect();
        for h in [STREAM_SNAPSHOT_OFFSET, STREAM_SNAPSHOT_DIGEST, STREAM_RETAINED_OFFSET, STREAM_DATA_CONTENT_TYPE] {
            assert!(exposed.contains(&h), "{h} must be visible to browsers");
        }
        assert!(exposed.contains(&PRODUCER_EPOCH) && allowed.contains(&PRODUCER_EPOCH));
        assert!(allowed.contains(&STREAM_SNAPSHOT_MATCH) && !exposed.contains(&STREAM_SNAPSHOT_MATCH));
        assert!(!exposed.contains(&CONTENT_LENGTH) && !allowed.contains(&CONTENT_LENGTH));
    }
}
