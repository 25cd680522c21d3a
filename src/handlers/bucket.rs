//! Buckets (extension section 1): create, metadata, listing and delete, run
//! through the bucket's home shard and replicated to every shard.

use crate::ctx::Ctx;
use crate::edge_limits::MAX_LISTED_STREAMS;
use crate::mesh::{BucketRep, BucketReq, Listed};
use sluice::http::error::HttpError;
use sluice::http::headers as h;
use sluice::http::url::Target;
use sluice::http::{Method, Response};
use sluice_shards::core::int::parse_uint;
use sluice_shards::core::Error;
use sluice_shards::ids::{bucket_shard, BUILTIN_BUCKET};
use sluice_shards::log::Record;
use sluice_shards::store::BucketInfo;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

pub async fn bucket(ctx: &Rc<Ctx>, method: Method, bucket: &str) -> Response {
    if !matches!(method, Method::Put | Method::Delete | Method::Get | Method::Head) {
        return HttpError::MethodNotAllowed.into();
    }
    answer(ctx, method, bucket).await.unwrap_or_else(Response::from)
}

async fn answer(ctx: &Rc<Ctx>, method: Method, bucket: &str) -> Result<Response, Error> {
    let home = bucket_shard(bucket, ctx.shards);
    match method {
        Method::Put => {
            done(ctx.ask(home, BucketReq::Create { bucket: bucket.into() }).await)?;
            Ok(Response::new(201).header(h::LOCATION, format!("/{bucket}")))
        }
        Method::Delete => {
            done(ctx.ask(home, BucketReq::Delete { bucket: bucket.into() }).await)?;
            Ok(Response::new(204))
        }
        Method::Get => {
            let info = known(ctx, bucket).ok_or(Error::NoBucket)?;
            let mut streams = 0;
            for rep in ctx.ask_all(|| BucketReq::Count { bucket: bucket.into() }).await {
                if let BucketRep::Count(n) = rep {
                    streams += n;
                }
            }
            let body = serde_json::json!({ "bucket_id": bucket, "streams": streams, "created_at_ms": info.created_ms });
            Ok(json(200, &body))
        }
        Method::Head => known(ctx, bucket).map(|_| Response::new(200)).ok_or(Error::NoBucket),
        _ => unreachable!("bucket() answers other methods"),
    }
}

/// The outcome of a bucket request served by its home shard.
fn done(rep: BucketRep) -> Result<(), Error> {
    match rep {
        BucketRep::Done(outcome) => outcome,
        _ => Err(Error::Unavailable("unexpected reply from the bucket's home shard")),
    }
}

fn known(ctx: &Ctx, bucket: &str) -> Option<BucketInfo> {
    if bucket == BUILTIN_BUCKET {
        return Some(BucketInfo { created_ms: 0, deleting: false });
    }
    ctx.shard.store.borrow().buckets.get(bucket).copied()
}

pub fn json(status: u16, v: &serde_json::Value) -> Response {
    Response::new(status)
        .header(h::CONTENT_TYPE, "application/json")
        .with_body(serde_json::to_vec(v).expect("serializable"))
}

pub async fn list(ctx: &Rc<Ctx>, bucket: &str, t: &Target<'_>) -> Response {
    listing(ctx, bucket, t).await.map(|body| json(200, &body)).unwrap_or_else(Response::from)
}

/// A bucket's stream listing as `GET /{bucket}/streams` answers it (the
/// query `t` pages and filters it).
pub async fn listing(ctx: &Rc<Ctx>, bucket: &str, t: &Target<'_>) -> Result<serde_json::Value, Error> {
    let limit = match t.param("limit").map(parse_uint) {
        None => MAX_LISTED_STREAMS,
        Some(Some(n)) if (1..=MAX_LISTED_STREAMS as u64).contains(&n) => n as usize,
        Some(_) => return Err(Error::Invalid("limit must be an integer in 1..=1000")),
    };
    if known(ctx, bucket).is_none() {
        return Err(Error::NoBucket);
    }
    let prefix = t.param("prefix").unwrap_or("").to_string();
    let after = t.param("after").unwrap_or("").to_string();
    let mut all: Vec<Listed> = Vec::new();
    let reps = ctx
        .ask_all(|| BucketReq::List {
            bucket: bucket.into(),
            prefix: prefix.clone(),
            after: after.clone(),
            limit: limit + 1,
        })
        .await;
    for rep in reps {
        match rep {
            BucketRep::Listing(mut l) => all.append(&mut l),
            _ => return Err(Error::Unavailable("a shard's log is unavailable; restart required")),
        }
    }
    all.sort_by(|a, b| a.stream_id.cmp(&b.stream_id));
    let has_more = all.len() > limit;
    all.truncate(limit);
    let streams: Vec<serde_json::Value> = all
        .iter()
        .map(|s| {
            serde_json::json!({
                "stream_id": s.stream_id,
                "status": if s.closed { "Closed" } else { "Open" },
                "content_type": s.content_type,
                "tail_offset": s.tail,
                "created_at_ms": s.created_ms,
                "last_write_at_ms": s.last_write_ms,
            })
        })
        .collect();
    let mut body = serde_json::json!({
        "bucket_id": bucket,
        "stream_count": streams.len(),
        "streams": streams,
        "has_more": has_more,
        "next_cursor": if has_more { all.last().map(|s| s.stream_id.clone()) } else { None },
    });
    if !prefix.is_empty() {
        body["prefix"] = serde_json::Value::String(prefix);
    }
    Ok(body)
}

