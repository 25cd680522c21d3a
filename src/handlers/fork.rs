//! Fork creation (`Stream-Forked-From`): a reference on the source stream,
//! its inherited message index and the materialized sub-offset prefix.

use super::Route;
use crate::mesh::{BucketRep, BucketReq};
use crate::shard::Ctx;
use sluice::http::headers as h;
use sluice::http::url::parse_target;
use sluice::http::{Head, Response};
use sluice_shards::core::create::CreateInput;
use sluice_shards::core::media_type;
use sluice_shards::ids::stream_shard;
use sluice_shards::log::ForkRecord;
use sluice_shards::offset::Offset;
use sluice_shards::store::ForkPlan;
use std::rc::Rc;

/// Resolves fork headers: asks the source's shard for a reference, the
/// inherited index and the sub-offset prefix, and fills in inherited settings.
pub async fn fork_plan(
    ctx: &Rc<Ctx>,
    head: &Head,
    input: &mut CreateInput,
    explicit_type: bool,
) -> Result<Option<ForkPlan>, Response> {
    let from = head.header(h::STREAM_FORKED_FROM);
    let sub = match head.header(h::STREAM_FORK_SUB_OFFSET) {
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
    let offset = match head.header(h::STREAM_FORK_OFFSET) {
        None => None,
        Some(v) => Some(Offset::parse(v).ok_or_else(|| Response::error(400, "malformed Stream-Fork-Offset"))?.0),
    };
    let sub = sub.unwrap_or(0);
    if sub > 0 && offset.is_none() {
        return Err(Response::error(400, "Stream-Fork-Sub-Offset needs Stream-Fork-Offset"));
    }
    let target = parse_target(from).map_err(|e| Response::error(400, e.reason()))?;
    let Route::Stream(source, sub_path) = super::route(head, &target) else {
        return Err(Response::error(400, "Stream-Forked-From must be a stream path"));
    };
    if !sub_path.is_empty() {
        return Err(Response::error(400, "Stream-Forked-From must be a stream path"));
    }
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
