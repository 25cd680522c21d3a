//! Fork creation (`Stream-Forked-From`): a reference on the source stream,
//! the ancestors' stream files the fork reads, and the copied part of a
//! message the fork point falls inside.

use crate::ctx::{Ctx, PEER_GONE};
use crate::mesh::{BucketRep, BucketReq};
use crate::route::{route, Route};
use sluice::http::headers as h;
use sluice::http::url::parse_target;
use sluice::http::Head;
use sluice_shards::core::create::CreateInput;
use sluice_shards::core::int::parse_canonical_uint;
use sluice_shards::core::{same_media_type, Error};
use sluice_shards::ids::stream_shard;
use sluice_shards::offset::Offset;
use sluice_shards::store::ForkPlan;
use std::rc::Rc;

/// Resolves fork headers: asks the source's shard for a reference, what the
/// fork inherits and the copied prefix, and fills in inherited settings.
pub async fn fork_plan(
    ctx: &Rc<Ctx>,
    head: &Head,
    input: &mut CreateInput,
    explicit_type: bool,
) -> Result<Option<ForkPlan>, Error> {
    let bad = |why| Err(Error::Invalid(why));
    let from = head.header(h::STREAM_FORKED_FROM);
    let sub = match head.header(h::STREAM_FORK_SUB_OFFSET) {
        None => None,
        Some(v) => match parse_canonical_uint(v) {
            Some(n) => Some(n),
            None => return bad("Stream-Fork-Sub-Offset must be a non-negative integer"),
        },
    };
    let Some(from) = from else {
        return match sub {
            Some(_) => bad("Stream-Fork-Sub-Offset needs Stream-Forked-From"),
            None => Ok(None),
        };
    };
    let offset = match head.header(h::STREAM_FORK_OFFSET) {
        None => None,
        Some(v) => Some(Offset::parse(v).ok_or(Error::Invalid("malformed Stream-Fork-Offset"))?.0),
    };
    let sub = sub.unwrap_or(0);
    if sub > 0 && offset.is_none() {
        return bad("Stream-Fork-Sub-Offset needs Stream-Fork-Offset");
    }
    let target = parse_target(from)?;
    let Route::Stream(source, sub_path) = route(head, &target) else {
        return bad("Stream-Forked-From must be a stream path");
    };
    if !sub_path.is_empty() {
        return bad("Stream-Forked-From must be a stream path");
    }
    let owner = stream_shard(source.bucket(), source.stream(), ctx.shards);
    let grant = match ctx.ask(owner, BucketReq::ForkGrant { key: source.clone(), offset, sub }).await {
        BucketRep::Fork(grant) => grant?,
        // The source's shard is stopping.
        _ => return Err(PEER_GONE),
    };
    let release = || ctx.ask(owner, BucketReq::ForkRelease { handle: grant.parent_handle });
    if explicit_type && !same_media_type(&input.content_type, &grant.content_type) {
        release().await;
        return Err(Error::Conflict("fork Content-Type differs from the source"));
    }
    input.content_type = grant.content_type.clone();
    if input.ttl_secs.is_none() && input.expires_at_ms.is_none() {
        input.ttl_secs = grant.ttl_secs;
        input.expires_at_ms = grant.expires_at_ms;
    }
    Ok(Some(grant.plan(owner as u32, from.to_string(), offset, sub)))
}
