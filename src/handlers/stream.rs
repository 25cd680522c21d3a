//! Stream operations: create (PUT), append/close (POST), metadata (HEAD),
//! delete, and the attribute sub-resource.

use super::Route;
use super::{read, Reply};
use crate::http::url::parse_target;
use crate::http::url::Target;
use crate::http::{Head, Method, Response};
use crate::mesh::{BucketRep, BucketReq};
use crate::shard::Ctx;
use sluice_shards::core::append::{AppendError, AppendInput};
use sluice_shards::core::create::{CreateError, CreateInput};
use sluice_shards::core::media_type;
use sluice_shards::core::producer::parse_producer_int;
use sluice_shards::core::ttl::{format_rfc3339, parse_rfc3339, parse_ttl};
use sluice_shards::ids::stream_shard;
use sluice_shards::log::{ForkRecord, LogError, ProducerStamp};
use sluice_shards::offset::Offset;
use sluice_shards::store::ForkPlan;
use sluice_shards::store::{StoreError, StreamKey};
use std::rc::Rc;

/// Largest encoded attribute object (spec section 5.1).
const MAX_ATTRS: usize = 16 * 1024;

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

pub async fn sub_resource(ctx: &Rc<Ctx>, head: &Head, key: &StreamKey, sub: &str, body: Vec<u8>) -> Response {
    match (sub, head.method) {
        ("attrs", Method::Get) => {
            let now = ctx.now_ms();
            let mut st = ctx.shard.store.borrow_mut();
            if !st.bucket_exists(&key.0) {
                return Response::error(404, "bucket not found");
            }
            match st.live(key, now) {
                Some(e) => {
                    let body = if e.state.attrs.is_empty() { b"{}".to_vec() } else { e.state.attrs.clone() };
                    Response::new(200).header("content-type", "application/json").with_body(body)
                }
                None => Response::error(404, "stream not found"),
            }
        }
        ("attrs", Method::Put) => {
            let json = head.header("content-type").is_some_and(sluice_shards::core::is_json);
            if !json {
                return Response::error(400, "attributes need Content-Type: application/json");
            }
            let attrs = match canonical_attrs(&body) {
                Ok(a) => a,
                Err(why) => return Response::error(400, why),
            };
            if !ctx.shard.store.borrow().bucket_exists(&key.0) {
                return Response::error(404, "bucket not found");
            }
            match ctx.shard.set_attrs(key, attrs, ctx.now_ms()).await {
                Ok(()) => Response::new(204),
                Err(e) => store_error(ctx, key, e),
            }
        }
        ("attrs", _) => Response::error(405, "method not allowed"),
        _ => Response::error(404, "no such stream sub-resource"),
    }
}

/// Validates an attribute object and keeps only `title` and `metadata`.
/// `{}` (or no fields) is stored as no attributes.
pub fn canonical_attrs(raw: &[u8]) -> Result<Vec<u8>, &'static str> {
    if raw.len() > MAX_ATTRS {
        return Err("attribute object exceeds 16 KiB");
    }
    let v: serde_json::Value = serde_json::from_slice(raw).map_err(|_| "attributes are not valid JSON")?;
    let obj = v.as_object().ok_or("attributes must be a JSON object")?;
    let mut out = serde_json::Map::new();
    if let Some(title) = obj.get("title") {
        if !title.is_string() {
            return Err("attribute 'title' must be a string");
        }
        out.insert("title".into(), title.clone());
    }
    if let Some(meta) = obj.get("metadata") {
        if !meta.is_object() {
            return Err("attribute 'metadata' must be an object");
        }
        out.insert("metadata".into(), meta.clone());
    }
    if out.is_empty() {
        return Ok(Vec::new());
    }
    Ok(serde_json::to_vec(&serde_json::Value::Object(out)).expect("serializable"))
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
    if let (Some((shard, handle)), false) = (release, matches!(result, Ok((true, _, _)))) {
        // The fork was not created: give the reference back.
        ctx.ask(shard, BucketReq::ForkRelease { handle }).await;
    }
    match result {
        Ok((created, tail, closed)) => {
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
            r
        }
        Err(e) => store_error(ctx, key, e),
    }
}

