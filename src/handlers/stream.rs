//! Stream operations: create (PUT), append/close (POST), metadata (HEAD)
//! and delete, plus the mapping of store errors to status codes.

use super::attrs::canonical_attrs;
use super::fork::fork_plan;
use super::{read, Reply};
use crate::mesh::BucketReq;
use crate::shard::Ctx;
use sluice::http::url::Target;
use sluice::http::{Head, Method, Response};
use sluice_shards::core::append::{AppendError, AppendInput};
use sluice_shards::core::create::{CreateError, CreateInput};
use sluice_shards::core::producer::parse_producer_int;
use sluice_shards::core::ttl::{format_rfc3339, parse_rfc3339, parse_ttl};
use sluice_shards::log::{LogError, ProducerStamp};
use sluice_shards::offset::Offset;
use sluice_shards::store::{CreateOutcome, StoreError, StreamKey};
use std::rc::Rc;

pub async fn stream(ctx: &Rc<Ctx>, head: &Head, t: &Target, key: &StreamKey, body: Vec<u8>) -> Reply {
    let resp = match head.method {
        Method::Put => create(ctx, head, key, &body).await,
        Method::Post => append(ctx, head, key, &body).await,
        Method::Head => metadata(ctx, key),
        Method::Delete => delete(ctx, key).await,
        Method::Get => return read::get(ctx, head, t, key).await,
        _ => Response::error(405, "method not allowed"),
    };
    Reply::Full(resp)
}

fn header_true(head: &Head, name: &str) -> Result<bool, &'static str> {
    match head.header(name) {
        None => Ok(false),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(_) => Err("Stream-Closed must be 'true' or 'false'"),
    }
}

async fn create(ctx: &Rc<Ctx>, head: &Head, key: &StreamKey, body: &[u8]) -> Response {
    let ttl = head.header("stream-ttl");
    let expires = head.header("stream-expires-at");
    if ttl.is_some() && expires.is_some() {
        return Response::error(400, "Stream-TTL and Stream-Expires-At are mutually exclusive");
    }
    let ttl_secs = match ttl.map(parse_ttl) {
        Some(None) => return Response::error(400, "Stream-TTL must be a non-negative integer without leading zeros"),
        Some(v) => v,
        None => None,
    };
    let expires_at_ms = match expires.map(parse_rfc3339) {
        Some(None) => return Response::error(400, "Stream-Expires-At must be an RFC 3339 timestamp"),
        Some(v) => v,
        None => None,
    };
    let closed = match header_true(head, "stream-closed") {
        Ok(c) => c,
        Err(why) => return Response::error(400, why),
    };
    let attrs = match head.header("stream-attrs").map(|a| canonical_attrs(a.as_bytes())) {
        Some(Err(why)) => return Response::error(400, why),
        Some(Ok(a)) => a,
        None => Vec::new(),
    };
    let explicit_type = head.header("content-type").filter(|c| !c.is_empty());
    let content_type = explicit_type.unwrap_or("application/octet-stream").to_string();
    let mut input = CreateInput { content_type, ttl_secs, expires_at_ms, closed, attrs };
    let fork = match fork_plan(ctx, head, &mut input, explicit_type.is_some()).await {
        Ok(f) => f,
        Err(r) => return r,
    };
    let release = fork.as_ref().map(|f| (f.record.parent_shard as usize, f.record.parent_handle));
    let result = ctx.shard.create(key, &input, body, fork, ctx.now_ms()).await;
    if let (Some((shard, handle)), false) = (release, matches!(result, Ok(CreateOutcome { created: true, .. }))) {
        // The fork was not created: give the reference back.
        ctx.ask(shard, BucketReq::ForkRelease { handle }).await;
    }
    match result {
        Ok(CreateOutcome { created, tail, closed, records }) => {
            let content_type = ctx
                .shard
                .store
                .borrow()
                .streams
                .get(key)
                .map_or(input.content_type.clone(), |e| e.state.content_type.clone());
            let mut r = Response::new(if created { 201 } else { 200 })
                .header("content-type", content_type)
                .header("stream-next-offset", Offset(tail).to_string());
            if created {
                let host = head.header("host").unwrap_or("localhost");
                r.set("location", format!("http://{host}{}", head.target.split('?').next().unwrap_or("")));
            }
            if closed {
                r.set("stream-closed", "true");
            }
            if json_stream(ctx, key) {
                set_record_range(&mut r, records);
            }
            r
        }
        Err(e) => store_error(ctx, key, e),
    }
}

