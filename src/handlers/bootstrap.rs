//! Bootstrap (extension section 3): the latest snapshot plus every retained
//! message after it, one MIME part per message (its stored bytes), as
//! `multipart/mixed`.

use super::refusal::{read_failed, refusal};
use super::stream::set_record_bounds;
use crate::ctx::Ctx;
use sluice::http::error::HttpError;
use sluice::http::headers as h;
use sluice::http::url::Target;
use sluice::http::{Head, Method, Response};
use sluice_shards::core::Error;
use sluice_shards::offset::Offset;
use sluice_shards::store::StreamKey;
use std::rc::Rc;

/// Appends one part: delimiter, Content-Type, blank line, body.
pub fn push_part(out: &mut Vec<u8>, boundary: &str, content_type: &str, body: &[u8]) {
    out.extend_from_slice(b"--");
    out.extend_from_slice(boundary.as_bytes());
    out.extend_from_slice(b"\r\nContent-Type: ");
    out.extend_from_slice(content_type.as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

pub async fn bootstrap(ctx: &Rc<Ctx>, head: &Head, t: &Target<'_>, key: &StreamKey) -> Response {
    if head.method != Method::Get {
        return HttpError::MethodNotAllowed.into();
    }
    assemble(ctx, t, key).await.unwrap_or_else(|e| refusal(ctx, key, e))
}

async fn assemble(ctx: &Rc<Ctx>, t: &Target<'_>, key: &StreamKey) -> Result<Response, Error> {
    if !t.query.is_empty() {
        return Err(Error::Invalid("/bootstrap takes no query parameters (tail with ordinary reads afterwards)"));
    }
    let now = ctx.now_ms();
    let (snapshot, from, tail, json, content_type, records, handle) = {
        let mut st = ctx.shard.store.borrow_mut();
        let e = st.live(key, now).ok_or(Error::NoStream)?;
        e.state.lifetime.touch(now);
        let s = &e.state;
        let from = s.snapshot.as_ref().map_or(s.retained, |snap| snap.offset);
        let records = (s.first_message, s.visible.messages);
        (s.snapshot.clone(), from, s.visible.tail, s.json, s.content_type.clone(), records, s.handle)
    };
    let failed = |e| read_failed(ctx, key, e);
    let blob = match &snapshot {
        Some(s) => ctx.shard.snapshot_blob(handle, s).await.map_err(failed)?,
        None => Vec::new(),
    };
    // The snapshot offset and the retention are message boundaries.
    let first = match from < tail {
        true => ctx.shard.record_at(key, from).await.map_err(failed)?.max(records.0),
        false => records.1,
    };
    let data = ctx.shard.bytes(key, from, tail).await.map_err(failed)?;
    let mut at = from;
    let lens: Vec<u32> = ctx
        .shard
        .ends(key, first, records.1)
        .await
        .map_err(failed)?
        .into_iter()
        .map(|end| (end - std::mem::replace(&mut at, end)) as u32)
        .collect();
    // A boundary must not occur inside any part.
    let mut boundary = format!("sluice-bootstrap-{:016x}", ctx.random());
    while contains(&blob, boundary.as_bytes()) || contains(&data, boundary.as_bytes()) {
        boundary = format!("sluice-bootstrap-{:016x}{:016x}", ctx.random(), ctx.random());
    }
    let mut body = Vec::with_capacity(data.len() + blob.len() + lens.len() * 64 + 128);
    let snapshot_type = snapshot.as_ref().map_or("application/octet-stream", |s| s.content_type.as_str());
    push_part(&mut body, &boundary, snapshot_type, &blob);
    let mut at = 0usize;
    for len in lens {
        // One stored message per part, as ordinary reads return it (a JSON
        // record with its newline).
        push_part(&mut body, &boundary, &content_type, &data[at..at + len as usize]);
        at += len as usize;
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let snapshot_offset = snapshot.as_ref().map_or("-1".to_string(), |s| Offset(s.offset).to_string());
    let mut r = Response::new(200)
        .header(h::CONTENT_TYPE, format!("multipart/mixed; boundary={boundary}"))
        .header(h::STREAM_SNAPSHOT_OFFSET, snapshot_offset)
        .header(h::STREAM_NEXT_OFFSET, Offset(tail))
        .header(h::STREAM_UP_TO_DATE, "true")
        .header(h::CACHE_CONTROL, "no-store")
        .with_body(body);
    if json {
        set_record_bounds(&mut r, records.0, records.1);
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_delimited() {
        let mut out = Vec::new();
        push_part(&mut out, "b", "text/plain", b"hi");
        assert_eq!(out, b"--b\r\nContent-Type: text/plain\r\n\r\nhi\r\n");
    }
}