/// Resolves fork headers: asks the source's shard for a reference, the
/// inherited index and the sub-offset prefix, and fills in inherited settings.
async fn fork_plan(
    ctx: &Rc<Ctx>,
    head: &Head,
    input: &mut CreateInput,
    explicit_type: bool,
) -> Result<Option<ForkPlan>, Response> {
    let from = head.header("stream-forked-from");
    let sub = match head.header("stream-fork-sub-offset") {
        None => None,
        Some(v) if v == "0" || (!v.starts_with('0') && !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit())) => {
            Some(v.parse::<u64>().map_err(|_| Response::error(400, "Stream-Fork-Sub-Offset is too large"))?)
        }
        Some(_) => return Err(Response::error(400, "Stream-Fork-Sub-Offset must be a non-negative integer")),
    };
    let Some(from) = from else {
        return match sub {
            Some(_) => Err(Response::error(400, "Stream-Fork-Sub-Offset needs Stream-Forked-From")),
            None => Ok(None),
        };
    };
    let offset = match head.header("stream-fork-offset") {
        None => None,
        Some(v) => Some(Offset::parse(v).ok_or_else(|| Response::error(400, "malformed Stream-Fork-Offset"))?.0),
    };
    let sub = sub.unwrap_or(0);
    if sub > 0 && offset.is_none() {
        return Err(Response::error(400, "Stream-Fork-Sub-Offset needs Stream-Fork-Offset"));
    }
    let target = parse_target(from).map_err(|e| Response::error(400, e.reason()))?;
    let Route::Stream(source, None) = super::route(head, &target) else {
        return Err(Response::error(400, "Stream-Forked-From must be a stream path"));
    };
    let owner = stream_shard(&source.0, &source.1, ctx.shards);
    let grant = match ctx.ask(owner, BucketReq::ForkGrant { key: source, offset, sub }).await {
        BucketRep::Fork(Ok(g)) => g,
        BucketRep::Fork(Err((status, why))) => return Err(Response::error(status, why)),
        _ => return Err(Response::error(503, "fork source shard unavailable")),
    };
    let release = || ctx.ask(owner, BucketReq::ForkRelease { handle: grant.parent_handle });
    if explicit_type && media_type(&input.content_type) != media_type(&grant.content_type) {
        release().await;
        return Err(Response::error(409, "fork Content-Type differs from the source"));
    }
    input.content_type = grant.content_type.clone();
    if input.ttl_secs.is_none() && input.expires_at_ms.is_none() {
        input.ttl_secs = grant.ttl_secs;
        input.expires_at_ms = grant.expires_at_ms;
    }
    let prefix = match ctx.shard.read_messages(&grant.prefix).await {
        Ok(p) => p,
        Err(_) => {
            release().await;
            return Err(Response::error(503, "cannot read the fork source"));
        }
    };
    Ok(Some(ForkPlan {
        record: ForkRecord {
            parent_shard: owner as u32,
            parent_handle: grant.parent_handle,
            from: from.to_string(),
            offset,
            sub,
            inherited: grant.inherited,
        },
        prefix,
        prefix_messages: grant.prefix_messages,
    }))
}

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
                r.set("stream-extensions", "json-record-coordinates-v1");
                r.set("stream-record-start", out.records.0.to_string());
                r.set("stream-record-next", out.records.1.to_string());
            }
            r
        }
        Err(e) => store_error(ctx, key, e),
    }
}

fn json_stream(ctx: &Ctx, key: &StreamKey) -> bool {
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
        r.set("stream-extensions", "json-record-coordinates-v1");
        r.set("stream-record-first", "0");
        r.set("stream-record-next", s.visible.messages.to_string());
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
            eprintln!("sluice: shard {}: {why}", ctx.id);
            Response::error(503, "log unavailable after a write failure; restart required")
        }
    }
}
