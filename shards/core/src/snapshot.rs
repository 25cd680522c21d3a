//! Snapshots and retention (extension section 2): where a snapshot may be
//! published, when it is an idempotent repeat, how far retention may move,
//! and when a snapshot may be deleted.

use super::body::Point;
use crate::error::Error;
use crate::stream::{Snapshot, StreamState};
use sha2::{Digest, Sha256};

/// Digest of a snapshot: SHA-256 over its content type, a newline and its body.
pub fn digest(content_type: &str, body: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(content_type.as_bytes());
    h.update(b"\n");
    h.update(body);
    let out = h.finalize();
    let mut s = String::with_capacity(71);
    s.push_str("sha256:");
    for b in out {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Whether `body` is snapshot `s`'s (its digest matches): a stored
/// snapshot's file is checked by it when read and at start.
pub fn holds(s: &Snapshot, body: &[u8]) -> bool {
    digest(&s.content_type, body) == s.digest
}

/// Checks that `p` is a committed message boundary that is still retained.
fn check_boundary(s: &StreamState, p: Point) -> Result<(), Error> {
    let offset = p.offset;
    if offset > s.visible.tail {
        return Err(BEYOND_TAIL);
    }
    if offset < s.retained {
        return Err(Error::Trimmed("offset is older than the earliest retained offset"));
    }
    if p.record.is_none() {
        return Err(Error::Invalid("offset is not a committed message boundary"));
    }
    Ok(())
}

/// What publishing a snapshot should do.
#[derive(Debug, PartialEq, Eq)]
pub enum Publish {
    /// Log the snapshot with this digest.
    Write(String),
    /// Identical to the visible snapshot: answer with its digest.
    Same(String),
}

/// Decides `PUT {stream}/snapshot/{offset}`.
pub fn decide_publish(
    s: &StreamState,
    p: Point,
    content_type: &str,
    body: &[u8],
    expected: Option<&str>,
) -> Result<Publish, Error> {
    check_boundary(s, p)?;
    let offset = p.offset;
    let d = digest(content_type, body);
    let current = s.snapshot.as_ref();
    if let Some(cur) = current.filter(|c| c.offset == offset) {
        return if cur.digest == d {
            Ok(Publish::Same(d))
        } else {
            Err(Error::Conflict("a different snapshot exists at this offset"))
        };
    }
    if let Some(want) = expected {
        if current.map(|c| c.digest.as_str()) != Some(want) {
            return Err(Error::Conflict("Stream-Snapshot-Match does not match the visible snapshot"));
        }
    }
    Ok(Publish::Write(d))
}

/// Decides `PUT {stream}/retention/{offset}`: true when the boundary moves.
pub fn decide_retention(s: &StreamState, p: Point) -> Result<bool, Error> {
    check_boundary(s, p)?;
    let offset = p.offset;
    if offset < s.retained {
        return Err(Error::Conflict("retention cannot move backward"));
    }
    let covered = s.snapshot.as_ref().is_some_and(|snap| offset <= snap.offset);
    if offset > 0 && !covered {
        return Err(Error::Conflict("retention must not pass the latest snapshot"));
    }
    Ok(offset > s.retained)
}

/// A position past the stream's tail.
pub const BEYOND_TAIL: Error = Error::Conflict("offset is beyond the stream tail");

/// Judges `DELETE {stream}/snapshot/{offset}` (section 2.6). A stream keeps
/// one visible snapshot and /bootstrap is built from it, so the latest
/// snapshot is never deleted (409) and a superseded or unknown offset is not
/// found (404): the answer is always a refusal.
pub fn refuse_delete(s: &StreamState, offset: u64) -> Error {
    match &s.snapshot {
        Some(snap) if snap.offset == offset => {
            Error::Conflict("the latest snapshot backs /bootstrap and cannot be deleted")
        }
        _ => Error::NotFound("snapshot not found"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::{fixture, Blob};
    use std::rc::Rc;

    /// A stream holding "abc" and "de": boundaries at 0, 3 and 5.
    fn stream() -> StreamState {
        let mut s = fixture::stream("text/plain");
        for chunk in [&b"abc"[..], b"de"] {
            let t = s.apply_append(&fixture::append(chunk, vec![], false), 16);
            s.publish(t, s.records(), false);
        }
        s
    }

    fn at(offset: u64) -> Point {
        let record = match offset {
            0 => Some(0),
            3 => Some(1),
            5 => Some(2),
            _ => None,
        };
        Point { offset, record }
    }

    fn snapshot(offset: u64, digest: &str) -> Option<Box<Snapshot>> {
        let blob = Blob::Pending(Rc::new(Vec::new()));
        Some(Box::new(Snapshot { offset, content_type: "text/plain".into(), digest: digest.into(), len: 4, blob }))
    }

    #[test]
    fn publish_rules() {
        let mut s = stream();
        assert_eq!(decide_publish(&s, at(9), "text/plain", b"x", None), Err(BEYOND_TAIL));
        assert!(matches!(decide_publish(&s, at(1), "text/plain", b"x", None), Err(Error::Invalid(_))));
        let d = digest("text/plain", b"snap");
        assert_eq!(decide_publish(&s, at(3), "text/plain", b"snap", None), Ok(Publish::Write(d.clone())));
        s.snapshot = snapshot(3, &d);
        assert_eq!(decide_publish(&s, at(3), "text/plain", b"snap", None), Ok(Publish::Same(d.clone())));
        assert!(matches!(decide_publish(&s, at(3), "text/plain", b"other", None), Err(Error::Conflict(_))));
        assert!(matches!(decide_publish(&s, at(5), "text/plain", b"n", Some("sha256:nope")), Err(Error::Conflict(_))));
        assert!(decide_publish(&s, at(5), "text/plain", b"n", Some(&d)).is_ok());
    }

    #[test]
    fn retention_rules() {
        let mut s = stream();
        assert!(matches!(decide_retention(&s, at(3)), Err(Error::Conflict(_))), "no snapshot covers it");
        s.snapshot = snapshot(3, "d");
        assert!(matches!(decide_retention(&s, at(5)), Err(Error::Conflict(_))), "past the snapshot");
        assert!(matches!(refuse_delete(&s, 3), Error::Conflict(_)), "the latest snapshot stays before retention too");
        assert_eq!(decide_retention(&s, at(3)), Ok(true));
        s.retain_from(3, 1);
        assert_eq!(s.first_message, 1);
        assert_eq!(decide_retention(&s, at(3)), Ok(false));
        assert!(matches!(decide_retention(&s, at(0)), Err(Error::Trimmed(_))));
        assert!(matches!(refuse_delete(&s, 3), Error::Conflict(_)));
        assert!(matches!(refuse_delete(&s, 5), Error::NotFound(_)));
    }

    #[test]
    fn digest_covers_type_and_body() {
        assert_ne!(digest("a", b"x"), digest("b", b"x"));
        assert!(digest("a", b"x").starts_with("sha256:"));
        assert_eq!(digest("a", b"x").len(), 71);
    }
}
