//! Stream operations: create (PUT), append/close (POST), metadata (HEAD)
//! and delete.

use super::attrs::canonical_attrs;
use super::fork::fork_plan;
use super::lookup::{bucket_exists, json_stream};
use super::refusal::refusal;
use super::{read, Reply};
use crate::ctx::Ctx;
use crate::mesh::BucketReq;
use sluice::http::error::HttpError;
use sluice::http::headers as h;
use sluice::http::url::Target;
use sluice::http::{Head, Method, Response};
use sluice_shards::core::append::AppendInput;
use sluice_shards::core::create::CreateInput;
use sluice_shards::core::int::parse_uint;
use sluice_shards::core::producer::parse_producer_int;
use sluice_shards::core::ttl::{format_rfc3339, parse_expires_at, parse_ttl, MAX_TTL_SECS};
use sluice_shards::core::Error;
use sluice_shards::log::ProducerStamp;
use sluice_shards::offset::Offset;
use sluice_shards::store::{CreateOutcome, StreamKey};
use std::rc::Rc;

/// Serves a plain stream operation. Create and read keep larger states
/// across their awaits than an append: they are boxed, so the task that
/// serves a request (one per forwarded request) is sized for an append,
/// the common write.
pub async fn stream(ctx: &Rc<Ctx>, head: &Head, t: &Target<'_>, key: &StreamKey, body: &[u8]) -> Reply {
    let done = match head.method {
        Method::Put => Box::pin(create(ctx, head, key, body)).await,
        Method::Post => append(ctx, head, key, body).await,
        Method::Head => metadata(ctx, key),
        Method::Delete => delete(ctx, key).await,
        Method::Get => return Box::pin(read::get(ctx, head, t, key)).await,
        _ => return Reply::Full(HttpError::MethodNotAllowed.into()),
    };
    Reply::Full(done.unwrap_or_else(|e| refusal(ctx, key, e)))
}

fn header_true(head: &Head, name: &str) -> Result<bool, Error> {
    match head.header(name) {
        None => Ok(false),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(_) => Err(Error::Invalid("Stream-Closed must be 'true' or 'false'")),
    }
}

async fn create(ctx: &Rc<Ctx>, head: &Head, key: &StreamKey, body: &[u8]) -> Result<Response, Error> {
    let ttl = head.header(h::STREAM_TTL);
    let expires = head.header(h::STREAM_EXPIRES_AT);
    if ttl.is_some() && expires.is_some() {
        return Err(Error::Invalid("Stream-TTL and Stream-Expires-At are mutually exclusive"));
    }
    let ttl_secs = match ttl.map(parse_ttl) {
        Some(None) => return Err(Error::Invalid("Stream-TTL must be a non-negative integer without leading zeros")),
        Some(Some(t)) if t > MAX_TTL_SECS => {
            return Err(Error::Invalid("Stream-TTL is beyond the largest lifetime (until year 9999)"))
        }
        Some(v) => v,
        None => None,
    };
    let expires_at_ms = expires.map(|v| parse_expires_at(v, ctx.now_ms())).transpose().map_err(Error::Invalid)?;
    let closed = header_true(head, h::STREAM_CLOSED)?;
    let attrs = match head.header(h::STREAM_ATTRS) {
        Some(a) => canonical_attrs(a.as_bytes())?,
        None => Vec::new(),
    };
    let explicit_type = head.header(h::CONTENT_TYPE).filter(|c| !c.is_empty());
    let content_type = explicit_type.unwrap_or("application/octet-stream").to_string();
    let mut input = CreateInput { content_type, ttl_secs, expires_at_ms, closed, attrs };
    let fork = fork_plan(ctx, head, &mut input, explicit_type.is_some()).await?;
    let release = fork.as_ref().map(|f| (f.record.parent_shard as usize, f.record.parent_handle));
    let result = ctx.shard.create(key, &input, body, fork, ctx.now_ms()).await;
    if let (Some((shard, handle)), false) = (release, matches!(result, Ok(CreateOutcome { created: true, .. }))) {
        // The fork was not created: give the reference back.
        ctx.ask(shard, BucketReq::ForkRelease { handle }).await;
    }
    let CreateOutcome { created, tail, closed, records } = result?;
    if created {
        crate::handlers::subs::wake::notify_append(ctx, key, tail);
    }
    let content_type = ctx
        .shard
        .store
        .borrow()
        .streams
        .get(key)
        .map_or(input.content_type.clone(), |e| e.state.content_type.to_string());
    let mut r = Response::new(if created { 201 } else { 200 })
        .header(h::CONTENT_TYPE, content_type)
        .header(h::STREAM_NEXT_OFFSET, Offset(tail));
    if created {
        let host = head.header(h::HOST).unwrap_or("localhost");
        r.set(h::LOCATION, format!("http://{host}{}", head.target().split('?').next().unwrap_or("")));
    }
    if closed {
        r.set(h::STREAM_CLOSED, "true");
    }
    if json_stream(ctx, key) {
        set_record_range(&mut r, records);
    }
    Ok(r)
}

/// Adds the JSON record coordinates of a create or append.
pub fn set_record_range(r: &mut Response, (start, next): (u64, u64)) {
    r.set(h::STREAM_RECORD_START, start);
    r.set(h::STREAM_RECORD_NEXT, next);
}