/// [`serve_request`] as the shard's [`Ctx`] calls it for a request to itself.
pub fn serve_here(ctx: &Rc<Ctx>, req: BucketReq) -> Pin<Box<dyn Future<Output = BucketRep> + '_>> {
    Box::pin(serve_request(ctx, req))
}

/// Serves a bucket request on this shard (from a peer or from itself).
pub async fn serve_request(ctx: &Rc<Ctx>, req: BucketReq) -> BucketRep {
    let now = ctx.now_ms();
    match req {
        BucketReq::Subs(req) => crate::handlers::subs::messages::serve(ctx, req).await,
        BucketReq::Create { bucket } => {
            if bucket == BUILTIN_BUCKET || ctx.shard.store.borrow().home_buckets.contains_key(&bucket) {
                return BucketRep::Done(Err(Error::Conflict("bucket already exists")));
            }
            // Reserve the name before the log write so a concurrent create sees it.
            ctx.shard.store.borrow_mut().home_buckets.insert(bucket.clone(), now);
            if let Err(e) = ctx.shard.log_meta(Record::BucketCreate { bucket: bucket.clone(), at_ms: now }).await {
                ctx.shard.store.borrow_mut().home_buckets.remove(&bucket);
                return BucketRep::Done(Err(e));
            }
            Box::pin(ctx.ask_all(|| BucketReq::Added { bucket: bucket.clone(), created_ms: now })).await;
            BucketRep::Done(Ok(()))
        }
        BucketReq::Delete { bucket } => {
            if bucket == BUILTIN_BUCKET {
                return BucketRep::Done(Err(Error::Conflict("the built-in bucket cannot be deleted")));
            }
            if !ctx.shard.store.borrow().home_buckets.contains_key(&bucket) {
                return BucketRep::Done(Err(Error::NoBucket));
            }
            let mut streams = 0;
            for rep in Box::pin(ctx.ask_all(|| BucketReq::PrepareDelete { bucket: bucket.clone() })).await {
                streams += match rep {
                    BucketRep::Count(n) => n,
                    _ => 1,
                };
            }
            let outcome = if streams > 0 {
                Err(Error::Conflict("bucket is not empty"))
            } else {
                ctx.shard.log_meta(Record::BucketDelete { bucket: bucket.clone() }).await
            };
            let commit = outcome.is_ok();
            if commit {
                ctx.shard.store.borrow_mut().home_buckets.remove(&bucket);
            }
            Box::pin(ctx.ask_all(|| BucketReq::FinishDelete { bucket: bucket.clone(), commit })).await;
            BucketRep::Done(outcome)
        }
        BucketReq::Added { bucket, created_ms } => {
            ctx.shard.store.borrow_mut().buckets.insert(bucket, BucketInfo { created_ms, deleting: false });
            BucketRep::Done(Ok(()))
        }
        BucketReq::PrepareDelete { bucket } => {
            let mut st = ctx.shard.store.borrow_mut();
            if let Some(b) = st.buckets.get_mut(&bucket) {
                b.deleting = true;
            }
            BucketRep::Count(st.count_in_bucket(&bucket, now))
        }
        BucketReq::FinishDelete { bucket, commit } => {
            let mut st = ctx.shard.store.borrow_mut();
            if commit {
                st.buckets.remove(&bucket);
            } else if let Some(b) = st.buckets.get_mut(&bucket) {
                b.deleting = false;
            }
            BucketRep::Done(Ok(()))
        }
        BucketReq::Count { bucket } => BucketRep::Count(ctx.shard.store.borrow().count_in_bucket(&bucket, now)),
        BucketReq::ForkGrant { key, offset, sub } => {
            BucketRep::Fork(ctx.shard.grant_fork(&key, offset, sub, now).await)
        }
        BucketReq::ForkRelease { handle } => {
            ctx.shard.release_fork(handle).await;
            BucketRep::Done(Ok(()))
        }
        BucketReq::ForkRef { handle } => {
            ctx.shard.add_fork_ref(handle);
            BucketRep::Done(Ok(()))
        }
        BucketReq::Metrics => {
            let connections = ctx.connections.get();
            let snap = crate::metrics::snapshot(ctx.id, &ctx.metrics, &ctx.shard, connections, ctx.reload.generation());
            BucketRep::Metrics(Box::new(snap))
        }
        BucketReq::List { bucket, prefix, after, limit } => {
            // A listing shows only durable creates and deletes.
            let Ok(durable) = ctx.shard.listing_mark().await else {
                return BucketRep::Done(Err(Error::Unavailable("a shard's log is unavailable; restart required")));
            };
            let st = ctx.shard.store.borrow();
            let out = st
                .bucket_page(&bucket, &prefix, &after)
                .filter(|(_, e)| e.listed(durable, now))
                .take(limit)
                .map(|(k, e)| Listed {
                    stream_id: k.stream().to_string(),
                    closed: e.state.visible.closed,
                    content_type: e.state.content_type.to_string(),
                    tail: e.state.visible.tail,
                    created_ms: e.state.created_ms,
                    last_write_ms: e.state.last_write_ms,
                })
                .collect();
            BucketRep::Listing(out)
        }
    }
}
