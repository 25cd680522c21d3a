//! Subscription messages between shards: index changes (to every shard),
//! appends that match a subscription (to its owner), and wake events
//! written into a pull-wake stream (to the stream's owner).

use super::wake;
use crate::ctx::Ctx;
use crate::mesh::BucketRep;
use crate::subscriptions::SubsReq;
use sluice_shards::core::append::AppendInput;
use sluice_shards::core::Error;
use sluice_shards::ids::BUILTIN_BUCKET;
use sluice_shards::store::StreamKey;
use std::rc::Rc;

/// Serves a subscription message from a peer shard (or from this one).
pub async fn serve(ctx: &Rc<Ctx>, req: SubsReq) -> BucketRep {
    match req {
        SubsReq::Index { id, owner, patterns, add } => {
            let mut trie = ctx.subs.trie.borrow_mut();
            for p in &patterns {
                if add {
                    trie.insert(p, &id, owner);
                } else {
                    trie.remove(p, &id);
                }
            }
            BucketRep::Done(Ok(()))
        }
        SubsReq::Appended { ids, path, tail } => {
            for id in ids {
                let linked = ctx.subs.owned.borrow_mut().get_mut(&id).is_some_and(|s| s.appended(&path, tail));
                if linked {
                    wake::maybe_wake(ctx, &id);
                }
            }
            BucketRep::Done(Ok(()))
        }
        SubsReq::Deleted { ids, path } => {
            for id in ids {
                if let Some(sub) = ctx.subs.owned.borrow_mut().get_mut(&id) {
                    sub.stream_deleted(&path);
                }
            }
            BucketRep::Done(Ok(()))
        }
        SubsReq::WakeEvent { stream, event } => {
            let key = StreamKey::boxed(BUILTIN_BUCKET, &stream);
            let input = AppendInput {
                content_type: Some("application/json"),
                body: &event,
                close: false,
                stream_seq: None,
                producer: None,
                record_match: None,
            };
            let now = ctx.now_ms();
            if ctx.shard.store.borrow_mut().live(&key, now).is_none() {
                return BucketRep::Done(Err(Error::NoStream));
            }
            match ctx.shard.append(&key, &input, now).await {
                Ok(out) => {
                    wake::notify_append(ctx, &key, out.next_offset);
                    BucketRep::Done(Ok(()))
                }
                Err(e) => BucketRep::Done(Err(e)),
            }
        }
    }
}
