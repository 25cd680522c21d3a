//! The create decision (PUT): a new stream, an idempotent repeat (200), or a
//! configuration conflict (409).

use super::json::normalize;
use crate::error::Error;
use crate::media::{is_json, same_media_type};
use crate::stream::StreamState;

/// A PUT after header parsing.
#[derive(Debug, Clone)]
pub struct CreateInput {
    pub content_type: String,
    pub ttl_secs: Option<u64>,
    pub expires_at_ms: Option<u64>,
    pub closed: bool,
    pub attrs: Vec<u8>,
}

impl CreateInput {
    /// A PUT with a content type and nothing else: no TTL, no expiry, open, no attributes.
    pub fn plain(content_type: &str) -> CreateInput {
        CreateInput {
            content_type: content_type.into(),
            ttl_secs: None,
            expires_at_ms: None,
            closed: false,
            attrs: vec![],
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum CreateDecision {
    /// 201: log a create (and an initial append when `data` is non-empty).
    Create { data: Vec<u8>, messages: Vec<u32> },
    /// 200: the stream exists with this configuration.
    Exists,
}

/// A PUT naming an existing stream with a different configuration.
pub const CONFLICT: Error = Error::Conflict("stream exists with a different configuration");

/// Decides a PUT given the live stream at that name, if any.
pub fn decide(existing: Option<&StreamState>, input: &CreateInput, body: &[u8]) -> Result<CreateDecision, Error> {
    if let Some(s) = existing {
        let same = same_media_type(&s.content_type, &input.content_type)
            && s.lifetime.ttl_secs == input.ttl_secs
            && s.lifetime.expires_at_ms == input.expires_at_ms
            && s.closed == input.closed
            && s.attrs() == input.attrs;
        return if same { Ok(CreateDecision::Exists) } else { Err(CONFLICT) };
    }
    if is_json(&input.content_type) {
        if body.is_empty() {
            return Ok(CreateDecision::Create { data: vec![], messages: vec![] });
        }
        let n = normalize(body, true)?;
        Ok(CreateDecision::Create { data: n.bytes, messages: n.lengths })
    } else {
        Ok(CreateDecision::Create { data: body.to_vec(), messages: vec![] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(ct: &str) -> CreateInput {
        CreateInput::plain(ct)
    }

    #[test]
    fn new_existing_and_conflicting() {
        assert_eq!(
            decide(None, &input("text/plain"), b"abc"),
            Ok(CreateDecision::Create { data: b"abc".to_vec(), messages: vec![] })
        );
        assert_eq!(
            decide(None, &input("application/json"), b"[]"),
            Ok(CreateDecision::Create { data: vec![], messages: vec![] })
        );
        assert_eq!(decide(None, &input("application/json"), b"{"), Err(Error::Invalid("body is not valid JSON")));
        let mut s = crate::stream::fixture::stream("text/plain");
        s.lifetime.ttl_secs = Some(5);
        let mut same = input("TEXT/PLAIN");
        same.ttl_secs = Some(5);
        assert_eq!(decide(Some(&s), &same, b""), Ok(CreateDecision::Exists));
        assert_eq!(decide(Some(&s), &input("text/plain"), b""), Err(CONFLICT));
        same.closed = true;
        assert_eq!(decide(Some(&s), &same, b""), Err(CONFLICT));
    }
}
