//! Bucket and stream identifiers, their validation rules, and shard placement.
//!
//! A stream is named by `(bucket_id, stream_id)`; its owner shard is a stable
//! FNV-1a hash of that pair modulo the shard count, so placement never changes
//! across restarts as long as the shard count does not.

use crate::core::Error;

/// The bucket that holds the base-protocol surface `/v1/stream/{stream_id}`.
pub const BUILTIN_BUCKET: &str = "v1-stream";
/// Longest stream id, and longest `{bucket_id}/{stream_id}` key.
pub const MAX_STREAM_KEY: usize = 122;
/// The stream id reserved for the bucket listing endpoint.
pub const RESERVED_STREAM_ID: &str = "streams";

/// Shortest and longest bucket id.
pub const MIN_BUCKET_ID: usize = 4;
pub const MAX_BUCKET_ID: usize = 64;

/// Checks `^[a-z0-9_-]{4,64}$` ([`MIN_BUCKET_ID`], [`MAX_BUCKET_ID`]).
pub fn valid_bucket_id(id: &str) -> bool {
    (MIN_BUCKET_ID..=MAX_BUCKET_ID).contains(&id.len())
        && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Why a stream id is refused.
pub const ID_EMPTY: Error = Error::Invalid("stream id is empty");
pub const ID_TOO_LONG: Error = Error::Invalid("stream id is longer than 122 bytes");
pub const ID_BAD_CHARACTER: Error = Error::Invalid("stream id contains NUL, '..', or a '/' where none is allowed");
pub const ID_RESERVED: Error = Error::Invalid("stream id 'streams' is reserved");

/// Validates a stream id within its bucket.
pub fn validate_stream_id(bucket: &str, id: &str) -> Result<(), Error> {
    if id.is_empty() {
        return Err(ID_EMPTY);
    }
    if id.contains('\0') || id.contains("..") {
        return Err(ID_BAD_CHARACTER);
    }
    // The base-protocol surface takes paths ("chat/42"); buckets take single ids.
    let slash_ok = bucket == BUILTIN_BUCKET && !id.starts_with('/') && !id.ends_with('/') && !id.contains("//");
    if id.contains('/') && !slash_ok {
        return Err(ID_BAD_CHARACTER);
    }
    let key_len = if bucket == BUILTIN_BUCKET { id.len() } else { bucket.len() + 1 + id.len() };
    if id.len() > MAX_STREAM_KEY || key_len > MAX_STREAM_KEY {
        return Err(ID_TOO_LONG);
    }
    if id == RESERVED_STREAM_ID && bucket != BUILTIN_BUCKET {
        return Err(ID_RESERVED);
    }
    Ok(())
}

fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// The shard that owns stream `(bucket, stream)`.
pub fn stream_shard(bucket: &str, stream: &str, shards: usize) -> usize {
    let h = fnv1a(fnv1a(FNV_OFFSET, bucket.as_bytes()), &[0]);
    (fnv1a(h, stream.as_bytes()) % shards as u64) as usize
}

/// The shard that holds the authoritative record of a bucket.
pub fn bucket_shard(bucket: &str, shards: usize) -> usize {
    (fnv1a(FNV_OFFSET, bucket.as_bytes()) % shards as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_ids() {
        assert!(valid_bucket_id("agents"));
        assert!(valid_bucket_id("a_b-"));
        assert!(valid_bucket_id(BUILTIN_BUCKET));
        assert!(!valid_bucket_id("v1"));
        assert!(!valid_bucket_id("Agents"));
        assert!(!valid_bucket_id(&"a".repeat(65)));
        assert!(!valid_bucket_id("ab.c"));
    }

    #[test]
    fn stream_ids() {
        assert_eq!(validate_stream_id("agents", "chat-1"), Ok(()));
        assert_eq!(validate_stream_id("agents", "a/b"), Err(ID_BAD_CHARACTER));
        assert_eq!(validate_stream_id("agents", "a..b"), Err(ID_BAD_CHARACTER));
        assert_eq!(validate_stream_id("agents", ""), Err(ID_EMPTY));
        assert_eq!(validate_stream_id("agents", "streams"), Err(ID_RESERVED));
        // 6 + 1 + 115 = 122 fits, one more does not.
        assert_eq!(validate_stream_id("agents", &"x".repeat(115)), Ok(()));
        assert_eq!(validate_stream_id("agents", &"x".repeat(116)), Err(ID_TOO_LONG));
        assert_eq!(validate_stream_id(BUILTIN_BUCKET, &"x".repeat(122)), Ok(()));
        assert_eq!(validate_stream_id(BUILTIN_BUCKET, "chat/42"), Ok(()));
        assert_eq!(validate_stream_id(BUILTIN_BUCKET, "chat//42"), Err(ID_BAD_CHARACTER));
        assert_eq!(validate_stream_id(BUILTIN_BUCKET, "a/../b"), Err(ID_BAD_CHARACTER));
    }

    #[test]
    fn placement_is_stable_and_spreads() {
        assert_eq!(stream_shard("b", "s", 4), stream_shard("b", "s", 4));
        // The separator keeps ("ab","c") and ("a","bc") apart.
        let seen: std::collections::HashSet<usize> =
            (0..64).map(|i| stream_shard("bkt", &format!("s{i}"), 4)).collect();
        assert_eq!(seen.len(), 4);
    }
}
