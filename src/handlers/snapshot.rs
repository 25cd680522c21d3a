//! Snapshots and retention (extension section 2): publish, read, redirect to
//! the latest, delete, and moving the earliest retained offset.

use super::stream::{missing, store_error, JSON_RECORDS};
use crate::shard::Ctx;
use sluice::http::headers as h;
use sluice::http::url::Target;
use sluice::http::{Head, Method, Response};
use sluice_shards::core::stream::Snapshot;
use sluice_shards::offset::Offset;
use sluice_shards::store::{SnapshotAt, StreamKey};
use std::rc::Rc;

/// Percent-encodes a path segment (everything but unreserved characters).
pub fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `/{bucket}/{stream}` as a URL path.
pub fn stream_path(key: &StreamKey) -> String {
    format!("/{}/{}", key.0, encode_segment(&key.1))
}

/// The position a snapshot/retention request names: a path offset or `?record=`.
fn position(t: &Target, seg: Option<&str>) -> Result<SnapshotAt, Response> {
    match (seg, t.param("record")) {
        (Some(_), Some(_)) => Err(Response::error(400, "give an offset or ?record=, not both")),
        (Some(o), None) => Offset::parse(o)
            .map(|o| SnapshotAt::Offset(o.0))
            .ok_or_else(|| Response::error(400, "malformed offset in path")),
        (None, Some(r)) => r
            .parse::<u64>()
            .map(SnapshotAt::Record)
            .map_err(|_| Response::error(400, "record must be an unsigned integer")),
        (None, None) => Err(Response::error(400, "missing offset")),
    }
}

fn current(ctx: &Ctx, key: &StreamKey) -> Option<(Option<Snapshot>, u64, bool)> {
    let mut st = ctx.shard.store.borrow_mut();
    let e = st.live(key, ctx.now_ms())?;
    Some((e.state.snapshot.clone(), e.state.visible.tail, e.state.json))
}

pub async fn snapshot(
    ctx: &Rc<Ctx>,
    head: &Head,
    t: &Target,
    key: &StreamKey,
    seg: Option<&str>,
    body: Vec<u8>,
) -> Response {
    match (head.method, seg) {
        (Method::Get, None) => match current(ctx, key) {
            None => missing(ctx, key),
            Some((Some(s), _, _)) => Response::new(307)
                .header(h::LOCATION, format!("{}/snapshot/{}", stream_path(key), Offset(s.offset)))
                .header(h::CACHE_CONTROL, "no-store"),
            Some((None, _, _)) => Response::error(404, "no snapshot"),
        },
        (Method::Put, _) => {
            let at = match position(t, seg) {
                Ok(a) => a,
                Err(r) => return r,
            };
            let ct = head.header(h::CONTENT_TYPE).filter(|c| !c.is_empty()).unwrap_or("application/octet-stream");
            let expected = head.header(h::STREAM_SNAPSHOT_MATCH);
            match ctx.shard.publish_snapshot(key, at, ct, &body, expected, ctx.now_ms()).await {
                Ok((offset, digest)) => Response::new(204)
                    .header(h::STREAM_SNAPSHOT_DIGEST, digest)
                    .header(h::STREAM_SNAPSHOT_OFFSET, Offset(offset).to_string()),
                Err(e) => store_error(ctx, key, e),
            }
        }
        (Method::Get, Some(o)) => {
            let Some(offset) = Offset::parse(o) else { return Response::error(400, "malformed offset in path") };
            let (snap, tail, json) = match current(ctx, key) {
                None => return missing(ctx, key),
                Some(c) => c,
            };
            let Some(s) = snap.filter(|s| s.offset == offset.0) else {
                return Response::error(404, "snapshot not found");
            };
            let blob = match ctx.shard.read_messages(&[(ctx.id as u32, s.segment, s.pos, s.len)]).await {
                Ok(b) => b,
                Err(_) => return Response::error(503, "cannot read the snapshot"),
            };
            let mut r = Response::new(200)
                .header(h::CONTENT_TYPE, s.content_type.clone())
                .header(h::STREAM_SNAPSHOT_OFFSET, Offset(s.offset).to_string())
                .header(h::STREAM_SNAPSHOT_DIGEST, s.digest.clone())
                .header(h::STREAM_NEXT_OFFSET, Offset(s.offset).to_string())
                .header(h::STREAM_UP_TO_DATE, (s.offset == tail).to_string())
                .with_body(blob);
            if json {
                r.set(h::STREAM_EXTENSIONS, JSON_RECORDS);
            }
            r
        }
        (Method::Delete, Some(o)) => {
            let Some(offset) = Offset::parse(o) else { return Response::error(400, "malformed offset in path") };
            match ctx.shard.delete_snapshot(key, offset.0, ctx.now_ms()).await {
                Ok(()) => Response::new(204),
                Err(e) => store_error(ctx, key, e),
            }
        }
        _ => Response::error(405, "method not allowed"),
    }
}

pub async fn retention(ctx: &Rc<Ctx>, head: &Head, t: &Target, key: &StreamKey, seg: Option<&str>) -> Response {
    if head.method != Method::Put {
        return Response::error(405, "method not allowed");
    }
    let at = match position(t, seg) {
        Ok(a) => a,
        Err(r) => return r,
    };
    match ctx.shard.set_retention(key, at, ctx.now_ms()).await {
        Ok(offset) => Response::new(204).header(h::STREAM_RETAINED_OFFSET, Offset(offset).to_string()),
        Err(e) => store_error(ctx, key, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_encoded() {
        assert_eq!(encode_segment("a b/é"), "a%20b%2F%C3%A9");
        assert_eq!(encode_segment("run-1_x.y~"), "run-1_x.y~");
    }
}