/// Adds a JSON stream's retained record range: first retained and next record.
pub fn set_record_bounds(r: &mut Response, first: u64, next: u64) {
    r.set(h::STREAM_RECORD_FIRST, first);
    r.set(h::STREAM_RECORD_NEXT, next);
}

/// Extension token of JSON record coordinates.
pub const JSON_RECORDS: &str = "json-record-coordinates-v1";

fn producer_headers(head: &Head, max_id_bytes: usize) -> Result<Option<ProducerStamp>, Error> {
    let id = head.header(h::PRODUCER_ID);
    let epoch = head.header(h::PRODUCER_EPOCH);
    let seq = head.header(h::PRODUCER_SEQ);
    match (id, epoch, seq) {
        (None, None, None) => Ok(None),
        (Some(id), Some(epoch), Some(seq)) => {
            if id.is_empty() {
                return Err(Error::Invalid("Producer-Id must not be empty"));
            }
            if id.len() > max_id_bytes {
                return Err(Error::Invalid("Producer-Id is longer than --max-producer-id-bytes"));
            }
            let epoch =
                parse_producer_int(epoch).ok_or(Error::Invalid("Producer-Epoch must be an integer in 0..=2^53-1"))?;
            let seq = parse_producer_int(seq).ok_or(Error::Invalid("Producer-Seq must be an integer in 0..=2^53-1"))?;
            Ok(Some(ProducerStamp { id: id.to_string(), epoch, seq }))
        }
        _ => Err(Error::Invalid("Producer-Id, Producer-Epoch and Producer-Seq must be sent together")),
    }
}

async fn append(ctx: &Rc<Ctx>, head: &Head, key: &StreamKey, body: &[u8]) -> Result<Response, Error> {
    bucket_exists(ctx, key)?;
    let now = ctx.now_ms();
    // Its JSON mode, fixed while it lives, read with the liveness check.
    let json = match ctx.shard.store.borrow_mut().live(key, now) {
        Some(e) => e.state.json,
        None => return Err(Error::NoStream),
    };
    let producer = producer_headers(head, ctx.cfg.max_producer_id_bytes)?;
    let close = header_true(head, h::STREAM_CLOSED)?;
    let record_match = match head.header(h::STREAM_RECORD_MATCH) {
        Some(v) => Some(parse_uint(v).ok_or(Error::Invalid("Stream-Record-Match must be an unsigned integer"))?),
        None => None,
    };
    let input = AppendInput {
        content_type: head.header(h::CONTENT_TYPE),
        body,
        close,
        stream_seq: head.header(h::STREAM_SEQ),
        producer,
        record_match,
    };
    let out = ctx.shard.append(key, &input, now).await?;
    if out.wrote {
        crate::handlers::subs::wake::notify_append(ctx, key, out.next_offset);
    }
    let status = if out.wrote && out.producer.is_some() { 200 } else { 204 };
    let mut r = Response::new(status).header(h::STREAM_NEXT_OFFSET, Offset(out.next_offset));
    if let Some((epoch, seq)) = out.producer {
        r.set(h::PRODUCER_EPOCH, epoch);
        r.set(h::PRODUCER_SEQ, seq);
    }
    if out.closed {
        r.set(h::STREAM_CLOSED, "true");
    }
    if json {
        set_record_range(&mut r, out.records);
    }
    Ok(r)
}

fn metadata(ctx: &Rc<Ctx>, key: &StreamKey) -> Result<Response, Error> {
    bucket_exists(ctx, key)?;
    let mut st = ctx.shard.store.borrow_mut();
    // HEAD reads the clock for expiry but never renews the TTL.
    let e = st.live(key, ctx.now_ms()).ok_or(Error::NoStream)?;
    let s = &e.state;
    let mut r = Response::new(200)
        .header(h::CONTENT_TYPE, s.content_type.to_string())
        .header(h::STREAM_NEXT_OFFSET, Offset(s.visible.tail))
        .header(h::CACHE_CONTROL, "no-store");
    if let Some(ttl) = s.lifetime.ttl_secs {
        r.set(h::STREAM_TTL, ttl);
    }
    if let Some(at) = s.lifetime.expires_at_ms {
        r.set(h::STREAM_EXPIRES_AT, format_rfc3339(at));
    }
    if s.visible.closed {
        r.set(h::STREAM_CLOSED, "true");
    }
    if s.json {
        set_record_bounds(&mut r, s.first_message, s.visible.messages);
    }
    if let Some(snap) = &s.snapshot {
        r.set(h::STREAM_SNAPSHOT_OFFSET, Offset(snap.offset));
        r.set(h::STREAM_SNAPSHOT_DIGEST, snap.digest.clone());
    }
    r.head_length = Some(0);
    Ok(r)
}

async fn delete(ctx: &Rc<Ctx>, key: &StreamKey) -> Result<Response, Error> {
    bucket_exists(ctx, key)?;
    ctx.shard.delete(key, ctx.now_ms()).await?;
    crate::handlers::subs::wake::notify_delete(ctx, key);
    Ok(Response::new(204))
}
