//! Snapshots and retention (extension section 2): where a snapshot may be
//! published, when it is an idempotent repeat, how far retention may move,
//! and when a snapshot may be deleted.

use super::StreamState;
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

/// A refusal: status code and a short reason.
pub type Refusal = (u16, &'static str);

/// Checks that `offset` is a committed message boundary that is still retained.
fn check_boundary(s: &StreamState, offset: u64) -> Result<(), Refusal> {
    if offset > s.visible.tail {
        return Err((409, "offset is beyond the stream tail"));
    }
    if offset < s.retained {
        return Err((410, "offset is older than the earliest retained offset"));
    }
    if !s.is_boundary(offset) && offset != 0 {
        return Err((400, "offset is not a committed message boundary"));
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
    offset: u64,
    content_type: &str,
    body: &[u8],
    expected: Option<&str>,
) -> Result<Publish, Refusal> {
    check_boundary(s, offset)?;
    let d = digest(content_type, body);
    let current = s.snapshot.as_ref();
    if let Some(cur) = current.filter(|c| c.offset == offset) {
        return if cur.digest == d {
            Ok(Publish::Same(d))
        } else {
            Err((409, "a different snapshot exists at this offset"))
        };
    }
    if let Some(want) = expected {
        if current.map(|c| c.digest.as_str()) != Some(want) {
            return Err((409, "Stream-Snapshot-Match does not match the visible snapshot"));
        }
    }
    Ok(Publish::Write(d))
}

/// Decides `PUT {stream}/retention/{offset}`: true when the boundary moves.
pub fn decide_retention(s: &StreamState, offset: u64) -> Result<bool, Refusal> {
    check_boundary(s, offset)?;
    if offset < s.retained {
        return Err((409, "retention cannot move backward"));
    }
    let covered = s.snapshot.as_ref().is_some_and(|snap| offset <= snap.offset);
    if offset > 0 && !covered {
        return Err((409, "retention must not pass the latest snapshot"));
    }
    Ok(offset > s.retained)
}

/// Decides `DELETE {stream}/snapshot/{offset}`.
pub fn decide_delete(s: &StreamState, offset: u64) -> Result<(), Refusal> {
    match &s.snapshot {
        Some(snap) if snap.offset == offset => {
            if s.retained > 0 {
                Err((409, "the latest snapshot backs /bootstrap after retention"))
            } else {
                Ok(())
            }
        }
        _ => Err((404, "snapshot not found")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::stream::{fixture, Snapshot};

    fn stream() -> StreamState {
        let mut s = fixture::stream("text/plain");
        for chunk in [&b"abc"[..], b"de"] {
            let t = s.apply_append(&fixture::append(chunk, vec![], false), 1, 0);
            s.publish(t, false);
        }
        s
    }

    #[test]
    fn publish_rules() {
        let mut s = stream();
        assert_eq!(decide_publish(&s, 9, "text/plain", b"x", None), Err((409, "offset is beyond the stream tail")));
        assert_eq!(decide_publish(&s, 1, "text/plain", b"x", None).unwrap_err().0, 400);
        let d = digest("text/plain", b"snap");
        assert_eq!(decide_publish(&s, 3, "text/plain", b"snap", None), Ok(Publish::Write(d.clone())));
        s.snapshot = Some(Snapshot {
            offset: 3,
            content_type: "text/plain".into(),
            digest: d.clone(),
            segment: 1,
            pos: 0,
            len: 4,
        });
        assert_eq!(decide_publish(&s, 3, "text/plain", b"snap", None), Ok(Publish::Same(d.clone())));
        assert_eq!(decide_publish(&s, 3, "text/plain", b"other", None).unwrap_err().0, 409);
        assert_eq!(decide_publish(&s, 5, "text/plain", b"n", Some("sha256:nope")).unwrap_err().0, 409);
        assert!(decide_publish(&s, 5, "text/plain", b"n", Some(&d)).is_ok());
    }

    #[test]
    fn retention_rules() {
        let mut s = stream();
        assert_eq!(decide_retention(&s, 3).unwrap_err().0, 409, "no snapshot covers it");
        s.snapshot =
            Some(Snapshot { offset: 3, content_type: "t".into(), digest: "d".into(), segment: 1, pos: 0, len: 0 });
        assert_eq!(decide_retention(&s, 5).unwrap_err().0, 409, "past the snapshot");
        assert_eq!(decide_retention(&s, 3), Ok(true));
        s.retain_from(3);
        assert_eq!(s.first_message, 1);
        assert_eq!(decide_retention(&s, 3), Ok(false));
        assert_eq!(decide_retention(&s, 0).unwrap_err().0, 410);
        assert_eq!(decide_delete(&s, 3).unwrap_err().0, 409);
        assert_eq!(decide_delete(&s, 5).unwrap_err().0, 404);
    }

    #[test]
    fn digest_covers_type_and_body() {
        assert_ne!(digest("a", b"x"), digest("b", b"x"));
        assert!(digest("a", b"x").starts_with("sha256:"));
        assert_eq!(digest("a", b"x").len(), 71);
    }
}