/// Adds the JSON record coordinates of a create or append.
pub fn set_record_range(r: &mut Response, (start, next): (u64, u64)) {
    r.set("stream-extensions", JSON_RECORDS);
    r.set("stream-record-start", start.to_string());
    r.set("stream-record-next", next.to_string());
}

/// Extension token of JSON record coordinates.
pub const JSON_RECORDS: &str = "json-record-coordinates-v1";

/// 404, or 410 for a stream deleted while forks still read it.
pub fn missing(ctx: &Ctx, key: &StreamKey) -> Response {
    if ctx.shard.store.borrow().is_tombstone(key) {
        Response::error(410, "stream was deleted; its forks keep its data")
    } else {
        Response::error(404, "stream not found")
    }
}

fn producer_headers(head: &Head) -> Result<Option<ProducerStamp>, &'static str> {
    let id = head.header("producer-id");
    let epoch = head.header("producer-epoch");
    let seq = head.header("producer-seq");
    match (id, epoch, seq) {
        (None, None, None) => Ok(None),
        (Some(id), Some(epoch), Some(seq)) => {
            if id.is_empty() {
                return Err("Producer-Id must not be empty");
            }
            let epoch = parse_producer_int(epoch).ok_or("Producer-Epoch must be an integer in 0..=2^53-1")?;
            let seq = parse_producer_int(seq).ok_or("Producer-Seq must be an integer in 0..=2^53-1")?;
            Ok(Some(ProducerStamp { id: id.to_string(), epoch, seq }))
        }
        _ => Err("Producer-Id, Producer-Epoch and Producer-Seq must be sent together"),
    }
}

async fn append(ctx: &Rc<Ctx>, head: &Head, key: &StreamKey, body: &[u8]) -> Response {
    if !ctx.shard.store.borrow().bucket_exists(&key.0) {
        return Response::error(404, "bucket not found");
    }
    let now = ctx.now_ms();
    if ctx.shard.store.borrow_mut().live(key, now).is_none() {
        return missing(ctx, key);
    }
    let producer = match producer_headers(head) {
        Ok(p) => p,
        Err(why) => return Response::error(400, why),
    };
    let close = match header_true(head, "stream-closed") {
        Ok(c) => c,
        Err(why) => return Response::error(400, why),
    };
    let record_match = match head.header("stream-record-match").map(|v| v.parse::<u64>()) {
        Some(Err(_)) => return Response::error(400, "Stream-Record-Match must be an unsigned integer"),
        Some(Ok(v)) => Some(v),
        None => None,
    };
    let input = AppendInput {
        content_type: head.header("content-type"),
        body,
        close,
        stream_seq: head.header("stream-seq"),
        producer,
        record_match,
    };
    match ctx.shard.append(key, &input, now).await {
        Ok(out) => {
            let status = if out.wrote && out.producer.is_some() { 200 } else { 204 };
            let mut r = Response::new(status).header("stream-next-offset", Offset(out.next_offset).to_string());
            if let Some((epoch, seq)) = out.producer {
                r.set("producer-epoch", epoch.to_string());
                r.set("producer-seq", seq.to_string());
            }
            if out.closed {
                r.set("stream-closed", "true");
            }
            if json_stream(ctx, key) {
                set_record_range(&mut r, out.records);
            }
            r
        }
        Err(e) => store_error(ctx, key, e),
    }
}

pub fn json_stream(ctx: &Ctx, key: &StreamKey) -> bool {
    ctx.shard.store.borrow().streams.get(key).is_some_and(|e| e.state.json)
}

