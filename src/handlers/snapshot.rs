//! Snapshots and retention (extension section 2): publish, read, redirect to
//! the latest, delete (refused: the one visible snapshot backs /bootstrap),
//! and moving the earliest retained offset.

use super::refusal::{read_failed, refusal};
use super::stream::set_record_bounds;
use crate::ctx::Ctx;
use sluice::http::error::HttpError;
use sluice::http::headers as h;
use sluice::http::url::Target;
use sluice::http::{Head, Method, Response};
use sluice_shards::core::int::parse_uint;
use sluice_shards::core::snapshot::refuse_delete;
use sluice_shards::core::stream::Snapshot;
use sluice_shards::core::Error;
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
    format!("/{}/{}", key.bucket(), encode_segment(key.stream()))
}

/// The position a snapshot/retention request names: a path offset or `?record=`.
fn position(t: &Target<'_>, seg: Option<&str>, json: bool) -> Result<SnapshotAt, Error> {
    match (seg, t.param("record")) {
        (Some(_), Some(_)) => Err(Error::Invalid("give an offset or ?record=, not both")),
        (Some(o), None) => path_offset(o).map(SnapshotAt::Offset),
        (None, Some(_)) if !json => Err(Error::Invalid("record coordinates need an application/json stream")),
        (None, Some(r)) => {
            parse_uint(r).map(SnapshotAt::Record).ok_or(Error::Invalid("record must be an unsigned integer"))
        }
        (None, None) => Err(Error::Invalid("missing offset")),
    }
}

fn path_offset(segment: &str) -> Result<u64, Error> {
    Offset::parse(segment).map(|o| o.0).ok_or(Error::Invalid("malformed offset in path"))
}

/// A live stream's visible snapshot, tail, and (JSON streams) record bounds.
struct Current {
    snapshot: Option<Snapshot>,
    tail: u64,
    records: Option<(u64, u64)>,
}

fn current(ctx: &Ctx, key: &StreamKey) -> Result<Current, Error> {
    let mut st = ctx.shard.store.borrow_mut();
    let s = &st.live(key, ctx.now_ms()).ok_or(Error::NoStream)?.state;
    let records = s.json.then_some((s.first_message, s.visible.messages));
    Ok(Current { snapshot: s.snapshot.as_deref().cloned(), tail: s.visible.tail, records })
}

/// Adds a JSON stream's record bounds (extension section 6.10).
fn with_records(mut r: Response, ctx: &Ctx, key: &StreamKey) -> Response {
    if let Ok(Current { records: Some((first, next)), .. }) = current(ctx, key) {
        set_record_bounds(&mut r, first, next);
    }
    r
}

pub async fn snapshot(
    ctx: &Rc<Ctx>,
    head: &Head,
    t: &Target<'_>,
    key: &StreamKey,
    seg: Option<&str>,
    body: &[u8],
) -> Response {
    let done = match (head.method, seg) {
        (Method::Get, None) => latest(ctx, key),
        (Method::Put, _) => publish(ctx, head, t, key, seg, body).await,
        (Method::Get, Some(o)) => read(ctx, key, o).await,
        (Method::Delete, Some(o)) => delete(ctx, key, o),
        _ => return HttpError::MethodNotAllowed.into(),
    };
    done.unwrap_or_else(|e| refusal(ctx, key, e))
}

/// `GET {stream}/snapshot`: a redirect to the latest snapshot.
fn latest(ctx: &Ctx, key: &StreamKey) -> Result<Response, Error> {
    let snap = current(ctx, key)?.snapshot.ok_or(Error::NotFound("no snapshot"))?;
    Ok(Response::new(307)
        .header(h::LOCATION, format!("{}/snapshot/{}", stream_path(key), Offset(snap.offset)))
        .header(h::CACHE_CONTROL, "no-store"))
}

async fn publish(
    ctx: &Ctx,
    head: &Head,
    t: &Target<'_>,
    key: &StreamKey,
    seg: Option<&str>,
    body: &[u8],
) -> Result<Response, Error> {
    let at = position(t, seg, super::lookup::json_stream(ctx, key))?;
    let ct = head.header(h::CONTENT_TYPE).filter(|c| !c.is_empty()).unwrap_or("application/octet-stream");
    let expected = head.header(h::STREAM_SNAPSHOT_MATCH);
    let (offset, digest) = ctx.shard.publish_snapshot(key, at, ct, body, expected, ctx.now_ms()).await?;
    let r =
        Response::new(204).header(h::STREAM_SNAPSHOT_DIGEST, digest).header(h::STREAM_SNAPSHOT_OFFSET, Offset(offset));
    Ok(with_records(r, ctx, key))
}

/// `GET {stream}/snapshot/{offset}`: the visible snapshot's blob.
async fn read(ctx: &Ctx, key: &StreamKey, seg: &str) -> Result<Response, Error> {
    let offset = path_offset(seg)?;
    let Current { snapshot, tail, records } = current(ctx, key)?;
    let s = snapshot.filter(|s| s.offset == offset).ok_or(Error::NotFound("snapshot not found"))?;
    let handle = ctx.shard.store.borrow().streams.get(key).map(|e| e.state.handle).ok_or(Error::NoStream)?;
    let blob = ctx.shard.snapshot_blob(handle, &s).await.map_err(|e| read_failed(ctx, key, e))?;
    let mut r = Response::new(200)
        .header(h::CONTENT_TYPE, s.content_type.clone())
        .header(h::STREAM_SNAPSHOT_OFFSET, Offset(s.offset))
        .header(h::STREAM_SNAPSHOT_DIGEST, s.digest.clone())
        .header(h::STREAM_NEXT_OFFSET, Offset(s.offset))
        .header(h::STREAM_UP_TO_DATE, if s.offset == tail { "true" } else { "false" })
        .with_body(blob);
    if let Some((first, next)) = records {
        set_record_bounds(&mut r, first, next);
    }
    Ok(r)
}

/// `DELETE {stream}/snapshot/{offset}`: always refused (section 2.6), and
/// nothing changes.
fn delete(ctx: &Ctx, key: &StreamKey, seg: &str) -> Result<Response, Error> {
    let offset = path_offset(seg)?;
    let mut st = ctx.shard.store.borrow_mut();
    let e = st.live(key, ctx.now_ms()).ok_or(Error::NoStream)?;
    Err(refuse_delete(&e.state, offset))
}

pub async fn retention(ctx: &Rc<Ctx>, head: &Head, t: &Target<'_>, key: &StreamKey, seg: Option<&str>) -> Response {
    if head.method != Method::Put {
        return HttpError::MethodNotAllowed.into();
    }
    retain(ctx, t, key, seg).await.unwrap_or_else(|e| refusal(ctx, key, e))
}

async fn retain(ctx: &Ctx, t: &Target<'_>, key: &StreamKey, seg: Option<&str>) -> Result<Response, Error> {
    let at = position(t, seg, super::lookup::json_stream(ctx, key))?;
    let offset = ctx.shard.set_retention(key, at, ctx.now_ms()).await?;
    let r = Response::new(204).header(h::STREAM_RETAINED_OFFSET, Offset(offset));
    Ok(with_records(r, ctx, key))
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