fn metadata(ctx: &Rc<Ctx>, key: &StreamKey) -> Response {
    let mut st = ctx.shard.store.borrow_mut();
    if !st.bucket_exists(&key.0) {
        return Response::error(404, "bucket not found");
    }
    // HEAD reads the clock for expiry but never renews the TTL.
    let Some(e) = st.live(key, ctx.now_ms()) else {
        drop(st);
        return missing(ctx, key);
    };
    let s = &e.state;
    let mut r = Response::new(200)
        .header("content-type", s.content_type.clone())
        .header("stream-next-offset", Offset(s.visible.tail).to_string())
        .header("cache-control", "no-store");
    if let Some(ttl) = s.lifetime.ttl_secs {
        r.set("stream-ttl", ttl.to_string());
    }
    if let Some(at) = s.lifetime.expires_at_ms {
        r.set("stream-expires-at", format_rfc3339(at));
    }
    if s.visible.closed {
        r.set("stream-closed", "true");
    }
    if s.json {
        r.set("stream-extensions", JSON_RECORDS);
        r.set("stream-record-first", s.first_message.to_string());
        r.set("stream-record-next", s.visible.messages.to_string());
    }
    if let Some(snap) = &s.snapshot {
        r.set("stream-snapshot-offset", Offset(snap.offset).to_string());
        r.set("stream-snapshot-digest", snap.digest.clone());
    }
    r.head_length = Some(0);
    r
}

async fn delete(ctx: &Rc<Ctx>, key: &StreamKey) -> Response {
    if !ctx.shard.store.borrow().bucket_exists(&key.0) {
        return Response::error(404, "bucket not found");
    }
    match ctx.shard.delete(key, ctx.now_ms()).await {
        Ok(()) => Response::new(204),
        Err(e) => store_error(ctx, key, e),
    }
}

/// Maps a store failure to its status code and headers.
pub fn store_error(ctx: &Ctx, key: &StreamKey, e: StoreError) -> Response {
    let tail = || ctx.shard.store.borrow().streams.get(key).map(|e| (e.state.tail, e.state.messages.len()));
    match e {
        StoreError::NoBucket => Response::error(404, "bucket not found"),
        StoreError::NoStream => missing(ctx, key),
        StoreError::Gone => Response::error(410, "stream was deleted; its forks keep its data"),
        StoreError::Refused(status, why) => Response::error(status, why),
        StoreError::BucketBusy => Response::error(409, "bucket is being deleted"),
        StoreError::Create(CreateError::Conflict) => {
            Response::error(409, "stream exists with a different configuration")
        }
        StoreError::Create(CreateError::Bad(why)) => Response::error(400, why),
        StoreError::Append(a) => match a {
            AppendError::Bad(why) => Response::error(400, why),
            AppendError::Closed => {
                let mut r = Response::error(409, "stream is closed").header("stream-closed", "true");
                if let Some((t, _)) = tail() {
                    r.set("stream-next-offset", Offset(t).to_string());
                }
                r
            }
            AppendError::ContentType => Response::error(409, "Content-Type does not match the stream"),
            AppendError::SeqRegression => Response::error(409, "Stream-Seq must increase"),
            AppendError::StaleEpoch(current) => {
                Response::error(403, "stale producer epoch").header("producer-epoch", current.to_string())
            }
            AppendError::Gap { expected, received } => Response::error(409, "producer sequence gap")
                .header("producer-expected-seq", expected.to_string())
                .header("producer-received-seq", received.to_string()),
            AppendError::RecordMismatch => {
                let mut r = Response::error(412, "Stream-Record-Match does not equal the record tail");
                if let Some((t, n)) = tail() {
                    r.set("stream-record-next", n.to_string());
                    r.set("stream-next-offset", Offset(t).to_string());
                }
                r
            }
        },
        StoreError::Log(LogError::NoSpace) => Response::error(507, "no space left for the log; retry later"),
        StoreError::Log(LogError::Failed(why)) => {
            // The log itself reported the fail-stop once; this is per request.
            tracing::debug!(shard = ctx.id, reason = %why, "write refused after fail-stop");
            Response::error(503, "log unavailable after a write failure; restart required")
        }
    }
}
